"""The CUDA path is optional: fastkds imports and runs without numba.cuda
being touched, and without a GPU the CUDA entry points fail with a clear
message. Runs everywhere (subprocesses, so the simulator setting of the
parent does not leak in)."""

import os
import subprocess
import sys

import pytest


def run_python(code, **env):
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300)


def test_import_fastkds_does_not_import_numba_cuda():
    res = run_python(
        "import sys, fastkds\n"
        "bad = sorted(k for k in sys.modules if k.startswith(('numba.cuda', 'numba_cuda', 'fastkds.gpu')))\n"
        "print(bad)\n"
        "assert not bad, bad\n"
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_without_gpu_the_error_names_the_cause():
    res = run_python(
        "from numba import cuda\n"
        "import fastkds.gpu as g\n"
        "if cuda.is_available():\n"
        "    print('HAS_GPU')\n"
        "else:\n"
        "    assert not g.cuda_available()\n"
        "    try:\n"
        "        g.CudaPreparedDictionary([[1.0, 0.0]], 1.0, 3, 'float64')\n"
        "    except RuntimeError as e:\n"
        "        print(e)\n"
        "        assert 'numba.cuda reports no CUDA driver/GPU' in str(e)\n"
        "    else:\n"
        "        raise SystemExit('no error')\n"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    if "HAS_GPU" in res.stdout:
        pytest.skip("a GPU is present: nothing to refuse")

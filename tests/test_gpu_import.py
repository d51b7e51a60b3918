"""The CUDA path is optional: fastkds imports and runs without numba.cuda
being touched, and without a GPU the CUDA entry points fail with a clear
message. Runs everywhere (subprocesses, so the simulator setting of the
parent does not leak in)."""

import os
import subprocess
import sys

import pytest


def _cuda_usable():
    from fastkds import gpu

    return gpu.cuda_available()


def run_python(code, **env):
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300)


def test_import_fastkds_does_not_import_numba_cuda():
    res = run_python(
        "import sys, fastkds\n"
        "bad = sorted(k for k in sys.modules if k.startswith(('numba.cuda', 'numba_cuda', 'fastkds.gpu', 'fastkds._cuda_kernels')))\n"
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


def test_device_argument_validated():
    import fastkds

    Y, _ = fastkds.make_moons(50, random_state=0)
    with pytest.raises(ValueError, match="device must be one of"):
        fastkds.KDS(4, device="gpu", max_epochs=1).fit(Y)
    with pytest.raises(ValueError, match="device must be one of"):
        fastkds.sparse_encode(Y, Y[:4], device=None)


@pytest.mark.skipif(_cuda_usable(), reason="a GPU (or the simulator) is available here")
def test_device_cuda_without_gpu_names_the_cause_and_auto_falls_back():
    import fastkds

    Y, _ = fastkds.make_moons(50, random_state=0)
    with pytest.raises(RuntimeError, match="no CUDA driver/GPU"):
        fastkds.KDS(4, device="cuda", max_epochs=1).fit(Y)
    with pytest.raises(RuntimeError, match="no CUDA driver/GPU"):  # either encoder
        fastkds.KDS(4, device="cuda", encoder="active-set", max_epochs=1).fit(Y)
    with pytest.warns(RuntimeWarning, match="running on the CPU") as record:
        model = fastkds.KDS(4, device="auto", max_epochs=1).fit(Y)
    assert model.transform(Y).shape == (50, 4)
    # a fastkds warning class, located at the caller's line
    from fastkds.exceptions import DeviceFallbackWarning

    (w,) = [w for w in record if issubclass(w.category, DeviceFallbackWarning)]
    assert w.filename == __file__


def test_importing_the_gpu_module_leaves_numpy_alone():
    # A library must not change NumPy for its users: without np.row_stack
    # (NumPy >= 2.5) fastkds.gpu neither adds it back nor breaks on import;
    # with numba-cuda <= 0.30 it reports the clash as the reason CUDA is
    # unusable, instead of failing inside the first kernel compile.
    res = run_python(
        "import numpy as np\n"
        "if hasattr(np, 'row_stack'):  # as NumPy 2.5, which removed it\n"
        "    del np.row_stack\n"
        "    np.__all__ = [name for name in np.__all__ if name != 'row_stack']\n"
        "import fastkds.gpu as g\n"
        "assert not hasattr(np, 'row_stack'), 'fastkds.gpu patched numpy'\n"
        "from importlib.metadata import version, PackageNotFoundError\n"
        "try:\n"
        "    old = tuple(int(p) for p in version('numba-cuda').split('.')[:2]) <= (0, 30)\n"
        "except PackageNotFoundError:\n"
        "    old = False\n"
        "clash = g.numpy_incompatibility()\n"
        "assert (clash is not None) == old, clash\n"
        "if old:\n"
        "    assert 'numpy<2.5' in clash and not g.cuda_available()\n"
        "    try:\n"
        "        g.require_cuda()\n"
        "    except RuntimeError as exc:\n"
        "        assert 'np.row_stack' in str(exc)\n"
        "    else:\n"
        "        raise AssertionError('require_cuda passed')\n"
        "print('OK')\n"
    )
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr

"""Process-level reliability: the command line's errors, its output files,
and concurrent calls under Numba's workqueue threading layer.

The command-line tests run :func:`fastkds.cli.main` in-process, except where
the process itself is under test (Ctrl-C, the threading layer)."""

import os
import subprocess
import sys
import textwrap

import pytest

import fastkds

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


# the fastkds under test, whichever checkout that is
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fastkds.__file__)))


def _run_python(code, cwd, env=None, timeout=240):
    """Run ``code`` in a fresh interpreter that imports the fastkds under test."""
    path = os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
    full_env = dict(os.environ, PYTHONPATH=path, **(env or {}))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd, capture_output=True, text=True, env=full_env, timeout=timeout,
    )


# -- threading layer ---------------------------------------------------------------


_CONCURRENT_PREDICT = """
    import threading, warnings
    import numba, numpy as np
    from fastkds import KDSClustering, make_moons

    warnings.simplefilter("ignore")
    Y, _ = make_moons(2000, random_state=0)
    model = KDSClustering(2, n_atoms=12, n_iter=5, max_epochs=2, random_state=0).fit(Y)
    labels = model.predict(Y)
    codes = model.kds_.transform(Y).toarray()
    bad = []

    def work():
        for _ in range(3):
            if not np.array_equal(model.predict(Y), labels):
                bad.append("predict")
            if not np.array_equal(model.kds_.transform(Y).toarray(), codes):
                bad.append("transform")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(numba.threading_layer(), len(bad))
"""


def test_concurrent_predict_under_workqueue_layer_does_not_abort(tmp_path):
    """docs/guarantees.md, Thread safety and interruption: under the workqueue
    layer, concurrent calls run one at a time and give the serial result."""
    proc = _run_python(_CONCURRENT_PREDICT, tmp_path, env={"NUMBA_THREADING_LAYER": "workqueue"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["workqueue", "0"]

"""Process-level reliability: the command line's errors, its output files,
and concurrent calls under Numba's workqueue threading layer.

The command-line tests run :func:`fastkds.cli.main` in-process, except where
the process itself is under test (Ctrl-C, the threading layer)."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import fastkds
from fastkds import estimators, gpu
from fastkds.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


# the fastkds under test, whichever checkout that is
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fastkds.__file__)))


def _run_python(code, cwd, env=None, timeout=240):
    """Run ``code`` in a fresh interpreter that imports the fastkds under test."""
    path = os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
    full_env = dict(os.environ, PYTHONPATH=path, **(env or {}))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
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


# -- command line ---------------------------------------------------------------------

CLUSTER_OPTS = ["--k", "2", "--atoms", "8", "--epochs", "3", "--quiet"]


@pytest.fixture
def points(tmp_path):
    """A small two-blob data file."""
    Y, _ = make_blobs(200, centers=[[0.0, 0.0], [10.0, 10.0]], cluster_std=0.5, random_state=0)
    path = tmp_path / "points.npy"
    np.save(path, Y)
    return path


def _one_line_error(argv):
    """Run the CLI on ``argv``, expecting its one-line error; return the line.

    Warnings are errors here: an error must not come with a warning's lines.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SystemExit) as excinfo:
            main(argv)
    message = excinfo.value.code
    # SystemExit with a string prints it to stderr and exits with status 1
    assert isinstance(message, str), message
    assert message.startswith("fastkds: error: ") and "\n" not in message, message
    return message


@pytest.fixture
def fit_must_not_run(monkeypatch):
    def fit(self, X, y=None):
        raise AssertionError("the fit ran before the output path was checked")

    monkeypatch.setattr(estimators.KDSClustering, "fit", fit)


@pytest.mark.parametrize(
    "name, write, expected",
    [
        ("zero.npy", lambda p: p.write_bytes(b""), "cannot read"),
        ("rows.npy", lambda p: np.save(p, np.empty((0, 3))), "no data"),
        ("empty.csv", lambda p: p.write_text(""), "no data"),
    ],
    ids=["zero-byte-npy", "zero-row-npy", "empty-csv"],
)
def test_cluster_empty_input_is_one_line(tmp_path, name, write, expected):
    """docs/guarantees.md, Command line: an empty input file is a one-line error."""
    data = tmp_path / name
    write(data)
    message = _one_line_error(["cluster", str(data), *CLUSTER_OPTS, "-o", str(tmp_path / "labels.npy")])
    assert expected in message and name in message
    assert not (tmp_path / "labels.npy").exists()


@pytest.mark.parametrize(
    "output, expected",
    [
        ("missing/labels.npy", "does not exist"),
        ("folder", "is a folder"),
        ("points.npy/labels.npy", "not a folder"),
    ],
    ids=["missing-folder", "a-folder", "below-a-file"],
)
def test_cluster_checks_the_output_path_before_the_fit(tmp_path, points, fit_must_not_run, output, expected):
    """docs/guarantees.md, Command line: a bad output path is refused before the fit."""
    (tmp_path / "folder").mkdir()
    message = _one_line_error(["cluster", str(points), *CLUSTER_OPTS, "-o", str(tmp_path / output)])
    assert expected in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "points.npy"]


@pytest.mark.parametrize("command", ["demo", "cluster"])
def test_device_cuda_without_a_gpu_is_one_line(tmp_path, points, monkeypatch, fit_must_not_run, command):
    """docs/guarantees.md, Command line: ``--device cuda`` without a usable GPU
    is a one-line error, given before any work."""

    def no_gpu():
        raise RuntimeError("numba.cuda reports no CUDA driver/GPU: no driver here")

    monkeypatch.setattr(gpu, "require_cuda", no_gpu)
    argv = (
        ["demo", "--n", "200", "--atoms", "8", "--epochs", "2", "--quiet"]
        if command == "demo"
        else ["cluster", str(points), *CLUSTER_OPTS, "-o", str(tmp_path / "labels.npy")]
    )
    message = _one_line_error([*argv, "--device", "cuda"])
    assert "--device cuda" in message and "no CUDA driver/GPU" in message


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--n", "0"], "--n must be >= 1, got 0"),
        (["--n", "-5"], "--n must be >= 1, got -5"),
        (["--n", "200", "--atoms", "0"], "--atoms must be >= 1, got 0"),
    ],
    ids=["n-zero", "n-negative", "atoms-zero"],
)
def test_demo_bad_sizes_are_one_line(argv, expected):
    """docs/guarantees.md, Command line: bad option values are one-line errors."""
    assert expected in _one_line_error(["demo", *argv, "--epochs", "2", "--quiet"])


def test_cluster_output_has_the_usual_permissions(tmp_path, points):
    """docs/guarantees.md, Command line: the labels file is created with mode
    0o666 less the umask, as any new file (0o644 under umask 022)."""
    previous = os.umask(0o022)
    try:
        assert main(["cluster", str(points), *CLUSTER_OPTS, "-o", str(tmp_path / "labels.npy")]) == 0
    finally:
        os.umask(previous)
    assert os.stat(tmp_path / "labels.npy").st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.npy", "points.npy"]


_INTERRUPTED_CLUSTER = """
    import os, signal, sys, time
    from fastkds import estimators
    from fastkds.cli import main

    def fit(self, X, y=None):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during the fit
        time.sleep(120)  # interrupted by the signal at once

    estimators.KDSClustering.fit = fit
    # Ctrl-C reaches the process as at a terminal, even where the test runner
    # was started in the background (which starts children with SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main(["cluster", "points.npy", "--k", "2", "--quiet", "-o", "labels.npy"]))
"""


def test_ctrl_c_is_one_line_and_exit_130(tmp_path, points):
    """docs/guarantees.md, Command line: Ctrl-C prints one line and exits
    with status 130, leaving no output file."""
    proc = _run_python(_INTERRUPTED_CLUSTER, tmp_path)
    assert (proc.returncode, proc.stderr) == (130, "fastkds: interrupted\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["points.npy"]

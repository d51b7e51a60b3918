"""Tests of the ``fastkds`` command line (:mod:`fastkds.cli`), run in-process
through :func:`fastkds.cli.main`, plus one run of the installed console script."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from fastkds import clustering_accuracy
from fastkds.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

CLUSTER_OPTS = ["--k", "2", "--atoms", "12", "--quiet"]


@pytest.fixture(scope="module")
def blobs():
    """Two far-apart blobs: any working clustering gets them exactly right."""
    return make_blobs(300, centers=[[0.0, 0.0], [10.0, 10.0]], cluster_std=0.5, random_state=0)


def _exit_message(excinfo):
    """The message a SystemExit carries (argparse exits with an int code instead)."""
    return str(excinfo.value.code)


# -- demo -------------------------------------------------------------------------


def test_demo(capsys):
    assert main(["demo", "--n", "3000", "--quiet", "--epochs", "30"]) == 0
    out, err = capsys.readouterr()
    match = re.search(r"accuracy: ([0-9.]+)", out)
    assert match, out
    assert float(match.group(1)) >= 0.99
    assert "total fit" in out
    # --quiet: no header line, no progress bar.
    assert "fastkds demo:" not in out
    assert "KDS epochs" not in err


_DEMO_FIT_LOADS = """
from fastkds import _kernels, _vote_kernels
from fastkds.cli import main
from fastkds.estimators import KDSClustering

kernels = [f for mod in (_kernels, _vote_kernels) for f in vars(mod).values() if hasattr(f, "signatures")]
fit = KDSClustering.fit
reached = []

def recording(self, X, *args, **kwargs):
    before = {f for f in kernels if f.signatures}
    out = fit(self, X, *args, **kwargs)
    reached.append(sorted(f.py_func.__name__ for f in kernels if f.signatures and f not in before))
    return out

KDSClustering.fit = recording
assert main(["demo", "--n", "100000", "--quiet", "--epochs", "2"]) == 0
print("loaded in the timed fit:", reached[-1])
"""


def test_demo_stage_times_include_no_compiling():
    # in a fresh process, so no kernel is loaded yet: each gets its first
    # signature (compiled, or loaded from the cache) when first called, which
    # must be the compile step, not the timed fit (100,000 points: the
    # warm-start subsamples' sampler too)
    out = subprocess.run([sys.executable, "-c", _DEMO_FIT_LOADS], capture_output=True, text=True, check=True).stdout
    assert "loaded in the timed fit: []" in out, out


def test_demo_min_accuracy_sets_exit_status(capsys):
    assert main(["demo", "--n", "300", "--quiet", "--epochs", "2", "--min-accuracy", "1.5"]) == 1
    assert "accuracy:" in capsys.readouterr().out


# -- cluster ----------------------------------------------------------------------


def _check_labels(path, truth):
    labels = np.load(path, allow_pickle=False)
    assert labels.shape == (len(truth),)
    assert np.issubdtype(labels.dtype, np.integer)
    assert set(np.unique(labels)) == {0, 1}
    assert clustering_accuracy(truth, labels) == 1.0


def test_cluster_npy(tmp_path, blobs, capsys):
    Y, truth = blobs
    data = tmp_path / "points.npy"
    np.save(data, Y)
    out_file = tmp_path / "labels.npy"
    assert main(["cluster", str(data), *CLUSTER_OPTS, "-o", str(out_file)]) == 0
    _check_labels(out_file, truth)
    assert capsys.readouterr().out == ""  # --quiet
    # The input is untouched and no temporary file is left behind.
    assert np.array_equal(np.load(data), Y)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.npy", "points.npy"]


def test_cluster_csv(tmp_path, blobs):
    Y, truth = blobs
    data = tmp_path / "points.csv"
    np.savetxt(data, Y, delimiter=",")
    out_file = tmp_path / "labels.npy"
    assert main(["cluster", str(data), *CLUSTER_OPTS, "-o", str(out_file)]) == 0
    _check_labels(out_file, truth)


def test_cluster_overwrites_existing_output(tmp_path, blobs):
    Y, truth = blobs
    data = tmp_path / "points.npy"
    np.save(data, Y)
    out_file = tmp_path / "labels.npy"
    np.save(out_file, np.arange(3))
    assert main(["cluster", str(data), *CLUSTER_OPTS, "-o", str(out_file)]) == 0
    _check_labels(out_file, truth)


def test_cluster_reports_when_not_quiet(tmp_path, blobs, capsys):
    Y, _ = blobs
    data = tmp_path / "points.npy"
    np.save(data, Y)
    out_file = tmp_path / "labels.npy"
    assert main(["cluster", str(data), "--k", "2", "--atoms", "12", "--epochs", "5", "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "clustered 300 points into 2 clusters" in out
    assert str(out_file) in out


@pytest.mark.parametrize("spelling", ["same", "dotdot"])
def test_cluster_refuses_to_overwrite_input(tmp_path, blobs, spelling):
    Y, _ = blobs
    data = tmp_path / "points.npy"
    np.save(data, Y)
    (tmp_path / "sub").mkdir()
    output = str(data) if spelling == "same" else str(tmp_path / "sub" / ".." / "points.npy")
    with pytest.raises(SystemExit) as excinfo:
        main(["cluster", str(data), *CLUSTER_OPTS, "-o", output])
    assert "overwrite" in _exit_message(excinfo)
    assert np.array_equal(np.load(data), Y)


def test_cluster_missing_input(tmp_path):
    missing = tmp_path / "nope.npy"
    out_file = tmp_path / "labels.npy"
    with pytest.raises(SystemExit) as excinfo:
        main(["cluster", str(missing), *CLUSTER_OPTS, "-o", str(out_file)])
    message = _exit_message(excinfo)
    assert "not found" in message and "nope.npy" in message
    assert not out_file.exists()


def test_cluster_unknown_extension(tmp_path):
    data = tmp_path / "points.json"
    data.write_text("[]")
    with pytest.raises(SystemExit) as excinfo:
        main(["cluster", str(data), *CLUSTER_OPTS, "-o", str(tmp_path / "labels.npy")])
    assert ".npy, .csv, .tsv or .txt" in _exit_message(excinfo)


def test_cluster_invalid_data_is_an_error_message(tmp_path):
    data = tmp_path / "points.npy"
    np.save(data, np.array([[0.0, np.nan], [1.0, 2.0]] * 20))
    out_file = tmp_path / "labels.npy"
    with pytest.raises(SystemExit) as excinfo:
        main(["cluster", str(data), *CLUSTER_OPTS, "-o", str(out_file)])
    assert "NaN" in _exit_message(excinfo)
    assert not out_file.exists()


@pytest.mark.parametrize(
    "name, content",
    [("points.csv", b"1.0,2.0\nfoo,3.0\n"), ("points.npy", b"\x93NUMPY garbage, not an array")],
    ids=["malformed-csv", "corrupt-npy"],
)
def test_cluster_unreadable_input_is_an_error_message(tmp_path, name, content):
    data = tmp_path / name
    data.write_bytes(content)
    with pytest.raises(SystemExit) as excinfo:
        main(["cluster", str(data), *CLUSTER_OPTS, "-o", str(tmp_path / "labels.npy")])
    assert excinfo.value.code not in (0, None)


def test_cluster_bad_k_is_a_usage_error(tmp_path, blobs):
    data = tmp_path / "points.npy"
    np.save(data, blobs[0])
    with pytest.raises(SystemExit) as excinfo:
        main(["cluster", str(data), "--k", "two", "--quiet", "-o", str(tmp_path / "labels.npy")])
    assert excinfo.value.code not in (0, None)


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["cluster", "x.npy"], ["demo", "--n", "many"]],
    ids=["no-command", "unknown-command", "no-output", "bad-int"],
)
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(argv)
    assert excinfo.value.code == 2
    assert "usage: fastkds" in capsys.readouterr().err


# -- the installed console script ----------------------------------------------------


def _console_script():
    found = shutil.which("fastkds")
    if found:
        return found
    beside = Path(sys.executable).parent / "fastkds"
    return str(beside) if beside.exists() else None


def test_console_script_help():
    script = _console_script()
    if script is None:
        pytest.skip("the fastkds console script is not installed")
    result = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage: fastkds" in result.stdout
    assert "demo" in result.stdout and "cluster" in result.stdout


def test_module_entry_point_help():
    result = subprocess.run(
        [sys.executable, "-m", "fastkds.cli", "cluster", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "--output" in result.stdout

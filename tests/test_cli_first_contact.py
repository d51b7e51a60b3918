"""The command line a command-line user expects (issue 24, item 4):
``--version`` and ``python -m fastkds``, CSV/TSV input with or without a
header, the output format named by the extension and ``-`` for stdout, the
embedding, codes and model as extra outputs, ``-q``/``-v``, progress as a
bar on a terminal and plain lines elsewhere, and the notice before the
kernels compile.

The command line runs in-process through :func:`fastkds.cli.main`, except
where the process is under test (``python -m fastkds``, stdout as a pipe,
a cold kernel cache)."""

import io
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse
from sklearn.datasets import make_blobs

import fastkds
from fastkds import cli, clustering_accuracy, estimators
from fastkds.cli import main

# the fastkds under test, whichever checkout that is
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fastkds.__file__)))

# 300 points in two far-apart blobs: a fit converges in a few epochs (7)
FAST = ["--k", "2", "--atoms", "12", "--epochs", "30"]


def _run_python(args, cwd, env=None):
    """Run ``python *args`` in a fresh interpreter that imports the fastkds under test."""
    path = os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ, PYTHONPATH=path, **(env or {})),
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The blobs as .npy, and the labels the command line writes for them."""
    folder = tmp_path_factory.mktemp("data")
    Y, truth = make_blobs(300, centers=[[0.0, 0.0], [10.0, 10.0]], cluster_std=0.5, random_state=0)
    np.save(folder / "points.npy", Y)
    assert main(["cluster", str(folder / "points.npy"), *FAST, "-q", "-o", str(folder / "labels.npy")]) == 0
    labels = np.load(folder / "labels.npy")
    assert clustering_accuracy(truth, labels) == 1.0
    return folder, Y, labels


def _one_line_error(argv):
    with pytest.raises(SystemExit) as excinfo:
        main(argv)
    message = excinfo.value.code
    assert isinstance(message, str) and message.startswith("fastkds: error: ") and "\n" not in message
    return message


# -- version and python -m fastkds --------------------------------------------------


def test_python_m_fastkds_version(tmp_path):
    proc = _run_python(["-m", "fastkds", "--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"fastkds {fastkds.__version__} (numba ")


# -- input formats ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, delimiter, header",
    [
        ("points.csv", ",", ""),
        ("points.csv", ",", "x,y\n"),
        ("points.csv", ",", '"x","y"\n'),
        ("points.tsv", "\t", ""),
        ("points.tsv", "\t", "x\ty\n"),
        ("points.txt", " ", "# two blobs\n\nx y\n"),
    ],
    ids=["csv", "csv-header", "csv-quoted-header", "tsv", "tsv-header", "txt-comment-header"],
)
def test_text_input_with_or_without_header(tmp_path, data, capsys, name, delimiter, header):
    """Every text table gives the labels the .npy file gives; a header line
    is skipped, and the stage line says so."""
    folder, Y, labels = data
    path = tmp_path / name
    with open(path, "w") as f:
        f.write(header)
        np.savetxt(f, Y, delimiter=delimiter, fmt="%.17g")
    assert main(["cluster", str(path), *FAST, "-o", str(tmp_path / "labels.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "labels.npy"), labels)
    err = capsys.readouterr().err
    assert f"read 300 points x 2 features from {path}" in err
    assert ("header line skipped" in err) == bool(header)


def test_spreadsheet_csv_with_byte_order_mark(tmp_path, data):
    """A CSV saved by a spreadsheet may start with a UTF-8 byte-order mark:
    its first row is data, not a header to skip."""
    folder, Y, labels = data
    path = tmp_path / "points.csv"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(f"{a:.17g},{b:.17g}" for a, b in Y).encode())
    assert main(["cluster", str(path), *FAST, "-q", "-o", str(tmp_path / "labels.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "labels.npy"), labels)


def test_header_option_overrides_detection(tmp_path, data):
    """``--no-header`` reads a line of names as data (an error);
    ``--header`` skips a first line of numbers (one point fewer)."""
    folder, Y, _ = data
    named = tmp_path / "named.csv"
    named.write_text("x,y\n1.0,2.0\n3.0,4.0\n")
    message = _one_line_error(["cluster", str(named), *FAST, "-q", "--no-header", "-o", str(tmp_path / "l.npy")])
    assert "cannot read" in message
    plain = tmp_path / "plain.csv"
    np.savetxt(plain, Y, delimiter=",")
    assert main(["cluster", str(plain), *FAST, "-q", "--header", "-o", str(tmp_path / "l.npy")]) == 0
    assert np.load(tmp_path / "l.npy").shape == (299,)


def test_malformed_first_row_is_an_error_not_a_header(tmp_path):
    """A first line with some numbers is data: a bad field in it is an
    error, never silently skipped as a header."""
    path = tmp_path / "points.csv"
    path.write_text("1.0,oops\n" + "1.0,2.0\n" * 50)
    assert "cannot read" in _one_line_error(["cluster", str(path), *FAST, "-q", "-o", str(tmp_path / "l.npy")])


# -- output formats --------------------------------------------------------------------


@pytest.mark.parametrize("ext, delimiter", [(".csv", ","), (".tsv", "\t"), (".txt", None)])
def test_labels_format_follows_the_extension(tmp_path, data, ext, delimiter):
    """``-o labels.csv`` writes text, one label per line, equal to the .npy labels."""
    folder, Y, labels = data
    out = tmp_path / f"labels{ext}"
    assert main(["cluster", str(folder / "points.npy"), *FAST, "-q", "-o", str(out)]) == 0
    assert not out.read_bytes().startswith(b"\x93NUMPY")
    assert np.array_equal(np.loadtxt(out, dtype=np.int64, delimiter=delimiter), labels)


def test_stdout_output_in_process(tmp_path, data, capsys, monkeypatch):
    """``-o -`` writes the labels to stdout, creates no file named "-", and
    sends the summary line to stderr."""
    folder, Y, labels = data
    monkeypatch.chdir(tmp_path)
    assert main(["cluster", str(folder / "points.npy"), *FAST, "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert np.array_equal(np.loadtxt(io.StringIO(out), dtype=np.int64), labels)
    assert "clustered 300 points into 2 clusters" in err and "-> stdout" in err
    assert list(tmp_path.iterdir()) == []


def test_stdout_output_of_a_process(tmp_path, data):
    """The same with stdout and stderr pipes: the labels alone on stdout, and
    plain stage lines (no carriage return) on stderr."""
    folder, Y, labels = data
    proc = _run_python(["-m", "fastkds", "cluster", str(folder / "points.npy"), *FAST, "-o", "-"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert np.array_equal(np.loadtxt(io.StringIO(proc.stdout), dtype=np.int64), labels)
    assert "\r" not in proc.stderr
    assert "epochs (converged)" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_embedding_codes_and_model(tmp_path, data):
    """``--embedding``, ``--codes`` and ``--model`` write what the fitted
    model holds: the saved model's embedding, its codes of the points, its labels."""
    folder, Y, labels = data
    paths = {name: tmp_path / name for name in ["labels.csv", "embedding.csv", "codes.npz", "model.npz"]}
    assert (
        main(
            [
                "cluster",
                str(folder / "points.npy"),
                *FAST,
                "-q",
                "-o",
                str(paths["labels.csv"]),
                "--embedding",
                str(paths["embedding.csv"]),
                "--codes",
                str(paths["codes.npz"]),
                "--model",
                str(paths["model.npz"]),
            ]
        )
        == 0
    )
    model = fastkds.load(paths["model.npz"])
    assert np.array_equal(model.labels_, labels)
    # %.17g: the text embedding reads back to the same doubles
    assert np.array_equal(np.loadtxt(paths["embedding.csv"], delimiter=",", ndmin=2), model.embedding_)
    codes = scipy.sparse.load_npz(paths["codes.npz"])
    assert codes.shape == (300, 12)
    assert np.allclose(codes.sum(axis=1), 1.0)
    assert (codes != model.kds_.transform(Y)).nnz == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(paths)


def test_embedding_as_npy(tmp_path, data):
    folder, Y, _ = data
    out = tmp_path / "embedding.npy"
    assert (
        main(
            ["cluster", str(folder / "points.npy"), *FAST, "-q", "-o", str(tmp_path / "l.npy"), "--embedding", str(out)]
        )
        == 0
    )
    embedding = np.load(out)
    assert embedding.shape == (300, 4)  # the diffusion embedding: 2 leading modes and 2 more
    assert np.allclose(np.linalg.norm(embedding, axis=1), 1.0)  # row-normalised


@pytest.fixture
def fit_must_not_run(monkeypatch):
    def fit(self, X, y=None):
        raise AssertionError("the fit ran before the output paths were checked")

    monkeypatch.setattr(estimators.KDSClustering, "fit", fit)


@pytest.mark.parametrize(
    "outputs, expected",
    [
        (["-o", "labels.json"], "must end in .npy, .csv, .tsv or .txt, or - for stdout"),
        (["-o", "labels"], "must end in"),
        (["-o", "l.npy", "--codes", "codes.npy"], "must end in .npz"),
        (["-o", "l.npy", "--model", "-"], "binary"),
        (["-o", "-", "--embedding", "-"], "both be written to stdout"),
        (["-o", "same.npy", "--embedding", "same.npy"], "both be written to"),
        (["-o", "l.npy", "--model", "missing/model.npz"], "does not exist"),
    ],
    ids=["unknown-ext", "no-ext", "codes-npy", "model-stdout", "two-stdout", "same-file", "missing-folder"],
)
def test_outputs_are_checked_before_the_fit(tmp_path, data, fit_must_not_run, monkeypatch, outputs, expected):
    folder, _, _ = data
    monkeypatch.chdir(tmp_path)
    message = _one_line_error(["cluster", str(folder / "points.npy"), *FAST, "-q", *outputs])
    assert expected in message
    assert list(tmp_path.iterdir()) == []


# -- verbosity and progress -------------------------------------------------------------


def test_quiet_prints_nothing(tmp_path, data, capsys):
    """``-q``: nothing on stdout or stderr, even with a warning (2 epochs do
    not converge)."""
    folder, _, _ = data
    argv = ["cluster", str(folder / "points.npy"), "--k", "2", "--atoms", "12", "--epochs", "2"]
    assert main([*argv, "-q", "-o", str(tmp_path / "l.npy")]) == 0
    assert capsys.readouterr() == ("", "")
    # without -q the warning is one line of stderr
    assert main([*argv, "-o", str(tmp_path / "l.npy")]) == 0
    err = capsys.readouterr().err
    assert "fastkds: warning: KDS did not converge in max_epochs=2 epochs" in err
    assert "warnings.warn" not in err and "KDSConvergenceWarning" not in err


def test_quiet_and_verbose_together_are_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["cluster", "points.npy", "-q", "-v", "-o", str(tmp_path / "l.npy")])
    assert excinfo.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def _cluster_saving_model(folder, tmp_path):
    """Run ``fastkds cluster`` on the test points with a model file; the epochs it ran."""
    argv = [
        "cluster",
        str(folder / "points.npy"),
        *FAST,
        "-o",
        str(tmp_path / "l.npy"),
        "--model",
        str(tmp_path / "m.npz"),
    ]
    assert main(argv) == 0
    return fastkds.load(tmp_path / "m.npz").kds_.n_iter_


def test_progress_off_a_terminal_is_plain_lines(tmp_path, data, capsys):
    """stderr not a terminal (here, captured): one plain line per stage, no
    carriage return, and the number of epochs actually run."""
    folder, _, _ = data
    epochs = _cluster_saving_model(folder, tmp_path)
    assert epochs < 30  # converged early
    out, err = capsys.readouterr()
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) == 3, err  # read, fitting, dictionary
    assert f"KDS epochs (all points, n=300): {epochs} epochs (converged)" in lines[2]
    assert "clustered 300 points" in out


def test_verbose_adds_a_line_per_epoch_and_timings(tmp_path, data, capsys):
    folder, _, _ = data
    assert (
        main(
            [
                "cluster",
                str(folder / "points.npy"),
                *FAST,
                "-v",
                "-o",
                str(tmp_path / "l.npy"),
                "--model",
                str(tmp_path / "m.npz"),
            ]
        )
        == 0
    )
    epochs = fastkds.load(tmp_path / "m.npz").kds_.n_iter_
    err = capsys.readouterr().err
    assert "\r" not in err
    assert err.count(": epoch ") == epochs
    assert f"epoch {epochs}/30, objective" in err
    assert "seconds: dictionary" in err and "threads" in err


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def test_progress_on_a_terminal_is_a_bar_ending_at_the_epochs_run(tmp_path, data, monkeypatch):
    """On a terminal: a carriage-return bar, which ends at 7/7 when the fit
    converges after 7 of at most 30 epochs (not at 7/30)."""
    folder, _, _ = data
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    epochs = _cluster_saving_model(folder, tmp_path)
    err = terminal.getvalue()
    assert "\r" in err
    final = err.rstrip("\n").split("\r")[-1]
    assert f"{epochs}/{epochs} [" in final, final
    assert "/30 [" not in final


# -- the kernel compilation notice ------------------------------------------------------


def test_compile_notice_comes_before_the_fit(tmp_path, data, capsys, monkeypatch):
    """A cold kernel cache is announced before the fit starts; a warm one is
    not. The cache looked at is that of the encoder the fit runs: the
    accelerated one for 12 atoms on 300 points, the exact codes for 4."""
    folder, _, _ = data
    argv = ["cluster", str(folder / "points.npy"), *FAST, "-o", str(tmp_path / "l.npy")]
    asked = []
    monkeypatch.setattr(
        cli, "_kernels_need_compiling", lambda dtype, n_features, encoder, n_atoms: asked.append(encoder) or True
    )
    assert main(argv) == 0
    assert "12 atoms, T=50, lam=1.0" in capsys.readouterr().err
    assert main([*argv[:5], "4", *argv[6:]]) == 0  # --atoms 4: 75 points an atom
    assert "4 atoms, exact codes, lam=1.0" in capsys.readouterr().err
    assert asked == ["apg", "active-set"]
    assert main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[1].startswith("fastkds: compiling kernels (first run only")
    assert lines[2].startswith("fastkds: fitting")
    monkeypatch.setattr(cli, "_kernels_need_compiling", lambda dtype, n_features, encoder, n_atoms: False)
    assert main(argv) == 0
    assert "compiling" not in capsys.readouterr().err


def test_kernels_need_compiling_reads_the_cache(tmp_path, data):
    """The test behind the notice: False here, where the fits above loaded
    the accelerated encoder's kernels (12 atoms for 300 points: too few
    points an atom for the exact codes) and a call loads the active set's;
    True in a fresh process with an empty Numba cache folder (it only reads
    the cache index, so nothing compiles)."""
    fastkds.sparse_encode(np.zeros((3, 2)), np.eye(2), encoder="active-set")
    for encoder in ("active-set", "apg"):
        assert cli._kernels_need_compiling(np.float64, 2, encoder, 12) is False
    code = (
        "import numpy as np; from fastkds.cli import _kernels_need_compiling as f; "
        "print(f(np.float64, 2, 'active-set', 12), f(np.float64, 2, 'apg', 12))"
    )
    proc = _run_python(["-c", code], tmp_path, env={"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]


def test_kernels_need_compiling_asks_for_the_statistics_kernel_the_fit_takes(monkeypatch):
    """Many atoms and features form the statistics atom by atom (another
    kernel): the notice looks at the kernel the fit's shape takes."""
    from fastkds import _kernels, solvers
    from fastkds.prepared import csr_from_dense

    fastkds.sparse_encode(np.zeros((3, 2)), np.eye(2), encoder="active-set")
    solvers.SufficientStatistics(2, 2).add_chunk(*csr_from_dense(np.eye(2)), np.eye(2), np.ones(2))
    asked = []
    monkeypatch.setattr(solvers, "statistics_by_atom", lambda n_atoms, n_features: asked.append((n_atoms, n_features)))
    assert cli._kernels_need_compiling(np.float64, 2, "active-set", 12) is False
    assert asked == [(12, 2)]

    class Cold:  # a kernel neither loaded here nor held in the cache
        signatures = []
        targetctx = _kernels.accumulate_statistics.targetctx
        _cache = SimpleNamespace(_cache_file=SimpleNamespace(_load_index=dict))

    monkeypatch.setattr(_kernels, "accumulate_statistics_by_atom", Cold)
    monkeypatch.setattr(solvers, "statistics_by_atom", lambda n_atoms, n_features: True)
    assert cli._kernels_need_compiling(np.float64, 2, "active-set", 12) is True
    monkeypatch.setattr(solvers, "statistics_by_atom", lambda n_atoms, n_features: False)
    assert cli._kernels_need_compiling(np.float64, 2, "active-set", 12) is False

"""Command line: ``fastkds demo``, ``fastkds cluster`` and ``fastkds paper``
(also ``python -m fastkds``; ``fastkds --version``).

A malformed command line gets argparse's usage message and exit status 2.
Every other error is one line on stderr, ``fastkds: error: ...``, with exit
status 1; Ctrl-C prints one line and exits with 130 (128 + SIGINT, the
shell's convention).

Results go to stdout or to files; everything else (stage lines, progress,
warnings) goes to stderr. Progress is a carriage-return bar only where
stderr is a terminal; elsewhere (a log file, a pipe, CI) it is one plain
line per stage. ``-q`` leaves only errors, ``-v`` adds detail.
"""

import argparse
import contextlib
import os
import sys
import time
import warnings

import numpy as np

from ._progress import EpochBar, epoch_display

# The errors the library raises for bad data, parameters, files and devices:
# each becomes one line. Anything else is a bug and keeps its traceback.
_USER_ERRORS = (ValueError, TypeError, RuntimeError, OSError, MemoryError)

# The one rule for table files, read (cluster's input) and written (labels,
# embedding): the extension names the format. Text formats map to their
# column delimiter; a .txt file is read with any whitespace between columns.
_TABLE_FORMATS = {".npy": None, ".csv": ",", ".tsv": "\t", ".txt": " "}
_TABLE_NAMES = ", ".join(_TABLE_FORMATS)  # ".npy, .csv, .tsv, .txt"
STDOUT = "-"

# Said before the first fit on a machine compiles the kernels; later runs
# load them from Numba's on-disk cache (times: docs/scaling.md, measured by
# bench/compile_time.py --cold).
_COMPILE_NOTICE = "compiling kernels (first run only, up to a minute)..."


def _count(n, noun, plural=None):
    """``"1 epoch"``, ``"2 epochs"``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _error(message):
    """A SystemExit that prints ``message`` as one line on stderr, exit status 1."""
    return SystemExit("fastkds: error: " + " ".join(str(message).split()))


# -- messages and progress ----------------------------------------------------------


class _Report:
    """Where the command line's messages go, by verbosity.

    Parameters
    ----------
    verbosity : int
        0 (``-q``): errors only. 1: stage lines, progress and warnings.
        2 and more (``-v``): also per-epoch lines and timings.
    data_on_stdout : bool
        A result is written to stdout, so the summary line goes to stderr.
    """

    def __init__(self, verbosity, data_on_stdout=False):
        self.verbosity = verbosity
        self.data_on_stdout = data_on_stdout

    @staticmethod
    def _stderr_is_terminal():
        # looked up at each use: tests and callers may replace sys.stderr
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):  # no isatty, or closed
            return False

    def stage(self, text):
        """One line on stderr saying what happens now (not under ``-q``)."""
        if self.verbosity >= 1:
            print(f"fastkds: {text}", file=sys.stderr, flush=True)

    def detail(self, text):
        """One line on stderr, under ``-v`` only."""
        if self.verbosity >= 2:
            print(f"fastkds: {text}", file=sys.stderr, flush=True)

    def result(self, text):
        """The closing line: stdout, or stderr while stdout carries data."""
        if self.verbosity >= 1:
            print(text, file=sys.stderr if self.data_on_stdout else sys.stdout, flush=True)

    def warning(self, message, category, filename, lineno, file=None, line=None):
        """:func:`warnings.showwarning` for the command line: one line, no source."""
        if self.verbosity >= 1:
            kind = f" ({category.__name__})" if self.verbosity >= 2 else ""
            text = " ".join(str(message).split())
            print(f"fastkds: warning: {text}{kind}", file=sys.stderr, flush=True)

    def epochs(self, desc, total):
        """A progress display over at most ``total`` epochs.

        Returns ``(display, progress)`` in the protocol of the estimators'
        progress hook: ``progress(epoch, objective, n_dead)`` after each
        epoch, ``display.close()`` at the end.
        """
        if self.verbosity < 1:
            return None, None
        display = EpochBar(desc, total) if self._stderr_is_terminal() else _EpochLines(self, desc, total)
        return display, display.update


class _EpochLines:
    """Epoch progress as plain lines: one when the stage ends, and under
    ``-v`` one per epoch (no carriage returns, for logs and pipes)."""

    def __init__(self, report, desc, total):
        self.report, self.desc, self.total = report, desc, total
        self.count, self.objective, self.dead = 0, None, 0
        self.t0 = time.perf_counter()

    def update(self, epoch, objective, n_dead):
        self.count += 1
        self.objective, self.dead = objective, n_dead
        self.report.detail(
            f"{self.desc}: epoch {self.count}/{self.total}, objective {objective:.6g}, {n_dead} dead atoms"
        )

    def close(self):
        if not self.count:  # the stage failed before its first epoch
            return
        # fewer epochs than the limit: the exact solver stopped on its tolerance
        stopped = " (converged)" if self.count < self.total else ""
        seconds = time.perf_counter() - self.t0
        dead = f", {self.dead} dead atoms" if self.dead else ""
        self.report.stage(
            f"{self.desc}: {_count(self.count, 'epoch')}{stopped} in {seconds:.2f} s, objective {self.objective:.6g}{dead}"
        )


@contextlib.contextmanager
def _reporting(report):
    """Route the estimators' epoch progress and warnings to ``report`` for a command."""

    def display(kds, desc, total):
        return report.epochs(desc, total) if kds.verbose else (None, None)

    with epoch_display(display), warnings.catch_warnings():
        # the filters stay as they are (-W, or a caller's); only the display changes
        warnings.showwarning = report.warning
        yield


def _kernels_need_compiling(dtype, n_features, encoder, n_atoms):
    """Whether a CPU fit on such data with ``encoder`` ("apg" or
    "active-set") and ``n_atoms`` atoms will compile its main kernels first.

    True when the encoder or the statistics kernel for ``dtype`` is neither
    loaded in this process nor in Numba's on-disk cache for this machine and
    source; False when both are; None when it cannot tell (a Numba whose
    cache internals differ). Cheap: reads two small cache index files.
    """
    try:
        from . import _active_set, _kernels
        from .solvers import statistics_by_atom

        if encoder == "active-set":
            encode = _active_set.encode_codes_active_set
        elif n_features <= _kernels.LOCKSTEP_MAX_FEATURES:
            encode = _kernels.encode_codes_lockstep
        else:
            encode = _kernels.encode_codes_points
        if statistics_by_atom(n_atoms, n_features):
            statistics = _kernels.accumulate_statistics_by_atom
        else:
            statistics = _kernels.accumulate_statistics
        name = np.dtype(dtype).name
        for kernel in (encode, statistics):
            if any(name in str(sig) for sig in kernel.signatures):
                continue  # compiled or loaded in this process already
            # Numba's own test (numba.core.caching.Cache.load_overload): an
            # index entry whose key matches this machine and this bytecode
            cache = kernel._cache
            codegen = kernel.targetctx.codegen()
            index = cache._cache_file._load_index()  # {} when absent or stale
            if not any(name in str(key[0]) and key == cache._index_key(key[0], codegen) for key in index):
                return True
        return False
    except Exception:  # private Numba API: never let the notice break a run
        return None


def _fit_encoder(model, n_samples):
    """The encoder ("apg" or "active-set") ``model``'s fit will run on
    ``n_samples`` points, as the clusterer's KDS for them says; None for a
    bad parameter, which the fit names."""
    try:
        n_clusters = None if model.n_clusters == "auto" else model.n_clusters
        return model._inner_kds(np.random.RandomState(0), n_samples, n_clusters)._encoding_params()["encoder"]
    except Exception:
        return None


def _announce_compilation(report, dtype, n_features, device, encoder, n_atoms):
    """Say so before the first kernel call of a fit on ``device`` running
    ``encoder`` (:func:`_fit_encoder`) with ``n_atoms`` atoms when it will
    compile (cold cache)."""
    if device == "cpu" and encoder is not None and _kernels_need_compiling(dtype, n_features, encoder, n_atoms):
        report.stage(_COMPILE_NOTICE)


def _check_device(device):
    """Fail now, not after loading the data, when ``device="cuda"`` cannot run
    (``"auto"`` falls back to the CPU)."""
    from ._backends import get_backend

    if device != "cuda":
        return
    try:
        get_backend(device)
    except (RuntimeError, ImportError) as exc:
        raise _error(f"--device {device}: {exc}")


# -- demo -------------------------------------------------------------------------


def _demo(args):
    report = args.report
    if report.verbosity >= 1 and args.n > 0 and args.atoms > 0:
        # before the imports below (scikit-learn, Numba: a second or two)
        print(
            f"fastkds demo: noisy two moons, n={args.n:,}, m={args.atoms}, T={args.n_iter}, "
            f"lam={args.lam}, device={args.device}",
            flush=True,
        )
    from sklearn.base import clone

    from ._validation import check_positive_int
    from .datasets import make_moons
    from .estimators import KDSClustering
    from .metrics import clustering_accuracy
    from .sources import random_rows

    check_positive_int(args.n, "--n")
    check_positive_int(args.atoms, "--atoms")
    _check_device(args.device)
    t0 = time.perf_counter()
    Y, labels = make_moons(args.n, random_state=args.seed)
    t_data = time.perf_counter() - t0

    # the paper's moons settings, its encoder and its labels (no neighbours'
    # vote): the demo times the method as published, its stages as the rows below
    model = KDSClustering(
        2,
        n_atoms=args.atoms,
        lam=args.lam,
        n_iter=args.n_iter,
        encoder="apg",
        max_epochs=args.epochs,
        vote_neighbors=None,
        random_state=args.seed,
        n_jobs=args.n_jobs,
        verbose=report.verbosity >= 1,
        device=args.device,
    )

    # Compile the kernels on a few points so the stage times below measure
    # work: two epochs of the same model reach every kernel the fit calls
    # (the seeding, the encoder, the statistics), and the sampler the
    # warm-start subsamples are drawn with
    _announce_compilation(report, Y.dtype, Y.shape[1], args.device, model.encoder, args.atoms)
    t0 = time.perf_counter()
    few = Y[: max(64, 2 * args.atoms)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # two epochs do not converge, and need not
        clone(model).set_params(n_iter=2, max_epochs=2, verbose=False).fit(few)
    random_rows(np.random.RandomState(0), 1000, 10)
    t_jit = time.perf_counter() - t0
    report.stage(f"fitting {args.n:,} points")
    t0 = time.perf_counter()
    model.fit(Y)
    total = time.perf_counter() - t0
    acc = clustering_accuracy(labels, model.labels_)
    t = model.timings_
    epochs = model.kds_.n_iter_
    kept = t["encode"] == 0.0  # the fit embedded its last epoch's codes: no pass of its own
    rows = [
        ("generate data", t_data),
        ("compile / load kernels", t_jit),
        (f"learn dictionary ({_count(epochs, 'epoch')} on all points)", t["dictionary"]),
        ("encode all points" + (" (the last epoch's codes)" if kept else ""), t["encode"]),
        ("spectral embedding", t["embed"]),
        ("k-means", t["kmeans"]),
        ("total fit", total),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"accuracy: {acc:.4f}")
    for name, sec in rows:
        print(f"  {name:<{width}}  {sec:8.3f} s")
    passes = epochs + (0 if kept else 1)
    t0 = time.perf_counter()
    model.kds_.transform(Y)
    print(f"encoder throughput: {args.n / (time.perf_counter() - t0):,.0f} points/s (one pass, timed after the fit)")
    print(f"fit throughput: {args.n * passes / total:,.0f} point-encodings/s over {_count(passes, 'pass', 'passes')}")
    return 0 if acc >= args.min_accuracy else 1


# -- cluster: files in and out --------------------------------------------------------


def _one_of(extensions):
    """``(".npy", ".csv", ".txt")`` as ".npy, .csv or .txt", for messages."""
    return " or ".join(filter(None, [", ".join(extensions[:-1]), extensions[-1]]))


def _extension(path):
    return os.path.splitext(path)[1].lower()


def _is_number(field):
    try:
        float(field.strip().strip('"'))
    except ValueError:
        return False
    return True


def _lines_before_data(path, delimiter, header):
    """How many lines ``numpy.loadtxt`` must skip: up to and including a header.

    ``header`` None detects one: the first line that is not blank or a
    ``#`` comment is a header when none of its fields is a number (a line
    with some numbers is data, so a malformed first row is an error, not
    silently skipped).
    """
    if header is False:
        return 0
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        for i, line in enumerate(f):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            if header:
                return i + 1
            fields = text.split(delimiter) if delimiter.strip() else text.split()
            return 0 if any(_is_number(field) for field in fields) else i + 1
    return 0


def _read_table(path, header=None):
    """The points in ``path``, one per row, and a note on how it was read.

    Parameters
    ----------
    path : str
        A ``.npy`` file (memory-mapped), or a ``.csv``, ``.tsv`` or ``.txt``
        text table (comma, tab, whitespace between columns).
    header : bool or None
        Whether a text table starts with a line of column names; None detects it.

    Returns
    -------
    Y : ndarray of shape (n_samples, n_features)
    note : str
        ``" (header line skipped)"`` or ``""``.
    """
    if not os.path.exists(path):
        raise _error(f"input file not found: {path}")
    ext = _extension(path)
    if ext not in _TABLE_FORMATS:
        raise _error(f"{path}: expected a {_one_of(tuple(_TABLE_FORMATS))} file")
    skip = 0
    try:
        if ext == ".npy":
            Y = np.load(path, mmap_mode="r", allow_pickle=False)
        else:
            delimiter = _TABLE_FORMATS[ext]
            skip = _lines_before_data(path, delimiter, header)
            with warnings.catch_warnings():
                # an empty file: reported below as an error, not also as a warning
                warnings.filterwarnings("ignore", "loadtxt: input contained no data", UserWarning)
                Y = np.loadtxt(
                    path,
                    delimiter=delimiter if delimiter.strip() else None,
                    skiprows=skip,
                    ndmin=2,
                    encoding="utf-8-sig",
                    quotechar='"',  # utf-8-sig: a spreadsheet's byte-order mark
                )
    except (ValueError, OSError, EOFError) as exc:
        # EOFError: a .npy file of zero bytes
        raise _error(f"cannot read {path}: {exc}")
    if Y.size == 0:
        raise _error(f"{path} holds no data (an array of shape {Y.shape})")
    return Y, " (header line skipped)" if skip else ""


def _write_table(path, array):
    """Write a 1-D or 2-D array in the format ``path``'s extension names
    (``-``: text on stdout), atomically."""
    from .persistence import write_atomically

    integer = np.issubdtype(array.dtype, np.integer)
    # floats in text: as many digits as give back the same number
    fmt = "%d" if integer else ("%.9g" if array.dtype == np.float32 else "%.17g")
    if path == STDOUT:
        try:
            np.savetxt(sys.stdout, array, fmt=fmt, delimiter=",")
            sys.stdout.flush()
        except BrokenPipeError:
            # the reader stopped early (`| head`): what it read is what it asked for
            _silence_stdout()
        return
    ext = _extension(path)
    if ext == ".npy":
        write_atomically(path, lambda f: np.save(f, array))
    else:
        write_atomically(path, lambda f: np.savetxt(f, array, fmt=fmt, delimiter=_TABLE_FORMATS[ext]))


def _silence_stdout():
    """Point stdout at /dev/null, so Python's flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _write_codes(path, codes):
    import scipy.sparse

    from .persistence import write_atomically

    write_atomically(path, lambda f: scipy.sparse.save_npz(f, codes))


# Each output: option, what it holds, the extensions it takes, whether "-" is allowed.
_OUTPUTS = [
    ("output", "labels", tuple(_TABLE_FORMATS), True),
    ("embedding", "embedding", tuple(_TABLE_FORMATS), True),
    ("codes", "codes", (".npz",), False),
    ("model", "model", (".npz",), False),
]


def _check_output(path, input_path):
    """Fail before any work when an output could not be written to ``path``."""
    if os.path.realpath(path) == os.path.realpath(input_path) or (
        os.path.exists(path) and os.path.exists(input_path) and os.path.samefile(path, input_path)
    ):
        raise _error("the output file would overwrite the input")
    if os.path.isdir(path):
        raise _error(f"the output path {path} is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        problem = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise _error(f"the output folder {folder} {problem}")
    # the output goes to a new file in that folder, renamed over the path
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _error(f"the output folder {folder} is not writable")


def _check_outputs(args):
    """Check every output path before the data are read: its extension, its
    folder, and that no two outputs (nor an output and the input) coincide.

    Returns
    -------
    outputs : list of (dest, what, path)
        The outputs asked for, in the order they are written.
    """
    outputs, seen = [], {}
    for dest, what, extensions, stdout_ok in _OUTPUTS:
        path = getattr(args, dest)
        if path is None:
            continue
        flag = "-o" if dest == "output" else f"--{dest}"
        if path == STDOUT:
            if not stdout_ok:
                raise _error(f"{flag} -: the {what} file is binary; give a {_one_of(extensions)} file")
        else:
            _check_output(path, args.file)
            if _extension(path) not in extensions:
                stdout = ", or - for stdout" if stdout_ok else ""
                raise _error(f"{flag} {path}: the {what} file must end in {_one_of(extensions)}{stdout}")
        key = path if path == STDOUT else os.path.realpath(path)
        if key in seen:
            where = "stdout" if path == STDOUT else path
            raise _error(f"{seen[key]} and {what} would both be written to {where}")
        seen[key] = what
        outputs.append((dest, what, path))
    return outputs


def _n_clusters(text):
    """argparse type of ``--k``: a positive int or 'auto'."""
    if text == "auto":
        return text
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'auto', got {text!r}")
    if k < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'auto', got {text!r}")
    return k


def _cluster(args):
    from .estimators import KDSClustering
    from .persistence import save

    report = args.report
    outputs = _check_outputs(args)
    _check_device(args.device)
    Y, note = _read_table(args.file, args.header)
    report.stage(f"read {Y.shape[0]:,} points x {Y.shape[1]:,} features from {args.file}{note}")
    model = KDSClustering(
        args.k,
        n_atoms=args.atoms,
        lam=args.lam,
        n_iter=args.n_iter,
        max_epochs=args.epochs,
        random_state=args.seed,
        n_jobs=args.n_jobs,
        verbose=report.verbosity >= 1,
        device=args.device,
    )
    dtype = np.float32 if Y.dtype == np.float32 else np.float64  # the dtype the fit computes in
    encoder = _fit_encoder(model, Y.shape[0])
    _announce_compilation(report, dtype, Y.shape[1], args.device, encoder, args.atoms)
    codes = "exact codes" if encoder == "active-set" else f"T={args.n_iter}"
    report.stage(f"fitting: k={args.k}, {args.atoms} atoms, {codes}, lam={args.lam}, up to {args.epochs} epochs")
    report.detail(f"{np.dtype(dtype).name}, device {args.device}, {_threads(args.n_jobs)} threads")
    t0 = time.perf_counter()
    model.fit(Y)
    seconds = time.perf_counter() - t0
    report.detail("seconds: " + ", ".join(f"{stage} {sec:.3f}" for stage, sec in model.timings_.items()))
    written = []
    for dest, what, path in outputs:
        report.detail(f"writing the {what} to {'stdout' if path == STDOUT else path}")
        if dest == "output":
            _write_table(path, model.labels_)
        elif dest == "embedding":
            _write_table(path, model.embedding_)
        elif dest == "codes":
            _write_codes(path, model.kds_.transform(Y))
        else:
            save(model, path)
        written.append(("stdout" if path == STDOUT else path) if dest == "output" else f"{what} {path}")
    report.result(
        f"clustered {Y.shape[0]:,} points into {model.n_clusters_} clusters in {seconds:.2f} s -> {', '.join(written)}"
    )
    return 0


def _threads(n_jobs):
    from ._config import effective_n_jobs

    try:
        return effective_n_jobs(n_jobs)
    except _USER_ERRORS:  # only a detail line: the fit reports a bad --n-jobs itself
        return "?"


# -- the parser -------------------------------------------------------------------


def _add_model_options(p, atoms, lam, n_iter, epochs):
    p.add_argument("--atoms", type=int, default=atoms, help=f"number of atoms m (default {atoms})")
    p.add_argument("--lam", type=float, default=lam, help=f"locality weight (default {lam})")
    p.add_argument("--n-iter", type=int, default=n_iter, help=f"encoder iterations T (default {n_iter})")
    p.add_argument("--epochs", type=int, default=epochs, help=f"max epochs (default {epochs})")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--n-jobs", type=int, default=None, help="threads (default: all)")
    p.add_argument(
        "--device", choices=["cpu", "cuda", "auto"], default="cpu", help="where the kernels run (default cpu)"
    )
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors and results")
    talk.add_argument("-v", "--verbose", action="count", default=0, help="more detail: a line per epoch, stage timings")


_CLUSTER_EPILOG = """\
file formats, named by the extension:
  input       .npy, or a text table: .csv (commas), .tsv (tabs), .txt (spaces);
              a first line of column names is skipped (see --header)
  labels, --embedding
              .npy, or text one row per line (.csv, .tsv, .txt), or - for
              text on stdout (messages then go to stderr)
  --codes     .npz, a scipy.sparse CSR array (scipy.sparse.load_npz), one
              row per point over the atoms, each row on the probability simplex
  --model     .npz, the fitted KDSClustering (fastkds.load)

Progress is a bar where stderr is a terminal, one line per stage otherwise.
The first run compiles the kernels (Numba, cached on disk afterwards).

example:
  fastkds cluster points.csv --k 3 -o labels.csv --model model.npz
"""


def build_parser():
    """The ``fastkds`` argument parser."""
    from importlib.metadata import version

    from . import __version__

    parser = argparse.ArgumentParser(prog="fastkds", description="Fast K-Deep Simplex clustering.")
    parser.add_argument(
        "--version",
        action="version",
        # numba's installed version, read without importing it (half a second)
        version=f"fastkds {__version__} (numba {version('numba')}, numpy {np.__version__}, "
        f"Python {sys.version.split()[0]})",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="cluster generated noisy two moons and report timings")
    demo.add_argument("--n", type=int, default=1_000_000, help="number of points (default 1,000,000)")
    demo.add_argument("--min-accuracy", type=float, default=0.0, help="exit 1 below this accuracy")
    # T=30, not the paper's 15: at 1e6 points the paper's setting stops at
    # accuracy 0.9988, T=30 reaches 0.9993 (the Bayes classifier: 0.99937)
    _add_model_options(demo, atoms=24, lam=5.0, n_iter=30, epochs=100)
    demo.set_defaults(func=_demo)

    cluster = sub.add_parser(
        "cluster",
        help=f"cluster the rows of a {_TABLE_NAMES} file",
        epilog=_CLUSTER_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cluster.add_argument("file", help=f"data file, one point per row ({_TABLE_NAMES})")
    cluster.add_argument("--k", type=_n_clusters, default="auto", help="number of clusters or 'auto' (default)")
    cluster.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="LABELS",
        help=f"where to write the labels ({_TABLE_NAMES}, or - for stdout)",
    )
    cluster.add_argument(
        "--embedding",
        metavar="PATH",
        help=f"also write the spectral embedding the labels come from ({_TABLE_NAMES}, or -)",
    )
    cluster.add_argument("--codes", metavar="PATH.npz", help="also write the sparse codes (scipy .npz)")
    cluster.add_argument("--model", metavar="PATH.npz", help="also save the fitted model (fastkds.load reads it)")
    cluster.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whether a text input starts with a line of column names "
        "(default: it does when that line holds no number)",
    )
    _add_model_options(cluster, atoms=24, lam=1.0, n_iter=50, epochs=100)
    cluster.set_defaults(func=_cluster)

    from . import experiments

    paper = sub.add_parser("paper", help="reproduce the paper's clustering experiments (a table, optional figures)")
    experiments.add_arguments(paper)
    paper.set_defaults(func=_paper)
    return parser


def _paper(args):
    from .experiments import run

    run(args)
    return 0


def main(argv=None):
    """Entry point of the ``fastkds`` console script and of ``python -m fastkds``.

    Parameters
    ----------
    argv : list of str or None
        The arguments after the program name; None reads ``sys.argv``.

    Returns
    -------
    status : int
        0 on success; 1 from ``demo --min-accuracy``; 130 after Ctrl-C,
        which prints one line. An error of bad data, options, files or
        devices raises SystemExit with a one-line message (exit status 1).
    """
    args = build_parser().parse_args(argv)
    try:
        if not hasattr(args, "quiet"):  # fastkds paper: its own output
            return args.func(args)
        verbosity = 0 if args.quiet else 1 + args.verbose
        outputs = (getattr(args, "output", None), getattr(args, "embedding", None))
        args.report = _Report(verbosity, data_on_stdout=STDOUT in outputs)
        with _reporting(args.report):
            return args.func(args)
    except KeyboardInterrupt:
        print("fastkds: interrupted", file=sys.stderr, flush=True)
        return 130
    except _USER_ERRORS as exc:
        raise _error(exc) from None


if __name__ == "__main__":
    sys.exit(main())

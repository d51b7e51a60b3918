"""Command line: ``fastkds demo``, ``fastkds cluster`` and ``fastkds paper``.

A malformed command line gets argparse's usage message and exit status 2.
Every other error is one line on stderr, ``fastkds: error: ...``, with exit
status 1; Ctrl-C prints one line and exits with 130 (128 + SIGINT, the
shell's convention).
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

# The errors the library raises for bad data, parameters, files and devices:
# each becomes one line. Anything else is a bug and keeps its traceback.
_USER_ERRORS = (ValueError, TypeError, RuntimeError, OSError, MemoryError)


def _error(message):
    """A SystemExit that prints ``message`` as one line on stderr, exit status 1."""
    return SystemExit("fastkds: error: " + " ".join(str(message).split()))


def _print(quiet, *args):
    if not quiet:
        print(*args, flush=True)


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


def _demo(args):
    from ._validation import check_positive_int
    from .datasets import make_moons
    from .encoding import sparse_encode
    from .estimators import KDSClustering
    from .metrics import clustering_accuracy

    check_positive_int(args.n, "--n")
    check_positive_int(args.atoms, "--atoms")
    _check_device(args.device)
    q = args.quiet
    t0 = time.perf_counter()
    Y, labels = make_moons(args.n, random_state=args.seed)
    t_data = time.perf_counter() - t0
    _print(
        q,
        f"fastkds demo: noisy two moons, n={args.n:,}, m={args.atoms}, T={args.n_iter}, "
        f"lam={args.lam}, device={args.device}",
    )

    # Compile the kernels on a few points so the stage times below measure work.
    t0 = time.perf_counter()
    sparse_encode(Y[:64], Y[: args.atoms], lam=args.lam, n_iter=2, device=args.device)
    t_jit = time.perf_counter() - t0

    model = KDSClustering(
        2,
        n_atoms=args.atoms,
        lam=args.lam,
        n_iter=args.n_iter,
        max_epochs=args.epochs,
        random_state=args.seed,
        n_jobs=args.n_jobs,
        verbose=0 if q else 1,
        device=args.device,
    )
    t0 = time.perf_counter()
    model.fit(Y)
    total = time.perf_counter() - t0
    acc = clustering_accuracy(labels, model.labels_)
    t = model.timings_
    rows = [
        ("generate data", t_data),
        ("compile / load kernels", t_jit),
        (f"learn dictionary ({model.kds_.n_iter_} epochs)", t["dictionary"]),
        ("encode all points", t["encode"]),
        ("spectral embedding", t["embed"]),
        ("k-means", t["kmeans"]),
        ("total fit", total),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"accuracy: {acc:.4f}")
    for name, sec in rows:
        print(f"  {name:<{width}}  {sec:8.3f} s")
    epochs = model.kds_.n_iter_
    print(f"encoder throughput: {args.n / t['encode']:,.0f} points/s (one pass)")
    print(f"fit throughput: {args.n * (epochs + 1) / total:,.0f} point-encodings/s over {epochs + 1} passes")
    return 0 if acc >= args.min_accuracy else 1


def _load_table(path):
    if not os.path.exists(path):
        raise _error(f"input file not found: {path}")
    if not path.endswith((".npy", ".csv", ".txt")):
        raise _error(f"{path}: expected a .npy or .csv file")
    try:
        if path.endswith(".npy"):
            Y = np.load(path, mmap_mode="r", allow_pickle=False)
        else:
            with warnings.catch_warnings():
                # an empty file: reported below as an error, not also as a warning
                warnings.filterwarnings("ignore", "loadtxt: input contained no data", UserWarning)
                Y = np.loadtxt(path, delimiter="," if path.endswith(".csv") else None, ndmin=2)
    except (ValueError, OSError, EOFError) as exc:
        # EOFError: a .npy file of zero bytes
        raise _error(f"cannot read {path}: {exc}")
    if Y.size == 0:
        raise _error(f"{path} holds no data (an array of shape {Y.shape})")
    return Y


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


def _check_output(path, input_path):
    """Fail before any work when the labels could not be written to ``path``."""
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
    # the labels go to a new file in that folder, renamed over the path
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _error(f"the output folder {folder} is not writable")


def _cluster(args):
    from .estimators import KDSClustering
    from .persistence import write_atomically

    _check_output(args.output, args.file)
    _check_device(args.device)
    Y = _load_table(args.file)
    model = KDSClustering(
        args.k,
        n_atoms=args.atoms,
        lam=args.lam,
        n_iter=args.n_iter,
        max_epochs=args.epochs,
        random_state=args.seed,
        n_jobs=args.n_jobs,
        verbose=0 if args.quiet else 1,
        device=args.device,
    )
    t0 = time.perf_counter()
    model.fit(Y)
    write_atomically(args.output, lambda f: np.save(f, model.labels_))
    _print(
        args.quiet,
        f"clustered {Y.shape[0]:,} points into {model.n_clusters_} clusters "
        f"in {time.perf_counter() - t0:.2f} s -> {args.output}",
    )
    return 0


def _add_model_options(p, atoms, lam, n_iter, epochs):
    p.add_argument("--atoms", type=int, default=atoms, help=f"number of atoms m (default {atoms})")
    p.add_argument("--lam", type=float, default=lam, help=f"locality weight (default {lam})")
    p.add_argument("--n-iter", type=int, default=n_iter, help=f"encoder iterations T (default {n_iter})")
    p.add_argument("--epochs", type=int, default=epochs, help=f"max epochs (default {epochs})")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--n-jobs", type=int, default=None, help="threads (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--device", choices=["cpu", "cuda", "auto"], default="cpu", help="where the kernels run (default cpu)"
    )


def build_parser():
    """The ``fastkds`` argument parser."""
    parser = argparse.ArgumentParser(prog="fastkds", description="Fast K-Deep Simplex clustering.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="cluster generated noisy two moons and report timings")
    demo.add_argument("--n", type=int, default=1_000_000, help="number of points (default 1,000,000)")
    demo.add_argument("--min-accuracy", type=float, default=0.0, help="exit 1 below this accuracy")
    # T=30, not the paper's 15: at 1e6 points the paper's setting stops at
    # accuracy 0.9988, T=30 reaches 0.9993 (the Bayes classifier: 0.99937)
    _add_model_options(demo, atoms=24, lam=5.0, n_iter=30, epochs=100)
    demo.set_defaults(func=_demo)

    cluster = sub.add_parser("cluster", help="cluster the rows of a .npy or .csv file")
    cluster.add_argument("file", help="data file, one point per row (.npy or .csv)")
    cluster.add_argument("--k", type=_n_clusters, default="auto", help="number of clusters or 'auto' (default)")
    cluster.add_argument("-o", "--output", required=True, help="where to write the labels (.npy)")
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
    """Entry point of the ``fastkds`` console script.

    Returns the exit status: 130 after Ctrl-C, which prints one line. An
    error of bad data, options, files or devices raises SystemExit with a
    one-line message (exit status 1).
    """
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("fastkds: interrupted", file=sys.stderr, flush=True)
        return 130
    except _USER_ERRORS as exc:
        raise _error(exc) from None


if __name__ == "__main__":
    sys.exit(main())

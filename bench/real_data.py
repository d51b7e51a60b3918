"""fastkds with its defaults against what a user would pick instead, on every
real and synthetic set the project has, in one table.

    python bench/real_data.py [--data DIR] [--only NAME ...] [--seeds 3] [--first-seed 0]
                              [--timeout 300] [--quick] [--no-baselines] [--set NAME=VALUE ...]

Rows: MNIST t10k, all ten digits (10,000 images) and the five of MNIST-5;
Yale B, 2 faces; Salinas-A (the labelled pixels); noisy moons (5,000 and
1,000,000 points); concentric circles (6,000 points, delta 0.1); and two
high-dimensional manifold sets, ``fastkds.datasets.make_curves`` (six closed
curves through a common centre in 100 dimensions) and
``make_nested_spheres`` (five concentric 2-spheres in 60 dimensions), 10,000
points each, and two smaller ones: twenty such curves in 256 dimensions
(1,440 points) and three shells in 30 (3,000 points). Every method gets the
same array: MNIST and Yale B rows scaled to unit norm, Salinas-A bands
standardised (the paper's preprocessings).

Columns, all measured in this run on this machine:

- fastkds: ``KDSClustering(n_clusters=k, random_state=seed)`` with every
  other parameter at its default (unless ``--set``); accuracy mean and min over the seeds, and
  the mean fit seconds (the kernels compiled beforehand);
- SpectralClustering(affinity="nearest_neighbors"), the best of
  n_neighbors 5, 10 and 20 by accuracy: that accuracy, its n_neighbors and
  its seconds (seed 0);
- KMeans(k) at scikit-learn's defaults, and HDBSCAN at its defaults
  (noise points count as a cluster of their own): accuracy and seconds.

Each baseline runs in a child process under ``--timeout`` seconds; one that
does not finish (SpectralClustering on a million points) reads "> T s".
Accuracy is the best one-to-one matching of clusters to classes.
``--quick`` runs every row on a small subsample with one seed, to check the
script itself. ``--set n_atoms=400 --set encoder="'active-set'"`` replaces
defaults of fastkds (each value a Python literal), for exploring; the table
then says so in its header and is no longer the defaults' table.
``--no-baselines`` runs fastkds only, for exploring settings quickly; the
other columns then read "not run".
"""

import argparse
import ast
import datetime
import functools
import multiprocessing
import os
import platform
import sys
import time
import warnings

import numpy as np

from fastkds import KDSClustering, clustering_accuracy, datasets
from fastkds.datasets import find_data_dir
from fastkds.experiments import DATA_SETS, load_data_set

#: (name, title, loader): a loader takes (data_dir, seed) and returns (Y, labels).
ROWS = [(name, title, functools.partial(load_data_set, name)) for name, title in DATA_SETS]

NEIGHBOURS = (5, 10, 20)


def table_parser(description):
    """An argument parser with the side tables' ``--data`` and ``--only``
    (the sets :func:`table_sets` takes)."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="folder of the real data sets (default: found as fastkds does)")
    ap.add_argument("--only", nargs="+", default=None, help="names of the sets to run")
    return ap


def table_sets(data_dir, only=None):
    """The sets of the side tables (``bench/ensemble_defaults.py``,
    ``bench/neighbourhood.py``, ``bench/landmark_graphs.py``,
    ``bench/vote_pieces.py``): every set of ``DATA_SETS`` but the
    million-point moons, or those named in ``only``, with the data of seed
    0, as ``(name, title, Y, y)``; ``Y`` is None and ``y`` the reason when
    the data are missing."""
    for name, title in DATA_SETS:
        if name == "moons1m" or (only and name not in only):
            continue
        try:
            yield (name, title, *load_data_set(name, data_dir, 0))
        except FileNotFoundError as exc:
            yield name, title, None, str(exc)


def _quick(Y, y, n=600):
    keep = np.sort(np.random.default_rng(0).choice(Y.shape[0], min(n, Y.shape[0]), replace=False))
    return np.ascontiguousarray(Y[keep]), y[keep]


# -- baselines, each in a child process under a time limit ----------------------------


def _spectral(Y, k, n_neighbors):
    from sklearn.cluster import SpectralClustering

    return SpectralClustering(
        k, affinity="nearest_neighbors", n_neighbors=min(n_neighbors, Y.shape[0] - 1), random_state=0
    ).fit_predict(Y)


def spectral_best(Y, y, k):
    """SpectralClustering's best of :data:`NEIGHBOURS` by accuracy, in this
    process (the side tables' column): ``(accuracy, n_neighbors, seconds)``."""
    runs = []
    for q in NEIGHBOURS:
        t0 = time.perf_counter()
        labels = _spectral(Y, k, q)
        runs.append((clustering_accuracy(y, labels), q, time.perf_counter() - t0))
    return max(runs, key=lambda run: run[0])


def fastkds_runs(Y, y, k, seeds):
    """``KDSClustering(k, random_state=seed)`` with its defaults on ``Y``
    for each of ``seeds`` (the side tables' column): two lists, the
    accuracies and the fit seconds."""
    accs, seconds = [], []
    for seed in seeds:
        t0 = time.perf_counter()
        labels = KDSClustering(k, random_state=seed).fit_predict(Y)
        seconds.append(time.perf_counter() - t0)
        accs.append(clustering_accuracy(y, labels))
    return accs, seconds


def _kmeans(Y, k):
    from sklearn.cluster import KMeans

    return KMeans(k, random_state=0).fit_predict(Y)


def _hdbscan(Y, k):
    from sklearn.cluster import HDBSCAN

    return HDBSCAN().fit_predict(Y)


def _child(queue, fn, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        labels = fn(*args)
        queue.put((labels, time.perf_counter() - t0))


def timed_baseline(fn, args, timeout):
    """``(labels, seconds)`` of ``fn(*args)`` in a child process, or
    ``(None, None)`` when it ran past ``timeout`` seconds or failed."""
    # spawn, not fork: a forked child of a process whose OpenMP threads have
    # run (Numba, scikit-learn) can hang in its first parallel region
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, fn, args))
    proc.start()
    try:
        return queue.get(timeout=timeout)
    except Exception:  # queue.Empty on timeout; anything the child raised ends it without a result
        return None, None
    finally:
        proc.terminate()
        proc.join()


# -- one row ---------------------------------------------------------------------------


def run_row(name, title, loader, data_dir, *, seeds, timeout, quick, log, params=None, first_seed=0, baselines=True):
    """Measure one row; returns a dict of its cells (``missing`` when no data;
    ``baselines`` False when only fastkds ran)."""
    try:
        Y, y = loader(data_dir, 0)
    except FileNotFoundError as exc:
        return {"title": title, "missing": str(exc)}
    if quick:
        Y, y = _quick(Y, y)
    k = int(np.unique(y).size)
    row = {"title": title, "n": Y.shape[0], "d": Y.shape[1], "k": k, "acc": [], "sec": []}
    for seed in range(first_seed, first_seed + seeds):
        if seed:  # generated sets are drawn afresh for each seed; files are the same
            Ys, ys = loader(data_dir, seed)
            if quick:
                Ys, ys = _quick(Ys, ys)
        else:
            Ys, ys = Y, y
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            model = KDSClustering(k, random_state=seed, **(params or {})).fit(Ys)
            row["sec"].append(time.perf_counter() - t0)
        row["acc"].append(clustering_accuracy(ys, model.labels_))
        log(
            f"  {name} seed {seed}: fastkds {row['acc'][-1]:.4f} in {row['sec'][-1]:.2f} s "
            f"(n_atoms {model.kds_.n_atoms}, {model.kds_.n_iter_} epoch{'' if model.kds_.n_iter_ == 1 else 's'})"
        )
    row["baselines"] = baselines
    if not baselines:
        return row
    best = None
    for nn in NEIGHBOURS:
        labels, sec = timed_baseline(_spectral, (Y, k, nn), timeout)
        acc = None if labels is None else clustering_accuracy(y, labels)
        log(
            f"  {name} SpectralClustering n_neighbors={nn}: "
            + ("did not finish" if acc is None else f"{acc:.4f} in {sec:.2f} s")
        )
        if acc is not None and (best is None or acc > best[0]):
            best = (acc, nn, sec)
    row["spectral"] = best
    for key, fn in (("kmeans", _kmeans), ("hdbscan", _hdbscan)):
        labels, sec = timed_baseline(fn, (Y, k), timeout)
        row[key] = None if labels is None else (clustering_accuracy(y, labels), sec)
        log(f"  {name} {key}: " + ("did not finish" if labels is None else f"{row[key][0]:.4f} in {sec:.2f} s"))
    return row


def format_table(rows, timeout):
    lines = [
        "| data | n | d | k | fastkds mean | fastkds min | fastkds s | Spectral kNN best | its n_neighbors "
        "| Spectral s | KMeans | KMeans s | HDBSCAN | HDBSCAN s | defaults >= Spectral | faster |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "missing" in r:
            lines.append(f"| {r['title']} | data missing: {r['missing']} |" + " |" * 14)
            continue
        mean, low, sec = np.mean(r["acc"]), np.min(r["acc"]), np.mean(r["sec"])
        cells = [r["title"], f"{r['n']:,}", str(r["d"]), str(r["k"]), f"{mean:.4f}", f"{low:.4f}", f"{sec:.2f}"]
        if not r["baselines"]:
            lines.append("| " + " | ".join(cells + ["not run"] * 9) + " |")
            continue
        if r["spectral"] is None:
            cells += ["-", "-", f"> {timeout} s"]
            verdict, faster = "-", "-"
        else:
            acc, nn, ssec = r["spectral"]
            cells += [f"{acc:.4f}", str(nn), f"{ssec:.2f}"]
            verdict = "yes" if mean >= acc else "no"
            faster = "yes" if sec <= ssec else "no"
        for key in ("kmeans", "hdbscan"):
            cells += ["-", f"> {timeout} s"] if r[key] is None else [f"{r[key][0]:.4f}", f"{r[key][1]:.2f}"]
        lines.append("| " + " | ".join(cells + [verdict, faster]) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="folder holding mnist/, yaleb/, salinasA/")
    parser.add_argument("--only", nargs="+", choices=[r[0] for r in ROWS], help="rows to run")
    parser.add_argument("--seeds", type=int, default=3, help="fastkds seeds per row (default 3)")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="first fastkds seed (default 0): later seeds check a setting chosen on earlier ones",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a baseline may run (default 300)")
    parser.add_argument("--quick", action="store_true", help="600-point subsamples, one seed: checks the script")
    parser.add_argument(
        "--no-baselines",
        action="store_true",
        help="fastkds only (exploring settings): the other columns read 'not run'",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a fastkds parameter instead of its default (VALUE a Python literal)",
    )
    args = parser.parse_args(argv)
    params = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set takes NAME=VALUE, got {item!r}")
        try:
            params[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parser.error(f"--set {name}: {value!r} is not a Python literal (quote strings: \"'active-set'\")")
    seeds = 1 if args.quick else args.seeds
    data_dir = find_data_dir(args.data)
    data_dir = None if data_dir is None else str(data_dir)

    def log(text):
        print(text, file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        KDSClustering(2, random_state=0).fit(datasets.make_moons(400, random_state=0)[0])  # compile the kernels
    rows = [
        run_row(
            name,
            title,
            loader,
            data_dir,
            seeds=seeds,
            timeout=args.timeout,
            quick=args.quick,
            log=log,
            params=params,
            first_seed=args.first_seed,
            baselines=not args.no_baselines,
        )
        for name, title, loader in ROWS
        if args.only is None or name in args.only
    ]
    print(f"bench/real_data.py {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    print(f"{datetime.date.today().isoformat()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    if params:
        print("fastkds NOT at its defaults: " + ", ".join(f"{k}={v!r}" for k, v in params.items()))
    print(format_table(rows, args.timeout))
    return rows


if __name__ == "__main__":
    main()

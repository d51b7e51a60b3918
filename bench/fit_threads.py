"""Where a fit's time goes on one thread and on more: the seconds inside
the parallel kernels, and the rest (the interpreter, NumPy, LAPACK and
scikit-learn between them), which threads do not shorten. The measure
behind the n_jobs speed-up of ``bench/mnist5.py`` (docs/experiments.md,
"The two-thread fit's serial part").

    python bench/fit_threads.py [--data ../shared/data/mnist] [--n-jobs 1 2] [--repeats 3]
    python bench/fit_threads.py --synthetic 3000     # no data needed

Fits ``KDSClustering(5)`` at the paper's MNIST-5 settings (500 atoms,
T=100, lam=0.5; with ``--synthetic N``, 50 atoms on N points of 5 noisy
Gaussian blobs in 100 features), each thread count in turn, ``--repeats``
times, seed 0. Every kernel of the package that runs on Numba's threads is
timed where Python calls it; the first table prints the median over the
repeats of each column, and the speed-ups against the first thread count;
the second, the ``--kernels`` longest kernels' medians alone.
"""

import argparse
import collections
import functools
import importlib
import os
import pkgutil
import time
import warnings

import numpy as np
from numba.core.registry import CPUDispatcher

import fastkds
from fastkds import KDSClustering, load_mnist, warmup
from fastkds.datasets import find_data_dir
from fastkds.experiments import PAPER_SETTINGS

PAPER = PAPER_SETTINGS["mnist5"]
KERNEL_MODULES = ("_kernels", "_vote_kernels", "_active_set")


def instrument(seconds):
    """Time every parallel kernel (and the k-means++ loop, which runs one)
    under the names Python code calls it by; returns a function that undoes it."""
    kernels = {}
    for name in KERNEL_MODULES:
        for key, fn in vars(importlib.import_module(f"fastkds.{name}")).items():
            if isinstance(fn, CPUDispatcher) and (fn.targetoptions.get("parallel") or key == "seeding_rounds"):
                kernels[key] = fn

    def timed(key, fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[key] += time.perf_counter() - t0

        return call

    modules = [importlib.import_module(f"fastkds.{m.name}") for m in pkgutil.walk_packages(fastkds.__path__)]
    patched = []
    for module in modules:
        for key, fn in kernels.items():
            if vars(module).get(key) is fn:
                setattr(module, key, timed(key, fn))
                patched.append((module, key, fn))

    def undo():
        for module, key, fn in patched:
            setattr(module, key, fn)

    return undo


def problem(args):
    if args.synthetic:
        from sklearn.datasets import make_blobs

        Y = make_blobs(args.synthetic, n_features=100, centers=5, cluster_std=4.0, random_state=0)[0]
        return Y, dict(n_atoms=50, lam=PAPER.lam, n_iter=PAPER.n_iter), f"blobs, n={args.synthetic}, d=100, m=50"
    folder = args.data or os.path.join(find_data_dir() or "", "mnist")
    Y, _ = load_mnist(folder)
    return Y, dict(n_atoms=PAPER.n_atoms, lam=PAPER.lam, n_iter=PAPER.n_iter), f"MNIST-5, n={Y.shape[0]}, m=500"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="the mnist/ folder (default: mnist/ in the data folder)")
    ap.add_argument("--synthetic", type=int, default=0, help="fit N generated points instead of MNIST-5")
    ap.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernels", type=int, default=8, help="the longest kernels to list (default 8)")
    args = ap.parse_args(argv)
    Y, settings, name = problem(args)
    warnings.simplefilter("ignore")
    # compile: every kernel (many atoms' statistics take another than the
    # small fit's), then the small fit's path
    warmup(dtypes=(Y.dtype,))
    KDSClustering(5, n_atoms=20, max_epochs=2).fit(Y[:500])
    rows = {n_jobs: [] for n_jobs in args.n_jobs}
    per_kernel = {n_jobs: [] for n_jobs in args.n_jobs}
    for _ in range(args.repeats):
        for n_jobs in args.n_jobs:
            seconds = collections.Counter()
            undo = instrument(seconds)
            try:
                t0 = time.perf_counter()
                KDSClustering(5, random_state=0, n_jobs=n_jobs, **settings).fit(Y)
                total = time.perf_counter() - t0
            finally:
                undo()
            kernels = sum(seconds.values())
            rows[n_jobs].append((total, kernels, total - kernels))
            per_kernel[n_jobs].append(seconds)
    print(f"{name}, {args.repeats} fits a thread count, medians")
    print("| n_jobs | fit, s | in the parallel kernels, s | the rest, s | fit speed-up | kernels' speed-up |")
    print("|---|---|---|---|---|---|")
    base = np.median(rows[args.n_jobs[0]], axis=0)
    for n_jobs, found in rows.items():
        total, kernels, rest = np.median(found, axis=0)
        print(
            f"| {n_jobs} | {total:.3f} | {kernels:.3f} | {rest:.3f} | {base[0] / total:.2f}x | {base[1] / kernels:.2f}x |"
        )
    # each kernel's median seconds a fit, the longest at the last count first
    first, last = args.n_jobs[0], args.n_jobs[-1]
    names = set().union(*(c for found in per_kernel.values() for c in found))
    median = {n: {k: np.median([c[k] for c in per_kernel[n]]) for k in names} for n in args.n_jobs}
    print()
    print("| kernel | " + " | ".join(f"n_jobs={n}, s" for n in args.n_jobs) + f" | speed-up, {first} to {last} |")
    print("|---|" + "---|" * (len(args.n_jobs) + 1))
    for key in sorted(median[last], key=median[last].get, reverse=True)[: args.kernels]:
        cells = " | ".join(f"{median[n][key]:.3f}" for n in args.n_jobs)
        print(f"| {key} | {cells} | {median[first][key] / max(median[last][key], 1e-9):.2f}x |")


if __name__ == "__main__":
    main()

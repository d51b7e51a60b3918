"""Two versions of fastkds timed side by side in one process: the package of a
git revision (the baseline) against the working tree's, on one thread and
on more, fit for fit in turn; their labels and atoms must be the same bytes.

    python bench/compare_versions.py --base REV [--data ../shared/data/mnist]
                                     [--seeds 0 1 2] [--repeats 2] [--n-jobs 1 2]
    python bench/compare_versions.py --base REV --data-set spheres   # a set of bench/real_data.py
    python bench/compare_versions.py --base REV --synthetic 3000      # no data needed

Fits ``bench/fit_threads.py``'s problem, ``KDSClustering(5)`` at the
paper's MNIST-5 settings (500 atoms, T=100, lam=0.5; with ``--synthetic
N``, 50 atoms on N points of 5 noisy Gaussian blobs in 100 features), or
with ``--data-set NAME`` ``KDSClustering(k)`` at its defaults on a set of
``bench/real_data.py`` (``fastkds.experiments.DATA_SETS``; a generated one
drawn with seed 0; the files from ``fastkds.datasets.find_data_dir()``). On a shared machine a fit's time moves by 10-20%
from one minute to the next, for the same code (docs/experiments.md, "The
eighth session"), so two versions timed in separate runs compare the
machine's minutes as much as the code. Here each repeat fits every seed
with both versions, the version that goes first alternating, and every
thread count in turn; the table gives each version's fit seconds summed
over the fits, the speed-up of each thread count against the first
(summed, and the median of the fit-by-fit ratios), and last, the change
from the baseline of each thread count's summed seconds.

The baseline is ``git archive REV fastkds``, unpacked once into the system's
temporary folder as the package ``fastkds_base`` (its modules import each
other relatively) and kept there, so Numba's cache of its kernels serves
the next run too.
"""

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import fit_threads
import numpy as np

import fastkds
from fastkds.datasets import find_data_dir
from fastkds.experiments import DATA_SETS, load_data_set

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def base_package(rev, repo=REPO):
    """The package of git revision ``rev`` of ``repo``, imported as
    ``fastkds_base`` from a folder of the system's temporary folder named
    after its commit (unpacked there on the first call)."""
    sha = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--verify", f"{rev}^{{commit}}"], capture_output=True, text=True
    )
    if sha.returncode != 0:
        raise SystemExit(f"compare_versions: no commit {rev!r} in {repo}: {sha.stderr.strip()}")
    folder = os.path.join(tempfile.gettempdir(), f"fastkds_base_{sha.stdout.strip()[:12]}")
    package = os.path.join(folder, "fastkds_base")
    if not os.path.isdir(package):
        unpacked = tempfile.mkdtemp(dir=tempfile.gettempdir())
        archive = subprocess.run(
            ["git", "-C", repo, "archive", sha.stdout.strip(), "fastkds"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", unpacked], input=archive.stdout, check=True)
        os.rename(os.path.join(unpacked, "fastkds"), os.path.join(unpacked, "fastkds_base"))
        try:
            os.rename(unpacked, folder)
        except OSError:  # another run unpacked it meanwhile
            shutil.rmtree(unpacked)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("fastkds_base")


def problem(args):
    """``(Y, n_clusters, settings, title)`` of the fits: a set of
    ``bench/real_data.py`` at the defaults, or ``bench/fit_threads.py``'s
    problem (MNIST-5 at the paper's settings, or the generated blobs)."""
    if args.data_set:
        Y, labels = load_data_set(args.data_set, find_data_dir(), 0)
        k = np.unique(labels).size
        return Y, k, {}, f"{dict(DATA_SETS)[args.data_set]}, n={Y.shape[0]}, KDSClustering({k}) at its defaults"
    Y, settings, title = fit_threads.problem(args)
    return Y, 5, settings, title


def fits_of(seconds, version, n_jobs):
    """``{(repeat, seed): seconds}`` of one version's fits on ``n_jobs`` threads,
    from ``seconds[version, repeat, seed, n_jobs]``."""
    return {key[1:3]: s for key, s in seconds.items() if key[0] == version and key[3] == n_jobs}


def summary(seconds, versions, n_jobs):
    """The table's rows from ``seconds[version, repeat, seed, n_jobs]``: a
    version's summed fit seconds for each thread count, and the speed-ups of
    each count after the first against it, summed and fit by fit."""
    rows = []
    first = n_jobs[0]
    for version in versions:
        fits = {j: fits_of(seconds, version, j) for j in n_jobs}
        sums = {j: sum(fits[j].values()) for j in n_jobs}
        row = [version] + [f"{sums[j]:.2f}" for j in n_jobs]
        for j in n_jobs[1:]:
            paired = [fits[first][pair] / fits[j][pair] for pair in fits[first]]
            row += [f"{sums[first] / sums[j]:.2f}x", f"{np.median(paired):.2f}x"]
        rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the git revision to compare with (a commit, branch or tag)")
    ap.add_argument("--data", default=None, help="the mnist/ folder (default: mnist/ in the data folder)")
    ap.add_argument("--data-set", default=None, choices=[name for name, _ in DATA_SETS], help="a set of real_data.py")
    ap.add_argument("--synthetic", type=int, default=0, help="fit N generated points instead of MNIST-5")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    packages = {"base": base_package(args.base), "this tree": fastkds}
    Y, k, settings, title = problem(args)
    warnings.simplefilter("ignore")
    for package in packages.values():  # compile every kernel, then the small fit's path
        package.warmup(dtypes=(Y.dtype,))
        package.KDSClustering(k, n_atoms=20, max_epochs=2).fit(Y[:500])
    seconds, outputs = {}, {}
    for r in range(args.repeats):
        for seed in args.seeds:
            order = list(packages) if (r + seed) % 2 == 0 else list(packages)[::-1]
            for version in order:
                for n_jobs in args.n_jobs:
                    t0 = time.perf_counter()
                    model = packages[version].KDSClustering(k, random_state=seed, n_jobs=n_jobs, **settings).fit(Y)
                    seconds[version, r, seed, n_jobs] = time.perf_counter() - t0
                    found = (model.labels_.tobytes(), model.components_.tobytes())
                    if outputs.setdefault(seed, found) != found:
                        raise SystemExit(f"seed {seed}: {version} at n_jobs={n_jobs} gives other labels or atoms")
    fits = len(args.seeds) * args.repeats
    print(f"{title}; base {args.base} against this tree; {fits} fits a version and thread count, in one run")
    header = ["version"] + [f"n_jobs={j}, s" for j in args.n_jobs]
    for j in args.n_jobs[1:]:
        header += [f"{j} against {args.n_jobs[0]}, summed", "fit by fit, median"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in summary(seconds, list(packages), args.n_jobs):
        print("| " + " | ".join(row) + " |")
    changes = []
    for j in args.n_jobs:
        base, this = (sum(fits_of(seconds, version, j).values()) for version in packages)
        changes.append(f"n_jobs={j} {100 * (this / base - 1):+.1f}%")
    print("this tree's summed seconds against the base's: " + ", ".join(changes))
    print("labels and atoms: the same bytes for both versions, every seed and thread count")


if __name__ == "__main__":
    main()

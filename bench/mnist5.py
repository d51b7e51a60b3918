"""MNIST-5 at the paper's settings (m=500, T=100, lam=0.5;
``fastkds.experiments.PAPER_SETTINGS["mnist5"]``): accuracy and fit time,
with the estimator's defaults otherwise.

    python bench/mnist5.py [--data ../shared/data/mnist] [--seeds 0 1 2]
                           [--n-jobs 1 2] [--step centred|paper] [--encoder auto|apg|active-set]
                           [--max-epochs 100] [--float32]

``--n-jobs`` fits each seed once per thread count given, in this run (the
results do not depend on it; the times do), ``--repeats`` times over; the
last lines then sum each count's fit seconds over the fits and give the
speed-up against the first, and the median (and range) of the speed-ups of
the fits of one seed and repeat, which one fit slowed by the machine moves
less than it moves the sums.
"""

import argparse
import os
import time
import warnings

import numpy as np

from fastkds import KDSClustering, clustering_accuracy, load_mnist, warmup
from fastkds.datasets import find_data_dir
from fastkds.experiments import PAPER_SETTINGS

PAPER = PAPER_SETTINGS["mnist5"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data",
        default=None,
        help="the mnist/ folder (default: mnist/ in the data folder of fastkds.datasets.find_data_dir)",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--repeats", type=int, default=1, help="fit every seed and thread count this many times")
    ap.add_argument("--max-epochs", type=int, default=100)
    ap.add_argument("--n-jobs", type=int, nargs="+", default=[None])
    ap.add_argument("--step", default="centred", choices=["centred", "paper"])
    ap.add_argument("--encoder", default="auto", choices=["auto", "apg", "active-set"])
    ap.add_argument("--float32", action="store_true", help="fit on the images in float32 (default: float64)")
    args = ap.parse_args()
    if args.data is None:
        data_dir = find_data_dir()
        if data_dir is None:
            ap.error("no data folder: give --data DIR (the mnist/ folder) or set FASTKDS_DATA")
        args.data = os.path.join(data_dir, "mnist")
    Y, y = load_mnist(args.data)
    if args.float32:
        Y = Y.astype(np.float32)
    print(
        f"MNIST-5: n={Y.shape[0]}, d={Y.shape[1]}, k=5, m={PAPER.n_atoms}, T={PAPER.n_iter}, lam={PAPER.lam:g}, "
        f"step={args.step}, encoder={args.encoder}, {Y.dtype.name}, max_epochs={args.max_epochs}"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # compile: every kernel (500 atoms' statistics take another than
        # the small fit's), then the small fit's path
        warmup(dtypes=(Y.dtype,))
        KDSClustering(5, n_atoms=20, max_epochs=2, step=args.step, encoder=args.encoder).fit(Y[:500])
    fits = {}  # (repeat, seed, n_jobs): fit seconds
    runs = ((r, seed, n_jobs) for r in range(args.repeats) for seed in args.seeds for n_jobs in args.n_jobs)
    for r, seed, n_jobs in runs:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = KDSClustering(
                5,
                n_atoms=PAPER.n_atoms,
                lam=PAPER.lam,
                n_iter=PAPER.n_iter,
                max_epochs=args.max_epochs,
                random_state=seed,
                n_jobs=n_jobs,
                step=args.step,
                encoder=args.encoder,
            ).fit(Y)
        sec = time.perf_counter() - t0
        fits[r, seed, n_jobs] = sec
        t = model.timings_
        print(
            (f"repeat {r}, " if args.repeats > 1 else "")
            + f"seed {seed}, n_jobs={n_jobs}: accuracy {clustering_accuracy(y, model.labels_):.4f}, "
            f"fit {sec:.2f} s ({model.kds_.n_iter_} epochs; dictionary {t['dictionary']:.2f} s, "
            f"encode {t['encode']:.2f} s, embed {t['embed']:.2f} s, k-means {t['kmeans']:.2f} s)"
        )
    # each thread count's fit seconds, summed over the seeds and repeats
    seconds = {n_jobs: sum(sec for key, sec in fits.items() if key[2] == n_jobs) for n_jobs in args.n_jobs}
    if len(seconds) > 1:  # the speed-up from threads, on the fits of this run
        base = args.n_jobs[0]
        sums = ", ".join(f"n_jobs={n_jobs} {sec:.2f} s" for n_jobs, sec in seconds.items())
        ratios = ", ".join(
            f"n_jobs={n_jobs} {seconds[base] / sec:.2f}x" for n_jobs, sec in seconds.items() if n_jobs != base
        )
        print(f"fit seconds summed over the fits: {sums}; against n_jobs={base}: {ratios}")
        for n_jobs in args.n_jobs[1:]:
            paired = [fits[r, seed, base] / fits[r, seed, n_jobs] for r in range(args.repeats) for seed in args.seeds]
            print(
                f"speed-up of n_jobs={n_jobs} against n_jobs={base}, fit by fit ({len(paired)} pairs): "
                f"median {np.median(paired):.2f}x, range {min(paired):.2f}-{max(paired):.2f}x"
            )


if __name__ == "__main__":
    main()

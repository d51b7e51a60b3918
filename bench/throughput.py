"""Encoder throughput against the NumPy oracle, measured in one run.

    python bench/throughput.py [--n 1000000] [--dataset moons|mnist]

moons: d=2, m=24, T=15, lam=5 (the paper's settings,
``fastkds.experiments.PAPER_SETTINGS``); mnist: MNIST-5 from the data folder
(``--data``, else ``fastkds.datasets.find_data_dir``), m=500, T=100,
lam=0.5. Prints points/s for fastkds
(float64, float32) and for the oracle in the same dtype, and their ratio.
Both are timed the same way, the best of ``--repeat`` calls; compilation
excluded. ``--oracle-repeat 1`` shortens a long run (the ratio then says so).
"""

import argparse
import os
import time

import numpy as np

from fastkds import _naive, load_mnist, make_moons, sparse_encode
from fastkds.datasets import find_data_dir
from fastkds.experiments import PAPER_SETTINGS


def best_of(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", choices=["moons", "mnist"], default="moons")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--oracle-repeat",
        type=int,
        default=None,
        help="calls of the oracle to take the best of (default: --repeat, as fastkds)",
    )
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument(
        "--step",
        default="paper",
        choices=["paper", "centred"],
        help="the encoder's step (default the paper's, as the README's figures; fastkds's default is centred)",
    )
    ap.add_argument("--data", default=None, help="folder holding mnist/ (default: fastkds.datasets.find_data_dir)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    if args.dataset == "moons":
        Y, _ = make_moons(args.n, random_state=0)
    else:
        data_dir = find_data_dir(args.data)
        if data_dir is None:
            ap.error("no data folder: give --data DIR (holding mnist/) or set FASTKDS_DATA")
        Y, _ = load_mnist(os.path.join(data_dir, "mnist"))
    paper = PAPER_SETTINGS["moons" if args.dataset == "moons" else "mnist5"]
    m, T, lam = paper.n_atoms, paper.n_iter, paper.lam
    W = Y[rng.choice(Y.shape[0], m, replace=False)]
    n = Y.shape[0]
    print(f"{args.dataset}: n={n:,} d={Y.shape[1]} m={m} T={T} lam={lam}")
    oracle_repeat = args.repeat if args.oracle_repeat is None else args.oracle_repeat
    for dtype in (np.float64, np.float32):
        Yd = Y.astype(dtype)
        t0 = time.perf_counter()
        sparse_encode(Yd[:64], W, lam=lam, encoder="apg", n_iter=T, step=args.step)
        print(f"  first call (compile or cache load), {np.dtype(dtype).name}: {time.perf_counter() - t0:.2f} s")
        name = np.dtype(dtype).name
        sec = best_of(
            lambda: sparse_encode(Yd, W, lam=lam, encoder="apg", n_iter=T, n_jobs=args.n_jobs, step=args.step),
            args.repeat,
        )
        sec_naive = best_of(lambda: _naive.encode(Yd, W.astype(dtype), lam, T, step=args.step), oracle_repeat)
        how = f"best of {args.repeat}" + ("" if oracle_repeat == args.repeat else f", oracle best of {oracle_repeat}")
        print(
            f"  fastkds {name}: {sec:8.3f} s  {n / sec:14,.0f} points/s  {sec_naive / sec:6.1f}x the NumPy "
            f"oracle in {name} ({how})"
        )
        print(f"  NumPy oracle {name}: {sec_naive:8.3f} s  {n / sec_naive:14,.0f} points/s")


if __name__ == "__main__":
    main()

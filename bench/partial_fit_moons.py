"""Learning from a stream: ``KDS.partial_fit`` over chunks of noisy moons,
against a full ``fit`` on the same points, then clustering the stream with
the learned dictionary.

    python bench/partial_fit_moons.py [--chunks 100] [--chunk-size 10000] [--n-iter 30] [--solver exact]

Each chunk is generated when it is needed (seeded), so learning holds one
chunk at a time. The full fit and the evaluation need all the points at once
(1,000,000 x 2 floats here). The objective of each model is its mean KDS
objective over all the points; clustering uses ``KDSClustering`` with
``init=<the streamed dictionary>, max_epochs=1``: one exact dictionary step
from the streamed dictionary, then the embedding (two encoding passes).
"""

import argparse
import time
import warnings

import numpy as np

from fastkds import KDS, KDSClustering, clustering_accuracy, make_moons
from fastkds.experiments import PAPER_SETTINGS
from fastkds.datasets import moons_bayes_labels as bayes_labels  # the generating model's classifier

PAPER = PAPER_SETTINGS["moons"]  # its m and lam (the demo's too)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--chunk-size", type=int, default=10000)
    ap.add_argument(
        "--n-iter", type=int, default=30, help=f"encoder iterations T (the demo's 30; the paper's {PAPER.n_iter})"
    )
    ap.add_argument("--solver", default="exact", choices=["exact", "unrolled"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    T = args.n_iter
    params = dict(n_atoms=PAPER.n_atoms, lam=PAPER.lam, n_iter=T, random_state=args.seed)
    extra = dict(solver="unrolled", batch_size=10000, train_step=True) if args.solver == "unrolled" else {}
    n = args.chunks * args.chunk_size
    print(
        f"noisy moons stream: {args.chunks} chunks x {args.chunk_size:,} = {n:,} points, m={PAPER.n_atoms}, T={T}, "
        f"lam={PAPER.lam:g}, solver={args.solver!r}"
    )

    def chunk(i):
        return make_moons(args.chunk_size, random_state=10_000 * args.seed + i)

    stream = KDS(**params, **extra)
    t0 = time.perf_counter()
    for i in range(args.chunks):
        stream.partial_fit(chunk(i)[0])
    t_stream = time.perf_counter() - t0

    parts = [chunk(i) for i in range(args.chunks)]
    Y = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    del parts
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = KDS(**params).fit(Y)
    t_full = time.perf_counter() - t0
    f_stream, f_full = stream.objective(Y), full.objective(Y)
    print(f"partial_fit over the stream: {t_stream:6.1f} s, objective {f_stream:.6f}")
    print(f"fit (exact solver) on all:   {t_full:6.1f} s, objective {f_full:.6f} ({full.n_iter_} epochs)")
    print(f"objective ratio stream / full: {f_stream / f_full:.4f}")

    t0 = time.perf_counter()
    model = KDSClustering(2, **params, init=stream.components_, max_epochs=1).fit(Y)
    t_cl = time.perf_counter() - t0
    acc = clustering_accuracy(y, model.labels_)
    t0 = time.perf_counter()
    bayes = np.mean(bayes_labels(Y) == y)
    print(
        f"clustering the stream with the streamed dictionary: accuracy {acc:.5f} in {t_cl:.1f} s "
        f"(Bayes classifier on the same points: {bayes:.5f})"
    )


if __name__ == "__main__":
    main()

"""Noisy moons as a Dask array: KDSClustering on a LocalCluster against the
in-memory fit of the same points, in the same run.

    python bench/dask_moons.py [--n 1000000] [--blocks 20] [--workers 2] [--n-iter 30]

The settings are the demo's (``fastkds demo``: m=24, lam=5, T=30,
max_epochs=100, seed 0). The cluster has ``--workers`` worker processes of
one thread each on the loopback. Both sides are warmed up first (kernels
compiled or loaded from the cache), so the times are of the fits. The Dask
time includes shipping the data to the workers (``from_array`` of the
in-memory array). Prints accuracy, wall time of each fit and their ratio,
and whether the dictionaries and labels agree.
"""

import argparse
import time
import warnings

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n-iter", type=int, default=30)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import dask.array as da
    from distributed import Client, LocalCluster

    from fastkds import KDSClustering, clustering_accuracy, make_moons

    params = dict(n_atoms=24, lam=5.0, n_iter=args.n_iter, max_epochs=args.epochs, random_state=args.seed)
    Y, y = make_moons(args.n, random_state=args.seed)
    chunk = -(-args.n // args.blocks)
    print(
        f"noisy moons n={args.n:,} as {args.blocks} blocks of {chunk:,} rows; m=24, T={args.n_iter}, lam=5; "
        f"LocalCluster: {args.workers} worker processes x 1 thread"
    )
    warnings.simplefilter("ignore")
    small, _ = make_moons(2000, random_state=1)
    KDSClustering(2, **{**params, "max_epochs": 2}).fit(small)  # compile / load the kernels

    t0 = time.perf_counter()
    ref = KDSClustering(2, **params).fit(Y)
    t_mem = time.perf_counter() - t0
    acc_mem = clustering_accuracy(y, ref.labels_)

    with (
        LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        KDSClustering(2, **{**params, "max_epochs": 2}).fit(da.from_array(small, chunks=500))  # warm the workers
        X = da.from_array(Y, chunks=(chunk, Y.shape[1]))
        t0 = time.perf_counter()
        model = KDSClustering(2, **params).fit(X)
        labels = model.labels_.compute()
        t_dask = time.perf_counter() - t0
    acc_dask = clustering_accuracy(y, labels)

    print(f"{'':>10} {'accuracy':>9} {'fit s':>7} {'epochs':>6}")
    print(f"{'in-memory':>10} {acc_mem:9.5f} {t_mem:7.1f} {ref.kds_.n_iter_:6d}")
    print(f"{'dask':>10} {acc_dask:9.5f} {t_dask:7.1f} {model.kds_.n_iter_:6d}")
    print(f"dask / in-memory wall time: {t_dask / t_mem:.2f}")
    print(
        f"same labels: {bool(np.array_equal(labels, ref.labels_))}; "
        f"max |W_dask - W_mem| = {np.abs(model.components_ - ref.components_).max():.2e}"
    )
    print("dask stage times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in model.timings_.items()))
    print("in-memory stage times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in ref.timings_.items()))


if __name__ == "__main__":
    main()

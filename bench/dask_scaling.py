"""Epoch time of a Dask fit against the number of blocks and workers, and the
overhead per epoch over the in-memory fit, measured in the same run.

    python bench/dask_scaling.py [--n 200000] [--epochs 4] [--blocks 2,4,8,16,32] [--workers 1,2]

One epoch = encode every block, reduce the statistics, solve on the client
(``fastkds.solvers.solve_dictionary``; the time between two of its calls).
The first epoch (warm-up) is dropped and the median of the rest reported.
The in-memory baseline runs on all cores of this process (Numba threads);
a LocalCluster has W worker processes of one thread each on the loopback;
"sync" is Dask's synchronous scheduler in this process (the block tasks and
the reduction without any distribution).

overhead = dask epoch - in-memory epoch, in seconds and per block.
"""

import argparse
import time
import warnings

import numpy as np


def epoch_times(fit):
    """Run ``fit()`` and return the seconds of each epoch after the first."""
    from fastkds import solvers

    stamps = []
    real = solvers.solve_dictionary

    def timed(*args, **kwargs):
        stamps.append(time.perf_counter())
        return real(*args, **kwargs)

    solvers.solve_dictionary = timed
    try:
        fit()
    finally:
        solvers.solve_dictionary = real
    return np.diff(stamps)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--n-iter", type=int, default=30)
    ap.add_argument("--blocks", default="2,4,8,16,32")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    blocks_list = [int(b) for b in args.blocks.split(",")]
    workers_list = [int(w) for w in args.workers.split(",")]

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    from fastkds import KDS, make_moons

    warnings.simplefilter("ignore")
    Y, _ = make_moons(args.n, random_state=0)
    params = dict(
        n_atoms=24,
        lam=5.0,
        n_iter=args.n_iter,
        max_epochs=args.epochs,
        tol=0.0,
        init="random",
        presample=None,
        random_state=0,
    )
    KDS(**{**params, "max_epochs": 2}).fit(Y[:2000])  # compile / load the kernels

    base = np.median(epoch_times(lambda: KDS(**params).fit(Y)))
    print(f"noisy moons n={args.n:,}, m=24, T={args.n_iter}, lam=5; median of epochs 2..{args.epochs}")
    print(f"in-memory epoch: {base:.3f} s ({args.n / base / 1e6:.2f} M points/s)")
    print(f"{'scheduler':>12} {'blocks':>6} {'epoch s':>8} {'x mem':>6} {'overhead s':>10} {'per block ms':>12}")

    def row(name, nb, X):
        t = np.median(epoch_times(lambda: KDS(**params).fit(X)))
        over = t - base
        print(f"{name:>12} {nb:>6} {t:8.3f} {t / base:6.2f} {over:10.3f} {1e3 * over / nb:12.1f}")

    with dask.config.set(scheduler="synchronous"):
        for nb in blocks_list:
            row("sync", nb, da.from_array(Y, chunks=(-(-args.n // nb), 2)))
    for w in workers_list:
        with (
            LocalCluster(
                n_workers=w, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
            ) as cluster,
            Client(cluster),
        ):
            KDS(**{**params, "max_epochs": 2}).fit(da.from_array(Y[:2000], chunks=500))  # warm the workers
            for nb in blocks_list:
                X = da.from_array(Y, chunks=(-(-args.n // nb), 2)).persist()
                row(f"{w} worker{'s' if w > 1 else ''}", nb, X)
                del X


if __name__ == "__main__":
    main()

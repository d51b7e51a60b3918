"""One training epoch of the unrolled solver on MNIST-5 (m=500, T=100,
lam=0.5, batch 1024, fixed step): fastkds's Numba kernels against the NumPy
oracle (fastkds._naive.unrolled_loss_grad, the same Adam update) in the same
run. Compilation is excluded (the kernels are called once before timing).
The settings are the paper's (``fastkds.experiments.PAPER_SETTINGS["mnist5"]``).

    python bench/unrolled_epoch.py [--data ../shared/data/mnist] [--threads N]

Both are timed once, the same way. The ratio is printed for float64 only,
the dtype the oracle runs in; float32 gets its time, not a ratio against a
float64 baseline.
"""

import argparse
import os
import time

import numpy as np

from fastkds import _naive, load_mnist
from fastkds._config import numba_threads
from fastkds.datasets import find_data_dir
from fastkds.experiments import PAPER_SETTINGS
from fastkds.unrolled import UnrolledTrainer, _top_eigenpair

PAPER = PAPER_SETTINGS["mnist5"]
LAM, T, M, BATCH = PAPER.lam, PAPER.n_iter, PAPER.n_atoms, PAPER.training["batch_size"]
#: the Adam step of the paper's training (its step is fixed)
ADAM = {key: PAPER.training[key] for key in ("train_step", "learning_rate", "clip_norm")}


def oracle_epoch(Y, W0, batches):
    """The same epoch with the NumPy oracle's gradient and the same Adam."""
    W = W0.copy()
    mW = np.zeros_like(W)
    vW = np.zeros_like(W)
    b1, b2, lr, eps, clip = 0.9, 0.999, ADAM["learning_rate"], 1e-8, ADAM["clip_norm"]
    for k, idx in enumerate(batches, start=1):
        top, u = _top_eigenpair(W)
        alpha = 1.0 / top
        _, g, ga = _naive.unrolled_loss_grad(Y[idx], W, LAM, T, alpha)
        g -= (2.0 * ga * alpha / top) * np.outer(u, u @ W)  # the step depends on W
        norm = np.linalg.norm(g)
        if norm > clip:
            g *= clip / (norm + 1e-6)
        mW = b1 * mW + (1 - b1) * g
        vW = b2 * vW + (1 - b2) * g * g
        W -= lr * (mW / (1 - b1**k)) / (np.sqrt(vW / (1 - b2**k)) + eps)
    return W


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data",
        default=None,
        help="the mnist/ folder (default: mnist/ in the data folder of fastkds.datasets.find_data_dir)",
    )
    ap.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    ap.add_argument("--no-oracle", action="store_true")
    args = ap.parse_args()
    if args.data is None:
        data_dir = find_data_dir()
        if data_dir is None:
            ap.error("no data folder: give --data DIR (the mnist/ folder) or set FASTKDS_DATA")
        args.data = os.path.join(data_dir, "mnist")
    Y, _ = load_mnist(args.data)
    n = Y.shape[0]
    rng = np.random.RandomState(0)
    W0 = Y[np.sort(rng.choice(n, M, replace=False))]
    order = rng.permutation(n)
    batches = [np.sort(order[s : s + BATCH]) for s in range(0, n, BATCH)]
    print(f"MNIST-5 n={n}, d={Y.shape[1]}, m={M}, T={T}, lam={LAM}, batch {BATCH} ({len(batches)} batches), fixed step")
    results = {}
    for dtype in (np.float64, np.float32):
        Yd = Y.astype(dtype)
        with numba_threads(args.threads):
            warm = UnrolledTrainer(W0, lam=LAM, n_iter=T, **ADAM)
            warm.adam_step(np.ascontiguousarray(Yd[:64]))  # compile / load from cache
            trainer = UnrolledTrainer(W0, lam=LAM, n_iter=T, **ADAM)
            t0, c0 = time.perf_counter(), time.process_time()
            for idx in batches:
                trainer.adam_step(np.ascontiguousarray(Yd[idx]))
            results[dtype] = (time.perf_counter() - t0, trainer.W, time.process_time() - c0)
        print(
            f"fastkds epoch, {np.dtype(dtype).name}: {results[dtype][0]:.2f} s "
            f"(CPU time of all threads: {results[dtype][2]:.2f} s)"
        )
    if not args.no_oracle:
        t0, c0 = time.perf_counter(), time.process_time()
        W_oracle = oracle_epoch(Y, W0, batches)
        sec, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"NumPy oracle epoch, float64: {sec:.2f} s (CPU time of all threads: {cpu:.2f} s)")
        s, _, c = results[np.float64]
        print(f"  ratio oracle / fastkds, both float64: {sec / s:.1f}x wall, {cpu / c:.1f}x CPU time")
        diff = np.abs(results[np.float64][1] - W_oracle).max()
        print(f"  max |W_fastkds - W_oracle| after the epoch (float64): {diff:.2e}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

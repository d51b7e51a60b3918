"""Encoder throughput of the CUDA path (fastkds.gpu) against the CPU path.

    PYTHONPATH=. python3 bench/gpu_throughput.py --n 10000000

Needs an NVIDIA GPU with numba-cuda (see docs/gpu.md). Two workloads:

- moons: noisy two moons, d=2, m=24, T=15, lam=5 (the paper's settings);
  the GPU encodes ``--n`` points streamed in chunks of ``--chunk`` rows, the
  CPU ``--cpu-n`` points (fastkds.sparse_encode, all cores);
- mnist-like: ``--mnist-n`` random clustered non-negative unit-norm vectors,
  d=784, m=500, T=100, lam=0.5 (MNIST-5's settings), both paths on all points.

Each in float64 and float32, with each encoder of ``--kernels`` (``warp``:
one point per warp; ``thread``: one point per thread), the CPU path measured
once per case and dtype in the same run. Times are end to end (host arrays
in, CSR array out: transfers and CSR assembly included), the best of
``--repeat`` runs after a warm-up call that compiles (or loads cached)
kernels; ``--sets`` buffer sets (CUDA streams) are kept in flight. The GPU
codes are checked against the CPU codes on the first ``--check-n`` points:
max |X_gpu - X_cpu| within 1e-10 (float64) / 1e-4 (float32), and the number
of rows whose support differs. Prints one table; exits 1 if a check fails.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

from fastkds import make_moons, sparse_encode
from fastkds.experiments import PAPER_SETTINGS

MOONS, MNIST5 = PAPER_SETTINGS["moons"], PAPER_SETTINGS["mnist5"]

TOL = {"float64": 1e-10, "float32": 1e-4}


def best_of(fn, repeat):
    """Best wall time of ``repeat`` calls and the last result."""
    best = np.inf
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def mnist_like(n, d=784, k=10, seed=0):
    """Clustered non-negative unit-norm vectors, shaped like scaled MNIST rows."""
    rng = np.random.default_rng(seed)
    protos = rng.random((k, d)) ** 3
    Y = protos[rng.integers(0, k, n)] + 0.3 * rng.random((n, d)) ** 3
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    return Y


def compare(C_gpu, C_cpu, n):
    """Max entry difference and rows with a different support, first n rows."""
    A = C_gpu[:n]
    B = C_cpu[:n]
    diff = abs(A - B)
    max_diff = float(diff.max()) if diff.nnz else 0.0
    same = [
        np.array_equal(A.indices[A.indptr[i] : A.indptr[i + 1]], B.indices[B.indptr[i] : B.indptr[i + 1]])
        for i in range(n)
    ]
    return max_diff, n - int(np.sum(same))


def run_case(name, Y, m, T, lam, n_gpu, n_cpu, n_check, chunk, repeat, dtype, gpu, kernel, sets,
             n_slots=None, cpu_cache=None):  # fmt: skip
    rng = np.random.default_rng(1)
    W = Y[rng.choice(Y.shape[0], m, replace=False)]
    Yd = np.ascontiguousarray(Y, dtype=dtype)
    Yg, Yc = Yd[:n_gpu], Yd[:n_cpu]
    prepared = gpu.CudaPreparedDictionary(W, lam, T, dtype, kernel=kernel)
    chunk = min(chunk, n_gpu)
    n_sets = max(1, min(sets, -(-n_gpu // chunk)))
    buffers = [prepared.allocate(chunk, n_slots=n_slots) for _ in range(n_sets)]

    t0 = time.perf_counter()
    gpu.encode_csr_cuda(Yg[: min(4096, n_gpu)], prepared, chunk, buffers=buffers)  # compile / load cache
    t_first_gpu = time.perf_counter() - t0
    t_gpu, C_gpu = best_of(lambda: gpu.encode_csr_cuda(Yg, prepared, chunk, buffers=buffers), repeat)

    key = (name, np.dtype(dtype).name)
    if cpu_cache is not None and key in cpu_cache:
        t_cpu, C_cpu = cpu_cache[key]
    else:
        sparse_encode(Yc[:256], W, lam=lam, encoder="apg", n_iter=T)  # compile / load cache
        t_cpu, C_cpu = best_of(lambda: sparse_encode(Yc, W, lam=lam, encoder="apg", n_iter=T), repeat)
        if cpu_cache is not None:
            cpu_cache[key] = (t_cpu, C_cpu)

    n_check = min(n_check, n_gpu, n_cpu)
    max_diff, rows_diff = compare(C_gpu, C_cpu, n_check)
    dt = np.dtype(dtype).name
    label = f"{name} {kernel}" + ("" if n_slots is None else f" slots={n_slots}")
    return {
        "case": label,
        "dtype": dt,
        "n_gpu": n_gpu,
        "gpu_pps": n_gpu / t_gpu,
        "t_gpu": t_gpu,
        "n_cpu": n_cpu,
        "cpu_pps": n_cpu / t_cpu,
        "t_cpu": t_cpu,
        "ratio": (n_gpu / t_gpu) / (n_cpu / t_cpu),
        "max_diff": max_diff,
        "rows_diff": rows_diff,
        "n_check": n_check,
        "ok": max_diff <= TOL[dt],
        "first_gpu": t_first_gpu,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000, help="moons points on the GPU")
    ap.add_argument("--cpu-n", type=int, default=1_000_000, help="moons points on the CPU")
    ap.add_argument("--mnist-n", type=int, default=20_000, help="mnist-like points (both paths)")
    ap.add_argument("--check-n", type=int, default=20_000, help="points whose codes are compared")
    ap.add_argument("--chunk", type=int, default=1 << 20, help="GPU chunk rows (moons)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--skip-mnist", action="store_true")
    ap.add_argument("--kernels", default="warp,thread", help="encoders to measure: warp, thread")
    ap.add_argument("--sets", type=int, default=3, help="buffer sets (streams) in flight")
    ap.add_argument("--slots", default="auto",
                    help="comma list of thread-encoder threads per launch to try on moons (scratch "
                         "columns; 'auto' = one per row up to the scratch budget)")  # fmt: skip
    args = ap.parse_args()

    from numba import cuda

    from fastkds import gpu

    gpu.require_cuda()
    # small warm-up grids trip numba's occupancy warning; it is expected here
    warnings.filterwarnings("ignore", message=".*under-utilization.*")
    dev = "CUDA simulator" if gpu.in_simulator() else cuda.get_current_device().name
    dev = dev.decode() if isinstance(dev, bytes) else dev
    print(f"GPU: {dev}; CPU: {os.cpu_count()} cores; numpy {np.__version__}", flush=True)

    rows = []
    cpu_cache = {}
    kernels = args.kernels.split(",")
    moons_n = max(args.n, args.cpu_n)
    print(f"generating {moons_n:,} moons points ...", flush=True)
    Ym, _ = make_moons(moons_n, random_state=0)
    slots = [None if s == "auto" else int(s) for s in args.slots.split(",")]
    for dt in args.dtypes.split(","):
        for kernel in kernels:
            for ns in slots if kernel == "thread" else [None]:
                print(f"moons {dt} {kernel} slots={ns or 'auto'} ...", flush=True)
                rows.append(run_case(f"moons m={MOONS.n_atoms} T={MOONS.n_iter}", Ym, MOONS.n_atoms, MOONS.n_iter,
                                     MOONS.lam, args.n, args.cpu_n, args.check_n,
                                     args.chunk, args.repeat, np.dtype(dt), gpu, kernel, args.sets, ns,
                                     cpu_cache))  # fmt: skip
                print_row(rows[-1])
    del Ym
    cpu_cache.clear()
    if not args.skip_mnist:
        Yx = mnist_like(args.mnist_n)
        for dt in args.dtypes.split(","):
            for kernel in kernels:
                print(f"mnist-like {dt} {kernel} ...", flush=True)
                rows.append(run_case(f"mnist-like m={MNIST5.n_atoms} T={MNIST5.n_iter}", Yx, MNIST5.n_atoms,
                                     MNIST5.n_iter, MNIST5.lam, args.mnist_n, args.mnist_n,
                                     args.check_n, args.mnist_n, args.repeat, np.dtype(dt), gpu, kernel,
                                     args.sets, None, cpu_cache))  # fmt: skip
                print_row(rows[-1])

    print()
    print(HEAD)
    print("-" * len(HEAD))
    for r in rows:
        print_row(r)
    print(
        f"(end-to-end best of {args.repeat}; 'supp!=' rows of {rows[0]['n_check']:,} checked "
        "whose support differs; '1st GPU s' the warm-up call with compilation or cache load)"
    )
    return 0 if all(r["ok"] for r in rows) else 1


HEAD = (f"{'case':<36}{'dtype':<9}{'n GPU':>11}{'GPU pts/s':>14}{'n CPU':>11}{'CPU pts/s':>14}"
            f"{'GPU/CPU':>9}{'max|dX|':>10}{'supp!=':>8}{'check':>7}{'1st GPU s':>10}")  # fmt: skip


def print_row(r):
    print(f"{r['case']:<36}{r['dtype']:<9}{r['n_gpu']:>11,}{r['gpu_pps']:>14,.0f}{r['n_cpu']:>11,}"
          f"{r['cpu_pps']:>14,.0f}{r['ratio']:>9.1f}{r['max_diff']:>10.1e}"
          f"{r['rows_diff']:>8}{'ok' if r['ok'] else 'FAIL':>7}{r['first_gpu']:>10.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

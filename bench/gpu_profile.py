"""Where the time of the CUDA encoder goes, phase by phase (synchronised
after each phase, so the sum exceeds the pipelined end-to-end time).

    PYTHONPATH=. python3 bench/gpu_profile.py [--n 10000000] [--dtype float32] [--kernel warp]

Noisy moons, m=24, T=15, lam=5, chunks of --chunk rows, the same steps as
``fastkds.gpu.encode_csr_cuda`` on one buffer set. Ends with the pipelined
end-to-end time of ``encode_csr_cuda`` on the same data for comparison.
Needs a GPU.
"""

import argparse
import time
from collections import defaultdict

import numpy as np

from fastkds import _config, _cuda_kernels, _host_copies, gpu, make_moons
from fastkds.experiments import PAPER_SETTINGS

MOONS = PAPER_SETTINGS["moons"]  # the paper's m, T and lam


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--chunk", type=int, default=1 << 20)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--kernel", default="warp", choices=["warp", "thread"])
    ap.add_argument("--slots", type=int, default=65536, help="thread encoder's threads per launch")
    args = ap.parse_args()
    gpu.require_cuda()
    Y, _ = make_moons(args.n, random_state=0)
    Y = np.ascontiguousarray(Y, dtype=args.dtype)
    W = Y[np.random.default_rng(0).choice(args.n, MOONS.n_atoms, replace=False)].astype(np.float64)
    prep = gpu.CudaPreparedDictionary(W, MOONS.lam, MOONS.n_iter, Y.dtype, kernel=args.kernel)
    buf = prep.allocate(args.chunk, n_slots=args.slots)
    gpu.encode_csr_cuda(Y[:4096], prep, args.chunk, buffers=buf)  # compile
    t = defaultdict(float)
    s = buf.stream

    def phase(name, fn):
        t0 = time.perf_counter()
        fn()
        s.synchronize()
        t[name] += time.perf_counter() - t0

    n_all = args.n
    indptr = np.empty(n_all + 1, dtype=np.int32)
    indptr[0] = 0
    cap = n_all * 4
    indices = np.empty(cap, dtype=np.int32)
    data = np.empty(cap, dtype=Y.dtype)
    pos = 0
    wall0 = time.perf_counter()
    for start in range(0, n_all, args.chunk):
        C = Y[start : start + args.chunk]
        n = C.shape[0]
        phase("host: copy into pinned buffer", lambda: prep.stage(C, buf))
        phase("copy data to device", lambda: buf.d_Y[:n].copy_to_device(buf.h_Y[:n], stream=s))
        phase(f"kernel: encode ({args.kernel})", lambda: prep._encode_on_device(buf, n))
        phase("kernel: prefix sum", lambda: gpu._scan_on_device(buf.d_counts, n, buf.d_indptr, buf.d_tiles, s))
        phase(
            "kernel: fill CSR",
            lambda: gpu._launch(_cuda_kernels.fill_kernel, n, s)(buf.d_X, n, buf.d_indptr, buf.d_indices, buf.d_data),
        )
        phase("copy indptr to host", lambda: buf.d_indptr[: n + 1].copy_to_host(buf.h_indptr[: n + 1], stream=s))
        nnz = int(buf.h_indptr[n])
        buf._grow_host(nnz)

        def back():
            buf.d_indices[:nnz].copy_to_host(buf.h_indices[:nnz], stream=s)
            buf.d_data[:nnz].copy_to_host(buf.h_data[:nnz], stream=s)

        phase("copy indices and data to host", back)
        if pos + nnz > cap:
            raise SystemExit("more than 4 entries per row: raise the profile's estimate")
        phase(
            "host: place into the final arrays",
            lambda: _host_copies.place_csr_chunk(
                buf.h_indptr, buf.h_indices, buf.h_data, n, nnz, start, pos, indptr, indices, data
            ),
        )
        pos += nnz
    wall = time.perf_counter() - wall0
    print(f"moons n={n_all:,} {args.dtype} kernel={args.kernel} chunk={args.chunk:,}: {wall:.3f} s serialised, "
          f"{pos / n_all:.2f} entries per row")  # fmt: skip
    for name, sec in sorted(t.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<36} {sec:8.4f} s  {100 * sec / wall:5.1f}%")
    enc = t[f"kernel: encode ({args.kernel})"]
    print(f"  encode kernel alone: {n_all / enc:,.0f} points/s")
    sets = [prep.allocate(args.chunk, n_slots=args.slots) for _ in range(_config.CUDA_BUFFER_SETS)]
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        gpu.encode_csr_cuda(Y, prep, args.chunk, buffers=sets)
        best = min(best, time.perf_counter() - t0)
    print(
        f"  pipelined encode_csr_cuda ({_config.CUDA_BUFFER_SETS} buffer sets), best of 3: {best:.3f} s, "
        f"{n_all / best:,.0f} points/s"
    )


if __name__ == "__main__":
    main()

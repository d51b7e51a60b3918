"""Where the time of the CUDA encoder goes, phase by phase (synchronised
after each phase, so the sum exceeds the pipelined end-to-end time).

    PYTHONPATH=. python3 bench/gpu_profile.py [--n 10000000] [--dtype float32]

Noisy moons, m=24, T=15, lam=5, chunks of --chunk rows. Needs a GPU.
"""

import argparse
import time
from collections import defaultdict

import numpy as np

from fastkds import encoding, gpu, make_moons


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--chunk", type=int, default=1 << 20)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--slots", type=int, default=65536)
    args = ap.parse_args()
    gpu.require_cuda()
    Y, _ = make_moons(args.n, random_state=0)
    Y = Y.astype(args.dtype)
    W = Y[np.random.default_rng(0).choice(args.n, 24, replace=False)].astype(np.float64)
    prep = gpu.CudaPreparedDictionary(W, 5.0, 15, Y.dtype)
    buf = prep.allocate(args.chunk, n_slots=args.slots)
    gpu.encode_csr_cuda(Y[:4096], prep, args.chunk, buffers=buf)  # compile
    t = defaultdict(float)
    s = buf.stream

    def phase(name, fn):
        t0 = time.perf_counter()
        fn()
        s.synchronize()
        t[name] += time.perf_counter() - t0

    parts = []
    wall0 = time.perf_counter()
    for start in range(0, args.n, args.chunk):
        C = Y[start : start + args.chunk]
        n = C.shape[0]
        m = prep.n_atoms
        phase("host copy into pinned buffer", lambda: np.copyto(buf.h_Y[:n], C))
        phase("copy data to device", lambda: buf.d_Y[:n].copy_to_device(buf.h_Y[:n], stream=s))

        def products():
            gpu._bt_kernel[gpu._launch(n * m, s)](buf.d_Y, prep.d_W, n, prep.d_ks, buf.d_Bt)
            gpu._sqnorm_kernel[gpu._launch(n, s)](buf.d_Y, n, prep.d_ks, buf.d_yy)

        phase("kernel: Y W^T and norms", products)
        busy = min(n, buf.n_slots)
        tpb = min(prep.threads_per_block, max(32, -(-busy // 32) * 32))
        blocks = max(1, -(-busy // tpb))
        phase(
            "kernel: encode",
            lambda: gpu._encode_kernel[blocks, tpb, s](
                buf.d_Bt, buf.d_yy, prep.d_G, prep.d_ww, prep.alpha, prep.lam, prep.d_beta, prep.d_ks,
                n, buf.d_X, buf.d_obj, *buf.scratch, *buf.iscratch,
            ),
        )  # fmt: skip
        phase("kernel: count nonzeros", lambda: gpu._count_kernel[gpu._launch(n, s)](buf.d_X, n, buf.d_counts))
        phase("copy counts to host", lambda: buf.d_counts[:n].copy_to_host(buf.h_counts[:n], stream=s))
        indptr = buf.h_indptr[: n + 1]

        def scan():
            indptr[0] = 0
            np.cumsum(buf.h_counts[:n], out=indptr[1:])

        phase("host prefix sum", scan)
        nnz = int(indptr[n])
        buf._grow_csr(nnz)
        phase("copy indptr to device", lambda: buf.d_indptr[: n + 1].copy_to_device(indptr, stream=s))
        phase(
            "kernel: fill CSR",
            lambda: gpu._fill_kernel[gpu._launch(n, s)](buf.d_X, n, buf.d_indptr, buf.d_indices, buf.d_data),
        )

        def back():
            buf.d_indices[:nnz].copy_to_host(buf.h_indices[:nnz], stream=s)
            buf.d_data[:nnz].copy_to_host(buf.h_data[:nnz], stream=s)

        phase("copy CSR to host", back)
        phase(
            "host copies out of pinned buffers",
            lambda: parts.append((indptr.copy(), buf.h_indices[:nnz].copy(), buf.h_data[:nnz].copy())),
        )
    t0 = time.perf_counter()
    encoding.concatenate_csr(parts, 24, Y.dtype)
    t["host: join chunks into one CSR"] = time.perf_counter() - t0
    wall = time.perf_counter() - wall0
    print(f"moons n={args.n:,} {args.dtype} chunk={args.chunk:,} slots={args.slots:,}: {wall:.3f} s serialised")
    for name, sec in sorted(t.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<36} {sec:8.4f} s  {100 * sec / wall:5.1f}%")
    print(f"  encode kernel alone: {args.n / t['kernel: encode']:,.0f} points/s")


if __name__ == "__main__":
    main()

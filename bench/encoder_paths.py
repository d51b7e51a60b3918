"""The two CPU encoders side by side: lockstep groups against one point at a time.

    python bench/encoder_paths.py [--n 200000] [--atoms 24] [--threads 1]

Noisy moons (d=2, T=15, lam=5, a dictionary drawn from the data). For data
of up to ``_kernels.LOCKSTEP_MAX_FEATURES`` features ``sparse_encode`` runs
the lockstep encoder; setting that limit to 0 sends the same data through
the per-point encoder. Both encode the same chunk, in one process,
alternately; the best of five CPU times is kept. Prints points/s per thread
and the ratio.
"""

import argparse
import time

import numba
import numpy as np

from fastkds import _kernels, make_moons
from fastkds.experiments import PAPER_SETTINGS
from fastkds.prepared import PreparedDictionary

MOONS = PAPER_SETTINGS["moons"]  # the paper's m, T and lam


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--atoms", type=int, default=MOONS.n_atoms)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    numba.set_num_threads(args.threads)
    Y, _ = make_moons(args.n, random_state=0)
    W = Y[np.random.default_rng(0).choice(args.n, args.atoms, replace=False)]
    limit = _kernels.LOCKSTEP_MAX_FEATURES
    print(f"moons: n={args.n:,} d=2 m={args.atoms} T={MOONS.n_iter} lam={MOONS.lam:g}, {args.threads} thread(s)")
    for dtype in (np.float64, np.float32):
        Yd = Y.astype(dtype)
        prepared = PreparedDictionary(W, MOONS.lam, MOONS.n_iter, dtype)
        buffers = prepared.allocate(args.n)
        paths = {"per-point": 0, "lockstep": limit}
        best = dict.fromkeys(paths, np.inf)
        codes = {}
        for _ in range(args.repeat + 1):  # the first round compiles
            for name, value in paths.items():
                _kernels.LOCKSTEP_MAX_FEATURES = value
                t0 = time.process_time()
                triple, _ = prepared.encode_csr(Yd, buffers)
                best[name] = min(best[name], time.process_time() - t0)
                codes[name] = triple
        _kernels.LOCKSTEP_MAX_FEATURES = limit
        same = all(np.array_equal(a, b) for a, b in zip(codes["per-point"][:2], codes["lockstep"][:2]))
        diff = np.abs(codes["per-point"][2] - codes["lockstep"][2]).max() if same else float("nan")
        rate = {k: args.n / v / args.threads for k, v in best.items()}
        print(
            f"  {np.dtype(dtype).name}: per-point {rate['per-point']:,.0f}, lockstep {rate['lockstep']:,.0f} "
            f"points/s per thread: {rate['lockstep'] / rate['per-point']:.2f}x "
            f"(same supports: {same}, max |difference| {diff:.1e})"
        )


if __name__ == "__main__":
    main()

"""First-call cost of the unrolled solver's kernels (fastkds/_unrolled_kernels.py):
compilation with an empty cache, then the load from the cache, per dtype.

    python bench/unrolled_compile_time.py

Each measurement runs in a fresh interpreter with its own, initially empty,
NUMBA_CACHE_DIR, so the encoder helpers the kernels import (max_entry, Michelot's
projection) are compiled too, as on a fresh install.
"""

import os
import subprocess
import sys
import tempfile

SNIPPET = """
import time
import numpy as np
from fastkds.unrolled import loss_and_gradient_fixed_step
rng = np.random.default_rng(0)
Y = rng.normal(size=(100, 3))
W = Y[:8].copy()
out = []
for dtype in (np.float64, np.float32):
    t0 = time.perf_counter()
    loss_and_gradient_fixed_step(Y.astype(dtype), W, 1.0, 5, 0.1)
    out.append(time.perf_counter() - t0)
print(" ".join(f"{x:.3f}" for x in out))
"""


def main():
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        runs = [
            subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)
        ]
    (c64, c32), (l64, l32) = (map(float, r.stdout.split()) for r in runs)
    print("unrolled kernels, first call (forward + backward of a small batch):")
    print(f"  empty cache (compiling): float64 {c64:6.2f} s, float32 {c32:6.2f} s")
    print(f"  cached:                  float64 {l64:6.2f} s, float32 {l32:6.2f} s")
    print(f"  load average while measuring: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()

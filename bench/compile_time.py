"""First-call cost of the Numba kernels: compilation (empty cache) or cache
load, per dtype, for the default encoder (the exact codes), for a whole
KDSClustering fit, and for the accelerated encoder on 8-feature data.

    python bench/compile_time.py           # as the cache stands
    python bench/compile_time.py --cold    # empty the kernel cache first

Each measurement runs in a fresh interpreter so nothing is already loaded.
"""

import argparse
import glob
import os
import subprocess
import sys

SNIPPET = """
import time, warnings
t0 = time.perf_counter()
import numpy as np, fastkds
t_import = time.perf_counter() - t0
Y, _ = fastkds.make_moons(200, random_state=0)
out = [t_import]
for dtype in (np.float64, np.float32):
    t0 = time.perf_counter()
    fastkds.sparse_encode(Y.astype(dtype), Y[:8], lam=1.0, n_iter=3)
    out.append(time.perf_counter() - t0)
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    fastkds.KDSClustering(2, n_atoms=8, max_epochs=2, random_state=0).fit(Y)
out.append(time.perf_counter() - t0)
Y8 = np.random.default_rng(0).normal(size=(200, 8))
for dtype in (np.float64, np.float32):
    t0 = time.perf_counter()
    fastkds.sparse_encode(Y8.astype(dtype), Y8[:8], lam=1.0, n_iter=3, encoder="apg")
    out.append(time.perf_counter() - t0)
print(" ".join(f"{x:.3f}" for x in out))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cold", action="store_true", help="delete the kernel cache first")
    args = ap.parse_args()
    import fastkds

    cache = os.path.join(os.path.dirname(fastkds.__file__), "__pycache__")
    if args.cold:
        for f in glob.glob(os.path.join(cache, "*.nbi")) + glob.glob(os.path.join(cache, "*.nbc")):
            os.unlink(f)
    res = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, check=True)
    t_import, t64, t32, t_fit, a64, a32 = map(float, res.stdout.split())
    state = "empty cache (compiling)" if args.cold else "cache as it stands"
    print(f"first calls, {state}:")
    print(f"  import fastkds                      {t_import:7.3f} s")
    print(f"  sparse_encode, float64              {t64:7.3f} s")
    print(f"  sparse_encode, float32              {t32:7.3f} s")
    print(f"  KDSClustering.fit (rest of kernels) {t_fit:7.3f} s")
    print(f"  sparse_encode, accelerated, float64 {a64:7.3f} s")
    print(f"  sparse_encode, accelerated, float32 {a32:7.3f} s")


if __name__ == "__main__":
    main()

"""The encoder's step: the largest eigenvalue of a centred dictionary's Gram
matrix by the whole spectrum (``numpy.linalg.eigvalsh``) against Lanczos
(``fastkds.prepared.lanczos_top_eigenvalue``, the fit's own), on one BLAS
thread as the fit runs them, for dictionaries of m rows of three sets:
where the second is faster sets ``fastkds._config.GRAM_LANCZOS_ATOMS``
(docs/experiments.md, "The step from Lanczos").

    python bench/top_eigenvalue.py [--data DIR] [--atoms 16 64 ...] [--repeats 20]

MNIST's rows are read where the data folder has them (else that set is
left out); the others are generated. Each row prints both times in ms and
the relative difference of the two eigenvalues.
"""

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

from fastkds import load_mnist, make_moons
from fastkds.datasets import find_data_dir
from fastkds.prepared import lanczos_top_eigenvalue


def _ms(fn, repeats):
    fn()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats * 1e3


def data_sets(data_dir):
    rng = np.random.default_rng(0)
    sets = {}
    mnist = os.path.join(data_dir, "mnist") if data_dir else None
    if mnist and os.path.isdir(mnist):
        sets["MNIST-5, d=784"] = load_mnist(mnist)[0]
    sets["Gaussian, d=50"] = rng.standard_normal((5000, 50))
    sets["moons, d=2"] = make_moons(5000, random_state=0)[0]
    return sets


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="the data folder (default: fastkds.datasets.find_data_dir)")
    ap.add_argument("--atoms", type=int, nargs="+", default=[16, 32, 64, 96, 128, 192, 256, 500])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print("| data | m | eigvalsh, ms | Lanczos, ms | relative difference |")
    print("|---|---|---|---|---|")
    with threadpool_limits(1, user_api="blas"):
        for name, Y in data_sets(args.data or find_data_dir()).items():
            for m in args.atoms:
                W = Y[rng.choice(Y.shape[0], m, replace=False)]
                W = W - W.mean(axis=0)
                G = W @ W.T
                whole = np.linalg.eigvalsh(G)[-1]
                print(
                    f"| {name} | {m} | {_ms(lambda: np.linalg.eigvalsh(G), args.repeats):.3f} | "
                    f"{_ms(lambda: lanczos_top_eigenvalue(G), args.repeats):.3f} | "
                    f"{(lanczos_top_eigenvalue(G) - whole) / whole:.1e} |"
                )


if __name__ == "__main__":
    main()

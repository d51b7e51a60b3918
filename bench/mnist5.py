"""MNIST-5 at the paper's settings (m=500, T=100, lam=0.5): accuracy and fit
time, with the estimator's defaults otherwise.

    python bench/mnist5.py [--data ../shared/data/mnist] [--seeds 0 1 2]
"""

import argparse
import os
import time
import warnings

from fastkds import KDSClustering, clustering_accuracy, load_mnist


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data", "mnist"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--max-epochs", type=int, default=100)
    args = ap.parse_args()
    Y, y = load_mnist(args.data)
    print(f"MNIST-5: n={Y.shape[0]}, d={Y.shape[1]}, k=5, m=500, T=100, lam=0.5")
    for seed in args.seeds:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = KDSClustering(
                5, n_atoms=500, lam=0.5, n_iter=100, max_epochs=args.max_epochs, random_state=seed
            ).fit(Y)
        sec = time.perf_counter() - t0
        t = model.timings_
        print(
            f"seed {seed}: accuracy {clustering_accuracy(y, model.labels_):.4f}, "
            f"fit {sec:.1f} s ({model.kds_.n_iter_} epochs; dictionary {t['dictionary']:.1f} s, "
            f"encode {t['encode']:.2f} s, embed {t['embed']:.2f} s, k-means {t['kmeans']:.2f} s)"
        )


if __name__ == "__main__":
    main()

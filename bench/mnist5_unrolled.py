"""MNIST-5 with the unrolled solver at the paper's settings (m=500, T=100,
lam=0.5; Adam, learning rate 1e-3, 30 epochs, batch 1024, clipping 1e-4,
fixed step): accuracy and fit time. The initial atoms are fastkds's default
(k-means++ seeding among the data points); ``--init random`` takes the
paper's uniformly random data points.

    python bench/mnist5_unrolled.py [--data ../shared/data/mnist] [--seeds 0 1 2] [--epochs 30] [--init random]
"""

import argparse
import os
import time

from fastkds import KDSClustering, clustering_accuracy, load_mnist


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data", "mnist"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--init", default="k-means++", choices=["random", "k-means++"])
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--batch-size", type=int, default=1024)
    args = ap.parse_args()
    Y, y = load_mnist(args.data)
    if args.float32:
        Y = Y.astype("float32")
    print(
        f"MNIST-5: n={Y.shape[0]}, d={Y.shape[1]}, k=5, m=500, T=100, lam=0.5, solver='unrolled', "
        f"{args.epochs} epochs, batch {args.batch_size}, init {args.init}, {Y.dtype}"
    )
    for seed in args.seeds:
        t0 = time.perf_counter()
        model = KDSClustering(
            5, n_atoms=500, lam=0.5, n_iter=100, solver="unrolled", max_epochs=args.epochs, batch_size=args.batch_size,
            init=args.init, random_state=seed,
        ).fit(Y)
        sec = time.perf_counter() - t0
        t = model.timings_
        obj = model.kds_.objective_
        print(
            f"seed {seed}: accuracy {clustering_accuracy(y, model.labels_):.4f}, fit {sec:.1f} s "
            f"(dictionary {t['dictionary']:.1f} s, encode {t['encode']:.2f} s, embed {t['embed']:.2f} s, "
            f"k-means {t['kmeans']:.2f} s); loss epoch 1 {obj[0]:.5f} -> epoch {len(obj)} {obj[-1]:.5f}",
            flush=True,
        )


if __name__ == "__main__":
    main()

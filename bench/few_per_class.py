"""Many classes of a few points each: fastkds's defaults against
SpectralClustering and KMeans.

    python bench/few_per_class.py [--data DIR] [--seeds 3]

A face set of ten images a person (Olivetti, ORL) or a few images of each
digit: k is large and n / k small. The default atoms, four a cluster, then
hold two or three points each and code them alone, and the code graph
falls into pieces too small to count as modes: fewer than k. The
neighbours' vote then labels the points from their own neighbours' graph
(``fastkds.label_vote``; before it did, such a fit raised "n_clusters=...
exceeds the ... modes of the code graph").

Rows: Gaussian blobs (``sklearn.datasets.make_blobs``, ``random_state=0``)
of 40 classes of 10 points in 100 dimensions (two spreads) and of 20 of 8
in 30; MNIST t10k, the first 10 and the first 20 images of each digit
(rows scaled to unit norm; skipped without the data); twenty curves of 12
points in 256 dimensions (``fastkds.datasets.make_curves``). Columns:
``KDSClustering(k, random_state=seed)`` with every other parameter at its
default, accuracy mean and min over the seeds, the seeds whose code graph
showed fewer than k modes, and the mean fit seconds; SpectralClustering
(``affinity="nearest_neighbors"``), the best of n_neighbors 5, 10 and 20,
and KMeans at scikit-learn's defaults (seed 0 each). Nothing here was
tuned: the vote's rule is structural (the code graph's modes against k).
"""

import time
import warnings

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.preprocessing import normalize

from fastkds import KDSClustering, clustering_accuracy
from fastkds.datasets import find_data_dir, load_mnist, make_curves
from real_data import _kmeans, spectral_best, table_parser


def first_per_class(Y, y, per):
    """The first ``per`` rows of each class, in row order."""
    keep = np.sort(np.concatenate([np.flatnonzero(y == c)[:per] for c in np.unique(y)]))
    return Y[keep], y[keep]


def sets(data_dir):
    """``(title, Y, y)`` of each row; ``Y`` None and ``y`` the reason where the data are missing."""
    for per, k, d, spread in ((10, 40, 100, 3.0), (10, 40, 100, 6.0), (8, 20, 30, 3.0)):
        Y, y = make_blobs(per * k, n_features=d, centers=k, cluster_std=spread, random_state=0)
        yield f"blobs, {k} x {per}, d={d}, std {spread:g}", Y, y
    for per in (10, 20):
        if data_dir is None or not (data_dir / "mnist").is_dir():
            yield f"MNIST t10k, 10 x {per}", None, "no MNIST in the data folder"
            continue
        Y, y = load_mnist(data_dir / "mnist", digits=None, unit_norm=False)
        Y, y = first_per_class(Y, y, per)
        yield f"MNIST t10k, 10 x {per}", normalize(Y), y
    Y, y = make_curves(240, 20, 256, random_state=0)
    yield "20 curves x 12, d=256", Y, y


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    data_dir = find_data_dir(args.data)
    columns = ["data", "n", "k", "fastkds mean", "fastkds min", "seeds past the modes", "fastkds s"]
    columns += ["Spectral best", "its n_neighbors", "Spectral s", "KMeans"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for title, Y, y in sets(data_dir):
        if Y is None:
            print(f"| {title} | skipped: {y} |")
            continue
        k = int(np.unique(y).size)
        accs, secs, short = [], [], 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            KDSClustering(k, random_state=0).fit(Y)  # compile outside the clock
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                model = KDSClustering(k, random_state=seed).fit(Y)
                secs.append(time.perf_counter() - t0)
                accs.append(clustering_accuracy(y, model.labels_))
                short += not model.spectrum_.shows(k)
            best = spectral_best(Y, y, k)
            kmeans = clustering_accuracy(y, _kmeans(Y, k))
        print(
            f"| {title} | {Y.shape[0]} | {k} | {np.mean(accs):.4f} | {np.min(accs):.4f} | {short} of {args.seeds} "
            f"| {np.mean(secs):.2f} | {best[0]:.4f} | {best[1]} | {best[2]:.2f} | {kmeans:.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""fastkds with its defaults on sets that chose nothing, beside
SpectralClustering: where a default was picked by looking at the table of
``bench/real_data.py``, these rows say whether it holds elsewhere.

    python bench/held_out.py [--data DIR] [--only NAME ...] [--seeds 3]

Rows: the three other five-digit subsets of MNIST t10k, {1, 2, 5, 8, 9}
(the digits MNIST-5 leaves out), {0, 1, 2, 3, 4} and {5, 6, 7, 8, 9}, and
scikit-learn's bundled 8 x 8 digits (1,797 images, 10 classes: shipped with
the package). MNIST rows are scaled to unit norm, as in the main table.
Columns: ``KDSClustering(k, random_state=seed)`` with its defaults,
accuracy mean and min over the seeds and the mean fit seconds (the kernels
compiled beforehand); ``SpectralClustering(affinity="nearest_neighbors")``,
the best of n_neighbors 5, 10 and 20 by accuracy, with its n_neighbors and
seconds; KMeans(k) at scikit-learn's defaults.
"""

import datetime
import os
import platform
import sys
import warnings

import numpy as np

from fastkds import KDSClustering, clustering_accuracy, load_mnist
from fastkds.datasets import find_data_dir
from real_data import _kmeans, fastkds_runs, spectral_best, table_parser

MNIST_SUBSETS = {
    "mnist12589": (1, 2, 5, 8, 9),
    "mnist01234": (0, 1, 2, 3, 4),
    "mnist56789": (5, 6, 7, 8, 9),
}
NAMES = (*MNIST_SUBSETS, "digits8x8")


def load(name, data_dir):
    """``(Y, y)`` of the row ``name``; FileNotFoundError where its files are absent."""
    if name == "digits8x8":
        from sklearn.datasets import load_digits

        Y, y = load_digits(return_X_y=True)
        return Y.astype(np.float64), y
    if data_dir is None or not os.path.isdir(os.path.join(data_dir, "mnist")):
        raise FileNotFoundError("no mnist/ folder (give --data DIR or set FASTKDS_DATA)")
    return load_mnist(os.path.join(data_dir, "mnist"), digits=MNIST_SUBSETS[name])


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=3, help="fastkds seeds per row (default 3)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    data_dir = args.data or find_data_dir()
    names = [name for name in NAMES if not args.only or name in args.only]
    KDSClustering(2, random_state=0).fit(np.random.default_rng(0).normal(size=(300, 40)))  # compile
    print("python bench/held_out.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    print(f"{datetime.date.today()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        "| data | n | d | k | fastkds mean | fastkds min | fastkds s | Spectral kNN best | its n_neighbors | Spectral s | KMeans |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        try:
            Y, y = load(name, data_dir)
        except FileNotFoundError as exc:
            print(f"| {name} | {exc} |")
            continue
        k = len(np.unique(y))
        accs, seconds = fastkds_runs(Y, y, k, range(args.seeds))
        spectral, q, spectral_s = spectral_best(Y, y, k)
        kmeans = clustering_accuracy(y, _kmeans(Y, k))
        print(
            f"| {name} | {Y.shape[0]:,} | {Y.shape[1]} | {k} | {np.mean(accs):.4f} | {min(accs):.4f} | "
            f"{np.mean(seconds):.2f} | {spectral:.4f} | {q} | {spectral_s:.2f} | {kmeans:.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

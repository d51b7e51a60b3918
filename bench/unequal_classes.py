"""Classes of unequal sizes: fastkds's two embeddings against
SpectralClustering and KMeans.

    python bench/unequal_classes.py [--data DIR] [--seeds 3]

The default ``embedding="diffusion"`` adds, past the code graph's k
leading modes, the next k, which tell apart clusters the leading modes mix
(docs/algorithm.md, "The diffusion embedding"). Those next modes vary
inside the clusters, most inside the largest: where one class holds many
times the points of another, k-means on the wider embedding can halve the
large class and leave the small one joined to a half (8 and 92 points:
50 / 50). The k leading modes alone (``embedding="leading"``, Ng, Jordan
and Weiss) give each cluster a direction of its own, whatever its size.

Rows: noisy moons (``fastkds.datasets.make_moons(4000)``, seed 0) with one
moon thinned to 15% of its points; MNIST t10k, digits 0-4, the first 800,
400, 200, 100 and 50 images of each; all ten digits, the first 850 to 85
images of each (sizes in a geometric run, 10 to 1) and 850 to 283 (3 to
1); two Gaussian blobs of 8 and 92 points in 10 dimensions
(``sklearn.datasets.make_blobs``, ``random_state=0``). MNIST rows are scaled
to unit norm and skipped without the data. Columns: ``KDSClustering(k,
random_state=seed)`` with every other parameter at its default, then with
``embedding="leading"`` (accuracy mean and min over the seeds); the sizes
of the largest and smallest class; SpectralClustering
(``affinity="nearest_neighbors"``), the best of n_neighbors 5, 10 and 20;
KMeans at scikit-learn's defaults (seed 0 each). Nothing here chose a
default.
"""

import warnings

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.preprocessing import normalize

from fastkds import KDSClustering, clustering_accuracy
from fastkds.datasets import find_data_dir, load_mnist, make_moons
from real_data import _kmeans, spectral_best, table_parser


def first_of_each(Y, y, sizes):
    """The first ``sizes[c]`` rows of each class c in ``sizes``, in row order."""
    keep = np.sort(np.concatenate([np.flatnonzero(y == c)[:size] for c, size in sizes.items()]))
    return Y[keep], y[keep]


def thinned_moons(n=4000, keep=0.15, random_state=0):
    """Noisy moons with the points of moon 1 kept at random, each with probability ``keep``."""
    Y, y = make_moons(n, random_state=random_state)
    kept = (y == 0) | (np.random.default_rng(random_state).random(n) < keep)
    return Y[kept], y[kept]


def sets(data_dir):
    """``(title, Y, y)`` of each row; ``Y`` None and ``y`` the reason where the data are missing."""
    yield "moons, one thinned to 15%", *thinned_moons()
    mnist = {
        "MNIST 0-4, 800 to 50": dict(zip(range(5), (800, 400, 200, 100, 50))),
        "MNIST 10 digits, 850 to 85": dict(enumerate(np.geomspace(850, 85, 10).round().astype(int))),
        "MNIST 10 digits, 850 to 283": dict(enumerate(np.geomspace(850, 283, 10).round().astype(int))),
    }
    for title, sizes in mnist.items():
        if data_dir is None or not (data_dir / "mnist").is_dir():
            yield title, None, "no MNIST in the data folder"
            continue
        Y, y = load_mnist(data_dir / "mnist", digits=None, unit_norm=False)
        Y, y = first_of_each(Y, y, sizes)
        yield title, normalize(Y), y
    yield "blobs of 8 and 92, d=10", *make_blobs([8, 92], n_features=10, random_state=0)


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    data_dir = find_data_dir(args.data)
    columns = ["data", "n", "k", "largest / smallest class", "diffusion (default) mean", "min"]
    columns += ["leading mean", "min", "Spectral best", "its n_neighbors", "KMeans"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for title, Y, y in sets(data_dir):
        if Y is None:
            print(f"| {title} | skipped: {y} |")
            continue
        k = int(np.unique(y).size)
        sizes = np.bincount(y)[np.unique(y)]
        cells = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for embedding in ("diffusion", "leading"):
                accs = [
                    clustering_accuracy(y, KDSClustering(k, embedding=embedding, random_state=seed).fit_predict(Y))
                    for seed in range(args.seeds)
                ]
                cells += [f"{np.mean(accs):.4f}", f"{np.min(accs):.4f}"]
            best = spectral_best(Y, y, k)
            kmeans = clustering_accuracy(y, _kmeans(Y, k))
        print(
            f"| {title} | {Y.shape[0]} | {k} | {sizes.max()} / {sizes.min()} | {' | '.join(cells)} "
            f"| {best[0]:.4f} | {best[1]} | {kmeans:.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""Few points, many features: ``KDSClustering(k)`` with defaults beside
SpectralClustering and KMeans on tables shaped like gene expression.

    python bench/many_features.py [--draws 3] [--first-draw 0] [--seeds 4]

Each row draws k classes of n points in d features: every class shifts its
own random twentieth of the features by +-effect, every entry has unit
Gaussian noise, and the columns are standardised. The noise is most of each
distance (about 2d against a class gap of about d effect^2 / 10), so the
classes are a small margin in distances that are all alike. Draw ``r`` of a
row comes from ``numpy.random.default_rng([r, row])``. Columns: fastkds's
accuracy (mean and min over the seeds) and mean fit seconds;
SpectralClustering (``affinity="nearest_neighbors"``), the best of
n_neighbors 5, 10 and 20 with its seconds, and at its default of 10;
KMeans at scikit-learn's defaults. Nothing here chose a default
(docs/experiments.md, "Labels nearer random than the graph's").
"""

import warnings

import numpy as np
from sklearn.preprocessing import StandardScaler

from fastkds import KDSClustering, clustering_accuracy
from real_data import _kmeans, _spectral, fastkds_runs, spectral_best, table_parser

#: (n, d, k, effect) of each row.
ROWS = ((300, 5000, 3, 0.6), (200, 20000, 4, 0.5), (600, 3000, 4, 0.5), (1000, 2000, 5, 0.4))


def draw(n, d, k, effect, seed):
    """``(Y, y)``: one table of the description, from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    means = np.zeros((k, d))
    for c in range(k):
        shifted = rng.choice(d, d // 20, replace=False)
        means[c, shifted] = effect * rng.choice([-1.0, 1.0], d // 20)
    return StandardScaler().fit_transform(means[y] + rng.normal(size=(n, d))), y


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--draws", type=int, default=3, help="draws of each row (default 3)")
    ap.add_argument("--first-draw", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=4, help="fastkds seeds per draw (default 4)")
    args = ap.parse_args(argv)
    columns = ["n", "d", "k", "effect", "draw", "fastkds mean", "min", "fastkds s"]
    columns += ["Spectral best", "its n_neighbors", "Spectral s", "Spectral 10", "KMeans"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        KDSClustering(2, random_state=0).fit(draw(100, 500, 2, 1.0, 0)[0])  # compile
        for r in range(args.first_draw, args.first_draw + args.draws):
            for row, (n, d, k, effect) in enumerate(ROWS):
                Y, y = draw(n, d, k, effect, [r, row])
                accs, seconds = fastkds_runs(Y, y, k, range(args.seeds))
                best = spectral_best(Y, y, k)
                default = clustering_accuracy(y, _spectral(Y, k, 10))
                kmeans = clustering_accuracy(y, _kmeans(Y, k))
                print(
                    f"| {n} | {d} | {k} | {effect} | {r} | {np.mean(accs):.4f} | {np.min(accs):.4f} "
                    f"| {np.mean(seconds):.2f} | {best[0]:.4f} | {best[1]} | {best[2]:.2f} | {default:.4f} "
                    f"| {kmeans:.4f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

"""Many clusters: ``KDSClustering(k)`` with defaults beside KMeans and
SpectralClustering, on Gaussian blobs of 60 to 100 clusters.

    python bench/many_clusters.py [--sizes 5000:100 20000:100 100000:100 30000:60 40000:80] [--seeds 1]

Past 50 clusters of about equal size each holds less than 1% of the
points, the default ``min_component``; before the bound of half an even
split (``fastkds.spectral.outlier_share``), a fit whose code graph holds
one component a cluster left most of them out as outliers: 10^5 points in
100 blobs scored 0.55 (docs/experiments.md, "Many clusters"). Rows:
``sklearn.datasets.make_blobs(n, 20, centers=k, cluster_std=1.0,
random_state=0)`` for each ``n:k``. Columns: fastkds's accuracy (mean
over the seeds) and mean fit seconds, after a fit of the first row to
compile; KMeans at scikit-learn's defaults; SpectralClustering
(``affinity="nearest_neighbors"``, its default 10 neighbours) up to
``--spectral-max`` points. Separate blobs are k-means' own case: the rows
test that the clusters are found, at what cost. Nothing here chose a
default.
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import make_blobs

from fastkds import KDSClustering, clustering_accuracy
from real_data import _kmeans, _spectral

SIZES = ("5000:100", "20000:100", "100000:100", "30000:60", "40000:80")


def blobs(n, k):
    """The row's points and labels."""
    return make_blobs(n, 20, centers=k, cluster_std=1.0, random_state=0)


def _timed(fn, *args):
    t0 = time.perf_counter()
    labels = fn(*args)
    return labels, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), help="rows as n:k (default: %(default)s)")
    ap.add_argument("--seeds", type=int, default=1, help="fastkds seeds per row (default 1)")
    ap.add_argument("--spectral-max", type=int, default=20_000, help="largest n for SpectralClustering")
    args = ap.parse_args(argv)
    rows = [tuple(int(v) for v in size.split(":")) for size in args.sizes]
    columns = ["n", "k", "fastkds", "fastkds s", "KMeans", "KMeans s", "SpectralClustering", "SpectralClustering s"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        KDSClustering(rows[0][1], random_state=0).fit(blobs(*rows[0])[0])  # compile outside the clock
        for n, k in rows:
            Y, y = blobs(n, k)
            runs = [_timed(KDSClustering(k, random_state=seed).fit_predict, Y) for seed in range(args.seeds)]
            cells = [f"{np.mean([clustering_accuracy(y, labels) for labels, _ in runs]):.4f}"]
            cells.append(f"{np.mean([seconds for _, seconds in runs]):.2f}")
            labels, seconds = _timed(_kmeans, Y, k)
            cells += [f"{clustering_accuracy(y, labels):.4f}", f"{seconds:.2f}"]
            if n <= args.spectral_max:
                labels, seconds = _timed(_spectral, Y, k, 10)
                cells += [f"{clustering_accuracy(y, labels):.4f}", f"{seconds:.2f}"]
            else:
                cells += ["-", f"(n > {args.spectral_max:,})"]
            print(f"| {n:,} | {k} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

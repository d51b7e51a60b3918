"""How fine a graph each set needs: SpectralClustering's accuracy against
its neighbourhood size, beside the points per atom of KDSClustering's
defaults.

    python bench/neighbourhood.py [--data DIR] [--only NAME ...] [--neighbours 5,10,20,40,80]

The code graph of m atoms joins each point to the points that share its
atoms: a graph whose nodes stand for about n / m points each. For every
set of ``bench/real_data.py`` (data of seed 0; the million-point moons left
out) this prints ``SpectralClustering(affinity="nearest_neighbors")`` at
each ``n_neighbors`` given (seed 0), and ``KDSClustering(k,
random_state=0)`` with its defaults: accuracy, its atoms m and n / m. A
set that SpectralClustering separates only with few neighbours needs atoms
about that fine, which the defaults' at most 100 atoms (a fit linear in n)
do not give once n is large.
"""

import warnings

import numpy as np
from sklearn.cluster import SpectralClustering

from fastkds import KDSClustering, clustering_accuracy
from fastkds.datasets import find_data_dir
from real_data import table_parser, table_sets


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--neighbours", default="5,10,20,40,80", help="n_neighbors of SpectralClustering")
    args = ap.parse_args(argv)
    neighbours = [int(q) for q in args.neighbours.split(",")]
    warnings.simplefilter("ignore")
    data_dir = find_data_dir(args.data)
    print(
        "| data | n | " + " | ".join(f"Spectral, {q} neighbours" for q in neighbours) + " | KDSClustering | m | n / m |"
    )
    print("|---|---|" + "---|" * (len(neighbours) + 3))
    for _, title, Y, y in table_sets(data_dir, args.only):
        if Y is None:
            print(f"| {title} | skipped: {y} |")
            continue
        n, k = Y.shape[0], int(np.unique(y).size)
        cells = []
        for q in neighbours:
            if q >= n:
                cells.append("-")
                continue
            model = SpectralClustering(k, affinity="nearest_neighbors", n_neighbors=q, random_state=0)
            cells.append(f"{clustering_accuracy(y, model.fit_predict(Y)):.4f}")
        kds = KDSClustering(k, random_state=0).fit(Y)
        m = kds.kds_.n_atoms
        cells += [f"{clustering_accuracy(y, kds.labels_):.4f}", str(m), f"{n / m:.0f}"]
        print(f"| {title} | {n:,} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

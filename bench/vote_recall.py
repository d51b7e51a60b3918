"""How many of each point's true nearest neighbours the neighbours' vote
finds, against the number of atoms whose cells it searches (issue 21;
``fastkds.label_vote.probe_count``).

    python bench/vote_recall.py [--data DIR] [--only NAME ...] [--probes 1 2 3 4 6]

For every set of ``bench/real_data.py`` but the million-point moons (data
of seed 0): ``KDSClustering(k, random_state=0)`` with its defaults gives the
atoms; every point is a reference, as in the fit on these sets. For each
number of probed atoms, the recall of the 10 nearest neighbours (the share
of the exact 10 nearest, from scikit-learn's ``NearestNeighbors``, that the
screened search returns) and the seconds of the search. The labels play no
part: a measure of the search alone.
"""

import time
import warnings

import numpy as np
from sklearn.neighbors import NearestNeighbors

from fastkds import KDSClustering
from fastkds.datasets import find_data_dir
from fastkds.label_vote import LabelVote
from real_data import table_parser, table_sets

Q = 10


def recall(found, exact):
    """Mean share of each row of ``exact`` that the same row of ``found`` holds."""
    return float(np.mean([np.isin(e, f).mean() for f, e in zip(found, exact)]))


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--probes", type=int, nargs="+", default=[1, 2, 3, 4, 6], help="atoms searched")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    print("| data | atoms | " + " | ".join(f"{p} atoms: recall (s)" for p in args.probes) + " |")
    print("|---|---|" + "---|" * len(args.probes))
    for _, title, Y, y in table_sets(find_data_dir(args.data), args.only):
        if Y is None:
            print(f"| {title} | skipped: {y} |")
            continue
        Y = np.ascontiguousarray(Y)
        k = int(np.unique(y).size)
        model = KDSClustering(k, random_state=0).fit(Y)
        exact = NearestNeighbors(n_neighbors=Q).fit(Y).kneighbors(Y, return_distance=False)
        search = LabelVote(model.components_, Y, model.labels_, Q, k)
        cells = []
        for probes in args.probes:
            search.n_probe = probes
            t0 = time.perf_counter()
            found, _ = search.neighbours(Y)
            cells.append(f"{recall(found, exact):.3f} ({time.perf_counter() - t0:.2f})")
        print(f"| {title} | {model.components_.shape[0]} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

"""How well a vote of nearest neighbours can label each set at all: the
leave-one-out accuracy of the true labels, one vote a neighbour against
ranked votes (the r-th nearest counting 1 / r), the measure behind the
neighbours' vote's ranked rounds (docs/experiments.md, "Ranked votes and a
wider screen").

    python bench/vote_weights.py [--data DIR] [--only NAME ...]

For each set of ``fastkds.experiments.DATA_SETS`` but the million moons
(the data of seed 0), each point is labelled by the true labels of its q
nearest other points (q = 3, 5, 10 and 20; exact neighbours by
scikit-learn), and the share labelled right is printed. No fastkds model
is fitted: this is a property of the data and of the rule, the most a vote
of that rule could reach with every other label right.
"""

import numpy as np
from sklearn.neighbors import NearestNeighbors

from fastkds.datasets import find_data_dir
from real_data import table_parser, table_sets

REACHES = (3, 5, 10, 20)


def leave_one_out(nearest, y, q, ranked):
    """The share of points whose q nearest others (``nearest``: each row's
    neighbours, nearest first, itself excluded) vote their own label, ties
    to the nearest neighbour's label among the tied."""
    n_labels = int(y.max()) + 1
    counts = np.zeros((y.shape[0], n_labels))
    weights = 1.0 / np.arange(1, q + 1) if ranked else np.ones(q)
    rows = np.arange(y.shape[0])
    for r in range(q):
        np.add.at(counts, (rows, y[nearest[:, r]]), weights[r])
    top = counts.max(axis=1)
    tied = counts[rows[:, None], y[nearest[:, :q]]] == top[:, None]
    voted = y[nearest[rows, np.argmax(tied, axis=1)]]
    return float((voted == y).mean())


def main(argv=None):
    ap = table_parser(__doc__)
    args = ap.parse_args(argv)
    print("| data | n | " + " | ".join(f"q={q} one vote | q={q} ranked" for q in REACHES) + " |")
    print("|---|---|" + "---|---|" * len(REACHES))
    for _, title, Y, y in table_sets(find_data_dir(args.data), args.only):
        if Y is None:
            print(f"| {title} | {y} |")
            continue
        y = np.unique(y, return_inverse=True)[1]
        q_max = min(max(REACHES), Y.shape[0] - 1)
        nearest = NearestNeighbors(n_neighbors=q_max + 1).fit(Y).kneighbors(Y, return_distance=False)
        # each point's own row first, then its others, nearest first
        others = np.array([row[row != i][:q_max] for i, row in enumerate(nearest)])
        cells = []
        for q in REACHES:
            q = min(q, q_max)
            cells += [f"{leave_one_out(others, y, q, False):.4f}", f"{leave_one_out(others, y, q, True):.4f}"]
        print(f"| {title} | {Y.shape[0]:,} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

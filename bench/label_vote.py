"""Exploration for issue 21: refine KDSClustering's labels by a vote of each
point's nearest neighbours.

    python bench/label_vote.py [--data DIR] [--only NAME ...] [--seeds 3]
                               [--neighbours 10] [--atoms 4]

Not a change of defaults: a measurement of one way past the code graph's
resolution (``bench/neighbourhood.py``: its nodes stand for 70-100 points,
and MNIST-5, Yale B and the nested spheres need 5-10). The code graph
gives the clusters' global shape; a vote of each point's q nearest
neighbours then moves the labels along the boundaries at the data's own
resolution: every point takes the label most of its neighbours hold (its
own label counting half a vote, to break ties), repeated until no label
changes (at most 20 rounds). The neighbours are found two ways:

- ``exact``: scikit-learn's ``NearestNeighbors`` (all pairs: the cost
  SpectralClustering's kNN graph pays);
- ``atoms``: among the points whose nearest atom is one of the point's r
  nearest atoms (``--atoms``): a search screened by the dictionary, whose
  cost is the points times about r n / m candidates.

For every set of ``bench/real_data.py`` but the million-point moons (data
of seed 0) and each seed: ``KDSClustering(k, random_state=seed)`` with its
defaults, then both refinements of its labels; accuracy means over the
seeds, the ``atoms`` search's mean seconds; and SpectralClustering's best
of n_neighbors 5, 10 and 20, as ``bench/real_data.py`` runs it.
"""

import time
import warnings

import numpy as np
from sklearn.neighbors import NearestNeighbors

from fastkds import KDSClustering, clustering_accuracy
from fastkds.datasets import find_data_dir
from real_data import NEIGHBOURS, _spectral, table_parser, table_sets, timed_baseline

MAX_ROUNDS = 20


def exact_neighbours(Y, q):
    """Indices of each point's q nearest other points."""
    return NearestNeighbors(n_neighbors=q + 1).fit(Y).kneighbors(Y, return_distance=False)[:, 1:]


def screened_neighbours(Y, W, q, r):
    """Each point's q nearest among the points whose nearest atom is one of
    its own r nearest atoms (fewer candidates than q: the point itself
    fills the rest)."""
    sq = (Y * Y).sum(axis=1)
    nearest = np.argsort(sq[:, None] - 2.0 * Y @ W.T + (W * W).sum(axis=1)[None, :], axis=1)[:, :r]
    cells = [np.flatnonzero(nearest[:, 0] == a) for a in range(W.shape[0])]
    keys = np.sort(nearest, axis=1)
    _, group = np.unique(keys, axis=0, return_inverse=True)
    order = np.argsort(group.ravel(), kind="stable")
    out = np.repeat(np.arange(Y.shape[0])[:, None], q, axis=1)
    for rows in np.split(order, np.flatnonzero(np.diff(group.ravel()[order])) + 1):
        candidates = np.concatenate([cells[a] for a in keys[rows[0]]])
        D = sq[rows][:, None] - 2.0 * Y[rows] @ Y[candidates].T + sq[candidates][None, :]
        D[candidates[None, :] == rows[:, None]] = np.inf
        take = min(q, candidates.size - 1)
        if take > 0:
            out[rows, :take] = candidates[np.argpartition(D, take - 1, axis=1)[:, :take]]
    return out


def vote(labels, neighbours, k):
    """Labels after rounds of the neighbours' vote, until none changes."""
    rows = np.arange(labels.size)
    for _ in range(MAX_ROUNDS):
        votes = np.zeros((labels.size, k))
        for c in range(neighbours.shape[1]):
            np.add.at(votes, (rows, labels[neighbours[:, c]]), 1.0)
        votes[rows, labels] += 0.5
        new = votes.argmax(axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=3, help="seeds per set (default 3)")
    ap.add_argument("--neighbours", type=int, default=10, help="q, the voting neighbours (default 10)")
    ap.add_argument("--atoms", type=int, default=4, help="r, the nearest atoms whose points are candidates")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for each SpectralClustering run")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    q, r = args.neighbours, args.atoms
    print(
        f"| data | KDSClustering | exact {q}-NN vote | atoms-screened vote (r={r}) | its search s | Spectral kNN best |"
    )
    print("|---|---|---|---|---|---|")
    for _, title, Y, y in table_sets(find_data_dir(args.data), args.only):
        if Y is None:
            print(f"| {title} | skipped: {y} |")
            continue
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        k = int(np.unique(y).size)
        exact = exact_neighbours(Y, q)
        acc = {"kds": [], "exact": [], "atoms": []}
        seconds = []
        for seed in range(args.seeds):
            model = KDSClustering(k, random_state=seed).fit(Y)
            t0 = time.perf_counter()
            screened = screened_neighbours(Y, model.components_, q, r)
            seconds.append(time.perf_counter() - t0)
            acc["kds"].append(clustering_accuracy(y, model.labels_))
            acc["exact"].append(clustering_accuracy(y, vote(model.labels_, exact, k)))
            acc["atoms"].append(clustering_accuracy(y, vote(model.labels_, screened, k)))
        spectral = [timed_baseline(_spectral, (Y, k, nn), args.timeout)[0] for nn in NEIGHBOURS]
        best = max((clustering_accuracy(y, labels) for labels in spectral if labels is not None), default=None)
        cells = [f"{np.mean(acc[key]):.4f}" for key in ("kds", "exact", "atoms")]
        cells += [f"{np.mean(seconds):.2f}", "-" if best is None else f"{best:.4f}"]
        print(f"| {title} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

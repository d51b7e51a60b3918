"""Whether the atoms part the pieces of the references' graph: the premise of
the vote's pieces rule, counted on every set whose graph has 2 to k pieces.

    python bench/vote_pieces.py [--data DIR] [--only NAME ...] [--seeds 4]

The neighbours' vote takes the references' own kNN graph's labels where
that graph falls into 2 to k pieces and the code graph's labels join them:
atoms coarser than a gap in the data (``fastkds.label_vote``). Whether the
atoms are that coarse shows in their cells: where they are, some atom is
the nearest of references in two pieces. For every set of
``bench/real_data.py`` (data of seed 0; the million-point moons left out)
whose exact 10-nearest-neighbour graph, made symmetric, has 2 to k
connected pieces, and each fastkds seed, this prints the references (every
point here: at most 100 per atom) outside the piece that holds most of
their k-means label (``KDSClustering(vote_neighbors=None)``, the labels the
vote starts from) and outside the piece that holds most of their atom's
cell (each point in the cell of its nearest atom of that fit), the atoms
whose cell spans pieces, the stray thresholds the two counts are held
against (``VOTE_STRAY_SHARE`` of an even split: n / k for the labels, n / m
for the cells of m atoms), and the accuracy of ``KDSClustering(k)`` with its
defaults. The graph is computed here by scikit-learn, not by the
vote's own search, so this checks the rule's inputs independently.
"""

import warnings

import numpy as np
from scipy.sparse.csgraph import connected_components
from sklearn.neighbors import NearestNeighbors, kneighbors_graph

from fastkds import KDSClustering, clustering_accuracy
from fastkds._config import VOTE_REFERENCES_PER_ATOM, VOTE_STRAY_SHARE
from fastkds.datasets import find_data_dir
from fastkds.label_vote import piece_table
from real_data import table_parser, table_sets

NEIGHBOURS = 10


def outside_main_piece(groups, piece):
    """Points outside the piece that holds most of their group, as the vote
    counts them, and the groups found in more than one piece."""
    table = piece_table(groups, piece, groups.max() + 1)
    return int(groups.size - table.max(axis=1).sum()), int(((table > 0).sum(axis=1) > 1).sum())


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=4, help="fastkds seeds per set (default 4)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    data_dir = find_data_dir(args.data)
    print(
        "| data | seed | pieces (sizes) | outside their label's piece | outside their cell's piece "
        "| atoms whose cell spans pieces | stray thresholds (labels, cells) | KDSClustering |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for _, title, Y, y in table_sets(data_dir, args.only):
        if Y is None:
            print(f"| {title} | skipped: {y} |")
            continue
        n, k = Y.shape[0], int(np.unique(y).size)
        graph = kneighbors_graph(Y, NEIGHBOURS, include_self=False)
        n_pieces, piece = connected_components(graph, directed=False)
        if not 2 <= n_pieces <= k:
            print(f"| {title} | - | {n_pieces} | the rule does not apply | | | | |", flush=True)
            continue
        sizes = ", ".join(f"{s:,}" for s in sorted(np.bincount(piece), reverse=True))
        for seed in range(args.seeds):
            first = KDSClustering(k, vote_neighbors=None, random_state=seed).fit(Y)
            atoms = first.components_
            if n > VOTE_REFERENCES_PER_ATOM * atoms.shape[0]:
                print(f"| {title} | {seed} | references sampled: not counted here |", flush=True)
                continue
            cells = NearestNeighbors(n_neighbors=1).fit(atoms).kneighbors(Y, return_distance=False)[:, 0]
            labels_out, _ = outside_main_piece(first.labels_, piece)
            cells_out, spanning = outside_main_piece(cells, piece)
            accuracy = clustering_accuracy(y, KDSClustering(k, random_state=seed).fit(Y).labels_)
            print(
                f"| {title} | {seed} | {n_pieces} ({sizes}) | {labels_out:,} | {cells_out:,} | {spanning} "
                f"| {VOTE_STRAY_SHARE * n / k:.1f}, {VOTE_STRAY_SHARE * n / atoms.shape[0]:.1f} | {accuracy:.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()

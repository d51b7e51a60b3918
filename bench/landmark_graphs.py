"""Exploration for issue 21: untrained landmarks, exact codes and an atom graph.

    python bench/landmark_graphs.py [--data DIR] [--only NAME ...] [--atoms 100,400,1000]
                                    [--graphs codes,mutual5,knn5] [--seeds 2]
                                    [--glue 1] [--spectral plain|leading|diffusion]

Not the defaults' table (``bench/real_data.py`` is): a measurement of one
alternative to the trained dictionary. For each set of
``fastkds.experiments.DATA_SETS`` (its data with seed 0) and each seed, m
atoms are drawn by k-means++ (``sklearn.cluster.kmeans_plusplus``, no
training), every point gets its exact code (``sparse_encode(...,
encoder="active-set")``, lam = 1), and the atoms are clustered spectrally on
one of three m x m graphs:

- ``codes``: ``X^T X``, the atoms two points' codes share (the bipartite
  graph of KDSClustering, with exact codes);
- ``mutual5`` / ``knn5``: ``X^T X`` plus the atoms' mutual / symmetric
  5-nearest-neighbour graph, each edge weighted ``sqrt(s_i s_j) / 5`` (s the
  atom degrees), so that the sparse exact codes do not leave the chains of
  atoms along a manifold in pieces.

``--glue`` scales those edges (0.01: a faint neighbour graph, which joins
the pieces of a chain without outweighing the codes).

The points' embedding is ``X D^(-1/2) V_k`` row-normalised, then k-means.
Components of the graph with less than 1% of the degree are left out, as
KDSClustering does (``--spectral plain``, the default). ``--spectral
leading`` or ``diffusion`` runs KDSClustering's own spectral step instead
(``fastkds.spectral.BipartiteSpectrum``, which also passes over the
localised modes), with that embedding. Printed per set: the accuracy (mean and min over the
seeds) for each graph and m, and the relative eigengap ``mu_{k+1} / mu_k``
of that graph (the number an unsupervised choice of m could use).
"""

import time
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from sklearn.cluster import KMeans, kmeans_plusplus

from fastkds import clustering_accuracy
from fastkds.encoding import sparse_encode
from fastkds.datasets import find_data_dir
from fastkds.spectral import BipartiteSpectrum, normalize_rows
from real_data import table_parser, table_sets


def atom_neighbours(W, q, mutual):
    """The atoms' q-nearest-neighbour graph (0/1, symmetric)."""
    sq = (W * W).sum(axis=1)
    D2 = sq[:, None] + sq[None, :] - 2.0 * W @ W.T
    np.fill_diagonal(D2, np.inf)
    nearest = np.argsort(D2, axis=1)[:, :q]
    K = np.zeros(D2.shape)
    K[np.repeat(np.arange(W.shape[0]), q), nearest.ravel()] = 1.0
    return np.minimum(K, K.T) if mutual else np.maximum(K, K.T)


def atom_graph(codes, W, kind, glue=1.0):
    C = (codes.T @ codes).toarray()
    if kind == "codes":
        return C
    s = np.asarray(codes.sum(axis=0)).ravel()
    q = int(kind.lstrip("mutualkn"))
    return C + glue * atom_neighbours(W, q, kind.startswith("mutual")) * np.sqrt(np.outer(s, s)) / q


def cluster_as_kdsclustering(A, codes, W, k, seed, embedding):
    """Labels from KDSClustering's spectral step on the atom graph A (its
    degrees standing in for the code sums), and the relative eigengap over
    the spread modes."""
    spectrum = BipartiteSpectrum(A, A.sum(axis=1), min_component=0.01, atoms=W, embedding=embedding)
    try:
        U = normalize_rows(np.asarray(codes @ spectrum.projection(k)))
    except ValueError:  # fewer spread modes than clusters
        return np.zeros(codes.shape[0], dtype=int), 0.0
    mu = np.maximum(1.0 - spectrum.eigenvalues[spectrum.spread][: k + 1], 1e-10)
    return KMeans(k, n_init=10, random_state=seed).fit_predict(U), float(mu[k] / mu[k - 1]) if mu.size > k else 0.0


def cluster(A, codes, k, seed):
    """Labels and the relative eigengap of the atom graph A."""
    deg = A.sum(axis=1)
    n_comp, comp = connected_components(sp.csr_array(A > 0), directed=False)
    mass = np.bincount(comp, weights=deg, minlength=n_comp)
    keep = (mass >= max(0.01 * deg.sum(), 5))[comp] & (deg > 0)
    if keep.sum() <= k:
        return np.zeros(codes.shape[0], dtype=int), 0.0
    r = np.zeros_like(deg)
    r[keep] = 1.0 / np.sqrt(deg[keep])
    vals, vecs = np.linalg.eigh((r[:, None] * A * r[None, :])[np.ix_(keep, keep)])
    vals, vecs = vals[::-1], vecs[:, ::-1]
    mu = np.maximum(1.0 - vals[: k + 1], 1e-10)
    V = np.zeros((A.shape[0], k))
    V[keep] = vecs[:, :k]
    U = normalize_rows(np.asarray(codes @ (r[:, None] * V)))
    return KMeans(k, n_init=10, random_state=seed).fit_predict(U), float(mu[k] / mu[k - 1])


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--atoms", default="100,400,1000")
    ap.add_argument("--graphs", default="codes,mutual5,knn5")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--glue", type=float, default=1.0, help="weight of the neighbour edges (default 1)")
    ap.add_argument("--spectral", choices=["plain", "leading", "diffusion"], default="plain")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    data_dir = find_data_dir(args.data)
    sizes = [int(a) for a in args.atoms.split(",")]
    graphs = args.graphs.split(",")
    for _, title, Y, y in table_sets(data_dir, args.only):
        if Y is None:
            print(f"{title}: skipped ({y})")
            continue
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        k = len(np.unique(y))
        acc = {(g, m): [] for g in graphs for m in sizes}
        gap = {(g, m): [] for g in graphs for m in sizes}
        t0 = time.perf_counter()
        for seed in range(args.seeds):
            atoms = kmeans_plusplus(Y, min(max(sizes), Y.shape[0]), random_state=seed)[0]
            for m in sizes:
                W = atoms[: min(m, Y.shape[0])]
                codes = sp.csr_array(sparse_encode(Y, W, lam=1.0, encoder="active-set"))
                for g in graphs:
                    A = atom_graph(codes, W, g, args.glue)
                    if args.spectral == "plain":
                        labels, ratio = cluster(A, codes, k, seed)
                    else:
                        labels, ratio = cluster_as_kdsclustering(A, codes, W, k, seed, args.spectral)
                    acc[g, m].append(clustering_accuracy(y, labels))
                    gap[g, m].append(ratio)
        print(f"{title} (n={Y.shape[0]:,}, k={k}, {time.perf_counter() - t0:.0f} s)")
        for g in graphs:
            cells = [
                f"m={m}: {np.mean(acc[g, m]):.4f} (min {np.min(acc[g, m]):.4f}, gap {np.mean(gap[g, m]):.3g})"
                for m in sizes
            ]
            print(f"  {g:8s} " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()

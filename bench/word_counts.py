"""Word counts: ``KDSClustering(k)`` with defaults on sparse TF-IDF rows,
beside SpectralClustering and KMeans on the same matrix.

    python bench/word_counts.py [--draws 2] [--first-draw 0] [--seeds 2] [--n 4000]

Each draw makes ``n`` documents of 6 topics over 5,000 words: a topic's word
frequencies are 85% a shared background (Dirichlet 0.05) and 15% its own
(Dirichlet 0.02), a document draws 5 + Poisson(40) words of its topic, and
the counts become unit TF-IDF rows (scikit-learn's ``TfidfTransformer``), a
``scipy.sparse`` CSR matrix of about 42 words a row: the shape of text,
where noise is most of every distance. Draw ``r`` comes from
``numpy.random.default_rng(r)``. Two rows a draw: the TF-IDF matrix as it
is (fastkds reads it as dense chunks; SpectralClustering and KMeans take it
sparse), and its latent semantic analysis, the usual first step for text
(``TruncatedSVD(100)`` then unit rows). Columns: fastkds's accuracy (mean
and min over the seeds) and mean fit seconds; SpectralClustering
(``affinity="nearest_neighbors"``), the best of n_neighbors 5, 10 and 20
with its seconds, and at its default of 10; KMeans at scikit-learn's
defaults, with its seconds. Nothing here chose a default.
"""

import time
import warnings

import numpy as np
from scipy import sparse

from fastkds import KDSClustering, clustering_accuracy
from real_data import _kmeans, _spectral, fastkds_runs, spectral_best, table_parser

N_TOPICS, N_WORDS = 6, 5000


def draw(n, seed):
    """``(X, y)``: TF-IDF rows of ``n`` documents (CSR) and their topics."""
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(seed)
    background = rng.dirichlet(np.full(N_WORDS, 0.05))
    topics = 0.85 * background + 0.15 * rng.dirichlet(np.full(N_WORDS, 0.02), size=N_TOPICS)
    y = rng.integers(0, N_TOPICS, n)
    lengths = rng.poisson(40, n) + 5
    counts = np.array([rng.multinomial(length, topics[t]) for length, t in zip(lengths, y)])
    return TfidfTransformer().fit_transform(sparse.csr_matrix(counts)), y


def lsa(X):
    """Latent semantic analysis: 100 SVD components of ``X``, unit rows."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.preprocessing import normalize

    return normalize(TruncatedSVD(100, random_state=0).fit_transform(X))


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--draws", type=int, default=2, help="draws (default 2)")
    ap.add_argument("--first-draw", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=2, help="fastkds seeds per draw (default 2)")
    ap.add_argument("--n", type=int, default=4000, help="documents a draw (default 4,000)")
    args = ap.parse_args(argv)
    columns = ["input", "draw", "fastkds mean", "min", "fastkds s", "Spectral best", "its n_neighbors"]
    columns += ["Spectral s", "Spectral 10", "KMeans", "KMeans s"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X, _ = draw(300, 0)
        KDSClustering(2, random_state=0).fit(X)  # compile
        for r in range(args.first_draw, args.first_draw + args.draws):
            X, y = draw(args.n, r)
            for name, data in (("TF-IDF, sparse", X), ("LSA, 100", lsa(X))):
                accs, seconds = fastkds_runs(data, y, N_TOPICS, range(args.seeds))
                best = spectral_best(data, y, N_TOPICS)
                default = clustering_accuracy(y, _spectral(data, N_TOPICS, 10))
                t0 = time.perf_counter()
                kmeans = clustering_accuracy(y, _kmeans(data, N_TOPICS))
                kmeans_s = time.perf_counter() - t0
                print(
                    f"| {name} | {r} | {np.mean(accs):.4f} | {np.min(accs):.4f} | {np.mean(seconds):.2f} "
                    f"| {best[0]:.4f} | {best[1]} | {best[2]:.2f} | {default:.4f} | {kmeans:.4f} | {kmeans_s:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

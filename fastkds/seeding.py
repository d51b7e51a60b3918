"""k-means++ seeding of the initial atoms, on the fit's Numba threads.

scikit-learn's ``kmeans_plusplus`` reads the data once per atom through a
BLAS product on BLAS's own threads, whatever ``n_jobs`` says. Its greedy
algorithm (Arthur and Vassilvitskii's D^2 sampling, with ``2 + log(m)``
candidates per atom of which the one that lowers the potential most is
kept) is reproduced here draw for draw from the same random stream, with
each pass over the data one parallel kernel
(:func:`fastkds._kernels.seeding_distances`). For float64 data the atoms
are scikit-learn's, up to the rounding of distances.

The pass skips the rows a candidate cannot come nearer to than their
nearest seed so far (the triangle inequality, as Elkan's k-means does, on
bounds from one small product of the seeds and the candidates), so it reads
less of the data as the seeds fill it; the distances it keeps, and so the
seeds, are the same.
"""

import numpy as np

from ._kernels import BLOCK, seeding_distances


def kmeans_plusplus_indices(Y, n_centres, rng):
    """Rows of ``Y`` chosen as k-means++ seeds.

    Parameters
    ----------
    Y : ndarray of shape (n, d), float32 or float64, C-contiguous
    n_centres : int
        Seeds to choose, at most ``n``.
    rng : numpy.random.RandomState
        Drawn from as scikit-learn's ``kmeans_plusplus`` draws: one choice of
        the first seed, then ``2 + int(log(n_centres))`` uniforms per seed.

    Returns
    -------
    ndarray of int64, shape (n_centres,)
        The chosen rows, in the order chosen. Rows may repeat when the data
        have fewer distinct points than seeds.

    Notes
    -----
    Runs on the calling thread's Numba threads
    (:func:`fastkds._config.numba_threads`).
    """
    n = Y.shape[0]
    n_trials = 2 + int(np.log(n_centres))
    weights = np.ones(n, dtype=Y.dtype)  # scikit-learn's uniform sample weights
    indices = np.empty(n_centres, dtype=np.int64)
    indices[0] = rng.choice(n, p=weights / weights.sum())
    n_blocks = (n + BLOCK - 1) // BLOCK
    D = np.empty((n, n_trials))
    block_sums = np.empty((n_blocks, n_trials))
    seed_of = np.zeros(n, dtype=np.int64)  # each row's nearest seed so far, by its place in indices
    seeds = np.empty((n_centres, Y.shape[1]))  # the seeds in float64, for the bounds
    seeds[0] = Y[indices[0]]
    seed_norms = np.empty(n_centres)
    seed_norms[0] = seeds[0] @ seeds[0]
    seeding_distances(Y, indices[:1], np.full(n, np.inf), seed_of, np.empty((0, n_trials)), D, block_sums)
    closest = D[:, 0].copy()
    potential = block_sums[:, 0].sum()
    for c in range(1, n_centres):
        draws = rng.uniform(size=n_trials) * potential
        candidates = np.minimum(np.searchsorted(np.cumsum(closest), draws), n - 1)
        reach = _reach(seeds[:c], seed_norms[:c], Y[candidates].astype(np.float64))
        seeding_distances(Y, candidates, closest, seed_of, reach, D, block_sums)
        potentials = block_sums.sum(axis=0)
        best = int(np.argmin(potentials))
        indices[c] = candidates[best]
        seed_of[D[:, best] < closest] = c
        seeds[c] = Y[indices[c]]
        seed_norms[c] = seeds[c] @ seeds[c]
        closest = D[:, best].copy()
        potential = potentials[best]
    return indices


def _reach(seeds, seed_norms, candidates):
    """Lower bounds on the squared distances of ``seeds`` (float64, with
    their squared norms) from ``candidates`` (float64), as a (seeds,
    candidates) array: the expanded form ``|s|^2 + |c|^2 - 2 s.c`` by one
    BLAS product, less twice the most its rounding can add (``d + 4``
    float64 epsilons of ``|s|^2 + |c|^2``, for any order of the sums)."""
    cand_norms = np.einsum("ij,ij->i", candidates, candidates)
    scale = seed_norms[:, None] + cand_norms[None, :]
    slack = 2 * (candidates.shape[1] + 4) * np.finfo(np.float64).eps
    return scale * (1.0 - slack) - 2.0 * (seeds @ candidates.T)

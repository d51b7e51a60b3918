"""k-means++ seeding of the initial atoms, on the fit's Numba threads.

scikit-learn's ``kmeans_plusplus`` reads the data once per atom through a
BLAS product on BLAS's own threads, whatever ``n_jobs`` says. Its greedy
algorithm (Arthur and Vassilvitskii's D^2 sampling, with ``2 + log(m)``
candidates per atom of which the one that lowers the potential most is
kept) is reproduced here draw for draw from the same random stream, with
each pass over the data one parallel kernel
(:func:`fastkds._kernels.seeding_distances`). For float64 data the atoms
are scikit-learn's, up to the rounding of distances.
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
    seeding_distances(Y, indices[:1], np.full(n, np.inf), D, block_sums)
    closest = D[:, 0].copy()
    potential = block_sums[:, 0].sum()
    for c in range(1, n_centres):
        draws = rng.uniform(size=n_trials) * potential
        candidates = np.minimum(np.searchsorted(np.cumsum(closest), draws), n - 1)
        seeding_distances(Y, candidates, closest, D, block_sums)
        potentials = block_sums.sum(axis=0)
        best = int(np.argmin(potentials))
        indices[c] = candidates[best]
        closest = D[:, best].copy()
        potential = potentials[best]
    return indices

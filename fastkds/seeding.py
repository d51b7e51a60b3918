"""k-means++ seeding of the initial atoms, on the fit's Numba threads.

scikit-learn's ``kmeans_plusplus`` reads the data once per atom through a
BLAS product on BLAS's own threads, whatever ``n_jobs`` says. Its greedy
algorithm (Arthur and Vassilvitskii's D^2 sampling, with ``2 + log(m)``
candidates per atom of which the one that lowers the potential most is
kept) is reproduced here draw for draw from the same random stream, with
each pass over the data one parallel kernel
(:func:`fastkds._kernels.seeding_distances`) and the loop over the seeds
compiled too (:func:`fastkds._kernels.seeding_rounds`). For float64 data
the atoms are scikit-learn's, up to the rounding of distances.

The pass skips the pairs of a row and a candidate that a bound shows to be
no nearer than the row's nearest seed so far: for data of many features
their distance along a few principal directions, which cannot exceed the
whole; otherwise the triangle inequality (as Elkan's k-means uses it, on
one small product of the seeds and the candidates). It reads less of the
data as the seeds fill it; the distances it keeps, and so the seeds, are
the same.
"""

import numba
import numpy as np

from . import _config, _kernels
from ._kernels import BLOCK, seeding_distances, seeding_rounds
from ._validation import read_only

#: Fewest features for the triangle bound: on fewer, its bookkeeping per
#: seed costs more than the short distances it saves (docs/experiments.md,
#: "k-means++ seeding that skips what bounds rule out").
TRIANGLE_MIN_FEATURES = 16

#: Directions of the projection bound (:func:`_projection`). Its set-up
#: reads the data once more, so it is used where a pass is long and the
#: bound cheap beside the distance it may save: at least ``8 r`` features
#: and ``64 r`` rows (where its basis, from ``8 r`` rows, is a small part).
PROJECTED_FEATURES = 32


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
    Y = read_only(Y)
    n = Y.shape[0]
    n_trials = 2 + int(np.log(n_centres))
    weights = np.ones(n, dtype=Y.dtype)  # scikit-learn's uniform sample weights
    indices = np.empty(n_centres, dtype=np.int64)
    indices[0] = rng.choice(n, p=weights / weights.sum())
    # every later draw at once: the same numbers, in the same order, as
    # scikit-learn's rng.uniform(size=n_trials) a seed
    draws = rng.uniform(size=(n_centres - 1, n_trials))
    n_blocks = (n + BLOCK - 1) // BLOCK
    D = np.empty((n, n_trials))
    block_sums = np.empty((n_blocks, n_trials))
    Z, spread, margin = _projection(Y)
    # the triangle bound, where the projection is not used: each row's
    # nearest seed so far (by its place in the order chosen), and the seeds
    triangle = Z.shape[1] == 0 and Y.shape[1] >= TRIANGLE_MIN_FEATURES
    seed_of = np.zeros(n if triangle else 0, dtype=np.int64)
    seeds = np.empty((n_centres if triangle else 0, Y.shape[1]))  # float64
    seed_norms = np.empty(seeds.shape[0])
    # the first seed's pass: no seed yet, and no finite distance, to bound
    n_threads = numba.get_num_threads()  # the threads that claim the blocks, not the seeds
    first = (indices[:1], np.full(n, np.inf), seed_of, np.empty((0, 1)))
    seeding_distances(Y, *first, Z, spread, margin, D, block_sums, n_threads)
    closest = D[:, 0].copy()
    potential = block_sums[:, 0].sum()
    if triangle:
        seeds[0] = Y[indices[0]]
        seed_norms[0] = seeds[0] @ seeds[0]
    rounds = (draws, indices, closest, potential, seed_of, seeds, seed_norms)
    seeding_rounds(Y, *rounds, Z, spread, margin, D, block_sums, n_threads)
    return indices


def _projection(Y):
    """The projection bound's arrays for :func:`fastkds._kernels.seeding_distances`:
    ``(Z, spread, margin)``, with ``Z`` of no columns where it is not used.

    ``Z`` holds the rows less their mean ``mu`` on ``PROJECTED_FEATURES``
    orthonormal directions: the principal ones of evenly spaced rows (no
    random draw, so the seeds' stream is scikit-learn's), orthonormalised
    by a Householder QR. ``spread[i]`` is ``||Y[i] - mu||``; ``margin *
    (spread[i] + spread[c])`` bounds the rounding of ``||Z[i] - Z[c]||``,
    twice the sum of ``sqrt(r) d + 1`` epsilons of each (the difference,
    the product of d terms in each of r coordinates).
    """
    n, d = Y.shape
    r = PROJECTED_FEATURES
    if d < 8 * r or n < 64 * r or n * r * 8 > _config.LOAD_WHOLE_BYTES:
        return np.empty((n, 0)), np.empty(0), 0.0
    sample = Y[np.linspace(0, n - 1, 8 * r).astype(np.int64)].astype(np.float64)
    mu = sample.mean(axis=0)
    sample -= mu
    _, vectors = np.linalg.eigh(sample @ sample.T)
    directions = np.linalg.qr(sample.T @ vectors[:, -r:])[0]
    # the rows less mu, their coordinates and squared norms, block by block
    # on the fit's threads by the encoder's kernels (NumPy's would run on one)
    Y = read_only(Y)
    directions = np.asfortranarray(directions)  # as the product kernel takes its second factor
    Z = np.empty((n, r))
    sq_spread = np.empty(n)
    n_threads = numba.get_num_threads()
    if Y.dtype == np.float64:  # centred block by block inside the product
        _kernels.blas_products(Y, mu, directions, Z, sq_spread, n_threads)
    else:  # float64 copies of float32 rows, a slice at a time
        rows = np.empty((min(n, 4096), d))
        for lo in range(0, n, 4096):
            hi = min(lo + 4096, n)
            np.subtract(Y[lo:hi], mu, out=rows[: hi - lo])
            _kernels.blas_products(
                read_only(rows[: hi - lo]), mu[:0], directions, Z[lo:hi], sq_spread[lo:hi], n_threads
            )
    return Z, np.sqrt(sq_spread), 2 * (np.sqrt(r) * d + 1) * np.finfo(np.float64).eps

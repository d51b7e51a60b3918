"""Dictionary learning by alternating minimisation with the exact dictionary
step (docs/algorithm.md, "Dictionary"), streamed over chunks so memory does not grow with n.

One epoch encodes every chunk with the current dictionary and accumulates the
sufficient statistics ``X^T X``, ``s = X^T 1`` and ``X^T Y``; the new dictionary
solves ``(X^T X + 2 lam diag(s)) W = (1 + 2 lam) X^T Y``.
"""

import numba
import numpy as np
import scipy.linalg

from . import _config, _kernels
from ._validation import read_only


#: Fewest rows a block of the reservoir kernel takes (bar a chunk's only
#: block): below it, the blocks' own selections cost more than they share out.
_RESERVOIR_BLOCK_ROWS = 4096


def _part_bytes(n_atoms, n_features):
    """Bytes of one part's partial sums, ``m x (m + d)`` float64."""
    return 8 * n_atoms * (n_atoms + n_features)


def statistics_by_atom(n_atoms, n_features):
    """Whether a chunk's sufficient statistics are formed atom by atom
    (:func:`fastkds._kernels.accumulate_statistics_by_atom`) rather than in
    partial buffers (:func:`fastkds._kernels.accumulate_statistics`): where
    one part's partials would pass
    :data:`fastkds._kernels.STATISTICS_PART_BYTES`. Both give the same
    numbers."""
    return _part_bytes(n_atoms, n_features) > _kernels.STATISTICS_PART_BYTES


class SufficientStatistics:
    """Running sums over chunks of ``X^T X``, ``X^T 1``, ``X^T Y`` and the objective.

    The sums are float64 whatever the data dtype: float32 accumulation over
    millions of points would lose most of its digits.

    Parameters
    ----------
    n_atoms, n_features : int
    n_candidates : int
        How many points to keep as candidates to re-seed dead atoms: a
        weighted reservoir sample, each point drawn with probability
        proportional to its objective (as k-means++ draws by squared distance),
        so badly represented regions get the new atoms.
    random_state : numpy RandomState or None
        Draws the reservoir's key (one 64-bit draw) when ``n_candidates > 0``
        and ``key`` is not given.
    key : int or None
        Philox key of the reservoir. Point ``i`` (its global row index) gets
        the ``i``-th output of a Philox stream with this key, so the sample
        does not depend on how the rows are split into chunks or blocks:
        partial statistics built with the same key and their ``row_start``
        and joined with :meth:`merge` equal one sequential pass.
    row_start : int, default=0
        Global row index of the first point added.
    """

    def __init__(self, n_atoms, n_features, n_candidates=0, random_state=None, *, key=None, row_start=0):
        self.XtX = np.empty((n_atoms, n_atoms))
        self.s = np.zeros(n_atoms)
        self.XtY = np.empty((n_atoms, n_features))
        # zeroed here, on one thread: np.zeros leaves fresh pages to fault
        # in where the kernel first writes, and two threads faulting at once
        # take longer than one (docs/experiments.md, "Page faults on two threads")
        self.XtX.fill(0.0)
        self.XtY.fill(0.0)
        self.objective_sum = 0.0
        self.n_samples = 0
        self.n_candidates = n_candidates
        if n_candidates and key is None:
            if random_state is None:
                raise ValueError("n_candidates > 0 needs a random_state or a key")
            key = int(random_state.randint(0, 2**64, dtype=np.uint64))
        self.key = key
        self._next_row = int(row_start)
        self._keys = np.empty(0)
        self._rows = np.empty(0, dtype=np.int64)
        self.candidates = np.empty((0, n_features))

    def add_chunk(self, indptr, indices, data, Y, objective):
        """Add the codes (CSR triple) and objectives of one chunk ``Y``."""
        m, d = self.XtY.shape
        n = Y.shape[0]
        n_parts = int(max(1, min(8, -(-n // _kernels.BLOCK), _config.STATISTICS_PARTS_BUDGET // _part_bytes(m, d))))
        args = (indptr, indices, data, read_only(Y), n_parts, self.XtX, self.s, self.XtY)
        if statistics_by_atom(m, d):  # the same sums either way
            _kernels.accumulate_statistics_by_atom(*args, numba.get_num_threads())
        else:
            _kernels.accumulate_statistics(*args)
        self.add_objectives(Y, objective)

    def add_objectives(self, Y, objective):
        """Add a chunk's objectives, its point count and its re-seed
        candidates: all that :meth:`add_chunk` adds but the sums of the codes
        (which the GPU path forms on the device).

        Parameters
        ----------
        Y : ndarray of shape (n, d)
            The chunk's points, as encoded.
        objective : ndarray of shape (n,)
            Their objectives.
        """
        self.objective_sum += float(np.sum(objective, dtype=np.float64))
        self.n_samples += Y.shape[0]
        if self.n_candidates:
            self._sample_candidates(Y, objective)

    def _sample_candidates(self, Y, objective):
        """Efraimidis-Spirakis weighted reservoir: keep the largest ``log(u) / w``.

        Each block of the chunk keeps its best ``n_candidates`` keys on the
        threads (:func:`fastkds._kernels.reservoir_top`), and all of them
        go to :meth:`_keep`, whose one selection keeps the best of those and
        the reservoir. Ties go to the lowest rows, so the choice does not
        depend on the chunking or the blocks.
        """
        n = Y.shape[0]
        row_start = self._next_row
        self._next_row += n
        k = min(self.n_candidates, n)
        if k == 0:
            return
        # blocks of at least four reservoirs' rows, a few per thread
        n_blocks = max(1, min(4 * numba.get_num_threads(), n // max(4 * k, _RESERVOIR_BLOCK_ROWS)))
        keys = np.empty((n_blocks, k))
        rows = np.empty((n_blocks, k), dtype=np.int64)
        _kernels.reservoir_top(np.uint64(self.key), row_start, read_only(objective), keys, rows)
        kept = rows >= 0
        self._keep(keys[kept], rows[kept] + row_start, Y, rows[kept])

    def _keep(self, keys, rows, points, where):
        """Join new candidates to the reservoir and keep the best ``n_candidates``.

        The new candidates' points are ``points[where]``; only those kept
        are copied (a chunk's candidates, a few times the reservoir's, are rows
        of d numbers, and most are not kept).
        """
        n_old = self._keys.size
        keys = np.concatenate([self._keys, keys])
        rows = np.concatenate([self._rows, rows])
        keep = np.lexsort((rows, -keys))[: self.n_candidates]  # largest key first, then lowest row
        old = keep < n_old
        pts = np.empty((keep.size, self.candidates.shape[1]))
        pts[old] = self.candidates[keep[old]]
        pts[~old] = points[where[keep[~old] - n_old]]
        self._keys, self._rows, self.candidates = keys[keep], rows[keep], pts

    def merge(self, other):
        """Add the statistics of ``other`` (same shapes and key) into ``self``.

        Sums are added; the re-seed candidates are the best of both
        reservoirs, so statistics of disjoint row blocks merged in any order
        keep the same candidates as one pass over all the rows.

        Returns
        -------
        self
        """
        if other.XtY.shape != self.XtY.shape or other.n_candidates != self.n_candidates:
            raise ValueError("cannot merge statistics of different shapes or reservoir sizes")
        if self.n_candidates and other.key != self.key:
            raise ValueError("cannot merge reservoirs drawn with different keys")
        self.XtX += other.XtX
        self.s += other.s
        self.XtY += other.XtY
        self.objective_sum += other.objective_sum
        self.n_samples += other.n_samples
        if self.n_candidates and other._keys.size:
            self._keep(other._keys, other._rows, other.candidates, np.arange(other._keys.size))
        return self

    @property
    def mean_objective(self):
        """Mean of ``f(x_i; y_i, W)`` over the points added."""
        return self.objective_sum / max(self.n_samples, 1)


def duplicate_atoms(W, rel_tol=0.05):
    """Mask of atoms that (nearly) coincide with an earlier atom.

    Two atoms at one place receive identical codes and updates, so they never
    separate: one of them is wasted. "Nearly" means closer than ``rel_tol``
    times the median distance from an atom to its nearest neighbour.
    """
    m = W.shape[0]
    if m < 2:
        return np.zeros(m, dtype=bool)
    sq = np.einsum("ij,ij->i", W, W)
    D = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * (W @ W.T), 0.0))
    np.fill_diagonal(D, np.inf)
    spacing = np.median(D.min(axis=1))
    if spacing == 0:  # most atoms coincide: the data have no spread to share out
        return np.zeros(m, dtype=bool)
    close = np.triu(D <= rel_tol * spacing, k=1)
    return close.any(axis=0)


def solve_positive(A, rhs):
    """``A^{-1} rhs`` for a symmetric positive definite ``A``, the product
    on the fit's Numba threads.

    Parameters
    ----------
    A : ndarray of shape (m, m), float64
    rhs : ndarray of shape (m, d), float64

    Returns
    -------
    ndarray of shape (m, d), float64

    Raises
    ------
    numpy.linalg.LinAlgError
        Where ``A`` is not positive definite, or is so ill-conditioned that
        scipy's ``solve`` would warn (reciprocal condition number below
        LAPACK's epsilon): the caller's least-squares branch then answers.

    Notes
    -----
    By the inverse from the Cholesky factor, then one product: OpenBLAS's
    triangular solves with hundreds of right-hand sides run at a third of
    its product's speed, and on one thread (BLAS is held to one while the
    kernels run, :func:`fastkds._config.numba_threads`), while the product
    spreads over the threads by blocks of rows, the same blocks whatever
    their number. Where the condition number passes the test, the inverse's
    forward error is of the order of the solve's (docs/experiments.md, "The
    two-thread fit's serial part").
    """
    c, _ = scipy.linalg.cho_factor(A, lower=True, check_finite=False)
    rcond, info = scipy.linalg.lapack.dpocon(c, scipy.linalg.norm(A, 1, check_finite=False), uplo="L")
    if info != 0 or not rcond >= scipy.linalg.lapack.dlamch("E"):  # as scipy's solve, NaN included
        raise np.linalg.LinAlgError(f"ill-conditioned matrix (rcond={rcond:.3g})")
    inverse, info = scipy.linalg.lapack.dpotri(c, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError("singular matrix")
    inverse = np.tril(inverse) + np.tril(inverse, -1).T  # dpotri fills one triangle
    out = np.empty((A.shape[0], rhs.shape[1]))
    # the encoder's product kernel (its Wt is the transposed atoms, F-ordered)
    b_max, _ = _kernels.blas_products(
        read_only(inverse), np.empty(0), np.asfortranarray(rhs), out, np.empty(A.shape[0]), numba.get_num_threads()
    )
    if not np.isfinite(b_max):
        raise np.linalg.LinAlgError("the solution is not finite")
    return out


def solve_dictionary(stats, lam, W_old, *, dead_threshold=0.0):
    """Exact dictionary step from sufficient statistics, re-seeding dead and
    duplicate atoms.

    Parameters
    ----------
    stats : SufficientStatistics
    lam : float
    W_old : ndarray of shape (m, d)
        Current dictionary; supplies atoms when too few re-seed candidates exist.
    dead_threshold : float
        Atoms with usage ``s_j <= dead_threshold`` are dead.

    Returns
    -------
    W : ndarray of shape (m, d), float64
    n_dead : int
        Atoms re-seeded at candidate points (unused atoms, and atoms that
        coincide with another).
    """
    alive = stats.s > dead_threshold
    W = np.array(W_old, dtype=np.float64)
    if alive.any():
        A = stats.XtX[np.ix_(alive, alive)]  # a copy
        A[np.diag_indices_from(A)] += 2.0 * lam * stats.s[alive]
        rhs = np.multiply(stats.XtY[alive], 1.0 + 2.0 * lam, order="F")  # F: solve_positive's product takes it so
        try:
            W[alive] = solve_positive(A, rhs)
        except np.linalg.LinAlgError:
            # lam = 0 with linearly dependent codes: least squares picks one minimiser
            W[alive] = scipy.linalg.lstsq(A, rhs, check_finite=False)[0]
    dead = np.flatnonzero(~alive | duplicate_atoms(W))
    n_seed = min(dead.size, stats.candidates.shape[0])
    W[dead[:n_seed]] = stats.candidates[:n_seed]
    return W, int(dead.size)


def _improves(best, F, tol, W):
    """Whether the objective ``F`` lowers ``best``, the lowest so far, by more
    than ``tol`` of it, and by more than rounding: an objective near 0 (the
    data fitted exactly) moves by a few ulps of the data's squared norm,
    ``||w||^2`` ~ ``||y||^2``, which relative to itself is never small.
    ``W``: the atoms ``F`` was measured with."""
    noise = 1e3 * np.finfo(float).eps * float(np.mean(np.sum(W * W, axis=1)))
    return best - F > max(tol * abs(best), noise)


class LastEpoch:
    """The codes of a fit's last epoch, kept for a clusterer.

    A clusterer embeds the codes of every point under the fitted
    dictionary, and a fit's last epoch on all points has just computed
    them. Given to :func:`fit_alternating`, it makes a fit that converges
    end on the dictionary its last epoch encoded with (that epoch's update
    would lower the objective by less than ``tol``: the fit has stopped
    improving the atoms), and keeps that epoch's codes and statistics here,
    so that the points need not be encoded again.

    Parameters
    ----------
    new_sink : callable or None, default=None
        Returns an empty list-like (anything with ``append``) for one
        epoch's codes, as CSR triples. None keeps no codes (results written
        to files, or held by Dask workers), only the rule for the dictionary.

    Attributes
    ----------
    codes : list-like or None
        The last epoch's codes, where the fit converged and ``new_sink``
        was given.
    stats : SufficientStatistics or None
        That epoch's statistics, likewise.
    """

    def __init__(self, new_sink=None):
        self.new_sink = new_sink
        self.codes = self.stats = None


def fit_alternating(
    Y,
    W_init,
    *,
    lam,
    n_iter,
    max_epochs,
    tol,
    chunk_size,
    random_state,
    backend,
    progress=None,
    step="centred",
    encoder="apg",
    last_epoch=None,
    best_before=None,
    buffer_rows=None,
):
    """Alternating minimisation with the exact dictionary step.

    Parameters
    ----------
    Y : ndarray of shape (n, d), validated, float32 or float64
    W_init : ndarray of shape (m, d)
    lam : float
    n_iter : int
        Encoder iterations T.
    max_epochs : int
    tol : float
        Stop at the first epoch whose mean objective is not below the lowest
        of the earlier epochs by more than ``tol`` of it; 0 runs
        ``max_epochs`` epochs.
    chunk_size : int
    random_state : numpy RandomState
        Draws the points that re-seed dead atoms.
    backend : fastkds._backends.CpuBackend or CudaBackend
        Where the encoding and the statistics run.
    progress : callable or None
        Called as ``progress(epoch, mean_objective, n_dead)`` after each epoch.
    step : {"centred", "paper"}, default="centred"
    encoder : {"apg", "active-set"}, default="apg"
        The encoder (see :class:`fastkds.prepared.PreparedDictionary`).
    last_epoch : LastEpoch or None, default=None
        Given, a fit that converges returns the dictionary its last epoch
        encoded with, and that epoch's codes and statistics go into it; the
        epochs then encode with the atoms rounded to the data's dtype, as
        ``components_`` stores them, so the codes are those the fitted
        model gives. None: the fit ends on the last epoch's update.
    best_before : float or None, default=None
        The lowest mean objective of a warm start on a uniform random
        sample of these points: an estimate of theirs, which the stopping
        rule counts among the earlier epochs' (so a first epoch that does
        not lower it by ``tol`` ends the fit).
    buffer_rows : int or None, default=None
        Rows of the buffer sets asked of ``backend`` (None: ``min(chunk_size,
        n)``). The warm-start stages ask for their largest stage's, so that
        a backend that keeps its sets (the GPU's) allocates them once.

    Returns
    -------
    W : ndarray of shape (m, d), float64
    history : list of float
        Mean objective of each epoch's codes (before that epoch's update).
    n_epochs : int
    converged : bool
    """
    n, d = Y.shape
    m = W_init.shape[0]
    W = np.asarray(W_init, dtype=np.float64)
    history = []
    buffers = None
    converged = False
    epoch = 0
    # only a fit that can converge ends on an epoch's codes
    new_sink = last_epoch.new_sink if last_epoch is not None and tol > 0 else None
    for epoch in range(1, max_epochs + 1):
        if last_epoch is not None:
            W = W.astype(Y.dtype).astype(np.float64)
        prepared = backend.prepare(W, lam, n_iter, Y.dtype, step, encoder)
        if buffers is None:  # same shapes every epoch: allocate once
            buffers = backend.allocate(prepared, min(chunk_size, n) if buffer_rows is None else buffer_rows)
        stats = SufficientStatistics(m, d, n_candidates=m, random_state=random_state)
        codes = None if new_sink is None else new_sink()
        backend.run_epoch(Y, prepared, chunk_size, stats, buffers, codes)
        F = stats.mean_objective
        # The lowest objective so far, not the last one: with codes that stop
        # short of the optimum, and with atoms re-seeded every epoch (data with
        # repeated rows), the objective does not fall monotonically; an epoch
        # that does not lower it has stopped improving the atoms.
        earlier = history if best_before is None else [best_before, *history]
        converged = bool(tol > 0 and earlier and not _improves(min(earlier), F, tol, W))
        history.append(F)
        if converged and last_epoch is not None:
            # the fit ends on the atoms this epoch encoded with: no update to solve
            if progress is not None:
                progress(epoch, F, 0)
            if codes is not None:
                last_epoch.codes, last_epoch.stats = codes, stats
            break
        W, n_dead = solve_dictionary(stats, lam, W)
        if progress is not None:
            progress(epoch, F, n_dead)
        if converged:
            break
    return W, history, epoch, converged

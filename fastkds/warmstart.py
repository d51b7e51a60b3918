"""The exact solver's fit plan, shared by the in-memory and the Dask fit:
seeding the atoms, the warm-start subsamples, and the stages of
alternating minimisation run through them.

A fit learns first on nested random subsamples of the data (each ten times
the last), then on all points, each stage starting from the dictionary of
the one before: the slow last epochs then run on the small samples, and
only a few on all points. Where the data live (in memory, read in chunks,
or on Dask workers) only decides how rows are gathered, which the caller
does; the sizes, the draws and the stages are decided here once.
"""

import numpy as np

from . import _config, _progress
from ._config import numba_threads
from ._validation import check_positive_int
from .encoding import chunk_rows
from .exceptions import KDSConvergenceWarning, OffCentreDataWarning, warn
from .prepared import OFFSET_STEP_RATIO_WARN, encoder_step, offset_step_ratio
from .seeding import kmeans_plusplus_indices
from .solvers import fit_alternating
from .sources import random_rows


def presample_size(presample, n_atoms, n):
    """Points of the first warm-start subsample (0: none).

    Parameters
    ----------
    presample : "auto", int or None
        The estimator's parameter (see :class:`fastkds.KDS`).
    n_atoms, n : int
        Atoms asked for, and points of the data.

    Returns
    -------
    int
    """
    if presample is None:
        return 0
    if isinstance(presample, str):
        if presample != "auto":
            raise ValueError(f"presample must be 'auto', an int or None, got {presample!r}")
        size = seeding_size(np.inf, n_atoms)
        return size if n >= _config.PRESAMPLE_FACTOR * size else 0
    size = check_positive_int(presample, "presample")
    if size < n_atoms:
        raise ValueError(f"presample={size} is smaller than n_atoms={n_atoms}")
    return size if size < n else 0


def seeding_size(n, n_atoms):
    """Points k-means++ seeds ``n_atoms`` atoms from when it cannot see all
    ``n`` (data too large to load): as many as ``presample="auto"`` takes."""
    return int(min(n, max(_config.PRESAMPLE_MIN, _config.PRESAMPLE_PER_ATOM * n_atoms)))


def presample_ladder(n_pre, n, d, itemsize):
    """Sizes of the nested warm-start subsamples: ``n_pre``, ``10 n_pre``, ...
    while a size is at most ``n / PRESAMPLE_FACTOR`` and its points fit in
    :data:`~fastkds._config.LOAD_WHOLE_BYTES` (``[]`` when ``n_pre`` is 0)."""
    if not n_pre:
        return []
    sizes = [n_pre]
    while 10 * sizes[-1] * _config.PRESAMPLE_FACTOR <= n and 10 * sizes[-1] * d * itemsize <= _config.LOAD_WHOLE_BYTES:
        sizes.append(10 * sizes[-1])
    return sizes


def nested_samples(take, rng, n, ladder):
    """The warm-start subsamples: for each size of ``ladder``, the first
    that many of one random order of the ``n`` rows, in row order.

    ``take(sorted_indices)`` gathers rows into memory; it is called once,
    for the largest sample, and the smaller ones are taken from it.
    """
    if not ladder:
        return []
    order = random_rows(rng, n, ladder[-1])
    rows = np.sort(order)
    largest = take(rows)
    # the largest sample is all of ``rows``: only the smaller ones are searched for
    return [largest[np.searchsorted(rows, np.sort(order[:size]))] for size in ladder[:-1]] + [largest]


def check_init(init, n_atoms, n_features):
    """``init`` validated: ``"random"``, ``"k-means++"`` or an
    ``(n_atoms, n_features)`` array of finite numbers."""
    if isinstance(init, str):
        if init not in ("random", "k-means++"):
            raise ValueError(f"init must be 'random', 'k-means++' or an array, got {init!r}")
        return init
    W = np.asarray(init)
    if W.dtype.kind not in "biuf":
        raise TypeError(f"init must be 'random', 'k-means++' or a numeric array, got an array of dtype {W.dtype}")
    if W.shape != (n_atoms, n_features):
        raise ValueError(f"init array has shape {W.shape}, expected (n_atoms, n_features) = ({n_atoms}, {n_features})")
    if not np.all(np.isfinite(W)):
        raise ValueError("init array contains NaN or infinite values")
    return W


def _warn_if_off_centre(W, n_iter, step, encoder):
    """Warn when, with the accelerated encoder at the paper's step, the
    initial atoms sit so far from the origin that the encoder's step is much
    smaller than for the same data centred."""
    if step != "paper" or encoder != "apg":
        return
    ratio = offset_step_ratio(W)
    if ratio > OFFSET_STEP_RATIO_WARN:
        warn(
            f"the data lie far from the origin compared with their spread: the encoder step "
            f"1/sigma_max(W)^2 is {ratio:.3g} times smaller than for the same data centred, and "
            f"n_iter={n_iter} steps may stop far from the optimal codes (the encoder is not "
            f"translation-invariant). Subtract the data's mean first, for example with "
            f"sklearn.preprocessing.StandardScaler(with_std=False) in a Pipeline, use step='centred', "
            f"or raise n_iter.",
            OffCentreDataWarning,
        )


def initial_dictionary(Y, init, rng, p):
    """The initial atoms (float64), from the points of ``Y`` (an array, or
    anything indexable by sorted row indices for ``init="random"``).

    Parameters
    ----------
    Y : ndarray of shape (n, d), or row-indexable
    init : {"k-means++", "random"} or ndarray
    rng : numpy.random.RandomState
    p : dict
        The fit's validated parameters (``n_atoms``, ``n_iter``, ``step``,
        ``encoder``, ``n_jobs``: k-means++ runs on that many threads).

    Returns
    -------
    W : ndarray of shape (n_atoms, d)
    """
    m = p["n_atoms"]
    init = check_init(init, m, Y.shape[1])
    if isinstance(init, np.ndarray):
        W = init.astype(np.float64)
    elif init == "random":
        idx = np.sort(rng.choice(Y.shape[0], m, replace=False))
        W = Y[idx].astype(np.float64)
    else:
        Y = np.ascontiguousarray(Y)
        with numba_threads(p["n_jobs"]):
            W = Y[kmeans_plusplus_indices(Y, m, rng)].astype(np.float64)
    _warn_if_off_centre(W, p["n_iter"], p["step"], p["encoder"])
    return W


def seeding_sample(take, rng, n, n_atoms):
    """The points k-means++ seeds the atoms from when all ``n`` are too many
    to load: :func:`seeding_size` random rows, gathered by ``take(sorted_indices)``."""
    return take(np.sort(random_rows(rng, n, seeding_size(n, n_atoms))))


class DataSpan:
    """In-memory points' coordinates in an orthonormal basis of their own
    span about their mean.

    The exact fit sees the points only through distances (to atoms, to
    each other in the seeding), and atoms that are convex combinations of
    them: with the centred step (which does not depend on where the origin
    is) it gives the same atoms, codes and objective on these coordinates
    as on the points, up to rounding, with n features instead of d. The
    basis comes from the eigenvectors of the centred points' Gram matrix;
    directions of variance below ``1e-12`` of the largest are left out
    (rounding there).

    Parameters
    ----------
    Y : ndarray of shape (n, d)
        Checked data, float32 or float64.

    Attributes
    ----------
    coordinates : ndarray of shape (n, r), of ``Y``'s dtype
        ``r`` at most ``n - 1``; 0 where the points are all the same.
    """

    def __init__(self, Y):
        n, d = Y.shape
        self._Y = Y
        self.mean = Y.mean(axis=0, dtype=np.float64)
        gram = np.zeros((n, n))
        # the centred columns a block at a time, in one buffer: no copy of Y,
        # and no fresh pages to fault in for each block
        width = max(1, _config.SPAN_BLOCK_BYTES // (8 * n))
        buffer = np.empty((n, min(width, d)))
        for lo in range(0, d, width):
            block = buffer[:, : min(width, d - lo)]
            np.subtract(Y[:, lo : lo + block.shape[1]], self.mean[lo : lo + block.shape[1]], out=block)
            gram += block @ block.T
        variance, vectors = np.linalg.eigh(gram)
        keep = variance > variance[-1] * 1e-12 if variance[-1] > 0 else np.zeros(n, dtype=bool)
        self._vectors, self._scale = vectors[:, keep], np.sqrt(variance[keep])
        self.coordinates = np.ascontiguousarray(self._vectors * self._scale, dtype=Y.dtype)

    def features(self, W):
        """Rows ``W`` given in :attr:`coordinates` (atoms), in the points'
        features: ``W V^T + mean``, where the centred points are
        ``coordinates V^T``, so ``V^T = (vectors / scale)^T (Y - mean)``."""
        weights = (W / self._scale) @ self._vectors.T  # each row's weights on the centred points
        out = weights @ self._Y - np.outer(weights.sum(axis=1), self.mean) + self.mean
        return out.astype(self._Y.dtype)


def data_span(Y, p, init):
    """A :class:`DataSpan` of ``Y`` where the exact fit may run on its
    coordinates: in-memory points of at least
    :data:`fastkds._config.SPAN_FEATURES_PER_POINT` features each, the
    centred step, atoms drawn from the points (not an ``init`` array, which
    may lie outside their span), and points not all the same. Else None."""
    if not isinstance(Y, np.ndarray) or p["solver"] != "exact" or p["step"] != "centred" or not isinstance(init, str):
        return None
    n, d = Y.shape
    if d < _config.SPAN_FEATURES_PER_POINT * n:
        return None
    span = DataSpan(Y)
    return span if span.coordinates.shape[1] else None


def fit_exact(Y, p, n_pre, init, rng, *, take, seeding_points, backend, sample_backend=None, display, last_epoch=None):
    """The exact solver's fit: the warm-start subsamples, the initial atoms
    and the stages, wherever the points live.

    The in-memory fit and the Dask fit both run this; they differ only in
    how rows are gathered and where the epochs on all points run, which
    they pass in.

    Parameters
    ----------
    Y : ndarray, fastkds.sources.ChunkSource or dask.array.Array
        The checked points (read for their ``shape`` and ``dtype``, and by
        the last stage).
    p : dict
        The fit's validated parameters, with ``n_atoms`` for these points
        (:func:`fastkds._validation.fit_n_atoms`).
    n_pre : int
        Points of the first warm-start subsample (:func:`presample_size`).
    init : {"k-means++", "random"} or ndarray
    rng : numpy.random.RandomState
    take : callable
        ``take(sorted_indices)``: those rows of ``Y`` in memory.
    seeding_points : callable
        ``seeding_points()``: what the initial atoms are drawn from when
        there is no warm-start subsample (see :func:`initial_dictionary`);
        called after the subsamples are drawn, from the same ``rng``.
    backend : backend
        Runs the epochs on all points.
    sample_backend : backend or None, default=None
        Runs the epochs on the subsamples, which are in memory (None: ``backend``).
    display : estimator
        Whose ``verbose`` sets the epoch display.
    last_epoch : fastkds.solvers.LastEpoch or None, default=None
        For the epochs on all points (see :func:`fit_stages`).

    Returns
    -------
    dict
        The fitted attributes (see :func:`fit_stages`).
    """
    n, d = Y.shape
    samples = nested_samples(take, rng, n, presample_ladder(n_pre, n, d, Y.dtype.itemsize))
    W = initial_dictionary(samples[0] if samples else seeding_points(), init, rng, p)
    stages = [("subsample", sample, sample_backend or backend) for sample in samples]
    stages.append(("all points", Y, backend))
    return fit_stages(stages, W, p, rng, Y.dtype, display, last_epoch)


def fit_stages(stages, W, p, rng, dtype, display, last_epoch=None):
    """Alternating minimisation through the warm-start stages.

    Parameters
    ----------
    stages : list of (label, data, backend)
        The subsamples, then all points.
    W : ndarray of shape (m, d)
        The initial atoms.
    p : dict
        The fit's validated parameters.
    rng : numpy.random.RandomState
    dtype : numpy dtype
        The data's, which ``components_`` takes.
    display : estimator
        Whose ``verbose`` sets the epoch display (:func:`fastkds._progress.epochs`).
    last_epoch : fastkds.solvers.LastEpoch or None, default=None
        Given, the last stage's fit ends on the dictionary its last epoch
        encoded with, and keeps that epoch's codes in it
        (:func:`fastkds.solvers.fit_alternating`).

    Returns
    -------
    dict
        The fitted attributes ``components_``, ``step_``, ``n_iter_`` and
        ``objective_`` (no ``_stream_state``: a later ``partial_fit``
        starts a fresh stream).
    """
    converged, epochs, history = False, 0, []
    chunks = [chunk_rows(backend, p["chunk_size"], data.shape[1], p["n_atoms"]) for _, data, backend in stages]
    # each backend's buffer sets for its largest stage, from its first: the
    # stages grow ten-fold, and the GPU's sets are slow to allocate
    rows = {}
    for (_, data, backend), chunk in zip(stages, chunks):
        rows[id(backend)] = max(rows.get(id(backend), 1), min(chunk, data.shape[0]))
    for stage, (label, data, backend) in enumerate(stages):
        bar, progress = _progress.epochs(display, f"KDS epochs ({label}, n={data.shape[0]:,})", p["max_epochs"])
        try:
            with numba_threads(p["n_jobs"]):
                W, history, epochs, converged = fit_alternating(
                    data,
                    W,
                    lam=p["lam"],
                    n_iter=p["n_iter"],
                    max_epochs=p["max_epochs"],
                    tol=p["tol"],
                    step=p["step"],
                    encoder=p["encoder"],
                    chunk_size=chunks[stage],
                    random_state=rng,
                    backend=backend,
                    progress=progress,
                    last_epoch=last_epoch if stage == len(stages) - 1 else None,
                    best_before=min(history) if history else None,
                    buffer_rows=rows[id(backend)],
                )
        finally:
            _progress.close(bar)
    if not converged and p["max_epochs"] > 1:
        warn(
            f"KDS did not converge in max_epochs={p['max_epochs']} epochs (tol={p['tol']}); increase max_epochs or tol",
            KDSConvergenceWarning,
        )
    return {
        "components_": W.astype(dtype),
        "step_": encoder_step(W, p["step"]),
        "n_iter_": epochs,
        "objective_": np.asarray(history),
    }

"""The encoder's state below the backends: :class:`PreparedDictionary` and the
helpers the backends, solvers and estimators share.

A dictionary prepared for encoding (centred atoms, Gram matrix, step,
momentum and typed constants), the atoms far out that the step leaves aside
and the screening rule that keeps that safe, the checks of the ``encoder``
and ``step`` parameters, the offset test behind
:class:`~fastkds.exceptions.OffCentreDataWarning`, and the assembly of
per-chunk codes into CSR arrays.

It sits below :mod:`fastkds._backends`, :mod:`fastkds.gpu` and
:mod:`fastkds.solvers`, which all build on it, and imports only the kernels
(of the lower modules, :mod:`fastkds._config` and :mod:`fastkds._validation`
would be allowed too): imports then run one way (kernels -> backends ->
solvers -> estimators), and the user-facing :func:`fastkds.sparse_encode`
above can import the backends at module level. Nothing here may import
:mod:`fastkds._backends`, :mod:`fastkds.encoding`, :mod:`fastkds.sources`,
:mod:`fastkds.solvers` or :mod:`fastkds.gpu`: that would close the cycle
again.
"""

import numba
import numpy as np
import scipy.sparse as sp

from . import _active_set, _config, _kernels
from ._config import single_thread_blas
from ._validation import check_choice, read_only


def typed_constants(m, dtype):
    """``arange(m + 1)`` in ``dtype``: the kernels' typed constants (see _kernels).

    Parameters
    ----------
    m : int
        Atoms.
    dtype : numpy dtype, float32 or float64

    Returns
    -------
    ks : ndarray of shape (m + 1,)
    """
    return np.arange(m + 1, dtype=dtype)


def momentum(n_iter, dtype):
    """Momentum coefficients ``t / (t + 3)``, t = 0..T-1.

    Parameters
    ----------
    n_iter : int
        Iterations T.
    dtype : numpy dtype, float32 or float64

    Returns
    -------
    beta : ndarray of shape (n_iter,)
        Computed in float64, then cast to ``dtype``.
    """
    t = np.arange(n_iter, dtype=np.float64)
    return (t / (t + 3.0)).astype(dtype)


#: ``offset_step_ratio`` above which :class:`~fastkds.KDS` warns that the data
#: sit far from the origin: the accelerated encoder then needs about
#: ``sqrt(ratio)`` = 5 times the steps to get as far. The paper's data measure
#: 1-10 (moons 1.0, MNIST-5 6.4, Yale B 4.7, standardised Salinas-A 1.0), and
#: uniform features in [0, 1] 10-21. Moons moved by (3, 3) measure 33, and
#: their accuracy at T = 15 falls from 0.9988 to 0.8822; by (10, 10), 306 and
#: 0.7462.
OFFSET_STEP_RATIO_WARN = 25.0


def offset_step_ratio(W):
    """How many times smaller the encoder step ``1 / sigma_max(W)^2`` is than
    the same dictionary's step after centring: ``sigma_max(W)^2 /
    sigma_max(W - mean atom)^2``.

    The objective is unchanged when the data and the atoms move together
    (codes sum to 1), but the step shrinks as they move away from the
    origin, and T steps then stop short of the optimal codes.

    Parameters
    ----------
    W : ndarray of shape (m, d)

    Returns
    -------
    float
        1 for a centred dictionary. Also 1 when all atoms coincide (every code
        is then optimal, whatever the step) and for a zero or non-finite
        dictionary (left to the encoder's own checks).
    """
    W = np.asarray(W, dtype=np.float64)
    scale = np.abs(W).max() if W.size else 0.0
    if not 0 < scale < np.inf:
        return 1.0
    W = W / scale  # the ratio does not depend on the scale, and Gram entries stay finite
    centred = _sigma_max_sq(W - W.mean(axis=0))
    return _sigma_max_sq(W) / centred if centred > 0 else 1.0


def _sigma_max_sq(A):
    """``sigma_max(A)^2`` from the smaller of ``A^T A`` and ``A A^T`` (A not empty)."""
    gram = A.T @ A if A.shape[1] <= A.shape[0] else A @ A.T
    return top_eigenvalue(gram)


def top_eigenvalue(G):
    """The largest eigenvalue of a symmetric positive semi-definite matrix.

    Parameters
    ----------
    G : ndarray of shape (m, m), float64, m >= 1
        A Gram matrix.

    Returns
    -------
    float

    Notes
    -----
    From :data:`fastkds._config.GRAM_LANCZOS_ATOMS` rows on, by
    :func:`lanczos_top_eigenvalue`: at 500 atoms a fifth of the time of the
    whole spectrum, and as accurate (a Ritz value is exact to the square of
    its residual). Where that does not converge, and for fewer rows, by the
    whole spectrum (``eigvalsh``).
    """
    if G.shape[0] >= _config.GRAM_LANCZOS_ATOMS:
        top = lanczos_top_eigenvalue(G)
        if top is not None:
            return top
    return float(np.linalg.eigvalsh(G)[-1])


def lanczos_top_eigenvalue(G):
    """The largest eigenvalue of a symmetric positive semi-definite ``G``
    by Lanczos (ARPACK) from a fixed start, so that the same matrix always
    gets the same step; None where it does not converge within
    :data:`fastkds._config.GRAM_LANCZOS_RESTARTS` restarts, and for a zero
    matrix (no Krylov space)."""
    if not np.trace(G) > 0:
        return None
    import scipy.sparse.linalg  # here: it costs fastkds's import more than the fits that need it

    v0 = np.random.RandomState(0).uniform(-1.0, 1.0, G.shape[0])
    try:
        top = scipy.sparse.linalg.eigsh(
            G, k=1, which="LA", v0=v0, tol=0, maxiter=_config.GRAM_LANCZOS_RESTARTS, return_eigenvectors=False
        )
    except (scipy.sparse.linalg.ArpackNoConvergence, scipy.sparse.linalg.ArpackError):
        return None
    return float(top[0])


#: Tukey's "far out" fence, in interquartile ranges above the upper quartile.
FAR_OUT_FENCE = 3.0


def far_atoms(centred_sq_norms):
    """Atoms far out from the rest, which the centred step leaves aside.

    An atom is far out when its distance from the mean atom lies beyond
    Tukey's far-out fence of all atoms' distances (upper quartile plus
    :data:`FAR_OUT_FENCE` interquartile ranges). A few such atoms (kept by
    outlying points) can set ``sigma_max`` of the centred dictionary alone,
    and with it a step many times too small for every other point
    (docs/algorithm.md, "Far atoms").

    Parameters
    ----------
    centred_sq_norms : ndarray of shape (m,)
        Squared distances of the atoms from the mean atom.

    Returns
    -------
    ndarray of shape (m,), bool
    """
    radii = np.sqrt(np.maximum(centred_sq_norms, 0.0))
    if radii.size == 0:
        return np.zeros(0, dtype=bool)
    q1, q3 = np.percentile(radii, [25, 75])
    return radii > q3 + FAR_OUT_FENCE * (q3 - q1)


def screening_ratio(lam):
    """``(1 + 1 / lam)^2``: atom j can be in the optimal code of a point only
    if ``||y - w_j||^2 <= screening_ratio(lam) * min_k ||y - w_k||^2``.

    A safe screening rule (docs/algorithm.md, "Far atoms"): at the optimum
    the residual r satisfies ``||r||^2 <= d_min`` (the objective is at most
    that of the nearest atom's code), and the optimality conditions then
    bound ``sqrt(d_j) - sqrt(d_min)`` by ``sqrt(d_min) / lam``.

    Parameters
    ----------
    lam : float, >= 0

    Returns
    -------
    float
        ``inf`` at ``lam = 0`` and where it overflows (every atom may then
        be used).
    """
    with np.errstate(over="ignore", divide="ignore"):
        return float(np.square(1.0 + np.float64(1.0) / np.float64(lam)))


def _gram_arrays(G64, dtype):
    """``(G, G_padded, ww)``: the Gram matrix in ``dtype``, the same
    zero-padded to :func:`fastkds._kernels.padded_atoms` columns (the CPU
    encoder's loops run over the atoms padded for vectorisation), and its
    diagonal, from the float64 ``G64``."""
    m = G64.shape[0]
    G = G64.astype(dtype, copy=False)  # G64 is the caller's own, not kept elsewhere
    G_padded = np.zeros((m, _kernels.padded_atoms(m)), dtype=dtype)
    G_padded[:, :m] = G
    return G, G_padded, np.ascontiguousarray(np.diag(G64)).astype(dtype)


class _NearAtoms:
    """The atoms that are not :func:`far_atoms`, with what the kernels need
    to encode on them alone at their own step (``1 / sigma_max^2`` of these
    atoms less their own mean).

    Build with :meth:`find`. ``index`` and ``far`` are the near and far
    atoms' indices in the whole dictionary, ascending; ``near_gram`` the
    near atoms' Gram matrix in float64.
    """

    def __init__(self, index, far, W, near_gram, alpha_value, dtype):
        self.index = index.astype(np.int32)
        self.far = far
        self.G, self.G_padded, self.ww = _gram_arrays(near_gram, dtype)
        self.W = np.ascontiguousarray(W[index])
        self.alpha_value = alpha_value
        self.alpha = dtype.type(alpha_value)
        self.ks = typed_constants(index.shape[0], dtype)

    @classmethod
    def find(cls, W, G64, dtype):
        """The near atoms of the centred dictionary ``W`` (Gram matrix ``G64``,
        in float64), or None when no atom is far out, or when the near
        atoms' own spread is below ``sqrt(eps)`` of their squared distances
        from the whole mean: their Gram matrix, formed about that mean in
        the working dtype, would not hold their step to working precision."""
        far = far_atoms(np.diag(G64))
        if not far.any():
            return None
        index = np.flatnonzero(~far)
        G = G64[np.ix_(index, index)]
        mean = G.mean(axis=0)
        # sigma_max^2 of the near atoms less their own mean atom
        centred = G - mean[:, None]
        centred -= mean[None, :]
        centred += mean.mean()
        top = top_eigenvalue(centred)
        if not top > np.sqrt(np.finfo(dtype).eps) * float(np.trace(G)):
            return None
        return cls(index, np.flatnonzero(far), W, G, 1.0 / top, dtype)


#: The encoder's step rules (the ``step`` parameter of the estimators).
STEPS = ("centred", "paper")

#: The encoders a prepared dictionary runs: T steps of the paper's
#: accelerated projected gradient (:mod:`fastkds._kernels`), or exact codes
#: by the active-set method (:mod:`fastkds._active_set`).
ENCODERS = ("apg", "active-set")


def check_encoder(encoder):
    """``encoder`` validated: ``"auto"`` or one of :data:`ENCODERS` (the
    ``encoder`` parameter of the estimators and of
    :func:`fastkds.sparse_encode`; :func:`fastkds._backends.resolve_encoder`
    says what ``"auto"`` stands for).

    Parameters
    ----------
    encoder : str

    Returns
    -------
    str
        ``encoder`` unchanged.

    Raises
    ------
    ValueError
        If it is neither.
    """
    return check_choice(encoder, "encoder", ("auto", *ENCODERS))


def check_step(step):
    """``step`` validated: one of :data:`STEPS`.

    Parameters
    ----------
    step : str

    Returns
    -------
    str
        ``step`` unchanged.

    Raises
    ------
    ValueError
        If it is not one of :data:`STEPS`.
    """
    return check_choice(step, "step", STEPS)


def encoder_step(W, step="centred"):
    """The encoder's step for the dictionary ``W``: the ``alpha_value`` of
    ``PreparedDictionary(W, lam, n_iter, numpy.float64, step)``, without
    the rest of its preparation (the step a fit reports as ``step_``).

    Parameters
    ----------
    W : ndarray of shape (m, d)
    step : {"centred", "paper"}, default="centred"

    Returns
    -------
    float
    """
    W64 = np.asarray(W, dtype=np.float64)
    sq_norms = np.einsum("ij,ij->i", W64, W64)
    if check_step(step) == "centred":
        W64 = W64 - W64.mean(axis=0)
    return _gram_and_step(W, W64, sq_norms, step, np.dtype(np.float64))[1]


def _gram_and_step(W, W64, sq_norms, step, dtype):
    """``(G64, alpha_value)``: the Gram matrix of ``W64`` (``W`` in float64,
    less its mean atom with the centred step; ``sq_norms``, ``W``'s squared
    row norms) and the encoder's step in ``dtype`` (see
    :class:`PreparedDictionary`)."""
    # BLAS threads left spinning after these calls would slow the kernels
    # that follow (see fastkds._config.numba_threads), wherever this runs
    with single_thread_blas():
        G64 = W64 @ W64.T
        top = top_eigenvalue(G64) if W64.size else 0.0
        if step == "centred":
            # sigma_max(W - mean atom)^2, held above (eps sigma_max(W))^2: atoms
            # that coincide to rounding (every code optimal) get a finite step.
            # A spread any larger is the data's own, whatever their offset
            # (the kernels work on the centred values), so it sets the step.
            # sigma_max(W)^2 is at most the sum of the squared norms, so the
            # floor is needed only below eps^2 of that sum.
            floor_scale = float(np.finfo(dtype).eps) ** 2
            if top < floor_scale * sq_norms.sum():
                Wu = np.asarray(W, dtype=np.float64)
                top = max(top, floor_scale * top_eigenvalue(Wu @ Wu.T))
    # A zero dictionary has no gradient from the fit term; any step works.
    return G64, 1.0 / top if top > 0 else 1.0


class PreparedDictionary:
    """A dictionary with what the encoder needs precomputed once.

    Holds ``W`` (m x d) in the working dtype, ``G = W W^T``, its diagonal, the
    step ``alpha`` and the typed constants. With the centred step, ``W`` is
    the dictionary less its mean atom ``shift``, which :meth:`encode`
    subtracts from the points too.

    Parameters
    ----------
    W : ndarray of shape (m, d)
    lam : float
    n_iter : int
    dtype : numpy dtype, float32 or float64
    step : {"centred", "paper"}, default="centred"
        ``"centred"``: the encoder runs on the centred problem (points and
        atoms less the mean atom), with ``alpha = 1 / sigma_max(W - mean
        atom)^2``: the same objective and optimum, with codes that do not
        depend on where the data sit (docs/algorithm.md). When some atoms
        are :func:`far_atoms`, the points that cannot use them
        (:func:`screening_ratio`) are encoded on the others at their own
        step (:attr:`near`).
        ``"paper"``: the paper's iteration on the data as given, ``alpha = 1
        / sigma_max(W)^2``.
    encoder : {"apg", "active-set"}, default="apg"
        ``"apg"``: ``n_iter`` steps of the paper's accelerated projected
        gradient. ``"active-set"``: the exact codes
        (:mod:`fastkds._active_set`); ``n_iter`` and the step then serve
        only the rare points it hands to the accelerated encoder.
    """

    def __init__(self, W, lam, n_iter, dtype, step="centred", encoder="apg"):
        self.dtype = np.dtype(dtype)
        self.step = check_step(step)
        self.encoder = check_choice(encoder, "encoder", ENCODERS)
        #: points the active-set encoder handed to the accelerated one so far
        #: (affinely dependent atoms in a support, see fastkds._active_set)
        self.n_fallbacks = 0
        W64 = np.asarray(W, dtype=np.float64)
        if not np.all(np.isfinite(W64)):
            raise ValueError("the dictionary contains NaN or infinite values")
        # The kernels work with squared norms: outside the dtype's range they
        # overflow to inf or underflow to 0 and the iterate turns to NaN. The
        # largest entry of W W^T is the largest squared norm (Cauchy-Schwarz).
        with np.errstate(over="ignore", under="ignore"):
            sq_norms = np.einsum("ij,ij->i", W64, W64)
            largest = sq_norms.max() if sq_norms.size else 0.0
            overflows = not np.isfinite(self.dtype.type(largest))
        if overflows:
            raise ValueError(
                f"the squared norms of the atoms overflow {self.dtype.name} "
                f"(largest |entry| {np.abs(W64).max():.3g}): rescale the data"
                + (" or use float64" if self.dtype == np.float32 else "")
            )
        if largest == 0.0 and np.any(W64 != 0):
            raise ValueError(
                f"the squared norms of the atoms underflow (largest |entry| {np.abs(W64).max():.3g}): rescale the data"
            )
        #: Subtracted from every point and atom before encoding (the mean atom,
        #: or None): the codes and objectives are the same, and the products
        #: the kernels form keep their precision however far the data sit.
        self.shift = None
        if step == "centred":
            mu = W64.mean(axis=0)
            W64 = W64 - mu
            self.shift = mu.astype(self.dtype)
        G64, self.alpha_value = _gram_and_step(W, W64, sq_norms, step, self.dtype)
        self.alpha = self.dtype.type(self.alpha_value)
        if not np.isfinite(self.alpha):
            raise ValueError(
                f"the encoder step = {self.alpha_value:.3g} overflows "
                f"{self.dtype.name}: the data are too small in scale; rescale them"
            )
        self.W = W64.astype(self.dtype)
        self.G, self.G_padded, self.ww = _gram_arrays(G64, self.dtype)
        self.lam = self.dtype.type(lam)
        self.beta = momentum(n_iter, self.dtype)
        self.ks = typed_constants(W64.shape[0], self.dtype)
        #: With the centred step, the atoms that are not far out (a
        #: :class:`_NearAtoms`, or None when none is): points whose optimal
        #: codes cannot use a far atom (:func:`screening_ratio`) are encoded
        #: on the near atoms alone, at the larger step of those.
        self.near = None
        self.screening_ratio = screening_ratio(lam)
        #: The rounding margin of :meth:`may_use_far`, relative to ``yy + ww``:
        #: a few units of the working dtype's rounding of ``yy - 2 y.w + ww``
        #: (``|2 y.w|`` is at most ``yy + ww``). The CUDA path takes it too.
        self.screening_slack = 8.0 * float(np.finfo(self.dtype).eps)
        if step == "centred" and np.isfinite(self.screening_ratio):
            with single_thread_blas():
                self.near = _NearAtoms.find(self.W, G64, self.dtype)

    @property
    def n_atoms(self):
        return self.W.shape[0]

    def encode(self, Y, buffers=None):
        """Codes of a chunk ``Y`` as per-row slots, and per-point objectives.

        ``Y`` must already be validated, C-contiguous and of ``self.dtype``.
        ``buffers``, from :meth:`allocate`, are reused across chunks: fresh
        pages for every chunk would cost more than encoding small-d data.
        Returns ``counts, slot_idx, slot_val, obj``, views into the buffers:
        row i's code has ``counts[i]`` nonzeros, at the atoms
        ``slot_idx[i, :counts[i]]`` (ascending), of values
        ``slot_val[i, :counts[i]]``.
        """
        n = Y.shape[0]
        if buffers is None:
            buffers = self.allocate(n)
        B, yy, counts, slot_idx, slot_val, obj, Yc, fallbacks = (buf[:n] for buf in buffers)
        Y = read_only(Y)  # one signature of the kernels, whether the caller's Y is writable or not
        if Y.shape[1] <= _kernels.SMALL_D:
            if self.shift is not None:
                _kernels.centre_rows(Y, self.shift, Yc)
                Y = read_only(Yc)
            b_max, y_max = _kernels.point_products(Y, self.W, B, yy)
        else:  # the O(m d) part: BLAS, on a block of rows per thread, each centred there
            shift = self.shift if self.shift is not None else np.empty(0, dtype=self.dtype)
            b_max, y_max = _kernels.blas_products(Y, shift, self.W.T, B, yy, numba.get_num_threads())
        if not np.isfinite(b_max):
            raise ValueError(
                f"the squared norms of the data overflow {self.dtype.name}: rescale the data"
                + (" or use float64" if self.dtype == np.float32 else "")
            )
        if n:
            # The first step is alpha * (lam * ||y - w||^2 - y.w); later ones
            # add at most a few units. It must fit the dtype with room to spare.
            bound = self.alpha_value * (float(self.lam) * (y_max + 2.0 * b_max + float(self.ww.max())) + b_max)
            if not bound < np.finfo(self.dtype).max / 64:
                raise ValueError(
                    f"points lie too far from the atoms for {self.dtype.name} "
                    f"(first encoder step ~{bound:.3g}): rescale the data"
                    + (" or use float64" if self.dtype == np.float32 else "")
                )
        if self.encoder == "active-set":
            _active_set.encode_codes_active_set(
                B,
                yy,
                self.G,
                self.G_padded,
                self.ww,
                self.alpha,
                self.lam,
                self.beta,
                self.ks,
                counts,
                slot_idx,
                slot_val,
                obj,
                fallbacks,
                numba.get_num_threads(),
            )
            self.n_fallbacks += int(fallbacks.sum())
        elif self.near is None:
            self._encode_apg(self, B, yy, counts, slot_idx, slot_val, obj)
        else:
            self._encode_apg_near(B, yy, counts, slot_idx, slot_val, obj)
        return counts, slot_idx, slot_val, obj

    def _encode_apg(self, atoms, B, yy, counts, slot_idx, slot_val, obj):
        """The accelerated encoder on ``atoms`` (``self`` or ``self.near``),
        with their Gram matrix and step."""
        _kernels.encode_codes(
            B,
            yy,
            atoms.G,
            atoms.G_padded,
            atoms.W,
            atoms.ww,
            atoms.alpha,
            self.lam,
            self.beta,
            atoms.ks,
            counts,
            slot_idx,
            slot_val,
            obj,
            numba.get_num_threads(),
        )

    def _encode_apg_near(self, B, yy, counts, slot_idx, slot_val, obj):
        """The accelerated encoder with far atoms in the dictionary: points
        that may use one (:meth:`may_use_far`) are encoded on every atom at
        the whole dictionary's step, the others on the near atoms at theirs.
        Both solve the same problem, so the second have the same optimum."""
        near = self.near
        uses_far = self.may_use_far(B, yy)
        everyone = np.arange(self.n_atoms, dtype=np.int32)
        for rows, atoms, index in (
            (np.flatnonzero(uses_far), self, everyone),
            (np.flatnonzero(~uses_far), near, near.index),
        ):
            if rows.size == 0:
                continue
            k = index.shape[0]
            B_rows = np.empty((rows.size, k), dtype=self.dtype)
            _kernels.gather_block(B, rows, index, B_rows)
            part = (
                np.empty(rows.size, dtype=np.int64),
                np.empty((rows.size, k), dtype=np.int32),
                np.empty((rows.size, k), dtype=self.dtype),
                np.empty(rows.size, dtype=self.dtype),
            )
            self._encode_apg(atoms, B_rows, yy[rows], *part)
            _kernels.scatter_slots(rows, index, *part, counts, slot_idx, slot_val, obj)

    def may_use_far(self, B, yy):
        """Which points may have a far atom in their optimal code.

        By :func:`screening_ratio`, the point i cannot use atom j when
        ``||y_i - w_j||^2 > screening_ratio(lam) * min_k ||y_i - w_k||^2``.
        The distances come from the products ``B = Y W^T`` the encoder
        forms anyway, in float64, each taken towards "may use" by
        :attr:`screening_slack` times ``yy + ww``.

        Parameters
        ----------
        B : ndarray of shape (n, m)
            ``Y W^T`` of the (centred) points.
        yy : ndarray of shape (n,)
            Their squared norms.

        Returns
        -------
        ndarray of shape (n,), bool
            False for every point when no atom is far out.
        """
        out = np.zeros(B.shape[0], dtype=bool)
        if self.near is not None:
            _kernels.may_use_far(B, yy, self.ww, self.near.far, self.screening_ratio, self.screening_slack, out)
        return out

    def encode_csr(self, Y, buffers=None):
        """CSR triple ``(indptr, indices, data)`` of a chunk's codes, and its
        per-point objectives (a view into ``buffers``)."""
        counts, slot_idx, slot_val, obj = self.encode(Y, buffers)
        n = counts.shape[0]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        indices = np.empty(indptr[-1], dtype=np.int32)
        data = np.empty(indptr[-1], dtype=self.dtype)
        _kernels.fill_csr_from_slots(counts, slot_idx, slot_val, indptr, indices, data)
        return (indptr, indices, data), obj

    def encode_dense(self, Y, buffers=None):
        """Dense codes (n x m, a new array) and per-point objectives of a
        chunk ``Y`` (see :meth:`encode`)."""
        counts, slot_idx, slot_val, obj = self.encode(Y, buffers)
        X = np.empty((counts.shape[0], self.n_atoms), dtype=self.dtype)
        _kernels.slots_to_dense(counts, slot_idx, slot_val, X)
        return X, obj

    def allocate(self, chunk_size):
        """Work buffers for chunks of up to ``chunk_size`` rows."""
        m = self.n_atoms
        return (
            np.empty((chunk_size, m), dtype=self.dtype),
            np.empty(chunk_size, dtype=self.dtype),
            np.empty(chunk_size, dtype=np.int64),
            np.empty((chunk_size, m), dtype=np.int32),
            np.empty((chunk_size, m), dtype=self.dtype),
            np.empty(chunk_size, dtype=self.dtype),
            # the centred points, with the centred step and few features
            # (with many, blas_products centres block by block)
            np.empty(
                (chunk_size if self.shift is not None and self.W.shape[1] <= _kernels.SMALL_D else 0, self.W.shape[1]),
                dtype=self.dtype,
            ),
            np.empty(chunk_size, dtype=np.int64),  # points the active set handed over
        )


def csr_from_dense(X):
    """Assemble dense codes into CSR arrays ``(indptr, indices, data)`` in parallel.

    Parameters
    ----------
    X : ndarray of shape (n, m)
        Dense codes, C-contiguous float32 or float64.

    Returns
    -------
    indptr : ndarray of shape (n + 1,), int64
    indices : ndarray of shape (nnz,), int32
        Column indices, ascending within each row.
    data : ndarray of shape (nnz,), of ``X.dtype``
    """
    n = X.shape[0]
    counts = np.empty(n, dtype=np.int64)
    _kernels.count_row_nonzeros(X, counts)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=np.int32)
    data = np.empty(indptr[-1], dtype=X.dtype)
    _kernels.fill_csr(X, indptr, indices, data)
    return indptr, indices, data


def concatenate_csr(parts, n_atoms, dtype):
    """Join per-chunk CSR triples into one ``scipy.sparse.csr_array``.

    Parameters
    ----------
    parts : list of (indptr, indices, data)
        Each chunk's CSR arrays, in row order.
    n_atoms : int
        Columns.
    dtype : numpy dtype
        Of the values (used when ``parts`` is empty too).

    Returns
    -------
    codes : scipy.sparse.csr_array of shape (total rows, n_atoms)
        int32 indices when the entries fit, int64 otherwise.
    """
    if not parts:
        return sp.csr_array((0, n_atoms), dtype=dtype)
    nnz = sum(p[1].shape[0] for p in parts)
    n = sum(p[0].shape[0] - 1 for p in parts)
    index_dtype = np.int32 if nnz < 2**31 else np.int64
    indptr = np.empty(n + 1, dtype=index_dtype)
    indices = np.empty(nnz, dtype=index_dtype)
    data = np.empty(nnz, dtype=dtype)
    row = 0
    pos = 0
    indptr[0] = 0
    for ip, ix, dt in parts:
        k = ip.shape[0] - 1
        indptr[row + 1 : row + k + 1] = ip[1:] + pos
        indices[pos : pos + ix.shape[0]] = ix
        data[pos : pos + ix.shape[0]] = dt
        row += k
        pos += ix.shape[0]
    return sp.csr_array((data, indices, indptr), shape=(n, n_atoms))

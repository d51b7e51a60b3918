"""Encoding with a fixed dictionary: :func:`sparse_encode` (the KDS encoder,
run by a backend) and :func:`project_simplex` for users, and
:class:`FittedEncoder`, the encoder of a fitted model, for the estimators
and the Dask block tasks.

The functions here validate their input and hand the work to
:mod:`fastkds._backends` and the kernels of :mod:`fastkds._kernels`; the
dictionary state they share with the estimators lives in
:mod:`fastkds.prepared`.
"""

import numpy as np
import scipy.sparse as sp

from . import _kernels
from ._backends import CpuBackend, get_backend, resolve_encoder
from ._config import numba_threads
from .diskcodes import DiskCodesWriter
from ._validation import (
    check_data,
    check_dictionary,
    check_n_jobs,
    check_nonneg_float,
    check_positive_int,
    read_only,
)
from .prepared import check_encoder, check_step, typed_constants
from .sources import SparseSource, refuse_empty


def project_simplex(V, *, method="michelot", n_jobs=None):
    """Project each row of ``V`` onto the probability simplex.

    Parameters
    ----------
    V : array-like of shape (n, m) or (m,)
        Vectors to project; float32 stays float32, anything else becomes float64.
    method : {"michelot", "sorted"}, default="michelot"
        ``"sorted"`` is the reference (full sort per row); ``"michelot"`` the
        iterated threshold, O(m) per pass, with the same result.
    n_jobs : int or None
        Numba threads.

    Returns
    -------
    X : ndarray of the shape of ``V``
        ``X[i] = argmin_{x >= 0, sum(x) = 1} ||x - V[i]||``.
    """
    if method not in ("michelot", "sorted"):
        raise ValueError(f"method must be 'michelot' or 'sorted', got {method!r}")
    if sp.issparse(V):
        raise TypeError("project_simplex needs a dense array, got a sparse matrix: use V.toarray()")
    V = np.asarray(V)
    one_d = V.ndim == 1
    V2 = check_data(V.reshape(1, -1) if one_d else V, name="V", min_samples=1)
    out = np.empty_like(V2)
    with numba_threads(check_n_jobs(n_jobs)):
        _kernels.project_simplex_rows(read_only(V2), out, typed_constants(V2.shape[1], V2.dtype), method == "sorted")
    return out[0] if one_d else out


def check_sparse_data(Y, *, name="Y"):
    """A sparse data matrix as a :class:`~fastkds.sources.SparseSource`
    (its rows checked as each chunk is made dense), refused without rows
    or features as :func:`~fastkds._validation.check_data` refuses an array."""
    source = SparseSource(Y, name)
    refuse_empty(source.shape)
    return source


def sparse_encode(
    Y,
    dictionary,
    *,
    lam=1.0,
    n_iter=50,
    step="centred",
    encoder="auto",
    chunk_size=None,
    n_jobs=None,
    device="cpu",
):
    """Sparse simplex codes of ``Y`` in a fixed dictionary (the KDS encoder).

    Minimises ``1/2 ||y - x W||^2 + lam * sum_j x_j ||y - w_j||^2`` over the
    simplex for each point: exactly, by an active-set method, or by T steps
    of the paper's accelerated projected gradient from x = 0 with step
    ``1 / sigma_max(W - mean atom)^2`` or the paper's ``1 /
    sigma_max(W)^2`` (docs/algorithm.md).

    Parameters
    ----------
    Y : array-like or scipy sparse matrix of shape (n_samples, n_features)
        A sparse ``Y`` is encoded chunk by chunk, each chunk made dense.
    dictionary : array-like of shape (n_atoms, n_features)
    lam : float, default=1.0
        Locality weight.
    n_iter : int, default=50
        Iterations T of the accelerated encoder (``encoder="apg"``).
    step : {"centred", "paper"}, default="centred"
        The accelerated encoder's step; see :class:`~fastkds.prepared.PreparedDictionary`.
    encoder : {"auto", "apg", "active-set"}, default="auto"
        T accelerated steps, or the exact codes; see
        :class:`~fastkds.prepared.PreparedDictionary`. ``"auto"``: the exact
        codes on the CPU up to ``lam=1``, the accelerated steps past it and
        on the GPU (:func:`fastkds._backends.resolve_encoder`).
    chunk_size : int or None
        Rows encoded at once; by default chosen from a 64 MiB budget.
    n_jobs : int or None
        Numba threads (None: all).
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Run the kernels on the CPU or, with numba.cuda, on a GPU.

    Returns
    -------
    codes : scipy.sparse.csr_array of shape (n_samples, n_atoms)
        Each row on the probability simplex; column indices ascending.
    """
    Y = check_sparse_data(Y, name="Y") if sp.issparse(Y) else check_data(Y, name="Y", min_samples=1)
    W = check_dictionary(dictionary, Y.shape[1], Y.dtype)
    lam = check_nonneg_float(lam, "lam")
    n_iter = check_positive_int(n_iter, "n_iter")
    step = check_step(step)
    encoder = resolve_encoder(check_encoder(encoder), device, lam)
    n_jobs = check_n_jobs(n_jobs)
    backend = get_backend(device)
    if chunk_size is None:
        chunk_size = backend.chunk_size(Y.shape[1], W.shape[0], Y.dtype.itemsize)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    prepared = backend.prepare(W, lam, n_iter, Y.dtype, step, encoder)
    with numba_threads(n_jobs):
        return encode_prepared(Y, prepared, chunk_size, backend=backend)


def encode_prepared(Y, prepared, chunk_size, *, backend=None, stats=None, out=None):
    """Codes of validated ``Y`` under a prepared dictionary, encoded chunk by chunk.

    On the Numba threads of the caller (see :func:`fastkds._config.numba_threads`).

    Parameters
    ----------
    Y : ndarray of shape (n, d) or fastkds.sources.ChunkSource
        Checked data, C-contiguous, of ``prepared.dtype``.
    prepared : PreparedDictionary or CudaPreparedDictionary
        From ``backend.prepare``.
    chunk_size : int
        Rows encoded at once.
    backend : backend or None, default=None
        The one that prepared ``prepared`` (None: the CPU's).
    stats : fastkds.solvers.SufficientStatistics or None, default=None
        Receives each chunk's statistics when given.
    out : str, os.PathLike or None, default=None
        A folder the codes are written to chunk by chunk
        (:class:`fastkds.diskcodes.DiskCodesWriter`); they come back
        memory-mapped on its files.

    Returns
    -------
    codes : scipy.sparse.csr_array of shape (n, n_atoms)
    """
    backend = CpuBackend() if backend is None else backend
    if out is None:
        return backend.encode(Y, prepared, chunk_size, stats)
    writer = DiskCodesWriter(out, prepared.n_atoms, Y.dtype)
    try:
        backend.run_epoch(Y, prepared, chunk_size, stats, codes_out=writer)
    except BaseException:
        writer.abort()  # no half-written files left in the folder
        raise
    return writer.close()


def chunk_rows(backend, chunk_size, n_features, n_atoms):
    """Points a model encodes at once: its ``chunk_size`` parameter, or the
    backend's choice for its memory budget (counted in float64 items for
    data of either type)."""
    if chunk_size is not None:
        return chunk_size
    return backend.chunk_size(n_features, n_atoms, 8)


class FittedEncoder:
    """The encoder of a fitted dictionary: the atoms and the settings that
    encode with them.

    What a fitted :class:`~fastkds.KDS` encodes with (:meth:`KDS.transform`,
    :meth:`KDS.objective`, the clusterers' passes over the data), held apart
    from the estimator: the clusterers encode through it, and the Dask path
    prepares it once on the client and sends the workers its prepared
    dictionary instead of the model.

    Parameters
    ----------
    W : ndarray of shape (n_atoms, n_features)
        The atoms (``components_``).
    lam : float
    n_iter : int
    step : {"centred", "paper"}
    encoder : {"apg", "active-set"}
        Validated, as for :func:`sparse_encode`.
    chunk_size : int or None, default=None
        Rows encoded at once; None: the backend's choice (:func:`chunk_rows`).
    n_jobs : int or None, default=None
        Numba threads.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where :meth:`encode` runs (:func:`fastkds._backends.get_backend`).
    fixed_step : float or None, default=None
        An encoder step that replaces the ``step`` rule's: the unrolled
        solver's trained or frozen step, which no rule gives back from the
        atoms.

    Attributes
    ----------
    n_atoms : int
        Rows of ``W``: the columns of the codes.
    """

    def __init__(self, W, *, lam, n_iter, step, encoder, chunk_size=None, n_jobs=None, device="cpu", fixed_step=None):
        self.W = W
        self.lam = lam
        self.n_iter = n_iter
        self.step = step
        self.encoder = encoder
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs
        self.device = device
        self.fixed_step = fixed_step

    @property
    def n_atoms(self):
        return self.W.shape[0]

    def backend(self):
        """The backend of ``device`` (a fallback warning with ``"auto"``)."""
        return get_backend(self.device)

    def prepare(self, backend, dtype):
        """The dictionary prepared by ``backend`` for data of ``dtype``."""
        prepared = backend.prepare(self.W, self.lam, self.n_iter, dtype, self.step, self.encoder)
        if self.fixed_step is not None:  # one step for every point and atom
            prepared.alpha_value = float(self.fixed_step)
            prepared.alpha = prepared.dtype.type(self.fixed_step)
            prepared.near = None
        return prepared

    def rows_per_chunk(self, backend, n_features):
        """Rows encoded at once by ``backend`` (see :func:`chunk_rows`)."""
        return chunk_rows(backend, self.chunk_size, n_features, self.n_atoms)

    def run(self, Y, stats=None, codes_out=None):
        """One encoding pass over validated ``Y`` on ``device`` with ``n_jobs`` threads.

        Parameters
        ----------
        Y : ndarray of shape (n, n_features) or fastkds.sources.ChunkSource
            Checked data.
        stats : fastkds.solvers.SufficientStatistics or None, default=None
            Receives each chunk's statistics.
        codes_out : list or None, default=None
            Receives each chunk's CSR triple (or anything with ``append``,
            such as the clusterers' writers of codes); None keeps no codes.

        Returns
        -------
        stats
        """
        backend = self.backend()
        prepared = self.prepare(backend, Y.dtype)
        with numba_threads(self.n_jobs):
            backend.run_epoch(Y, prepared, self.rows_per_chunk(backend, Y.shape[1]), stats, codes_out=codes_out)
        return stats

    def encode(self, Y, *, stats=None, out=None):
        """Codes of validated ``Y`` on ``device`` with ``n_jobs`` threads.

        Parameters
        ----------
        Y : ndarray of shape (n, n_features) or fastkds.sources.ChunkSource
            Checked data.
        stats, out :
            As for :func:`encode_prepared`.

        Returns
        -------
        codes : scipy.sparse.csr_array of shape (n, n_atoms)
        """
        backend = self.backend()
        prepared = self.prepare(backend, Y.dtype)
        with numba_threads(self.n_jobs):
            return encode_prepared(
                Y, prepared, self.rows_per_chunk(backend, Y.shape[1]), backend=backend, stats=stats, out=out
            )

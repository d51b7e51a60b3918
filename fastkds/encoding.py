"""Encoding with a fixed dictionary, as functions: :func:`sparse_encode` (the
KDS encoder, run by a backend) and :func:`project_simplex`.

The functions here validate their input and hand the work to
:mod:`fastkds._backends` and the kernels of :mod:`fastkds._kernels`; the
dictionary state they share with the estimators lives in
:mod:`fastkds.prepared`.
"""

import numpy as np
import scipy.sparse as sp

from . import _kernels
from ._backends import get_backend
from ._config import numba_threads
from ._validation import check_data, check_dictionary, check_n_jobs, check_nonneg_float, check_positive_int
from .prepared import check_encoder, check_step, concatenate_csr, typed_constants


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
        _kernels.project_simplex_rows(
            V2, out, typed_constants(V2.shape[1], V2.dtype), method == "sorted"
        )
    return out[0] if one_d else out


def sparse_encode(
    Y, dictionary, *, lam=1.0, n_iter=50, step="centred", encoder="apg", chunk_size=None, n_jobs=None,
    device="cpu",
):
    """Sparse simplex codes of ``Y`` in a fixed dictionary (the KDS encoder).

    Minimises ``1/2 ||y - x W||^2 + lam * sum_j x_j ||y - w_j||^2`` over the
    simplex for each point: by T steps of the paper's accelerated projected
    gradient from x = 0 with step ``1 / sigma_max(W - mean
    atom)^2`` or the paper's ``1 / sigma_max(W)^2``, or exactly by
    an active-set method (docs/algorithm.md).

    Parameters
    ----------
    Y : array-like of shape (n_samples, n_features)
    dictionary : array-like of shape (n_atoms, n_features)
    lam : float, default=1.0
        Locality weight.
    n_iter : int, default=50
        Iterations T of the accelerated encoder (``encoder="apg"``).
    step : {"centred", "paper"}, default="centred"
        The accelerated encoder's step; see :class:`~fastkds.prepared.PreparedDictionary`.
    encoder : {"apg", "active-set"}, default="apg"
        T accelerated steps, or the exact codes; see :class:`~fastkds.prepared.PreparedDictionary`.
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
    Y = check_data(Y, name="Y", min_samples=1)
    W = check_dictionary(dictionary, Y.shape[1], Y.dtype)
    lam = check_nonneg_float(lam, "lam")
    n_iter = check_positive_int(n_iter, "n_iter")
    step = check_step(step)
    encoder = check_encoder(encoder)
    n_jobs = check_n_jobs(n_jobs)
    backend = get_backend(device, encoder)
    if chunk_size is None:
        chunk_size = backend.chunk_size(Y.shape[1], W.shape[0], Y.dtype.itemsize)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    prepared = backend.prepare(W, lam, n_iter, Y.dtype, step, encoder)
    parts = []
    with numba_threads(n_jobs):
        backend.run_epoch(Y, prepared, chunk_size, codes_out=parts)
    return concatenate_csr(parts, W.shape[0], Y.dtype)

"""Input validation shared by the public functions and estimators."""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array

from . import _config
from ._config import effective_n_jobs
from .exceptions import TooFewSamplesWarning, warn

FLOAT_DTYPES = (np.float64, np.float32)


def working_dtype(dtype):
    """The dtype fastkds computes in for data of ``dtype``: float32 stays
    float32, in either byte order; every other numeric dtype becomes
    float64 (native order: the kernels read native numbers only)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.kind == "f" and dtype.itemsize == 4 else np.dtype(np.float64)


def float_dtypes(X):
    """``check_array``'s ``dtype`` for ``X``: its :func:`working_dtype`
    (``FLOAT_DTYPES`` for input without one, a list or a DataFrame).
    scikit-learn keeps a dtype of ``FLOAT_DTYPES`` and turns any other into
    the first, so a big-endian float32 array would become float64."""
    dtype = getattr(X, "dtype", None)
    return working_dtype(dtype) if isinstance(dtype, np.dtype) else FLOAT_DTYPES


def check_data(Y, *, name="Y", min_samples=1):
    """Validate a data matrix: 2-D, finite, float32/float64, C-contiguous.

    Integer and boolean input becomes float64; float32 stays float32. The
    caller's array is never modified (kernels only read it).
    """
    return check_array(
        Y,
        dtype=float_dtypes(Y),
        order="C",
        ensure_all_finite=True,
        ensure_min_samples=min_samples,
        input_name=name,
    )


def read_only(a):
    """A read-only view of the array ``a`` (no copy), to hand a kernel that only reads it.

    Numba compiles a kernel apart for read-only and for writable arrays (a
    few seconds a kernel, on first use). Data reach the kernels as read-only
    views always, so one compile serves a caller's writable arrays and their
    read-only ones alike: a memmap opened with ``mode="r"``, the arrays
    joblib shares between processes, those ``warmup`` compiled for.
    """
    view = a.view()
    view.flags.writeable = False
    return view


def check_dictionary(W, n_features, dtype):
    """Validate a dictionary (m x d) against the data's feature count; a
    sparse one is made dense (its atoms are read as dense rows)."""
    W = check_array(W, accept_sparse="csr", dtype=float_dtypes(W), ensure_all_finite=True, input_name="dictionary")
    W = W.toarray() if sp.issparse(W) else W
    if W.shape[1] != n_features:
        raise ValueError(f"dictionary has {W.shape[1]} features per atom but the data has {n_features}")
    return np.ascontiguousarray(W, dtype=dtype)


def check_positive_int(value, name):
    """``value`` as an int >= 1, or a clear TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def check_choice(value, name, choices):
    """``value`` if it is one of ``choices`` (strings), else a ValueError
    naming the parameter and the choices."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_nonneg_float(value, name):
    """``value`` as a finite float >= 0, or a clear TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value}")
    return value


def check_verbose(verbose):
    """``verbose`` as an int >= 0: a bool or an integer, as in scikit-learn
    (``True`` is 1), or a clear TypeError/ValueError."""
    if not isinstance(verbose, (bool, np.bool_, numbers.Integral)):
        raise TypeError(f"verbose must be a bool or an int >= 0, got {type(verbose).__name__} {verbose!r}")
    if verbose < 0:
        raise ValueError(f"verbose must be a bool or an int >= 0, got {verbose}")
    return int(verbose)


def check_n_jobs(n_jobs):
    """``n_jobs`` as None or a Python int, or a clear TypeError/ValueError
    (the rule is :func:`fastkds._config.effective_n_jobs`'s)."""
    if n_jobs is None:
        return None
    effective_n_jobs(n_jobs)
    return int(n_jobs)


def check_clustering_params(est):
    """The spectral step's parameters of a clusterer, checked.

    Returns
    -------
    n_clusters : int or None
        None for ``"auto"``.
    n_init, min_component, max_clusters, embedding
    """
    n_atoms = getattr(est, "n_atoms", None)
    if isinstance(n_atoms, str) and n_atoms != "auto":  # an int is KDS's to check
        raise ValueError(f"n_atoms must be a positive int or 'auto', got {n_atoms!r}")
    if isinstance(est.n_clusters, str):
        if est.n_clusters != "auto":
            raise ValueError(f"n_clusters must be an int or 'auto', got {est.n_clusters!r}")
        k = None
    else:
        k = check_positive_int(est.n_clusters, "n_clusters")
    max_clusters = check_positive_int(est.max_clusters, "max_clusters")
    if k is None and max_clusters < 2:
        # the eigengap chooses among 2..max_clusters: one cluster is no clustering
        raise ValueError(f"max_clusters must be >= 2 with n_clusters='auto', got {max_clusters}")
    min_component = check_nonneg_float(est.min_component, "min_component")
    if min_component >= 1:
        # a fraction of the points: at 1 or more no component or mode could be a cluster
        raise ValueError(f"min_component is a fraction of the points and must be < 1, got {min_component}")
    embedding = check_choice(est.embedding, "embedding", _config.EMBEDDINGS)
    return k, check_positive_int(est.n_init, "n_init"), min_component, max_clusters, embedding


def check_enough_samples(n_samples, n_clusters):
    """Refuse fewer points than the clusters asked for (``n_clusters`` None,
    for ``"auto"``, asks for none), in scikit-learn's ``KMeans`` words."""
    if n_clusters is not None and n_samples < n_clusters:
        raise ValueError(f"n_samples={n_samples} should be >= n_clusters={n_clusters}.")


def check_vote_neighbors(est):
    """A clusterer's ``vote_neighbors``: None (no vote) or a positive int."""
    if est.vote_neighbors is None:
        return None
    return check_positive_int(est.vote_neighbors, "vote_neighbors")


def auto_n_atoms(n_samples, n_clusters=None):
    """Atoms for ``n_atoms="auto"``: ``round(sqrt(n))``, at least 16 and
    4 per cluster asked for, at most 100 (or that per-cluster floor, when
    larger), and never more than the points.

    A landmark per sqrt(n) points is the usual choice of landmark-based
    spectral methods; each cluster needs a few atoms of its own for its own
    mode of the code graph; and the cap keeps the work per point bounded, so
    a fit stays linear in n (past 10,000 points the count no longer grows).

    Parameters
    ----------
    n_samples : int
    n_clusters : int or None
        The clusters asked for (None: chosen by the eigengap).

    Returns
    -------
    int
    """
    floor = max(_config.AUTO_ATOMS_MIN, _config.AUTO_ATOMS_PER_CLUSTER * (n_clusters or 0))
    m = min(max(int(round(np.sqrt(n_samples))), floor), max(_config.AUTO_ATOMS_MAX, floor))
    return int(min(m, n_samples))


def fit_n_atoms(n_samples, n_atoms, init):
    """Atoms a fit on ``n_samples`` points learns: ``n_atoms``, or one per
    point when there are fewer points, with a :class:`~fastkds.exceptions.TooFewSamplesWarning`.

    The initial atoms are distinct data points, so there cannot be more of
    them than points; scikit-learn's landmark methods (``Nystroem``,
    ``QuantileTransformer``) shrink to the data in the same way. Atoms
    given as an ``init`` array are not dropped: too few points for them is
    an error.
    """
    if n_samples >= n_atoms:
        return n_atoms
    if not isinstance(init, str):
        raise ValueError(
            f"n_samples={n_samples} is smaller than n_atoms={n_atoms}, the atoms given as init: "
            "KDS needs at least as many points as atoms"
        )
    warn(
        f"n_samples={n_samples} is smaller than n_atoms={n_atoms}: learning {n_samples} atoms, "
        f"one per point (components_ has {n_samples} rows, the codes {n_samples} columns)",
        TooFewSamplesWarning,
    )
    return n_samples

"""Property-based (hypothesis) fuzzing of the public API of fastkds.

Properties checked on random inputs:

(a) ``project_simplex`` on arrays up to 20 x 30, float32 and float64, finite
    values from tiny to huge: the output lies on the simplex (nonnegative, rows
    sum to 1 within a tolerance scaled by the dtype's eps and m), projecting
    again changes nothing (idempotent), and the KKT conditions hold (one
    threshold tau per row with ``x_j = v_j - tau`` on the support and
    ``v_j <= tau`` off it).
(b) ``sparse_encode`` on small random problems: the CSR result is well formed
    (indptr monotone from 0 to nnz, column indices sorted and in range, stored
    values > 0, finite), every row sums to 1 and chunking does not change the
    codes; with T = 2000 iterations in float64 its objective is within 1e-6
    (relative to max(|f*|, range of f on the simplex)) of the optimum found by
    an independent exact QP solver (enumeration of supports with the KKT system
    of each face, plus SLSQP as a second opinion), or, on the ~1% of problems
    too ill-conditioned for that, within the method's proven rate bound.
(c) ``KDS`` and ``KDSClustering`` fitted on random small data either succeed
    (finite components, codes on the simplex, labels in range) or raise a
    ValueError/TypeError with a message; any other exception fails the test.

Budgets: each test's ``max_examples`` is multiplied by the environment
variable ``FASTKDS_FUZZ_EXAMPLES`` (a float, default 1) for longer nightly
runs, e.g. ``FASTKDS_FUZZ_EXAMPLES=20 pytest tests/test_fuzz.py``.
"""

import itertools
import os
import warnings

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fastkds import KDS, KDSClustering, project_simplex, sparse_encode

_SCALE = float(os.environ.get("FASTKDS_FUZZ_EXAMPLES", "1"))


def budget(n):
    """``n`` examples scaled by FASTKDS_FUZZ_EXAMPLES (at least 1)."""
    return max(1, int(round(n * _SCALE)))


# Example counts per test (default scale). Their sum is the module's budget.
N_PROJECT = 900
N_PROJECT_1D = 150
N_ENCODE = 500
N_ENCODE_OPTIMAL = 200
N_KDS = 300
N_CLUSTERING = 200
TOTAL_EXAMPLES = N_PROJECT + N_PROJECT_1D + N_ENCODE + N_ENCODE_OPTIMAL + N_KDS + N_CLUSTERING


def fuzz_settings(n):
    return settings(
        max_examples=budget(n),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


DTYPES = st.sampled_from([np.float64, np.float32])


def finite_floats(dtype, max_abs, min_abs=0.0):
    """Finite floats of ``dtype`` in [-max_abs, max_abs]; with ``min_abs`` > 0,
    magnitudes below it become exact zeros."""
    width = 64 if np.dtype(dtype) == np.float64 else 32
    max_abs = float(np.asarray(max_abs, dtype=dtype))  # exactly representable bound
    floats = st.floats(min_value=-max_abs, max_value=max_abs, allow_nan=False, allow_infinity=False, width=width)
    if min_abs > 0:
        floats = floats.map(lambda x: x if abs(x) >= min_abs else 0.0)
    return floats


# Kept out of the fuzzed domains (each has its own test below):
# * magnitudes where the encoder's arithmetic leaves the dtype's range: nonzero
#   values below TINY * max_abs are flushed to 0 in the encoder and estimator
#   problems. Such problems now give a clear ValueError (regression tests
#   test_encoder_tiny_dictionary, test_encoder_underflowing_dictionary,
#   test_encoder_far_data_small_dictionary);
# * project_simplex inputs beyond finfo.max / 64, where v - max(v) itself
#   overflows; the sorted method's running sum no longer overflows below that
#   (regression test test_project_simplex_sorted_huge_values).
TINY = 1e-6


@st.composite
def arrays_to_project(draw):
    dtype = draw(DTYPES)
    n = draw(st.integers(1, 20))
    m = draw(st.integers(1, 30))
    # mix magnitudes: a per-example cap from tiny to huge, within the dtype's range
    huge = float(np.finfo(dtype).max) / 64
    cap = draw(st.sampled_from([1e-30, 1e-6, 1.0, 10.0, 1e6, 1e30, huge]))
    cap = min(cap, huge)
    V = draw(hnp.arrays(dtype, (n, m), elements=finite_floats(dtype, cap)))
    return V


def simplex_tol(dtype, m, scale=1.0):
    """Rounding tolerance for sums over m entries in ``dtype``."""
    return 8 * np.finfo(dtype).eps * (m + 1) * max(1.0, scale)


def assert_on_simplex(X, dtype):
    m = X.shape[-1]
    assert np.all(np.isfinite(X))
    assert np.all(X >= 0)
    sums = np.sum(X, axis=-1, dtype=np.float64)
    np.testing.assert_allclose(sums, 1.0, rtol=0, atol=simplex_tol(dtype, m))


# --------------------------------------------------------------------------
# (a) project_simplex
# --------------------------------------------------------------------------


def check_kkt(V, X):
    """One threshold per row: x = v - tau on the support, v <= tau off it.

    Tolerances: the kernel works relative to max(v); rounding in ``v - vmax``
    and in the threshold is a few eps of the row's magnitude (and of 1).
    """
    dtype = V.dtype
    m = V.shape[1]
    V64 = V.astype(np.float64)
    X64 = X.astype(np.float64)
    scale = np.maximum(1.0, np.max(np.abs(V64), axis=1, keepdims=True))
    tol = 8 * np.finfo(dtype).eps * (m + 1) * scale
    with np.errstate(over="ignore"):
        R = V64 - np.max(V64, axis=1, keepdims=True)  # relative to the max, as the kernel
    S = X64 > 0
    assert np.all(S.any(axis=1))
    taus = np.where(S, R - X64, 0.0)
    tau = taus.sum(axis=1, keepdims=True) / S.sum(axis=1, keepdims=True)
    assert np.all(np.where(S, np.abs(taus - tau), 0.0) <= tol), "x != v - tau on the support"
    assert np.all((tau >= -1.0 - tol) & (tau <= tol)), "threshold outside [max(v) - 1, max(v)]"
    assert np.all(np.where(S, -np.inf, R) <= tau + tol), "v > tau off the support"


@fuzz_settings(N_PROJECT)
@given(
    V=arrays_to_project(),
    method=st.sampled_from(["michelot", "sorted"]),
    n_jobs=st.sampled_from([1, 1, 1, None]),
)
def test_project_simplex_properties(V, method, n_jobs):
    V_before = V.copy()
    X = project_simplex(V, method=method, n_jobs=n_jobs)
    assert np.array_equal(V, V_before), "input modified"
    assert X.shape == V.shape
    assert X.dtype == V.dtype
    assert_on_simplex(X, V.dtype)
    check_kkt(V, X)
    # idempotent: the projection of a simplex point is itself
    X2 = project_simplex(X, method=method, n_jobs=1)
    np.testing.assert_allclose(X2, X, rtol=0, atol=simplex_tol(V.dtype, V.shape[1]))
    # both methods compute the same projection
    other = "sorted" if method == "michelot" else "michelot"
    Y = project_simplex(V, method=other, n_jobs=1)
    scale = max(1.0, float(np.max(np.abs(V.astype(np.float64)))))
    np.testing.assert_allclose(Y, X, rtol=0, atol=simplex_tol(V.dtype, V.shape[1], scale))


@fuzz_settings(N_PROJECT_1D)
@given(
    v=hnp.arrays(np.float64, st.integers(1, 30), elements=finite_floats(np.float64, 1e6)),
    shift=finite_floats(np.float64, 1e6),
)
def test_project_simplex_1d_shift_invariant(v, shift):
    """A 1-D vector gives a 1-D projection; a common shift changes nothing."""
    x = project_simplex(v, n_jobs=1)
    assert x.shape == v.shape
    assert_on_simplex(x, np.float64)
    xs = project_simplex(v + shift, n_jobs=1)
    scale = max(1.0, float(np.max(np.abs(v))) + abs(shift))
    np.testing.assert_allclose(xs, x, rtol=0, atol=simplex_tol(np.float64, v.size, scale))
    np.testing.assert_array_equal(project_simplex(v[None, :], n_jobs=1)[0], x)


# --------------------------------------------------------------------------
# (b) sparse_encode
# --------------------------------------------------------------------------


@st.composite
def encoding_problems(draw, max_n=20, dtypes=DTYPES, max_abs=10.0):
    dtype = draw(dtypes)
    n = draw(st.integers(1, max_n))
    d = draw(st.integers(1, 5))
    m = draw(st.integers(1, 8))
    elems = finite_floats(dtype, max_abs, min_abs=TINY * max_abs)
    Y = draw(hnp.arrays(dtype, (n, d), elements=elems))
    W = draw(hnp.arrays(dtype, (m, d), elements=elems))
    lam = draw(st.floats(0.0, 10.0, allow_nan=False))
    return Y, W, lam


def assert_csr_codes(C, n, m, dtype):
    assert isinstance(C, sp.csr_array)
    assert C.shape == (n, m)
    assert C.dtype == dtype
    indptr, indices, data = C.indptr, C.indices, C.data
    assert indptr.shape == (n + 1,)
    assert indptr[0] == 0 and indptr[-1] == data.size == indices.size
    assert np.all(np.diff(indptr) >= 1), "a row with no nonzero cannot sum to 1"
    assert np.all((indices >= 0) & (indices < m))
    for i in range(n):
        row = indices[indptr[i] : indptr[i + 1]]
        assert np.all(np.diff(row) > 0), "column indices not strictly ascending"
    assert np.all(np.isfinite(data))
    assert np.all(data > 0)
    sums = np.add.reduceat(data.astype(np.float64), indptr[:-1])
    np.testing.assert_allclose(sums, 1.0, rtol=0, atol=simplex_tol(dtype, m))


@pytest.mark.parametrize("encoder", ["apg", "auto"])  # "auto": the exact codes at lam <= 1
@fuzz_settings(N_ENCODE)
@given(problem=encoding_problems(), T=st.integers(1, 20), data=st.data())
def test_sparse_encode_wellformed(encoder, problem, T, data):
    """Well-formed CSR codes on the simplex; chunking does not change them."""
    Y, W, lam = problem
    Y0, W0 = Y.copy(), W.copy()
    C = sparse_encode(Y, W, lam=lam, encoder=encoder, n_iter=T, n_jobs=1)
    assert np.array_equal(Y, Y0) and np.array_equal(W, W0), "input modified"
    assert_csr_codes(C, Y.shape[0], W.shape[0], Y.dtype)
    chunk = data.draw(st.integers(1, Y.shape[0]), label="chunk_size")
    Cc = sparse_encode(Y, W, lam=lam, encoder=encoder, n_iter=T, n_jobs=1, chunk_size=chunk)
    assert_csr_codes(Cc, Y.shape[0], W.shape[0], Y.dtype)
    atol = 1e3 * np.finfo(Y.dtype).eps
    np.testing.assert_allclose(Cc.toarray(), C.toarray(), rtol=0, atol=atol)


def kds_objective(x, y, W, lam):
    """f(x; y, W) = 1/2 ||y - x W||^2 + lam * sum_j x_j ||y - w_j||^2 (float64)."""
    r = y - x @ W
    dist = np.sum((y[None, :] - W) ** 2, axis=1)
    return 0.5 * float(r @ r) + lam * float(x @ dist)


def exact_simplex_qp(y, W, lam):
    """Minimum of f over the simplex by enumerating supports (m <= 8).

    On the face with support S the minimiser over its affine hull solves
    ``[[G_SS, 1], [1^T, 0]] [x_S; nu] = [c_S; 1]`` with ``G = W W^T`` and
    ``c = W y - lam * dist``. If S is a minimal support of an optimum x*,
    x* is the unique minimiser on that hull (otherwise a line of minimisers
    through x* would reach a smaller face), so the least-squares solution of
    the system finds it; the best feasible candidate over all S is the optimum.
    """
    m = W.shape[0]
    G = W @ W.T
    dist = np.sum((y[None, :] - W) ** 2, axis=1)
    c = W @ y - lam * dist
    best_x, best_f = None, np.inf
    for k in range(1, m + 1):
        for S in itertools.combinations(range(m), k):
            S = list(S)
            A = np.zeros((k + 1, k + 1))
            A[:k, :k] = G[np.ix_(S, S)]
            A[:k, k] = 1.0
            A[k, :k] = 1.0
            rhs = np.append(c[S], 1.0)
            sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
            xs = sol[:k]
            if not np.all(np.isfinite(xs)) or np.min(xs) < -1e-10 or abs(xs.sum() - 1) > 1e-8:
                continue
            x = np.zeros(m)
            x[S] = np.maximum(xs, 0.0)
            x /= x.sum()
            f = kds_objective(x, y, W, lam)
            if f < best_f:
                best_x, best_f = x, f
    return best_x, best_f


def slsqp_simplex(y, W, lam):
    m = W.shape[0]
    res = scipy.optimize.minimize(
        lambda x: kds_objective(x, y, W, lam),
        np.full(m, 1.0 / m),
        method="SLSQP",
        bounds=[(0.0, 1.0)] * m,
        constraints=[{"type": "eq", "fun": lambda x: np.sum(x) - 1.0}],
        options={"ftol": 1e-14, "maxiter": 500},
    )
    x = np.clip(res.x, 0.0, None)
    x /= x.sum()
    return x, kds_objective(x, y, W, lam)


N_ITER_OPTIMAL = 2000


def accelerated_rate_bound(W, x_star, T):
    """Worst-case gap after T steps of the encoder: ``2 L ||x_0 - x*||^2 / (T + 1)^2``.

    The encoder is accelerated projected gradient with momentum t / (t + 3)
    (FISTA in the Chambolle-Dossal form with a = 2), step 1/L with
    ``L = sigma_max(W)^2`` (the locality term is linear), started at x_0 = 0.
    """
    L = float(np.linalg.eigvalsh(W @ W.T)[-1])
    return 2.0 * L * float(x_star @ x_star) / (T + 1) ** 2


@fuzz_settings(N_ENCODE_OPTIMAL)
@given(problem=encoding_problems(max_n=4, dtypes=st.just(np.float64)))
def test_sparse_encode_reaches_optimum(problem):
    """T = 2000, float64: the objective is within 1e-6 (relative) of the
    optimum of an exact QP solution (and never below it).

    "Relative" is relative to the larger of |f*| and the objective's range on
    the simplex, ``max_j f(e_j) - f*`` (f* is often exactly 0). Where the
    method's proven worst-case rate cannot reach that in 2000 steps (a step
    1/sigma_max(W)^2 much smaller than the curvature along the simplex, or an
    objective nearly flat near its minimiser: y = 3, W = [0, 3, 4], lam = 1e-5
    stops at a gap of 7.4e-6 = 1.6e-6 of the range, inside the rate bound
    1.25e-5), the tolerance is that bound instead.
    """
    Y, W, lam = problem
    C = sparse_encode(Y, W, lam=lam, encoder="apg", n_iter=N_ITER_OPTIMAL, n_jobs=1).toarray()
    for y, x in zip(Y, C):
        x_star, f_exact = exact_simplex_qp(y, W, lam)
        _, f_slsqp = slsqp_simplex(y, W, lam)
        f_ref = min(f_exact, f_slsqp)
        f = kds_objective(x, y, W, lam)
        f_range = max(kds_objective(e, y, W, lam) for e in np.eye(W.shape[0])) - f_exact
        scale = max(abs(f_exact), f_range)
        # rounding in terms of size ~ ||y||^2 + ||w||^2 when the optimum is (near) 0
        floor = 1e-12 * (float(y @ y) + float(np.max(np.sum(W * W, axis=1))) + 1.0)
        tol = max(1e-6 * scale, accelerated_rate_bound(W, x_star, N_ITER_OPTIMAL)) + floor
        assert f <= f_ref + tol, (f, f_exact, f_slsqp, tol)
        assert f >= f_exact - floor - 1e-9 * abs(f_exact), (f, f_exact)


# --------------------------------------------------------------------------
# (c) estimators
# --------------------------------------------------------------------------


@st.composite
def fit_problems(draw):
    dtype = draw(DTYPES)
    m = draw(st.integers(1, 6))
    n = draw(st.integers(m, 40))
    d = draw(st.integers(1, 4))
    max_abs = draw(st.sampled_from([1e-3, 1.0, 100.0, 1e4]))
    elems = finite_floats(dtype, max_abs, min_abs=TINY * max_abs)
    Y = draw(hnp.arrays(dtype, (n, d), elements=elems))
    params = dict(
        n_atoms=m,
        lam=draw(st.floats(0.0, 10.0, allow_nan=False)),
        n_iter=draw(st.integers(1, 20)),
        max_epochs=draw(st.integers(1, 3)),
        init=draw(st.sampled_from(["k-means++", "random"])),
        random_state=draw(st.integers(0, 2**16)),
        n_jobs=1,
    )
    return Y, params


def assert_clear_error(exc):
    """ValueError/TypeError with a message; numpy's LinAlgError (a ValueError)
    leaking from inside is not a clear error."""
    assert isinstance(exc, (ValueError, TypeError)), f"unexpected {type(exc).__name__}: {exc}"
    assert not isinstance(exc, np.linalg.LinAlgError), f"LinAlgError leaked: {exc}"
    assert str(exc).strip(), "error without a message"


@fuzz_settings(N_KDS)
@given(problem=fit_problems())
def test_kds_fit_succeeds_or_clear_error(problem):
    Y, params = problem
    Y0 = Y.copy()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = KDS(**params).fit(Y)
            codes = model.transform(Y)
    except Exception as exc:  # noqa: BLE001 - the property is about the type
        assert_clear_error(exc)
        return
    assert np.array_equal(Y, Y0), "input modified"
    assert model.components_.shape == (params["n_atoms"], Y.shape[1])
    assert model.components_.dtype == Y.dtype
    assert np.all(np.isfinite(model.components_))
    assert np.all(np.isfinite(model.objective_))
    assert_csr_codes(codes, Y.shape[0], params["n_atoms"], Y.dtype)


@fuzz_settings(N_CLUSTERING)
@given(problem=fit_problems(), k=st.one_of(st.just("auto"), st.integers(1, 6)))
def test_kdsclustering_fit_succeeds_or_clear_error(problem, k):
    Y, params = problem
    Y0 = Y.copy()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = KDSClustering(k, n_init=2, **params).fit(Y)
    except Exception as exc:  # noqa: BLE001
        assert_clear_error(exc)
        return
    assert np.array_equal(Y, Y0), "input modified"
    n = Y.shape[0]
    assert np.all(np.isfinite(model.components_))
    assert model.labels_.shape == (n,)
    assert np.all((model.labels_ >= 0) & (model.labels_ < model.n_clusters_))
    if k != "auto":
        assert model.n_clusters_ == k
    # k columns, or more when localised modes lead (spectral.BipartiteSpectrum.n_columns),
    # or every spread mode where there are fewer (the vote labels past them)
    n_columns = model.spectrum_.n_columns(model.n_clusters_)
    assert min(model.n_clusters_, int(model.spectrum_.spread.sum())) <= n_columns
    assert model.embedding_.shape == (n, n_columns)
    assert np.all(np.isfinite(model.embedding_))
    assert np.all(np.isfinite(model.eigenvalues_))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = model.predict(Y)
    assert pred.shape == (n,)
    assert np.all((pred >= 0) & (pred < model.n_clusters_))


# --------------------------------------------------------------------------
# Minimal reproducers of the bugs the fuzzing found (kept out of the domains
# above so that the properties stay green): open bugs are strict xfails,
# fixed ones regression tests
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "v, dtype",
    [([1e308, 0.0, 0.0], np.float64), ([3e38, 0.0, 0.0], np.float32), ([1.8e307] + [0.0] * 10, np.float64)],
)
def test_project_simplex_sorted_huge_values(v, dtype):
    """Finite input gives the same finite projection by both methods."""
    V = np.array(v, dtype=dtype)
    x = project_simplex(V, method="sorted")
    assert np.all(np.isfinite(x))
    np.testing.assert_allclose(x, project_simplex(V, method="michelot"), atol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(
    "Y, W, step",
    [
        (np.zeros((1, 1), np.float32), np.array([[6e-26]], np.float32), "centred"),
        (np.zeros((1, 1)), np.array([[5.6e-156]]), "paper"),
        (np.array([[1.0]], np.float32), np.array([[1e-20], [2e-20]], np.float32), "centred"),
    ],
    ids=["float32-6e-26", "float64-5.6e-156", "float32-1e-20"],
)
def test_encoder_tiny_dictionary(Y, W, step):
    """A tiny but nonzero dictionary whose step overflows the dtype: a clear
    ValueError asking to rescale.

    Regression (found by this module): before b646585 alpha became inf, the
    iterate NaN, and the kernel divided by zero: SystemError.
    """
    with pytest.raises(ValueError, match="rescale") as info:
        sparse_encode(Y, W, lam=0.0, encoder="apg", n_iter=5, step=step)
    assert_clear_error(info.value)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_encoder_tiny_single_atom_centred():
    """The same float64 atom with the centred step: less its mean it is
    zero, so no step is needed (any works), and the one code is 1."""
    codes = sparse_encode(np.zeros((1, 1)), np.array([[5.6e-156]]), lam=0.0, encoder="apg", n_iter=5)
    np.testing.assert_array_equal(codes.toarray(), [[1.0]])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_encoder_underflowing_dictionary():
    """W W^T underflowing to exactly 0 (entries ~1e-170): a clear ValueError
    asking to rescale, not the 'zero dictionary' branch.

    Regression (found by this module): before b646585 the encoder silently
    returned uniform codes, although the unscaled codes are one-hot.
    """
    Y = np.array([[0.0, 0.0], [1.0, 0.0]])
    W = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    ref = sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=50).toarray()
    np.testing.assert_allclose(ref, [[1, 0, 0], [0, 1, 0]], atol=1e-12)
    with pytest.raises(ValueError, match="rescale") as info:
        sparse_encode(Y * 1e-170, W * 1e-170, lam=1.0, encoder="apg", n_iter=50)
    assert_clear_error(info.value)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(
    "Y, W",
    [
        (np.array([[1e10]], np.float32), np.array([[1e-10], [2e-10]], np.float32)),
        (np.array([[1e18]], np.float32), np.array([[1e-2]], np.float32)),
        (np.array([[1e154]]), np.array([[1e-3]])),
    ],
    ids=["float32-1e10-vs-1e-10", "float32-1e18-vs-1e-2", "float64-1e154-vs-1e-3"],
)
def test_encoder_far_data_small_dictionary(Y, W):
    """Finite codes on the simplex (here: all mass on the nearest atom), or a
    clear ValueError."""
    try:
        C = sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=5)
    except ValueError as exc:
        assert_clear_error(exc)
        return
    assert_csr_codes(C, Y.shape[0], W.shape[0], Y.dtype)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_kds_fit_far_and_near_points_float32():
    """Fit succeeds with finite components and simplex codes, or raises a
    clear ValueError."""
    Y = np.array([[3.6028797e16], [1.953125e-3]], dtype=np.float32)
    try:
        model = KDS(1, lam=1.0, n_iter=10, max_epochs=2, init=Y[1:], random_state=0).fit(Y)
        codes = model.transform(Y)
    except ValueError as exc:
        assert_clear_error(exc)
        return
    assert np.all(np.isfinite(model.components_))
    assert_csr_codes(codes, 2, 1, np.float32)


# Total fuzz examples at the default scale (FASTKDS_FUZZ_EXAMPLES=1):
# 900 + 150 + 500 + 200 + 300 + 200 = 2250 examples.
def test_fuzz_budget():
    """The module runs at least 2000 examples at the default scale."""
    assert TOTAL_EXAMPLES == 2250
    assert TOTAL_EXAMPLES >= 2000

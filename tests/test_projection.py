"""Tests of ``fastkds.project_simplex`` against independent solvers.

The Euclidean projection onto the probability simplex,
``x = argmin_{x >= 0, sum x = 1} ||x - v||^2``, is checked by

* its KKT conditions: there is a threshold tau with ``x_j = v_j - tau`` on the
  support and ``v_j <= tau`` off it;
* an exhaustive search over supports (for small m);
* ``scipy.optimize.minimize`` (SLSQP) on the quadratic program;
* the plain NumPy oracle ``fastkds._naive.project_simplex``;

on random vectors, exact ties, all-equal vectors, negative, tiny and huge
values, m = 1, float32 and float64.
"""

import itertools

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fastkds
from fastkds import _kernels, _naive

METHODS = ["michelot", "sorted"]
DTYPES = [np.float64, np.float32]


# --------------------------------------------------------------------------
# independent references
# --------------------------------------------------------------------------


def rtol_for(dtype):
    return 1e-12 if np.dtype(dtype) == np.float64 else 1e-5


def exhaustive_projection(v):
    """Projection by trying every support S (float64, small m only).

    On a fixed support the minimiser is ``x_S = v_S - (sum v_S - 1) / |S|``;
    the projection is the feasible candidate closest to v.
    """
    v = np.asarray(v, dtype=np.float64)
    m = v.shape[0]
    best, best_val = None, np.inf
    for k in range(1, m + 1):
        for S in itertools.combinations(range(m), k):
            S = list(S)
            x = np.zeros(m)
            x[S] = v[S] - (v[S].sum() - 1.0) / k
            if (x[S] < -1e-12).any():
                continue
            val = np.sum((x - v) ** 2)
            if val < best_val - 1e-14:
                best, best_val = np.maximum(x, 0.0), val
    return best


def slsqp_projection(v):
    """Projection as a QP solved by ``scipy.optimize.minimize(method='SLSQP')``."""
    v = np.asarray(v, dtype=np.float64)
    m = v.shape[0]
    res = scipy.optimize.minimize(
        lambda x: 0.5 * (x @ x) - v @ x,  # ||x - v||^2 / 2 less a constant
        np.full(m, 1.0 / m),
        jac=lambda x: x - v,
        method="SLSQP",
        bounds=[(0.0, None)] * m,
        constraints=[{"type": "eq", "fun": lambda x: np.sum(x) - 1.0, "jac": lambda x: np.ones(m)}],
        options={"ftol": 1e-12, "maxiter": 500},
    )
    assert res.success, res.message
    return res.x


def assert_kkt(x, v, tol):
    """Assert x is the projection of v: feasibility and the KKT conditions.

    ``tol`` is an absolute tolerance on the scale of ``max(1, max|v|)``.
    """
    x = np.asarray(x, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(v))))
    assert np.all(np.isfinite(x))
    assert np.all(x >= 0.0)
    # forming v - tau loses about eps * max|v| per entry
    assert abs(x.sum() - 1.0) <= tol * x.shape[0] * scale
    support = x > 0
    assert support.any()
    taus = v[support] - x[support]
    tau = np.mean(taus)
    # one threshold on the support ...
    np.testing.assert_allclose(taus, tau, rtol=0, atol=tol * scale)
    # ... above every value off the support
    assert np.all(v[~support] <= tau + tol * scale)


def random_vectors(rng, n, m):
    """A mix of scales and shifts so that supports of every size occur."""
    scale = rng.choice([0.01, 0.3, 1.0, 5.0], size=(n, 1))
    shift = rng.normal(size=(n, 1)) * 10
    return rng.normal(size=(n, m)) * scale + shift


def special_vectors(m, dtype):
    """Ties, all-equal, negative and tiny vectors of length m."""
    rows = [
        np.zeros(m),
        np.full(m, 3.5),
        np.full(m, -7.25),
        np.full(m, 1.0 / m),
        np.arange(m, dtype=np.float64) % 3,  # exact ties in groups
        -np.abs(np.arange(m, dtype=np.float64) - m // 2),  # symmetric ties around the peak
        np.linspace(-1.0, 1.0, m),
        1e-150 * np.linspace(-1.0, 2.0, m),
        -1e-150 * np.arange(m, dtype=np.float64),
        np.where(np.arange(m) < 2, 0.7, -0.7),  # two tied winners
        np.where(np.arange(m) == m - 1, 1e3, -1e3),  # one clear winner
    ]
    V = np.array(rows, dtype=np.float64)
    if np.dtype(dtype) == np.float32:
        V = V.astype(np.float32)  # tiny values flush to zero: still valid input
    return V.astype(dtype)


# --------------------------------------------------------------------------
# (a) KKT conditions
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("m", [1, 2, 3, 7, 40])
def test_kkt_random(method, dtype, m):
    rng = np.random.default_rng(100 + m)
    V = random_vectors(rng, 60, m).astype(dtype)
    X = fastkds.project_simplex(V, method=method)
    assert X.dtype == np.dtype(dtype)
    assert X.shape == V.shape
    for x, v in zip(X, V):
        assert_kkt(x, v, 10 * rtol_for(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("m", [1, 2, 5, 16])
def test_kkt_special(method, dtype, m):
    V = special_vectors(m, dtype)
    X = fastkds.project_simplex(V, method=method)
    assert X.dtype == np.dtype(dtype)
    for x, v in zip(X, V):
        assert_kkt(x, v, 10 * rtol_for(dtype))


@pytest.mark.parametrize("method", METHODS)
def test_exhaustive_small(method):
    """Every vector for m <= 6 matches the best feasible support."""
    rng = np.random.default_rng(7)
    for m in range(1, 7):
        V = np.vstack([random_vectors(rng, 25, m), special_vectors(m, np.float64)])
        X = fastkds.project_simplex(V, method=method)
        for x, v in zip(X, V):
            np.testing.assert_allclose(x, exhaustive_projection(v), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------
# (b) scipy.optimize
# --------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_against_slsqp(method):
    rng = np.random.default_rng(11)
    for m in (1, 2, 3, 5, 8, 12):
        V = rng.normal(size=(8, m)) * rng.choice([0.1, 1.0, 3.0])
        X = fastkds.project_simplex(V, method=method)
        for x, v in zip(X, V):
            np.testing.assert_allclose(x, slsqp_projection(v), rtol=0, atol=1e-6)


# --------------------------------------------------------------------------
# (c) the oracle, the two methods, dtypes and shapes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("m", [1, 2, 3, 10, 64, 300])
def test_matches_naive(method, dtype, m):
    rng = np.random.default_rng(m)
    V = np.vstack([random_vectors(rng, 50, m), special_vectors(m, np.float64)]).astype(dtype)
    X = fastkds.project_simplex(V, method=method)
    ref = _naive.project_simplex(V)
    assert X.dtype == ref.dtype == np.dtype(dtype)
    atol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(X, ref, rtol=0, atol=atol * max(1.0, np.sqrt(m)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_methods_agree(dtype):
    rng = np.random.default_rng(3)
    V = random_vectors(rng, 200, 25).astype(dtype)
    a = fastkds.project_simplex(V, method="michelot")
    b = fastkds.project_simplex(V, method="sorted")
    np.testing.assert_allclose(a, b, rtol=0, atol=10 * rtol_for(dtype))
    # identical support except at entries within rounding of the threshold
    assert np.mean((a > 0) == (b > 0)) > 0.999


def test_exact_ties_split_equally():
    """Exact ties split the mass equally, to the last bit in float64."""
    v = np.array([0.5, 0.5, 0.5, 0.5, -1.0])
    for method in METHODS:
        x = fastkds.project_simplex(v, method=method)
        np.testing.assert_array_equal(x, [0.25, 0.25, 0.25, 0.25, 0.0])
    v = np.full(10, 123.0)
    for method in METHODS:
        x = fastkds.project_simplex(v, method=method)
        assert np.all(x == x[0])  # ties stay tied
        np.testing.assert_allclose(x, 0.1, rtol=0, atol=10 * 123.0 * np.finfo(np.float64).eps)


@pytest.mark.parametrize("method", METHODS)
def test_vertex_and_interior_points(method):
    """Points already on the simplex are fixed; far-away winners give a vertex."""
    rng = np.random.default_rng(5)
    P = rng.dirichlet(np.ones(6), size=20)
    np.testing.assert_allclose(fastkds.project_simplex(P, method=method), P, atol=1e-15)
    V = np.zeros((6, 6)) - 5.0
    V[np.arange(6), np.arange(6)] = 5.0
    np.testing.assert_array_equal(fastkds.project_simplex(V, method=method), np.eye(6))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_one_d_input(method, dtype):
    v = np.array([0.2, -0.4, 1.3, 0.9], dtype=dtype)
    x = fastkds.project_simplex(v, method=method)
    assert x.ndim == 1 and x.shape == (4,)
    assert x.dtype == np.dtype(dtype)
    np.testing.assert_allclose(x, fastkds.project_simplex(v[None, :], method=method)[0], rtol=0, atol=0)
    np.testing.assert_allclose(x, [0.0, 0.0, 0.7, 0.3], atol=10 * rtol_for(dtype))


@pytest.mark.parametrize("method", METHODS)
def test_m_equals_one(method):
    for dtype in DTYPES:
        V = np.array([[-1e4], [0.0], [1e-150], [2.5], [1e4], [-0.5]]).astype(dtype)
        X = fastkds.project_simplex(V, method=method)
        assert X.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(X, np.ones((6, 1), dtype=dtype))


@pytest.mark.parametrize("method", METHODS)
def test_integer_input_becomes_float64(method):
    X = fastkds.project_simplex(np.array([[3, 1, 1], [0, 0, 0]]), method=method)
    assert X.dtype == np.float64
    np.testing.assert_allclose(X, [[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-15)


@pytest.mark.parametrize("method", METHODS)
def test_input_not_modified(method):
    rng = np.random.default_rng(9)
    V = rng.normal(size=(30, 9))
    V0 = V.copy()
    fastkds.project_simplex(V, method=method)
    np.testing.assert_array_equal(V, V0)


def test_unknown_method():
    with pytest.raises(ValueError):
        fastkds.project_simplex(np.zeros((2, 3)), method="condat")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_translation_invariance_moderate_shift(method, dtype):
    """P(v + c 1) = P(v): the simplex constraint absorbs any common shift."""
    rng = np.random.default_rng(21)
    V = rng.normal(size=(40, 12))
    shift = 1e3 if dtype == np.float32 else 1e6
    a = fastkds.project_simplex(V.astype(dtype), method=method)
    b = fastkds.project_simplex((V + shift).astype(dtype), method=method)
    # shifting by c loses about c * eps of the input's precision
    atol = 20 * shift * np.finfo(dtype).eps
    np.testing.assert_allclose(a, b, rtol=0, atol=atol)


def test_tiny_values():
    """Values of order 1e-150 project to (almost) the uniform vector."""
    rng = np.random.default_rng(4)
    V = rng.normal(size=(10, 7)) * 1e-150
    for method in METHODS:
        X = fastkds.project_simplex(V, method=method)
        np.testing.assert_allclose(X, 1.0 / 7.0, rtol=1e-14)


# Huge values: when the spacing of floats near max|v| exceeds 1, ``v - tau``
# can no longer be formed accurately, but the projection is still well defined
# (it is translation invariant): subtracting max(v) first gives it exactly.
# The kernels do not do this: Michelot's candidate set {v_j > max(v) - 1} is
# empty (max(v) - 1 rounds to max(v)) and it divides by a zero count
# (ZeroDivisionError surfacing as SystemError); the sorted method returns
# entries of order |v|.
HUGE = {np.float64: 1e150, np.float32: 1e30}


def huge_cases(dtype):
    s = HUGE[dtype]
    return [
        (np.array([s, 0.0]), np.array([1.0, 0.0])),
        (np.array([s, s, s, s]), np.full(4, 0.25)),
        (s * np.array([0.3, -1.2, 2.0, 0.5]), np.array([0.0, 0.0, 1.0, 0.0])),
        (np.array([-s, 1.0, 2.0]), np.array([0.0, 0.0, 1.0])),
        (np.array([-s]), np.array([1.0])),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_huge_values(method, dtype):
    for v, expected in huge_cases(dtype):
        x = fastkds.project_simplex(v.astype(dtype), method=method)
        assert x.dtype == np.dtype(dtype)
        np.testing.assert_allclose(x, expected, atol=10 * rtol_for(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_large_but_representable_values(method, dtype):
    """Large values whose float spacing is still well below 1 work."""
    s = 1e12 if dtype == np.float64 else 1e5
    for v, expected in [
        (np.array([s, 0.0]), np.array([1.0, 0.0])),
        (np.array([s, s, s, s]), np.full(4, 0.25)),
        (s * np.array([0.3, -1.2, 2.0, 0.5]), np.array([0.0, 0.0, 1.0, 0.0])),
        (np.array([-s, 1.0, 2.0]), np.array([0.0, 0.0, 1.0])),
    ]:
        x = fastkds.project_simplex(v.astype(dtype), method=method)
        np.testing.assert_allclose(x, expected, atol=s * 4 * np.finfo(dtype).eps)


# --------------------------------------------------------------------------
# the float32 hazard of SPEC section 9: Michelot's passes must terminate
# --------------------------------------------------------------------------


def adversarial_float32(rng, n, m):
    """float32 vectors with many entries within a few ulps of the threshold."""
    rows = []
    for _ in range(n):
        k = int(rng.integers(1, m + 1))
        tau = np.float32(rng.choice([0.0, 1e-3, 0.37, -2.5, 100.0, 1234.5]) * rng.uniform(0.5, 2))
        x = rng.dirichlet(np.ones(k) * rng.choice([0.05, 1.0, 50.0]))
        v = np.full(m, tau, dtype=np.float32)
        v[:k] = (x + tau).astype(np.float32)
        # off-support entries a few ulps around the threshold
        ulps = rng.integers(-3, 4, size=m - k)
        off = v[k:]
        for _ in range(3):
            off = np.where(ulps > 0, np.nextafter(off, np.float32(np.inf)), off)
            off = np.where(ulps < 0, np.nextafter(off, np.float32(-np.inf)), off)
            ulps = ulps - np.sign(ulps)
        v[k:] = off
        rng.shuffle(v)
        rows.append(v)
    # repeated values 1/k + tau: the running sums round differently in every order
    for k in (3, 7, 10, 33, 100):
        for tau in (0.1, 7.7, 1e3):
            v = np.full(m, np.float32(tau) - np.float32(0.5), dtype=np.float32)
            v[: min(k, m)] = np.float32(1.0 / k) + np.float32(tau)
            rows.append(v)
    return np.array(rows, dtype=np.float32)


@pytest.mark.parametrize("m", [5, 40, 200])
def test_float32_michelot_terminates_on_adversarial_vectors(m):
    rng = np.random.default_rng(m)
    V = adversarial_float32(rng, 300, m)
    X = fastkds.project_simplex(V, method="michelot")
    assert X.dtype == np.float32
    assert np.all(np.isfinite(X)) and np.all(X >= 0)
    # the exact projection of the same float32 numbers, computed in float64
    ref = fastkds.project_simplex(V.astype(np.float64), method="sorted")
    scale = np.maximum(1.0, np.abs(V).max(axis=1))
    eps = np.finfo(np.float32).eps
    # float32 running sums of m entries of size ~scale: the threshold is off by
    # up to about m * eps * scale, the sum of the m outputs by m^2 * eps * scale
    err = np.abs(X - ref).max(axis=1)
    assert np.all(err <= 2 * m * eps * scale)
    sums = X.sum(axis=1, dtype=np.float64)
    assert np.all(np.abs(sums - 1.0) <= m * m * eps * scale)
    # overall no worse than the sorted reference in the same dtype
    err_sorted = np.abs(fastkds.project_simplex(V, method="sorted") - ref).max(axis=1)
    assert (err / scale).max() <= 2 * (err_sorted / scale).max() + 4 * eps


def test_float32_michelot_threshold_kernel_direct():
    """The threshold kernel itself returns (it is capped) and agrees with the sorted one."""
    rng = np.random.default_rng(99)
    m = 64
    V = adversarial_float32(rng, 200, m)
    ks = np.arange(m + 1, dtype=np.float32)
    cand = np.empty(m, dtype=np.int64)
    for v in V:
        vmax = _kernels.max_entry(v)
        t_m, k = _kernels.simplex_support_michelot(v, vmax, -ks[1], ks, cand)
        t_s = _kernels._simplex_threshold_sorted(v, vmax, ks)
        assert np.isfinite(t_m)
        assert 1 <= k <= m
        assert abs(float(t_m) - float(t_s)) <= 4 * m * np.finfo(np.float32).eps * max(1.0, np.abs(v).max())


# --------------------------------------------------------------------------
# property test
# --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    V=hnp.arrays(
        dtype=st.sampled_from([np.float64, np.float32]),
        shape=hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=12),
        elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32),
    ),
    method=st.sampled_from(METHODS),
)
def test_property_projection(V, method):
    X = fastkds.project_simplex(V, method=method)
    assert X.dtype == V.dtype and X.shape == V.shape
    tol = 10 * rtol_for(V.dtype)
    for x, v in zip(X, V):
        assert_kkt(x, v, tol)
    ref = _naive.project_simplex(V)
    atol = 1e-12 if V.dtype == np.float64 else 1e-5
    scale = max(1.0, float(np.abs(V).max()))
    np.testing.assert_allclose(X, ref, rtol=0, atol=atol * scale)
    # the projection is idempotent
    np.testing.assert_allclose(fastkds.project_simplex(X, method=method), X, rtol=0, atol=atol * scale)

"""Tests of the sufficient statistics and the exact dictionary step (SPEC 5a).

``SufficientStatistics.add_chunk`` accumulates ``X^T X``, ``s = X^T 1`` and
``X^T Y`` from CSR chunks; ``solve_dictionary`` solves
``(X^T X + 2 lam diag(s)) W = (1 + 2 lam) X^T Y``. Both are checked against
``fastkds._naive``, and the closed form against the gradient and perturbations
of the objective.
"""

import warnings

import numpy as np
import pytest
import scipy.linalg

import fastkds
from fastkds import _naive
from fastkds.prepared import csr_from_dense
from fastkds.solvers import SufficientStatistics, duplicate_atoms, solve_dictionary, solve_positive

DTYPES = [np.float64, np.float32]


def sparse_codes(rng, n, m, max_support=4, dtype=np.float64):
    """Random rows on the simplex with 1..max_support nonzeros; every atom used."""
    X = np.zeros((n, m))
    for i in range(n):
        k = int(rng.integers(1, min(max_support, m) + 1))
        idx = rng.choice(m, size=k, replace=False)
        X[i, idx] = rng.dirichlet(np.ones(k))
    X[np.arange(m), :] = np.eye(m)  # each atom at least once, alone
    return X.astype(dtype)


def accumulate(X, Y, bounds, **kwargs):
    """Statistics of (X, Y) added chunk by chunk, split at ``bounds``."""
    n, m = X.shape
    stats = SufficientStatistics(m, Y.shape[1], **kwargs)
    edges = [0, *bounds, n]
    for lo, hi in zip(edges[:-1], edges[1:]):
        obj = np.ones(hi - lo, dtype=X.dtype)
        stats.add_chunk(*csr_from_dense(np.ascontiguousarray(X[lo:hi])), Y[lo:hi], obj)
    return stats


def total_objective(Y, W, X, lam):
    return float(_naive.objective(Y, W, X, lam).sum())


# --------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "n,m,d,bounds",
    [
        (1, 1, 1, []),
        (40, 1, 3, [13]),
        (60, 5, 2, [1, 2, 30]),
        # chunks of more than 256 rows are split into several parallel parts
        (900, 12, 7, [37, 300]),
        (700, 30, 3, []),
    ],
)
def test_statistics_match_naive(n, m, d, bounds, dtype):
    rng = np.random.default_rng(n + m + d)
    X = sparse_codes(rng, n, m, dtype=dtype) if n >= m else rng.dirichlet(np.ones(m), n).astype(dtype)
    Y = rng.normal(size=(n, d)).astype(dtype)
    stats = accumulate(X, Y, bounds)
    XtX, s, XtY = _naive.statistics(X, Y)
    assert stats.XtX.dtype == stats.s.dtype == stats.XtY.dtype == np.float64
    # float64 accumulation of the (exactly representable) float32 products
    np.testing.assert_allclose(stats.XtX, XtX, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.s, s, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.XtY, XtY, rtol=1e-12, atol=1e-12 * max(1, n))
    assert stats.n_samples == n
    assert stats.mean_objective == pytest.approx(1.0)
    np.testing.assert_allclose(stats.XtX, stats.XtX.T, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_parts", [1, 3, 8])
def test_statistics_by_atom_are_the_partials_sums_bit_for_bit(dtype, n_parts):
    # the two kernels on the same chunks: rows without codes, unused atoms,
    # negative zeros in Y, parts past the last row, accumulators already holding sums
    from fastkds import _kernels
    from fastkds._config import numba_threads

    rng = np.random.default_rng(n_parts)
    n, m, d = 700, 40, 9
    X = sparse_codes(rng, n, m, dtype=dtype)
    X[:, 7] = 0  # an unused atom
    X[100:140] = 0  # rows without codes
    Y = rng.normal(size=(n, d)).astype(dtype)
    Y[::5, 2] = -0.0
    sums = {}
    for kernel, extra in ((_kernels.accumulate_statistics, ()), (_kernels.accumulate_statistics_by_atom, (None,))):
        for n_jobs in (1, 2):
            XtX, s, XtY = np.zeros((m, m)), np.zeros(m), np.zeros((m, d))
            with numba_threads(n_jobs):
                for lo, hi in ((0, 650), (650, 653), (653, 700)):  # parts past the rows in the short chunks
                    args = (*csr_from_dense(np.ascontiguousarray(X[lo:hi])), Y[lo:hi], n_parts, XtX, s, XtY)
                    kernel(*args, *(n_jobs for _ in extra))
            sums[kernel.__name__, n_jobs] = (XtX, s, XtY)
    first = sums["accumulate_statistics", 1]
    for key, found in sums.items():
        for a, b in zip(first, found):
            np.testing.assert_array_equal(a, b, err_msg=str(key))
            assert not np.any(np.signbit(b) & (b == 0)), key  # no -0.0 either way
    XtX, s, XtY = _naive.statistics(X, Y)
    np.testing.assert_allclose(first[0], XtX, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(first[2], XtY, rtol=1e-12, atol=1e-11)


def test_many_atoms_and_features_take_the_statistics_by_atom():
    from fastkds import _kernels
    from fastkds.solvers import statistics_by_atom

    assert statistics_by_atom(500, 784) and not statistics_by_atom(24, 2)
    n, m, d = 600, 60, 600
    assert statistics_by_atom(m, d) and 8 * m * (m + d) < 2 * _kernels.STATISTICS_PART_BYTES
    rng = np.random.default_rng(3)
    X = sparse_codes(rng, n, m)
    Y = rng.normal(size=(n, d))
    stats = accumulate(X, Y, [257])
    XtX, s, XtY = _naive.statistics(X, Y)
    np.testing.assert_allclose(stats.XtX, XtX, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.s, s, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.XtY, XtY, rtol=1e-12, atol=1e-11)


def test_statistics_from_encoder_codes_and_objective():
    """Statistics of real encoder output; objective_sum adds the chunk objectives."""
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(300, 3))
    W = rng.normal(size=(9, 3))
    prep = fastkds.prepared.PreparedDictionary(W, 0.5, 30, np.float64)
    stats = SufficientStatistics(9, 3)
    X_all, obj_all = [], []
    for lo, hi in [(0, 100), (100, 101), (101, 300)]:
        X, obj = prep.encode_dense(Y[lo:hi])
        stats.add_chunk(*csr_from_dense(X), Y[lo:hi], obj)
        X_all.append(X.copy())
        obj_all.append(obj.copy())
    X = np.vstack(X_all)
    XtX, s, XtY = _naive.statistics(X, Y)
    np.testing.assert_allclose(stats.XtX, XtX, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.s, s, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.XtY, XtY, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(stats.s.sum(), 300.0, rtol=1e-12)  # rows sum to one
    np.testing.assert_allclose(stats.mean_objective, np.concatenate(obj_all).mean(), rtol=1e-12)
    np.testing.assert_allclose(stats.mean_objective, _naive.objective(Y, W, X, 0.5).mean(), rtol=1e-9)


def test_statistics_chunking_invariant():
    rng = np.random.default_rng(2)
    X = sparse_codes(rng, 600, 10)
    Y = rng.normal(size=(600, 4))
    a = accumulate(X, Y, [])
    b = accumulate(X, Y, [5, 6, 250, 599])
    np.testing.assert_allclose(a.XtX, b.XtX, rtol=1e-13)
    np.testing.assert_allclose(a.s, b.s, rtol=1e-13)
    np.testing.assert_allclose(a.XtY, b.XtY, rtol=1e-13, atol=1e-13)


# --------------------------------------------------------------------------
# the exact dictionary step
# --------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 0.1, 1.0, 5.0])
@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_matches_naive(lam, dtype):
    rng = np.random.default_rng(int(lam * 10) + 3)
    n, m, d = 400, 8, 3
    X = sparse_codes(rng, n, m, dtype=dtype)
    Y = (rng.normal(size=(n, d)) * 2).astype(dtype)
    stats = accumulate(X, Y, [123])
    W_old = rng.normal(size=(m, d))
    W_old0 = W_old.copy()
    W, n_dead = solve_dictionary(stats, lam, W_old)
    np.testing.assert_array_equal(W_old, W_old0)  # not modified
    assert n_dead == 0
    assert W.dtype == np.float64 and W.shape == (m, d)
    ref = _naive.dictionary_step(X.astype(np.float64), Y.astype(np.float64), lam)
    np.testing.assert_allclose(W, ref, rtol=1e-9, atol=1e-10)
    # the step does not depend on the previous dictionary when all atoms are used
    W2, _ = solve_dictionary(stats, lam, W_old * 10 + 3)
    np.testing.assert_allclose(W2, W, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lam", [0.0, 0.2, 3.0])
def test_closed_form_is_stationary_and_minimal(lam):
    rng = np.random.default_rng(17)
    n, m, d = 300, 6, 4
    X = sparse_codes(rng, n, m)
    Y = rng.normal(size=(n, d))
    stats = accumulate(X, Y, [150])
    W, _ = solve_dictionary(stats, lam, np.zeros((m, d)))
    grad = _naive.dictionary_gradient(X, Y, W, lam)
    scale = (1 + 2 * lam) * np.linalg.norm(X.T @ Y)
    assert np.linalg.norm(grad) <= 1e-8 * scale
    F = total_objective(Y, W, X, lam)
    for eps in (1e-6, 1e-3, 1e-1, 1.0):
        for _ in range(10):
            E = rng.normal(size=W.shape) * eps
            assert total_objective(Y, W + E, X, lam) >= F - 1e-10 * abs(F)
    # and it is strictly better than a clearly different dictionary
    assert total_objective(Y, W + 0.5, X, lam) > F


def test_gradient_oracle_matches_finite_differences():
    """The oracle gradient used above is itself right (central differences)."""
    rng = np.random.default_rng(5)
    X = sparse_codes(rng, 50, 4)
    Y = rng.normal(size=(50, 2))
    W = rng.normal(size=(4, 2))
    lam = 0.7
    G = _naive.dictionary_gradient(X, Y, W, lam)
    h = 1e-6
    for j in range(4):
        for k in range(2):
            E = np.zeros_like(W)
            E[j, k] = h
            fd = (total_objective(Y, W + E, X, lam) - total_objective(Y, W - E, X, lam)) / (2 * h)
            assert fd == pytest.approx(G[j, k], rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("m, d", [(7, 3), (300, 40)])
def test_solve_positive_matches_scipy(m, d):
    # the inverse-and-product solve against scipy's Cholesky solve, on two
    # thread counts (the product's blocks do not depend on them)
    import numba

    import fastkds._config as config

    rng = np.random.default_rng(m)
    X = rng.dirichlet(np.ones(m) * 0.1, size=3 * m)
    A = X.T @ X + 0.2 * np.diag(X.sum(axis=0))
    rhs = rng.normal(size=(m, d))
    ref = scipy.linalg.solve(A, rhs, assume_a="pos")
    found = []
    for n_jobs in (1, config.effective_n_jobs(None)):
        with config.numba_threads(n_jobs):
            assert numba.get_num_threads() == n_jobs
            found.append(solve_positive(A, rhs))
    np.testing.assert_allclose(found[0], ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_array_equal(found[0], found[1])


def test_solve_positive_refuses_what_scipy_would_warn_of():
    rng = np.random.default_rng(0)
    B = rng.normal(size=(6, 3))
    rhs = rng.normal(size=(6, 2))
    with pytest.raises(np.linalg.LinAlgError):  # rank 3 of 6: not positive definite
        solve_positive(B @ B.T, rhs)
    ill = np.diag([1.0, 1.0, 1e-17])  # positive definite to LAPACK, rcond 1e-17
    with pytest.warns(scipy.linalg.LinAlgWarning):
        scipy.linalg.solve(ill, rhs[:3], assume_a="pos")
    with pytest.raises(np.linalg.LinAlgError, match="ill-conditioned"):
        solve_positive(ill, rhs[:3])
    np.testing.assert_allclose(solve_positive(np.diag([1.0, 2.0, 1e-10]), rhs[:3]), rhs[:3] / [[1.0], [2.0], [1e-10]])


def singular_problem(seed, n=60, m=5, d=3):
    """lam = 0 codes in which atoms 0 and 1 are always used with equal weight:
    X^T X is singular and only w_0 + w_1 is determined."""
    rng = np.random.default_rng(seed)
    X = rng.dirichlet(np.ones(m), size=n)
    X[:, 1] = X[:, 0]
    X /= X.sum(axis=1, keepdims=True)
    Y = rng.normal(size=(n, d))
    return X, Y, accumulate(X, Y, [])


@pytest.mark.parametrize("seed", range(10))
def test_singular_lam_zero_gives_a_finite_minimiser(seed):
    X, Y, stats = singular_problem(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        W, n_dead = solve_dictionary(stats, 0.0, np.zeros((5, 3)))
    assert np.all(np.isfinite(W))
    best = np.linalg.lstsq(X, Y, rcond=None)[0]
    assert total_objective(Y, W, X, 0.0) == pytest.approx(total_objective(Y, best, X, 0.0), rel=1e-8)


def test_singular_lam_zero_identical_codes_give_identical_atoms():
    """Atoms with identical codes should end up identical (min-norm least squares)
    and be flagged as duplicates, with no LinAlgWarning reaching the user."""
    for seed in range(10):
        X, Y, stats = singular_problem(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            W, n_dead = solve_dictionary(stats, 0.0, np.zeros((5, 3)))
        np.testing.assert_allclose(W[0], W[1], atol=1e-8)
        assert n_dead >= 1


# --------------------------------------------------------------------------
# dead atoms and duplicates
# --------------------------------------------------------------------------


def test_dead_atom_is_reseeded_at_a_data_point():
    rng = np.random.default_rng(8)
    n, m, d, dead = 200, 6, 2, 3
    X = sparse_codes(rng, n, m)
    X[:, dead] = 0.0
    X[X.sum(axis=1) == 0, (dead + 1) % m] = 1.0
    X /= X.sum(axis=1, keepdims=True)
    Y = rng.normal(size=(n, d))
    W_old = rng.normal(size=(m, d)) + 10.0
    lam = 0.5
    stats = SufficientStatistics(m, d, n_candidates=4, random_state=np.random.RandomState(0))
    for lo, hi in [(0, 90), (90, 200)]:
        obj = _naive.objective(Y[lo:hi], W_old, X[lo:hi], lam)
        stats.add_chunk(*csr_from_dense(X[lo:hi]), Y[lo:hi], obj)
    assert stats.s[dead] == 0.0
    assert stats.candidates.shape == (4, d)
    W, n_dead = solve_dictionary(stats, lam, W_old)
    assert n_dead == 1
    assert np.all(np.isfinite(W))
    # the dead atom now sits on a data point (and left its old place)
    assert np.min(np.abs(Y - W[dead]).max(axis=1)) == 0.0
    assert not np.allclose(W[dead], W_old[dead])
    # the living atoms solve the problem restricted to them
    alive = np.arange(m) != dead
    ref = _naive.dictionary_step(X[:, alive], Y, lam)
    np.testing.assert_allclose(W[alive], ref, rtol=1e-9, atol=1e-10)


def test_dead_atom_without_candidates_keeps_old_atom():
    rng = np.random.default_rng(9)
    n, m, d = 100, 4, 2
    X = sparse_codes(rng, n, m)
    X[:, 0] = 0.0
    X[X.sum(axis=1) == 0, 1] = 1.0
    X /= X.sum(axis=1, keepdims=True)
    Y = rng.normal(size=(n, d))
    W_old = rng.normal(size=(m, d))
    W, n_dead = solve_dictionary(accumulate(X, Y, [50]), 1.0, W_old)
    assert n_dead == 1
    np.testing.assert_array_equal(W[0], W_old[0])
    assert np.all(np.isfinite(W))


def test_candidates_drawn_only_from_points_with_positive_objective():
    rng = np.random.default_rng(10)
    n, m, d = 300, 5, 2
    X = sparse_codes(rng, n, m)
    Y = rng.normal(size=(n, d))
    objective = np.zeros(n)
    hot = rng.choice(n, size=12, replace=False)
    objective[hot] = rng.random(12) + 0.1
    stats = SufficientStatistics(m, d, n_candidates=5, random_state=np.random.RandomState(3))
    for lo, hi in [(0, 100), (100, 200), (200, 300)]:
        stats.add_chunk(*csr_from_dense(X[lo:hi]), Y[lo:hi], objective[lo:hi])
    assert stats.candidates.shape == (5, d)
    for c in stats.candidates:
        i = int(np.argmin(np.abs(Y - c).max(axis=1)))
        assert np.array_equal(Y[i], c)
        assert i in hot
    assert len({tuple(c) for c in stats.candidates}) == 5  # no point twice


def _reservoir(key, row_start, objective, k, n_blocks):
    """The kernel's blocks joined as the statistics join them: ``(keys, rows)``
    of the best ``k``, largest first, ties to the lower row."""
    from fastkds import _kernels

    keys = np.empty((n_blocks, k))
    rows = np.empty((n_blocks, k), dtype=np.int64)
    _kernels.reservoir_top(np.uint64(key), row_start, objective, keys, rows)
    kept = rows >= 0
    keys, rows = keys[kept], rows[kept]
    best = np.lexsort((rows, -keys))[:k]
    return keys[best], rows[best]


@pytest.mark.parametrize(
    "key,row_start,n", [(1, 0, 1), (2**64 - 1, 3, 17), (0x9E3779B97F4A7C15, 5, 1000), (7, 10**12 + 2, 999)]
)
def test_reservoir_keys_come_from_numpys_philox(key, row_start, n):
    """Every row kept (k = n, unit weights): the keys are the logs of NumPy's
    Philox stream from any row (the first and last blocks cut short) and
    with any key, to the ulp of the two logs, and each row once."""
    keys, rows = _reservoir(key, row_start, np.ones(n), n, 3 if n >= 3 else 1)
    np.testing.assert_array_equal(np.sort(rows), np.arange(n))
    u = _naive.philox_uniforms(key, row_start, n)
    np.testing.assert_allclose(keys, np.log(u[rows]), rtol=4 * np.finfo(float).eps, atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "n,k,n_blocks",
    [(1000, 5, 1), (1000, 5, 7), (1000, 300, 4), (50, 80, 3), (7, 3, 7), (4096, 500, 8)],
)
def test_reservoir_top_is_numpys_selection(dtype, n, k, n_blocks):
    """The best k keys, whatever the blocks, are those NumPy's log and
    partition select: zero weights (-inf keys, drawn last, ties to the
    lower rows) and repeated weights included, a block shorter than k, k
    past the rows."""
    rng = np.random.default_rng(n + k)
    objective = rng.choice([0.0, 0.5, 1.0, 2.0], size=n).astype(dtype)
    objective[: n // 3] = 0.0
    keys, rows = _reservoir(11, 5, objective, k, n_blocks)
    want_keys, want_rows = _naive.reservoir_top(11, 5, objective, k)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_allclose(keys, want_keys, rtol=4 * np.finfo(float).eps, atol=0)


def test_reservoir_candidates_do_not_depend_on_the_chunks():
    """The statistics' candidates are the same rows whether the points come
    in one chunk or several, of any sizes."""
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(20_000, 3))
    objective = rng.random(20_000) ** 4
    objective[::7] = 0.0
    found = []
    for bounds in ([20_000], [1, 4096, 9000, 20_000], [10_000, 20_000]):
        stats = SufficientStatistics(3, 3, n_candidates=40, key=123)
        lo = 0
        for hi in bounds:
            stats.add_objectives(Y[lo:hi], objective[lo:hi])
            lo = hi
        found.append(stats.candidates)
    for other in found[1:]:
        np.testing.assert_array_equal(other, found[0])
    keys, rows = _naive.reservoir_top(123, 0, objective, 40)
    np.testing.assert_array_equal(found[0], Y[rows])


def test_duplicate_atoms():
    rng = np.random.default_rng(11)
    W = rng.normal(size=(7, 3))
    assert not duplicate_atoms(W).any()
    Wd = W.copy()
    Wd[5] = Wd[2]
    mask = duplicate_atoms(Wd)
    assert mask.dtype == bool and mask.shape == (7,)
    np.testing.assert_array_equal(mask, np.arange(7) == 5)  # the later copy is flagged
    Wn = W.copy()
    Wn[1] = Wn[4] + 1e-9
    np.testing.assert_array_equal(duplicate_atoms(Wn), np.arange(7) == 4)
    assert not duplicate_atoms(W[:1]).any()


def test_duplicate_atom_is_reseeded_by_solve():
    """Codes that make two atoms coincide: the second is re-seeded at a candidate."""
    rng = np.random.default_rng(12)
    n, m, d = 80, 4, 2
    X = rng.dirichlet(np.ones(m), size=n)
    X[:, 1] = X[:, 0]  # atoms 0 and 1 get identical codes ...
    X /= X.sum(axis=1, keepdims=True)
    Y = rng.normal(size=(n, d))
    stats = SufficientStatistics(m, d, n_candidates=3, random_state=np.random.RandomState(1))
    stats.add_chunk(*csr_from_dense(X), Y, _naive.objective(Y, rng.normal(size=(m, d)), X, 1.0))
    W, n_dead = solve_dictionary(stats, 1.0, np.zeros((m, d)))  # lam > 0: ... hence equal atoms
    assert n_dead == 1
    assert not np.allclose(W[0], W[1])
    assert np.min(np.abs(Y - W[1]).max(axis=1)) == 0.0

"""Tests of the KDS encoder ``fastkds.sparse_encode`` (SPEC sections 3-4).

The Numba encoder (Gram form, sparse iterate, Michelot's projection, blocked
parallel loop, chunked CSR assembly) must reproduce the plain NumPy loop of
``fastkds._naive.encode`` to rounding, and its CSR output must be well formed.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit, prange

import fastkds
from fastkds import _kernels, _naive
from fastkds._validation import read_only
from fastkds.prepared import PreparedDictionary, csr_from_dense

DTYPES = [np.float64, np.float32]
TOL = {np.float64: 1e-10, np.float32: 1e-4}


def make_problem(seed, n, d, m, dtype=np.float64):
    """Data near a random dictionary, on the scale of the atoms."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(m, d))
    Y = rng.normal(size=(n, d)) * 1.2 + 0.3
    return Y.astype(dtype), W


def assert_well_formed_csr(C, n, m, dtype):
    assert isinstance(C, sp.csr_array)
    assert C.shape == (n, m)
    assert C.dtype == np.dtype(dtype)
    assert C.indptr.shape == (n + 1,)
    assert C.indptr[0] == 0 and C.indptr[-1] == C.data.shape[0] == C.indices.shape[0]
    assert np.all(np.diff(C.indptr) >= 1)  # every row has a nonzero
    assert np.all(C.data > 0)  # no explicit zeros, no negatives
    assert np.all((C.indices >= 0) & (C.indices < m))
    for i in range(n):
        idx = C.indices[C.indptr[i] : C.indptr[i + 1]]
        assert np.all(np.diff(idx) > 0), f"row {i}: indices not strictly ascending"
    assert C.has_canonical_format
    sums = np.asarray(C.sum(axis=1), dtype=np.float64).ravel()
    tol = 1e-12 if np.dtype(dtype) == np.float64 else 1e-5
    np.testing.assert_allclose(sums, 1.0, rtol=0, atol=tol * max(1, m))


# --------------------------------------------------------------------------
# agreement with the NumPy oracle
# --------------------------------------------------------------------------


CASES = [
    # (d, m, lam, T)
    (1, 1, 0.5, 15),
    (2, 1, 0.0, 100),
    (2, 5, 0.0, 1),
    (2, 5, 0.0, 15),
    (2, 24, 5.0, 15),
    (2, 24, 0.5, 100),
    (3, 8, 1.0, 1),
    (5, 12, 0.1, 100),
    (10, 30, 0.0, 100),
    (10, 30, 2.0, 15),
    (40, 7, 0.3, 100),
    (20, 100, 0.05, 100),  # supports of many sizes that change along the way
    (8, 64, 0.0, 15),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d,m,lam,T", CASES)
def test_matches_naive(d, m, lam, T, dtype):
    Y, W = make_problem(d * 1000 + m * 10 + T, 120, d, m, dtype)
    C = fastkds.sparse_encode(Y, W, lam=lam, n_iter=T, encoder="apg")
    assert_well_formed_csr(C, Y.shape[0], m, dtype)
    ref = _naive.encode(Y, W.astype(dtype), lam, T)
    assert ref.dtype == np.dtype(dtype)
    np.testing.assert_allclose(C.toarray(), ref, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_m_equals_one_gives_ones(dtype):
    Y, W = make_problem(1, 30, 3, 1, dtype)
    C = fastkds.sparse_encode(Y, W, lam=0.7, n_iter=15, encoder="apg")
    assert_well_formed_csr(C, 30, 1, dtype)
    np.testing.assert_allclose(C.toarray(), 1.0, rtol=0, atol=TOL[dtype] / 10)


def test_points_at_atoms_are_coded_by_that_atom():
    """With lam > 0 a point sitting on an atom is coded by that atom alone."""
    rng = np.random.default_rng(2)
    W = rng.normal(size=(6, 3))
    C = fastkds.sparse_encode(W.copy(), W, lam=1.0, n_iter=300, encoder="apg")
    np.testing.assert_allclose(C.toarray(), np.eye(6), atol=1e-6)


@pytest.mark.parametrize("m, d", [(200, 784), (300, 20), (256, 2)])
def test_the_step_from_lanczos_is_the_spectral_norms(m, d):
    # from GRAM_LANCZOS_ATOMS atoms the step's eigenvalue comes from Lanczos:
    # checked against an SVD (the oracle's norm), low rank (d < m) included
    from fastkds._config import GRAM_LANCZOS_ATOMS

    assert m >= GRAM_LANCZOS_ATOMS
    W = np.random.default_rng(m).normal(size=(m, d)) + 3.0
    for step in ("centred", "paper"):
        prep = PreparedDictionary(W, 0.4, 30, np.float64, step, "apg")
        np.testing.assert_allclose(prep.alpha_value, _naive.step_size(W, step), rtol=1e-12)


def test_the_fits_step_is_the_prepared_dictionarys():
    # encoder_step (a fit's step_) is the float64 prepared dictionary's step,
    # bit for bit: past and below Lanczos's size, far from the origin, and
    # for coincident atoms, whose centred step comes from the floor
    from fastkds.prepared import encoder_step

    rng = np.random.default_rng(3)
    dictionaries = [
        rng.normal(size=(300, 20)) + 3.0,
        rng.normal(size=(12, 5)).astype(np.float32),
        rng.normal(size=(40, 3)) + 1e6,
        np.tile(rng.normal(size=(1, 4)), (8, 1)),
    ]
    for W in dictionaries:
        for step in ("centred", "paper"):
            assert encoder_step(W, step) == PreparedDictionary(W, 0.4, 1, np.float64, step).alpha_value
    coincident = dictionaries[-1]
    assert encoder_step(coincident, "centred") > encoder_step(coincident, "paper")  # the floor's, finite
    with pytest.raises(ValueError, match="step"):
        encoder_step(coincident, "centered")


def test_top_eigenvalue_where_lanczos_cannot_serve(monkeypatch):
    from fastkds import _config
    from fastkds.prepared import top_eigenvalue

    # a zero matrix (coincident atoms, centred) has no Krylov space: 0
    assert top_eigenvalue(np.zeros((250, 250))) == 0.0
    # two top eigenvalues 1e-15 apart: Lanczos that may not restart gives up,
    # and the whole spectrum answers
    monkeypatch.setattr(_config, "GRAM_LANCZOS_RESTARTS", 1)
    Q = np.linalg.qr(np.random.default_rng(0).normal(size=(250, 250)))[0]
    values = np.linspace(0.0, 1.0, 250) ** 8
    values[-2] = 1.0 - 1e-15
    G = (Q * values) @ Q.T
    np.testing.assert_allclose(top_eigenvalue(G), 1.0, rtol=1e-13)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prepared_matches_naive_and_alpha(dtype):
    """The precomputed step is 1 / sigma_max(W - mean atom)^2 (the paper's
    1 / sigma_max(W)^2 with step="paper") and the dense codes match the oracle."""
    Y, W = make_problem(5, 50, 4, 9, dtype)
    for step in ("centred", "paper"):
        prep = PreparedDictionary(W, 0.4, 30, dtype, step, "apg")
        centred = W - W.mean(axis=0) if step == "centred" else W
        np.testing.assert_allclose(prep.alpha_value, 1 / np.linalg.norm(centred, 2) ** 2, rtol=1e-12)
        np.testing.assert_allclose(prep.alpha_value, _naive.step_size(W, step), rtol=1e-12)
        X, obj = prep.encode_dense(Y)
        assert X.dtype == obj.dtype == np.dtype(dtype)
        ref = _naive.encode(Y, W.astype(dtype), 0.4, 30, step=step)
        np.testing.assert_allclose(X, ref, rtol=0, atol=TOL[dtype])


# --------------------------------------------------------------------------
# CSR assembly, chunking and threads
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [2, 40])
def test_chunked_equals_single_chunk(d, dtype):
    """Chunking changes nothing beyond the last bits of the BLAS product ``Y W^T``.

    (OpenBLAS rounds ``Y W^T`` differently for different row counts -- a one-row
    chunk goes through gemv -- so end-to-end equality is to rounding; the
    kernels' own chunk independence is checked bitwise below.)
    """
    Y, W = make_problem(3, 99, d, 11, dtype)  # 99 = 14 * 7 + 1: a one-row last chunk
    one = fastkds.sparse_encode(Y, W, lam=0.5, n_iter=40, chunk_size=1000, encoder="apg")
    assert_well_formed_csr(one, 99, 11, dtype)
    atol = 1e-13 if dtype == np.float64 else 2e-6
    for chunk in (1, 7, 50):
        many = fastkds.sparse_encode(Y, W, lam=0.5, n_iter=40, chunk_size=chunk, encoder="apg")
        assert_well_formed_csr(many, 99, 11, dtype)
        np.testing.assert_allclose(many.toarray(), one.toarray(), rtol=0, atol=atol)


def kernel_products(prep, Y):
    """``B = Y W^T`` and ``||y||^2`` as the kernels take them: of the points
    less ``prep.shift`` (the mean atom, with the centred step)."""
    Yk = Y - prep.shift if prep.shift is not None else Y
    return Yk @ prep.W.T, np.einsum("ij,ij->i", Yk, Yk)


def encode_rows(prep, B, yy, n_threads=2):
    """The encoder kernel on given products ``B = Y W^T``: dense codes, objectives."""
    from fastkds import _kernels

    n, m = B.shape
    counts = np.empty(n, dtype=np.int64)
    slot_idx = np.empty((n, m), dtype=np.int32)
    slot_val = np.empty((n, m), dtype=B.dtype)
    obj = np.empty(n, dtype=B.dtype)
    _kernels.encode_codes(
        np.ascontiguousarray(B),
        np.ascontiguousarray(yy),
        prep.G,
        prep.G_padded,
        prep.W,
        prep.ww,
        prep.alpha,
        prep.lam,
        prep.beta,
        prep.ks,
        counts,
        slot_idx,
        slot_val,
        obj,
        n_threads,
    )
    X = np.empty((n, m), dtype=B.dtype)
    _kernels.slots_to_dense(counts, slot_idx, slot_val, X)
    return X, obj


# (d, m): the lockstep encoder (d <= 4) with two features (its fused loops),
# with three, with one feature and many atoms; then the per-point encoder
KERNEL_PATHS = [(2, 11), (3, 11), (1, 70), (12, 11)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d,m", KERNEL_PATHS)
def test_kernel_chunks_bitwise_identical(d, m, dtype):
    """Given the same ``B = Y W^T``, encoding in chunks of 7 rows is bitwise
    identical to one chunk, and the CSR triples concatenate to the same array."""
    from fastkds.prepared import concatenate_csr
    from fastkds.sources import iter_chunks

    Y, W = make_problem(3, 103, d, m, dtype)
    prep = PreparedDictionary(W, 0.5, 40, dtype, encoder="apg")
    B, yy = kernel_products(prep, Y)
    X_all, obj_all = encode_rows(prep, B, yy)
    # the kernel on its own takes one step for every point and atom
    X_naive = _naive.encode(Y, W.astype(dtype), 0.5, 40, alpha=prep.alpha_value)
    np.testing.assert_allclose(X_all, X_naive, rtol=0, atol=TOL[dtype])
    parts, objs = [], []
    for lo, hi in iter_chunks(103, 7):
        X, obj = encode_rows(prep, B[lo:hi], yy[lo:hi])
        parts.append(csr_from_dense(X))
        objs.append(obj)
    C = concatenate_csr(parts, m, np.dtype(dtype))
    ref = sp.csr_array(csr_from_dense(X_all)[::-1], shape=(103, m))
    assert C.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(C.indptr, ref.indptr)
    np.testing.assert_array_equal(C.indices, ref.indices)
    assert C.data.tobytes() == ref.data.tobytes()
    assert np.concatenate(objs).tobytes() == obj_all.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d,m", KERNEL_PATHS[:3])
def test_lockstep_code_independent_of_neighbours(d, m, dtype):
    """The lockstep encoder groups points (sorted by nearest atom in blocks):
    a point's code and objective must be bitwise the same whatever the other
    points are. Shuffled, alone, other block sizes, short last groups."""
    n = 6037  # several sort blocks at n_threads=2 (and 7), short last groups
    Y, W = make_problem(11, n, d, m, dtype)
    prep = PreparedDictionary(W, 1.5, 25, dtype, encoder="apg")
    B, yy = kernel_products(prep, Y)
    X, obj = encode_rows(prep, B, yy)
    perm = np.random.default_rng(0).permutation(n)
    Xp, objp = encode_rows(prep, B[perm], yy[perm])
    assert Xp.tobytes() == X[perm].tobytes()
    assert objp.tobytes() == obj[perm].tobytes()
    X1, obj1 = encode_rows(prep, B[5:6], yy[5:6])  # alone in its group
    assert X1.tobytes() == X[5:6].tobytes() and obj1.tobytes() == obj[5:6].tobytes()
    Xt, objt = encode_rows(prep, B, yy, n_threads=7)  # split into finer sort blocks
    assert Xt.tobytes() == X.tobytes() and objt.tobytes() == obj.tobytes()
    X1, obj1 = encode_rows(prep, B[1000 : 1000 + 5000], yy[1000 : 1000 + 5000], n_threads=1)
    assert X1.tobytes() == X[1000:6000].tobytes() and obj1.tobytes() == obj[1000:6000].tobytes()
    sample = np.random.default_rng(1).choice(n, 300, replace=False)
    np.testing.assert_allclose(X[sample], _naive.encode(Y[sample], W.astype(dtype), 1.5, 25), rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_features", [3, 40])  # the lockstep and the per-point kernels
def test_n_jobs_bitwise_identical(dtype, n_features):
    # more than two blocks of 256 points so that both threads get work; on 3
    # threads the per-point kernel's blocks are a different size again
    Y, W = make_problem(4, 700, n_features, 10, dtype)
    a = fastkds.sparse_encode(Y, W, lam=1.0, n_iter=25, n_jobs=1, encoder="apg")
    for n_jobs in (2, 3):
        b = fastkds.sparse_encode(Y, W, lam=1.0, n_iter=25, n_jobs=n_jobs, encoder="apg")
        np.testing.assert_array_equal(a.indptr, b.indptr)
        np.testing.assert_array_equal(a.indices, b.indices)
        assert a.data.dtype == b.data.dtype == np.dtype(dtype)
        assert a.data.tobytes() == b.data.tobytes()


@njit(parallel=True)
def _claimed_by(n_blocks, n_threads):
    """Which worker claimed each block, and how many times each block was
    claimed, by the claim loop the parallel kernels run."""
    worker_of = np.full(n_blocks, -1)
    times = np.zeros(n_blocks, dtype=np.int64)
    counter = _kernels.block_counter()
    for w in prange(n_threads):
        blk = _kernels.claim_block(counter)
        while blk < n_blocks:
            worker_of[blk] = w
            times[blk] += 1
            blk = _kernels.claim_block(counter)
    return worker_of, times


@pytest.mark.parametrize("n_threads", [1, 2, 3, 8])
def test_claimed_blocks_are_every_block_once(n_threads):
    """Every block goes to exactly one worker, whatever the thread count
    (workers past the threads Numba runs take their turn after the others)."""
    for n_blocks in [0, 1, 2, 7, 20, 64, 1000]:
        worker_of, times = _claimed_by(n_blocks, n_threads)
        np.testing.assert_array_equal(times, np.ones(n_blocks, dtype=np.int64))
        assert np.all((worker_of >= 0) & (worker_of < n_threads))


def test_csr_from_dense_roundtrip():
    rng = np.random.default_rng(8)
    X = rng.random((40, 9))
    X[X < 0.6] = 0.0
    X[5] = 0.0  # an empty row
    for dtype in DTYPES:
        Xd = X.astype(dtype)
        indptr, indices, data = csr_from_dense(Xd)
        assert data.dtype == np.dtype(dtype)
        C = sp.csr_array((data, indices, indptr), shape=Xd.shape)
        np.testing.assert_array_equal(C.toarray(), Xd)
        assert np.all(data != 0)
        assert indptr[6] == indptr[5]
        for i in range(40):
            assert np.all(np.diff(indices[indptr[i] : indptr[i + 1]]) > 0)


# --------------------------------------------------------------------------
# objective, inputs, validation
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lam", [0.0, 0.3, 4.0])
def test_objective_matches_naive(lam, dtype):
    Y, W = make_problem(6, 80, 5, 13, dtype)
    prep = PreparedDictionary(W, lam, 50, dtype, encoder="apg")
    X, obj = prep.encode_dense(Y)
    X64 = X.astype(np.float64)
    ref = _naive.objective(Y.astype(np.float64), W.astype(dtype).astype(np.float64), X64, lam)
    assert obj.shape == (80,)
    rtol = 1e-8 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(obj, ref, rtol=rtol, atol=rtol)


def test_objective_decreases_with_iterations():
    """More encoder iterations do not make the mean objective worse (convex problem)."""
    Y, W = make_problem(12, 60, 3, 10)
    means = []
    for T in (5, 50, 500):
        X, obj = PreparedDictionary(W, 0.5, T, np.float64, encoder="apg").encode_dense(Y)
        means.append(obj.mean())
    assert means[2] <= means[1] + 1e-12 <= means[0] + 2e-12
    assert means[2] < means[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_inputs_not_modified(dtype):
    Y, W = make_problem(7, 60, 3, 6, dtype)
    W = W.astype(dtype)
    Y0, W0 = Y.copy(), W.copy()
    fastkds.sparse_encode(Y, W, lam=0.5, n_iter=20, chunk_size=7, encoder="apg")
    np.testing.assert_array_equal(Y, Y0)
    np.testing.assert_array_equal(W, W0)
    prep = PreparedDictionary(W, 0.5, 20, dtype, encoder="apg")
    prep.encode_dense(np.ascontiguousarray(Y))
    np.testing.assert_array_equal(Y, Y0)
    np.testing.assert_array_equal(W, W0)


def test_dtype_follows_data():
    Y, W = make_problem(9, 20, 2, 4)
    assert fastkds.sparse_encode(Y.astype(np.float32), W, n_iter=5, encoder="apg").dtype == np.float32
    assert fastkds.sparse_encode(Y, W.astype(np.float32), n_iter=5, encoder="apg").dtype == np.float64
    assert fastkds.sparse_encode(np.round(Y * 3).astype(int), W, n_iter=5, encoder="apg").dtype == np.float64


def test_validation_errors():
    Y, W = make_problem(10, 10, 3, 4)
    with pytest.raises(ValueError):
        fastkds.sparse_encode(Y, W[:, :2])
    with pytest.raises(ValueError):
        fastkds.sparse_encode(Y, W, lam=-1.0)
    with pytest.raises(ValueError):
        fastkds.sparse_encode(Y, W, n_iter=0, encoder="apg")
    with pytest.raises(ValueError):
        fastkds.sparse_encode(Y, W, chunk_size=0)
    Ybad = Y.copy()
    Ybad[0, 0] = np.nan
    with pytest.raises(ValueError):
        fastkds.sparse_encode(Ybad, W)


# --------------------------------------------------------------------------
# SPEC section 9: float32 projections inside the encoder must terminate
# --------------------------------------------------------------------------


def test_float32_encoder_terminates_on_adversarial_problems():
    """Duplicate atoms, points on atoms and ties: many near-equal entries in every
    projection. The capped Michelot loop must return, with rows on the simplex."""
    rng = np.random.default_rng(13)
    base = rng.normal(size=(4, 2))
    W = np.vstack([base, base, base + 1e-7, np.zeros((3, 2))])  # duplicates and ties
    Y = np.vstack(
        [
            W,
            (W[:4] + W[4:8]) / 2,
            np.zeros((5, 2)),
            rng.normal(size=(40, 2)) * 1e-3,
            rng.normal(size=(40, 2)),
        ]
    ).astype(np.float32)
    for lam in (0.0, 1e-6, 1.0):
        C = fastkds.sparse_encode(Y, W, lam=lam, n_iter=200, encoder="apg")
        assert_well_formed_csr(C, Y.shape[0], W.shape[0], np.float32)
        ref = fastkds.sparse_encode(Y.astype(np.float64), W, lam=lam, n_iter=200, encoder="apg")
        obj32 = _naive.objective(Y.astype(np.float64), W, C.toarray().astype(np.float64), lam)
        obj64 = _naive.objective(Y.astype(np.float64), W, ref.toarray(), lam)
        # same problem, same quality of solution up to float32 rounding
        np.testing.assert_allclose(obj32, obj64, rtol=1e-3, atol=1e-5)


# Far from the dictionary, the first projected step has entries of order
# alpha * lam * ||y - w||^2, whose float spacing exceeds 1: Michelot's
# candidate set {v_j > max(v) - 1} is then empty and the kernel divides by a
# zero count (ZeroDivisionError, surfacing as SystemError). In float32 this
# happens for points only ~1e4 away from a unit-scale dictionary.
@pytest.mark.parametrize("dtype,far", [(np.float32, 1e4), (np.float64, 1e9)])
def test_far_point_is_coded_by_nearest_atom(dtype, far):
    rng = np.random.default_rng(0)
    W = rng.normal(size=(5, 2))
    Y = np.array([[far, far]], dtype=dtype)
    C = fastkds.sparse_encode(Y, W, lam=1.0, n_iter=10, encoder="apg")
    nearest = np.argmin(((W - Y.astype(np.float64)) ** 2).sum(axis=1))
    x = C.toarray()[0]
    assert x[nearest] == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("dtype,far", [(np.float32, 1e2), (np.float64, 1e6)])
def test_moderately_far_point_is_coded_by_nearest_atom(dtype, far):
    """The same check where the float spacing is still fine: it passes today."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(5, 2))
    Y = np.array([[far, far]], dtype=dtype)
    C = fastkds.sparse_encode(Y, W, lam=1.0, n_iter=10, encoder="apg")
    nearest = np.argmin(((W - Y.astype(np.float64)) ** 2).sum(axis=1))
    x = C.toarray()[0]
    assert x[nearest] == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lockstep_and_per_point_encoders_agree(dtype, monkeypatch):
    """The same data through both CPU encoders (the lockstep one is chosen up
    to LOCKSTEP_MAX_FEATURES features): same supports, values to rounding."""
    from fastkds import _kernels

    Y, W = make_problem(13, 3000, 2, 24, dtype)
    lockstep = fastkds.sparse_encode(Y, W, lam=5.0, n_iter=15, encoder="apg")
    monkeypatch.setattr(_kernels, "LOCKSTEP_MAX_FEATURES", 0)
    per_point = fastkds.sparse_encode(Y, W, lam=5.0, n_iter=15, encoder="apg")
    np.testing.assert_array_equal(lockstep.indptr, per_point.indptr)
    np.testing.assert_array_equal(lockstep.indices, per_point.indices)
    np.testing.assert_allclose(lockstep.data, per_point.data, rtol=0, atol=TOL[dtype])


# --------------------------------------------------------------------------
# the exact encoder: active set (SPEC 3b)
# --------------------------------------------------------------------------

# (d, m, lam): few and many features, small and large lam, lam = 0 (the
# projection onto the atoms' hull), more atoms than features + 1
ACTIVE_SET_CASES = [(2, 24, 5.0), (3, 30, 0.0), (5, 20, 0.5), (50, 100, 0.1), (784, 50, 1.0), (10, 120, 0.2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d,m,lam", ACTIVE_SET_CASES)
def test_active_set_codes_are_optimal(d, m, lam, dtype):
    """The active-set codes meet the KKT conditions for all m atoms to the
    dtype's rounding, are well-formed CSR on the simplex, carry the objective
    of their codes, and are no worse than 5000 accelerated steps of the NumPy
    oracle (which they match wherever the optimum is unique, lam > 0)."""
    Y, W = make_problem(d * 100 + m, 150, d, m, dtype)
    W = W.astype(dtype)  # as sparse_encode takes it
    prep = PreparedDictionary(W, lam, 30, dtype, encoder="active-set")
    X, obj = prep.encode_dense(Y)
    C = fastkds.sparse_encode(Y, W, lam=lam, encoder="active-set")
    assert_well_formed_csr(C, 150, m, dtype)
    assert prep.n_fallbacks == 0
    X64 = X.astype(np.float64)
    W64 = W.astype(np.float64)
    Y64 = Y.astype(np.float64)
    eps = np.finfo(dtype).eps
    # the same optimum (BLAS rounds Y W^T its own way, and with many atoms in
    # few dimensions the objective is flat enough that the codes may differ)
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(
        _naive.objective(Y64, W64, C.toarray().astype(np.float64), lam),
        _naive.objective(Y64, W64, X64, lam),
        rtol=rtol,
    )
    assert _naive.kkt_residual(Y64, W64, X64, lam).max() < 1e3 * eps
    f = _naive.objective(Y64, W64, X64, lam)
    np.testing.assert_allclose(obj, f, rtol=rtol, atol=rtol)
    many = _naive.encode(Y64, W64, lam, 5000)
    scale = (Y64**2).sum(axis=1) + (W64**2).sum(axis=1).max()
    assert np.all(f <= _naive.objective(Y64, W64, many, lam) + 1e3 * eps * scale)
    if lam >= 0.5 and dtype == np.float64:  # well-conditioned enough for the oracle to get there
        np.testing.assert_allclose(X64, many, rtol=0, atol=1e-4)


def test_active_set_float32_with_a_far_atom_is_optimal():
    """A far atom does not widen the KKT tolerance of the atoms near a
    point: float32 codes of moons with one atom at (100, 100) are the
    float64 ones to float32's rounding (a tolerance scaled by the largest
    atom once accepted supports 46% above the optimal objective)."""
    Y, _ = fastkds.make_moons(400, random_state=0)
    # the atoms the accelerated encoder trains (those of the case found)
    W = np.vstack([fastkds.KDS(20, encoder="apg", random_state=0).fit(Y).components_, [[100.0, 100.0]]])
    exact = fastkds.sparse_encode(Y, W, encoder="active-set").toarray()
    single = fastkds.sparse_encode(Y.astype(np.float32), W.astype(np.float32), encoder="active-set").toarray()
    f, f32 = _naive.objective(Y, W, exact, 1.0), _naive.objective(Y, W, single.astype(np.float64), 1.0)
    assert np.all(f32 <= f * (1 + 1e-3))
    assert _naive.kkt_residual(Y, W, single.astype(np.float64), 1.0).max() < 1e-6


def test_active_set_same_for_any_threads_and_chunks():
    """Each point's code is its own: bitwise the same on 1 or 2 threads and
    for any chunking (the products Y W^T aside, compared on one chunk size)."""
    Y, W = make_problem(31, 700, 20, 60)
    a = fastkds.sparse_encode(Y, W, lam=0.3, encoder="active-set", n_jobs=1)
    b = fastkds.sparse_encode(Y, W, lam=0.3, encoder="active-set", n_jobs=2)
    assert a.data.tobytes() == b.data.tobytes() and np.array_equal(a.indices, b.indices)
    c = fastkds.sparse_encode(Y, W, lam=0.3, encoder="active-set", chunk_size=64)
    np.testing.assert_allclose(c.toarray(), a.toarray(), rtol=0, atol=1e-12)


def test_active_set_hands_dependent_atoms_to_the_accelerated_encoder():
    """Atoms that repeat (affinely dependent supports) cannot be factorised:
    those points go to the accelerated encoder, counted in n_fallbacks, and
    their codes are still on the simplex and as good as the oracle's."""
    rng = np.random.default_rng(5)
    base = rng.normal(size=(4, 3))
    W = np.r_[base, base[:2]]  # atoms 4 and 5 repeat atoms 0 and 1
    Y = rng.normal(size=(200, 3)) * 0.5
    prep = PreparedDictionary(W, 0.0, 400, np.float64, encoder="active-set")
    X, _ = prep.encode_dense(Y)
    np.testing.assert_allclose(X.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(X >= 0)
    f = _naive.objective(Y, W, X, 0.0)
    ref = _naive.objective(Y, W, _naive.encode(Y, W, 0.0, 400), 0.0)
    assert np.all(f <= ref + 1e-8)


def test_active_set_crowded_atoms_few_dimensions():
    """300 atoms in 10 dimensions at a small lam: the supports grow towards
    d + 1 atoms, and the rare point whose next atom is affinely dependent on
    its support goes to the accelerated encoder (counted); every code is on
    the simplex and as good as 5000 steps of the oracle."""
    Y, W = make_problem(7, 150, 10, 300)
    prep = PreparedDictionary(W, 0.05, 3000, np.float64, encoder="active-set")
    X, _ = prep.encode_dense(Y)
    assert prep.n_fallbacks <= 5
    np.testing.assert_allclose(X.sum(axis=1), 1.0, atol=1e-12)
    f = _naive.objective(Y, W, X, 0.05)
    ref = _naive.objective(Y, W, _naive.encode(Y, W, 0.05, 5000), 0.05)
    np.testing.assert_array_less(f, ref + 1e-6 * ref)


def test_active_set_single_atom_and_points_at_atoms():
    """One atom: every code is that atom. A point on an atom (lam > 0): that atom alone."""
    Y, W = make_problem(8, 30, 4, 1)
    np.testing.assert_array_equal(fastkds.sparse_encode(Y, W, encoder="active-set").toarray(), 1.0)
    W = np.random.default_rng(2).normal(size=(6, 3))
    C = fastkds.sparse_encode(W.copy(), W, lam=1.0, encoder="active-set")
    np.testing.assert_allclose(C.toarray(), np.eye(6), atol=1e-12)


def test_auto_encoder_is_exact_on_the_cpu_up_to_lam_1():
    """encoder="auto" (the default): the exact codes on the CPU at lam <= 1,
    optimal by the NumPy oracle's KKT conditions; the accelerated steps past
    it and on the GPU, and for the clusterers below 60 points an atom; an
    encoder named stays as named."""
    from fastkds._backends import resolve_encoder

    assert resolve_encoder("auto", "cpu", 1.0) == "active-set"
    assert resolve_encoder("auto", "cpu", 1.5) == "apg"
    assert resolve_encoder("auto", "cuda", 0.5) == "apg"
    assert resolve_encoder("apg", "cpu", 0.5) == "apg"
    assert resolve_encoder("active-set", "cpu", 5.0) == "active-set"
    Y, W = make_problem(5, 300, 6, 12)
    for lam, named in ((0.5, "active-set"), (1.0, "active-set"), (3.0, "apg")):
        C = fastkds.sparse_encode(Y, W, lam=lam, n_iter=20).toarray()
        np.testing.assert_array_equal(C, fastkds.sparse_encode(Y, W, lam=lam, n_iter=20, encoder=named).toarray())
    model = fastkds.KDSClustering(2, n_atoms=5, random_state=0).fit(Y)  # 60 points an atom
    assert model.kds_._encoding_params()["encoder"] == "active-set"
    codes = model.kds_.transform(Y).toarray()
    assert _naive.kkt_residual(Y, model.components_, codes, 1.0).max() < 1e-10
    # fewer points an atom: the clusterers keep the accelerated encoder's longer codes
    model = fastkds.KDSClustering(2, n_atoms=6, random_state=0).fit(Y)
    assert model.kds_.encoder == "apg"
    # an ensemble's code graph has every dictionary's atoms: 2 x 3 here
    ensemble = fastkds.KDSEnsembleClustering(2, estimator=fastkds.KDS(3), n_estimators=2, random_state=0).fit(Y)
    assert all(kds.encoder == "apg" for kds in ensemble.estimators_)
    ensemble = fastkds.KDSEnsembleClustering(2, estimator=fastkds.KDS(2), n_estimators=2, random_state=0).fit(Y)
    assert all(kds.encoder == "auto" for kds in ensemble.estimators_)
    assert fastkds.KDS(6).fit(Y)._encoding_params()["encoder"] == "active-set"  # no graph: the optimum


def test_encoder_validated():
    Y, W = make_problem(10, 10, 3, 4)
    with pytest.raises(ValueError, match="encoder must be one of"):
        fastkds.sparse_encode(Y, W, encoder="exact")
    with pytest.raises(ValueError, match="encoder must be one of"):
        fastkds.KDS(4, encoder=None).fit(Y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", ["point_products", "blas_products"])
def test_products_match_numpy_and_not_the_thread_count(dtype, kernel):
    """Y W^T and the squared norms the encoder starts from, against NumPy;
    the same bits on one thread and on two (blocks of rows are fixed, not
    one per thread), and the largest |product| and norm for the overflow
    check, inf when some entry is not finite."""
    from fastkds import _kernels
    from fastkds._config import numba_threads

    rng = np.random.default_rng(0)
    d = 5 if kernel == "point_products" else 40
    Y = rng.normal(size=(700, d)).astype(dtype)  # past one block of rows
    W = rng.normal(size=(30, d)).astype(dtype)
    run = getattr(_kernels, kernel)
    # blas_products: no shift (an empty one), and its blocks' deal
    lead, Wk = ((), W) if kernel == "point_products" else ((np.empty(0, dtype),), W.T)
    out = {}
    for threads in (1, 2):
        B = np.empty((700, 30), dtype)
        yy = np.empty(700, dtype)
        with numba_threads(threads):
            extra = (threads,) if kernel == "blas_products" else ()
            maxima = run(read_only(Y), *lead, Wk, B, yy, *extra)  # read-only, as fastkds passes it
        out[threads] = B, yy, maxima
    B, yy, (b_max, y_max) = out[1]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(B, Y.astype(np.float64) @ W.T.astype(np.float64), rtol=rtol, atol=rtol * d)
    np.testing.assert_allclose(yy, (Y.astype(np.float64) ** 2).sum(axis=1), rtol=rtol)
    assert b_max == pytest.approx(np.abs(B).max(), rel=rtol) and y_max == pytest.approx(yy.max(), rel=rtol)
    assert np.array_equal(out[2][0], B) and np.array_equal(out[2][1], yy) and out[2][2] == out[1][2]
    Y[300, 1] = np.nan
    assert run(read_only(Y), *lead, Wk, np.empty((700, 30), dtype), np.empty(700, dtype), *extra)[0] == np.inf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_of_centred_blocks_are_those_of_the_centred_copy(dtype):
    """blas_products with a shift centres each block in scratch: the same
    products, norms and maxima, bit for bit, as centre_rows's copy of the
    chunk then the products, on one thread and on two."""
    from fastkds import _kernels
    from fastkds._config import numba_threads

    rng = np.random.default_rng(1)
    Y = (rng.normal(size=(700, 40)) + 50.0).astype(dtype)
    W = rng.normal(size=(30, 40)).astype(dtype)
    shift = (Y[:30].mean(axis=0)).astype(dtype)
    found = []
    for threads in (1, 2):
        with numba_threads(threads):
            Yc = np.empty_like(Y)
            _kernels.centre_rows(read_only(Y), shift, Yc)
            for rows, by in ((read_only(Yc), np.empty(0, dtype)), (read_only(Y), shift)):
                B, yy = np.empty((700, 30), dtype), np.empty(700, dtype)
                maxima = _kernels.blas_products(rows, by, W.T, B, yy, threads)
                found.append((B, yy, maxima))
    for B, yy, maxima in found[1:]:
        assert np.array_equal(B, found[0][0]) and np.array_equal(yy, found[0][1]) and maxima == found[0][2]

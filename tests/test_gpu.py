"""Tests of the optional CUDA path :mod:`fastkds.gpu` against the CPU kernels.

They run on a real GPU, or on the CPU under numba's CUDA simulator::

    NUMBA_ENABLE_CUDASIM=1 taskset -c 0 python -m pytest tests/test_gpu.py -q

and skip otherwise. The simulator runs each CUDA thread as a Python thread,
so the problems are tiny (n <= 64 points, m <= 8 atoms, T <= 10; the warp
encoder runs 32 Python threads per point, so its problems are smaller still);
the same tests run unchanged on a GPU. Pinned to one core (``taskset``) they
run several times faster: the simulated threads contend for Python's lock.
"""

import itertools
import os

import numpy as np
import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    from numba import cuda

    if not cuda.is_available():
        pytest.skip(
            "no CUDA GPU (numba.cuda.is_available() is False) and NUMBA_ENABLE_CUDASIM=1 not set",
            allow_module_level=True,
        )

import fastkds  # noqa: E402
from fastkds import _config, _naive, gpu  # noqa: E402
from fastkds.prepared import PreparedDictionary, concatenate_csr, csr_from_dense  # noqa: E402
from fastkds._backends import run_epoch  # noqa: E402
from fastkds.solvers import SufficientStatistics  # noqa: E402

DTYPES = [np.float64, np.float32]
TOL = {np.float64: 1e-10, np.float32: 1e-4}
KERNELS = ["thread", "warp"]
#: Points per encoder test: the simulator runs a warp as 32 Python threads.
N_POINTS = {"thread": 48, "warp": 8}


def make_problem(seed, n, d, m, dtype=np.float64):
    """Data near a random dictionary, on the scale of the atoms."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(m, d))
    Y = rng.normal(size=(n, d)) * 1.2 + 0.3
    return Y.astype(dtype), W


def sparse_codes(rng, n, m, max_support=3, dtype=np.float64):
    """Random rows on the simplex with 1..max_support nonzeros."""
    X = np.zeros((n, m))
    for i in range(n):
        k = int(rng.integers(1, min(max_support, m) + 1))
        idx = rng.choice(m, size=k, replace=False)
        X[i, idx] = rng.dirichlet(np.ones(k))
    return X.astype(dtype)


def assert_same_structure(A, B):
    np.testing.assert_array_equal(np.asarray(A.indptr), np.asarray(B.indptr))
    np.testing.assert_array_equal(np.asarray(A.indices), np.asarray(B.indices))


# --------------------------------------------------------------------------
# encoder
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d,m,lam,T", [(2, 6, 1.0, 10), (3, 8, 0.1, 7), (2, 5, 0.0, 10), (3, 40, 0.5, 6)])
def test_encode_dense_matches_cpu_and_oracle(d, m, lam, T, dtype, kernel):
    """Both encoders; m = 40 gives the warp encoder 2 atoms per lane."""
    n = N_POINTS[kernel] if m <= 8 else 6
    Y, W = make_problem(100 * d + 10 * m + T, n, d, m, dtype)
    prepared = gpu.CudaPreparedDictionary(W, lam, T, dtype, kernel=kernel)
    cpu = PreparedDictionary(W, lam, T, dtype)
    assert prepared.alpha_value == cpu.alpha_value
    assert prepared.n_atoms == m and prepared.dtype == np.dtype(dtype) and prepared.kernel == kernel
    X, obj = prepared.encode_dense(Y)
    assert X.dtype == np.dtype(dtype) and obj.dtype == np.dtype(dtype)
    assert X.shape == (n, m) and obj.shape == (n,)
    ref_cpu = fastkds.sparse_encode(Y, W, lam=lam, encoder="apg", n_iter=T).toarray()
    ref_naive = _naive.encode(Y, W.astype(dtype), lam, T)
    np.testing.assert_allclose(X, ref_cpu, rtol=0, atol=TOL[dtype])
    np.testing.assert_allclose(X, ref_naive, rtol=0, atol=TOL[dtype])
    assert np.all(X >= 0)
    np.testing.assert_allclose(X.sum(axis=1, dtype=np.float64), 1.0, rtol=0, atol=10 * TOL[dtype])
    f = _naive.objective(Y.astype(np.float64), W, X.astype(np.float64), lam)
    np.testing.assert_allclose(obj, f, rtol=10 * TOL[dtype], atol=10 * TOL[dtype])


@pytest.mark.parametrize(
    "dtype,kernel,products",
    [
        (np.float64, "thread", None),
        (np.float32, "thread", None),
        (np.float32, "warp", False),
        (np.float32, "warp", True),
    ],
)
def test_far_atoms_split_matches_cpu(dtype, kernel, products):
    """With far atoms (fastkds.prepared.far_atoms) the device encodes each
    chunk on every atom and on the near ones, and keeps for each point the
    codes the CPU keeps (fastkds.prepared.PreparedDictionary.may_use_far);
    with ``products``, each of the two encoders on its own chunk of B."""
    rng = np.random.default_rng(7)
    n = 16 if kernel == "thread" else 4  # the two far points among them
    far = np.array([[40.0, 5.0], [-30.0, 45.0]])
    Y = np.vstack([rng.normal(size=(n - 2, 2)), far + 0.05]).astype(dtype)
    W = np.vstack([rng.normal(size=(10, 2)), far])
    cpu = PreparedDictionary(W, 1.0, 10, dtype)
    assert cpu.near is not None and list(cpu.near.far) == [10, 11]
    prepared = gpu.CudaPreparedDictionary(W, 1.0, 10, dtype, kernel=kernel, products=products)
    assert prepared.near is not None and prepared.near.alpha_value == cpu.near.alpha_value
    assert prepared.products is prepared.near.products is bool(products)
    X_cpu, obj_cpu = cpu.encode_dense(Y)
    # the split matters here: one step for every point gives other codes
    X_one = _naive.encode(Y, W, 1.0, 10, alpha=cpu.alpha_value)
    assert np.abs(X_one - X_cpu).max() > 1e-2
    C, obj = gpu.encode_csr_cuda(Y, prepared, 3, return_objective=True)  # in chunks
    np.testing.assert_allclose(C.toarray(), X_cpu, rtol=0, atol=TOL[dtype])
    np.testing.assert_allclose(obj, obj_cpu, rtol=10 * TOL[dtype], atol=10 * TOL[dtype])


def test_far_atoms_on_buffers_of_another_dictionary():
    """A fit reuses one buffer set for every epoch's dictionary, and only
    some have far atoms (MNIST-5's later epochs did, and the near atoms'
    encoder found no buffers): buffers allocated for a dictionary without
    far atoms, or with another count of them, serve one with them."""
    rng = np.random.default_rng(7)
    far = np.array([[40.0, 5.0], [-30.0, 45.0]])
    Y = np.vstack([rng.normal(size=(4, 2)), far + 0.05])
    W_plain = rng.normal(size=(12, 2))
    W_far = np.vstack([W_plain[:10], far])
    W_one_far = np.vstack([W_plain[:11], far[:1]])
    plain = gpu.CudaPreparedDictionary(W_plain, 1.0, 10, np.float64, kernel="thread")
    assert plain.near is None
    buffers = plain.allocate(3)
    for W in (W_far, W_one_far):
        prepared = gpu.CudaPreparedDictionary(W, 1.0, 10, np.float64, kernel="thread")
        cpu = PreparedDictionary(W, 1.0, 10, np.float64)
        assert prepared.near is not None
        X_cpu, obj_cpu = cpu.encode_dense(Y)
        stats = SufficientStatistics(W.shape[0], 2)
        gpu.run_epoch_cuda(Y, prepared, 3, stats, buffers)
        C, obj = gpu.encode_csr_cuda(Y, prepared, 3, return_objective=True, buffers=buffers)
        np.testing.assert_allclose(C.toarray(), X_cpu, rtol=0, atol=TOL[np.float64])
        np.testing.assert_allclose(stats.XtX, X_cpu.T @ X_cpu, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_codes_do_not_depend_on_launch_configuration(dtype):
    """Fewer threads than points (grid-stride loop, threads beyond the
    scratch slots) give the very same codes: each point has one thread."""
    Y, W = make_problem(7, 40, 2, 6, dtype)
    ref = gpu.CudaPreparedDictionary(W, 2.0, 9, dtype, kernel="thread")
    X0, obj0 = (a.copy() for a in ref.encode_dense(Y))
    for tpb, slots in [(32, 5), (64, 17), (32, 40)]:
        prepared = gpu.CudaPreparedDictionary(W, 2.0, 9, dtype, kernel="thread", threads_per_block=tpb)
        X, obj = prepared.encode_dense(Y, prepared.allocate(40, n_slots=slots))
        np.testing.assert_array_equal(X, X0)
        np.testing.assert_array_equal(obj, obj0)


@pytest.mark.parametrize("dtype", [np.float64])  # float32: same launches, see the test above
def test_warp_codes_do_not_depend_on_launch_configuration(dtype):
    """Fewer warps than points (each warp then encodes several), and several
    warps per block: the very same codes, and within tolerance of the thread
    encoder's."""
    Y, W = make_problem(8, 5, 2, 6, dtype)
    ref = gpu.CudaPreparedDictionary(W, 2.0, 6, dtype, kernel="warp")
    X0, obj0 = (a.copy() for a in ref.encode_dense(Y))
    for wpb, max_warps in [(1, 2), (3, 4), (2, None)]:
        prepared = gpu.CudaPreparedDictionary(W, 2.0, 6, dtype, kernel="warp", warps_per_block=wpb, max_warps=max_warps)
        X, obj = prepared.encode_dense(Y)
        np.testing.assert_array_equal(X, X0)
        np.testing.assert_array_equal(obj, obj0)
    Xt, _ = gpu.CudaPreparedDictionary(W, 2.0, 6, dtype, kernel="thread").encode_dense(Y)
    np.testing.assert_allclose(X0, Xt, rtol=0, atol=TOL[dtype])


def test_buffers_are_reused_across_chunks():
    Y, W = make_problem(3, 30, 2, 5)
    prepared = gpu.CudaPreparedDictionary(W, 1.0, 8, np.float64, kernel="thread")
    buffers = prepared.allocate(16)
    parts = [prepared.encode_dense(Y[a:b], buffers)[0].copy() for a, b in [(0, 16), (16, 30)]]
    ref = fastkds.sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=8).toarray()
    np.testing.assert_allclose(np.vstack(parts), ref, rtol=0, atol=TOL[np.float64])


@pytest.mark.parametrize("kernel", KERNELS)
def test_far_points_and_single_atom(kernel):
    """Huge locality weights (projection relative to max(v)) and m = 1."""
    Y, W = make_problem(11, 12 if kernel == "thread" else 6, 2, 5)
    Y[:4] *= 1e6
    prepared = gpu.CudaPreparedDictionary(W, 5.0, 10, np.float64, kernel=kernel)
    X, _ = prepared.encode_dense(Y)
    ref = fastkds.sparse_encode(Y, W, lam=5.0, encoder="apg", n_iter=10).toarray()
    np.testing.assert_allclose(X, ref, rtol=0, atol=TOL[np.float64])
    assert np.all(np.isfinite(X))
    one = gpu.CudaPreparedDictionary(W[:1], 1.0, 5, np.float32, kernel=kernel)
    X1, _ = one.encode_dense(Y[:3].astype(np.float32))
    np.testing.assert_array_equal(X1, np.ones((3, 1), dtype=np.float32))


def test_wrong_input_is_refused():
    Y, W = make_problem(1, 8, 2, 4)
    prepared = gpu.CudaPreparedDictionary(W, 1.0, 5, np.float64)
    with pytest.raises(ValueError, match="float64"):
        prepared.encode_dense(Y.astype(np.float32))
    with pytest.raises(ValueError, match="exceeds"):
        prepared.encode_dense(Y, prepared.allocate(4))
    with pytest.raises(ValueError, match="columns"):
        gpu.encode_csr_cuda(np.zeros((4, 3)), prepared, 4)
    with pytest.raises(ValueError, match="kernel must be one of"):
        gpu.CudaPreparedDictionary(W, 1.0, 5, np.float64, kernel="block")
    # beyond 64 atoms per lane: "auto" takes the thread encoder, "warp" refuses
    assert gpu._resolve_kernel("auto", gpu.WARP_MAX_ATOMS) == "warp"
    assert gpu._resolve_kernel("auto", gpu.WARP_MAX_ATOMS + 1) == "thread"
    with pytest.raises(ValueError, match="at most 2048 atoms"):
        gpu._resolve_kernel("warp", gpu.WARP_MAX_ATOMS + 1)


# --------------------------------------------------------------------------
# CSR assembly
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# the active-set encoder (exact codes, one point per warp)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d,m,lam", [(3, 8, 0.5), (5, 40, 0.1), (2, 6, 0.0)])
def test_active_set_matches_cpu_and_is_optimal(d, m, lam, dtype):
    """The device's exact codes meet the KKT conditions for all m atoms to
    the dtype's rounding and carry their objective; where the optimum is
    unique (lam > 0) they are the CPU active set's, support for support.
    m = 40 gives each lane two atoms."""
    n = 5
    Y, W = make_problem(7 * d + m, n, d, m, dtype)
    W = W.astype(dtype)  # the atoms both encoders see
    prepared = gpu.CudaPreparedDictionary(W, lam, 10, dtype, encoder="active-set")
    assert prepared.encoder == "active-set" and prepared.kernel == "warp" and prepared.near is None
    buffers = prepared.allocate(n)
    X, obj = prepared.encode_dense(Y, buffers)
    assert not buffers.d_handed.copy_to_host()[:n].any()  # none handed to the accelerated encoder
    X64, Y64, W64 = X.astype(np.float64), Y.astype(np.float64), W.astype(np.float64)
    eps = np.finfo(dtype).eps
    assert np.all(X >= 0)
    np.testing.assert_allclose(X64.sum(axis=1), 1.0, rtol=0, atol=10 * eps)
    assert _naive.kkt_residual(Y64, W64, X64, lam).max() < 1e3 * eps
    f = _naive.objective(Y64, W64, X64, lam)
    np.testing.assert_allclose(obj, f, rtol=10 * TOL[dtype], atol=10 * TOL[dtype])
    cpu = PreparedDictionary(W, lam, 10, dtype, encoder="active-set")
    X_cpu, obj_cpu = cpu.encode_dense(Y)
    np.testing.assert_allclose(obj, obj_cpu, rtol=10 * TOL[dtype], atol=10 * TOL[dtype])
    if lam > 0:
        np.testing.assert_array_equal(X > 0, X_cpu > 0)
        np.testing.assert_allclose(X, X_cpu, rtol=0, atol=TOL[dtype])


def test_active_set_hands_long_supports_to_the_accelerated_encoder(monkeypatch):
    """A point whose support would pass the lanes it may hold
    (ACTIVE_SET_MAX_SUPPORT, here made 2 so the simulator stays quick) goes
    to the accelerated encoder, whose codes it then gets bit for bit; the
    other points keep their exact codes."""
    from fastkds import _cuda_kernels

    monkeypatch.setattr(_cuda_kernels, "ACTIVE_SET_MAX_SUPPORT", 2)
    monkeypatch.setattr(_cuda_kernels, "_ACTIVE_SET_KERNELS", {})  # made again with the limit
    Y, W = make_problem(12, 6, 3, 8)
    cpu = PreparedDictionary(W, 0.1, 6, np.float64, encoder="active-set")
    X_cpu, _ = cpu.encode_dense(Y)
    long = (X_cpu > 0).sum(axis=1) > 2
    assert long.any() and not long.all()
    exact = gpu.CudaPreparedDictionary(W, 0.1, 6, np.float64, encoder="active-set")
    buffers = exact.allocate(6)
    X, obj = (a.copy() for a in exact.encode_dense(Y, buffers))
    np.testing.assert_array_equal(buffers.d_handed.copy_to_host()[:6], long)
    X_apg, obj_apg = gpu.CudaPreparedDictionary(W, 0.1, 6, np.float64, kernel="warp").encode_dense(Y)
    np.testing.assert_array_equal(X[long], X_apg[long])
    np.testing.assert_array_equal(obj[long], obj_apg[long])
    np.testing.assert_allclose(X[~long], X_cpu[~long], rtol=0, atol=TOL[np.float64])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("encoder", ["apg", "active-set"])
def test_warp_encoders_read_the_tiled_products_bit_for_bit(encoder, dtype):
    """The warp encoders on ``B = Y W^T`` formed first by the tiled product
    kernel give the very codes, objectives and support sizes of their
    variant that forms the products itself: the sums run in the same order.
    d = 37 takes three depth steps (the last one short), m = 70 two column
    tiles of the padded 96 atoms."""
    Y, W = make_problem(21, 5, 37, 70, dtype)
    results = []
    for products in (False, True):
        prepared = gpu.CudaPreparedDictionary(W, 0.3, 6, dtype, encoder=encoder, kernel="warp", products=products)
        assert prepared.products is products
        buffers = prepared.allocate(5)
        X, obj = (a.copy() for a in prepared.encode_dense(Y, buffers))
        results.append((X, obj, buffers.d_counts.copy_to_host()[:5]))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    assert (results[0][0] > 0).any(axis=1).all()


def test_products_kernel_matches_numpy(monkeypatch):
    """The tiled product against NumPy, with one block row of the grid, so
    that it loops over two row tiles (the second one short), and features
    and atoms that fill no tile exactly."""
    from fastkds import _cuda_kernels

    monkeypatch.setattr(gpu, "_GRID_Y_MAX", 1)
    rng = np.random.default_rng(5)
    n, d, m = 70, 37, 90
    Y = rng.normal(size=(n, d))
    prepared = gpu.CudaPreparedDictionary(rng.normal(size=(m, d)), 0.3, 6, np.float64, kernel="warp", products=True)
    buffers = prepared.allocate(n)
    buffers.d_Y[:n].copy_to_device(Y)
    d_B, d_yy = prepared._products_on_device(buffers, n)
    B = d_B.copy_to_host()
    assert B.shape == (n, 32 * prepared.R) and _cuda_kernels.PRODUCT_TILE < n
    np.testing.assert_allclose(B[:, :m], Y @ prepared.W.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(B[:, m:], 0.0)  # the padded atoms
    np.testing.assert_allclose(d_yy.copy_to_host(), (Y * Y).sum(axis=1), rtol=1e-12)


def test_products_default_follows_the_feature_count(monkeypatch):
    monkeypatch.setattr(_config, "CUDA_PRODUCTS_MIN_FEATURES", 4)
    W = np.eye(5)
    assert gpu.CudaPreparedDictionary(W[:, :4], 0.5, 5, np.float64, kernel="warp").products
    assert not gpu.CudaPreparedDictionary(W[:, :3], 0.5, 5, np.float64, kernel="warp").products


def test_active_set_settings_are_checked():
    W = np.eye(3)
    with pytest.raises(ValueError, match="encoder must be one of"):
        gpu.CudaPreparedDictionary(W, 0.5, 5, np.float64, encoder="exact")
    with pytest.raises(ValueError, match='encoder="active-set" runs on the warp kernel only'):
        gpu.CudaPreparedDictionary(W, 0.5, 5, np.float64, encoder="active-set", kernel="thread")


def test_sparse_encode_active_set_on_cuda_matches_cpu():
    """The public call takes the device's exact codes, in chunks."""
    Y, W = make_problem(4, 6, 3, 8)
    a = fastkds.sparse_encode(Y, W, lam=0.5, encoder="active-set", device="cuda", chunk_size=4)
    b = fastkds.sparse_encode(Y, W, lam=0.5, encoder="active-set", device="cpu")
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.data, b.data, atol=1e-10)


@pytest.mark.parametrize(
    "dtype,chunk_size,kernel",
    [(np.float64, 16, "thread"), (np.float32, 16, "thread"), (np.float64, 64, "thread"), (np.float32, 4, "warp")],
)
def test_encode_csr_matches_cpu(chunk_size, dtype, kernel):
    """CSR assembled on the device (prefix sum, fill) and written chunk by
    chunk into the final arrays equals the CPU's."""
    n, m = (50, 7) if kernel == "thread" else (10, 7)
    Y, W = make_problem(5, n, 3, m, dtype)
    prepared = gpu.CudaPreparedDictionary(W, 0.5, 10, dtype, kernel=kernel)
    C, obj = gpu.encode_csr_cuda(Y, prepared, chunk_size, return_objective=True)
    ref = fastkds.sparse_encode(Y, W, lam=0.5, encoder="apg", n_iter=10)
    assert C.shape == (n, m) and C.dtype == np.dtype(dtype)
    assert C.has_canonical_format
    assert np.all(C.data > 0)
    assert_same_structure(C, ref)
    assert C.indptr.dtype == C.indices.dtype == ref.indices.dtype == np.int32
    np.testing.assert_allclose(C.data, ref.data, rtol=0, atol=TOL[dtype])
    # the device assembly of the device's own dense codes equals the CPU's
    X, obj_dense = prepared.encode_dense(Y)
    ip, ix, dt = csr_from_dense(X)
    np.testing.assert_array_equal(C.indptr, ip)
    np.testing.assert_array_equal(C.indices, ix)
    np.testing.assert_array_equal(C.data, dt)
    np.testing.assert_array_equal(obj, obj_dense)


def test_encode_csr_regrows_the_final_arrays(monkeypatch):
    """The final arrays sized for exactly the entries so far: every chunk
    regrows them, and the result is still the device's dense codes in CSR."""
    monkeypatch.setattr(gpu, "_nnz_capacity", lambda need, *args: need)
    Y, W = make_problem(23, 41, 2, 6)
    prepared = gpu.CudaPreparedDictionary(W, 0.3, 8, np.float64, kernel="thread")
    C, obj = gpu.encode_csr_cuda(Y, prepared, 6, return_objective=True)
    X, obj_dense = prepared.encode_dense(Y)
    ip, ix, dt = csr_from_dense(X)
    assert C.indices.shape == (ip[-1],)
    np.testing.assert_array_equal(C.indptr, ip)
    np.testing.assert_array_equal(C.indices, ix)
    np.testing.assert_array_equal(C.data, dt)
    np.testing.assert_array_equal(obj, obj_dense)
    assert_same_structure(C, fastkds.sparse_encode(Y, W, lam=0.3, encoder="apg", n_iter=8))


@pytest.mark.parametrize(
    "n,threads,items", [(1, None, None), (31, None, None), (300, 32, 2), (300, 4, 1), (1000, 48, 3), (5000, None, None)]
)
def test_device_prefix_sum_matches_cumsum(n, threads, items, monkeypatch):
    """Tiles of threads * items rows; with few blocks per launch and small
    blocks, several tiles per block (block-stride loop) and several rounds
    of the tile-offset scan."""
    monkeypatch.setattr(_config, "CUDA_SCAN_THREADS", 32)
    monkeypatch.setattr(_config, "CUDA_MAX_BLOCKS", 8)
    counts = np.random.default_rng(n).integers(0, 40, size=n).astype(np.int32)
    got = gpu.indptr_cuda(counts, threads=threads, items=items)
    want = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_device_prefix_sum_int64_and_empty():
    big = np.full(7, 2**31 - 1, dtype=np.int64)  # the sum exceeds int32
    np.testing.assert_array_equal(gpu.indptr_cuda(big), np.concatenate([[0], np.cumsum(big)]))
    np.testing.assert_array_equal(gpu.indptr_cuda(np.zeros(0, dtype=np.int32)), [0])
    with pytest.raises(ValueError, match="integer"):
        gpu.indptr_cuda(np.ones(3))


def test_encode_csr_single_row_and_empty():
    Y, W = make_problem(9, 1, 2, 4)
    prepared = gpu.CudaPreparedDictionary(W, 1.0, 6, np.float64)
    C = gpu.encode_csr_cuda(Y, prepared, 8)
    assert_same_structure(C, fastkds.sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=6))
    E = gpu.encode_csr_cuda(Y[:0], prepared, 8)
    assert E.shape == (0, 4) and E.nnz == 0


# --------------------------------------------------------------------------
# sufficient statistics
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_statistics_match_naive(dtype):
    rng = np.random.default_rng(21)
    n, m, d = 60, 6, 3
    X = sparse_codes(rng, n, m, dtype=dtype)
    Y = rng.normal(size=(n, d)).astype(dtype)
    ip, ix, dt = csr_from_dense(X)
    XtX, s, XtY = gpu.statistics_cuda(ip, ix, dt, Y, n_atoms=m)
    for got, want in zip((XtX, s, XtY), _naive.statistics(X, Y)):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_statistics_do_not_depend_on_chunking(monkeypatch):
    """Parts of fixed size added in order: any chunk size and launch gives
    bitwise the same sums (small parts here, to have many of them)."""
    monkeypatch.setattr(_config, "CUDA_STATS_ROWS", 8)
    rng = np.random.default_rng(4)
    n, m, d = 61, 5, 2
    X = sparse_codes(rng, n, m)
    Y = rng.normal(size=(n, d)) * 1e3  # large values make order visible
    ip, ix, dt = csr_from_dense(X)
    ref = gpu.statistics_cuda(ip, ix, dt, Y, n_atoms=m)
    for chunk in (8, 13, 24):
        got = gpu.statistics_cuda(ip, ix, dt, Y, n_atoms=m, chunk_size=chunk)
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)
    monkeypatch.setattr(_config, "CUDA_THREADS", 32)
    monkeypatch.setattr(_config, "CUDA_MAX_BLOCKS", 2)  # grid-stride loops in all kernels
    for a, b in zip(gpu.statistics_cuda(ip, ix, dt, Y, n_atoms=m), ref):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(ref, _naive.statistics(X, Y)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)


def test_statistics_unused_trailing_atom_and_offset_indptr():
    rng = np.random.default_rng(8)
    X = sparse_codes(rng, 20, 4)
    X = np.hstack([X, np.zeros((20, 1))])  # atom 4 never used
    Y = rng.normal(size=(20, 2))
    ip, ix, dt = csr_from_dense(X)
    XtX, s, XtY = gpu.statistics_cuda(ip[5:], ix, dt, Y[5:], n_atoms=5)
    for got, want in zip((XtX, s, XtY), _naive.statistics(X[5:], Y[5:])):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------
# a whole epoch
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,buffer_sets,kernel",
    [
        (np.float64, None, "thread"),
        (np.float32, None, "thread"),
        (np.float64, 1, "thread"),
        (np.float64, 3, "thread"),
        (np.float32, 2, "warp"),
    ],
)
def test_run_epoch_cuda_matches_cpu(dtype, buffer_sets, kernel):
    # three chunks either way; the simulator runs a warp per point, slowly
    n, chunk = (45, 16) if kernel == "thread" else (20, 8)
    d, m = 2, 5
    Y, W = make_problem(13, n, d, m, dtype)
    cpu_stats = SufficientStatistics(m, d, n_candidates=m, random_state=np.random.RandomState(0))
    cpu_codes = []
    run_epoch(Y, PreparedDictionary(W, 1.5, 8, dtype), chunk, cpu_stats, codes_out=cpu_codes)
    gpu_stats = SufficientStatistics(m, d, n_candidates=m, random_state=np.random.RandomState(0))
    gpu_codes = []
    prepared = gpu.CudaPreparedDictionary(W, 1.5, 8, dtype, kernel=kernel)
    buffers = None
    if buffer_sets == 1:  # as fit_alternating allocates: one set, reused
        buffers = prepared.allocate(chunk)
    elif buffer_sets:
        buffers = [prepared.allocate(chunk + 4) for _ in range(buffer_sets)]
    gpu.run_epoch_cuda(Y, prepared, chunk, gpu_stats, buffers, codes_out=gpu_codes)
    tol = TOL[dtype]
    np.testing.assert_allclose(gpu_stats.XtX, cpu_stats.XtX, rtol=tol, atol=tol)
    np.testing.assert_allclose(gpu_stats.s, cpu_stats.s, rtol=tol, atol=tol)
    np.testing.assert_allclose(gpu_stats.XtY, cpu_stats.XtY, rtol=tol, atol=tol)
    assert gpu_stats.n_samples == cpu_stats.n_samples == n
    np.testing.assert_allclose(gpu_stats.mean_objective, cpu_stats.mean_objective, rtol=tol)
    assert gpu_stats.candidates.shape == cpu_stats.candidates.shape
    assert len(gpu_codes) == len(cpu_codes) == 3
    for (a_ip, a_ix, a_dt), (b_ip, b_ix, b_dt) in zip(gpu_codes, cpu_codes):
        np.testing.assert_array_equal(a_ip, b_ip)
        np.testing.assert_array_equal(a_ix, b_ix)
        np.testing.assert_allclose(a_dt, b_dt, rtol=0, atol=tol)


def test_buffers_carry_over_epochs_and_are_checked():
    """Buffers from one dictionary serve the next (same shape and dtype)."""
    n, d, m = 24, 2, 4
    Y, W = make_problem(19, n, d, m)
    first = gpu.CudaPreparedDictionary(W, 1.0, 6, np.float64, kernel="thread")
    buffers = first.allocate(12)
    second = gpu.CudaPreparedDictionary(W[::-1] * 1.1, 1.0, 6, np.float64, kernel="thread")
    for prepared, W_used in ((first, W), (second, W[::-1] * 1.1)):
        codes = []
        stats = gpu.run_epoch_cuda(Y, prepared, 12, SufficientStatistics(m, d), buffers, codes_out=codes)
        ref = fastkds.sparse_encode(Y, W_used, lam=1.0, encoder="apg", n_iter=6)
        assert_same_structure(concatenate_csr(codes, m, np.float64), ref)
        for got, want in zip((stats.XtX, stats.s, stats.XtY), _naive.statistics(ref.toarray(), Y)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="buffers hold 12 rows"):
        gpu.run_epoch_cuda(Y, first, 24, None, buffers)
    with pytest.raises(ValueError, match="float32"):
        prepared32 = gpu.CudaPreparedDictionary(W, 1.0, 6, np.float32, kernel="thread")
        gpu.encode_csr_cuda(Y.astype(np.float32), prepared32, 12, buffers=buffers)


def test_default_chunk_size_cuda():
    moons = gpu.default_chunk_size_cuda(2, 24, 8)
    mnist = gpu.default_chunk_size_cuda(784, 500, 4)
    assert 1 << 12 <= mnist < moons <= 1 << 21


def test_prepared_dictionary_is_a_drop_in_for_run_epoch():
    """The CPU epoch loop accepts the CUDA dictionary unchanged (dense codes
    copied back, CSR and statistics on the host). One chunk: from the second
    on, the CPU loop reads its own buffers' layout (``buffers[0].shape``)."""
    n, d, m = 30, 2, 4
    Y, W = make_problem(17, n, d, m)
    a = run_epoch(Y, PreparedDictionary(W, 1.0, 6, np.float64), n, SufficientStatistics(m, d))
    prepared = gpu.CudaPreparedDictionary(W, 1.0, 6, np.float64, kernel="thread")
    b = run_epoch(Y, prepared, n, SufficientStatistics(m, d))
    np.testing.assert_allclose(b.XtX, a.XtX, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.XtY, a.XtY, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.objective_sum, a.objective_sum, rtol=1e-10)


# --------------------------------------------------------------------------
# availability
# --------------------------------------------------------------------------


def test_require_cuda_names_the_cause(monkeypatch):
    assert gpu.cuda_available()
    gpu.require_cuda()
    monkeypatch.setattr(gpu, "in_simulator", lambda: False)
    monkeypatch.setattr(gpu.cuda, "is_available", lambda: False)
    assert not gpu.cuda_available()
    with pytest.raises(RuntimeError, match="numba.cuda reports no CUDA driver/GPU"):
        gpu.require_cuda()
    with pytest.raises(RuntimeError, match="numba.cuda reports no CUDA driver/GPU"):
        gpu.CudaPreparedDictionary(np.eye(2), 1.0, 3, np.float64)


# --------------------------------------------------------------------------
# estimators with device="cuda"
# --------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_kds_fit_on_cuda_matches_cpu(monkeypatch):
    # the thread encoder, to keep the simulator quick (the warp encoder's
    # epoch is tested above; on a GPU both are quick)
    if gpu.in_simulator():
        monkeypatch.setattr(_config, "CUDA_WARP_MIN_ATOMS", 10**9)
    Y, _ = fastkds.make_moons(48, random_state=0)
    kw = dict(lam=5.0, n_iter=6, encoder="apg", max_epochs=2, random_state=0)
    cpu = fastkds.KDS(4, device="cpu", **kw).fit(Y)
    gpu_model = fastkds.KDS(4, device="cuda", **kw).fit(Y)
    np.testing.assert_allclose(gpu_model.components_, cpu.components_, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(gpu_model.objective_, cpu.objective_, rtol=1e-9)
    a, b = gpu_model.transform(Y), cpu.transform(Y)
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_allclose(a.toarray(), b.toarray(), atol=1e-10)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_warm_start_stages_share_one_allocation_of_buffers(monkeypatch):
    """A fit through the warm-start stages (10, 100, then all 600 points)
    allocates its GPU buffer sets once, for the largest stage, and fits as
    the CPU does."""
    if gpu.in_simulator():
        monkeypatch.setattr(_config, "CUDA_WARP_MIN_ATOMS", 10**9)
    asked = []
    original = gpu.CudaPreparedDictionary.allocate

    def counted(self, chunk_size, **kw):
        asked.append(chunk_size)
        return original(self, chunk_size, **kw)

    monkeypatch.setattr(gpu.CudaPreparedDictionary, "allocate", counted)
    Y, _ = fastkds.make_moons(600, random_state=1)
    kw = dict(lam=5.0, n_iter=6, encoder="apg", max_epochs=2, presample=10, random_state=0)
    gpu_model = fastkds.KDS(4, device="cuda", **kw).fit(Y)
    assert asked == [600] * _config.CUDA_BUFFER_SETS
    cpu = fastkds.KDS(4, device="cpu", **kw).fit(Y)
    np.testing.assert_allclose(gpu_model.components_, cpu.components_, rtol=1e-9, atol=1e-10)


def test_sparse_encode_device_cuda_matches_cpu(monkeypatch):
    if gpu.in_simulator():  # the thread encoder, to keep the simulator quick (36 s with the warp one)
        monkeypatch.setattr(_config, "CUDA_WARP_MIN_ATOMS", 10**9)
    Y, W = make_problem(3, 40, 3, 5)
    a = fastkds.sparse_encode(Y, W, lam=0.5, encoder="apg", n_iter=8, device="cuda")
    b = fastkds.sparse_encode(Y, W, lam=0.5, encoder="apg", n_iter=8, device="cpu")
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.data, b.data, atol=1e-10)


def test_passes_keep_their_buffers_for_the_next_call(monkeypatch):
    """A pass that made its own buffer sets keeps them for the next call of
    the same shape (pinned memory is slow to allocate), takes them out while
    it runs, and gives the same codes; release_buffers frees them."""
    if gpu.in_simulator():  # the thread encoder, to keep the simulator quick
        monkeypatch.setattr(_config, "CUDA_WARP_MIN_ATOMS", 10**9)
    Y, W = make_problem(3, 12, 3, 5)
    gpu.release_buffers()
    first = fastkds.sparse_encode(Y, W, lam=0.5, encoder="apg", n_iter=8, device="cuda", chunk_size=4)
    kept = list(gpu._spare["sets"])
    assert len(kept) == _config.CUDA_BUFFER_SETS and all(b.capacity == 4 for b in kept)
    prepared = gpu.CudaPreparedDictionary(W, 0.5, 8, np.float64)
    taken = gpu._spare_sets(prepared, 4, 2)
    assert taken == kept[:2] and gpu._spare["sets"] == kept[2:]  # out of the pool while in use
    gpu._keep_sets(prepared, 4, taken)
    again = fastkds.sparse_encode(Y, W, lam=0.5, encoder="apg", n_iter=8, device="cuda", chunk_size=4)
    assert {id(b) for b in gpu._spare["sets"]} == {id(b) for b in kept}
    np.testing.assert_array_equal(again.indices, first.indices)
    np.testing.assert_array_equal(again.data, first.data)
    # another shape replaces them
    fastkds.sparse_encode(Y, W, lam=0.5, encoder="apg", n_iter=8, device="cuda", chunk_size=6)
    assert all(b.capacity == 6 for b in gpu._spare["sets"])
    gpu.release_buffers()
    assert gpu._spare["sets"] == []


# --------------------------------------------------------------------------
# the neighbours' vote
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_vote_on_cuda_matches_cpu(dtype):
    """CudaLabelVote.predict gives LabelVote.predict's labels: points whose
    probed cells hold one label (settled), points that search, a point
    whose probed cells are empty (it probes further), fewer candidates than
    voters, in chunks smaller than the data and with fewer threads; ranked
    votes and one vote a neighbour."""
    from fastkds.estimators._base import predict_by_vote, vote_labeller
    from fastkds.label_vote import LabelVote

    rng = np.random.default_rng(5)
    W = rng.normal(size=(6, 2)) * 2
    R = (W[rng.integers(0, 5, 30)] + rng.normal(size=(30, 2)) * 0.6).astype(dtype)  # atom 5's cell empty
    labels = (R[:, 0] > 0).astype(np.int32)
    Y = np.vstack([rng.normal(size=(24, 2)) * 2, W[5:] + 0.01]).astype(dtype)
    for (q, n_probe), ranked in itertools.product(((3, 2), (4, 2), (7, 1), (40, 3)), (False, True)):  # q = 4: ties
        model = LabelVote(W, R, labels, q, 2, n_probe=n_probe, ranked=ranked)
        expected = model.predict(Y)
        budget = 64 * (Y.shape[1] * Y.itemsize + 4) * 2  # chunks of 64 rows
        np.testing.assert_array_equal(gpu.CudaLabelVote(model).predict(Y), expected)
        np.testing.assert_array_equal(gpu.CudaLabelVote(model, budget=budget // 8).predict(Y), expected)
    neighbours, settled = model.neighbours(Y, settle=True)
    assert (settled >= 0).any() and (settled < 0).any()
    assert model.cell_start[6] == model.cell_start[5]  # the last point's own cell is empty
    assert len(set(model.predict(Y))) == 2
    np.testing.assert_array_equal(predict_by_vote(model, Y, None, "cuda"), model.predict(Y))
    assert gpu.CudaLabelVote(model).predict(Y[:0]).shape == (0,)
    # one labeller over calls of several sizes keeps its device rows (a fit
    # labels in many chunks); a smaller call after a larger one reuses them
    on_device = gpu.CudaLabelVote(model, budget=budget)
    for part in (Y[:5], Y, Y[3:9], Y):
        np.testing.assert_array_equal(on_device.predict(part), model.predict(part))
    assert on_device._rows[0].shape == (min(Y.shape[0], 64), 2)
    _, rows = vote_labeller(model, "cuda", None, 2, Y.itemsize)
    assert rows >= _config.LABEL_CHUNK  # a fit's points go to the GPU in as few calls as fit its budget

"""The clusterers' spectral embedding of codes (fastkds.spectral.embedding_rows)
against its oracle, scipy's product and NumPy's row normalisation: the same
numbers, bit for bit, for every shape and dtype the fits hand it."""

import numpy as np
import pytest
import scipy.sparse as sp

from fastkds import _kernels
from fastkds._config import numba_threads
from fastkds.spectral import embedding_rows, normalize_rows


def oracle(codes, P):
    return normalize_rows(np.asarray(codes @ P))


def random_codes(rng, n, m, dtype, index_dtype, per_row=3):
    """CSR codes with zero rows (no entries, and entries of zero), and
    indices unsorted and repeated within a row."""
    counts = rng.integers(0, per_row + 1, size=n)
    indptr = np.r_[0, np.cumsum(counts)].astype(index_dtype)
    indices = rng.integers(0, m, size=indptr[-1]).astype(index_dtype)
    data = rng.random(indptr[-1]).astype(dtype)
    data[::11] = 0
    return sp.csr_array((data, indices, indptr), shape=(n, m))


# up to 7 columns NumPy adds a row's squares one by one, from 8 in eight
# running sums; past PAIRWISE_BLOCK the NumPy path itself answers
@pytest.mark.parametrize("c", [1, 2, 4, 7, 8, 9, 15, 16, 23, 40, 127, 128, 129, 200])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_same_numbers_as_scipy_and_numpy(c, dtype):
    rng = np.random.default_rng(c)
    codes = random_codes(rng, 500, 60, dtype, np.int32)
    P = rng.normal(size=(60, c)) * rng.uniform(0.01, 100, size=(60, 1))
    got = embedding_rows(codes, P)
    assert got.dtype == np.float64 and got.shape == (500, c)
    np.testing.assert_array_equal(got, oracle(codes, P))
    assert np.all(got[np.diff(codes.indptr) == 0] == 0)  # rows without entries stay zero


def test_index_dtypes_threads_matrices_and_dense_codes():
    rng = np.random.default_rng(1)
    P = rng.normal(size=(30, 6))
    codes = random_codes(rng, 300, 30, np.float64, np.int64)
    expected = oracle(codes, P)
    for n_jobs in (1, 2):
        with numba_threads(n_jobs):
            np.testing.assert_array_equal(embedding_rows(codes, P), expected)
    np.testing.assert_array_equal(embedding_rows(sp.csr_matrix(codes), P), expected)
    dense = codes.toarray()
    np.testing.assert_array_equal(embedding_rows(dense, P), normalize_rows(dense @ P))  # BLAS's sums
    np.testing.assert_array_equal(embedding_rows(codes[:0], P), np.empty((0, 6)))


def test_writes_a_given_buffer_as_it_would_a_new_array():
    # the embedding pass reuses one buffer for every chunk: a slice of a
    # larger, dirty one gives the same numbers, and is what comes back
    rng = np.random.default_rng(3)
    P = rng.normal(size=(40, 5))
    buffer = np.full((700, 5), np.nan)
    for n in (600, 250):
        codes = random_codes(rng, n, 40, np.float32, np.int32)
        got = embedding_rows(codes, P, out=buffer[:n])
        assert np.shares_memory(got, buffer)
        np.testing.assert_array_equal(got, oracle(codes, P))


def test_leaves_the_codes_and_projection_alone():
    rng = np.random.default_rng(2)
    codes = random_codes(rng, 100, 20, np.float32, np.int32)
    P = rng.normal(size=(20, 4))
    before = (codes.indptr.copy(), codes.indices.copy(), codes.data.copy(), P.copy())
    embedding_rows(codes, P)
    for a, b in zip(before, (codes.indptr, codes.indices, codes.data, P)):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_columns_past_the_pairwise_block_take_the_numpy_path(monkeypatch):
    """The kernel never sees more than PAIRWISE_BLOCK columns."""
    seen = []
    kernel = _kernels.embed_codes

    def spy(*args):
        seen.append(args[3].shape[1])
        return kernel(*args)

    monkeypatch.setattr(_kernels, "embed_codes", spy)
    rng = np.random.default_rng(3)
    codes = random_codes(rng, 50, 10, np.float64, np.int32)
    for c in (_kernels.PAIRWISE_BLOCK, _kernels.PAIRWISE_BLOCK + 1):
        P = rng.normal(size=(10, c))
        np.testing.assert_array_equal(embedding_rows(codes, P), oracle(codes, P))
    assert seen == [_kernels.PAIRWISE_BLOCK]


def test_the_clusterer_embeds_on_its_n_jobs_threads(monkeypatch):
    """fit and transform embed on n_jobs Numba threads, as every other kernel runs."""
    import numba

    from fastkds import KDSClustering, make_moons

    seen = []
    kernel = _kernels.embed_codes

    def spy(*args):
        seen.append(numba.get_num_threads())
        return kernel(*args)

    monkeypatch.setattr(_kernels, "embed_codes", spy)
    Y, _ = make_moons(2000, random_state=0)
    model = KDSClustering(2, n_jobs=1, random_state=0).fit(Y)
    model.transform(Y[:100])
    assert seen and set(seen) == {1}

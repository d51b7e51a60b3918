"""The clusterers' spectral embedding of codes
(``fastkds.spectral.embedding_rows``): one parallel kernel over the rows of
the CSR codes (``_kernels.embed_codes``) against what it replaced, scipy's
``codes @ P`` and NumPy's row normalisation (``normalize_rows``), which
run on one thread. Both give the same numbers. n rows of three entries
among 24 atoms, c = 4 columns (the moons' diffusion embedding, k = 2).

    pytest bench/bench_embedding.py --benchmark-only --benchmark-group-by=param:n
"""

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import record
from fastkds.spectral import embedding_rows, normalize_rows


def codes_and_projection(n, m=24, c=4, per_row=3):
    rng = np.random.default_rng(0)
    indices = rng.integers(0, m, size=n * per_row).astype(np.int32)
    indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int32)
    data = rng.dirichlet(np.ones(per_row), size=n).ravel()
    return sp.csr_array((data, indices, indptr), shape=(n, m)), rng.normal(size=(m, c))


def scipy_numpy(codes, P):
    return normalize_rows(np.asarray(codes @ P), copy=False)


@pytest.mark.benchmark(group="embedding")
@pytest.mark.parametrize("impl", ["kernel", "scipy + NumPy"])
def test_embedding_rows(benchmark, n, impl):
    codes, P = codes_and_projection(n)
    embedding_rows(codes[:10], P)  # compile
    fn = embedding_rows if impl == "kernel" else scipy_numpy
    rows = benchmark.pedantic(fn, args=(codes, P), rounds=15, iterations=1, warmup_rounds=1)
    record(benchmark, n)
    np.testing.assert_array_equal(rows, scipy_numpy(codes, P))

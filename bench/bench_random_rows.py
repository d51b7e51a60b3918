"""Random draws the fits make.

Random rows of many (``fastkds.sources.random_rows``: the warm-start
samples, the seeding sample and the vote's references): the first distinct
draws of a stream, found by a hash set (``_kernels.first_distinct``)
against ``np.unique(return_index=True)``, which sorts them (its NumPy twin,
``_naive.first_distinct``, what random_rows used before). Both give the same
rows; n is the sample, drawn from 10 n rows with half as many draws again
as the sample, as random_rows draws.

The re-seed candidates, a weighted reservoir of the points of each epoch's
pass (``fastkds.solvers.SufficientStatistics``): the best keys ``log(u) /
w`` of a chunk, u from NumPy's Philox stream, formed and selected in one
pass on the threads (``_kernels.reservoir_top``, its blocks joined as the
statistics join them) against NumPy's generator, ``log``, division and
``partition`` (``_naive.reservoir_top``, what the statistics used
before); the same rows. 24 candidates, as many as the moons' atoms.

    pytest bench/bench_random_rows.py --benchmark-only --benchmark-group-by=param:n
"""

import numpy as np
import pytest

from conftest import record
from fastkds import _kernels, _naive


@pytest.mark.benchmark(group="random rows")
@pytest.mark.parametrize("impl", ["hash set", "np.unique"])
def test_first_distinct(benchmark, n, impl):
    draws = np.random.default_rng(0).integers(0, 10 * n, size=n + n // 2 + 16)
    _kernels.first_distinct(draws[:100], 10)  # compile
    fn = _kernels.first_distinct if impl == "hash set" else _naive.first_distinct
    rows = benchmark.pedantic(fn, args=(draws, n), rounds=5, iterations=1)
    record(benchmark, n)
    assert rows.shape == (n,)


@pytest.mark.benchmark(group="reservoir candidates")
@pytest.mark.parametrize("impl", ["kernel", "NumPy"])
def test_reservoir_top(benchmark, n, impl):
    import numba

    key, k = 0x243F6A8885A308D3, 24
    objective = np.random.default_rng(0).random(n, dtype=np.float32)
    n_blocks = max(1, min(4 * numba.get_num_threads(), n // 4096))
    keys, rows = np.empty((n_blocks, k)), np.empty((n_blocks, k), dtype=np.int64)

    def kernel():
        _kernels.reservoir_top(np.uint64(key), 3, objective, keys, rows)
        kept = rows >= 0
        return rows[kept][np.lexsort((rows[kept], -keys[kept]))[:k]]

    kernel()  # compile
    fn = kernel if impl == "kernel" else (lambda: _naive.reservoir_top(key, 3, objective, k)[1])
    top = benchmark.pedantic(fn, rounds=5, iterations=1)
    record(benchmark, n)
    np.testing.assert_array_equal(top, _naive.reservoir_top(key, 3, objective, k)[1])

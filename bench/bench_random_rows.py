"""Random draws the fits make.

Random rows of many (``fastkds.sources.random_rows``: the warm-start
samples, the seeding sample and the vote's references): the first distinct
draws of a stream, found by a hash set (``_kernels.first_distinct``)
against ``np.unique(return_index=True)``, which sorts them (its NumPy twin,
``_naive.first_distinct``, what random_rows used before). Both give the same
rows; n is the sample, drawn from 10 n rows with half as many draws again
as the sample, as random_rows draws.

The re-seed candidates' uniforms, one per point of each epoch's pass
(``fastkds.solvers.SufficientStatistics``): NumPy's Philox stream of a key
formed on the threads (``_kernels.philox_uniforms``) against NumPy's own
generator (``_naive.philox_uniforms``, what the statistics used before);
the same bits.

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


@pytest.mark.benchmark(group="reservoir uniforms")
@pytest.mark.parametrize("impl", ["kernel", "np.random.Philox"])
def test_philox_uniforms(benchmark, n, impl):
    key, out = np.uint64(0x243F6A8885A308D3), np.empty(n)
    _kernels.philox_uniforms(key, 3, out[:10])  # compile
    if impl == "kernel":
        benchmark.pedantic(_kernels.philox_uniforms, args=(key, 3, out), rounds=5, iterations=1)
    else:
        out = benchmark.pedantic(_naive.philox_uniforms, args=(int(key), 3, n), rounds=5, iterations=1)
    record(benchmark, n)
    assert out.shape == (n,) and 0 <= out.min() and out.max() < 1

"""Random rows of many (``fastkds.sources.random_rows``: the warm-start
samples, the seeding sample and the vote's references): the first distinct
draws of a stream, found by a hash set (``_kernels.first_distinct``)
against ``np.unique(return_index=True)``, which sorts them (its NumPy twin,
``_naive.first_distinct``, what random_rows used before). Both give the same
rows; n is the sample, drawn from 10 n rows with half as many draws again
as the sample, as random_rows draws.

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

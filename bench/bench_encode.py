"""Encoder throughput on noisy moons (d=2, m=24, T=15, lam=5), against the
NumPy oracle in the same run. Run: ``pytest bench --benchmark-only``."""

import numpy as np
import pytest

from fastkds import _naive, sparse_encode


def _record_throughput(benchmark, n):
    # stats is None under --benchmark-disable (the CI smoke run)
    if benchmark.stats is not None:
        benchmark.extra_info["points_per_s"] = n / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="encode-moons")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_encode_fastkds(benchmark, moons, moons_dictionary, dtype):
    Y = moons[0].astype(dtype)
    codes = benchmark(sparse_encode, Y, moons_dictionary, lam=5.0, n_iter=15)
    _record_throughput(benchmark, Y.shape[0])
    assert codes.shape == (Y.shape[0], 24)


@pytest.mark.benchmark(group="encode-moons")
def test_encode_numpy_oracle(benchmark, moons, moons_dictionary):
    Y = moons[0]
    X = benchmark.pedantic(_naive.encode, args=(Y, moons_dictionary, 5.0, 15), rounds=1, iterations=1)
    _record_throughput(benchmark, Y.shape[0])
    assert X.shape == (Y.shape[0], 24)

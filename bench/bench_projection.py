"""Simplex projection of n rows of m entries: Michelot and sorted kernels,
against the NumPy oracle in the same run."""

import numpy as np
import pytest

from conftest import ORACLE_MAX_N, record, skip_above
from fastkds import _naive, project_simplex


def _rows(n, m):
    return np.random.default_rng(0).normal(size=(min(n, 1_000_000), m))


@pytest.mark.benchmark(group="projection")
@pytest.mark.parametrize("m", [24, 500])
@pytest.mark.parametrize("method", ["michelot", "sorted"])
def test_project_fastkds(benchmark, n, m, method):
    V = _rows(n // (m // 24), m)  # about the same number of entries for every m
    project_simplex(V[:16], method=method)  # compile outside the timing
    X = benchmark(project_simplex, V, method=method)
    record(benchmark, V.shape[0], m=m)
    np.testing.assert_allclose(X.sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.benchmark(group="projection")
@pytest.mark.parametrize("m", [24, 500])
def test_project_numpy_oracle(benchmark, n, m):
    skip_above(n, ORACLE_MAX_N, "the NumPy oracle")
    V = _rows(n // (m // 24), m)
    X = benchmark.pedantic(_naive.project_simplex, args=(V,), rounds=1, iterations=1)
    record(benchmark, V.shape[0], m=m)
    assert X.shape == V.shape

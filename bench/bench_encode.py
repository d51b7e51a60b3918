"""Encoder throughput: noisy moons (d=2, m=24, T=15, lam=5) over n, and the
shape sweep over m, d and T; the NumPy oracle in the same run."""

import numpy as np
import pytest

from conftest import MOONS, MOONS_ENCODER, ORACLE_MAX_N, bench_n, moons_atoms, moons_data, record, skip_above
from fastkds import _naive, sparse_encode


@pytest.mark.benchmark(group="encode")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_encode_fastkds(benchmark, n, dtype):
    Y = moons_data(n)[0].astype(dtype)
    W = moons_atoms()
    codes = benchmark.pedantic(sparse_encode, args=(Y, W), kwargs=MOONS_ENCODER, rounds=3, iterations=1)
    record(benchmark, n, dtype=np.dtype(dtype).name)
    assert codes.shape == (n, MOONS.n_atoms)
    np.testing.assert_allclose(codes.sum(axis=1), 1.0, rtol=1e-4)


@pytest.mark.benchmark(group="encode")
def test_encode_numpy_oracle(benchmark, n):
    skip_above(n, ORACLE_MAX_N, "the NumPy oracle")
    Y = moons_data(n)[0]
    X = benchmark.pedantic(_naive.encode, args=(Y, moons_atoms(), MOONS.lam, MOONS.n_iter), rounds=1, iterations=1)
    record(benchmark, n)
    assert X.shape == (n, MOONS.n_atoms)


# m, d, T: the moons case, more atoms, more features, the MNIST-like case
SHAPES = [(24, 2, 15), (100, 2, 15), (24, 64, 15), (24, 2, 100), (500, 784, 100)]


def _shape_problem(m, d, T):
    n = min(bench_n(), 20_000 if m * d < 10_000 else 2_000)
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(n, d))
    W = Y[rng.choice(n, min(m, n), replace=False)]
    return Y, W


@pytest.mark.benchmark(group="encode-shape")
@pytest.mark.parametrize("m, d, T", SHAPES, ids=[f"m={m}-d={d}-T={T}" for m, d, T in SHAPES])
@pytest.mark.parametrize("impl", ["fastkds", "oracle"])
def test_encode_shape(benchmark, m, d, T, impl):
    Y, W = _shape_problem(m, d, T)
    if impl == "fastkds":
        sparse_encode(Y[:32], W, lam=0.5, encoder="apg", n_iter=T)  # compile
        fn = lambda: sparse_encode(Y, W, lam=0.5, encoder="apg", n_iter=T)  # noqa: E731
    else:
        fn = lambda: _naive.encode(Y, W, 0.5, T)  # noqa: E731
    X = benchmark.pedantic(fn, rounds=1, iterations=1)
    record(benchmark, Y.shape[0], m=m, d=d, T=T)
    assert X.shape == (Y.shape[0], W.shape[0])

"""Shared fixtures of the benchmark suite.

Sizes come from the environment so CI can run a smoke pass:
``FASTKDS_BENCH_N`` (default 100000) points of noisy moons.
JIT compilation is excluded: every kernel is called once before timing.
"""

import os

import numpy as np
import pytest

from fastkds import make_moons, sparse_encode


def bench_n():
    return int(float(os.environ.get("FASTKDS_BENCH_N", "100000")))


@pytest.fixture(scope="session")
def moons():
    Y, labels = make_moons(bench_n(), random_state=0)
    return Y, labels


@pytest.fixture(scope="session")
def moons_dictionary(moons):
    Y, _ = moons
    rng = np.random.default_rng(0)
    W = Y[rng.choice(Y.shape[0], 24, replace=False)]
    sparse_encode(Y[:256], W, lam=5.0, n_iter=15)  # compile outside the timings
    sparse_encode(Y[:256].astype(np.float32), W, lam=5.0, n_iter=15)
    return W

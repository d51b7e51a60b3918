"""Shared fixtures and options of the benchmark suite.

    pytest bench --benchmark-only                      # n in {1e4, 1e5, 1e6}
    pytest bench --benchmark-only --bench-large        # adds n = 1e7
    pytest bench --benchmark-only --bench-n 20000      # one size
    FASTKDS_BENCH_N=500 pytest bench --benchmark-disable   # CI smoke pass

Groups: ``projection``, ``encode``, ``encode-shape`` (m, d, T), ``fit``,
``cluster``, ``end-to-end`` and ``ensemble``, each with its baselines in the
same run (the NumPy oracle, scikit-learn's KMeans and SpectralClustering;
for ``ensemble``, the dictionaries fitted one at a time). JIT compilation
is excluded: every kernel is called once before it is timed. Slow baselines
stop at the sizes given by ``ORACLE_MAX_N`` and ``SPECTRAL_MAX_N``.
"""

import functools
import os

import numpy as np
import pytest

from fastkds import make_moons, sparse_encode
from fastkds.experiments import PAPER_SETTINGS

#: The paper's moons settings: atoms m, encoder steps T and lam.
MOONS = PAPER_SETTINGS["moons"]
#: Those settings as keyword arguments of KDS, KDSClustering and sparse_encode
#: (n_atoms apart: the encoder takes the atoms themselves).
MOONS_ENCODER = dict(lam=MOONS.lam, n_iter=MOONS.n_iter)

#: The NumPy oracle encodes ~50,000 points/s: above this it only adds minutes.
ORACLE_MAX_N = 100_000
#: scikit-learn's SpectralClustering (nearest-neighbours graph) stays under a
#: minute up to about this n on 2 cores.
SPECTRAL_MAX_N = 20_000


def pytest_addoption(parser):
    group = parser.getgroup("fastkds benchmarks")
    group.addoption("--bench-large", action="store_true", help="also run n = 10^7")
    group.addoption("--bench-n", default=None, help="comma-separated sizes instead of the default sweep")


def bench_sizes(config):
    """Sizes of the sweep: the option, the smoke variable, or the default."""
    if config.getoption("--bench-n"):
        return [int(float(v)) for v in config.getoption("--bench-n").split(",")]
    if os.environ.get("FASTKDS_BENCH_N"):
        return [int(float(os.environ["FASTKDS_BENCH_N"]))]
    sizes = [10_000, 100_000, 1_000_000]
    return sizes + [10_000_000] if config.getoption("--bench-large") else sizes


def pytest_generate_tests(metafunc):
    if "n" in metafunc.fixturenames:
        metafunc.parametrize("n", bench_sizes(metafunc.config), ids=lambda n: f"n={n:.0e}")


def bench_n():
    """The single size of the smoke pass (or 100,000)."""
    return int(float(os.environ.get("FASTKDS_BENCH_N", "100000")))


@functools.lru_cache(maxsize=4)
def mnist_shaped_blobs(n, dtype=np.float64, scale=0.5):
    """n points of 784 features (MNIST's size) about ten random centres,
    with Gaussian noise of this scale."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(10, 784))
    return (centres[rng.integers(10, size=n)] + rng.normal(scale=scale, size=(n, 784))).astype(dtype)


@functools.lru_cache(maxsize=2)
def moons_data(n):
    """Noisy moons (the paper's data), n points, and their labels."""
    return make_moons(n, random_state=0)


@functools.lru_cache(maxsize=4)
def moons_atoms(m=MOONS.n_atoms):
    """m atoms drawn from the data, and the encoder compiled for both dtypes."""
    Y, _ = moons_data(10_000)
    W = Y[np.random.default_rng(0).choice(Y.shape[0], m, replace=False)]
    for dtype in (np.float64, np.float32):
        sparse_encode(Y[:256].astype(dtype), W, **MOONS_ENCODER)
    return W


@pytest.fixture(scope="session")
def moons():
    return moons_data(bench_n())


@pytest.fixture(scope="session")
def moons_dictionary():
    return moons_atoms()


def record(benchmark, n, **extra):
    """Points/s and extra figures on the benchmark (none under --benchmark-disable)."""
    benchmark.extra_info.update(extra)
    if benchmark.stats is not None:
        benchmark.extra_info["points_per_s"] = n / benchmark.stats.stats.mean


def skip_above(n, limit, what):
    if n > limit:
        pytest.skip(f"{what} is only run up to n={limit:,} (too slow beyond)")

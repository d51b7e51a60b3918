"""k-means++ seeding of the initial atoms (``fastkds.seeding``) against
scikit-learn's ``kmeans_plusplus``, which it reproduces draw for draw, on
high-dimensional data: n points of 784 features (MNIST's size), 100 atoms.

Both read the data once per atom; scikit-learn through a BLAS product on
BLAS's threads, fastkds in one Numba pass on the fit's threads, in the
data's dtype. Pass ``--bench-n`` to change n (the default sweep stops at
10^5 here: 10^6 points of 784 features do not fit in memory).
"""

import numpy as np
import pytest
from sklearn.cluster import kmeans_plusplus

from conftest import mnist_shaped_blobs as blobs
from conftest import record
from fastkds.seeding import kmeans_plusplus_indices

D = 784
M = 100


@pytest.mark.benchmark(group="seeding")
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("impl", ["fastkds", "sklearn"])
def test_kmeans_plusplus(benchmark, n, dtype, impl):
    if n > 100_000:
        pytest.skip(f"{n:,} points of {D} features do not fit in memory here")
    Y = blobs(n, dtype)
    kmeans_plusplus_indices(Y[:300], 3, np.random.RandomState(0))  # compile

    if impl == "fastkds":

        def seed():
            return kmeans_plusplus_indices(Y, M, np.random.RandomState(0))
    else:

        def seed():
            return kmeans_plusplus(Y, M, random_state=np.random.RandomState(0))[1]

    indices = benchmark.pedantic(seed, rounds=3, iterations=1)
    record(benchmark, n)
    assert np.unique(indices).size == M

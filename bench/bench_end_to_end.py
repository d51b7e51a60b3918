"""End to end: noisy moons in a .npy file on disk, memory-mapped and
clustered by KDSClustering chunk by chunk (what ``fastkds cluster`` does)."""

import warnings

import numpy as np
import pytest

from conftest import MOONS, MOONS_ENCODER, moons_atoms, moons_data, record
from fastkds import KDSClustering, clustering_accuracy


@pytest.fixture
def moons_file(tmp_path, n):
    Y, labels = moons_data(n)
    path = tmp_path / "moons.npy"
    np.save(path, Y)
    return str(path), labels


@pytest.mark.benchmark(group="end-to-end")
def test_cluster_npy_file(benchmark, n, moons_file):
    path, labels = moons_file
    moons_atoms()  # compile

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return KDSClustering(2, n_atoms=MOONS.n_atoms, random_state=0, **MOONS_ENCODER).fit(path)

    model = benchmark.pedantic(run, rounds=1, iterations=1)
    accuracy = clustering_accuracy(labels, model.labels_)
    record(benchmark, n, accuracy=accuracy)
    assert accuracy > 0.95

"""Clustering noisy moons: KDSClustering over n, beside scikit-learn's KMeans
and SpectralClustering (nearest-neighbours graph) in the same run."""

import warnings

import pytest
from sklearn.cluster import KMeans, SpectralClustering

from conftest import MOONS, MOONS_ENCODER, SPECTRAL_MAX_N, moons_atoms, moons_data, record, skip_above
from fastkds import KDSClustering, clustering_accuracy


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


@pytest.mark.benchmark(group="cluster")
def test_kdsclustering(benchmark, n):
    Y, labels = moons_data(n)
    moons_atoms()  # compile
    model = benchmark.pedantic(
        lambda: _quiet(lambda: KDSClustering(2, n_atoms=MOONS.n_atoms, random_state=0, **MOONS_ENCODER).fit(Y)),
        rounds=1,
        iterations=1,
    )
    accuracy = clustering_accuracy(labels, model.labels_)
    record(benchmark, n, accuracy=accuracy, **{f"seconds_{k}": v for k, v in model.timings_.items()})
    assert accuracy > 0.95


@pytest.mark.benchmark(group="cluster")
def test_sklearn_kmeans(benchmark, n):
    Y, labels = moons_data(n)
    model = benchmark.pedantic(lambda: KMeans(2, n_init=10, random_state=0).fit(Y), rounds=1, iterations=1)
    record(benchmark, n, accuracy=clustering_accuracy(labels, model.labels_))


@pytest.mark.benchmark(group="cluster")
def test_sklearn_spectral_nearest_neighbors(benchmark, n):
    skip_above(n, SPECTRAL_MAX_N, "SpectralClustering")
    Y, labels = moons_data(n)
    model = benchmark.pedantic(
        lambda: _quiet(
            lambda: SpectralClustering(2, affinity="nearest_neighbors", n_neighbors=10, random_state=0).fit(Y)
        ),
        rounds=1,
        iterations=1,
    )
    record(benchmark, n, accuracy=clustering_accuracy(labels, model.labels_))

"""Fit and cluster: KDSClustering end to end on noisy moons (paper settings),
beside scikit-learn's KMeans in the same run."""

import warnings

import pytest
from sklearn.cluster import KMeans

from fastkds import KDSClustering, clustering_accuracy


@pytest.mark.benchmark(group="cluster-moons")
def test_kdsclustering_fit(benchmark, moons, moons_dictionary):
    Y, labels = moons

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return KDSClustering(2, n_atoms=24, lam=5.0, n_iter=15, random_state=0).fit(Y)

    model = benchmark.pedantic(fit, rounds=1, iterations=1)
    benchmark.extra_info["accuracy"] = clustering_accuracy(labels, model.labels_)
    assert clustering_accuracy(labels, model.labels_) > 0.95


@pytest.mark.benchmark(group="cluster-moons")
def test_sklearn_kmeans_baseline(benchmark, moons):
    Y, labels = moons
    model = benchmark.pedantic(lambda: KMeans(2, n_init=10, random_state=0).fit(Y), rounds=1, iterations=1)
    benchmark.extra_info["accuracy"] = clustering_accuracy(labels, model.labels_)

"""Clustering noisy moons: KDSClustering over n, beside scikit-learn's KMeans
and SpectralClustering (nearest-neighbours graph) in the same run; both
clusterers with their defaults on blobs (3,000 points, separate or of
unequal spread); and the
k-means of the clusterers' last step (``fastkds.spectral.fit_kmeans``: its
restarts on a sample) beside scikit-learn's restarts on every row."""

import functools
import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.datasets import make_blobs

from conftest import MOONS, MOONS_ENCODER, SPECTRAL_MAX_N, moons_atoms, moons_data, record, skip_above
from fastkds import KDSClustering, _config, clustering_accuracy
from fastkds.spectral import fit_kmeans, normalize_rows


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


#: Blobs both clusterers label with their defaults: four separate Gaussian
#: blobs, 3,000 points in 20 dimensions (the exact search's 10-NN graph holds
#: the four, and so do the k-means labels); and three touching blobs of
#: unequal spread, 3,000 points in 10 dimensions (one piece, whose spectrum
#: the vote solves for its eigengap test and labels).
BLOBS = {
    "separate": lambda: make_blobs(3000, 20, centers=4, random_state=0),
    "unequal spread": lambda: make_blobs([1500, 750, 750], 10, cluster_std=[0.5, 2.0, 4.0], random_state=3),
}


@functools.lru_cache(maxsize=None)
def _blobs(kind):
    return BLOBS[kind]()


@pytest.mark.parametrize("kind", list(BLOBS))
@pytest.mark.benchmark(group="blobs")
def test_kdsclustering_defaults_on_blobs(benchmark, kind):
    Y, labels = _blobs(kind)
    k = np.unique(labels).size
    _quiet(lambda: KDSClustering(k, random_state=0).fit(Y))  # compile
    model = benchmark.pedantic(lambda: _quiet(lambda: KDSClustering(k, random_state=0).fit(Y)), rounds=3)
    accuracy = clustering_accuracy(labels, model.labels_)
    record(benchmark, Y.shape[0], accuracy=accuracy, **{f"seconds_{k}": v for k, v in model.timings_.items()})
    assert accuracy > 0.99


@pytest.mark.parametrize("kind", list(BLOBS))
@pytest.mark.benchmark(group="blobs")
def test_sklearn_spectral_on_blobs(benchmark, kind):
    Y, labels = _blobs(kind)
    k = np.unique(labels).size
    model = benchmark.pedantic(
        lambda: _quiet(lambda: SpectralClustering(k, affinity="nearest_neighbors", random_state=0).fit(Y)), rounds=3
    )
    record(benchmark, Y.shape[0], accuracy=clustering_accuracy(labels, model.labels_))


def _embedded_rows(n, k=20, seed=0):
    """Rows like a row-normalised embedding of k clusters (2k columns, as
    the diffusion embedding's), as many as k-means is fitted on."""
    rng = np.random.default_rng(seed)
    centres = normalize_rows(rng.normal(size=(k, 2 * k)))
    truth = rng.integers(0, k, min(n, _config.KMEANS_SAMPLE))
    return normalize_rows(centres[truth] + 0.1 * rng.normal(size=(truth.size, 2 * k))), truth


@pytest.mark.benchmark(group="kmeans of the embedding")
def test_fit_kmeans(benchmark, n):
    rows, truth = _embedded_rows(n)
    model = benchmark.pedantic(lambda: fit_kmeans(rows, 20, 10, 0), rounds=3, warmup_rounds=1)
    record(benchmark, rows.shape[0], inertia=model.inertia_, accuracy=clustering_accuracy(truth, model.labels_))


@pytest.mark.benchmark(group="kmeans of the embedding")
def test_sklearn_kmeans_restarts_on_every_row(benchmark, n):
    rows, truth = _embedded_rows(n)
    model = benchmark.pedantic(lambda: KMeans(20, n_init=10, random_state=0).fit(rows), rounds=3, warmup_rounds=1)
    record(benchmark, rows.shape[0], inertia=model.inertia_, accuracy=clustering_accuracy(truth, model.labels_))

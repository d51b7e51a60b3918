"""k-means++ seeding (fastkds.seeding) against scikit-learn's kmeans_plusplus,
which it reproduces draw for draw."""

import numba
import numpy as np
import pytest
from sklearn.cluster import kmeans_plusplus
from sklearn.datasets import make_blobs

import fastkds.seeding
from fastkds import KDS, make_moons
from fastkds._config import numba_threads
from fastkds.seeding import kmeans_plusplus_indices


def data_sets():
    blobs, _ = make_blobs(3000, n_features=50, centers=8, random_state=0)
    moons, _ = make_moons(2000, random_state=1)
    repeated = np.repeat(make_blobs(300, n_features=5, centers=3, random_state=2)[0], 3, axis=0)
    return {"blobs d=50": blobs, "moons": moons, "repeated rows": repeated}


@pytest.mark.parametrize("name", list(data_sets()))
@pytest.mark.parametrize("n_centres", [1, 7, 40])
@pytest.mark.parametrize("seed", [0, 1])
def test_seeds_are_scikit_learns(name, n_centres, seed):
    Y = np.ascontiguousarray(data_sets()[name])
    ours = kmeans_plusplus_indices(Y, n_centres, np.random.RandomState(seed))
    theirs = kmeans_plusplus(Y, n_centres, random_state=np.random.RandomState(seed))[1]
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_seeds_do_not_depend_on_the_threads(dtype):
    Y = make_blobs(5000, n_features=20, centers=6, random_state=3)[0].astype(dtype)
    picks = []
    for n_jobs in (1, 2):
        with numba_threads(n_jobs):
            picks.append(kmeans_plusplus_indices(Y, 30, np.random.RandomState(4)))
    np.testing.assert_array_equal(picks[0], picks[1])


def test_float32_seeds_are_the_float64_seeds_of_the_same_points():
    # the distances are summed in float64 either way; only the first draw's
    # weights are in the data's dtype, as in scikit-learn
    Y32 = make_blobs(4000, n_features=30, centers=5, random_state=5)[0].astype(np.float32)
    a = kmeans_plusplus_indices(Y32, 25, np.random.RandomState(6))
    b = kmeans_plusplus_indices(Y32.astype(np.float64), 25, np.random.RandomState(6))
    np.testing.assert_array_equal(a, b)


def test_fewer_distinct_points_than_seeds():
    Y = np.repeat(np.arange(10.0).reshape(5, 2), 4, axis=0)  # 5 distinct points, 4 times each
    picks = kmeans_plusplus_indices(Y, 8, np.random.RandomState(0))
    assert picks.shape == (8,) and picks.min() >= 0 and picks.max() < Y.shape[0]
    # every distinct point is taken before any is taken twice
    assert np.unique(Y[picks[:5]], axis=0).shape[0] == 5
    np.testing.assert_array_equal(picks, kmeans_plusplus(Y, 8, random_state=np.random.RandomState(0))[1])


def test_fit_seeds_on_its_n_jobs_threads(monkeypatch):
    seen = []
    kernel = fastkds.seeding.seeding_distances

    def recording(*args):
        seen.append(numba.get_num_threads())
        return kernel(*args)

    monkeypatch.setattr(fastkds.seeding, "seeding_distances", recording)
    Y, _ = make_moons(500, random_state=0)
    KDS(8, max_epochs=1, tol=0.0, n_jobs=1, random_state=0).fit(Y)
    assert seen and set(seen) == {1}

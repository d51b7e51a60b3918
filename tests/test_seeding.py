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
from fastkds._validation import read_only
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


def _pass(Y, candidates, closest, seed_of, reach=None, projection=None):
    """One seeding pass's distances and block sums; no bound unless given."""
    from fastkds._kernels import BLOCK, seeding_distances

    n, t = Y.shape[0], candidates.shape[0]
    D = np.empty((n, t))
    sums = np.empty(((n + BLOCK - 1) // BLOCK, t))
    reach = np.empty((0, t)) if reach is None else reach
    Z, spread, margin = (np.empty((n, 0)), np.empty(0), 0.0) if projection is None else projection
    # Y read-only, as fastkds passes it: the kernel compiled once
    seeding_distances(
        read_only(Y), candidates, closest, seed_of, reach, Z, spread, margin, D, sums, numba.get_num_threads()
    )
    return D, sums


def _nearest(Y, seeds):
    """Each row's squared distance from its nearest of the rows ``seeds``, and which."""
    sq = ((Y[:, None, :].astype(np.float64) - Y[seeds][None].astype(np.float64)) ** 2).sum(axis=2)
    return sq.min(axis=1), sq.argmin(axis=1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_triangle_bounds_keep_every_distance(dtype):
    # the skip may change no distance and no block sum
    from fastkds._kernels import seeding_reach

    Y = make_blobs(3000, n_features=20, centers=10, random_state=7)[0].astype(dtype)
    Y = np.vstack([Y, Y[:40]])  # ties: rows at distance 0 from a seed
    seeds, candidates = np.arange(0, 600, 60), np.array([5, 17, 2999, 3001, 1234])
    closest, seed_of = _nearest(Y, seeds)
    S = Y[seeds].astype(np.float64)
    reach = seeding_reach(S, (S**2).sum(axis=1), Y[candidates].astype(np.float64))
    D, sums = _pass(Y, candidates, closest, seed_of)
    bounded_D, bounded_sums = _pass(Y, candidates, closest, seed_of, reach=reach)
    np.testing.assert_array_equal(bounded_D, D)
    np.testing.assert_array_equal(bounded_sums, sums)
    # the bounds are bounds, and here they rule out most pairs
    exact = ((S[:, None, :] - Y[candidates][None].astype(np.float64)) ** 2).sum(axis=2)
    assert np.all(reach <= exact)
    assert np.mean(reach[seed_of] >= 4 * closest[:, None]) > 0.5


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_projection_bounds_keep_every_distance(dtype, offset):
    from fastkds.seeding import PROJECTED_FEATURES, _projection

    r = PROJECTED_FEATURES
    Y = (make_blobs(64 * r, n_features=8 * r, centers=12, random_state=9)[0] + offset).astype(dtype)
    seeds, candidates = np.arange(0, 64 * r, 97), np.array([3, 500, 1000, 64 * r - 1])
    closest, seed_of = _nearest(Y, seeds)
    Z, spread, margin = projection = _projection(Y)
    assert Z.shape == (Y.shape[0], r) and margin > 0
    D, sums = _pass(Y, candidates, closest, seed_of)
    projected_D, projected_sums = _pass(Y, candidates, closest, seed_of, projection=projection)
    np.testing.assert_array_equal(projected_D, D)
    np.testing.assert_array_equal(projected_sums, sums)
    # the projected distances are at most the whole, and rule out most pairs here
    whole = ((Y[:, None, :].astype(np.float64) - Y[candidates][None].astype(np.float64)) ** 2).sum(axis=2)
    projected = ((Z[:, None, :] - Z[candidates][None]) ** 2).sum(axis=2)
    assert np.all(projected <= whole * (1 + 1e-9) + 1e-9 * offset**2)
    if offset == 0.0:
        assert np.mean(projected >= closest[:, None]) > 0.5


def test_projection_only_for_many_features_and_rows():
    from fastkds.seeding import PROJECTED_FEATURES, _projection

    r = PROJECTED_FEATURES
    for n, d in ((64 * r - 1, 8 * r), (64 * r, 8 * r - 1)):
        assert _projection(np.ones((n, d)))[0].shape == (n, 0)


def test_pairs_ruled_out_keep_their_nearest_seed():
    # a bound past every row's: no pair is summed, each row keeps its distance
    Y = make_blobs(500, n_features=6, centers=3, random_state=8)[0]
    candidates = np.array([1, 2, 3])
    closest, seed_of = _nearest(Y, np.array([0, 250]))
    D, _ = _pass(Y, candidates, closest, seed_of, reach=np.full((2, 3), np.inf))
    np.testing.assert_array_equal(D, np.repeat(closest[:, None], 3, axis=1))
    # and so with a projection that puts the candidates out of every other row's reach
    far = np.zeros((500, 1))
    far[candidates, 0] = 1e9 * np.arange(1, 4)
    D, _ = _pass(Y, candidates, closest, seed_of, projection=(far, np.zeros(500), 0.0))
    others = np.setdiff1d(np.arange(500), candidates)
    np.testing.assert_array_equal(D[others], np.repeat(closest[others, None], 3, axis=1))
    np.testing.assert_array_equal(D[candidates, [0, 1, 2]], 0.0)

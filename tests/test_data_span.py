"""Many more features than points: the exact fit runs on the points'
coordinates in their own span (fastkds.warmstart.DataSpan), with the same
atoms, codes and labels as on the features, up to rounding."""

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from fastkds import KDS, KDSClustering, _config, warmstart

PARAMS = dict(n_atoms=8, random_state=0)


def wide(n=60, d=2400, k=3, seed=0, dtype=np.float64):
    """``k`` groups of points along curves in ``d`` features, far from the origin."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    t = rng.random(n)
    directions = rng.normal(size=(2 * k, d))
    Y = 50.0 + 3.0 * directions[y] + np.sin(3 * t)[:, None] * directions[k + y] + 0.05 * rng.normal(size=(n, d))
    return Y.astype(dtype), y


def test_coordinates_keep_distances_and_map_back():
    Y, _ = wide()
    span = warmstart.DataSpan(Y)
    Z = span.coordinates
    assert Z.shape == (60, 59) and Z.dtype == np.float64
    np.testing.assert_allclose(pdist(Z), pdist(Y), rtol=1e-9)
    np.testing.assert_allclose(span.features(Z), Y, rtol=0, atol=1e-9 * np.abs(Y).max())
    # a convex combination of points maps to that combination of the features
    weights = np.random.default_rng(1).dirichlet(np.ones(60), size=4)
    np.testing.assert_allclose(span.features(weights @ Z), weights @ Y, atol=1e-9 * np.abs(Y).max())


def test_points_all_the_same_have_no_span():
    assert warmstart.DataSpan(np.ones((5, 200))).coordinates.shape == (5, 0)
    p = KDS()._validated_params()
    assert warmstart.data_span(np.ones((5, 200)), p, "k-means++") is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_fit_in_the_span_is_the_fit_on_the_features(dtype, monkeypatch):
    Y, _ = wide(dtype=dtype)
    spanned = KDS(**PARAMS).fit(Y)
    monkeypatch.setattr(_config, "SPAN_FEATURES_PER_POINT", 10**9)
    direct = KDS(**PARAMS).fit(Y)
    assert spanned.components_.dtype == dtype and spanned.components_.shape == direct.components_.shape
    tol = 1e-8 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(spanned.components_, direct.components_, rtol=tol)
    assert spanned.n_iter_ == direct.n_iter_
    np.testing.assert_allclose(spanned.objective_, direct.objective_, rtol=tol)
    codes, want = spanned.transform(Y), direct.transform(Y)
    assert abs(codes - want).max() < (1e-8 if dtype == np.float64 else 1e-3)


def test_clusterers_label_as_on_the_features(monkeypatch):
    Y, y = wide(n=90, d=3000)
    spanned = KDSClustering(3, **PARAMS).fit(Y)
    monkeypatch.setattr(_config, "SPAN_FEATURES_PER_POINT", 10**9)
    direct = KDSClustering(3, **PARAMS).fit(Y)
    # the same clusters; their names are k-means's, whose restarts reach
    # them with inertias equal to rounding, so the two fits may name them
    # apart: one name of each fit for each cluster of the other
    pairs = np.unique(np.stack([spanned.labels_, direct.labels_]), axis=1)
    assert pairs.shape[1] == len(np.unique(spanned.labels_)) == len(np.unique(direct.labels_)) == 3
    np.testing.assert_array_equal(spanned.predict(Y), spanned.labels_)
    assert spanned.components_.shape == (8, 3000)


@pytest.mark.filterwarnings("ignore::fastkds.exceptions.OffCentreDataWarning")
@pytest.mark.parametrize(
    "change", [dict(step="paper"), dict(solver="unrolled", max_epochs=2), dict(init="array")], ids=str
)
def test_the_span_is_left_where_the_fit_could_differ(change, monkeypatch):
    # the paper's step depends on the origin; the unrolled solver and atoms
    # given as an array (which may lie outside the points' span) are left as they are
    Y, _ = wide()
    if change.get("init") == "array":
        change = dict(init=np.random.default_rng(2).normal(size=(8, Y.shape[1])))
    made = []
    monkeypatch.setattr(warmstart, "DataSpan", lambda Y: made.append(Y))
    KDS(**{**PARAMS, **change}).fit(Y)
    assert not made


def test_few_features_a_point_fit_on_the_features(monkeypatch):
    made = []
    monkeypatch.setattr(warmstart, "DataSpan", lambda Y: made.append(Y))
    Y, _ = wide(n=200, d=2000)  # 10 features a point, below SPAN_FEATURES_PER_POINT
    KDS(**PARAMS).fit(Y)
    assert not made


def test_an_ensemble_makes_one_span_for_all_its_dictionaries(monkeypatch):
    from fastkds import KDSEnsembleClustering

    Y, _ = wide(n=90, d=3000)
    made = []
    real = warmstart.DataSpan

    def counted(Y):
        made.append(Y)
        return real(Y)

    monkeypatch.setattr(warmstart, "DataSpan", counted)
    spanned = KDSEnsembleClustering(3, n_estimators=3, random_state=0).fit(Y)
    assert len(made) == 1
    monkeypatch.setattr(_config, "SPAN_FEATURES_PER_POINT", 10**9)
    direct = KDSEnsembleClustering(3, n_estimators=3, random_state=0).fit(Y)
    np.testing.assert_array_equal(spanned.labels_, direct.labels_)

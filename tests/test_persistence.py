"""Saving and loading models: ``KDS.save`` / ``KDSClustering.save`` /
``KDSEnsembleClustering.save`` and :func:`fastkds.load` round trips (bit-identical results), pickling, and the
errors for files that are newer, foreign or incomplete."""

import copy
import json
import os
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

import fastkds
from fastkds import KDS, KDSClustering, KDSEnsembleClustering, make_moons, persistence

# Short fits stop at max_epochs on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

DTYPES = [np.float64, np.float32]
FIT = dict(lam=5.0, n_iter=10, max_epochs=5, random_state=0)


@pytest.fixture(scope="module")
def moons():
    Y, _ = make_moons(600, random_state=0)
    return Y


@pytest.fixture(scope="module", params=DTYPES, ids=lambda t: t.__name__)
def kds(request, moons):
    return KDS(12, **FIT).fit(moons.astype(request.param))


@pytest.fixture(scope="module", params=DTYPES, ids=lambda t: t.__name__)
def clustering(request, moons):
    return KDSClustering(2, n_atoms=12, **FIT).fit(moons.astype(request.param))


@pytest.fixture(scope="module", params=DTYPES, ids=lambda t: t.__name__)
def ensemble(request, moons):
    return KDSEnsembleClustering(
        2, estimator=KDS(12, lam=5.0, n_iter=10, max_epochs=5), n_estimators=3, random_state=0
    ).fit(moons.astype(request.param))


@pytest.fixture(scope="module")
def outlier_data():
    rng = np.random.default_rng(0)
    return np.r_[rng.normal(size=(300, 2)), rng.normal(size=(300, 2)) + [10, 0], rng.normal(size=(8, 2)) * 200]


@pytest.fixture(scope="module")
def clustering_with_outliers(outlier_data):
    # Far outliers own atoms, so the spectrum has outlier atoms with stand-ins.
    model = KDSClustering(2, n_atoms=24, lam=1.0, max_epochs=5, random_state=0).fit(outlier_data)
    assert model.spectrum_.stand_in is not None
    return model


def _round_trip(model, tmp_path, name="model.npz"):
    path = tmp_path / name
    model.save(path)
    return fastkds.load(path)


def _assert_same_csr(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.data, b.data)
    assert np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.indptr, b.indptr)


def _assert_same_array(a, b):
    assert a.dtype == b.dtype
    assert np.array_equal(a, b)


def _assert_same_kds(loaded, model, Y):
    assert type(loaded) is KDS
    assert sorted(vars(loaded)) == sorted(vars(model))  # every attribute restored
    assert loaded.get_params() == model.get_params()
    _assert_same_csr(loaded.transform(Y), model.transform(Y))
    _assert_same_array(loaded.components_, model.components_)
    _assert_same_array(loaded.objective_, model.objective_)
    assert loaded.step_ == model.step_
    assert loaded.n_iter_ == model.n_iter_
    assert loaded.n_features_in_ == model.n_features_in_
    assert loaded.objective(Y) == model.objective(Y)


def _assert_same_spectral_step(loaded, model, Y):
    """What KDSClustering and KDSEnsembleClustering share: labels, embedding, k-means, spectrum."""
    assert sorted(vars(loaded)) == sorted(vars(model))  # every attribute restored
    _assert_same_array(loaded.predict(Y), model.predict(Y))
    _assert_same_array(loaded.transform(Y), model.transform(Y))
    for name in ("labels_", "components_", "embedding_", "eigenvalues_"):
        _assert_same_array(getattr(loaded, name), getattr(model, name))
    assert loaded.n_clusters_ == model.n_clusters_
    assert loaded.n_features_in_ == model.n_features_in_
    # the arrays shared after fit are shared after load
    assert loaded.eigenvalues_ is loaded.spectrum_.eigenvalues
    assert loaded.kmeans_.labels_ is loaded.labels_
    public = [k for k in vars(model.kmeans_) if not k.startswith("_")]
    assert sorted(public) == sorted(k for k in vars(loaded.kmeans_) if not k.startswith("_"))
    assert loaded.kmeans_.get_params() == model.kmeans_.get_params()
    _assert_same_array(loaded.kmeans_.cluster_centers_, model.kmeans_.cluster_centers_)
    assert sorted(vars(loaded.spectrum_)) == sorted(vars(model.spectrum_))


def _assert_same_clustering(loaded, model, Y):
    assert type(loaded) is KDSClustering
    assert loaded.get_params() == model.get_params()
    _assert_same_spectral_step(loaded, model, Y)
    assert loaded.timings_ == model.timings_
    _assert_same_kds(loaded.kds_, model.kds_, Y)
    assert loaded.components_ is loaded.kds_.components_


def _assert_same_ensemble(loaded, model, Y):
    assert type(loaded) is KDSEnsembleClustering
    params, want = loaded.get_params(deep=False), model.get_params(deep=False)
    assert params.pop("estimator").get_params() == want.pop("estimator").get_params()
    assert params == want
    _assert_same_spectral_step(loaded, model, Y)
    assert len(loaded.estimators_) == len(model.estimators_)
    for got, kds in zip(loaded.estimators_, model.estimators_):
        _assert_same_kds(got, kds, Y)


# -- round trips ---------------------------------------------------------------


def test_kds_round_trip_is_exact(kds, moons, tmp_path):
    Y = moons.astype(kds.components_.dtype)
    _assert_same_kds(_round_trip(kds, tmp_path), kds, Y)


def test_clustering_round_trip_is_exact(clustering, moons, tmp_path):
    Y = moons.astype(clustering.components_.dtype)
    _assert_same_clustering(_round_trip(clustering, tmp_path), clustering, Y)


def test_clustering_round_trip_keeps_outlier_stand_ins(clustering_with_outliers, outlier_data, tmp_path):
    model = clustering_with_outliers
    loaded = _round_trip(model, tmp_path)
    _assert_same_clustering(loaded, model, outlier_data)
    assert loaded.spectrum_.n_outlier_atoms == model.spectrum_.n_outlier_atoms
    for got, want in zip(loaded.spectrum_.stand_in, model.spectrum_.stand_in):
        _assert_same_array(got, want)


def test_ensemble_round_trip_is_exact(ensemble, moons, tmp_path):
    Y = moons.astype(ensemble.components_.dtype)
    _assert_same_ensemble(_round_trip(ensemble, tmp_path), ensemble, Y)


def test_unfitted_ensemble_round_trip_keeps_the_template(tmp_path):
    # the template KDS is stored by its own parameters, arrays included
    template = KDS(5, lam=0.25, init=np.arange(10.0).reshape(5, 2), solver="unrolled", random_state=3)
    model = KDSEnsembleClustering(2, estimator=template, n_estimators=4, n_jobs=2, random_state=1)
    loaded = _round_trip(model, tmp_path)
    with pytest.raises(NotFittedError):
        check_is_fitted(loaded)
    params, want = loaded.estimator.get_params(), template.get_params()
    _assert_same_array(params.pop("init"), want.pop("init"))
    assert params == want
    assert {**loaded.get_params(deep=False), "estimator": None} == {**model.get_params(deep=False), "estimator": None}
    KDSEnsembleClustering(2).save(tmp_path / "none.npz")  # estimator=None: KDS() at fit
    assert fastkds.load(tmp_path / "none.npz").estimator is None


@pytest.mark.parametrize("which", ["kds", "clustering"])
def test_pickle_round_trip_is_exact(which, kds, clustering, moons):
    model = kds if which == "kds" else clustering
    Y = moons.astype(model.components_.dtype)
    loaded = pickle.loads(pickle.dumps(model))
    if which == "kds":
        _assert_same_kds(loaded, model, Y)
    else:
        _assert_same_clustering(loaded, model, Y)


def test_pickle_of_a_loaded_model(clustering, moons, tmp_path):
    loaded = pickle.loads(pickle.dumps(_round_trip(clustering, tmp_path)))
    Y = moons.astype(clustering.components_.dtype)
    _assert_same_array(loaded.predict(Y), clustering.predict(Y))


def test_feature_names_round_trip(kds, tmp_path):
    # validate_data sets feature_names_in_ (object array of str) for DataFrames
    model = copy.deepcopy(kds)
    model.feature_names_in_ = np.array(["x", "y"], dtype=object)
    loaded = _round_trip(model, tmp_path)
    _assert_same_array(loaded.feature_names_in_, model.feature_names_in_)


@pytest.mark.parametrize("cls", [KDS, KDSClustering])
def test_unfitted_round_trip_keeps_params(cls, tmp_path):
    init = np.arange(10.0).reshape(5, 2)
    rs = np.random.RandomState(7)
    rs.normal(size=3)  # an advanced state, with a cached Gaussian
    model = cls(n_atoms=5, lam=0.25, init=init, presample=None, random_state=rs, n_jobs=1)
    loaded = _round_trip(model, tmp_path)
    assert type(loaded) is cls
    with pytest.raises(NotFittedError):
        check_is_fitted(loaded)
    params, want = loaded.get_params(), model.get_params()
    _assert_same_array(params.pop("init"), want.pop("init"))
    got_rs, want_rs = params.pop("random_state"), want.pop("random_state")
    assert params == want
    assert got_rs is not want_rs and np.array_equal(got_rs.normal(size=5), want_rs.normal(size=5))


def test_loaded_unfitted_model_fits_like_the_original(moons, tmp_path):
    model = KDS(8, **FIT)
    loaded = _round_trip(model, tmp_path)
    _assert_same_array(loaded.fit(moons).components_, model.fit(moons).components_)


# -- the file ------------------------------------------------------------------


def test_file_loads_without_pickle(clustering_with_outliers, tmp_path):
    path = tmp_path / "model.npz"
    clustering_with_outliers.save(path)
    with np.load(path, allow_pickle=False) as npz:
        assert int(npz["fastkds_format_version"]) == persistence.FORMAT_VERSION
        assert str(npz["class_name"]) == "KDSClustering"
        for name in npz.files:
            assert not npz[name].dtype.hasobject, name


def test_save_writes_the_path_as_given_and_replaces_it(kds, tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"old")
    fastkds.persistence.save(kds, str(path))
    assert sorted(os.listdir(tmp_path)) == ["model.bin"]  # no suffix added, no temporary left
    assert fastkds.load(str(path)).n_iter_ == kds.n_iter_


def test_failed_save_leaves_the_old_file(kds, tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    path.write_bytes(b"old")

    def broken_savez(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        kds.save(path)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["model.npz"]


def test_save_refuses_what_needs_pickle(tmp_path):
    with pytest.raises(TypeError, match="chunk_size"):
        KDS(chunk_size=object()).save(tmp_path / "a.npz")
    with pytest.raises(TypeError, match="object arrays"):
        KDS(init=np.array([None, "x"], dtype=object)).save(tmp_path / "b.npz")
    with pytest.raises(TypeError, match="KDS, KDSClustering or KDSEnsembleClustering"):
        persistence.save(object(), tmp_path / "c.npz")
    assert os.listdir(tmp_path) == []


# -- refused files ---------------------------------------------------------------


def _rewrite(path, **changes):
    """Rewrite the npz at ``path`` with some entries replaced (None: removed)."""
    with np.load(path, allow_pickle=False) as npz:
        entries = {name: npz[name] for name in npz.files}
    for name, value in changes.items():
        if value is None:
            del entries[name]
        else:
            entries[name] = value
    with open(path, "wb") as f:
        np.savez(f, **entries)


def test_newer_format_version_fails_clearly(kds, tmp_path):
    path = tmp_path / "model.npz"
    kds.save(path)
    _rewrite(path, fastkds_format_version=np.array(999))
    with pytest.raises(ValueError, match=r"model\.npz.*version 999.*version 1 .*upgrade fastkds"):
        fastkds.load(path)


def test_invalid_format_version_fails_clearly(kds, tmp_path):
    path = tmp_path / "model.npz"
    kds.save(path)
    _rewrite(path, fastkds_format_version=np.array(0))
    with pytest.raises(ValueError, match="invalid fastkds format version"):
        fastkds.load(path)


def test_foreign_npz_fails_clearly(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, weights=np.ones(3))
    with pytest.raises(ValueError, match=r"other\.npz.* is not a fastkds model file"):
        fastkds.load(path)


@pytest.mark.parametrize("content", [b"", b"not a model at all", b"PK\x03\x04 truncated"])
def test_non_npz_file_fails_clearly(content, tmp_path):
    path = tmp_path / "junk.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="is not a fastkds model file"):
        fastkds.load(path)


def test_npy_file_fails_clearly(tmp_path):
    path = tmp_path / "array.npy"
    np.save(path, np.ones(3))
    with pytest.raises(ValueError, match="is not a fastkds model file"):
        fastkds.load(path)


def test_incomplete_file_fails_clearly(clustering, tmp_path):
    path = tmp_path / "model.npz"
    clustering.save(path)
    _rewrite(path, **{"kds_.components_": None})
    with pytest.raises(ValueError, match=r"entry 'kds_\.components_' is missing"):
        fastkds.load(path)


@pytest.mark.parametrize(
    "removed, first_missing",
    [("estimators_.", "estimators_.0."), ("estimators_.2.", "estimators_.2.")],
    ids=["every-dictionary", "the-last"],
)
def test_ensemble_without_dictionaries_fails_clearly(ensemble, tmp_path, removed, first_missing):
    # n_estimators (3) says how many dictionaries to read: one short is an error, not a smaller model
    assert ensemble.n_estimators == 3
    path = tmp_path / "model.npz"
    ensemble.save(path)
    with np.load(path, allow_pickle=False) as npz:
        gone = {name: None for name in npz.files if name.startswith(removed)}
    _rewrite(path, **gone)
    with pytest.raises(ValueError, match=rf"entry '{re.escape(first_missing)}params' is missing"):
        fastkds.load(path)


def test_unknown_class_fails_clearly(kds, tmp_path):
    path = tmp_path / "model.npz"
    kds.save(path)
    _rewrite(path, class_name=np.array("KDSRegressor"))
    with pytest.raises(ValueError, match="unknown model class 'KDSRegressor'"):
        fastkds.load(path)


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        fastkds.load(tmp_path / "absent.npz")


def test_load_is_exported():
    assert "load" in fastkds.__all__ and fastkds.load is persistence.load


def test_load_right_after_import_finds_the_class(clustering, tmp_path):
    """persistence knows the estimator classes only as they register on
    import: fastkds.load imports them first, in a process that has imported
    nothing else; persistence.load alone says what is missing."""
    path = tmp_path / "model.npz"
    clustering.save(path)
    code = (
        "import sys, fastkds\n"
        "from fastkds import persistence\n"
        "try:\n"
        f"    persistence.load({str(path)!r})\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
        f"print(type(fastkds.load({str(path)!r})).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    unknown, loaded = out.strip().splitlines()
    assert "unknown model class 'KDSClustering' (no class is registered: import fastkds.estimators first" in unknown
    assert loaded == "KDSClustering"


def _saved_without_parameter(model, path, name):
    """``model`` saved to ``path`` with the parameter ``name`` taken out of
    the file (as a file written before it existed), then loaded."""
    import json

    model.save(path)
    with np.load(path) as npz:
        entries = {key: npz[key] for key in npz.files}
    spec = json.loads(str(entries["params"]))
    del spec["values"][name]
    entries["params"] = np.array(json.dumps(spec))
    np.savez(path, **entries)
    return fastkds.load(path)


@pytest.mark.parametrize("cls", ["KDSClustering", "KDSEnsembleClustering"])
def test_file_from_before_the_embedding_parameter_loads_with_the_leading_one(moons, tmp_path, cls):
    """A clusterer's file whose parameters have no ``embedding`` (written
    when the k leading modes were the only embedding) loads with
    ``embedding="leading"``: its stored embedding and k-means centres have
    k columns, and it labels new points as the model did."""
    if cls == "KDSClustering":
        model = KDSClustering(2, n_atoms=12, embedding="leading", **FIT).fit(moons)
    else:
        model = KDSEnsembleClustering(2, estimator=KDS(n_atoms=12, **FIT), n_estimators=2, embedding="leading").fit(
            moons
        )
    loaded = _saved_without_parameter(model, tmp_path / "model.npz", "embedding")
    assert loaded.embedding == loaded.spectrum_.embedding == "leading"
    assert loaded.embedding_.shape == (moons.shape[0], 2)
    np.testing.assert_array_equal(loaded.predict(moons), model.predict(moons))
    # the default now is the diffusion embedding, which the file did not hold
    assert KDSClustering().embedding == KDSEnsembleClustering().embedding == "diffusion"


@pytest.mark.parametrize("cls", ["KDSClustering", "KDSEnsembleClustering"])
def test_file_from_before_the_vote_loads_without_it(moons, tmp_path, cls):
    """A clusterer's file whose parameters have no ``vote_neighbors``
    (written before the neighbours' vote) loads with ``vote_neighbors=None``
    and labels new points by k-means, as the model did."""
    if cls == "KDSClustering":
        model = KDSClustering(2, n_atoms=12, vote_neighbors=None, **FIT).fit(moons)
    else:
        model = KDSEnsembleClustering(2, estimator=KDS(n_atoms=12, **FIT), n_estimators=2, vote_neighbors=None)
        model.fit(moons)
    loaded = _saved_without_parameter(model, tmp_path / "model.npz", "vote_neighbors")
    assert loaded.vote_neighbors is None and loaded.vote_ is None
    np.testing.assert_array_equal(loaded.predict(moons), model.predict(moons))


def test_file_from_before_the_count_of_cells_searches_four(moons, tmp_path):
    """A file without ``vote_.attributes`` (written when the vote's search
    read 4 atoms' cells whatever their size) loads searching 4, as the
    model that wrote it did; a newer file keeps its own count."""
    from fastkds import _config

    path = tmp_path / "model.npz"
    model = KDSClustering(2, n_atoms=12, **FIT).fit(moons)
    model.vote_.n_probe = 7  # not what the references and atoms give
    model.save(path)
    assert fastkds.load(path).vote_.n_probe == 7
    _rewrite(path, **{"vote_.attributes": None})
    assert fastkds.load(path).vote_.n_probe == _config.VOTE_PROBE_ATOMS
    _rewrite(path, **{"vote_.attributes": np.array('{"n_probe": 0}')})
    with pytest.raises(ValueError, match="n_probe must be at least 1"):
        fastkds.load(path)


def test_file_from_before_ranked_votes_votes_one_a_neighbour(moons, tmp_path):
    """A file whose vote attributes lack ``ranked`` (written when each
    neighbour had one vote) loads voting so, as the model that wrote it
    did; a newer file keeps ranked votes, and a value other than true or
    false fails clearly."""
    path = tmp_path / "model.npz"
    model = KDSClustering(2, n_atoms=12, **FIT).fit(moons)
    assert model.vote_.ranked
    model.save(path)
    assert fastkds.load(path).vote_.ranked
    attributes = {"n_probe": model.vote_.n_probe, "n_neighbors": model.vote_.n_neighbors}
    _rewrite(path, **{"vote_.attributes": np.array(json.dumps(attributes))})
    assert not fastkds.load(path).vote_.ranked
    _rewrite(path, **{"vote_.attributes": np.array(json.dumps({**attributes, "ranked": 1}))})
    with pytest.raises(ValueError, match="ranked must be true or false, got 1"):
        fastkds.load(path)


def test_file_from_before_the_vote_reach_counts_vote_neighbors(moons, tmp_path):
    """A file whose vote attributes lack ``n_neighbors`` (written before the
    vote's reach was capped, label_vote.vote_reach) loads counting
    ``vote_neighbors``, as the model that wrote it did; a newer file keeps
    its own count, and one past ``vote_neighbors`` fails clearly."""
    path = tmp_path / "model.npz"
    model = KDSClustering(2, n_atoms=12, **FIT).fit(moons)
    model.vote_.n_neighbors = 6  # a cap the references would have set
    model.save(path)
    assert fastkds.load(path).vote_.n_neighbors == 6
    _rewrite(path, **{"vote_.attributes": np.array(f'{{"n_probe": {model.vote_.n_probe}}}')})
    assert fastkds.load(path).vote_.n_neighbors == 10
    _rewrite(path, **{"vote_.attributes": np.array(f'{{"n_probe": {model.vote_.n_probe}, "n_neighbors": 11}}')})
    with pytest.raises(ValueError, match=r"n_neighbors must be in 1\.\.vote_neighbors=10, got 11"):
        fastkds.load(path)


def test_vote_entries_that_disagree_with_the_parameter_fail_clearly(moons, tmp_path):
    path = tmp_path / "model.npz"
    KDSClustering(2, n_atoms=12, **FIT).fit(moons).save(path)
    _rewrite(path, **{"vote_.references": None, "vote_.labels": None})
    with pytest.raises(ValueError, match="vote_neighbors=10, but the file lacks vote_"):
        fastkds.load(path)
    KDSClustering(2, n_atoms=12, **FIT).fit(moons).save(path)
    with np.load(path) as npz:
        labels = npz["vote_.labels"].copy()
    labels[0] = 7
    _rewrite(path, **{"vote_.labels": labels})
    with pytest.raises(ValueError, match=r"vote_\.labels hold labels outside 0\.\.1"):
        fastkds.load(path)


def test_diffusion_embedding_round_trips(moons, tmp_path):
    model = KDSClustering(2, n_atoms=12, **FIT).fit(moons)
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = fastkds.load(path)
    assert loaded.spectrum_.embedding == "diffusion" and loaded.embedding_.shape == (moons.shape[0], 4)
    np.testing.assert_array_equal(loaded.transform(moons[:50]), model.transform(moons[:50]))
    np.testing.assert_array_equal(loaded.predict(moons), model.predict(moons))


def test_file_from_before_the_step_parameter_loads_with_the_papers_step(moons, tmp_path):
    """A file whose parameters have no ``step`` and ``encoder`` (written
    before the centred step and the active-set encoder became the defaults)
    loads as the paper's encoder it was fitted with, and encodes as the
    model did."""
    import json

    model = KDSClustering(2, n_atoms=12, step="paper", encoder="apg", **FIT).fit(moons)
    path = tmp_path / "model.npz"
    model.save(path)
    with np.load(path) as npz:
        entries = {name: npz[name] for name in npz.files}
    for name in ("params", "kds_.params"):
        spec = json.loads(str(entries[name]))
        del spec["values"]["step"], spec["values"]["encoder"]
        entries[name] = np.array(json.dumps(spec))
    np.savez(path, **entries)
    loaded = fastkds.load(path)
    assert loaded.step == loaded.kds_.step == "paper"
    assert loaded.encoder == loaded.kds_.encoder == "apg"
    np.testing.assert_array_equal(loaded.predict(moons), model.predict(moons))

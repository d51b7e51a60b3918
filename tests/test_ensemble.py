"""Tests of :class:`fastkds.KDSEnsembleClustering`: one dictionary
gives KDSClustering's result, the joint code graph is the dictionaries' codes
side by side, its embedding matches a dense SVD of SPEC section 6, the
scikit-learn estimator checks, input validation, and two Yale B faces."""

import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastkds import KDS, KDSClustering, KDSEnsembleClustering, clustering_accuracy, make_moons
from fastkds import _naive
from fastkds.spectral import DIFFUSION_STEPS

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

MOONS_KDS = dict(n_atoms=24, lam=5.0, n_iter=30, max_epochs=20, tol=1e-4)


@pytest.fixture(scope="module")
def moons():
    return make_moons(1500, random_state=1)


@pytest.fixture(scope="module")
def ensemble_moons(moons):
    Y, _ = moons
    return KDSEnsembleClustering(2, estimator=KDS(**MOONS_KDS), n_estimators=3, random_state=0).fit(Y)


@parametrize_with_checks(
    [KDSEnsembleClustering(2, estimator=KDS(n_atoms=4, max_epochs=5), n_estimators=2, random_state=0)]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("seed", [0, 1])
def test_one_dictionary_is_kdsclustering(moons, seed):
    # same seeds drawn in the same order: the same dictionary, embedding and labels
    Y, _ = moons
    single = KDSClustering(2, random_state=seed, **MOONS_KDS).fit(Y)
    ens = KDSEnsembleClustering(2, estimator=KDS(**MOONS_KDS), n_estimators=1, random_state=seed).fit(Y)
    np.testing.assert_array_equal(ens.components_, single.components_)
    np.testing.assert_allclose(ens.eigenvalues_, single.eigenvalues_, atol=1e-12)
    # eigenvectors are defined up to sign
    signs = np.sign((ens.embedding_ * single.embedding_).sum(axis=0))
    np.testing.assert_allclose(ens.embedding_ * signs, single.embedding_, atol=1e-10)
    np.testing.assert_array_equal(ens.labels_, single.labels_)


@pytest.mark.parametrize("n_clusters", [2, "auto"])
def test_default_estimator_is_kdsclusterings_dictionary(moons, n_clusters):
    # estimator=None: one dictionary is KDS.fit's with the settings and seed
    # KDSClustering fits with its defaults (auto atoms for n and k, its tol),
    # so the labels agree up to the last update KDSClustering leaves out
    Y, y = moons
    single = KDSClustering(n_clusters, random_state=3).fit(Y)
    ens = KDSEnsembleClustering(n_clusters, n_estimators=1, random_state=3).fit(Y)
    assert ens.estimators_[0].get_params() == single.kds_.get_params()
    assert ens.estimators_[0].n_atoms == single.kds_.n_atoms == 39  # round(sqrt(1500))
    assert ens.estimators_[0].tol == single.kds_.tol == KDSClustering().tol
    np.testing.assert_array_equal(ens.components_, clone(single.kds_).fit(Y).components_)
    assert clustering_accuracy(single.labels_, ens.labels_) > 0.99
    assert ens.estimator is None  # the template is built per fit, the parameter left as given


def test_default_estimator_has_atoms_for_many_clusters():
    # KDS()'s 16 atoms per dictionary are fewer than the 20 blobs, and the
    # joint graph then merges some; the auto rule gives every dictionary
    # 4 atoms per cluster, and every blob atoms of its own
    Y, y = make_blobs(2000, centers=20, n_features=10, cluster_std=0.5, random_state=0)
    model = KDSEnsembleClustering(20, n_estimators=2, random_state=0).fit(Y)
    assert all(kds.n_atoms == 80 for kds in model.estimators_)
    assert clustering_accuracy(y, model.labels_) > 0.99


def test_joint_codes_are_the_dictionaries_codes_side_by_side(ensemble_moons, moons):
    Y, _ = moons
    model = ensemble_moons
    joint = model._joint_codes(Y)
    r, m = len(model.estimators_), model.estimators_[0].n_atoms
    assert joint.shape == (Y.shape[0], r * m)
    np.testing.assert_allclose(joint.sum(axis=1), 1.0, atol=1e-10)
    for j, kds in enumerate(model.estimators_):
        np.testing.assert_allclose(joint[:, j * m : (j + 1) * m].toarray(), kds.transform(Y).toarray() / r, atol=1e-15)
        np.testing.assert_array_equal(model.components_[j * m : (j + 1) * m], kds.components_)
    # independent initial atoms: no two dictionaries alike
    assert not np.allclose(model.estimators_[0].components_, model.estimators_[1].components_)


def test_joint_affinity_is_the_mean_of_the_dictionaries(ensemble_moons, moons):
    # Z Z^T with Z = X diag(s)^(-1/2): the joint graph's point affinity is the
    # mean over the dictionaries of each one's (the module's claim)
    Y, _ = moons
    model = ensemble_moons

    def affinity(X):
        X = X.toarray()
        s = X.sum(axis=0)
        Z = X[:, s > 0] / np.sqrt(s[s > 0])
        return Z @ Z.T

    each = [affinity(kds.transform(Y)) for kds in model.estimators_]
    np.testing.assert_allclose(affinity(model._joint_codes(Y)), np.mean(each, axis=0), atol=1e-12)


@pytest.mark.parametrize("embedding", ["leading", "diffusion"])
def test_embedding_matches_dense_svd(moons, embedding):
    # SPEC 6 on the joint graph, the oracle: left singular vectors of
    # Z = X diag(s)^(-1/2) from a dense SVD (no m x m shortcut), the top k or
    # (diffusion) the top 2k, weighted
    Y, _ = moons
    k = 3
    model = KDSEnsembleClustering(
        k, estimator=KDS(**MOONS_KDS), n_estimators=2, min_component=0.0, embedding=embedding, random_state=2
    ).fit(Y)
    X = model._joint_codes(Y).toarray()
    s = X.sum(axis=0)
    Uz, sig = _naive.spectral_embedding(X[:, s > 0], k, embedding, DIFFUSION_STEPS)
    np.testing.assert_allclose(model.eigenvalues_[: sig.size], sig**2, atol=1e-10)
    U = model.spectrum_.embed(model._joint_codes(Y), k)
    assert U.shape[1] == (k if embedding == "leading" else 2 * k)
    # the same weighted columns (which may differ in sign, or turn within an
    # eigenspace, whose columns share a weight)
    np.testing.assert_allclose(U @ U.T, Uz @ Uz.T, atol=1e-8)


def test_clusters_moons_and_predicts_its_own_labels(ensemble_moons, moons):
    Y, y = moons
    assert clustering_accuracy(y, ensemble_moons.labels_) >= 0.99
    np.testing.assert_array_equal(ensemble_moons.predict(Y), ensemble_moons.labels_)
    assert ensemble_moons.components_.shape == (3 * 24, 2)


def test_pickle_round_trip(ensemble_moons, moons):
    loaded = pickle.loads(pickle.dumps(ensemble_moons))
    np.testing.assert_array_equal(loaded.predict(moons[0]), ensemble_moons.labels_)


@pytest.mark.parametrize("solver", ["exact", "unrolled"])
def test_dictionaries_fitted_in_parallel_are_the_same(moons, solver):
    # n_jobs=2: two worker processes; each clone is seeded before it is sent,
    # so the dictionaries, and all that follows, are those of n_jobs=None
    Y, _ = moons
    options = dict(solver="unrolled", batch_size=64, max_epochs=2) if solver == "unrolled" else {}
    params = dict(estimator=KDS(**{**MOONS_KDS, **options}), n_estimators=3, random_state=0)
    one = KDSEnsembleClustering(2, **params).fit(Y)
    if solver == "exact":  # stopped at max_epochs: the workers' warning is raised here
        with pytest.warns(ConvergenceWarning, match="did not converge"):
            two = KDSEnsembleClustering(2, n_jobs=2, **params).fit(Y)
    else:
        two = KDSEnsembleClustering(2, n_jobs=2, **params).fit(Y)
    np.testing.assert_array_equal(two.components_, one.components_)
    np.testing.assert_array_equal(two.labels_, one.labels_)
    assert [kds.n_jobs for kds in two.estimators_] == [None] * 3  # the workers' thread cap is not kept


def test_auto_clusters_from_the_eigengap():
    # three blobs: one component of the joint code graph each, eigenvalue 1
    Y, labels = make_blobs(600, centers=[[0, 0], [20, 0], [0, 20]], cluster_std=0.5, random_state=0)
    model = KDSEnsembleClustering("auto", estimator=KDS(12), n_estimators=3, random_state=0).fit(Y)
    assert model.n_clusters_ == 3
    np.testing.assert_allclose(model.eigenvalues_[:3], 1.0, atol=1e-8)
    assert model.eigenvalues_[3] < 0.9
    assert clustering_accuracy(labels, model.labels_) == 1.0


def test_float32_and_input_untouched(moons):
    Y = moons[0].astype(np.float32)
    before = Y.copy()
    model = KDSEnsembleClustering(2, estimator=KDS(**MOONS_KDS), n_estimators=2, random_state=0).fit(Y)
    np.testing.assert_array_equal(Y, before)
    assert model.components_.dtype == np.float32
    assert model.transform(Y[:10]).shape == (10, 4)  # the diffusion embedding: 2k columns


def test_the_template_estimator_is_not_fitted(moons):
    template = KDS(**MOONS_KDS)
    KDSEnsembleClustering(2, estimator=template, n_estimators=2, random_state=0).fit(moons[0])
    assert not hasattr(template, "components_")
    assert template.random_state is None


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(estimator=KDSClustering(2)), TypeError, "estimator must be a fastkds.KDS"),
        (dict(n_estimators=0), ValueError, "n_estimators"),
        (dict(n_clusters="many"), ValueError, "n_clusters"),
        (dict(min_component=-1.0), ValueError, "min_component"),
        (dict(n_jobs=0), ValueError, "n_jobs"),
        (dict(n_jobs="2"), TypeError, "n_jobs"),
    ],
)
def test_bad_parameters(moons, params, error, match):
    with pytest.raises(error, match=match):
        KDSEnsembleClustering(**{"n_clusters": 2, **params}).fit(moons[0])


def test_bad_input(ensemble_moons, moons):
    Y = moons[0].copy()
    Y[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KDSEnsembleClustering(2, estimator=KDS(4), n_estimators=2).fit(Y)
    with pytest.raises(ValueError, match="features"):
        ensemble_moons.predict(np.ones((5, 3)))
    with pytest.raises(NotFittedError):
        KDSEnsembleClustering(2).predict(moons[0])
    with pytest.raises(ValueError, match="n_atoms"):  # atoms given as init cannot shrink to the data
        KDSEnsembleClustering(2, estimator=KDS(50, init=moons[0][:50]), n_estimators=2).fit(moons[0][:20])


def test_dask_array_is_refused_clearly(moons):
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match="Dask"):
        KDSEnsembleClustering(2, estimator=KDS(4)).fit(da.from_array(moons[0], chunks=500))


def test_chunked_input(moons, tmp_path):
    # data read in chunks from a .npy file: the same result as in memory
    Y, _ = moons
    path = tmp_path / "Y.npy"
    np.save(path, Y)
    params = dict(estimator=KDS(**MOONS_KDS, chunk_size=400), n_estimators=2, random_state=0)
    in_memory = KDSEnsembleClustering(2, **params).fit(Y)
    chunked = KDSEnsembleClustering(2, n_jobs=2, **params).fit(str(path))  # fitted one at a time
    np.testing.assert_allclose(chunked.components_, in_memory.components_, atol=1e-10)
    np.testing.assert_array_equal(chunked.labels_, in_memory.labels_)
    assert sp.issparse(chunked._joint_codes(np.load(path)))
    # data given as chunks: a list is read once per dictionary, a one-shot iterator cannot be
    chunks = [Y[:700], Y[700:]]
    np.testing.assert_array_equal(chunked.predict(chunks), chunked.labels_)
    with pytest.raises(TypeError, match="once per dictionary"):
        chunked.transform(iter(chunks))


DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.skipif(not (DATA / "yaleb").is_dir(), reason="shared/data/yaleb not found beside the checkout")
def test_yaleb_faces_separated_by_five_dictionaries():
    # Two Yale B faces, unit-norm images, 64 random images as the atoms of
    # each dictionary (one Adam step: nearly untrained). One dictionary
    # misplaces up to 14 of the 128 images, depending on its atoms; five
    # side by side separate the faces on every seed tried
    # (docs/experiments.md has the trained version). The k-means labels of
    # the codes, without the neighbours' vote: a measure of the code graphs.
    from fastkds.datasets import load_yaleb, preprocess

    Y, y = load_yaleb(DATA / "yaleb")
    Y = preprocess(Y, "unit_norm")
    params = dict(
        n_atoms=64,
        lam=0.1,
        n_iter=50,
        solver="unrolled",
        max_epochs=1,
        batch_size=128,
        learning_rate=1e-4,
        init="random",
    )
    single = []
    for seed in range(5):
        model = KDSEnsembleClustering(
            2, estimator=KDS(**params), n_estimators=5, vote_neighbors=None, random_state=seed
        ).fit(Y)
        assert clustering_accuracy(y, model.labels_) == 1.0, seed
        one = KDSClustering(2, vote_neighbors=None, random_state=seed, **params).fit(Y)
        single.append(clustering_accuracy(y, one.labels_))
    assert min(single) < 1.0  # the case is not trivial for one dictionary


@pytest.mark.filterwarnings("ignore")
def test_auto_clusters_on_one_point_is_one_cluster():
    """n_clusters="auto" never chooses more clusters than points: the
    stacked dictionaries of one point hold several copies of it (k-means
    was asked for 2 clusters of 1 point before), as KDSClustering gives."""
    X = np.array([[0.0, 1.0]])
    model = KDSEnsembleClustering(random_state=0).fit(X)
    assert model.n_clusters_ == 1 == KDSClustering(random_state=0).fit(X).n_clusters_
    np.testing.assert_array_equal(model.labels_, [0])

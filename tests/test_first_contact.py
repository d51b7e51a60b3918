"""What a new user meets first (issue 24): scikit-learn's estimator checks
with default parameters, feature names and DataFrame output, ``verbose``,
the deprecated ``score`` and how to choose ``lam``, warning classes and
where warnings point, and ``n_clusters="auto"`` on the usual shapes."""

import copy
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastkds import KDS, KDSClustering, KDSEnsembleClustering, clustering_accuracy, make_circles, make_moons
from fastkds.exceptions import (
    KDSConvergenceWarning,
    KDSWarning,
    OffCentreDataWarning,
    TooFewSamplesWarning,
)
from fastkds.spectral import BipartiteSpectrum


# -- scikit-learn's checks with default parameters ---------------------------------


@parametrize_with_checks([KDS(), KDSClustering(), KDSEnsembleClustering()])
def test_sklearn_checks_with_default_parameters(estimator, check):
    check(estimator)


# scikit-learn's own set_output checks, which check_estimator does not run;
# the DataFrame ones skip without pandas or polars
SET_OUTPUT_CHECKS = [
    "check_set_output_transform",
    "check_set_output_transform_pandas",
    "check_global_output_transform_pandas",
    "check_set_output_transform_polars",
    "check_global_set_output_transform_polars",
]


@pytest.mark.parametrize("check", SET_OUTPUT_CHECKS)
@pytest.mark.parametrize("estimator", [KDS(), KDSClustering(), KDSEnsembleClustering()], ids=repr)
def test_sklearn_set_output_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KDSWarning)
        getattr(estimator_checks, check)(type(estimator).__name__, estimator)


# -- verbose -------------------------------------------------------------------------


@pytest.mark.parametrize("verbose", [True, False, 0, 2, np.int64(1), np.bool_(True)])
def test_verbose_takes_bools_and_ints(verbose):
    Y, _ = make_moons(100, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KDSWarning)
        kds = KDS(4, max_epochs=2, verbose=verbose, random_state=0).fit(Y)
    assert kds.components_.shape == (4, 2)


def test_progress_bar_ends_at_the_epochs_run(capsys):
    Y, _ = make_moons(2000, random_state=0)
    kds = KDS(8, lam=5.0, n_iter=10, max_epochs=100, verbose=1, random_state=0).fit(Y)
    assert kds.n_iter_ < 100  # converged early
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert f"{kds.n_iter_}/{kds.n_iter_}" in last, last


@pytest.mark.parametrize("verbose, error", [(-1, ValueError), (1.5, TypeError), ("yes", TypeError)])
def test_bad_verbose_fails_clearly(verbose, error):
    Y, _ = make_moons(100, random_state=0)
    with pytest.raises(error, match="verbose must be a bool or an int >= 0"):
        KDS(4, max_epochs=2, verbose=verbose).fit(Y)


# -- feature names and DataFrame output ----------------------------------------------


@pytest.fixture(scope="module")
def moons():
    return make_moons(600, random_state=0)


@pytest.fixture(scope="module")
def kds(moons):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KDSWarning)
        return KDS(8, max_epochs=5, random_state=0).fit(moons[0])


def test_kds_feature_names_are_one_per_atom(kds):
    names = kds.get_feature_names_out()
    assert list(names) == [f"kds{j}" for j in range(8)]
    assert names.dtype == object


def test_feature_names_need_a_fit():
    with pytest.raises(NotFittedError):
        KDS(4).get_feature_names_out()
    with pytest.raises(NotFittedError):
        KDSClustering(2).get_feature_names_out()


def test_clusterer_feature_names_match_the_embedding(moons):
    Y, _ = moons
    model = KDSClustering(2, n_atoms=12, lam=5.0, max_epochs=5, random_state=0).fit(Y)
    names = model.get_feature_names_out()
    assert len(names) == model.transform(Y[:5]).shape[1] == model.embedding_.shape[1]
    assert names[0] == "kdsclustering0"


def _fitted_state(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_")}


@pytest.mark.parametrize("container", ["pandas", "polars"])
def test_dataframe_output_of_sparse_codes_is_a_clear_error(kds, moons, container):
    Y, _ = moons
    model = KDS(8, max_epochs=5, random_state=0).set_output(transform=container)
    with pytest.raises(
        ValueError, match=f"{container.capitalize()} output does not support sparse data.*from_spmatrix"
    ):
        model.fit_transform(Y)
    assert _fitted_state(model) == {}  # refused before the fit
    fitted = copy.deepcopy(kds).set_output(transform=container)
    with pytest.raises(ValueError, match="does not support sparse data"):
        fitted.transform(Y)
    # back to the default: codes again
    assert sp.issparse(fitted.set_output(transform="default").transform(Y))


def test_global_pandas_output_is_not_silently_ignored(kds, moons):
    Y, _ = moons
    with sklearn.config_context(transform_output="pandas"):
        with pytest.raises(ValueError, match="Pandas output does not support sparse data"):
            kds.transform(Y)
    assert sp.issparse(kds.transform(Y))


def test_clusterer_pandas_output_is_a_named_dataframe(moons):
    pd = pytest.importorskip("pandas")
    Y, _ = moons
    model = KDSClustering(2, n_atoms=12, lam=5.0, max_epochs=5, random_state=0).fit(Y)
    frame = model.set_output(transform="pandas").transform(pd.DataFrame(Y, columns=["a", "b"]))
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(model.get_feature_names_out())


# -- score and choosing lam ----------------------------------------------------------


def test_score_is_deprecated_minus_the_objective(kds, moons):
    Y, _ = moons
    with pytest.warns(FutureWarning, match="KDS.score is deprecated.*KDS.objective") as record:
        score = kds.score(Y)
    assert score == pytest.approx(-kds.objective(Y), rel=1e-12)
    assert record[0].filename == __file__


def test_objective_of_the_model_alone_cannot_choose_lam():
    """The reason score is deprecated: on held-out points the reconstruction
    error is smallest at the smallest lam, the locality term at the largest."""
    Y, _ = make_moons(1500, random_state=0)
    train, test = Y[:1000], Y[1000:]
    rec, loc = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KDSWarning)
        for lam in (0.01, 1.0, 20.0):
            kds = KDS(12, lam=lam, random_state=0).fit(train)
            codes = kds.transform(test)
            W = kds.components_
            rec.append(np.mean(np.sum((test - codes @ W) ** 2, axis=1)))
            d2 = np.sum((test[:, None, :] - W[None]) ** 2, axis=2)
            loc.append(np.mean(np.asarray(codes.multiply(d2).sum(axis=1))))
    assert rec == sorted(rec)
    assert loc == sorted(loc, reverse=True)


def test_grid_search_over_lam_by_the_task_does_not_pick_the_smallest():
    # the code graph's labels (vote_neighbors=None): with the vote, 800
    # points search their neighbours exactly, and their kNN graph labels
    # these moons at either lam (ARI 1.0 on every fold)
    Y, y = make_moons(1200, random_state=0)
    grid = GridSearchCV(
        KDSClustering(2, n_atoms=24, n_iter=15, max_epochs=20, vote_neighbors=None, random_state=0),
        {"lam": [0.001, 5.0]},
        scoring="adjusted_rand_score",
        cv=KFold(3, shuffle=True, random_state=0),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KDSWarning)
        grid.fit(Y, y)
    scores = grid.cv_results_["mean_test_score"]
    assert grid.best_params_ == {"lam": 5.0}
    assert scores[1] > scores[0] + 0.2


# -- warning classes, raised at the caller's line -----------------------------------


def test_warning_classes_subclass_the_general_ones():
    assert issubclass(KDSConvergenceWarning, ConvergenceWarning)
    for category in (KDSConvergenceWarning, OffCentreDataWarning, TooFewSamplesWarning):
        assert issubclass(category, KDSWarning) and issubclass(category, UserWarning)


def _caught(call):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        call()
    return record


def _one(record, category):
    found = [w for w in record if issubclass(w.category, category)]
    assert found, [str(w.message) for w in record]
    return found[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda Y: KDS(4, max_epochs=2, random_state=0).fit(Y),
        lambda Y: KDS(4, max_epochs=2, random_state=0).fit_transform(Y),
        lambda Y: KDSClustering(2, n_atoms=4, max_epochs=2, random_state=0).fit(Y),
        lambda Y: KDSClustering(2, n_atoms=4, max_epochs=2, random_state=0).fit_predict(Y),
        lambda Y: KDSEnsembleClustering(2, estimator=KDS(4, max_epochs=2), n_estimators=2, random_state=0).fit(Y),
    ],
    ids=["fit", "fit_transform", "clustering-fit", "fit_predict", "ensemble-fit"],
)
def test_convergence_warning_points_at_the_callers_line(call):
    Y, _ = make_moons(200, random_state=0)
    w = _one(_caught(lambda: call(Y)), KDSConvergenceWarning)
    assert w.filename == __file__


def test_off_centre_warning_points_at_the_callers_line():
    Y, _ = make_moons(200, random_state=0)
    w = _one(
        _caught(lambda: KDS(4, step="paper", encoder="apg", max_epochs=2, random_state=0).fit(Y + 1000.0)),
        OffCentreDataWarning,
    )
    assert w.filename == __file__


# -- fewer points than atoms ---------------------------------------------------------


def test_fewer_points_than_atoms_learns_one_atom_per_point():
    Y, _ = make_moons(10, random_state=0)
    kds = KDS(16, random_state=0)
    w = _one(_caught(lambda: kds.fit(Y)), TooFewSamplesWarning)
    assert w.filename == __file__ and "n_samples=10 is smaller than n_atoms=16" in str(w.message)
    assert kds.components_.shape == (10, 2)
    codes = kds.transform(Y)
    assert codes.shape == (10, 10)
    np.testing.assert_allclose(codes.sum(axis=1), 1.0, rtol=1e-12)
    assert len(kds.get_feature_names_out()) == 10


def test_fewer_points_than_given_init_atoms_is_an_error():
    Y, _ = make_moons(10, random_state=0)
    with pytest.raises(ValueError, match="n_samples=10 is smaller than n_atoms=16, the atoms given as init"):
        KDS(16, init=np.zeros((16, 2))).fit(Y)


# -- n_clusters="auto" ---------------------------------------------------------------


def _chain_codes(lengths, link, rng, points_per_atom=30):
    """Codes of points strung along chains of atoms (one chain per cluster),
    each point between two neighbouring atoms; chain ends joined by ``link``."""
    rows, offset = [], 0
    for length in lengths:
        for j in range(length - 1):
            t = rng.uniform(0.0, 1.0, points_per_atom)
            block = np.zeros((points_per_atom, sum(lengths)))
            block[:, offset + j] = 1 - t
            block[:, offset + j + 1] = t
            rows.append(block)
        offset += length
    X = np.vstack(rows)
    # a few points bridge the end of each chain to the start of the next
    starts = np.cumsum([0, *lengths[:-1]])
    for a, b in zip(starts[1:] - 1, starts[1:]):
        bridge = np.zeros((1, X.shape[1]))
        bridge[0, a], bridge[0, b] = 1 - link, link
        X = np.vstack([X, bridge])
    return X


@pytest.mark.parametrize("lengths", [(20, 20), (15, 20, 25)])
def test_auto_counts_chains_not_pieces_of_them(lengths):
    """Weakly joined chains of atoms (the code graph of moons or spiral arms):
    one cluster per chain. Inside a chain the Laplacian's eigenvalues grow
    like j^2, so their differences grow too and the plain eigengap chose a
    large k; the ratio finds the chains."""
    X = _chain_codes(lengths, link=0.02, rng=np.random.default_rng(0))
    spectrum = BipartiteSpectrum(X.T @ X, X.sum(axis=0))
    assert spectrum.eigengap(20) == len(lengths)
    ev = spectrum.eigenvalues
    assert np.argmax(ev[1:20] - ev[2:21]) + 2 > len(lengths)  # the difference would not


def _spirals(n, arms, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, arms, n)
    t = np.sqrt(rng.uniform(0.05, 1.0, n))
    angle = 2 * np.pi * t + 2 * np.pi * labels / arms
    Y = np.c_[t * np.cos(angle), t * np.sin(angle)] + 0.03 * rng.normal(size=(n, 2))
    return Y, labels


def _four_blobs(n, seed):
    return make_blobs(n, centers=[(-5, -5), (-5, 5), (5, -5), (5, 5)], random_state=seed)


# data, parameters under which the clusters are found when their number is given
AUTO_CASES = {
    "moons": (lambda seed: make_moons(3000, random_state=seed), {}),
    "moons-lam5": (lambda seed: make_moons(2000, random_state=seed), dict(lam=5.0, n_iter=15)),
    "circles": (lambda seed: make_circles(1000, 0.5, random_state=seed), dict(n_atoms=24, lam=2.0, n_iter=30)),
    "spirals": (lambda seed: _spirals(2000, 3, seed), dict(lam=5.0)),
    "blobs": (lambda seed: _four_blobs(1000, seed), {}),
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("case", list(AUTO_CASES))
def test_auto_finds_the_number_of_clusters(case, seed):
    make, params = AUTO_CASES[case]
    Y, labels = make(seed)
    k = len(np.unique(labels))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KDSWarning)
        model = KDSClustering(random_state=seed, **params).fit(Y)
    assert model.n_clusters_ == k
    assert clustering_accuracy(labels, model.labels_) > 0.95


def test_first_partial_fit_chunk_smaller_than_n_atoms_as_fit_does():
    Y, _ = make_moons(10, random_state=0)
    kds = KDS(16, random_state=0)
    w = _one(_caught(lambda: kds.partial_fit(Y)), TooFewSamplesWarning)
    assert w.filename == __file__
    assert kds.components_.shape == (10, 2)
    kds.partial_fit(make_moons(50, random_state=1)[0])  # later chunks keep the atoms
    assert kds.components_.shape == (10, 2)

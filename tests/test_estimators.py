"""Tests of the scikit-learn estimators :class:`fastkds.KDS` and
:class:`fastkds.KDSClustering`: the scikit-learn estimator checks, results on
the paper's noisy moons, determinism across thread counts, input validation
and pickling."""

import pickle
import subprocess
import sys
import warnings

import numba
import numpy as np
import pytest
import scipy.sparse as sp
import threadpoolctl
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastkds import KDS, KDSClustering, _naive, clustering_accuracy, make_moons, sparse_encode
from fastkds._config import numba_threads
from fastkds.prepared import PreparedDictionary
from fastkds.exceptions import TooFewSamplesWarning

# Short fits stop at max_epochs on purpose; the warning is tested on its own.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


# -- scikit-learn estimator checks ---------------------------------------------

CHECKED_ESTIMATORS = [
    KDS(n_atoms=4, max_epochs=5, random_state=0),
    KDSClustering(n_clusters=2, n_atoms=4, max_epochs=5, random_state=0),
]

# Checks that cannot pass by design, with the reason. None at present: with
# n_atoms=4 every check's data has at least as many samples as atoms (the
# 1-sample check expects the ValueError KDS raises), and both estimators accept
# everything else the checks feed them.
EXPECTED_FAILED_CHECKS = {
    "KDS": {},
    "KDSClustering": {},
}


def _expected_failed_checks(estimator):
    return EXPECTED_FAILED_CHECKS[type(estimator).__name__]


def _split_checkable(estimators):
    """Estimators whose checks scikit-learn can generate, and the errors of the rest.

    ``parametrize_with_checks`` refuses (RuntimeError, at collection) an
    estimator whose tags contradict its methods, e.g. one with ``transform``
    but no ``transformer_tags``. Such an estimator gets one failing test below
    instead of taking the whole module down with a collection error.
    """
    checkable, errors = [], {}
    for est in estimators:
        try:
            parametrize_with_checks([est], expected_failed_checks=_expected_failed_checks)
        except RuntimeError as exc:
            errors[type(est).__name__] = f"{type(exc).__name__}: {exc}"
        else:
            checkable.append(est)
    return checkable, errors


_CHECKABLE, _CHECK_GENERATION_ERRORS = _split_checkable(CHECKED_ESTIMATORS)


@pytest.mark.parametrize("name", [type(e).__name__ for e in CHECKED_ESTIMATORS])
def test_sklearn_checks_can_be_generated(name):
    assert name not in _CHECK_GENERATION_ERRORS, _CHECK_GENERATION_ERRORS.get(name)


@parametrize_with_checks(_CHECKABLE, expected_failed_checks=_expected_failed_checks, xfail_strict=True)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("method", ["transform", "predict"])
def test_unfitted_clustering_raises_not_fitted(method):
    Y, _ = make_moons(50, random_state=0)
    with pytest.raises(NotFittedError):
        getattr(KDSClustering(2, n_atoms=4), method)(Y)


@pytest.mark.parametrize("method", ["transform", "inverse_transform", "objective"])
def test_unfitted_kds_raises_not_fitted(method):
    Y, _ = make_moons(50, random_state=0)
    with pytest.raises(NotFittedError):
        getattr(KDS(4), method)(Y)


# -- KDS on the paper's noisy moons --------------------------------------------

MOONS_PARAMS = dict(lam=5.0, n_iter=15, max_epochs=20, random_state=0)


@pytest.fixture(scope="module")
def moons():
    return make_moons(2000, random_state=0)


@pytest.fixture(scope="module")
def kds_moons(moons):
    Y, _ = moons
    return KDS(24, **MOONS_PARAMS).fit(Y)


@pytest.fixture(scope="module")
def codes_moons(kds_moons, moons):
    return kds_moons.transform(moons[0])


def test_kds_fitted_attributes(kds_moons):
    assert kds_moons.components_.shape == (24, 2)
    assert kds_moons.components_.dtype == np.float64
    assert np.all(np.isfinite(kds_moons.components_))
    assert kds_moons.n_features_in_ == 2
    assert 1 <= kds_moons.n_iter_ <= MOONS_PARAMS["max_epochs"]
    W = kds_moons.components_
    # the default step: of the centred dictionary
    assert kds_moons.step_ == pytest.approx(1.0 / np.linalg.norm(W - W.mean(axis=0), 2) ** 2, rel=1e-10)


def test_kds_objective_history(kds_moons):
    assert kds_moons.objective_.shape == (kds_moons.n_iter_,)
    assert np.all(np.isfinite(kds_moons.objective_))
    assert np.all(kds_moons.objective_ >= 0)
    # Alternating minimisation improves on the initial dictionary.
    assert kds_moons.objective_[-1] < kds_moons.objective_[0]


def repeated_moons_with_outliers(seed):
    """Moons whose rows repeat, with two far points that keep atoms of their
    own, as on Salinas-A: with one step for every point (the paper's), the
    objective rises between epochs."""
    Y, _ = make_moons(400, random_state=seed)
    return np.vstack([np.repeat(Y, 4, axis=0), [[40.0, 40.0], [-25.0, 30.0]]])


@pytest.mark.parametrize("tol", [1e-3, 1e-2])
def test_kds_stops_at_the_first_epoch_that_does_not_improve(tol):
    Y = repeated_moons_with_outliers(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        kds = KDS(16, tol=tol, max_epochs=60, step="paper", encoder="apg", random_state=1).fit(Y)
    F = kds.objective_
    assert F[-1] > F[-2]  # the objective rose: a change of more than tol, but no improvement
    # every epoch before the last lowered the lowest objective so far by more than tol of it
    for i in range(1, len(F) - 1):
        assert F[i] < (1 - tol) * F[:i].min()
    assert F[-1] >= (1 - tol) * F[:-1].min()
    assert kds.n_iter_ == len(F) < 60


def test_far_atoms_keep_the_objective_falling():
    """The centred step leaves the two far points' atoms aside for the other
    points (fastkds.prepared.far_atoms): every epoch lowers the objective,
    where one step for every point makes it rise (the test above)."""
    Y = repeated_moons_with_outliers(1)
    with pytest.warns(ConvergenceWarning, match="max_epochs"):
        kds = KDS(16, tol=0.0, max_epochs=20, random_state=1).fit(Y)
    assert np.all(np.diff(kds.objective_) < 0)


def test_kds_tol_zero_runs_every_epoch():
    Y = repeated_moons_with_outliers(1)
    with pytest.warns(ConvergenceWarning, match="max_epochs"):
        kds = KDS(16, tol=0.0, max_epochs=6, random_state=1).fit(Y)
    assert kds.n_iter_ == 6 and kds.objective_.shape == (6,)


def test_kds_transform_is_sparse_simplex(codes_moons):
    codes = codes_moons
    assert isinstance(codes, sp.csr_array)
    assert codes.shape == (2000, 24)
    assert codes.dtype == np.float64
    assert codes.data.min() > 0  # only the support is stored, no explicit zeros
    np.testing.assert_allclose(codes.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert codes.has_sorted_indices
    # lam = 5 makes the codes local: a few atoms per point, not all 24.
    assert codes.nnz / codes.shape[0] < 6


def test_kds_active_set_transform_gives_optimal_codes(moons):
    """encoder="active-set": the codes meet the KKT conditions to rounding,
    and lie no more than rounding above the objective of 3000 steps of the
    NumPy oracle's accelerated encoder."""
    Y = moons[0]
    model = KDS(24, encoder="active-set", **MOONS_PARAMS).fit(Y)
    W = model.components_
    X = model.transform(Y).toarray()
    assert _naive.kkt_residual(Y, W, X, 5.0).max() < 1e-12
    many = _naive.encode(Y, W, 5.0, 3000)
    assert _naive.kkt_residual(Y, W, many, 5.0).max() < 1e-6  # the oracle got there too
    gap = _naive.objective(Y, W, X, 5.0) - _naive.objective(Y, W, many, 5.0)
    assert gap.max() < 1e-12
    # 3000 accelerated steps still move the worst-conditioned codes in the fifth digit
    np.testing.assert_allclose(X, many, rtol=0, atol=1e-3)


def test_kds_transform_matches_numpy_oracle(kds_moons, codes_moons, moons):
    """The encoder "auto" takes at lam = 5: T=15 accelerated steps on the centred problem, as the oracle's."""
    expected = _naive.encode(moons[0], kds_moons.components_, 5.0, 15)
    np.testing.assert_allclose(codes_moons.toarray(), expected, rtol=0, atol=1e-10)


def test_kds_fit_transform_equals_fit_then_transform(moons):
    Y, _ = moons
    a = KDS(24, **MOONS_PARAMS)
    codes_a = a.fit_transform(Y)
    b = KDS(24, **MOONS_PARAMS).fit(Y)
    codes_b = b.transform(Y)
    assert isinstance(codes_a, sp.csr_array)
    assert np.array_equal(a.components_, b.components_)
    assert np.array_equal(codes_a.toarray(), codes_b.toarray())


def test_kds_inverse_transform(kds_moons, codes_moons):
    Y_hat = kds_moons.inverse_transform(codes_moons)
    assert isinstance(Y_hat, np.ndarray)
    assert Y_hat.shape == (2000, 2)
    np.testing.assert_allclose(Y_hat, codes_moons.toarray() @ kds_moons.components_, atol=1e-12)
    # Dense codes give the same reconstruction.
    np.testing.assert_allclose(kds_moons.inverse_transform(codes_moons.toarray()), Y_hat, atol=1e-12)
    with pytest.raises(ValueError, match="n_atoms"):
        kds_moons.inverse_transform(np.ones((3, 5)))
    with pytest.raises(ValueError, match="n_atoms"):
        kds_moons.inverse_transform(sp.csr_array(np.ones((3, 5))))


def test_kds_objective_is_the_mean_objective(kds_moons, codes_moons, moons):
    Y, _ = moons
    expected = _naive.objective(Y, kds_moons.components_, codes_moons.toarray(), 5.0).mean()
    objective = kds_moons.objective(Y)
    assert np.isfinite(objective)
    assert objective == pytest.approx(expected, rel=1e-10)
    with pytest.warns(FutureWarning, match="deprecated"):  # score: minus the objective, until removed
        assert kds_moons.score(Y) == -objective


def test_kds_float32_preserved(moons):
    Y32 = moons[0].astype(np.float32)
    model = KDS(24, **MOONS_PARAMS).fit(Y32)
    assert model.components_.dtype == np.float32
    codes = model.transform(Y32)
    assert isinstance(codes, sp.csr_array)
    assert codes.dtype == np.float32
    np.testing.assert_allclose(codes.sum(axis=1), 1.0, atol=1e-5)
    assert model.inverse_transform(codes).dtype == np.float32


def test_big_endian_float32_stays_float32(moons):
    # scikit-learn turns a dtype outside its list into float64; the bytes'
    # order must not change the precision (nor the results)
    Y32 = moons[0].astype(np.float32)
    native = KDS(24, **MOONS_PARAMS).fit(Y32)
    model = KDS(24, **MOONS_PARAMS).fit(Y32.astype(">f4"))
    assert model.components_.dtype == np.float32
    np.testing.assert_array_equal(model.components_, native.components_)
    codes = model.transform(Y32.astype(">f4"))
    assert codes.dtype == np.float32
    assert (codes != native.transform(Y32)).nnz == 0
    assert sparse_encode(Y32.astype(">f4"), model.components_.astype(">f4")).dtype == np.float32


def test_kds_init_array_is_used_and_not_modified(moons):
    Y, _ = moons
    W0 = Y[::80][:24].copy()
    W0_copy = W0.copy()
    a = KDS(24, init=W0, max_epochs=3, random_state=0).fit(Y)
    assert np.array_equal(W0, W0_copy)
    # The given atoms replace the random seeding: random_state no longer matters...
    b = KDS(24, init=W0, max_epochs=3, random_state=1).fit(Y)
    assert np.array_equal(a.components_, b.components_)
    # ...and the result differs from a k-means++ start.
    c = KDS(24, max_epochs=3, random_state=0).fit(Y)
    assert not np.allclose(a.components_, c.components_)


def test_kds_convergence_warning(moons):
    with pytest.warns(ConvergenceWarning, match="max_epochs"):
        KDS(8, max_epochs=2, tol=0.0, random_state=0).fit(moons[0][:300])


def test_kds_verbose_shows_progress(moons, capsys):
    KDS(8, max_epochs=2, random_state=0, verbose=1).fit(moons[0][:300])
    assert "KDS epochs" in capsys.readouterr().err


# -- KDSClustering --------------------------------------------------------------


@pytest.fixture(scope="module")
def moons3000():
    return make_moons(3000, random_state=0)


@pytest.fixture(scope="module")
def clustering_moons(moons3000):
    Y, _ = moons3000
    return KDSClustering(2, n_atoms=24, lam=5.0, n_iter=15, random_state=0).fit(Y)


def test_clustering_moons_accuracy(clustering_moons, moons3000):
    _, labels = moons3000
    assert clustering_moons.labels_.shape == (3000,)
    assert set(np.unique(clustering_moons.labels_)) == {0, 1}
    assert clustering_moons.n_clusters_ == 2
    assert clustering_accuracy(labels, clustering_moons.labels_) >= 0.99


def test_clustering_predict_agrees_with_labels(clustering_moons, moons3000):
    Y, _ = moons3000
    assert np.mean(clustering_moons.predict(Y) == clustering_moons.labels_) >= 0.99


def test_clustering_predict_unseen_points(clustering_moons):
    Y_new, labels_new = make_moons(1000, random_state=5)
    assert clustering_accuracy(labels_new, clustering_moons.predict(Y_new)) >= 0.97


def test_clustering_embedding_and_spectrum(clustering_moons):
    emb = clustering_moons.embedding_
    assert emb.shape == (3000, 4)  # embedding="diffusion": the 2 leading modes and the next 2
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-10)
    ev = clustering_moons.eigenvalues_
    assert ev.ndim == 1 and ev.size >= 2
    assert np.all(np.diff(ev) <= 1e-12), "eigenvalues_ must be decreasing"
    assert ev[0] == pytest.approx(1.0, abs=1e-8)
    assert ev.min() >= -1e-10 and ev.max() <= 1 + 1e-10
    assert clustering_moons.transform(make_moons(10, random_state=1)[0]).shape == (10, 4)


def test_clustering_fitted_attributes(clustering_moons):
    assert clustering_moons.components_ is clustering_moons.kds_.components_
    assert clustering_moons.components_.shape == (24, 2)
    assert clustering_moons.n_features_in_ == 2
    assert set(clustering_moons.timings_) == {"dictionary", "encode", "embed", "kmeans", "vote"}
    assert all(t >= 0 for t in clustering_moons.timings_.values())


@pytest.mark.parametrize(
    "centers",
    [[[0, 0], [20, 0]], [[0, 0], [20, 0], [0, 20]]],
    ids=["2-blobs", "3-blobs"],
)
def test_clustering_auto_finds_number_of_blobs(centers):
    Y, labels = make_blobs(600, centers=centers, cluster_std=0.5, random_state=0)
    model = KDSClustering("auto", n_atoms=12, random_state=0).fit(Y)
    k = len(centers)
    assert model.n_clusters_ == k
    assert model.embedding_.shape == (600, 2 * k)
    # One eigenvalue 1 per connected component of the code graph.
    np.testing.assert_allclose(model.eigenvalues_[:k], 1.0, atol=1e-8)
    assert model.eigenvalues_[k] < 0.9
    assert clustering_accuracy(labels, model.labels_) == 1.0


# -- determinism ----------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [None, 500])
def test_kds_same_result_for_any_n_jobs(chunk_size):
    Y, _ = make_moons(3000, random_state=1)
    results = []
    for n_jobs in (1, 2):
        model = KDS(24, lam=5.0, n_iter=15, max_epochs=10, random_state=0, n_jobs=n_jobs, chunk_size=chunk_size).fit(Y)
        codes = model.transform(Y)
        results.append((model.components_, codes.indptr, codes.indices, codes.data, model.objective(Y)))
    for a, b in zip(*results):
        assert np.array_equal(a, b)


def test_clustering_same_result_for_any_n_jobs():
    Y, _ = make_moons(3000, random_state=1)
    results = []
    for n_jobs in (1, 2):
        model = KDSClustering(
            2, n_atoms=24, lam=5.0, n_iter=15, max_epochs=10, random_state=0, n_jobs=n_jobs, chunk_size=500
        ).fit(Y)
        results.append((model.components_, model.labels_, model.embedding_, model.eigenvalues_))
    for a, b in zip(*results):
        assert np.array_equal(a, b)


def test_random_state_repeats_and_varies():
    Y, _ = make_moons(500, random_state=2)
    a = KDS(8, max_epochs=5, random_state=3).fit(Y).components_
    b = KDS(8, max_epochs=5, random_state=3).fit(Y).components_
    c = KDS(8, max_epochs=5, random_state=4).fit(Y).components_
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_n_jobs_restores_numba_threads():
    Y, _ = make_moons(200, random_state=0)
    before = numba.get_num_threads()
    KDS(4, max_epochs=2, n_jobs=1, random_state=0).fit(Y).transform(Y)
    assert numba.get_num_threads() == before


def _blas_threads():
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


def record_blas_threads(monkeypatch, name):
    """The BLAS threads seen inside each call of ``np.linalg.<name>``: a list,
    one entry per call, filled as the calls come."""
    seen = []
    original = getattr(np.linalg, name)

    def recording(*args, **kwargs):
        seen.append(_blas_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(np.linalg, name, recording)
    return seen


def test_dictionary_prepared_with_blas_on_one_thread(monkeypatch):
    # BLAS threads left spinning by the preparation slow the kernels after it
    seen = record_blas_threads(monkeypatch, "eigvalsh")
    Y, _ = make_moons(300, random_state=0)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # what the kernels must not inherit
        model = KDS(4, max_epochs=2, random_state=0).fit(Y)
        model.transform(Y)
        sparse_encode(Y, model.components_, lam=1.0)
        PreparedDictionary(model.components_, 1.0, 10, np.float64)  # called directly, as the Dask client does
    assert len(seen) >= 5 and all(threads and set(threads) == {1} for threads in seen)


def test_spectral_step_with_blas_on_one_thread(monkeypatch):
    # BLAS threads left spinning by the m x m eigenproblem slowed k-means after it
    seen = record_blas_threads(monkeypatch, "eigh")
    Y, _ = make_moons(300, random_state=0)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        KDSClustering(2, n_atoms=8, max_epochs=2, random_state=0).fit(Y)
        after = _blas_threads()
    assert seen and all(threads and set(threads) == {1} for threads in seen)
    assert set(after) == {2}  # and restored


def test_blas_threads_restored_after_kernels():
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        before = _blas_threads()
        with numba_threads(1):
            assert set(_blas_threads()) == {1}
        assert _blas_threads() == before


def test_kernels_hold_scipy_blas_in_a_fresh_process():
    # Numba's np.dot in the kernels calls SciPy's BLAS, which a process that
    # runs a kernel before anything imports scipy.linalg has not loaded when
    # the thread controller is first built: it must be held all the same
    script = (
        "import numpy as np, threadpoolctl\n"
        "from fastkds._config import numba_threads\n"
        "with threadpoolctl.threadpool_limits(2, user_api='blas'):\n"
        "    with numba_threads(1):\n"
        "        held = {lib['filepath']: lib['num_threads'] for lib in threadpoolctl.threadpool_info()\n"
        "                if lib['user_api'] == 'blas'}\n"
        "import scipy.linalg.cython_blas\n"
        "loaded = {lib['filepath'] for lib in threadpoolctl.threadpool_info() if lib['user_api'] == 'blas'}\n"
        "print(sorted(held.items()), sorted(loaded))\n"
        "assert loaded <= set(held) and set(held.values()) == {1}, (held, loaded)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr + run.stdout


# -- bad input ------------------------------------------------------------------

SMALL = {
    "KDS": lambda **kw: KDS(**{"n_atoms": 4, "max_epochs": 3, "random_state": 0, **kw}),
    "KDSClustering": lambda **kw: KDSClustering(
        **{"n_clusters": 2, "n_atoms": 4, "max_epochs": 3, "random_state": 0, **kw}
    ),
}
both = pytest.mark.parametrize("make", list(SMALL.values()), ids=list(SMALL))


@pytest.fixture(scope="module")
def small_data():
    return make_moons(200, random_state=0)[0]


def _apply_methods(model):
    """Methods taking new data: transform (and objective for KDS, predict for the clustering)."""
    return ["transform", "predict"] if isinstance(model, KDSClustering) else ["transform", "objective"]


@both
@pytest.mark.parametrize("bad, match", [(np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "infinity")])
def test_non_finite_input_rejected(make, small_data, bad, match):
    Y = small_data.copy()
    Y[3, 1] = bad
    with pytest.raises(ValueError, match=match):
        make().fit(Y)
    model = make().fit(small_data)
    for method in _apply_methods(model):
        with pytest.raises(ValueError, match=match):
            getattr(model, method)(Y)


@both
def test_wrong_dimensions_rejected(make, small_data):
    with pytest.raises(ValueError, match="2D"):
        make().fit(small_data[:, 0])
    with pytest.raises(ValueError, match="dim 3"):
        make().fit(small_data[None])


@both
def test_empty_input_rejected(make, small_data):
    with pytest.raises(ValueError, match="0 sample"):
        make().fit(small_data[:0])


@both
def test_fewer_samples_than_atoms(make, small_data):
    # one atom per point, and a warning; atoms given as init cannot shrink
    with pytest.warns(TooFewSamplesWarning, match="n_atoms=4"):
        model = make().fit(small_data[:3])
    kds = model if isinstance(model, KDS) else model.kds_
    assert kds.components_.shape == (3, 2)
    with pytest.raises(ValueError, match="n_atoms"):
        make(init=small_data[:4]).fit(small_data[:3])
    with warnings.catch_warnings():
        warnings.simplefilter("error", TooFewSamplesWarning)
        make().fit(small_data[:4])  # exactly n_atoms points is enough


@both
def test_feature_mismatch_rejected(make, small_data):
    model = make().fit(small_data)
    wider = np.c_[small_data, small_data]
    for method in _apply_methods(model):
        with pytest.raises(ValueError, match="features"):
            getattr(model, method)(wider)


@both
def test_integer_input_gives_float64(make, small_data):
    Yi = np.round(small_data * 10).astype(np.int64)
    model = make().fit(Yi)
    assert model.components_.dtype == np.float64
    out = model.transform(Yi)
    assert out.dtype == np.float64
    if isinstance(model, KDSClustering):
        assert model.predict(Yi).shape == (Yi.shape[0],)


@both
def test_complex_input_rejected(make, small_data):
    with pytest.raises(ValueError, match="(?i)complex"):
        make().fit(small_data.astype(np.complex128))


@both
def test_sparse_input_is_read_as_its_dense_array(make, small_data):
    dense, sparse = make().fit(small_data), make().fit(sp.csr_array(small_data))
    attribute = "labels_" if hasattr(dense, "labels_") else "components_"
    np.testing.assert_array_equal(getattr(sparse, attribute), getattr(dense, attribute))
    assert make().__sklearn_tags__().input_tags.sparse


COMMON_BAD_PARAMS = [
    ("n_atoms", 0, ValueError),
    ("n_atoms", -3, ValueError),
    ("n_atoms", 2.0, TypeError),
    ("n_atoms", True, TypeError),
    ("lam", -1, ValueError),
    ("lam", np.nan, ValueError),
    ("lam", "big", TypeError),
    ("n_iter", 1.5, TypeError),
    ("n_iter", 0, ValueError),
    ("max_epochs", 0, ValueError),
    ("tol", -1e-3, ValueError),
    ("chunk_size", 0, ValueError),
    ("n_jobs", 0, ValueError),
    ("n_jobs", 1.5, TypeError),
    ("init", "kmeans", ValueError),
    ("init", np.zeros((3, 2)), ValueError),
    ("verbose", 1.5, TypeError),
]
CLUSTERING_BAD_PARAMS = [
    ("n_clusters", "x", ValueError),
    ("n_clusters", 0, ValueError),
    ("n_clusters", 1.5, TypeError),
    ("n_init", 0, ValueError),
    ("max_clusters", 0, ValueError),
]


def _bad_param_cases():
    for name, make in SMALL.items():
        params = COMMON_BAD_PARAMS + (CLUSTERING_BAD_PARAMS if name == "KDSClustering" else [])
        for param, value, exc in params:
            shown = f"array{value.shape}" if isinstance(value, np.ndarray) else repr(value)
            yield pytest.param(make, param, value, exc, id=f"{name}-{param}={shown}")


@pytest.mark.parametrize("make, param, value, exc", list(_bad_param_cases()))
def test_bad_params_rejected_at_fit(make, small_data, param, value, exc):
    model = make(**{param: value})  # scikit-learn convention: no validation in __init__
    with pytest.raises(exc, match=param):
        model.fit(small_data)


def test_too_many_clusters_rejected(small_data):
    with pytest.raises(ValueError, match="n_clusters"):
        KDSClustering(10, n_atoms=4, max_epochs=3, random_state=0).fit(small_data)


ARRAY_VARIANTS = {
    "float64-C": lambda Y: np.ascontiguousarray(Y),
    "float64-F": lambda Y: np.asfortranarray(Y),
    "float32": lambda Y: Y.astype(np.float32),
    "int64": lambda Y: np.round(Y * 10).astype(np.int64),
    "strided": lambda Y: np.repeat(Y, 2, axis=0)[::2],
}


@both
@pytest.mark.parametrize("variant", list(ARRAY_VARIANTS))
def test_input_array_not_modified(make, small_data, variant):
    Y = ARRAY_VARIANTS[variant](small_data)
    original = Y.copy()
    model = make().fit(Y)
    for method in _apply_methods(model):
        getattr(model, method)(Y)
    if isinstance(model, KDS):
        model.fit_transform(Y)
    assert np.array_equal(Y, original)
    assert Y.dtype == original.dtype


@both
def test_read_only_input(make, small_data):
    Y = small_data.copy()
    Y.setflags(write=False)
    original = Y.copy()
    model = make().fit(Y)
    for method in _apply_methods(model):
        getattr(model, method)(Y)
    assert not Y.flags.writeable
    assert np.array_equal(Y, original)
    # Same fit as from a writeable array.
    assert np.array_equal(model.components_, make().fit(original).components_)


# -- pickling ---------------------------------------------------------------------


def test_pickle_kds(kds_moons, codes_moons, moons):
    clone_ = pickle.loads(pickle.dumps(kds_moons))
    codes = clone_.transform(moons[0])
    assert np.array_equal(codes.indptr, codes_moons.indptr)
    assert np.array_equal(codes.indices, codes_moons.indices)
    assert np.array_equal(codes.data, codes_moons.data)
    assert clone_.objective(moons[0]) == kds_moons.objective(moons[0])
    assert np.array_equal(clone_.components_, kds_moons.components_)


def test_pickle_clustering(clustering_moons, moons3000):
    Y, _ = moons3000
    clone_ = pickle.loads(pickle.dumps(clustering_moons))
    assert np.array_equal(clone_.predict(Y), clustering_moons.predict(Y))
    assert np.array_equal(clone_.transform(Y), clustering_moons.transform(Y))
    assert np.array_equal(clone_.labels_, clustering_moons.labels_)


def test_clone_keeps_params():
    model = KDSClustering(3, n_atoms=7, lam=0.5, n_iter=9, random_state=1)
    assert clone(model).get_params() == model.get_params()


# -- n_atoms="auto" ---------------------------------------------------------------


def test_auto_n_atoms_rule():
    """About sqrt(n), at least 16 and 4 per cluster, at most 256 unless the
    clusters ask for more, never more than the points."""
    from fastkds._validation import auto_n_atoms

    assert auto_n_atoms(100) == 16
    assert auto_n_atoms(10_000) == 100
    assert auto_n_atoms(10_000, 5) == 100
    assert auto_n_atoms(10_000, 40) == 160
    assert auto_n_atoms(10**7) == 100
    assert auto_n_atoms(10**7, 100) == 400
    assert auto_n_atoms(10, 3) == 10


@pytest.mark.parametrize("k", [20, 40])
def test_many_clusters_with_defaults(k):
    """k = 20 and 40 well-separated blobs: KDSClustering(k) with every other
    parameter at its default finds them (n_atoms="auto" gives 4 atoms a
    cluster; a fixed 16 atoms could not hold 20 modes)."""
    Y, labels = make_blobs(60 * k, centers=k, n_features=10, cluster_std=0.5, center_box=(-40, 40), random_state=0)
    model = KDSClustering(k, random_state=0).fit(Y)
    assert model.kds_.n_atoms == max(4 * k, round(np.sqrt(60 * k)))
    assert model.n_clusters_ == k
    assert clustering_accuracy(labels, model.labels_) >= 0.99


def test_n_atoms_auto_validated():
    Y, _ = make_blobs(100, random_state=0)
    model = KDSClustering(2, n_atoms="many")
    with pytest.raises(ValueError, match="n_atoms must be a positive int or 'auto'"):
        model.fit(Y)
    assert not hasattr(model, "n_features_in_")  # the failed fit left it as it was
    with pytest.raises(ValueError, match="n_atoms"):
        KDSClustering(2, n_atoms=0).fit(Y)


@pytest.mark.parametrize("cls", [KDS, KDSClustering])
def test_docstring_reaches_help_and_names_every_parameter(cls):
    """help() shows the class docstring (it is built by concatenation, which
    a bare string expression would silently drop), with a numpydoc entry for
    every constructor parameter."""
    doc = cls.__doc__
    assert doc and doc.lstrip().startswith(("K-Deep Simplex", "Spectral clustering"))
    for name in cls().get_params():
        assert f"\n    {name} : " in doc, f"{cls.__name__} docstring lacks parameter {name!r}"


def test_clustering_takes_its_atom_count_from_an_init_array():
    """n_atoms="auto" with initial atoms given as an array: as many atoms as
    the array's rows (it asked for the auto count's before, and refused
    the array)."""
    Y, _ = make_moons(500, random_state=0)
    model = KDSClustering(2, init=Y[:8], random_state=0, max_epochs=3).fit(Y)
    assert model.kds_.n_atoms == 8 and model.components_.shape == (8, 2)
    with pytest.raises(ValueError, match="expected .n_atoms, n_features. = .8, 2."):
        KDSClustering(2, init=Y[:8, :1]).fit(Y)

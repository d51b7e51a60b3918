"""Degenerate and unusual inputs to the public API of fastkds.

One test per case; each docstring states the outcome the test asserts.
Behaviours that are genuine bugs are kept as ``xfail(strict=True)`` tests
whose reason starts with "BUG:", so that a fix shows up as an XPASS failure.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

import fastkds
from fastkds import (
    KDS,
    KDSClustering,
    KDSEnsembleClustering,
    clustering_accuracy,
    make_moons,
    project_simplex,
    sparse_encode,
)
from fastkds.exceptions import TooFewSamplesWarning
from fastkds.prepared import offset_step_ratio

# Short fits: degenerate data often cannot converge, and k-means may find
# fewer distinct clusters than asked; the warnings are expected here.
pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

FAST = dict(n_iter=20, max_epochs=5, random_state=0, n_jobs=1)


def assert_codes_on_simplex(C, n, m, dtype=np.float64):
    """CSR codes of shape (n, m): finite, > 0 where stored, rows sum to 1."""
    assert isinstance(C, sp.csr_array)
    assert C.shape == (n, m)
    assert C.dtype == dtype
    assert np.all(np.isfinite(C.data))
    assert np.all(C.data > 0)
    assert np.all(np.diff(C.indptr) >= 1)
    tol = 16 * np.finfo(dtype).eps * (m + 1)
    np.testing.assert_allclose(np.asarray(C.sum(axis=1)).ravel(), 1.0, rtol=0, atol=tol)


def fit_and_check(Y, n_atoms, **params):
    """Fit KDS, check finite components and simplex codes; return (model, codes)."""
    Y = np.asarray(Y)
    Y0 = Y.copy()
    model = KDS(n_atoms, **{**FAST, **params}).fit(Y)
    codes = model.transform(Y)
    np.testing.assert_array_equal(Y, Y0)  # the caller's array is untouched
    assert model.components_.shape == (n_atoms, Y.shape[1])
    assert np.all(np.isfinite(model.components_))
    assert_codes_on_simplex(codes, Y.shape[0], n_atoms, model.components_.dtype)
    return model, codes


def is_clear_value_error(exc):
    """A ValueError with a message, not numpy's LinAlgError leaking from inside."""
    return isinstance(exc, ValueError) and not isinstance(exc, np.linalg.LinAlgError) and bool(str(exc).strip())


# --------------------------------------------------------------------------
# degenerate geometry
# --------------------------------------------------------------------------


def test_all_points_identical():
    """n=50 identical points, m=4: the fit succeeds, the codes are on the
    simplex, the components are finite and every atom sits at the point
    (objective 0 up to rounding), and the fit converges at once instead of
    re-seeding the coinciding atoms every epoch."""
    point = np.array([1.5, -2.0, 3.0, 0.25])
    Y = np.tile(point, (50, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = KDS(4, random_state=0).fit(Y)
    assert model.n_iter_ <= 3
    model, codes = fit_and_check(Y, 4)
    np.testing.assert_allclose(model.components_, np.tile(point, (4, 1)), atol=1e-12)
    assert model.objective(Y) == pytest.approx(0.0, abs=1e-12)


def test_all_points_identical_zero():
    """n=50 points all at the origin, m=4: the zero dictionary is handled
    (codes on the simplex, components exactly 0)."""
    model, _ = fit_and_check(np.zeros((50, 3)), 4)
    np.testing.assert_array_equal(model.components_, 0.0)


def test_duplicate_points():
    """5 distinct points repeated 10 times each, m=5: the fit succeeds, and
    identical points receive identical codes."""
    rng = np.random.default_rng(1)
    base = rng.normal(size=(5, 3))
    Y = np.repeat(base, 10, axis=0)
    _, codes = fit_and_check(Y, 5, lam=1.0)
    dense = codes.toarray()
    for g in range(5):
        block = dense[10 * g : 10 * (g + 1)]
        np.testing.assert_array_equal(block, np.tile(block[0], (10, 1)))


def test_one_feature():
    """d=1: the fit succeeds with finite (m, 1) components, simplex codes,
    and the reconstruction is closer than the data's spread."""
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(80, 1))
    model, codes = fit_and_check(Y, 5, lam=0.5)
    err = np.mean((model.inverse_transform(codes) - Y) ** 2)
    assert err < 0.1 * np.var(Y)


def test_one_atom():
    """m=1: every code is exactly 1.0 and the single atom is the data mean
    (the exact dictionary step with X = 1)."""
    rng = np.random.default_rng(3)
    Y = rng.normal(size=(40, 3)) + 5.0
    model, codes = fit_and_check(Y, 1, lam=2.0)
    np.testing.assert_array_equal(codes.toarray(), np.ones((40, 1)))
    np.testing.assert_allclose(model.components_[0], Y.mean(axis=0), rtol=1e-12)


def test_as_many_atoms_as_points():
    """m == n (distinct points): the fit succeeds, codes are on the simplex,
    and the objective is far below the data's variance (each point can own
    an atom)."""
    rng = np.random.default_rng(4)
    Y = rng.normal(size=(12, 2))
    model, _ = fit_and_check(Y, 12, lam=1.0, n_iter=50, max_epochs=10)
    assert model.objective(Y) < 0.05 * np.sum(np.var(Y, axis=0))


def test_as_many_atoms_as_points_with_duplicates():
    """m == n but two points coincide: the fit still succeeds and the
    duplicated point is reconstructed exactly."""
    Y = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    model, codes = fit_and_check(Y, 5)
    np.testing.assert_allclose(model.inverse_transform(codes), Y, atol=1e-6)


def test_more_atoms_than_points():
    """m > n: one atom per point, with a warning naming both counts; atoms
    given as an init array cannot shrink, so a ValueError names them."""
    Y = np.random.default_rng(0).normal(size=(5, 2))
    with pytest.warns(TooFewSamplesWarning, match="n_atoms=10"):
        model = KDS(10, **FAST).fit(Y)
    assert model.components_.shape == (5, 2) and model.transform(Y).shape == (5, 5)
    with pytest.raises(ValueError, match="n_atoms=10"):
        KDS(10, init=np.zeros((10, 2)), **FAST).fit(Y)


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_collinear_points(lam):
    """Points on a line in 2-D (collinear atoms): the fit succeeds and every
    atom stays on the line (the exact dictionary step makes each atom an
    affine combination of the data)."""
    rng = np.random.default_rng(5)
    t = rng.uniform(-1.0, 1.0, size=80)
    Y = np.c_[t, 2.0 * t + 1.0]
    model, _ = fit_and_check(Y, 6, lam=lam)
    W = model.components_
    np.testing.assert_allclose(W[:, 1], 2.0 * W[:, 0] + 1.0, atol=1e-8)


# --------------------------------------------------------------------------
# extreme magnitudes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-150, 1e150])
def test_float64_extreme_scale(scale):
    """float64 data scaled by 1e-150 / 1e+150 (squared norms still in range):
    the fit succeeds with finite codes on the simplex, and, the problem being
    scale-invariant, the codes equal those of the unscaled data and the atoms
    are the unscaled atoms times the scale."""
    rng = np.random.default_rng(6)
    Y = rng.normal(size=(60, 3))
    ref, ref_codes = fit_and_check(Y, 5)
    model, codes = fit_and_check(Y * scale, 5)
    np.testing.assert_allclose(codes.toarray(), ref_codes.toarray(), atol=1e-9)
    np.testing.assert_allclose(model.components_ / scale, ref.components_, rtol=1e-8, atol=1e-8)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("scale", [1e-158, 1e-170, 1e158])
def test_float64_beyond_squared_norm_range(scale):
    """float64 data whose squared norms leave the float64 range (below ~1e-154
    or above ~1e154): a clear ValueError asking to rescale (not numpy's
    LinAlgError, not a SystemError from the kernel, not silently uniform codes).

    Regression: before b646585 these gave a SystemError (1e-158), uniform
    codes (1e-170) and LinAlgError 'Eigenvalues did not converge' (1e158).
    """
    rng = np.random.default_rng(6)
    Y = rng.normal(size=(60, 3)) * scale
    with pytest.raises(ValueError, match="rescale") as info:
        KDS(5, **FAST).fit(Y)
    assert is_clear_value_error(info.value)


def test_float32_moderately_large_values():
    """float32 data ~1e18 (squared norms ~1e36, just inside float32): the fit
    succeeds with finite float32 components and codes on the simplex."""
    rng = np.random.default_rng(7)
    Y = (rng.normal(size=(60, 2)) * 1e18).astype(np.float32)
    model, _ = fit_and_check(Y, 4)
    assert model.components_.dtype == np.float32


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("scale", [1e20, 1e-20])
def test_float32_overflowing_squared_norms(scale):
    """float32 data ~1e20 (squared norms ~1e40 overflow float32) or ~1e-20
    (the step 1/sigma_max(W)^2 overflows float32): a clear ValueError asking
    to rescale; the same data in float64 fits fine.

    Regression: before b646585 both gave a SystemError from the kernel.
    """
    rng = np.random.default_rng(7)
    Y = rng.normal(size=(60, 2)) * scale
    with pytest.raises(ValueError, match="rescale") as info:
        KDS(4, **FAST).fit(Y.astype(np.float32))
    assert is_clear_value_error(info.value)
    fit_and_check(Y, 4)


@pytest.mark.parametrize(
    "dtype, offset", [(np.float64, 10.0), (np.float64, 1e4), (np.float32, 10.0), (np.float32, 100.0)]
)
def test_translated_data_same_codes(dtype, offset):
    """Codes of (Y + c, W + c) equal those of (Y, W), exact (the default) or
    by the accelerated encoder with the centred step: the objective on the
    simplex does not change under a common translation, and neither do
    these encoders, up to the rounding of the moved data (a float32 point
    at 100 holds its unit spread to about 1e-5). The paper's step does
    change them (moons + 10: codes far longer)."""
    rng = np.random.default_rng(18)
    Y = rng.uniform(-1.0, 1.0, size=(200, 2)).astype(dtype)
    W = rng.uniform(-1.0, 1.0, size=(12, 2))
    for encoder in ("active-set", "apg"):
        ref = sparse_encode(Y, W, lam=5.0, n_iter=15, encoder=encoder).toarray()
        shifted = sparse_encode(Y + dtype(offset), W + offset, lam=5.0, n_iter=15, encoder=encoder).toarray()
        # float32: the moved points are rounded to 6e-8 of the offset; the codes move a few hundred times that
        np.testing.assert_allclose(shifted, ref, atol=1e-9 if dtype == np.float64 else 2e-5 * offset)
    paper = sparse_encode(Y + dtype(offset), W + offset, lam=5.0, n_iter=15, step="paper", encoder="apg")
    assert paper.nnz > 2 * sparse_encode(Y, W, lam=5.0, n_iter=15, encoder="apg").nnz


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_offset_moons_cluster_as_centred_ones():
    """With the default (centred) step, moons moved by (100, 100) cluster as
    the moons as generated: the same labels, no warning."""
    Y, y = make_moons(3000, random_state=0)
    params = dict(n_atoms=24, lam=5.0, n_iter=15, max_epochs=30, random_state=0)
    centred = KDSClustering(2, **params).fit(Y)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*far from the origin")
        offset = KDSClustering(2, **params).fit(Y + 100.0)
    acc = clustering_accuracy(y, centred.labels_)
    assert acc >= 0.99
    assert abs(clustering_accuracy(y, offset.labels_) - acc) <= 0.002
    np.testing.assert_allclose(offset.components_ - 100.0, centred.components_, atol=1e-6)


def test_offset_float32_moons_cluster_as_centred_ones():
    """The same in float32, moved by (1000, 1000): the data hold their 0.1
    noise to about 1e-4 there, and the step follows the atoms' own spread
    (a floor tied to their distance from the origin once set it instead,
    and the codes stopped short: accuracy 0.91)."""
    Y, y = make_moons(3000, random_state=0)
    Y = Y.astype(np.float32)
    params = dict(n_atoms=24, lam=5.0, n_iter=15, max_epochs=30, random_state=0)
    centred = KDSClustering(2, **params).fit(Y)
    offset = KDSClustering(2, **params).fit(Y + np.float32(1000.0))
    acc = clustering_accuracy(y, centred.labels_)
    assert acc >= 0.99
    assert abs(clustering_accuracy(y, offset.labels_) - acc) <= 0.002
    assert offset.kds_.objective_[-1] == pytest.approx(centred.kds_.objective_[-1], rel=1e-2)


def test_offset_step_ratio_exact():
    """Atoms (+-1, c): sigma_max(W)^2 = max(2, 2 c^2), centred 2, so the ratio is max(1, c^2)."""
    for c in (0.0, 0.5, 3.0, 10.0):
        W = np.array([[1.0, c], [-1.0, c]])
        assert offset_step_ratio(W) == pytest.approx(max(1.0, c * c), rel=1e-12)
    assert offset_step_ratio(np.ones((3, 2))) == 1.0  # coincident atoms: every code is optimal
    assert offset_step_ratio(np.zeros((3, 2))) == 1.0
    W = np.array([[1.0, 3.0], [-1.0, 3.0]])
    for scale in (1e-170, 1e160):  # Gram matrices beyond float64: the same ratio
        assert offset_step_ratio(W * scale) == pytest.approx(9.0, rel=1e-12)


OFF_CENTRE = "far from the origin"


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_offset_data_warns(method):
    """Moons moved by (10, 10), with the paper's step: it is ~300x smaller
    than centred, and the first fit call says so, naming the remedy."""
    Y, _ = make_moons(2000, random_state=0)
    with pytest.warns(UserWarning, match=OFF_CENTRE) as record:
        getattr(KDS(24, lam=5.0, step="paper", encoder="apg", **FAST), method)(Y + 10.0)
    assert "StandardScaler(with_std=False)" in str(next(r.message for r in record if OFF_CENTRE in str(r.message)))


def test_centred_data_do_not_warn():
    """No warning on the paper's kind of data: moons as generated, and
    nonnegative unit-norm rows like MNIST-5's (ratio about 6)."""
    rng = np.random.default_rng(3)
    images = rng.uniform(size=(600, 64)) ** 4
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    for Y in (make_moons(2000, random_state=0)[0], images):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*" + OFF_CENTRE)
            warnings.simplefilter("ignore", ConvergenceWarning)
            KDS(24, lam=1.0, **FAST).fit(Y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_centring_in_a_pipeline_is_the_remedy():
    """The warning's advice works: with the paper's step, centring moons
    moved by (10, 10) in a Pipeline gives the accuracy of the moons as
    generated."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Y, y = make_moons(3000, random_state=0)
    params = dict(n_atoms=24, lam=5.0, n_iter=15, max_epochs=30, random_state=0, step="paper", encoder="apg")
    with pytest.warns(UserWarning, match=OFF_CENTRE):
        offset = KDSClustering(2, **params).fit_predict(Y + 10.0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*" + OFF_CENTRE)
        centred = make_pipeline(StandardScaler(with_std=False), KDSClustering(2, **params)).fit_predict(Y + 10.0)
    assert clustering_accuracy(y, centred) >= 0.99
    assert clustering_accuracy(y, centred) > clustering_accuracy(y, offset) + 0.05


# --------------------------------------------------------------------------
# clustering
# --------------------------------------------------------------------------


def test_clustering_one_cluster():
    """KDSClustering(n_clusters=1): every label is 0 and n_clusters_ == 1."""
    rng = np.random.default_rng(8)
    Y = rng.normal(size=(60, 2))
    model = KDSClustering(1, n_atoms=6, **FAST).fit(Y)
    assert model.n_clusters_ == 1
    np.testing.assert_array_equal(model.labels_, 0)
    np.testing.assert_array_equal(model.predict(Y[:10]), 0)


def test_clustering_more_clusters_than_atoms():
    """n_clusters=10 with 4 atoms: a ValueError naming n_clusters, with the
    vote or without (fewer atoms than clusters is a setting to change)."""
    rng = np.random.default_rng(9)
    Y = rng.normal(size=(60, 2))
    for vote_neighbors in (10, None):
        model = KDSClustering(10, n_atoms=4, vote_neighbors=vote_neighbors, **FAST)
        with pytest.raises(ValueError, match="n_clusters=10"):
            model.fit(Y)
        assert not hasattr(model, "labels_")


def test_clustering_more_clusters_than_atoms_in_use():
    """n_clusters == n_atoms, but one atom only serves an outlier (its
    component is dropped by min_component), and the code graph's labels are
    final (no vote): a ValueError naming n_clusters and the 3 modes left,
    one per atom in use."""
    rng = np.random.default_rng(0)
    Y = np.r_[rng.normal(size=(100, 2)), [[50.0, 50.0]]]
    with pytest.raises(
        ValueError, match=r"n_clusters=4 exceeds the 3 modes .*one per atom in use.*fewer clusters, or lower lam"
    ):
        KDSClustering(4, n_atoms=4, min_component=0.01, vote_neighbors=None, **FAST).fit(Y)


def test_small_clusters_past_the_code_graphs_modes_take_the_vote(tmp_path):
    """Twenty classes of eight points (an Olivetti-faces shape: few images
    per person): the default atoms, four a cluster, hold two or three
    points each and code them alone, and the code graph's pieces are too
    small to count as modes (fewer than k; the fit raised "n_clusters=20
    exceeds the ... modes" before). The neighbours' vote labels the points
    from their own neighbours' graph, as SpectralClustering does (1.0
    here): every class found, and transform, predict, save and load work
    on that model."""
    from sklearn.datasets import make_blobs

    Y, y = make_blobs(160, n_features=30, centers=20, cluster_std=3.0, random_state=0)
    model = KDSClustering(20, random_state=0).fit(Y)
    assert not model.spectrum_.shows(20)  # the case at hand
    assert model.vote_.n_neighbors == 4  # half of an even split, 160 / 20 / 2
    assert clustering_accuracy(y, model.labels_) >= 0.95
    np.testing.assert_array_equal(model.predict(Y), model.labels_)
    U = model.transform(Y)
    assert U.shape == (160, model.spectrum_.n_columns(20)) == model.embedding_.shape
    assert np.all(np.isfinite(U))
    model.save(tmp_path / "m.kds")
    loaded = fastkds.load(tmp_path / "m.kds")
    np.testing.assert_array_equal(loaded.predict(Y), model.labels_)
    np.testing.assert_array_equal(loaded.transform(Y), U)
    assert loaded.vote_.n_neighbors == 4
    with pytest.raises(ValueError, match="n_clusters=20 exceeds the"):
        KDSClustering(20, vote_neighbors=None, random_state=0).fit(Y)


@pytest.mark.parametrize("cls", [KDSClustering, KDSEnsembleClustering])
def test_clustering_fewer_points_than_clusters(cls):
    """Three points, five clusters: a ValueError naming both counts, as
    KMeans gives, not a message about the code graph; the estimator stays
    unfitted."""
    Y = np.random.default_rng(1).normal(size=(3, 2))
    model = cls(5, random_state=0)
    with pytest.raises(ValueError, match=r"^n_samples=3 should be >= n_clusters=5\.$"):
        model.fit(Y)
    assert not hasattr(model, "labels_")
    assert KDSClustering(3, random_state=0).fit(Y).n_clusters_ == 3  # as many points as clusters: fitted


def test_clustering_identical_points():
    """All points identical, n_clusters=1: all labels equal, finite embedding."""
    Y = np.ones((40, 3))
    model = KDSClustering(1, n_atoms=4, **FAST).fit(Y)
    np.testing.assert_array_equal(model.labels_, 0)
    assert np.all(np.isfinite(model.embedding_))


# --------------------------------------------------------------------------
# memory layout, read-only and memory-mapped input
# --------------------------------------------------------------------------


def _layouts(Y):
    F = np.asfortranarray(Y)
    big = np.zeros((2 * Y.shape[0], 2 * Y.shape[1] + 1))
    big[::2, 1::2] = Y
    strided = big[::2, 1::2]
    assert not F.flags.c_contiguous and not strided.flags.c_contiguous
    np.testing.assert_array_equal(strided, Y)
    return {"fortran": F, "strided": strided}


@pytest.mark.parametrize("layout", ["fortran", "strided"])
def test_non_contiguous_input_same_result(layout):
    """Fortran-ordered and strided-view input give bitwise the same
    components, codes, labels, encodings and projections as C-contiguous."""
    rng = np.random.default_rng(10)
    Y = rng.normal(size=(60, 3))
    A = _layouts(Y)[layout]
    A0 = A.copy()
    ref = KDS(5, **FAST).fit(Y)
    got = KDS(5, **FAST).fit(A)
    np.testing.assert_array_equal(got.components_, ref.components_)
    np.testing.assert_array_equal(got.transform(A).toarray(), ref.transform(Y).toarray())
    labels_ref = KDSClustering(2, n_atoms=5, **FAST).fit(Y).labels_
    np.testing.assert_array_equal(KDSClustering(2, n_atoms=5, **FAST).fit(A).labels_, labels_ref)
    W = Y[:5]
    np.testing.assert_array_equal(sparse_encode(A, _layouts(W)[layout]).toarray(), sparse_encode(Y, W).toarray())
    np.testing.assert_array_equal(project_simplex(A), project_simplex(Y))
    np.testing.assert_array_equal(A, A0)


def test_read_only_input():
    """A read-only array works everywhere (fit, transform, score,
    fit_transform, clustering, sparse_encode, project_simplex) and is
    unchanged afterwards."""
    rng = np.random.default_rng(11)
    Y = rng.normal(size=(60, 3))
    R = Y.copy()
    R.flags.writeable = False
    for dtype in (np.float64, np.float32):
        Rd = R.astype(dtype)
        Rd.flags.writeable = False
        ref = KDS(5, **FAST).fit(Y.astype(dtype))
        model = KDS(5, **FAST).fit(Rd)
        np.testing.assert_array_equal(model.components_, ref.components_)
        np.testing.assert_array_equal(model.transform(Rd).toarray(), ref.transform(Y.astype(dtype)).toarray())
        assert np.isfinite(model.objective(Rd))
        assert_codes_on_simplex(KDS(5, **FAST).fit_transform(Rd), 60, 5, dtype)
        KDSClustering(2, n_atoms=5, **FAST).fit(Rd).predict(Rd)
        W = Rd[:5]
        assert_codes_on_simplex(sparse_encode(Rd, W), 60, 5, dtype)
        project_simplex(Rd)
        np.testing.assert_array_equal(Rd, Y.astype(dtype))
    np.testing.assert_array_equal(R, Y)


def test_read_only_memmap(tmp_path):
    """A np.memmap opened with mode='r' works (same results as the in-memory
    array) and the file is unchanged afterwards."""
    rng = np.random.default_rng(12)
    Y = rng.normal(size=(60, 3))
    path = tmp_path / "data.f64"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=Y.shape)
    mm[:] = Y
    mm.flush()
    del mm
    M = np.memmap(path, dtype=np.float64, mode="r", shape=Y.shape)
    assert not M.flags.writeable
    ref = KDS(5, **FAST).fit(Y)
    model = KDS(5, **FAST).fit(M)
    np.testing.assert_array_equal(model.components_, ref.components_)
    np.testing.assert_array_equal(model.transform(M).toarray(), ref.transform(Y).toarray())
    np.testing.assert_array_equal(
        KDSClustering(2, n_atoms=5, **FAST).fit(M).labels_,
        KDSClustering(2, n_atoms=5, **FAST).fit(Y).labels_,
    )
    np.testing.assert_array_equal(sparse_encode(M, M[:5]).toarray(), sparse_encode(Y, Y[:5]).toarray())
    np.testing.assert_array_equal(project_simplex(M), project_simplex(Y))
    np.testing.assert_array_equal(np.asarray(M), Y)
    del M
    np.testing.assert_array_equal(np.fromfile(path, dtype=np.float64).reshape(Y.shape), Y)


# --------------------------------------------------------------------------
# unsupported input types
# --------------------------------------------------------------------------


SPARSE_KINDS = [sp.csr_array, sp.csr_matrix, sp.csc_array, sp.coo_array]


@pytest.mark.parametrize("kind", SPARSE_KINDS, ids=lambda k: k.__name__)
def test_sparse_input_gives_what_the_dense_array_gives(kind):
    """Sparse scipy data to KDS.fit / fit_transform / transform /
    partial_fit, KDSClustering.fit / predict and sparse_encode (data or
    dictionary): read as dense chunks, the same results as the dense array,
    bit for bit; the caller's matrix is not changed."""
    rng = np.random.default_rng(13)
    Y = rng.normal(size=(60, 3))
    Y[np.abs(Y) < 0.5] = 0.0  # stored zeros left out: a sparse matrix of 38% zeros
    S = kind(Y)
    held = S.copy()
    dense, model = KDS(4, **FAST).fit(Y), KDS(4, **FAST).fit(S)
    np.testing.assert_array_equal(model.components_, dense.components_)
    for codes in (model.transform(S), KDS(4, **FAST).fit_transform(S)):
        assert (codes != dense.transform(Y)).nnz == 0
    streamed = KDS(4, **FAST).partial_fit(S[:30] if kind is not sp.coo_array else sp.coo_array(Y[:30]))
    np.testing.assert_array_equal(streamed.components_, KDS(4, **FAST).partial_fit(Y[:30]).components_)
    clusters, dense_clusters = KDSClustering(2, n_atoms=4, **FAST).fit(S), KDSClustering(2, n_atoms=4, **FAST).fit(Y)
    np.testing.assert_array_equal(clusters.labels_, dense_clusters.labels_)
    np.testing.assert_array_equal(clusters.predict(S), dense_clusters.predict(Y))
    assert (sparse_encode(S, Y[:4]) != sparse_encode(Y, Y[:4])).nnz == 0
    assert (sparse_encode(Y, kind(Y[:4])) != sparse_encode(Y, Y[:4])).nnz == 0
    assert (S != held).nnz == 0 and S.format == held.format


def test_sparse_float32_stays_float32():
    Y = np.random.default_rng(16).normal(size=(40, 3)).astype(np.float32)
    S = sp.csr_array(Y)
    assert KDS(4, **FAST).fit(S).components_.dtype == np.float32
    assert sparse_encode(S, Y[:4]).dtype == np.float32


@pytest.mark.parametrize("data, match", [(sp.csr_array((0, 3)), "0 sample"), (sp.csr_array((5, 0)), "0 feature")])
def test_empty_sparse_data_to_sparse_encode_is_refused(data, match):
    with pytest.raises(ValueError, match=match):
        sparse_encode(data, np.ones((2, data.shape[1])))


def test_sparse_input_project_simplex():
    """Sparse input to project_simplex: a TypeError/ValueError that says
    sparse input is not supported."""
    S = sp.csr_array(np.random.default_rng(14).normal(size=(5, 3)))
    with pytest.raises((TypeError, ValueError), match="[Ss]parse"):
        project_simplex(S)


def test_object_dtype():
    """Object arrays: numeric ones are converted to float64 (scikit-learn's
    convention) and give the same result as float64; non-numeric ones raise
    a ValueError from the conversion."""
    rng = np.random.default_rng(15)
    Y = rng.normal(size=(30, 3))
    O = Y.astype(object)
    np.testing.assert_array_equal(KDS(4, **FAST).fit(O).components_, KDS(4, **FAST).fit(Y).components_)
    np.testing.assert_array_equal(sparse_encode(O, Y[:4]).toarray(), sparse_encode(Y, Y[:4]).toarray())
    np.testing.assert_array_equal(project_simplex(O), project_simplex(Y))
    bad = np.array([["a", 1.0, 2.0]] * 10, dtype=object)
    for call in (
        lambda: KDS(2, **FAST).fit(bad),
        lambda: KDSClustering(2, n_atoms=2, **FAST).fit(bad),
        lambda: sparse_encode(bad, Y[:2]),
        lambda: project_simplex(bad),
    ):
        with pytest.raises(ValueError, match="could not convert"):
            call()
    none = np.array([[None, 1.0]] * 10, dtype=object)
    with pytest.raises((TypeError, ValueError)):
        KDS(2, **FAST).fit(none)


def test_complex_dtype():
    """Complex input (even with zero imaginary part) to every entry point: a
    ValueError 'Complex data not supported'."""
    rng = np.random.default_rng(16)
    Y = rng.normal(size=(30, 3))
    C = Y.astype(np.complex128)
    model = KDS(4, **FAST).fit(Y)
    for call in (
        lambda: KDS(4, **FAST).fit(C),
        lambda: model.transform(C),
        lambda: KDSClustering(2, n_atoms=4, **FAST).fit(C),
        lambda: sparse_encode(C, Y[:4]),
        lambda: sparse_encode(Y, C[:4]),
        lambda: project_simplex(C),
    ):
        with pytest.raises(ValueError, match="Complex data not supported"):
            call()


# --------------------------------------------------------------------------
# the y argument
# --------------------------------------------------------------------------


def test_y_is_ignored():
    """fit / fit_transform ignore y (labels, wrong length, anything): the
    results equal those without y."""
    rng = np.random.default_rng(17)
    Y = rng.normal(size=(60, 3))
    ref = KDS(5, **FAST).fit(Y)
    ref_codes = ref.transform(Y).toarray()
    labels = rng.integers(0, 3, size=60)
    for y in (labels, labels[:7], "not labels", np.full(60, np.nan)):
        np.testing.assert_array_equal(KDS(5, **FAST).fit(Y, y).components_, ref.components_)
        np.testing.assert_array_equal(KDS(5, **FAST).fit(Y, y=y).components_, ref.components_)
        np.testing.assert_array_equal(KDS(5, **FAST).fit_transform(Y, y).toarray(), ref_codes)
    ref_labels = KDSClustering(2, n_atoms=5, **FAST).fit(Y).labels_
    np.testing.assert_array_equal(KDSClustering(2, n_atoms=5, **FAST).fit(Y, labels).labels_, ref_labels)
    np.testing.assert_array_equal(KDSClustering(2, n_atoms=5, **FAST).fit_predict(Y, labels), ref_labels)

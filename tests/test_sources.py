"""Data read chunk by chunk (.npy paths, memmaps, array-likes, iterables) and
codes written to disk: same results as in-memory arrays, bounded reads,
clear errors."""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from threadpoolctl import threadpool_limits

from fastkds import _config
from fastkds import KDS, KDSClustering, KDSEnsembleClustering, clustering_accuracy, make_moons
from fastkds.diskcodes import load_codes
from fastkds.sources import SlicedSource, as_source, is_chunked_input

PARAMS = dict(lam=5.0, n_iter=15, max_epochs=30, random_state=0)


@pytest.fixture(scope="module")
def moons():
    Y, y = make_moons(3000, random_state=1)
    return Y, y


@pytest.fixture
def npy_path(tmp_path, moons):
    path = tmp_path / "Y.npy"
    np.save(path, moons[0])
    return path


class SlicedOnly:
    """An h5py/zarr-like dataset: shape, dtype and slicing, and it records
    the largest slice read (a source must never read everything at once)."""

    def __init__(self, Y):
        self._Y = Y
        self.shape = Y.shape
        self.dtype = Y.dtype
        self.largest_read = 0

    def __getitem__(self, key):
        out = self._Y[key]
        self.largest_read = max(self.largest_read, out.shape[0])
        return out


def test_chunked_inputs_are_recognised(moons, npy_path):
    Y = moons[0]
    assert is_chunked_input(str(npy_path)) and is_chunked_input(npy_path)
    assert is_chunked_input(np.load(npy_path, mmap_mode="r"))
    assert is_chunked_input([Y[:10], Y[10:]]) and is_chunked_input(iter([Y]))
    assert is_chunked_input(lambda: iter([Y]))
    assert not is_chunked_input(Y)
    assert not is_chunked_input([[1.0, 2.0], [3.0, 4.0]])  # a nested list is one array
    assert is_chunked_input(sp.csr_array(Y)) and is_chunked_input(sp.coo_matrix(Y))  # read as dense chunks


@pytest.mark.parametrize("kind", ["path", "memmap", "list", "callable", "sliced", "sparse", "sparse list"])
def test_fit_on_chunked_data_equals_in_memory_fit(moons, npy_path, kind):
    Y = moons[0]
    data = {
        "path": str(npy_path),
        "memmap": np.load(npy_path, mmap_mode="r"),
        "list": [Y[:1000], Y[1000:2200], Y[2200:]],
        "callable": lambda: (Y[i : i + 700] for i in range(0, Y.shape[0], 700)),
        "sliced": SlicedSource(SlicedOnly(Y)),
        "sparse": sp.csc_matrix(Y),
        "sparse list": [sp.csr_array(Y[:1000]), sp.csr_array(Y[1000:])],
    }[kind]
    ref = KDS(12, **PARAMS).fit(Y)
    kds = KDS(12, **PARAMS).fit(data)
    np.testing.assert_array_equal(kds.components_, ref.components_)
    assert kds.n_features_in_ == 2 and kds.n_iter_ == ref.n_iter_
    codes = kds.transform(data)
    assert (codes != ref.transform(Y)).nnz == 0


def test_large_source_with_presample_matches_in_memory(tmp_path):
    # presample "auto" starts at 20,000 * 5 points: the subsample is gathered
    # from the file, the full passes stream it, and nothing changes
    Y, _ = make_moons(100_000, random_state=2)
    path = tmp_path / "big.npy"
    np.save(path, Y)
    kw = dict(lam=5.0, n_iter=15, max_epochs=3, tol=0.0, random_state=0)
    ref = KDS(16, **kw).fit(Y)
    sliced = SlicedOnly(Y)
    kds = KDS(16, chunk_size=8192, **kw).fit(SlicedSource(sliced))
    np.testing.assert_allclose(kds.components_, ref.components_, rtol=0, atol=1e-12)
    assert sliced.largest_read <= 1 << 16  # read in pieces, never whole


def test_source_too_large_to_load_is_streamed(monkeypatch, moons):
    # without a warm-start subsample, a source too large to load is fitted
    # by streaming, with k-means++ seeded from a random subsample
    Y = moons[0]
    monkeypatch.setattr(_config, "LOAD_WHOLE_BYTES", 1024)
    sliced = SlicedOnly(Y)
    kds = KDS(12, presample=None, chunk_size=500, **PARAMS).fit(SlicedSource(sliced))
    assert sliced.largest_read <= 1 << 16
    assert np.all(np.isfinite(kds.components_))
    ref = KDS(12, presample=None, **PARAMS).fit(Y)
    # a different seeding, an equally good fit
    assert kds.objective(Y) == pytest.approx(ref.objective(Y), rel=0.15)


def test_one_shot_iterator_transforms_but_does_not_fit(moons):
    Y = moons[0]
    kds = KDS(8, **PARAMS).fit(Y)
    codes = kds.transform(iter([Y[:100], Y[100:300]]))
    assert (codes != kds.transform(Y[:300])).nnz == 0
    with pytest.raises(TypeError, match="one-shot iterator"):
        KDS(8).fit(iter([Y]))


def test_transform_out_writes_codes_to_disk(moons, npy_path, tmp_path):
    Y = moons[0]
    kds = KDS(12, chunk_size=700, **PARAMS).fit(Y)
    out = tmp_path / "codes"
    codes = kds.transform(str(npy_path), out=out)
    assert sorted(os.listdir(out)) == ["data.npy", "indices.npy", "indptr.npy"]
    assert isinstance(codes, sp.csr_array) and codes.shape == (Y.shape[0], 12)
    assert (codes != kds.transform(Y)).nnz == 0
    again = load_codes(out, n_atoms=12)
    assert (again != codes).nnz == 0
    # the files are plain .npy arrays, memory-mapped, readable without fastkds
    assert np.load(out / "indptr.npy").shape == (Y.shape[0] + 1,)
    # writing again replaces them
    codes2 = kds.transform(Y[:50], out=out)
    assert codes2.shape == (50, 12)


def test_transform_out_error_removes_partial_files(moons, tmp_path):
    Y = moons[0].copy()
    kds = KDS(8, chunk_size=500, **PARAMS).fit(Y)
    Y[2000, 0] = np.nan
    out = tmp_path / "codes"
    with pytest.raises(ValueError, match="row 2000"):
        kds.transform([Y[:1000], Y[1000:]], out=out)
    assert os.listdir(out) == []


def test_clustering_reads_a_memmap(moons, npy_path):
    Y, y = moons
    ref = KDSClustering(2, n_atoms=24, **PARAMS).fit(Y)
    model = KDSClustering(2, n_atoms=24, **PARAMS).fit(np.load(npy_path, mmap_mode="r"))
    np.testing.assert_array_equal(model.labels_, ref.labels_)
    np.testing.assert_array_equal(model.predict(str(npy_path)), ref.labels_)


def test_float32_file_stays_float32(moons, tmp_path):
    path = tmp_path / "Y32.npy"
    np.save(path, moons[0].astype(np.float32))
    kds = KDS(8, **PARAMS).fit(str(path))
    assert kds.components_.dtype == np.float32
    assert kds.transform(str(path)).dtype == np.float32


def test_big_endian_float32_file_stays_float32(moons, tmp_path):
    path = tmp_path / "Y32be.npy"
    np.save(path, moons[0].astype(">f4"))
    kds = KDS(8, **PARAMS).fit(str(path))
    assert kds.components_.dtype == np.float32
    assert kds.transform(str(path)).dtype == np.float32


@pytest.mark.parametrize(
    "data, error, match",
    [
        ("missing.npy", FileNotFoundError, "no such file"),
        ("data.csv", ValueError, "must name a .npy file"),
        ([np.zeros((5, 2)), np.zeros((5, 3))], ValueError, "3 features, expected 2"),
        ([np.zeros((5, 2)), np.zeros(5)], ValueError, "1 dimensions"),
        ([np.zeros((5, 2), dtype=complex)], TypeError, "numeric"),
        ([np.full((5, 2), np.inf)], ValueError, "NaN or infinite"),
        (sp.csr_array(np.array([[1.0, np.nan]] * 5)), ValueError, "NaN or infinite"),
        ([sp.csr_array(np.array([[1.0, np.inf]] * 5))], ValueError, "NaN or infinite"),
        (iter([]), ValueError, "no chunks"),
    ],
)
def test_bad_chunked_input_gets_a_clear_error(tmp_path, data, error, match):
    if isinstance(data, str):
        data = str(tmp_path / data)
    with pytest.raises(error, match=match):
        KDS(2, **PARAMS).fit(data)


@pytest.mark.parametrize("shape, match", [((0, 2), "0 sample"), ((50, 0), "0 feature")])
@pytest.mark.parametrize("kind", ["npy", "list", "sparse"])
@pytest.mark.parametrize("estimator", [KDS(8, **PARAMS), KDSClustering(2, **PARAMS), KDSEnsembleClustering(2)])
def test_empty_chunked_input_is_refused_as_an_empty_array_is(tmp_path, shape, match, kind, estimator):
    """No rows or no features, read in chunks: scikit-learn's error for an
    empty array, not a crash in the seeding (no rows) or a fit of nothing
    (no features)."""
    data = np.empty(shape)
    if kind == "npy":
        np.save(tmp_path / "empty.npy", data)
        data = str(tmp_path / "empty.npy")
    elif kind == "sparse":
        data = sp.csr_array(data)
    else:
        data = [data]
    with pytest.raises(ValueError, match=match):
        clone(estimator).fit(data)


def test_objective_of_chunks_without_rows_is_refused(moons):
    kds = KDS(8, **PARAMS).fit(moons[0])
    with pytest.raises(ValueError, match="0 sample"):
        kds.objective([np.empty((0, 2))])


def test_feature_count_is_checked_on_chunked_input(moons, tmp_path):
    kds = KDS(8, **PARAMS).fit(moons[0])
    path = tmp_path / "three.npy"
    np.save(path, np.zeros((10, 3)))
    with pytest.raises(ValueError, match="3 features, but KDS is expecting 2"):
        kds.transform(str(path))


def test_caller_file_is_not_modified(moons, npy_path):
    before = np.load(npy_path).copy()
    KDS(8, **PARAMS).fit(str(npy_path)).transform(np.load(npy_path, mmap_mode="r"))
    np.testing.assert_array_equal(np.load(npy_path), before)


def test_source_counts_rows_of_iterables(moons):
    Y = moons[0]
    source = as_source(lambda: iter([Y[:10], Y[10:25]]))
    assert source.n_samples is None
    assert source.count() == 25 and source.shape == (25, 2)
    np.testing.assert_array_equal(source.take(np.array([3, 12, 24])), Y[[3, 12, 24]])


@pytest.mark.parametrize("library", ["h5py", "zarr"])
def test_h5py_and_zarr_datasets_are_sliced(library, moons, tmp_path):
    lib = pytest.importorskip(library)
    Y = moons[0]
    if library == "h5py":
        f = lib.File(tmp_path / "Y.h5", "w")
        data = f.create_dataset("Y", data=Y, chunks=(256, 2))
    else:
        data = lib.open_array(str(tmp_path / "Y.zarr"), mode="w", shape=Y.shape, chunks=(256, 2), dtype=Y.dtype)
        data[:] = Y
    assert is_chunked_input(data)
    ref = KDS(12, **PARAMS).fit(Y)
    kds = KDS(12, **PARAMS).fit(data)
    np.testing.assert_array_equal(kds.components_, ref.components_)
    assert (kds.transform(data) != ref.transform(Y)).nnz == 0


def test_kmeans_on_a_sample_labels_like_full_kmeans(monkeypatch):
    # cluster_codes fits k-means on KMEANS_SAMPLE rows of the embedding and
    # labels every point by its nearest centre: on clusters as tight as a
    # row-normalised embedding's, the labels of a fit on all rows
    import fastkds.spectral as spectral

    rng = np.random.default_rng(0)
    centres = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    truth = rng.integers(0, 3, 5000)
    emb = centres[truth] + 0.05 * rng.normal(size=(5000, 2))

    class Results:  # the embedding given, whatever the graph's projection
        n = emb.shape[0]

        def embed(self, projection, sample):
            self.sample = sample
            return emb[sample]

        def label(self, kmeans):
            self.labels = kmeans.predict(emb)

    graph = np.eye(3)  # three atoms, each its own component: any spectrum will do

    def cluster():
        results = Results()
        kmeans = spectral.cluster_codes(
            graph, np.ones(3), centres, results, np.random.RandomState(0), (3, 4, 0.0, 3, "leading")
        )[2]
        return results, kmeans

    full, _ = cluster()
    monkeypatch.setattr(_config, "KMEANS_SAMPLE", 500)
    sampled, kmeans = cluster()
    assert full.sample.shape == (5000,) and sampled.sample.shape == (500,)
    assert kmeans.cluster_centers_.shape == (3, 2)
    assert clustering_accuracy(full.labels, sampled.labels) == 1.0
    assert clustering_accuracy(truth, sampled.labels) == 1.0


def _tight_blobs(n, k, seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, 6))
    truth = rng.integers(0, k, n)
    return centres[truth] + 0.05 * rng.normal(size=(n, 6)), truth


def test_kmeans_restarts_on_a_sample_refine_on_every_row(monkeypatch):
    # past the restart sample the n_init restarts run on a sample of the
    # rows and one Lloyd run on all of them refines the best: the same
    # clusters as restarts on every row, a model fitted on every row
    from sklearn.cluster import KMeans

    from fastkds.spectral import fit_kmeans

    rows, truth = _tight_blobs(3000, 5, 0)
    with threadpool_limits(1, user_api="openmp"):  # as fit_kmeans runs it (_config.single_thread_kmeans)
        plain = KMeans(5, n_init=4, random_state=7).fit(rows)
    monkeypatch.setattr(_config, "KMEANS_RESTART_MIN", 400)
    monkeypatch.setattr(_config, "KMEANS_RESTART_PER_CLUSTER", 10)
    kmeans = fit_kmeans(rows, 5, 4, 7)
    assert isinstance(kmeans.init, np.ndarray) and kmeans.init.shape == (5, 6) and kmeans.n_init == 1
    assert kmeans.labels_.shape == (3000,)
    assert clustering_accuracy(truth, kmeans.labels_) == 1.0
    np.testing.assert_allclose(kmeans.inertia_, plain.inertia_, rtol=1e-9)
    # 1,000 a cluster asked for: more than the rows, so the restarts run on all of them
    monkeypatch.setattr(_config, "KMEANS_RESTART_PER_CLUSTER", 1000)
    again = fit_kmeans(rows, 5, 4, 7)
    np.testing.assert_array_equal(again.labels_, plain.labels_)
    np.testing.assert_array_equal(again.cluster_centers_, plain.cluster_centers_)


def test_kmeans_below_the_restart_sample_is_scikit_learns():
    from sklearn.cluster import KMeans

    from fastkds.spectral import fit_kmeans

    rows, _ = _tight_blobs(2000, 3, 1)
    for n_init in (1, 3):
        ours = fit_kmeans(rows, 3, n_init, 11)
        with threadpool_limits(1, user_api="openmp"):  # as fit_kmeans runs it
            theirs = KMeans(3, n_init=n_init, random_state=11).fit(rows)
        np.testing.assert_array_equal(ours.cluster_centers_, theirs.cluster_centers_)
        assert ours.get_params() == theirs.get_params()


def test_a_model_whose_kmeans_restarted_on_a_sample_saves_and_loads(tmp_path, monkeypatch):
    from fastkds import load

    monkeypatch.setattr(_config, "KMEANS_RESTART_MIN", 300)
    monkeypatch.setattr(_config, "KMEANS_RESTART_PER_CLUSTER", 10)
    Y, _ = make_moons(2000, random_state=3)
    model = KDSClustering(2, **PARAMS).fit(Y)
    assert isinstance(model.kmeans_.init, np.ndarray)
    model.save(tmp_path / "m")
    back = load(tmp_path / "m")
    np.testing.assert_array_equal(back.kmeans_.init, model.kmeans_.init)
    np.testing.assert_array_equal(back.predict(Y[:300]), model.predict(Y[:300]))


def test_normalize_rows_in_place():
    from fastkds.spectral import normalize_rows

    U = np.array([[3.0, 4.0], [0.0, 0.0]])
    V = normalize_rows(U)
    assert V is not U and U[0, 0] == 3.0
    W = normalize_rows(U, copy=False)
    assert W is U
    np.testing.assert_allclose(U, [[0.6, 0.8], [0.0, 0.0]])


def test_nan_in_a_presampled_row_names_the_data_row(tmp_path):
    Y, _ = make_moons(100_000, random_state=4)
    Y[54_321, 1] = np.nan
    path = tmp_path / "nan.npy"
    np.save(path, Y)
    with pytest.raises(ValueError, match="row 54321"):
        KDS(8, lam=5.0, n_iter=5, max_epochs=2, presample=99_999, random_state=0).fit(str(path))


@pytest.mark.parametrize("model", [KDSClustering, KDSEnsembleClustering])
def test_the_vote_clusters_its_references_with_the_models_restarts(model, monkeypatch):
    # where k-means restarted on a sample, kmeans_ ran once from the best
    # restart: the references' own spectral clustering still gets n_init
    import fastkds.estimators._base as base

    seen = []
    fit_label_vote = base.fit_label_vote

    def spy(*args, **kwargs):
        seen.append(kwargs["n_init"])
        return fit_label_vote(*args, **kwargs)

    monkeypatch.setattr(base, "fit_label_vote", spy)
    monkeypatch.setattr(_config, "KMEANS_RESTART_MIN", 300)
    monkeypatch.setattr(_config, "KMEANS_RESTART_PER_CLUSTER", 10)
    Y, _ = make_moons(1500, random_state=0)
    fitted = model(2, n_init=7, random_state=0).fit(Y)
    assert fitted.kmeans_.n_init == 1 and seen == [7]

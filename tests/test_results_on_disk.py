"""Clustering data larger than memory: results of size n written to ``out``
(labels, embedding, codes), no O(n) array kept for data read from a file,
and the same answer as the in-memory fit."""

import os

import numpy as np
import pytest

from fastkds import _config
import fastkds.spectral as spectral_module
from fastkds import KDSClustering, make_moons
from fastkds.diskcodes import DiskCodesWriter, NpyAppender, NpyRows, load_codes
from fastkds.sources import NpyFileSource, SlicedSource, as_source

PARAMS = dict(n_atoms=16, lam=5.0, n_iter=15, max_epochs=15, random_state=0)


@pytest.fixture(scope="module")
def moons():
    return make_moons(2500, random_state=3)


@pytest.fixture
def npy_path(tmp_path, moons):
    path = tmp_path / "data" / "Y.npy"
    path.parent.mkdir()
    np.save(path, moons[0])
    return path


def _no_temporary_files(folder):
    return [name for _, _, files in os.walk(folder) for name in files if name.endswith(".tmp")]


@pytest.fixture(params=[False, True], ids=["all-in-sample", "sampled-kmeans"])
def kmeans_sample_size(request, monkeypatch):
    """The whole embedding as k-means' sample, or a sample of 700 rows (the
    path 10^7 points take, at a size a test can run)."""
    if request.param:
        monkeypatch.setattr(_config, "KMEANS_SAMPLE", 700)
    return request.param


def test_fit_out_writes_the_results_of_the_in_memory_fit(moons, npy_path, tmp_path, kmeans_sample_size):
    Y = moons[0]
    ref = KDSClustering(2, **PARAMS).fit(Y)
    out = tmp_path / "results"
    model = KDSClustering(2, **PARAMS).fit(npy_path, out=out)
    np.testing.assert_array_equal(model.labels_, ref.labels_)
    np.testing.assert_allclose(model.embedding_, ref.embedding_, rtol=1e-12, atol=1e-12)
    # the attributes are maps of the files, which hold the same values
    assert isinstance(model.labels_, np.memmap) and isinstance(model.embedding_, np.memmap)
    np.testing.assert_array_equal(np.load(out / "labels.npy"), ref.labels_)
    np.testing.assert_array_equal(np.load(out / "embedding.npy"), model.embedding_)
    codes = load_codes(out / "codes", n_atoms=ref.components_.shape[0])
    np.testing.assert_allclose(codes.toarray(), ref.kds_.transform(Y).toarray(), rtol=1e-12, atol=1e-12)
    assert not _no_temporary_files(out)


@pytest.mark.parametrize("kind", ["path", "chunks"])
def test_chunked_data_without_out_give_the_same_labels(moons, npy_path, kind, kmeans_sample_size):
    Y = moons[0]
    ref = KDSClustering(2, **PARAMS).fit(Y)
    X = npy_path if kind == "path" else [Y[:1000], Y[1000:1700], Y[1700:]]
    model = KDSClustering(2, **PARAMS).fit(X)
    np.testing.assert_array_equal(model.labels_, ref.labels_)
    np.testing.assert_allclose(model.embedding_, ref.embedding_, rtol=1e-12, atol=1e-12)


def test_fit_predict_passes_out(moons, npy_path, tmp_path):
    labels = KDSClustering(2, **PARAMS).fit_predict(npy_path, out=tmp_path / "r")
    np.testing.assert_array_equal(labels, np.load(tmp_path / "r" / "labels.npy"))


def test_a_failed_fit_with_out_keeps_the_earlier_files_and_model(moons, npy_path, tmp_path, monkeypatch):
    out = tmp_path / "results"
    model = KDSClustering(2, **PARAMS).fit(npy_path, out=out)
    before = {name: np.load(out / name).copy() for name in ("labels.npy", "embedding.npy")}
    labels_before = np.array(model.labels_)

    def interrupted(self, triple):
        raise KeyboardInterrupt

    monkeypatch.setattr(spectral_module.EmbeddingPass, "append", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.set_params(random_state=1).fit(npy_path, out=out)
    for name, values in before.items():
        np.testing.assert_array_equal(np.load(out / name), values)
    np.testing.assert_array_equal(model.labels_, labels_before)
    assert not _no_temporary_files(out)


def test_out_holding_the_input_is_refused_before_fitting(npy_path, monkeypatch):
    model = KDSClustering(2, **PARAMS)
    with pytest.raises(ValueError, match="holds the input file"):
        model.fit(npy_path, out=npy_path.parent)
    assert not hasattr(model, "labels_")
    assert sorted(os.listdir(npy_path.parent)) == ["Y.npy"]


def test_a_path_is_read_by_file_reads_not_mapped(npy_path, moons):
    source = as_source(npy_path)
    assert isinstance(source, NpyFileSource)
    read = []
    for start, chunk in source.chunks(1000):
        base = chunk
        while base.base is not None:  # no memory map under the chunk
            base = base.base
        assert isinstance(base, np.ndarray) and not isinstance(base, np.memmap) and base.flags.owndata
        read.append(chunk)
    np.testing.assert_array_equal(np.concatenate(read), moons[0])
    rows = [5, 17, 2000]
    np.testing.assert_array_equal(source.take(rows), moons[0][rows])


def test_a_fortran_ordered_file_is_still_read(tmp_path, moons):
    path = tmp_path / "F.npy"
    np.save(path, np.asfortranarray(moons[0]))
    source = as_source(path)
    assert isinstance(source, SlicedSource)
    np.testing.assert_array_equal(source.to_array(), moons[0])


def test_npy_rows_read_any_rows_and_notice_a_truncated_file(tmp_path, monkeypatch):
    A = np.arange(60, dtype=np.float32).reshape(20, 3)
    path = tmp_path / "A.npy"
    np.save(path, A)
    rows = NpyRows(path)
    assert rows.shape == (20, 3) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows.read(4, 9), A[4:9])
    monkeypatch.setattr(_config, "TAKE_WINDOW_BYTES", 24)  # two rows a window
    for picked in ([], [0], [1, 2, 3, 9, 10, 19], list(range(20))):
        np.testing.assert_array_equal(rows.take(picked), A[picked])
    with open(path, "r+b") as f:  # cut the file short after the header was read
        f.truncate(os.path.getsize(path) - 12)
    with pytest.raises(ValueError, match="changed while it was read"):
        rows.read(15, 20)
    assert NpyRows.open(path) is None  # shorter than its header says


def test_npy_appender_writes_rows_of_a_shape(tmp_path):
    path = str(tmp_path / "E.npy")
    f = NpyAppender(path, np.float64, (3,))
    f.append(np.ones((2, 3)))
    f.append(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="rows of shape"):
        f.append(np.ones((1, 2)))
    f.close()
    assert not os.path.exists(path)  # under its temporary name until committed
    f.commit()
    np.testing.assert_array_equal(np.load(path), np.r_[np.ones((2, 3)), np.zeros((4, 3))])


def test_disk_codes_writer_can_defer_the_commit(tmp_path):
    w = DiskCodesWriter(tmp_path / "codes", 4, np.float64)
    w.append((np.array([0, 1, 3]), np.array([2, 0, 3]), np.array([1.0, 0.25, 0.75])))
    assert w.close(commit=False) is None
    assert not os.path.exists(tmp_path / "codes" / "data.npy")
    assert all(os.path.exists(p) for p in w.temporary_paths.values())
    w.commit()
    np.testing.assert_array_equal(
        load_codes(tmp_path / "codes", n_atoms=4).toarray(), [[0, 0, 1.0, 0], [0.25, 0, 0, 0.75]]
    )


def test_dask_input_refuses_out(tmp_path, moons):
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match="out= is not supported for Dask"):
        KDSClustering(2, **PARAMS).fit(da.from_array(moons[0], chunks=1000), out=tmp_path)


@pytest.mark.parametrize("n, size", [(10, 10), (100, 30), (10**6, 1000), (10**12, 5)])
def test_random_rows_are_distinct_and_in_range(n, size):
    from fastkds.sources import random_rows

    rows = random_rows(np.random.RandomState(0), n, size)
    assert rows.shape == (size,) and np.unique(rows).shape == (size,)
    assert rows.min() >= 0 and rows.max() < n


def test_random_rows_are_uniform():
    from fastkds.sources import random_rows

    rng = np.random.RandomState(0)
    counts = np.bincount(np.concatenate([random_rows(rng, 1000, 50) for _ in range(2000)]), minlength=1000)
    # each row is picked with probability 0.05: 100 times in 2000 draws, sd about 9.7
    assert counts.min() > 50 and counts.max() < 150
    first = np.bincount(np.concatenate([random_rows(rng, 1000, 50)[:5] for _ in range(2000)]), minlength=1000)
    assert abs(first.sum() - 10000) == 0 and first.max() < 35  # a prefix is a uniform sample too (mean 10)


def test_random_rows_of_a_smaller_size_are_a_prefix():
    from fastkds.sources import random_rows

    large = random_rows(np.random.RandomState(7), 10**7, 200_000)
    small = random_rows(np.random.RandomState(7), 10**7, 20_000)
    np.testing.assert_array_equal(small, large[:20_000])


@pytest.mark.parametrize("n, length, size", [(5, 40, 3), (5, 40, 9), (10**6, 3000, 2500), (2**40, 500, 500), (3, 0, 2)])
def test_first_distinct_matches_its_numpy_twin(n, length, size):
    # random_rows' sample: the first `size` distinct draws in order, by a
    # hash set, against np.unique's (sorting) answer; with many repeats
    # (n = 5), with fewer distinct values than asked for, and with none
    from fastkds import _kernels, _naive

    values = np.random.default_rng(length).integers(0, n, size=length)
    got = _kernels.first_distinct(values, size)
    np.testing.assert_array_equal(got, _naive.first_distinct(values, size))
    assert got.shape[0] == min(size, np.unique(values).shape[0])

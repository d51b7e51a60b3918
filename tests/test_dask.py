"""Dask arrays: fit, transform, predict and score where the blocks live, with
the same results as the in-memory estimators (fastkds._dask).

The oracle is the in-memory fit on the same data and seed: the Dask path
must reproduce its subsample, seeding and re-seed candidates, so the
dictionaries agree to rounding and the labels exactly.
"""

import os
import pickle
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from fastkds import KDS, KDSClustering, clustering_accuracy, make_moons, solvers
from fastkds.exceptions import TooFewSamplesWarning
from fastkds.prepared import csr_from_dense
from fastkds.solvers import SufficientStatistics

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

PARAMS = dict(n_atoms=24, lam=5.0, n_iter=15, max_epochs=10, random_state=0)


@pytest.fixture(scope="module")
def moons():
    return make_moons(6000, random_state=0)


@pytest.fixture(scope="module")
def reference(moons):
    """In-memory fits: the oracle for every Dask fit below."""
    Y, _ = moons
    return KDSClustering(2, **PARAMS).fit(Y), KDS(**PARAMS, presample=100).fit(Y)


@pytest.fixture(scope="module")
def client():
    """Two one-thread worker processes on the loopback, no dashboard."""
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        memory_limit="2GiB",
    )
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def run_python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


# -- without any scheduler ------------------------------------------------------


def test_import_fastkds_does_not_import_dask():
    res = run_python(
        "import sys, numpy as np, fastkds\n"
        "Y, _ = fastkds.make_moons(200, random_state=0)\n"
        "m = fastkds.KDSClustering(2, n_atoms=8, max_epochs=2, random_state=0).fit(Y)\n"
        "m.predict(Y); fastkds.KDS(4, max_epochs=2).fit(Y).transform(Y)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('dask', 'distributed'))\n"
        "print(bad)\n"
        "assert not bad, bad\n"
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_is_dask_array():
    from fastkds._dask import is_dask_array

    Y = np.zeros((4, 2))
    assert not is_dask_array(Y)
    assert is_dask_array(da.from_array(Y, chunks=2))


@pytest.mark.parametrize("splits", [[1000], [7, 300, 301, 999], [250, 500, 750]])
def test_reservoir_does_not_depend_on_the_chunking(splits):
    """Keys addressed by global row: chunks added in sequence, or blocks
    merged as a tree, keep the very same candidates as one pass."""
    rng = np.random.default_rng(0)
    n, m, d = 1000, 6, 3
    X = rng.dirichlet(np.ones(m), size=n)
    Y = rng.normal(size=(n, d))
    obj = rng.random(n)
    obj[rng.choice(n, 50, replace=False)] = 0.0  # never drawn: key -inf
    triple = csr_from_dense(X)
    whole = SufficientStatistics(m, d, n_candidates=8, random_state=np.random.RandomState(5))
    whole.add_chunk(*triple, Y, obj)

    edges = [0, *splits] if splits[-1] == n else [0, *splits, n]
    seq = SufficientStatistics(m, d, n_candidates=8, random_state=np.random.RandomState(5))
    blocks = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        seq.add_chunk(*csr_from_dense(X[lo:hi]), Y[lo:hi], obj[lo:hi])
        part = SufficientStatistics(m, d, n_candidates=8, key=whole.key, row_start=lo)
        part.add_chunk(*csr_from_dense(X[lo:hi]), Y[lo:hi], obj[lo:hi])
        blocks.append(part)
    merged = blocks[-1]
    for part in blocks[-2::-1]:  # merge order does not matter either
        merged = part.merge(merged)
    for other in (seq, merged):
        np.testing.assert_array_equal(other.candidates, whole.candidates)
        np.testing.assert_allclose(other.XtX, whole.XtX, rtol=1e-12)
        np.testing.assert_allclose(other.XtY, whole.XtY, rtol=1e-12)
        assert other.n_samples == n
    # the candidates are points with positive objective, no point twice
    rows = [int(np.flatnonzero((Y == c).all(axis=1))[0]) for c in whole.candidates]
    assert len(set(rows)) == 8 and np.all(obj[rows] > 0)


def test_merge_refuses_other_keys():
    a = SufficientStatistics(3, 2, n_candidates=2, key=1)
    with pytest.raises(ValueError, match="different keys"):
        a.merge(SufficientStatistics(3, 2, n_candidates=2, key=2))
    with pytest.raises(ValueError, match="random_state or a key"):
        SufficientStatistics(3, 2, n_candidates=2)


# -- synchronous scheduler ------------------------------------------------------


@pytest.fixture
def sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def test_synchronous_fit_transform_score_match_in_memory(moons, reference, sync):
    Y, y = moons
    ref_clu, ref_kds = reference
    X = da.from_array(Y, chunks=(700, 2))  # 9 blocks, the last one short
    kds = KDS(**PARAMS, presample=100).fit(X)
    np.testing.assert_allclose(kds.components_, ref_kds.components_, rtol=1e-9, atol=1e-12)
    assert kds.n_iter_ == ref_kds.n_iter_ and kds.n_features_in_ == 2
    codes = kds.transform(X)
    assert isinstance(codes, da.Array) and codes.chunks[0] == X.chunks[0]
    got, want = codes.compute(), ref_kds.transform(Y)
    assert got.shape == want.shape and abs(got - want).max() < 1e-12
    assert kds.objective(X) == pytest.approx(ref_kds.objective(Y), rel=1e-12)

    clu = KDSClustering(2, **PARAMS).fit(X)
    labels = clu.labels_.compute()
    np.testing.assert_array_equal(labels, ref_clu.labels_)
    assert clustering_accuracy(y, labels) == clustering_accuracy(y, ref_clu.labels_)
    np.testing.assert_array_equal(clu.predict(X).compute(), ref_clu.predict(Y))
    # eigenvectors have no sign: the rounding of the sums may flip a column
    got, want = clu.transform(X).compute(), ref_clu.transform(Y)
    sign = np.sign(np.sum(got * want, axis=0))
    np.testing.assert_allclose(got * sign, want, atol=1e-9)


def test_synchronous_float32_and_several_feature_chunks(sync):
    Y, _ = make_moons(3000, random_state=1)
    Y = np.c_[Y, Y[:, :1] * 0.5].astype(np.float32)
    X = da.from_array(Y, chunks=(400, 2))  # two chunks along features: rechunked
    params = dict(n_atoms=12, lam=2.0, n_iter=10, max_epochs=6, random_state=3, init="random")
    ref = KDS(**params).fit(Y)
    got = KDS(**params).fit(X)
    assert got.components_.dtype == np.float32
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-5, atol=1e-6)
    assert got.transform(X).dtype == np.float32


def test_sparse_blocks_are_read_as_their_dense_blocks(sync):
    # a Dask array of scipy sparse blocks: each block made dense in its task
    import scipy.sparse as sp

    Y, _ = make_moons(3000, random_state=2)
    Y[np.abs(Y) < 0.3] = 0.0
    dense = da.from_array(Y, chunks=(700, 2))
    blocks = dense.map_blocks(sp.csr_matrix)
    params = dict(n_atoms=12, lam=2.0, n_iter=10, max_epochs=6, random_state=3)
    np.testing.assert_array_equal(KDS(**params).fit(blocks).components_, KDS(**params).fit(dense).components_)
    labels = KDSClustering(2, **params).fit(blocks).labels_.compute()
    np.testing.assert_array_equal(labels, KDSClustering(2, **params).fit(dense).labels_.compute())


@pytest.mark.parametrize(
    "dtype, working", [(">f4", np.float32), ("<f4", np.float32), (">f8", np.float64), ("i2", np.float64)]
)
def test_dask_input_computes_in_the_working_dtype(dtype, working):
    from fastkds._dask import check_dask_array

    X = check_dask_array(da.from_array(np.arange(12).reshape(6, 2).astype(dtype), chunks=3))
    assert X.dtype == np.dtype(working)  # native order: the kernels read native numbers
    np.testing.assert_array_equal(X.compute(), np.arange(12).reshape(6, 2))


def test_threaded_scheduler_matches_in_memory(moons, reference):
    """Dask's default local scheduler: block tasks in threads of this process."""
    Y, _ = moons
    _, ref_kds = reference
    with dask.config.set(scheduler="threads", num_workers=2):
        kds = KDS(**PARAMS, presample=100).fit(da.from_array(Y, chunks=(1000, 2)))
    np.testing.assert_allclose(kds.components_, ref_kds.components_, rtol=1e-9, atol=1e-12)


def test_bad_dask_input_is_refused_clearly(sync):
    Y, _ = make_moons(500, random_state=0)
    bad = Y.copy()
    bad[321, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        KDS(8, max_epochs=2, init="random").fit(da.from_array(bad, chunks=100))
    with pytest.raises(ValueError, match="2-D"):
        KDS(8).fit(da.zeros((4, 4, 4)))
    with pytest.raises(TypeError, match="numeric"):
        KDS(8).fit(da.from_array(np.array([["a", "b"]] * 20)))
    X = da.from_array(Y, chunks=100)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        KDS(8).fit(X[X[:, 0] > 0])
    with pytest.raises(ValueError, match="smaller than n_atoms"):  # atoms given as init cannot shrink
        KDS(8, init=Y[:8]).fit(X[:5])
    with pytest.warns(TooFewSamplesWarning, match="n_atoms=8"):  # as in memory: one atom per point
        assert KDS(8, max_epochs=2).fit(X[:5]).components_.shape == (5, Y.shape[1])
    with pytest.raises(ValueError, match="solver='exact'"):
        KDS(8, solver="unrolled").fit(X)
    with pytest.raises(ValueError, match="device='cuda'"):
        KDS(8, device="cuda").fit(X)
    model = KDS(8, max_epochs=2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 3 features"):
        model.transform(da.zeros((10, 3), chunks=5))
    Y_before = Y.copy()
    model.transform(X).compute()
    np.testing.assert_array_equal(Y, Y_before)


# -- distributed: LocalCluster, 2 worker processes ------------------------------


def test_distributed_fit_matches_in_memory(moons, reference, client):
    Y, y = moons
    ref_clu, ref_kds = reference
    X = da.from_array(Y, chunks=(750, 2))  # 8 blocks
    assert X.numblocks[0] >= 8
    clu = KDSClustering(2, **PARAMS).fit(X)
    np.testing.assert_allclose(clu.components_, ref_clu.components_, rtol=1e-9, atol=1e-12)
    labels = clu.labels_.compute()
    np.testing.assert_array_equal(labels, ref_clu.labels_)
    acc = clustering_accuracy(y, labels)
    assert acc == clustering_accuracy(y, ref_clu.labels_) and acc > 0.95
    np.testing.assert_array_equal(clu.predict(X).compute(), ref_clu.predict(Y))
    codes = clu.kds_.transform(X).compute()
    assert abs(codes - ref_clu.kds_.transform(Y)).max() < 1e-12

    # nested warm-start subsamples (100, then 1000 points), gathered by fancy indexing
    kds = KDS(**PARAMS, presample=100).fit(X)
    np.testing.assert_allclose(kds.components_, ref_kds.components_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(kds.objective_, ref_kds.objective_, rtol=1e-10)


def test_estimators_pickle_cleanly(moons, reference, client):
    Y, _ = moons
    ref_clu, _ = reference
    X = da.from_array(Y, chunks=(1500, 2))
    clu = KDSClustering(2, **PARAMS).fit(X)
    for model in (clu, clu.kds_, ref_clu):
        back = pickle.loads(pickle.dumps(model))
        assert type(back) is type(model)
    back = pickle.loads(pickle.dumps(clu))
    np.testing.assert_array_equal(back.predict(Y), ref_clu.predict(Y))
    np.testing.assert_array_equal(back.labels_.compute(), ref_clu.labels_)
    np.testing.assert_array_equal(back.predict(X).compute(), ref_clu.predict(Y))


def _flaky_identity(block, marker_dir, block_info=None):
    """Fails the first time block 3 is made (a marker file remembers it)."""
    i = block_info[0]["chunk-location"][0]
    marker = os.path.join(marker_dir, f"failed-{i}")
    if i == 3 and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("injected failure")
    return block


def test_task_failing_once_is_retried(moons, reference, client, tmp_path):
    Y, _ = moons
    ref_clu, _ = reference
    with dask.annotate(retries=2):
        X = da.from_array(Y, chunks=(750, 2)).map_blocks(_flaky_identity, str(tmp_path), dtype=Y.dtype)
    clu = KDSClustering(2, **PARAMS).fit(X)
    assert os.listdir(tmp_path) == ["failed-3"]  # it did fail once
    np.testing.assert_allclose(clu.components_, ref_clu.components_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(clu.labels_.compute(), ref_clu.labels_)


def test_worker_killed_mid_fit_does_not_corrupt_the_result(moons, client, monkeypatch):
    Y, _ = moons
    X = da.from_array(Y, chunks=(750, 2))
    undisturbed = KDS(**PARAMS).fit(X)

    real = solvers.solve_dictionary
    killed = []

    def kill_after_epoch_2(stats, *args, **kwargs):
        # runs on the client between two epochs: the dead worker held half
        # of the persisted blocks, which the scheduler must recompute
        if len(killed) == 0 and stats.n_samples == Y.shape[0] and kill_after_epoch_2.calls == 2:
            victim = sorted(client.nthreads())[0]
            try:
                client.run(os._exit, 1, workers=[victim])
            except Exception:  # noqa: BLE001 - the worker dies before it answers
                pass
            for _ in range(300):
                if victim not in client.nthreads():
                    break
                time.sleep(0.1)
            killed.append(victim)
        kill_after_epoch_2.calls += 1
        return real(stats, *args, **kwargs)

    kill_after_epoch_2.calls = 1
    monkeypatch.setattr(solvers, "solve_dictionary", kill_after_epoch_2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = KDS(**PARAMS).fit(X)
    assert killed and killed[0] not in client.nthreads()
    # same reduction tree, same order: bitwise the undisturbed fit
    np.testing.assert_array_equal(got.components_, undisturbed.components_)
    np.testing.assert_array_equal(got.objective_, undisturbed.objective_)
    client.wait_for_workers(2, timeout=60)

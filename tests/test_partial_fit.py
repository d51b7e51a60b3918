"""``KDS.partial_fit``: learning from a stream of chunks with either solver,
the decayed running statistics of the exact solver, and clustering a stream
from the learned dictionary (one more exact step, ``max_epochs=1``)."""

import numpy as np
import pytest

from fastkds import KDS, KDSClustering, clustering_accuracy, load, make_moons
from fastkds.online import RunningStatistics

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

PARAMS = dict(n_atoms=24, lam=5.0, n_iter=15, random_state=0)


def _stream(n_chunks, size, seed=100):
    chunks = [make_moons(size, random_state=seed + i) for i in range(n_chunks)]
    return [c[0] for c in chunks], np.concatenate([c[1] for c in chunks])


def test_exact_stream_reaches_the_full_fit_objective_and_clusters():
    chunks, labels = _stream(12, 1000)
    Y = np.concatenate(chunks)
    full = KDS(**PARAMS, max_epochs=40).fit(Y)
    online = KDS(**PARAMS)
    for chunk in chunks:
        online.partial_fit(chunk)
    assert online.n_iter_ == len(chunks)
    assert online.objective_.shape == (len(chunks),)
    f_full, f_online = full.objective(Y), online.objective(Y)
    assert f_online <= 1.02 * f_full
    model = KDSClustering(2, **PARAMS, init=online.components_, max_epochs=1).fit(Y)
    assert clustering_accuracy(labels, model.labels_) >= 0.99


def test_unrolled_partial_fit_continues_a_fit_exactly():
    Y, _ = make_moons(600, random_state=1)
    kw = dict(PARAMS, solver="unrolled", batch_size=128, learning_rate=1e-2, train_step=True)
    whole = KDS(**kw, max_epochs=3).fit(Y)
    parts = KDS(**kw, max_epochs=1).fit(Y)
    parts.partial_fit(Y)
    parts.partial_fit(Y)
    assert np.array_equal(parts.components_, whole.components_)
    assert parts.step_ == whole.step_
    assert np.array_equal(parts.objective_, whole.objective_)
    assert parts.n_iter_ == 3


def test_unrolled_stream_lowers_the_objective():
    chunks, _ = _stream(6, 500, seed=7)
    model = KDS(**PARAMS, solver="unrolled", batch_size=100, learning_rate=1e-2, init="random")
    first = None
    for chunk in chunks:
        model.partial_fit(chunk)
        first = model.objective_[0] if first is None else first
    assert model.objective_[-1] < 0.9 * first


def test_exact_partial_fit_after_fit_continues():
    Y, _ = make_moons(800, random_state=2)
    model = KDS(**PARAMS, max_epochs=3).fit(Y)
    W = model.components_.copy()
    model.partial_fit(Y)
    assert model.n_iter_ == 4 and model.objective_.shape == (4,)
    assert not np.array_equal(model.components_, W)


def test_running_statistics_weigh_chunk_i_by_i_over_t_to_the_rho():
    rng = np.random.default_rng(0)

    class Chunk:
        def __init__(self):
            self.XtX = rng.random((3, 3))
            self.s = rng.random(3)
            self.XtY = rng.random((3, 2))
            self.candidates = rng.random((3, 2))

    chunks = [Chunk() for _ in range(4)]
    for rho in (1.0, 2.0):
        run = RunningStatistics(3, 2, rho=rho)
        for c in chunks:
            run.add(c)
        t = len(chunks)
        for name in ("XtX", "s", "XtY"):
            expected = sum(((i + 1) / t) ** rho * getattr(c, name) for i, c in enumerate(chunks))
            np.testing.assert_allclose(getattr(run, name), expected, rtol=1e-12)


@pytest.mark.parametrize("solver", ["exact", "unrolled"])
def test_partial_fit_keeps_dtype_and_input(solver):
    Y, _ = make_moons(300, random_state=3)
    Y32 = Y.astype(np.float32)
    Y0 = Y32.copy()
    model = KDS(8, lam=1.0, n_iter=10, solver=solver, random_state=0).partial_fit(Y32)
    model.partial_fit(Y32)
    assert model.components_.dtype == np.float32
    assert model.transform(Y32).dtype == np.float32
    assert np.array_equal(Y32, Y0)


@pytest.mark.parametrize("solver", ["exact", "unrolled"])
def test_partial_fit_refuses_bad_chunks(solver):
    Y, _ = make_moons(100, random_state=4)
    with pytest.raises(ValueError, match="n_atoms"):  # atoms given as init cannot shrink to the chunk
        KDS(24, init=Y[:24], solver=solver).partial_fit(Y[:10])
    model = KDS(8, solver=solver, random_state=0).partial_fit(Y)
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(np.c_[Y, Y])


@pytest.mark.parametrize("train_step", [False, True])
def test_partial_fit_after_load(tmp_path, train_step):
    Y, _ = make_moons(400, random_state=5)
    model = KDS(**PARAMS, solver="unrolled", max_epochs=2, batch_size=100, train_step=train_step).fit(Y)
    model.save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz")
    loaded.partial_fit(Y)
    assert loaded.n_iter_ == 3
    # one Adam step moves each coordinate by at most about the learning rate
    assert np.abs(loaded.components_ - model.components_).max() < 1e-2
    if train_step:
        assert loaded.step_ == pytest.approx(model.step_, rel=0.05)

"""Several Python threads on one fitted estimator, and interrupted fits."""

import threading

import numpy as np
import pytest

from fastkds import KDS, KDSClustering, make_moons, solvers


@pytest.fixture(scope="module")
def moons():
    return make_moons(6000, random_state=0)


def _in_threads(fn, n_threads=4):
    results, errors = [None] * n_threads, []

    def work(i):
        try:
            results[i] = fn()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_concurrent_transform_and_predict_match_serial(moons):
    Y, _ = moons
    model = KDSClustering(2, n_atoms=24, lam=5.0, n_iter=15, max_epochs=5, random_state=0).fit(Y)
    codes = model.kds_.transform(Y)
    labels = model.predict(Y)
    for got in _in_threads(lambda: model.kds_.transform(Y)):
        np.testing.assert_array_equal(got.indptr, codes.indptr)
        np.testing.assert_array_equal(got.data, codes.data)
    for got in _in_threads(lambda: model.predict(Y)):
        np.testing.assert_array_equal(got, labels)


class _Interrupt:
    """Wraps solve_dictionary to raise KeyboardInterrupt on its n-th call."""

    def __init__(self, n):
        self.n, self.calls, self.real = n, 0, solvers.solve_dictionary

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return self.real(*args, **kwargs)


def test_interrupted_fit_leaves_estimator_unfitted(moons, monkeypatch):
    Y, _ = moons
    monkeypatch.setattr(solvers, "solve_dictionary", _Interrupt(3))
    model = KDS(8, max_epochs=10, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        model.fit(Y)
    assert not hasattr(model, "components_")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_interrupted_refit_keeps_the_previous_model(moons, monkeypatch):
    Y, _ = moons
    model = KDS(8, max_epochs=3, random_state=0).fit(Y)
    before = model.components_.copy()
    monkeypatch.setattr(solvers, "solve_dictionary", _Interrupt(2))
    with pytest.raises(KeyboardInterrupt):
        model.set_params(random_state=1).fit(Y[::-1])
    np.testing.assert_array_equal(model.components_, before)
    assert model.transform(Y).shape == (Y.shape[0], 8)

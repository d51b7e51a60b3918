"""A clusterer's fit ends on the codes of its last epoch
(:class:`fastkds.solvers.LastEpoch`).

Checked against independent computations: the kept codes against the
encoder run again on the returned dictionary (and the NumPy oracle), their
statistics against sums of those codes, and the returned dictionary against
the plain fit, which is exactly one dictionary step further.
"""

import numpy as np
import pytest

from fastkds import KDSClustering, _naive, clustering_accuracy, make_moons
from fastkds._backends import CpuBackend
from fastkds.encoding import FittedEncoder
from fastkds.prepared import PreparedDictionary, concatenate_csr
from fastkds.solvers import LastEpoch, fit_alternating, solve_dictionary

LAM, N_ITER = 2.0, 20


def _fit(Y, W0, last_epoch=None, tol=1e-2, max_epochs=30, best_before=None):
    return fit_alternating(
        Y,
        W0,
        lam=LAM,
        n_iter=N_ITER,
        max_epochs=max_epochs,
        tol=tol,
        chunk_size=700,
        random_state=np.random.RandomState(0),
        backend=CpuBackend(),
        last_epoch=last_epoch,
        best_before=best_before,
    )


@pytest.fixture(scope="module")
def moons():
    Y = make_moons(2000, random_state=5)[0]
    return Y, Y[np.random.default_rng(0).choice(Y.shape[0], 12, replace=False)].copy()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kept_codes_are_the_returned_dictionarys_codes(moons, dtype):
    Y, W0 = moons[0].astype(dtype), moons[1]
    kept = LastEpoch(list)
    W, history, epochs, converged = _fit(Y, W0, kept)
    assert converged and epochs < 30
    # the atoms as components_ stores them: the codes are the fitted model's
    np.testing.assert_array_equal(W, W.astype(dtype))
    codes = concatenate_csr(kept.codes, W.shape[0], dtype)
    again = PreparedDictionary(W.astype(dtype), LAM, N_ITER, dtype).encode_dense(Y)[0]
    np.testing.assert_array_equal(codes.toarray(), again)
    oracle = _naive.encode(Y.astype(np.float64), W, LAM, N_ITER)
    np.testing.assert_allclose(codes.toarray(), oracle, atol=1e-3 if dtype == np.float32 else 1e-9)
    X = codes.toarray().astype(np.float64)
    np.testing.assert_allclose(kept.stats.XtX, X.T @ X, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(kept.stats.s, X.sum(axis=0), rtol=1e-9)
    assert kept.stats.mean_objective == pytest.approx(history[-1])


def test_the_plain_fit_is_one_dictionary_step_further(moons):
    Y, W0 = moons
    kept = LastEpoch(list)
    W_last, history_last, epochs_last, _ = _fit(Y, W0, kept)
    W_plain, history_plain, epochs_plain, _ = _fit(Y, W0)
    assert history_last == history_plain and epochs_last == epochs_plain
    assert not np.array_equal(W_last, W_plain)
    np.testing.assert_array_equal(solve_dictionary(kept.stats, LAM, W_last)[0], W_plain)


def test_the_update_a_converged_fit_drops_is_not_solved(moons, monkeypatch):
    """A fit that ends on its last epoch's atoms solves one dictionary step
    fewer than it runs epochs; the plain fit solves one an epoch, and the
    progress display hears of every epoch either way, no atom re-seeded by
    the update the first drops."""
    from fastkds import solvers

    Y, W0 = moons
    solved = []
    original = solvers.solve_dictionary

    def counted(*args, **kwargs):
        solved.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(solvers, "solve_dictionary", counted)
    for kept, dropped in ((LastEpoch(list), 1), (None, 0)):
        solved.clear()
        shown = []
        _, _, epochs, converged = fit_alternating(
            Y,
            W0,
            lam=LAM,
            n_iter=N_ITER,
            max_epochs=30,
            tol=1e-2,
            chunk_size=700,
            random_state=np.random.RandomState(0),
            backend=CpuBackend(),
            last_epoch=kept,
            progress=lambda epoch, F, n_dead: shown.append((epoch, n_dead)),
        )
        assert converged and len(solved) == epochs - dropped
        assert [e for e, _ in shown] == list(range(1, epochs + 1))
        if dropped:
            assert shown[-1][1] == 0


def test_a_fit_that_does_not_converge_keeps_nothing(moons):
    Y, W0 = moons
    for tol, max_epochs in [(0.0, 3), (1e-2, 1)]:  # no convergence test, or no epoch to compare
        kept = LastEpoch(list)
        W, _, _, converged = _fit(Y, W0, kept, tol=tol, max_epochs=max_epochs)
        assert not converged and kept.codes is None and kept.stats is None
        np.testing.assert_array_equal(W, _fit(Y, W0, tol=tol, max_epochs=max_epochs)[0])


def test_without_a_sink_only_the_dictionary_rule_applies(moons):
    Y, W0 = moons
    kept = LastEpoch()
    W, *_ = _fit(Y, W0, kept)
    assert kept.codes is None
    np.testing.assert_array_equal(W, _fit(Y, W0, LastEpoch(list))[0])


def test_a_warm_starts_objective_counts_among_the_earlier_epochs(moons):
    """A first epoch that does not lower the warm start's objective by tol
    ends the fit (on the warm start's atoms and their codes); one that
    does goes on as without it."""
    Y, W0 = moons
    _, history, epochs, _ = _fit(Y, W0)
    assert epochs >= 2
    kept = LastEpoch(list)
    W, history_low, epochs_low, converged = _fit(Y, W0, kept, best_before=0.999 * history[0])
    assert (epochs_low, converged, history_low) == (1, True, history[:1])
    np.testing.assert_array_equal(W, W0)  # float64 atoms: nothing to round
    assert kept.codes is not None
    _, history_high, epochs_high, _ = _fit(Y, W0, best_before=2.0 * history[0])
    assert (epochs_high, history_high) == (epochs, history)


def test_the_fit_after_a_warm_start_ends_when_its_first_epoch_gains_nothing():
    """1e5 moons, with the warm start on subsamples: the dictionary on all
    points stops after one epoch, its codes embedded."""
    Y, y = make_moons(100_000, random_state=0)
    model = KDSClustering(2, random_state=0, n_atoms=24).fit(Y)
    assert model.kds_.n_iter_ == 1 and model.timings_["encode"] == 0.0
    assert clustering_accuracy(y, model.labels_) > 0.998


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_clustering_skips_the_second_pass_and_matches_its_model(dtype, monkeypatch):
    """The fit runs no encoding pass after the dictionary's, and its
    embedding is that of the fitted model's codes (``transform``)."""
    Y = make_moons(3000, random_state=2)[0].astype(dtype)
    passes = []
    original = FittedEncoder.run

    def counted(self, *args, **kwargs):
        passes.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FittedEncoder, "run", counted)
    model = KDSClustering(2, random_state=0).fit(Y)
    assert model.kds_.n_iter_ < model.kds_.max_epochs and not passes
    assert model.timings_["encode"] == 0.0
    np.testing.assert_allclose(model.embedding_, model.transform(Y), rtol=1e-6, atol=1e-8)
    # a fit that stops at max_epochs encodes the points again, with its last update
    assert KDSClustering(2, random_state=0, max_epochs=1).fit(Y).timings_["encode"] > 0.0
    assert len(passes) == 1

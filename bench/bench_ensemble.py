"""Fitting the dictionaries of KDSEnsembleClustering one at a time
(``n_jobs=None``, the baseline) against side by side (``n_jobs=-1``, one
process per core), in the same run.

The data have the shape of the paper's Yale B row, the case the ensemble was
made for: 128 unit-norm points (Gaussian) in many dimensions, m = 64,
trained by the unrolled solver at batch 1, where one fit runs mostly on one
core. Fewer dimensions (8192 instead of 32,256) and two epochs instead of 15
keep it short.
Both variants fit the same dictionaries (tests/test_ensemble.py); the worker
processes' start-up is included in the parallel time.
"""

import functools

import numpy as np
import pytest

from fastkds import KDS, KDSEnsembleClustering
from fastkds.experiments import PAPER_SETTINGS

YALEB = PAPER_SETTINGS["yaleb"]

N_ESTIMATORS = 4


@functools.lru_cache(maxsize=1)
def _faces_shaped():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(128, 8192))
    return Y / np.linalg.norm(Y, axis=1, keepdims=True)


def _ensemble(n_jobs):
    training = {key: YALEB.training[key] for key in ("solver", "learning_rate", "batch_size")}
    kds = KDS(YALEB.n_atoms, lam=YALEB.lam, n_iter=YALEB.n_iter, max_epochs=2, **training)
    return KDSEnsembleClustering(2, estimator=kds, n_estimators=N_ESTIMATORS, random_state=0, n_jobs=n_jobs)


@pytest.mark.benchmark(group="ensemble")
@pytest.mark.parametrize("n_jobs", [None, -1], ids=["one-at-a-time", "side-by-side"])
def test_ensemble_fit(benchmark, n_jobs):
    Y = _faces_shaped()
    KDS(4, solver="unrolled", max_epochs=1, batch_size=1).fit(Y[:8])  # compile
    model = benchmark.pedantic(lambda: _ensemble(n_jobs).fit(Y), rounds=1, iterations=1)
    benchmark.extra_info["n_estimators"] = N_ESTIMATORS
    assert model.components_.shape == (N_ESTIMATORS * YALEB.n_atoms, Y.shape[1])

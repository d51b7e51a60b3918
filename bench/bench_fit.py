"""Dictionary learning (KDS.fit, exact solver) on noisy moons over n, the
paper's settings (m=24, T=15, lam=5)."""

import warnings

import pytest

from conftest import moons_atoms, moons_data, record
from fastkds import KDS


@pytest.mark.benchmark(group="fit")
def test_kds_fit(benchmark, n):
    Y = moons_data(n)[0]
    moons_atoms(24)  # compile

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return KDS(24, lam=5.0, n_iter=15, random_state=0).fit(Y)

    kds = benchmark.pedantic(fit, rounds=1, iterations=1)
    record(benchmark, n, epochs=int(kds.n_iter_), objective=float(kds.objective_[-1]))
    assert kds.components_.shape == (24, 2)

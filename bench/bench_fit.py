"""Dictionary learning (KDS.fit, exact solver) on noisy moons over n, the
paper's settings (m=24, T=15, lam=5)."""

import warnings

import pytest

from conftest import MOONS, MOONS_ENCODER, moons_atoms, moons_data, record
from fastkds import KDS


@pytest.mark.benchmark(group="fit")
def test_kds_fit(benchmark, n):
    Y = moons_data(n)[0]
    moons_atoms()  # compile

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return KDS(MOONS.n_atoms, random_state=0, **MOONS_ENCODER).fit(Y)

    kds = benchmark.pedantic(fit, rounds=1, iterations=1)
    record(benchmark, n, epochs=int(kds.n_iter_), objective=float(kds.objective_[-1]))
    assert kds.components_.shape == (MOONS.n_atoms, 2)

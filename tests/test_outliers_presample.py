"""Outlier components in the spectral step, and the presample warm start."""

import numpy as np
import pytest

from fastkds import KDS, KDSClustering, clustering_accuracy, make_moons
from fastkds.spectral import BipartiteSpectrum


def _block_codes(rng, sizes, atoms_per_block):
    """Codes whose graph has one component per block (rows on the simplex)."""
    rows = []
    m = atoms_per_block * len(sizes)
    for b, n in enumerate(sizes):
        X = np.zeros((n, m))
        X[:, b * atoms_per_block : (b + 1) * atoms_per_block] = rng.dirichlet(np.ones(atoms_per_block), n)
        rows.append(X)
    return np.vstack(rows)


def test_tiny_component_left_out_and_embedded_as_nearest_atom():
    rng = np.random.default_rng(0)
    X = _block_codes(rng, [400, 300, 2], 3)  # the third block: two stray points
    atoms = np.r_[np.zeros((3, 2)), np.full((3, 2), 10.0), np.full((3, 2), 10.5)]
    plain = BipartiteSpectrum(X.T @ X, X.sum(axis=0))
    assert plain.n_outlier_atoms == 0
    assert np.sum(plain.eigenvalues > 1 - 1e-9) == 3  # three components, three eigenvalues 1
    robust = BipartiteSpectrum(X.T @ X, X.sum(axis=0), min_component=0.01, atoms=atoms)
    assert robust.n_outlier_atoms == 3
    assert np.sum(robust.eigenvalues > 1 - 1e-9) == 2
    P = robust.projection(2)
    # the stray atoms (near (10.5, 10.5)) take the rows of the atoms at (10, 10)
    np.testing.assert_array_equal(P[6:], P[3:6][[0, 0, 0]])
    E = robust.embed(X, 2)
    assert np.all(np.isfinite(E))


def test_min_component_zero_keeps_everything():
    rng = np.random.default_rng(1)
    X = _block_codes(rng, [50, 1], 2)
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0), min_component=0.0)
    assert spec.n_outlier_atoms == 0 and spec.used.all()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_clustering_survives_far_outliers_owning_atoms():
    # k-means++ seeding puts atoms on far outliers; each then forms its own
    # component of eigenvalue 1. The clusters must still be found.
    rng = np.random.default_rng(0)
    outliers = rng.normal(size=(8, 2)) * 200
    Y = np.r_[rng.normal(size=(500, 2)), rng.normal(size=(500, 2)) + [10, 0], outliers]
    y = np.r_[np.zeros(500), np.ones(500)]
    # n_iter=150: with atoms 400 apart the encoder's step 1/sigma_max(W)^2 is
    # tiny, and at the default T=50 a far outlier's code may still hold ~1% on
    # a main atom, which links its component to the clusters (seed-dependent).
    for seed in range(3):
        model = KDSClustering(2, n_atoms=24, lam=1.0, n_iter=150, random_state=seed).fit(Y)
        assert model.spectrum_.n_outlier_atoms >= 1
        assert clustering_accuracy(y, model.labels_[:1000]) == 1.0


@pytest.mark.parametrize("bad", [0, -5, 2.5, "all"])
def test_presample_validation(bad):
    Y, _ = make_moons(300, random_state=0)
    with pytest.raises((ValueError, TypeError), match="presample"):
        KDS(8, presample=bad, max_epochs=2).fit(Y)


def test_presample_smaller_than_atoms_rejected():
    Y, _ = make_moons(300, random_state=0)
    with pytest.raises(ValueError, match="presample=5 is smaller than n_atoms=8"):
        KDS(8, presample=5, max_epochs=2).fit(Y)


def test_presample_reaches_the_same_objective():
    Y, _ = make_moons(6000, random_state=3)
    kw = dict(lam=5.0, n_iter=15, max_epochs=200, random_state=0)
    full = KDS(24, presample=None, **kw).fit(Y)
    warm = KDS(24, presample=1000, **kw).fit(Y)
    assert warm.objective(Y) == pytest.approx(full.objective(Y), rel=0.02)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_presample_at_least_n_means_no_subsample():
    Y, _ = make_moons(500, random_state=0)
    a = KDS(8, presample=500, max_epochs=5, random_state=0).fit(Y)
    b = KDS(8, presample=None, max_epochs=5, random_state=0).fit(Y)
    np.testing.assert_array_equal(a.components_, b.components_)


def test_presample_ladder_sizes():
    # ten-fold nested subsamples while at most n / 5 points and 256 MiB
    from fastkds.warmstart import presample_ladder as ladder

    assert ladder(0, 10**6, 2, 8) == []
    assert ladder(20_000, 100_000, 2, 8) == [20_000]
    assert ladder(20_000, 10**6, 2, 8) == [20_000, 200_000]
    assert ladder(20_000, 10**7, 2, 8) == [20_000, 200_000, 2_000_000]
    assert ladder(20_000, 10**7, 784, 8) == [20_000]  # 200,000 x 784 doubles > 256 MiB


def test_nested_samples_are_prefixes_of_one_random_order():
    # each sample holds the first `size` rows of one random order, in row
    # order, and is taken from the one gather of the largest
    from fastkds.sources import random_rows
    from fastkds.warmstart import nested_samples

    Y = np.arange(40_000, dtype=np.float64).reshape(-1, 2)
    gathered = []

    def take(rows):
        gathered.append(rows)
        return Y[rows]

    samples = nested_samples(take, np.random.RandomState(4), Y.shape[0], [20, 200, 2000])
    order = random_rows(np.random.RandomState(4), Y.shape[0], 2000)
    assert len(gathered) == 1
    for size, sample in zip([20, 200, 2000], samples):
        np.testing.assert_array_equal(sample, Y[np.sort(order[:size])])
    assert nested_samples(take, np.random.RandomState(4), Y.shape[0], []) == []


def test_presample_ladder_fit_runs_every_stage(monkeypatch):
    import fastkds.warmstart as est

    Y, _ = make_moons(6000, random_state=3)
    kw = dict(lam=5.0, n_iter=15, presample=100, random_state=0)
    seen = []
    original = est.fit_alternating

    def spy(data, *args, **kwargs):
        seen.append(data.shape[0])
        return original(data, *args, **kwargs)

    monkeypatch.setattr(est, "fit_alternating", spy)
    ladder = KDS(12, **kw).fit(Y)
    assert seen == [100, 1000, 6000]
    # against the single warm-start stage: the same first stage, a fit as good
    monkeypatch.setattr(est, "presample_ladder", lambda n_pre, n, d, itemsize: [n_pre])
    seen.clear()
    single = KDS(12, **kw).fit(Y)
    assert seen == [100, 6000]
    assert ladder.objective(Y) <= single.objective(Y) * 1.02

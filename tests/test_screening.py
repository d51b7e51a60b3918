"""The screening rule and the far atoms the centred step leaves aside
(docs/algorithm.md, "Which atoms an optimal code can use" and "Far atoms").

Oracles: the exact codes of the active-set encoder (themselves checked by
the KKT conditions here), the NumPy twin ``fastkds._naive.encode``, and the
objective of many accelerated steps.
"""

import numpy as np
import pytest

from fastkds import _naive, sparse_encode
from fastkds.prepared import PreparedDictionary, far_atoms, screening_ratio

DTYPES = [np.float64, np.float32]
TOL = {np.float64: 1e-10, np.float32: 1e-4}


def blob_with_far_points(seed, d, n=300, m=20, n_far=2):
    """Points in a unit blob and ``n_far`` points 40-60 units away; the
    dictionary: ``m`` points of the blob and the far points themselves."""
    rng = np.random.default_rng(seed)
    blob = rng.normal(size=(n, d))
    far = rng.normal(size=(n_far, d))
    far *= rng.uniform(40, 60, size=(n_far, 1)) / np.linalg.norm(far, axis=1, keepdims=True)
    Y = np.vstack([blob, far, far + 0.1 * rng.normal(size=far.shape)])
    W = np.vstack([blob[rng.choice(n, m, replace=False)], far])
    return Y, W


@pytest.mark.parametrize("lam", [0.2, 0.5, 1.0, 5.0])
@pytest.mark.parametrize("seed", range(3))
def test_optimal_codes_use_no_atom_beyond_the_screening_radius(lam, seed):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(30, 6))
    Y = rng.normal(size=(400, 6)) * 1.5
    X = sparse_encode(Y, W, lam=lam, encoder="active-set").toarray()
    assert _naive.kkt_residual(Y, W, X, lam).max() < 1e-9  # the oracle is optimal
    dist = _naive.squared_distances(Y, W)
    outside = dist > screening_ratio(lam) * dist.min(axis=1, keepdims=True)
    assert outside.any()  # the rule excludes something
    assert not (X[outside] > 0).any()


def test_screening_ratio_is_one_plus_inverse_lam_squared():
    assert screening_ratio(1.0) == 4.0
    assert screening_ratio(0.5) == 9.0
    assert screening_ratio(1e-320) == np.inf


def test_far_atoms_flags_only_the_planted_ones():
    Y, W = blob_with_far_points(0, d=8)
    Wc = W - W.mean(axis=0)
    far = far_atoms((Wc**2).sum(axis=1))
    np.testing.assert_array_equal(np.flatnonzero(far), [20, 21])
    # a Gaussian cloud of atoms in many dimensions has none
    W = np.random.default_rng(1).normal(size=(100, 50))
    Wc = W - W.mean(axis=0)
    assert not far_atoms((Wc**2).sum(axis=1)).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [2, 12])  # the lockstep encoder and the per-point one
def test_far_atoms_split_matches_the_numpy_twin(d, dtype):
    Y, W = blob_with_far_points(1, d)
    Y = Y.astype(dtype)
    prep = PreparedDictionary(W, 1.0, 40, dtype)
    assert prep.near is not None and list(prep.near.far) == [20, 21]
    assert prep.near.alpha_value > 20 * prep.alpha_value  # the far atoms set the whole step
    Yc = Y - prep.shift
    uses_far = prep.may_use_far(Yc @ prep.W.T, np.einsum("ij,ij->i", Yc, Yc))
    assert 0 < uses_far.sum() < 10  # the far points, and no blob point
    X = sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=40).toarray()
    np.testing.assert_allclose(X, _naive.encode(Y, W, 1.0, 40), rtol=0, atol=TOL[dtype])
    # chunks of 7 rows: the same codes
    X7 = sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=40, chunk_size=7).toarray()
    np.testing.assert_allclose(X7, X, rtol=0, atol=TOL[dtype])
    # moved far from the origin, with the atoms: the same codes
    Xm = sparse_encode(Y + 100, W + 100, lam=1.0, encoder="apg", n_iter=40).toarray()
    np.testing.assert_allclose(Xm, X, rtol=0, atol=1e-9 if dtype == np.float64 else 1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [1, 2, 12])  # the lockstep encoder (d <= 4) and the per-point one
@pytest.mark.parametrize("T", [2, 50])
def test_far_atoms_codes_sum_to_one_to_rounding(d, dtype, T):
    # The near atoms' step is large where they lie far from the whole
    # dictionary's mean, and so are the encoder's values v; the thresholds,
    # taken relative to a support entry, keep the sums exact to rounding
    # (the lockstep encoder once summed v itself, and missed them by up to
    # 1e-4 in float32).
    rng = np.random.default_rng(0)
    W = np.vstack([rng.normal(0.0, 0.05, size=(20, d)), np.full((1, d), 30.0 / np.sqrt(d))]).astype(dtype)
    Y = rng.normal(0.0, 0.05, size=(500, d)).astype(dtype)
    assert PreparedDictionary(W, 1.0, T, dtype).near is not None
    sums = np.asarray(sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=T).sum(axis=1), dtype=np.float64).ravel()
    np.testing.assert_allclose(sums, 1.0, rtol=0, atol=8 * np.finfo(dtype).eps * (W.shape[0] + 1))


def test_far_atoms_split_converges_to_the_optimal_codes():
    """Every point, the far ones too, reaches the optimum of the whole
    problem: the split changes the path, not the destination."""
    Y, W = blob_with_far_points(2, d=3, n=150)
    X_exact = sparse_encode(Y, W, lam=1.0, encoder="active-set").toarray()
    X = sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=3000).toarray()
    f_exact = _naive.objective(Y, W, X_exact, 1.0)
    f = _naive.objective(Y, W, X, 1.0)
    assert np.all(f - f_exact <= 1e-8 * (1 + f_exact))
    assert _naive.kkt_residual(Y, W, X, 1.0).max() < 1e-6


def test_far_atoms_make_the_steps_go_further():
    """At T = 50, the blob's codes are nearer their optimum than with the
    whole dictionary's step for every point."""
    Y, W = blob_with_far_points(3, d=5)
    X_exact = sparse_encode(Y, W, lam=1.0, encoder="active-set").toarray()
    prep = PreparedDictionary(W, 1.0, 50, np.float64)
    X_split = sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=50).toarray()
    X_one = _naive.encode(Y, W, 1.0, 50, alpha=prep.alpha_value)
    f_exact = _naive.objective(Y, W, X_exact, 1.0)
    blob = slice(0, 300)
    gap_split = (_naive.objective(Y, W, X_split, 1.0) - f_exact)[blob]
    gap_one = (_naive.objective(Y, W, X_one, 1.0) - f_exact)[blob]
    assert np.median(gap_split) < 0.01 * np.median(gap_one)


def test_paper_step_and_tiny_lam_take_one_step():
    Y, W = blob_with_far_points(0, d=4)
    assert PreparedDictionary(W, 1.0, 10, np.float64, step="paper").near is None
    assert PreparedDictionary(W, 1e-320, 10, np.float64).near is None
    assert PreparedDictionary(W, 0.0, 10, np.float64).near is None

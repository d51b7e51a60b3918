"""bench/step_scale.py (an issue-21 exploration): the screening bound it
reports holds for the exact codes, and its entropic codes lie on the simplex."""

import numpy as np
import pytest
import scipy.sparse as sp

from fastkds import sparse_encode

BENCH_SCRIPT = "step_scale"


@pytest.mark.parametrize("lam", [0.1, 0.5, 1.0, 5.0])
def test_optimal_codes_use_only_atoms_within_the_bound(lam):
    # docs/algorithm.md, "Which atoms an optimal code can use"
    rng = np.random.default_rng(0)
    W = rng.standard_normal((40, 5))
    Y = rng.standard_normal((500, 5)) * 1.5
    X = sparse_encode(Y, W, lam=lam, encoder="active-set").toarray()
    d = ((Y[:, None, :] - W[None, :, :]) ** 2).sum(-1)
    reach = d <= d.min(1, keepdims=True) * (1.0 + np.sqrt(1.0 + 2.0 * lam) / lam) ** 2
    assert (X > 0).sum(1).max() > 1  # the bound is tested on codes of several atoms
    assert not np.any((X > 0) & ~reach)


def test_screened_step_median_of_the_bound(bench_script):
    rng = np.random.default_rng(1)
    W = rng.standard_normal((30, 4))
    Y = rng.standard_normal((300, 4))
    step, size = bench_script.screened_step(Y, W, 1.0)
    d = ((Y[:, None, :] - W[None, :, :]) ** 2).sum(-1)
    reach = d <= d.min(1, keepdims=True) * (1.0 + np.sqrt(3.0)) ** 2
    assert step == pytest.approx(np.median(1.0 / np.where(reach, d, 0.0).sum(1)))
    assert size == np.median(reach.sum(1))


def test_entropic_codes_on_the_simplex_over_the_nearest_atoms(bench_script):
    rng = np.random.default_rng(2)
    W = rng.standard_normal((40, 3))
    Y = rng.standard_normal((200, 3))
    X = bench_script.entropic_codes(Y, W, 1.0, 0.3).toarray()
    assert np.all(X >= 0) and np.allclose(X.sum(1), 1.0)
    d = ((Y[:, None, :] - W[None, :, :]) ** 2).sum(-1)
    nearest = np.argsort(d, axis=1)[:, :24]
    outside = np.ones_like(X, dtype=bool)
    np.put_along_axis(outside, nearest, False, 1)
    assert not np.any(X[outside] > 0)


def test_spectral_labels_split_a_code_graph_in_two_pieces(bench_script):
    # codes that use atoms 0-4 or atoms 5-9, never both: two components
    rng = np.random.default_rng(3)
    side = np.repeat([0, 1], 100)
    X = np.zeros((200, 10))
    for i, g in enumerate(side):
        X[i, rng.choice(5, 2, replace=False) + 5 * g] = 0.5
    labels = bench_script.spectral_labels(sp.csr_array(X), 2, 0)
    assert abs(np.mean(labels == side) - 0.5) == 0.5

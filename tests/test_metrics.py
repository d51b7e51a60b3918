"""Clustering accuracy and the matched confusion matrix against brute force
over every one-to-one matching of clusters to classes."""

import itertools

import numpy as np
import pytest

from fastkds import clustering_accuracy
from fastkds.metrics import matched_confusion


def best_matching(a, b):
    classes, clusters = np.unique(a), np.unique(b)
    C = np.array([[np.sum((a == c) & (b == k)) for k in clusters] for c in classes])
    if clusters.size >= classes.size:
        return max(
            sum(C[i, p[i]] for i in range(classes.size))
            for p in itertools.permutations(range(clusters.size), classes.size)
        )
    return max(
        sum(C[p[j], j] for j in range(clusters.size))
        for p in itertools.permutations(range(classes.size), clusters.size)
    )


@pytest.mark.parametrize("seed", range(40))
def test_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    k_true, k_pred = rng.integers(1, 6, 2)
    n = int(rng.integers(1, 50))
    a = rng.integers(0, k_true, n) * 3 + 7  # labels need not be 0..k-1
    b = rng.integers(0, k_pred, n)
    best = best_matching(a, b)
    assert clustering_accuracy(a, b) == pytest.approx(best / n, abs=1e-12)
    M = matched_confusion(a, b)
    assert M.shape == (np.unique(a).size, np.unique(b).size) and M.sum() == n
    if M.shape[0] == M.shape[1]:
        assert np.trace(M) == best


def test_matched_confusion_permuted_labels():
    a = np.array([0, 0, 1, 1, 1, 2])
    b = np.array([5, 5, 3, 3, 9, 9])
    np.testing.assert_array_equal(matched_confusion(a, b), [[2, 0, 0], [0, 2, 1], [0, 0, 1]])


def test_bad_labels():
    with pytest.raises(ValueError, match="entries"):
        matched_confusion([0, 1], [0])
    with pytest.raises(ValueError, match="empty"):
        clustering_accuracy([], [])

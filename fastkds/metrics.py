"""Clustering accuracy under the best matching of clusters to classes."""

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.utils.validation import column_or_1d


def _contingency(labels_true, labels_pred):
    """Counts of (class, cluster), classes and clusters in sorted order."""
    labels_true = column_or_1d(labels_true)
    labels_pred = column_or_1d(labels_pred)
    if labels_true.shape != labels_pred.shape:
        raise ValueError(f"labels_true has {labels_true.shape[0]} entries but labels_pred has {labels_pred.shape[0]}")
    if labels_true.size == 0:
        raise ValueError("labels are empty")
    classes, t = np.unique(labels_true, return_inverse=True)
    clusters, p = np.unique(labels_pred, return_inverse=True)
    counts = np.zeros((classes.size, clusters.size), dtype=np.int64)
    np.add.at(counts, (t, p), 1)
    return counts


def matched_confusion(labels_true, labels_pred):
    """Counts of (class, cluster), the clusters ordered by the class matched to them.

    Clusters are matched one-to-one to classes so that the most points
    agree (Hungarian algorithm, as in :func:`clustering_accuracy`). The
    columns are the matched clusters in the order of their classes (sorted),
    then any clusters left over; with as many clusters as classes, the
    diagonal holds the points clustered correctly.

    Parameters
    ----------
    labels_true, labels_pred : array-like of shape (n_samples,)

    Returns
    -------
    counts : ndarray of shape (n_classes, n_clusters), int64
    """
    counts = _contingency(labels_true, labels_pred)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    matched = cols[np.argsort(rows)]
    order = np.concatenate([matched, np.setdiff1d(np.arange(counts.shape[1]), matched)])
    return counts[:, order]


def clustering_accuracy(labels_true, labels_pred):
    """Fraction of points whose cluster maps to their class under the best
    one-to-one matching of clusters to classes (Hungarian algorithm).

    Parameters
    ----------
    labels_true, labels_pred : array-like of shape (n_samples,)

    Returns
    -------
    accuracy : float in [0, 1]
    """
    counts = _contingency(labels_true, labels_pred)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return counts[rows, cols].sum() / counts.sum()

"""Clustering accuracy under the best matching of clusters to classes."""

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.utils.validation import column_or_1d


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
    labels_true = column_or_1d(labels_true)
    labels_pred = column_or_1d(labels_pred)
    if labels_true.shape != labels_pred.shape:
        raise ValueError(
            f"labels_true has {labels_true.shape[0]} entries but labels_pred has {labels_pred.shape[0]}"
        )
    if labels_true.size == 0:
        raise ValueError("labels are empty")
    classes, t = np.unique(labels_true, return_inverse=True)
    clusters, p = np.unique(labels_pred, return_inverse=True)
    counts = np.zeros((clusters.size, classes.size), dtype=np.int64)
    np.add.at(counts, (p, t), 1)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return counts[rows, cols].sum() / labels_true.size

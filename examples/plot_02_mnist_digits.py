"""
MNIST digits: atoms that look like digits
=========================================

The paper's MNIST-5: handwritten 0, 3, 4, 6 and 7, each image a point in
784 dimensions scaled to unit norm. The atoms KDS learns are themselves
images, averages of nearby digits, and the clusters of the code graph
follow the digits.

:func:`fastkds.load_mnist` reads the IDX files from a folder and never
downloads. This example looks for them in ``shared/data/mnist`` beside
the checkout (or where ``FASTKDS_DATA`` points); without them it falls
back to scikit-learn's small 8 x 8 digits, which ship with scikit-learn,
and says so. To keep the page quick it clusters 2,000 of the 4,958
images with 60 atoms (the paper: all of them, 500 atoms).
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np

from fastkds import KDSClustering, clustering_accuracy, load_mnist
from fastkds.exceptions import KDSConvergenceWarning
from fastkds.experiments import find_data_dir
from fastkds.plotting import plot_atom_grid, plot_embedding

DIGITS = (0, 3, 4, 6, 7)
data_dir = find_data_dir()
if data_dir is not None and (data_dir / "mnist").is_dir():
    Y, y = load_mnist(data_dir / "mnist", digits=DIGITS)
    shape, source = (28, 28), "the MNIST test split"
else:
    from sklearn.datasets import load_digits

    print("Note: the MNIST files were not found (shared/data/mnist); using scikit-learn's 8 x 8 digits instead.")
    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, DIGITS)
    Y, y = X[keep] / 16.0, y[keep]
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    shape, source = (8, 8), "scikit-learn's 8 x 8 digits"

rng = np.random.default_rng(0)
subset = rng.choice(len(Y), min(2000, len(Y)), replace=False)
Y, y = Y[subset], y[subset]
print(f"{len(Y)} images of {source}, {Y.shape[1]} pixels each")

# %%
# Five epochs of the dictionary step are enough for a picture; the fit
# warns that it has not converged, which is silenced here.
model = KDSClustering(5, n_atoms=60, lam=0.5, n_iter=30, max_epochs=5, random_state=0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", KDSConvergenceWarning)
    model.fit(Y)
print(f"accuracy {clustering_accuracy(y, model.labels_):.3f}")

# %%
# Forty of the learned atoms, and the spectral embedding coloured by
# digit.
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4), layout="constrained", width_ratios=(1.1, 1))
plot_atom_grid(model.components_, shape, ax=left, n_cols=8, n_rows=5, title="40 of the 60 atoms")
plot_embedding(model.embedding_, y, ax=right, title="spectral embedding, by digit")
plt.show()

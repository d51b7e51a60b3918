"""
Noisy moons: atoms, clusters and the spectral embedding
=======================================================

The paper's first example: two interleaved half circles with noise.
:class:`~fastkds.KDSClustering` learns 24 landmark atoms along the
moons, codes every point as a sparse convex combination of nearby atoms,
and clusters the spectral embedding of the point-atom graph.
"""

import matplotlib.pyplot as plt
import numpy as np

from fastkds import KDSClustering, clustering_accuracy, make_moons
from fastkds.plotting import plot_atoms_2d, plot_embedding

Y, y = make_moons(3000, random_state=0)
model = KDSClustering(2, n_atoms=24, lam=5.0, n_iter=30, random_state=0).fit(Y)
print(f"accuracy {clustering_accuracy(y, model.labels_):.3f}")

# %%
# Each code is sparse: a point uses only the few atoms next to it, which
# is what makes the graph local. The codes are a ``scipy.sparse``
# CSR array whose rows lie on the probability simplex.
codes = model.kds_.transform(Y)
per_point = np.diff(codes.indptr)
print(f"atoms per point: mean {per_point.mean():.2f}, at most {per_point.max()} of {codes.shape[1]}")

# %%
# On the left the points coloured by the clusters found, with the atoms;
# on the right the spectral embedding, coloured by the true moon. Each
# helper draws on the Axes it is given and returns it.
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained")
plot_atoms_2d(Y, model.labels_, model.components_, ax=left, title="clusters found, and the atoms")
plot_embedding(model.embedding_, y, ax=right, title="spectral embedding, by true moon")
plt.show()

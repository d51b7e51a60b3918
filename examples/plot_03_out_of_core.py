"""
Out of core: fitting a file that is never loaded whole
======================================================

Every estimator method that takes an array also takes the path to a
``.npy`` file, read one chunk at a time, so working memory does not grow
with the number of points. ``KDSClustering.fit(path, out=folder)`` also
writes the results that grow with n (labels, embedding, codes) to that
folder, chunk by chunk, and maps them back: nothing of size n is kept in
memory. Here the file is small (20,000 points, in a temporary folder) so
that the page builds quickly; the calls are the same for 10**9 points
(docs: "Scaling").
"""

import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from fastkds import KDSClustering, clustering_accuracy, make_moons
from fastkds.plotting import plot_atoms_2d

tmp = tempfile.TemporaryDirectory()
path = os.path.join(tmp.name, "moons.npy")
Y, y = make_moons(20_000, random_state=0)
np.save(path, Y)
del Y  # from here on the points are read from the file
print(f"moons.npy: {os.path.getsize(path) / 2**20:.2f} MiB")

# %%
# Fit on the path, 4,000 points per chunk: one chunk is in memory at a
# time. Each epoch of the dictionary step reads the whole file once; a
# tolerance of 1e-3 (the default is 1e-4) stops after fewer epochs.
# The results go to ``results/`` in the same folder.
model = KDSClustering(2, n_atoms=24, lam=5.0, n_iter=30, tol=1e-3, chunk_size=4000, random_state=0)
results = os.path.join(tmp.name, "results")
model.fit(path, out=results)
print(f"accuracy {clustering_accuracy(y, model.labels_):.3f}")
print("labels_ is a", type(model.labels_).__name__, "of", sorted(os.listdir(results)))

# %%
# The codes on disk, as a CSR array memory-mapped on their three ``.npy``
# files. They are the codes of the same points in memory.
from fastkds.diskcodes import load_codes  # noqa: E402

codes = load_codes(os.path.join(results, "codes"), n_atoms=len(model.components_))
print(type(codes).__name__, codes.shape, f"{codes.nnz} nonzeros")
in_memory = model.kds_.transform(np.load(path))
print("same as in memory:", (codes != in_memory).nnz == 0)

# %%
# The atoms over a sample of the points read back from the file, and how
# much each atom is used (the column sums of the codes on disk).
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
points = np.load(path, mmap_mode="r")
plot_atoms_2d(
    points,
    model.labels_,
    model.components_,
    ax=left,
    max_points=4000,
    title="4,000 of the 20,000 points, and the atoms",
)
usage = np.asarray(codes.sum(axis=0)).ravel() / codes.shape[0]
right.bar(np.arange(len(usage)), usage, color="0.4")
right.set_xlabel("atom")
right.set_ylabel("share of the total weight")
right.set_title("atom usage, from the codes on disk", fontsize=10)
plt.show()

del codes, points, model  # release the memory-mapped files, then the folder
tmp.cleanup()

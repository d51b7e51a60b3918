"""fastkds: fast K-Deep Simplex.

Learns a small dictionary of landmark atoms and codes every point as a sparse
convex combination of nearby atoms; the codes define a bipartite graph whose
spectral embedding clusters manifold-shaped data in time linear in n.

Public API
----------
KDS, KDSClustering
    scikit-learn estimators.
sparse_encode, project_simplex
    The encoder and the simplex projection as functions.
make_moons, make_circles, load_mnist
    The paper's data.
clustering_accuracy
    Accuracy under the best matching of cluster labels to classes.
load
    Read a model written by ``KDS.save`` or ``KDSClustering.save``.
"""

from .datasets import load_mnist, make_circles, make_moons
from .encoding import project_simplex, sparse_encode
from .estimators import KDS, KDSClustering
from .metrics import clustering_accuracy
from .persistence import load

__version__ = "0.1.0"

__all__ = [
    "KDS",
    "KDSClustering",
    "sparse_encode",
    "project_simplex",
    "make_moons",
    "make_circles",
    "load_mnist",
    "clustering_accuracy",
    "load",
    "__version__",
]

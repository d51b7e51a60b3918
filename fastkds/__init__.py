"""fastkds: fast K-Deep Simplex.

Learns a small dictionary of landmark atoms and codes every point as a sparse
convex combination of nearby atoms; the codes define a bipartite graph whose
spectral embedding clusters manifold-shaped data in time linear in n.

Public API
----------
KDS, KDSClustering, KDSEnsembleClustering
    scikit-learn estimators (the last clusters the codes of several
    dictionaries at once).
sparse_encode, project_simplex
    The encoder and the simplex projection as functions.
make_moons, make_circles, load_mnist, load_yaleb, load_salinas_a
    The paper's data (generated, or read from files; never downloaded).
clustering_accuracy
    Accuracy under the best matching of cluster labels to classes.
load
    Read a model written by an estimator's ``save`` method (any of the three).
warmup
    Compile (or load from cache) every kernel before timing-sensitive work.
fastkds.exceptions
    The warning classes (``KDSWarning`` and its subclasses).
"""

from . import exceptions
from .datasets import load_mnist, load_salinas_a, load_yaleb, make_circles, make_moons
from .encoding import project_simplex, sparse_encode
from .ensemble import KDSEnsembleClustering
from .estimators import KDS, KDSClustering
from .metrics import clustering_accuracy
from .persistence import load
from .warmup import warmup

__version__ = "0.1.0"

__all__ = [
    "KDS",
    "KDSClustering",
    "KDSEnsembleClustering",
    "sparse_encode",
    "project_simplex",
    "make_moons",
    "make_circles",
    "load_mnist",
    "load_yaleb",
    "load_salinas_a",
    "clustering_accuracy",
    "load",
    "warmup",
    "__version__",
]

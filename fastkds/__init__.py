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

import importlib

# Names are imported on first use (PEP 562): `import fastkds` stays light,
# so that the command line can say what it is doing before scikit-learn and
# the Numba kernels are loaded (a second or two).
_LAZY = {
    "KDS": ".estimators",
    "KDSClustering": ".estimators",
    "KDSEnsembleClustering": ".estimators",
    "sparse_encode": ".encoding",
    "project_simplex": ".encoding",
    "make_moons": ".datasets",
    "make_circles": ".datasets",
    "load_mnist": ".datasets",
    "load_yaleb": ".datasets",
    "load_salinas_a": ".datasets",
    "clustering_accuracy": ".metrics",
    "load": ".persistence",
    "warmup": ".warmup",
}
_SUBMODULES = ("exceptions",)


def __getattr__(name):
    if name == "load":
        # load builds the class a file names among those registered with
        # fastkds.persistence, which the estimator classes do on import
        importlib.import_module(".estimators", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


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

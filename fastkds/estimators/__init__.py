"""The scikit-learn estimators.

- :class:`KDS` (``kds.py``): the dictionary and the sparse simplex codes;
- :class:`KDSClustering` (``clustering.py``): spectral clustering on the
  code graph of one dictionary;
- :class:`KDSEnsembleClustering` (``ensemble.py``): the same on the joint
  code graph of several;
- ``_base.py``: what they share (input checks, the commit of a fit, ``save``).

They sit above the solvers (:mod:`fastkds.warmstart`, :mod:`fastkds.spectral`)
and the backends, and below the command line and the paper's experiments.
"""

from .clustering import KDSClustering
from .ensemble import KDSEnsembleClustering
from .kds import KDS

__all__ = ["KDS", "KDSClustering", "KDSEnsembleClustering"]

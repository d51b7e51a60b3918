"""Warning classes of fastkds.

Each subclasses the scikit-learn or Python warning of the same meaning, so a
filter on the general class (``sklearn.exceptions.ConvergenceWarning``,
``UserWarning``) still applies, and a filter on the fastkds class singles
fastkds's warnings out::

    import warnings
    from fastkds.exceptions import KDSConvergenceWarning

    warnings.filterwarnings("ignore", category=KDSConvergenceWarning)

fastkds raises them at the caller's line: the first frame outside fastkds
(and the scikit-learn and joblib code that may call it, as ``fit_predict``
or a ``Pipeline`` do), so the printed location and
``warnings.filterwarnings(..., module=...)`` name the user's code.
"""

import os
import sys
import warnings

from sklearn.exceptions import ConvergenceWarning

__all__ = [
    "KDSWarning",
    "KDSConvergenceWarning",
    "OffCentreDataWarning",
    "TooFewSamplesWarning",
    "DeviceFallbackWarning",
    "FewerClustersWarning",
]


class KDSWarning(UserWarning):
    """Base class of the warnings fastkds raises.

    Examples
    --------
    >>> import warnings
    >>> from fastkds.exceptions import KDSWarning
    >>> warnings.simplefilter("ignore", KDSWarning)  # silence all of them
    """


class KDSConvergenceWarning(KDSWarning, ConvergenceWarning):
    """A fit stopped at ``max_epochs`` before the objective settled to ``tol``.

    A :class:`sklearn.exceptions.ConvergenceWarning`: filters on that class
    apply to it.

    Examples
    --------
    >>> import warnings
    >>> from fastkds import KDS, make_moons
    >>> from fastkds.exceptions import KDSConvergenceWarning
    >>> Y, _ = make_moons(200, random_state=0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = KDS(8, max_epochs=2, random_state=0).fit(Y)
    >>> [w.category.__name__ for w in caught]
    ['KDSConvergenceWarning']
    """


class OffCentreDataWarning(KDSWarning):
    """With ``step="paper"`` the data sit far from the origin for their spread,
    so the encoder's step is small and ``n_iter`` steps may stop far from the
    optimal codes. Centre the data, or use ``step="centred"`` (the default)."""


class TooFewSamplesWarning(KDSWarning):
    """Fewer points than ``n_atoms``: the model learns one atom per point.

    As scikit-learn's ``Nystroem`` and ``QuantileTransformer`` do when their
    landmarks outnumber the samples; ``components_`` then has ``n_samples``
    rows and the codes as many columns.
    """


class DeviceFallbackWarning(KDSWarning, RuntimeWarning):
    """``device="auto"`` found no usable GPU for the work, and runs it on the
    CPU; the message names the reason. Also a ``RuntimeWarning``."""


class FewerClustersWarning(KDSWarning, ConvergenceWarning):
    """The labels hold fewer distinct clusters than ``n_clusters_``: the
    neighbours' vote gave every point of a cluster the label most of its
    ``vote_neighbors`` nearest hold, and a cluster of fewer points than
    that was outvoted (as scikit-learn's ``KMeans`` warns when it finds
    fewer distinct clusters than asked for). Also a
    :class:`sklearn.exceptions.ConvergenceWarning`."""


def _library_dirs():
    """Folders of fastkds and of the libraries that call its estimators on
    the user's behalf (scikit-learn's ``fit_predict``, ``Pipeline``,
    ``GridSearchCV``; joblib's sequential runs)."""
    import joblib
    import sklearn

    files = (__file__, sklearn.__file__, joblib.__file__)
    return tuple(os.path.dirname(os.path.abspath(f)) + os.sep for f in files)


def warn(message, category):
    """``warnings.warn`` at the first frame outside fastkds, scikit-learn and joblib.

    A fixed ``stacklevel`` would be right for one call path only: the same
    warning is raised from ``fit``, ``fit_transform``, ``partial_fit`` and
    from inside the clusterers' fits, at different depths, and through
    scikit-learn's ``fit_predict`` or a ``Pipeline``.
    """
    libraries = _library_dirs()
    frame, level = sys._getframe(1), 2  # stacklevel=2 is this function's caller
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(libraries):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)

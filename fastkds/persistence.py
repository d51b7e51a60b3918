"""Saving and loading fitted estimators in a portable ``.npz`` file.

The file holds only numeric and string arrays, written with :func:`numpy.savez`
and read back with ``allow_pickle=False``: loading one never runs code, and it
does not depend on the Python, NumPy or scikit-learn version that wrote it the
way a pickle does. Every attribute that ``transform`` and ``predict`` use is
stored exactly, so a loaded model gives bit-identical results.

Layout (format version 1). Entries of a nested estimator carry its attribute
name as a prefix (``kds_.``, ``kmeans_.``, ``spectrum_.``; for
:class:`~fastkds.KDSEnsembleClustering` ``estimators_.0.``,
``estimators_.1.``, ...):

``fastkds_format_version``
    int; files from a newer version are refused.
``fastkds_version``, ``class_name``
    strings: the package version that wrote the file, and the estimator class.
``params``
    JSON of ``get_params()``, except array parameters (each its own entry
    ``params.<name>``), a ``RandomState`` (its state as entries
    ``params.<name>.keys`` plus scalars in the JSON) and a KDS template
    (the ensemble's ``estimator``: its own ``params`` under the prefix
    ``params.<name>.``).
``attributes``
    JSON of the scalar fitted attributes (absent when unfitted); array
    attributes are entries under their own names.
"""

import json
import os
import secrets
import zipfile

import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .ensemble import KDSEnsembleClustering
from .estimators import KDS, KDSClustering
from .spectral import BipartiteSpectrum

FORMAT_VERSION = 1

_CLASSES = {"KDS": KDS, "KDSClustering": KDSClustering, "KDSEnsembleClustering": KDSEnsembleClustering}

# Fitted attributes, split by how they are stored. KDSClustering's
# ``components_`` and ``eigenvalues_`` are the nested models' arrays, and
# ``kmeans_.labels_`` is ``labels_``; they are stored once and shared on load,
# as after ``fit``.
_KDS_ARRAYS = ("components_", "objective_")
_KDS_SCALARS = ("step_", "n_iter_", "n_features_in_")
_CLUSTERING_ARRAYS = ("labels_", "embedding_")
_CLUSTERING_SCALARS = ("n_features_in_", "n_clusters_", "timings_")
_ENSEMBLE_SCALARS = ("n_features_in_", "n_clusters_")
_KMEANS_ARRAYS = ("cluster_centers_",)
_KMEANS_SCALARS = ("inertia_", "n_iter_", "n_features_in_")
_SPECTRUM_ARRAYS = ("eigenvalues", "eigenvectors", "used", "_inv_sqrt_s")


# -- writing -------------------------------------------------------------------


def _json_default(value):
    # NumPy scalars (e.g. n_atoms=np.int64(8)) are stored as Python numbers.
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _to_json(obj):
    """``obj`` as JSON in a 0-d unicode array (an npz entry that needs no pickle)."""
    return np.array(json.dumps(obj, default=_json_default))


def _put_array(entries, name, value):
    arr = np.asarray(value)
    if arr.dtype.hasobject:
        raise TypeError(f"cannot save {name!r}: object arrays need pickle, which the format avoids")
    entries[name] = arr


def _put_params(entries, prefix, estimator):
    """Store ``estimator.get_params()`` under ``prefix``."""
    values, arrays, random_states, templates = {}, [], {}, []
    for name, value in estimator.get_params(deep=False).items():
        if isinstance(value, KDS):
            _put_params(entries, f"{prefix}params.{name}.", value)
            templates.append(name)
        elif isinstance(value, np.ndarray):
            _put_array(entries, f"{prefix}params.{name}", value)
            arrays.append(name)
        elif isinstance(value, np.random.RandomState):
            kind, keys, pos, has_gauss, cached = value.get_state(legacy=True)
            _put_array(entries, f"{prefix}params.{name}.keys", keys)
            random_states[name] = {"kind": kind, "pos": pos, "has_gauss": has_gauss, "cached_gaussian": cached}
        else:
            try:
                json.dumps(value, default=_json_default)
            except TypeError as exc:
                raise TypeError(
                    f"cannot save parameter {name}={value!r} of {type(estimator).__name__}: {exc}"
                ) from None
            values[name] = value
    spec = {"values": values, "arrays": arrays, "random_states": random_states}
    if templates:
        spec["templates"] = templates
    entries[f"{prefix}params"] = _to_json(spec)


def _put_attributes(entries, prefix, estimator, arrays, scalars):
    for name in arrays:
        _put_array(entries, prefix + name, getattr(estimator, name))
    entries[f"{prefix}attributes"] = _to_json({name: getattr(estimator, name) for name in scalars})


def _put_feature_names(entries, prefix, estimator):
    # Set by validate_data for DataFrame input: an object array of str, stored as unicode.
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        entries[f"{prefix}feature_names_in_"] = np.asarray(names, dtype=str)


def _put_spectrum(entries, prefix, spectrum):
    for name in _SPECTRUM_ARRAYS:
        _put_array(entries, prefix + name.lstrip("_"), getattr(spectrum, name))
    entries[f"{prefix}attributes"] = _to_json({"n_outlier_atoms": spectrum.n_outlier_atoms})
    _put_array(entries, f"{prefix}spread", spectrum.spread)
    if spectrum._stand_in is not None:
        out, nearest = spectrum._stand_in
        _put_array(entries, f"{prefix}stand_in_out", out)
        _put_array(entries, f"{prefix}stand_in_nearest", nearest)


def _is_fitted(estimator):
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def _entries(estimator):
    """The npz entries of a fastkds estimator, fitted or not."""
    entries = {
        "fastkds_format_version": np.array(FORMAT_VERSION),
        "class_name": np.array(type(estimator).__name__),
        "fastkds_version": np.array(_package_version()),
    }
    _put_params(entries, "", estimator)
    if not _is_fitted(estimator):
        return entries
    _put_feature_names(entries, "", estimator)
    if isinstance(estimator, KDS):
        _put_attributes(entries, "", estimator, _KDS_ARRAYS, _KDS_SCALARS)
        return entries
    if isinstance(estimator, KDSEnsembleClustering):
        _put_attributes(entries, "", estimator, _CLUSTERING_ARRAYS, _ENSEMBLE_SCALARS)
        for i, kds in enumerate(estimator.estimators_):
            _put_params(entries, f"estimators_.{i}.", kds)
            _put_attributes(entries, f"estimators_.{i}.", kds, _KDS_ARRAYS, _KDS_SCALARS)
    else:
        _put_attributes(entries, "", estimator, _CLUSTERING_ARRAYS, _CLUSTERING_SCALARS)
        _put_params(entries, "kds_.", estimator.kds_)
        _put_attributes(entries, "kds_.", estimator.kds_, _KDS_ARRAYS, _KDS_SCALARS)
    _put_params(entries, "kmeans_.", estimator.kmeans_)
    _put_attributes(entries, "kmeans_.", estimator.kmeans_, _KMEANS_ARRAYS, _KMEANS_SCALARS)
    _put_spectrum(entries, "spectrum_.", estimator.spectrum_)
    return entries


def _package_version():
    # imported late: fastkds/__init__.py defines __version__ after importing this module
    from . import __version__

    return __version__


def save(estimator, path):
    """Save a :class:`~fastkds.KDS`, :class:`~fastkds.KDSClustering` or
    :class:`~fastkds.KDSEnsembleClustering` to ``path``.

    The file is an ``.npz`` archive of plain arrays (no pickle), written to a
    temporary file in the same folder and then renamed over ``path``, so
    ``path`` never holds a partly written model. It is written to ``path``
    exactly as given; no ``.npz`` suffix is added. Unfitted estimators are
    saved too, as their parameters alone.

    Parameters
    ----------
    estimator : KDS, KDSClustering or KDSEnsembleClustering
        The model to save, fitted or not.
    path : str or os.PathLike
        Destination file; replaced if it exists.

    Raises
    ------
    TypeError
        If ``estimator`` is not a fastkds estimator, or a parameter cannot be
        stored without pickle (e.g. an object array).

    See Also
    --------
    load : Read the file back.
    """
    if type(estimator) not in _CLASSES.values():
        raise TypeError(f"can only save KDS, KDSClustering or KDSEnsembleClustering, got {type(estimator).__name__}")
    entries = _entries(estimator)
    write_atomically(path, lambda f: np.savez(f, **entries))


def write_atomically(path, write):
    """Call ``write(f)`` on a new binary file beside ``path``, then rename
    that file over ``path``.

    ``path`` never holds a partly written file: on any error, also
    ``KeyboardInterrupt``, the new file is removed and ``path`` is left as
    it was. The file gets the usual permissions (``0o666`` less the umask).

    Parameters
    ----------
    path : str or os.PathLike
        Destination file; replaced if it exists.
    write : callable
        Writes the content to the open file object it is given.
    """
    path = os.fspath(path)
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{base}.{secrets.token_hex(6)}.tmp")
    # os.open with mode 0o666 gives the file the usual umask permissions
    # (tempfile's would be 0o600); O_EXCL refuses to reuse an existing name.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# -- reading -------------------------------------------------------------------


class _Reader:
    """Entries of an open npz, with errors that name the file."""

    def __init__(self, npz, path):
        self.npz = npz
        self.path = path

    def has(self, name):
        return name in self.npz.files

    def array(self, name):
        if not self.has(name):
            raise ValueError(f"{self.path!r} is not a complete fastkds model file: entry {name!r} is missing")
        return self.npz[name]

    def json(self, name):
        return json.loads(str(self.array(name)))


def _get_params(reader, prefix):
    spec = reader.json(f"{prefix}params")
    params = dict(spec["values"])
    if "lam" in params and "n_iter" in params:  # a KDS model's parameters
        # files written before the encoder and its step were parameters used the paper's
        params.setdefault("step", "paper")
        params.setdefault("encoder", "apg")
    for name in spec["arrays"]:
        params[name] = reader.array(f"{prefix}params.{name}")
    for name, state in spec["random_states"].items():
        rs = np.random.RandomState()
        keys = reader.array(f"{prefix}params.{name}.keys")
        rs.set_state((state["kind"], keys, state["pos"], state["has_gauss"], state["cached_gaussian"]))
        params[name] = rs
    for name in spec.get("templates", []):
        params[name] = KDS(**_get_params(reader, f"{prefix}params.{name}."))
    return params


def _get_attributes(reader, prefix, estimator, arrays):
    for name in arrays:
        setattr(estimator, name, reader.array(prefix + name))
    for name, value in reader.json(f"{prefix}attributes").items():
        setattr(estimator, name, value)
    if reader.has(f"{prefix}feature_names_in_"):
        estimator.feature_names_in_ = reader.array(f"{prefix}feature_names_in_").astype(object)


def _get_kds(reader, prefix):
    kds = KDS(**_get_params(reader, prefix))
    if reader.has(f"{prefix}attributes"):
        _get_attributes(reader, prefix, kds, _KDS_ARRAYS)
    return kds


def _get_kmeans(reader, prefix, labels):
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

    kmeans = KMeans(**_get_params(reader, prefix))
    _get_attributes(reader, prefix, kmeans, _KMEANS_ARRAYS)
    kmeans.labels_ = labels
    kmeans._n_features_out = kmeans.cluster_centers_.shape[0]
    # KMeans.predict reads _n_threads, which fit sets for the machine it runs
    # on; set it for this machine rather than the writer's.
    kmeans._n_threads = _openmp_effective_n_threads()
    return kmeans


def _get_spectrum(reader, prefix):
    # Rebuilt from its stored arrays: recomputing would need the codes' X^T X.
    spectrum = object.__new__(BipartiteSpectrum)
    for name in _SPECTRUM_ARRAYS:
        setattr(spectrum, name, reader.array(prefix + name.lstrip("_")))
    spectrum.n_outlier_atoms = reader.json(f"{prefix}attributes")["n_outlier_atoms"]
    # files written before localised modes were marked: every mode counts
    has_spread = reader.has(f"{prefix}spread")
    spectrum.spread = reader.array(f"{prefix}spread") if has_spread else np.ones(spectrum.eigenvalues.size, dtype=bool)
    spectrum._stand_in = None
    if reader.has(f"{prefix}stand_in_out"):
        spectrum._stand_in = (reader.array(f"{prefix}stand_in_out"), reader.array(f"{prefix}stand_in_nearest"))
    return spectrum


def _get_clustering(reader, cls):
    model = cls(**_get_params(reader, ""))
    if not reader.has("attributes"):
        return model
    _get_attributes(reader, "", model, _CLUSTERING_ARRAYS)
    if cls is KDSEnsembleClustering:
        # a fitted ensemble holds n_estimators dictionaries; a missing one is named by reader.array
        model.estimators_ = [_get_kds(reader, f"estimators_.{i}.") for i in range(model.n_estimators)]
        model.components_ = np.vstack([kds.components_ for kds in model.estimators_])
    else:
        model.kds_ = _get_kds(reader, "kds_.")
        model.components_ = model.kds_.components_
    model.kmeans_ = _get_kmeans(reader, "kmeans_.", model.labels_)
    model.spectrum_ = _get_spectrum(reader, "spectrum_.")
    model.eigenvalues_ = model.spectrum_.eigenvalues
    return model


def load(path):
    """Load a model written by :func:`save` (or by an estimator's ``save`` method).

    The file is read with ``allow_pickle=False``. The model gives results
    identical to the one saved.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`save`.

    Returns
    -------
    estimator : KDS, KDSClustering or KDSEnsembleClustering
        Fitted if the saved one was, else unfitted with the same parameters.

    Raises
    ------
    ValueError
        If the file is not a fastkds model, is incomplete, or was written by
        a newer format version than this fastkds reads.

    See Also
    --------
    save : Write a model.
    """
    path = os.fspath(path)
    try:
        npz = np.load(path, allow_pickle=False)
    except (ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{path!r} is not a fastkds model file: {exc}") from exc
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(f"{path!r} is not a fastkds model file: it holds a single array, not an npz archive")
    with npz:
        if "fastkds_format_version" not in npz.files:
            raise ValueError(f"{path!r} is not a fastkds model file: it has no 'fastkds_format_version' entry")
        version = npz["fastkds_format_version"]
        if version.shape != () or version.dtype.kind not in "iu" or version < 1:
            raise ValueError(f"{path!r} has an invalid fastkds format version {version!r}")
        version = int(version)
        if version > FORMAT_VERSION:
            raise ValueError(
                f"{path!r} uses fastkds model format version {version}, newer than the "
                f"version {FORMAT_VERSION} this fastkds ({_package_version()}) reads; "
                "upgrade fastkds to load it"
            )
        reader = _Reader(npz, path)
        class_name = str(reader.array("class_name"))
        if class_name == "KDS":
            return _get_kds(reader, "")
        if class_name in ("KDSClustering", "KDSEnsembleClustering"):
            return _get_clustering(reader, _CLASSES[class_name])
        raise ValueError(f"{path!r} holds an unknown model class {class_name!r}")

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
import numbers
import os
import secrets
import struct
import zipfile
import zlib

import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._backends import DEVICES
from ._validation import check_clustering_params, check_n_jobs, check_positive_int
from .estimators import KDS, KDSClustering, KDSEnsembleClustering
from .prepared import PreparedDictionary
from .warmstart import check_init, presample_size
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
_SPECTRUM_ARRAYS = ("eigenvalues", "eigenvectors", "used", "inv_sqrt_s")


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
        _put_array(entries, prefix + name, getattr(spectrum, name))
    entries[f"{prefix}attributes"] = _to_json({"n_outlier_atoms": spectrum.n_outlier_atoms})
    _put_array(entries, f"{prefix}spread", spectrum.spread)
    if spectrum.stand_in is not None:
        out, nearest = spectrum.stand_in
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
    ValueError
        If :func:`load` would refuse the file: a parameter is invalid, or
        the fitted arrays disagree with each other (as after replacing
        ``components_`` by hand).

    See Also
    --------
    load : Read the file back.
    """
    if type(estimator) not in _CLASSES.values():
        raise TypeError(f"can only save KDS, KDSClustering or KDSEnsembleClustering, got {type(estimator).__name__}")
    entries = _entries(estimator)
    try:
        _check_model(estimator)
    except (TypeError, ValueError) as exc:
        # load would refuse the file
        raise ValueError(f"cannot save this {type(estimator).__name__}: {exc}") from None
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


# -- checking ------------------------------------------------------------------

# A model is checked before load returns it, and before save writes it: the
# kernels index the stored arrays by the stored sizes without bounds checks,
# so a file whose shapes, dtypes and parameters disagree would read out of
# bounds or crash. Each check raises ValueError or TypeError; load and save
# report it naming the file or the model.

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_FLOAT64 = (np.dtype(np.float64),)
_KIND_WORDS = {"iu": "an integer type", "b": "bool", "f": "a float type", "OU": "str"}


def _require(ok, message):
    if not ok:
        raise ValueError(message)


def _check_array(value, name, dtypes, shape, *, finite=False, meaning=""):
    """``value`` is an ndarray of one of ``dtypes`` (a tuple of dtypes, or a
    string of dtype kinds) whose shape is ``shape`` (None: any length);
    ``meaning`` names the sizes in the error, as in ``" = (n_atoms,)"``."""
    _require(isinstance(value, np.ndarray), f"{name} must be an array, got {type(value).__name__}")
    if isinstance(dtypes, tuple):
        ok, words = value.dtype in dtypes, " or ".join(str(d) for d in dtypes)
    else:
        ok, words = value.dtype.kind in dtypes and value.dtype.isnative, _KIND_WORDS[dtypes]
    _require(ok, f"{name} has dtype {value.dtype}, expected {words}")
    expected = "(" + ", ".join("any" if n is None else str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"
    _require(
        value.ndim == len(shape) and all(n is None or got == n for got, n in zip(value.shape, shape)),
        f"{name} has shape {value.shape}, expected {expected}{meaning}",
    )
    if finite:
        _require(bool(np.isfinite(value).all()), f"{name} contains NaN or infinite values")


def _check_count(value, name):
    """``value`` as an int >= 0."""
    _require(
        isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0,
        f"{name} must be an int >= 0, got {value!r}",
    )
    return int(value)


def _check_kds_params(est, n_atoms, n_features):
    """The parameters a :class:`KDS` fit reads, of a KDS or a KDSClustering,
    validated by the estimators' own checks.

    ``n_atoms`` is None for KDSClustering's unresolved ``"auto"``;
    ``n_features`` is None for an unfitted model.
    """
    probe = KDS(**{name: getattr(est, name) for name in KDS._get_param_names()})
    # an unresolved "auto" stands as 1, which passes every check that depends on the count
    probe.n_atoms = 1 if n_atoms is None else n_atoms
    p = probe._validated_params()
    presample_size(est.presample, p["n_atoms"], 0)
    # sizes not known yet are taken from an init array, which must still be 2-D
    rows, cols = np.shape(est.init) if np.ndim(est.init) == 2 else (-1, -1)
    check_init(est.init, rows if n_atoms is None else n_atoms, cols if n_features is None else n_features)
    _require(
        isinstance(est.device, str) and est.device in DEVICES, f"device must be one of {DEVICES}, got {est.device!r}"
    )
    check_random_state(est.random_state)


def _check_params(est):
    """The parameters of a fastkds estimator, validated as its fit validates them."""
    fitted = _is_fitted(est)
    if isinstance(est, KDS):
        _check_kds_params(est, est.n_atoms, est.n_features_in_ if fitted else None)
        return
    check_clustering_params(est)
    if isinstance(est, KDSClustering):
        n_atoms = None if isinstance(est.n_atoms, str) else est.n_atoms
        _check_kds_params(est, n_atoms, est.n_features_in_ if fitted else None)
        return
    check_positive_int(est.n_estimators, "n_estimators")
    if est.estimator is not None:
        if not isinstance(est.estimator, KDS):
            raise TypeError(f"estimator must be a fastkds.KDS or None, got {type(est.estimator).__name__}")
        _check_params(est.estimator)
    check_n_jobs(est.n_jobs)
    check_random_state(est.random_state)


def _check_kds_state(kds, prefix):
    """The fitted state of a KDS, against its parameters (checked first).

    The atoms are the rows of ``components_``, which a fitted model encodes
    with: ``n_atoms`` is the count the next fit learns, and may differ (a
    fit on fewer points learns fewer, and ``set_params`` may change it).
    """
    d = check_positive_int(kds.n_features_in_, f"{prefix}n_features_in_")
    _check_array(
        kds.components_, f"{prefix}components_", _FLOATS, (None, d), finite=True,
        meaning=f" = (atoms, {prefix}n_features_in_)",
    )
    _require(len(kds.components_) > 0, f"{prefix}components_ holds no atom")
    _check_array(kds.objective_, f"{prefix}objective_", "f", (None,))
    step = kds.step_
    _require(
        isinstance(step, numbers.Real) and not isinstance(step, bool) and np.isfinite(step) and step > 0,
        f"{prefix}step_ must be a finite float > 0, got {step!r}",
    )
    _check_count(kds.n_iter_, f"{prefix}n_iter_")
    names = getattr(kds, "feature_names_in_", None)
    if names is not None:
        _check_array(names, f"{prefix}feature_names_in_", "OU", (d,))
    # the encoder's own checks of the atoms: their squared norms and step fit the dtype
    p = kds._validated_params()
    PreparedDictionary(kds.components_, p["lam"], p["n_iter"], kds.components_.dtype, p["step"], p["encoder"])


def _check_spectrum(spectrum, n_atoms, n_clusters):
    """The stored eigenproblem over ``n_atoms`` atoms; returns the embedding's columns."""
    _check_array(spectrum.used, "spectrum_.used", "b", (n_atoms,), meaning=" = (atoms of the dictionaries,)")
    r = int(spectrum.used.sum())
    _require(r > 0, "spectrum_.used marks no atom")
    _check_array(spectrum.eigenvalues, "spectrum_.eigenvalues", _FLOAT64, (r,), finite=True)
    _check_array(spectrum.eigenvectors, "spectrum_.eigenvectors", _FLOAT64, (r, r), finite=True)
    _check_array(spectrum.inv_sqrt_s, "spectrum_.inv_sqrt_s", _FLOAT64, (r,), finite=True)
    _require(bool((spectrum.inv_sqrt_s > 0).all()), "spectrum_.inv_sqrt_s must be > 0")
    _check_array(spectrum.spread, "spectrum_.spread", "b", (r,))
    _require(
        _check_count(spectrum.n_outlier_atoms, "spectrum_.n_outlier_atoms") <= n_atoms,
        f"spectrum_.n_outlier_atoms={spectrum.n_outlier_atoms} exceeds the {n_atoms} atoms",
    )
    if spectrum.stand_in is not None:
        out, nearest = spectrum.stand_in
        _check_array(out, "spectrum_.stand_in_out", "iu", (None,))
        _check_array(nearest, "spectrum_.stand_in_nearest", "iu", (out.size,))
        for name, atoms in (("stand_in_out", out), ("stand_in_nearest", nearest)):
            _require(
                atoms.size == 0 or (atoms.min() >= 0 and atoms.max() < n_atoms),
                f"spectrum_.{name} holds atoms outside 0..{n_atoms - 1}",
            )
    columns = spectrum.n_columns(n_clusters)
    # codes are convex weights, so a finite projection gives a finite embedding
    _require(bool(np.isfinite(spectrum.projection(n_clusters)).all()), "spectrum_ gives a non-finite embedding")
    return columns


def _check_spectral_state(model, n_atoms, n_features):
    """The fitted state a KDSClustering and a KDSEnsembleClustering share, for
    dictionaries of ``n_atoms`` atoms (rows of their ``components_``) in all
    over ``n_features`` features."""
    # the clusterer's own parameters (n_clusters, n_atoms) govern the next
    # fit; its fitted state is checked against the nested fitted models
    k = check_positive_int(model.n_clusters_, "n_clusters_")
    _require(
        check_positive_int(model.n_features_in_, "n_features_in_") == n_features,
        f"n_features_in_={model.n_features_in_!r}, but the dictionaries have {n_features} features",
    )
    _check_array(model.components_, "components_", _FLOATS, (n_atoms, n_features))
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        _check_array(names, "feature_names_in_", "OU", (n_features,))
    columns = _check_spectrum(model.spectrum_, n_atoms, k)
    labels = model.labels_
    _check_array(labels, "labels_", "iu", (None,))
    _require(
        labels.size == 0 or (labels.min() >= 0 and labels.max() < k), f"labels_ hold labels outside 0..{k - 1}"
    )
    _check_array(model.embedding_, "embedding_", _FLOAT64, (labels.size, columns), finite=True)
    kmeans = model.kmeans_
    kmeans._validate_params()  # scikit-learn's own check of KMeans' parameters
    _require(kmeans.n_clusters == k, f"kmeans_.n_clusters={kmeans.n_clusters!r} differs from n_clusters_={k}")
    _check_array(
        kmeans.cluster_centers_, "kmeans_.cluster_centers_", _FLOAT64, (k, columns), finite=True,
        meaning=" = (n_clusters_, columns of the embedding)",
    )
    _require(
        kmeans.n_features_in_ == columns,
        f"kmeans_.n_features_in_={kmeans.n_features_in_!r} differs from the embedding's {columns} columns",
    )
    _check_count(kmeans.n_iter_, "kmeans_.n_iter_")
    _require(
        isinstance(kmeans.inertia_, numbers.Real) and not isinstance(kmeans.inertia_, bool),
        f"kmeans_.inertia_ must be a float, got {kmeans.inertia_!r}",
    )


def _check_model(model):
    """Raise ValueError or TypeError unless the parameters of ``model`` are
    valid and its fitted state agrees with them and with itself."""
    _check_params(model)
    if not _is_fitted(model):
        return
    if isinstance(model, KDS):
        _check_kds_state(model, "")
        return
    if isinstance(model, KDSClustering):
        _require(isinstance(model.kds_, KDS) and _is_fitted(model.kds_), "kds_ must be a fitted KDS")
        _check_params(model.kds_)
        _check_kds_state(model.kds_, "kds_.")
        dictionaries = [model.kds_]
        _require(isinstance(model.timings_, dict), f"timings_ must be a dict, got {type(model.timings_).__name__}")
    else:
        _require(
            len(model.estimators_) == model.n_estimators,
            f"{len(model.estimators_)} dictionaries in estimators_, but n_estimators={model.n_estimators}",
        )
        for i, kds in enumerate(model.estimators_):
            _require(isinstance(kds, KDS) and _is_fitted(kds), f"estimators_.{i} must be a fitted KDS")
            _check_params(kds)
            _check_kds_state(kds, f"estimators_.{i}.")
        dictionaries = model.estimators_
    features = {kds.n_features_in_ for kds in dictionaries}
    _require(len(features) == 1, f"the dictionaries have different feature counts {sorted(features)}")
    _check_spectral_state(model, sum(len(kds.components_) for kds in dictionaries), features.pop())


# -- reading -------------------------------------------------------------------

# Where a parameter is stored other than as a JSON value (see the module
# docstring); any other name there is refused.
_ARRAY_PARAMS = ("init",)
_RANDOM_STATE_PARAMS = ("random_state",)
_TEMPLATE_PARAMS = {KDSEnsembleClustering: ("estimator",)}

# Errors of reading an entry of a damaged archive: a bad CRC (BadZipFile),
# corrupt compressed data (zlib.error), a bad header (ValueError, EOFError),
# an encrypted or unsupported member (RuntimeError, NotImplementedError), a
# header whose shape does not fit in memory (MemoryError).
_ENTRY_ERRORS = (
    zipfile.BadZipFile, zlib.error, struct.error, ValueError, EOFError, RuntimeError, NotImplementedError,
    MemoryError,
)


class _Reader:
    """Entries of an open npz, with errors that name the file."""

    def __init__(self, npz, path):
        self.npz = npz
        self.path = path

    def fail(self, message):
        return ValueError(f"{self.path!r} is not a valid fastkds model file: {message}")

    def has(self, name):
        return name in self.npz.files

    def array(self, name):
        if not self.has(name):
            raise ValueError(f"{self.path!r} is not a complete fastkds model file: entry {name!r} is missing")
        try:
            value = self.npz[name]
        except _ENTRY_ERRORS as exc:
            raise ValueError(f"{self.path!r} is damaged: entry {name!r} cannot be read ({exc})") from exc
        # a crafted header may ask for Fortran order; the kernels expect C order
        return np.ascontiguousarray(value) if value.ndim > 1 else value

    def json(self, name, keys=None, optional=()):
        """Entry ``name``: a JSON object, holding ``keys`` (and maybe ``optional``) when given."""
        text = self.array(name)
        if text.shape != () or text.dtype.kind != "U":
            raise self.fail(f"entry {name!r} is not a JSON string")
        try:
            value = json.loads(str(text))
        except (ValueError, RecursionError) as exc:
            raise self.fail(f"entry {name!r} is not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise self.fail(f"entry {name!r} is not a JSON object")
        if keys is not None and not set(keys) <= set(value) <= set(keys) | set(optional):
            raise self.fail(f"entry {name!r} holds the keys {sorted(value)}, expected {sorted(keys)}")
        return value


def _is_name_list(value):
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _get_random_state(reader, name, state):
    """A RandomState from its stored state, checked: set_state does not check
    ``pos``, and a ``pos`` past the key would read out of bounds."""
    keys = reader.array(f"{name}.keys")
    fields = ("kind", "pos", "has_gauss", "cached_gaussian")
    if not isinstance(state, dict) or set(state) != set(fields):
        raise reader.fail(f"the state of {name} holds {state!r}, expected the keys {list(fields)}")
    try:
        _check_array(keys, f"{name}.keys", (np.dtype(np.uint32),), (624,))
        _require(state["kind"] == "MT19937", f"{name} is of kind {state['kind']!r}, expected 'MT19937'")
        _require(_check_count(state["pos"], f"{name} pos") <= 624, f"{name} pos={state['pos']} exceeds 624")
        _require(state["has_gauss"] in (0, 1) and not isinstance(state["has_gauss"], float),
                 f"{name} has_gauss must be 0 or 1, got {state['has_gauss']!r}")
        cached = state["cached_gaussian"]
        _require(isinstance(cached, (int, float)) and not isinstance(cached, bool),
                 f"{name} cached_gaussian must be a float, got {cached!r}")
    except ValueError as exc:
        raise reader.fail(exc) from None
    rs = np.random.RandomState()
    rs.set_state((state["kind"], keys, int(state["pos"]), int(state["has_gauss"]), float(cached)))
    return rs


def _get_params(reader, prefix, cls):
    """The parameters of a ``cls`` stored under ``prefix``: known names only,
    each stored once. Their values are checked with the model."""
    spec = reader.json(f"{prefix}params", ("values", "arrays", "random_states"), ("templates",))
    values, arrays, states = spec["values"], spec["arrays"], spec["random_states"]
    templates = spec.get("templates", [])
    if not (isinstance(values, dict) and _is_name_list(arrays) and isinstance(states, dict)
            and _is_name_list(templates)):
        raise reader.fail(f"entry '{prefix}params' is malformed")
    names = [*values, *arrays, *states, *templates]
    unknown = sorted(set(names) - set(cls._get_param_names()))
    if unknown:
        raise reader.fail(f"unknown parameters {unknown} of {cls.__name__} in '{prefix}params'")
    if len(set(names)) != len(names):
        raise reader.fail(f"a parameter is stored twice in '{prefix}params'")
    for group, names_, allowed in (
        ("arrays", arrays, _ARRAY_PARAMS),
        ("random states", states, _RANDOM_STATE_PARAMS),
        ("estimators", templates, _TEMPLATE_PARAMS.get(cls, ())),
    ):
        if not set(names_) <= set(allowed):
            raise reader.fail(f"'{prefix}params' stores {sorted(set(names_) - set(allowed))} as {group}")
    params = dict(values)
    if cls in (KDS, KDSClustering):
        # files written before the encoder and its step were parameters used the paper's
        params.setdefault("step", "paper")
        params.setdefault("encoder", "apg")
    for name in arrays:
        params[name] = reader.array(f"{prefix}params.{name}")
    for name, state in states.items():
        params[name] = _get_random_state(reader, f"{prefix}params.{name}", state)
    for name in templates:
        params[name] = KDS(**_get_params(reader, f"{prefix}params.{name}.", KDS))
    return params


def _get_attributes(reader, prefix, estimator, arrays, scalars):
    for name in arrays:
        setattr(estimator, name, reader.array(prefix + name))
    values = reader.json(f"{prefix}attributes", scalars)
    for name in scalars:
        setattr(estimator, name, values[name])
    if reader.has(f"{prefix}feature_names_in_"):
        names = reader.array(f"{prefix}feature_names_in_")
        if names.dtype.kind != "U":
            raise reader.fail(f"entry '{prefix}feature_names_in_' is not an array of str")
        estimator.feature_names_in_ = names.astype(object)


def _get_kds(reader, prefix, fitted=False):
    """The KDS under ``prefix``: fitted if its attributes are stored, which
    ``fitted=True`` (a clusterer's dictionaries) requires."""
    kds = KDS(**_get_params(reader, prefix, KDS))
    if fitted or reader.has(f"{prefix}attributes"):
        _get_attributes(reader, prefix, kds, _KDS_ARRAYS, _KDS_SCALARS)
    return kds


def _get_kmeans(reader, prefix, labels):
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

    kmeans = KMeans(**_get_params(reader, prefix, KMeans))
    _get_attributes(reader, prefix, kmeans, _KMEANS_ARRAYS, _KMEANS_SCALARS)
    kmeans.labels_ = labels
    # the number of centres, as _check_spectral_state makes sure
    kmeans._n_features_out = kmeans.n_clusters
    # KMeans.predict reads _n_threads, which fit sets for the machine it runs
    # on; set it for this machine rather than the writer's.
    kmeans._n_threads = _openmp_effective_n_threads()
    return kmeans


def _get_spectrum(reader, prefix):
    arrays = {name: reader.array(prefix + name) for name in _SPECTRUM_ARRAYS}
    # files written before localised modes were marked: every mode counts
    has_spread = reader.has(f"{prefix}spread")
    spread = reader.array(f"{prefix}spread") if has_spread else np.ones(arrays["eigenvalues"].size, dtype=bool)
    stand_in = None
    if reader.has(f"{prefix}stand_in_out"):
        stand_in = (reader.array(f"{prefix}stand_in_out"), reader.array(f"{prefix}stand_in_nearest"))
    return BipartiteSpectrum.from_arrays(
        **arrays,
        spread=spread,
        n_outlier_atoms=reader.json(f"{prefix}attributes", ("n_outlier_atoms",))["n_outlier_atoms"],
        stand_in=stand_in,
    )


def _get_clustering(reader, cls):
    model = cls(**_get_params(reader, "", cls))
    if not reader.has("attributes"):
        return model
    scalars = _ENSEMBLE_SCALARS if cls is KDSEnsembleClustering else _CLUSTERING_SCALARS
    _get_attributes(reader, "", model, _CLUSTERING_ARRAYS, scalars)
    if cls is KDSEnsembleClustering:
        # a fitted ensemble holds n_estimators dictionaries; a missing one is named by reader.array
        try:
            n_estimators = check_positive_int(model.n_estimators, "n_estimators")
        except (TypeError, ValueError) as exc:
            raise reader.fail(exc) from None
        model.estimators_ = [_get_kds(reader, f"estimators_.{i}.", fitted=True) for i in range(n_estimators)]
        try:
            model.components_ = np.vstack([kds.components_ for kds in model.estimators_])
        except ValueError as exc:  # the dictionaries' shapes disagree; named by the checks otherwise
            raise reader.fail(f"the dictionaries in estimators_ do not stack: {exc}") from None
    else:
        model.kds_ = _get_kds(reader, "kds_.", fitted=True)
        model.components_ = model.kds_.components_
    model.kmeans_ = _get_kmeans(reader, "kmeans_.", model.labels_)
    model.spectrum_ = _get_spectrum(reader, "spectrum_.")
    model.eigenvalues_ = model.spectrum_.eigenvalues
    return model


def load(path):
    """Load a model written by :func:`save` (or by an estimator's ``save`` method).

    The file is read with ``allow_pickle=False``, and the model is checked
    before it is returned: every parameter passes the estimators' own
    validation, and every stored array has the dtype and shape the
    parameters and the other arrays imply. The model gives results
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
        If the file is not a fastkds model, is incomplete, damaged (a bad
        checksum, say) or inconsistent (unknown parameters, invalid
        parameter values, arrays whose shapes or dtypes disagree), or was
        written by a newer format version than this fastkds reads.
    FileNotFoundError
        If there is no file at ``path``.

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
        reader = _Reader(npz, path)
        version = reader.array("fastkds_format_version")
        if version.shape != () or version.dtype.kind not in "iu" or version < 1:
            raise ValueError(f"{path!r} has an invalid fastkds format version {version!r}")
        version = int(version)
        if version > FORMAT_VERSION:
            raise ValueError(
                f"{path!r} uses fastkds model format version {version}, newer than the "
                f"version {FORMAT_VERSION} this fastkds ({_package_version()}) reads; "
                "upgrade fastkds to load it"
            )
        class_name = reader.array("class_name")
        class_name = str(class_name) if class_name.shape == () and class_name.dtype.kind == "U" else repr(class_name)
        if class_name == "KDS":
            model = _get_kds(reader, "")
        elif class_name in ("KDSClustering", "KDSEnsembleClustering"):
            model = _get_clustering(reader, _CLASSES[class_name])
        else:
            raise ValueError(f"{path!r} holds an unknown model class {class_name!r}")
        try:
            _check_model(model)
        except (TypeError, ValueError) as exc:
            raise reader.fail(exc) from None
        return model

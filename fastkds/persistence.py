"""Model files: the portable ``.npz`` format of fitted estimators.

The file holds only numeric and string arrays, written with :func:`numpy.savez`
and read back with ``allow_pickle=False``: loading one never runs code, and it
does not depend on the Python, NumPy or scikit-learn version that wrote it the
way a pickle does. Every attribute that ``transform`` and ``predict`` use is
stored exactly, so a loaded model gives bit-identical results.

This module knows the file, not the models: the archive, its entries, the
format version and the checks of stored values. Each class a file can hold
registers itself (:func:`register`) and turns its state into entries and
back with two hooks, called with a prefix for the names of its entries:

``model._to_entries(writer, prefix)``
    writes its parameters (:meth:`Writer.params`) and, when fitted, its
    fitted state into a :class:`Writer`;
``cls._from_entries(reader, prefix)`` (a classmethod)
    builds the model from a :class:`Reader` and checks it: every parameter
    passes the estimator's own validation, and every array has the dtype
    and shape that the parameters and the other arrays imply, since the
    kernels index the stored arrays by the stored sizes without bounds
    checks. A check raises ValueError or TypeError, which :func:`load`
    reports naming the file.

:func:`save` reads the entries it wrote back through ``_from_entries``
before it writes the file, so it never writes one that :func:`load` refuses.

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
    ``params.<name>.keys`` plus scalars in the JSON) and an estimator of a
    registered class (the ensemble's ``estimator``: its own ``params``
    under the prefix ``params.<name>.``).
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

FORMAT_VERSION = 1

# Class name -> class, filled by register: a file names its class, and load
# builds that one.
_CLASSES = {}


def register(cls):
    """Class decorator: files may hold instances of ``cls``, which
    :func:`load` finds by the class's name.

    ``cls`` provides the hooks ``_to_entries`` and ``_from_entries`` (see
    the module's docstring). Only registered classes are saved: a subclass
    is saved only if it is registered itself.

    Parameters
    ----------
    cls : type

    Returns
    -------
    cls : type
        The class, unchanged.
    """
    _CLASSES[cls.__name__] = cls
    return cls


def _known_classes():
    """The registered classes, in words: "A, B or C"."""
    names = sorted(_CLASSES)
    if len(names) < 2:
        return names[0] if names else "no class"
    return ", ".join(names[:-1]) + " or " + names[-1]


# -- writing -------------------------------------------------------------------


def _json_default(value):
    # NumPy scalars (e.g. n_atoms=np.int64(8)) are stored as Python numbers.
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class Writer:
    """The entries of a model file being written: plain arrays, and JSON
    objects in 0-d str arrays, neither of which needs pickle.

    Methods raise TypeError for a value that only pickle could store.

    Attributes
    ----------
    entries : dict of str to ndarray
        The entries written so far, by name.
    """

    def __init__(self):
        self.entries = {}

    def array(self, name, value):
        """Write ``value`` as the array entry ``name``.

        Parameters
        ----------
        name : str
        value : array-like
            Not of object dtype.
        """
        arr = np.asarray(value)
        if arr.dtype.hasobject:
            raise TypeError(f"cannot save {name!r}: object arrays need pickle, which the format avoids")
        self.entries[name] = arr

    def json(self, name, obj):
        """Write ``obj`` (a JSON object; NumPy scalars allowed) as the entry ``name``.

        Parameters
        ----------
        name : str
        obj : dict
        """
        self.entries[name] = np.array(json.dumps(obj, default=_json_default))

    def params(self, prefix, estimator):
        """Write ``estimator.get_params(deep=False)`` as the entry ``<prefix>params``.

        Array parameters, a ``RandomState`` and an estimator of a registered
        class are stored as the module's docstring says.

        Parameters
        ----------
        prefix : str
        estimator : estimator
        """
        values, arrays, random_states, templates = {}, [], {}, []
        for name, value in estimator.get_params(deep=False).items():
            if isinstance(value, tuple(_CLASSES.values())):
                self.params(f"{prefix}params.{name}.", value)
                templates.append(name)
            elif isinstance(value, np.ndarray):
                self.array(f"{prefix}params.{name}", value)
                arrays.append(name)
            elif isinstance(value, np.random.RandomState):
                kind, keys, pos, has_gauss, cached = value.get_state(legacy=True)
                self.array(f"{prefix}params.{name}.keys", keys)
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
        self.json(f"{prefix}params", spec)

    def attributes(self, prefix, estimator, arrays, scalars):
        """Write fitted attributes of ``estimator``: each of ``arrays`` as its
        own entry, ``scalars`` together as the JSON entry ``<prefix>attributes``,
        and ``feature_names_in_`` when it has them.

        Parameters
        ----------
        prefix : str
        estimator : object
        arrays, scalars : sequence of str
            Attribute names.
        """
        for name in arrays:
            self.array(prefix + name, getattr(estimator, name))
        self.json(f"{prefix}attributes", {name: getattr(estimator, name) for name in scalars})
        # Set by validate_data for DataFrame input: an object array of str, stored as unicode.
        names = getattr(estimator, "feature_names_in_", None)
        if names is not None:
            self.array(f"{prefix}feature_names_in_", np.asarray(names, dtype=str))


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
    cls = type(estimator)
    if _CLASSES.get(cls.__name__) is not cls:
        raise TypeError(f"can only save {_known_classes()}, got {cls.__name__}")
    writer = Writer()
    writer.array("fastkds_format_version", FORMAT_VERSION)
    writer.array("class_name", cls.__name__)
    writer.array("fastkds_version", _package_version())
    try:
        estimator._to_entries(writer, "")
    except ValueError as exc:  # a TypeError (a value that needs pickle) is raised as it is
        raise ValueError(f"cannot save this {cls.__name__}: {exc}") from None
    try:
        # read back as load reads the file: save never writes one that load refuses
        cls._from_entries(Reader(writer.entries), "")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot save this {cls.__name__}: {exc}") from None
    write_atomically(path, lambda f: np.savez(f, **writer.entries))


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


# -- checking stored values ----------------------------------------------------

# The hooks' checks of what they read, each raising ValueError with a message
# that names the entry.

_KIND_WORDS = {"iu": "an integer type", "b": "bool", "f": "a float type", "OU": "str"}

#: The dtypes of stored float arrays: the atoms may be either, the spectral
#: step's arrays are float64.
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
FLOAT64 = (np.dtype(np.float64),)


def require(ok, message):
    """Raise ``ValueError(message)`` unless ``ok``.

    Parameters
    ----------
    ok : bool
    message : str
    """
    if not ok:
        raise ValueError(message)


def check_array(value, name, dtypes, shape, *, finite=False, meaning=""):
    """Check that ``value`` is an ndarray of one of ``dtypes`` whose shape is ``shape``.

    Parameters
    ----------
    value : object
    name : str
        The entry, named in the error.
    dtypes : tuple of numpy.dtype, or str
        The dtypes allowed, or a string of dtype kinds (``"iu"``, ``"b"``,
        ``"f"``, ``"OU"``), whose byte order must be the machine's.
    shape : tuple of int or None
        The shape; None allows any length along that axis.
    finite : bool, default=False
        Also refuse NaN and infinite values.
    meaning : str, default=""
        What the sizes are, added to the error, as in ``" = (n_atoms,)"``.
    """
    require(isinstance(value, np.ndarray), f"{name} must be an array, got {type(value).__name__}")
    if isinstance(dtypes, tuple):
        ok, words = value.dtype in dtypes, " or ".join(str(d) for d in dtypes)
    else:
        ok, words = value.dtype.kind in dtypes and value.dtype.isnative, _KIND_WORDS[dtypes]
    require(ok, f"{name} has dtype {value.dtype}, expected {words}")
    expected = "(" + ", ".join("any" if n is None else str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"
    require(
        value.ndim == len(shape) and all(n is None or got == n for got, n in zip(value.shape, shape)),
        f"{name} has shape {value.shape}, expected {expected}{meaning}",
    )
    if finite:
        require(bool(np.isfinite(value).all()), f"{name} contains NaN or infinite values")


def check_count(value, name):
    """``value`` as an int >= 0, or a ValueError naming ``name``.

    Parameters
    ----------
    value : object
    name : str

    Returns
    -------
    count : int
    """
    require(
        isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0,
        f"{name} must be an int >= 0, got {value!r}",
    )
    return int(value)


# -- reading -------------------------------------------------------------------

# Where a parameter is stored other than as a JSON value (see the module
# docstring); any other name there is refused.
_ARRAY_PARAMS = ("init",)
_RANDOM_STATE_PARAMS = ("random_state",)

# Errors of reading an entry of a damaged archive: a bad CRC (BadZipFile),
# corrupt compressed data (zlib.error), a bad header (ValueError, EOFError),
# an encrypted or unsupported member (RuntimeError, NotImplementedError), a
# header whose shape does not fit in memory (MemoryError).
_ENTRY_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    struct.error,
    ValueError,
    EOFError,
    RuntimeError,
    NotImplementedError,
    MemoryError,
)


class _FileError(ValueError):
    """A Reader's error: it names the file already."""


class Reader:
    """The entries of a model file being read, with errors that name the file.

    Methods raise ValueError for an entry that is missing, damaged or not
    of the format's form.

    Parameters
    ----------
    entries : mapping of str to ndarray
        An open npz archive, or the entries of a :class:`Writer`.
    path : str or None, default=None
        The file, named in the errors; None for entries not read from a file.
    """

    def __init__(self, entries, path=None):
        self._entries = entries
        self._names = frozenset(entries.keys())
        self.path = path

    def fail(self, message):
        """The error for ``message``, naming the file.

        Parameters
        ----------
        message : str or Exception

        Returns
        -------
        error : ValueError
        """
        return self._error("is not a valid fastkds model file", message)

    def _error(self, what, message):
        # "PATH is WHAT: MESSAGE"; the message alone for entries not from a file
        return _FileError(str(message) if self.path is None else f"{self.path!r} {what}: {message}")

    def has(self, name):
        """Whether the entry ``name`` is there.

        Parameters
        ----------
        name : str

        Returns
        -------
        bool
        """
        return name in self._names

    def array(self, name):
        """The entry ``name``, C-contiguous.

        Parameters
        ----------
        name : str

        Returns
        -------
        ndarray
        """
        if not self.has(name):
            raise self._error("is not a complete fastkds model file", f"entry {name!r} is missing")
        try:
            value = self._entries[name]
        except _ENTRY_ERRORS as exc:
            raise self._error("is damaged", f"entry {name!r} cannot be read ({exc})") from exc
        # a crafted header may ask for Fortran order; the kernels expect C order
        return np.ascontiguousarray(value) if value.ndim > 1 else value

    def json(self, name, keys=None, optional=()):
        """The entry ``name``: a JSON object, holding ``keys`` (and maybe ``optional``) when given.

        Parameters
        ----------
        name : str
        keys : sequence of str or None, default=None
        optional : sequence of str, default=()

        Returns
        -------
        dict
        """
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

    def _random_state(self, name, state):
        """A RandomState from its stored state, checked: set_state does not check
        ``pos``, and a ``pos`` past the key would read out of bounds."""
        keys = self.array(f"{name}.keys")
        fields = ("kind", "pos", "has_gauss", "cached_gaussian")
        if not isinstance(state, dict) or set(state) != set(fields):
            raise self.fail(f"the state of {name} holds {state!r}, expected the keys {list(fields)}")
        try:
            check_array(keys, f"{name}.keys", (np.dtype(np.uint32),), (624,))
            require(state["kind"] == "MT19937", f"{name} is of kind {state['kind']!r}, expected 'MT19937'")
            require(check_count(state["pos"], f"{name} pos") <= 624, f"{name} pos={state['pos']} exceeds 624")
            require(
                state["has_gauss"] in (0, 1) and not isinstance(state["has_gauss"], float),
                f"{name} has_gauss must be 0 or 1, got {state['has_gauss']!r}",
            )
            cached = state["cached_gaussian"]
            require(
                isinstance(cached, (int, float)) and not isinstance(cached, bool),
                f"{name} cached_gaussian must be a float, got {cached!r}",
            )
        except ValueError as exc:
            raise self.fail(exc) from None
        rs = np.random.RandomState()
        rs.set_state((state["kind"], keys, int(state["pos"]), int(state["has_gauss"]), float(cached)))
        return rs

    def params(self, prefix, cls, templates=None):
        """The parameters of a ``cls`` stored under ``prefix``: known names
        only, each stored once. Their values are for the caller to check.

        Parameters
        ----------
        prefix : str
        cls : type
            An estimator class; its ``__init__`` names the parameters.
        templates : dict of str to type, default=None
            The parameters that may hold an estimator, and its class, whose
            ``_from_entries`` builds it from the prefix ``<prefix>params.<name>.``.

        Returns
        -------
        params : dict
            The stored parameters only: one not stored takes its default.
        """
        templates = templates or {}
        spec = self.json(f"{prefix}params", ("values", "arrays", "random_states"), ("templates",))
        values, arrays, states = spec["values"], spec["arrays"], spec["random_states"]
        nested = spec.get("templates", [])
        if not (
            isinstance(values, dict) and _is_name_list(arrays) and isinstance(states, dict) and _is_name_list(nested)
        ):
            raise self.fail(f"entry '{prefix}params' is malformed")
        names = [*values, *arrays, *states, *nested]
        unknown = sorted(set(names) - set(cls().get_params(deep=False)))
        if unknown:
            raise self.fail(f"unknown parameters {unknown} of {cls.__name__} in '{prefix}params'")
        if len(set(names)) != len(names):
            raise self.fail(f"a parameter is stored twice in '{prefix}params'")
        for group, names_, allowed in (
            ("arrays", arrays, _ARRAY_PARAMS),
            ("random states", states, _RANDOM_STATE_PARAMS),
            ("estimators", nested, tuple(templates)),
        ):
            if not set(names_) <= set(allowed):
                raise self.fail(f"'{prefix}params' stores {sorted(set(names_) - set(allowed))} as {group}")
        params = dict(values)
        for name in arrays:
            params[name] = self.array(f"{prefix}params.{name}")
        for name, state in states.items():
            params[name] = self._random_state(f"{prefix}params.{name}", state)
        for name in nested:
            params[name] = templates[name]._from_entries(self, f"{prefix}params.{name}.")
        return params

    def attributes(self, prefix, arrays, scalars):
        """Fitted attributes stored by :meth:`Writer.attributes`.

        Parameters
        ----------
        prefix : str
        arrays, scalars : sequence of str
            Attribute names; the JSON entry must hold exactly ``scalars``.

        Returns
        -------
        attributes : dict
            Name -> value, with ``feature_names_in_`` (an object array of
            str, as scikit-learn sets it) when stored.
        """
        found = {name: self.array(prefix + name) for name in arrays}
        found.update(self.json(f"{prefix}attributes", scalars))
        if self.has(f"{prefix}feature_names_in_"):
            names = self.array(f"{prefix}feature_names_in_")
            if names.dtype.kind != "U":
                raise self.fail(f"entry '{prefix}feature_names_in_' is not an array of str")
            found["feature_names_in_"] = names.astype(object)
        return found


def _is_name_list(value):
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


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

    Notes
    -----
    The class named in the file must be registered, as the estimator classes
    are when :mod:`fastkds.estimators` is imported; ``fastkds.load`` imports
    it first.
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
        reader = Reader(npz, path)
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
        if class_name not in _CLASSES:
            known = (
                f"this fastkds loads {_known_classes()}"
                if _CLASSES
                # the estimator classes register on import
                else "no class is registered: import fastkds.estimators first, as fastkds.load does"
            )
            raise ValueError(f"{path!r} holds an unknown model class {class_name!r} ({known})")
        try:
            return _CLASSES[class_name]._from_entries(reader, "")
        except _FileError:
            raise
        except (TypeError, ValueError) as exc:  # a check of the model
            raise reader.fail(exc) from None

"""Data that need not fit in memory: ``.npy`` files, memmaps, h5py/zarr
datasets and iterables of chunks, read one chunk at a time.

The estimators accept any of these wherever they accept an array. A
:class:`ChunkSource` hands out validated, C-contiguous float chunks, so the
encoder never sees more than one chunk of the data at once and memory does
not grow with n. Each chunk is checked as it is read (shape, dtype, NaN/inf),
and an error names the rows it was found in.
"""

import os
from collections.abc import Iterable, Iterator

import numpy as np
import scipy.sparse as sp

from ._kernels import first_distinct
from ._validation import working_dtype
from .diskcodes import NpyRows


def iter_chunks(n, chunk_size):
    """Yield ``(start, stop)`` row ranges covering ``range(n)``.

    Defined here, low in the package, so that the GPU backend and the
    sources share it without importing the user-facing :mod:`fastkds.encoding`.

    Parameters
    ----------
    n : int
        Rows to cover.
    chunk_size : int
        Rows per range (the last may be shorter).

    Yields
    ------
    start, stop : int
        ``range(start, stop)`` is one chunk's rows.
    """
    for start in range(0, n, chunk_size):
        yield start, min(start + chunk_size, n)


def _float_dtype(dtype):
    """The working dtype of data of ``dtype`` (``_validation.working_dtype``);
    TypeError where it is not numeric."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"data must be numeric, got dtype {dtype}")
    return working_dtype(dtype)


def _check_chunk(chunk, start, n_features, dtype):
    """One chunk as a finite, C-contiguous 2-D array of ``dtype``."""
    if sp.issparse(chunk):
        chunk = chunk.toarray()  # the kernels read dense rows; one chunk's are dense at a time
    chunk = np.asarray(chunk)
    if chunk.ndim != 2:
        raise ValueError(f"chunk at row {start} has {chunk.ndim} dimensions, expected 2 (rows x features)")
    if n_features is not None and chunk.shape[1] != n_features:
        raise ValueError(
            f"chunk at row {start} has {chunk.shape[1]} features, expected {n_features} like the first chunk"
        )
    _float_dtype(chunk.dtype)  # TypeError for object, complex, strings
    chunk = np.ascontiguousarray(chunk, dtype=dtype)
    if not np.all(np.isfinite(chunk)):
        bad = start + int(np.flatnonzero(~np.all(np.isfinite(chunk), axis=1))[0])
        raise ValueError(f"data contain NaN or infinite values (first in row {bad})")
    return chunk


def refuse_empty(shape, rows=True):
    """scikit-learn's ValueError for data without features, or (``rows``)
    without rows, as it refuses an in-memory array; a row count of None
    (not counted yet) passes."""
    n_samples, n_features = shape
    if n_features == 0:
        raise ValueError(f"Found data with 0 feature(s) (shape={shape}) while a minimum of 1 is required.")
    if rows and n_samples == 0:
        raise ValueError(f"Found data with 0 sample(s) (shape={shape}) while a minimum of 1 is required.")


def random_rows(rng, n, size):
    """``size`` distinct row indices out of ``n``, in random order, in O(size) memory.

    ``RandomState.choice(n, size, replace=False)`` permutes all n indices
    (8 GB for 10^9 rows) and keeps the first ``size``. Here, where the sample
    is small against n, the indices are the first ``size`` distinct values
    of a stream of uniform draws: a uniformly random subset, in a random
    order. The stream does not depend on ``size``, so with the same ``rng``
    state a smaller sample is a prefix of a larger one (nested samples).

    Parameters
    ----------
    rng : numpy.random.RandomState
    n, size : int
        ``size <= n``.

    Returns
    -------
    indices : ndarray of int64, shape (size,)
    """
    if 4 * size >= n:  # the permutation costs at most four times the sample
        return rng.permutation(n)[:size]
    generator = np.random.default_rng(rng.randint(np.iinfo(np.int32).max))
    # whole blocks, enough for the sample but for rare repeats (size < n / 4)
    n_blocks = -(-(size + size // 2 + 16) // _DRAW_BLOCK)
    draws = np.concatenate([generator.integers(0, n, size=_DRAW_BLOCK) for _ in range(n_blocks)])
    while True:
        sample = first_distinct(draws, size)
        if sample.shape[0] == size:
            return sample
        draws = np.r_[draws, generator.integers(0, n, size=_DRAW_BLOCK)]


#: Uniform draws :func:`random_rows` makes at a time (a fixed block, so that
#: the stream is the same whatever the sample size).
_DRAW_BLOCK = 1 << 16


def _finite_rows(rows, indices):
    """``rows`` (the data's rows at ``indices``), refused if one is not finite."""
    finite = np.all(np.isfinite(rows), axis=1)
    if not finite.all():  # name the row of the data, not of the sample
        bad = int(indices[np.flatnonzero(~finite)[0]])
        raise ValueError(f"data contain NaN or infinite values (first in row {bad})")
    return rows


def _check_rows(n, expected, name, at_least=False):
    """Refuse a pass over the data that does not read the rows of the first
    (``expected``; None before a first pass has counted them).

    Every pass of a fit must see the same points: arrays sized on the first
    pass (labels, codes) would otherwise get the wrong length.
    """
    if expected is not None and n != expected:
        got = f"at least {n}" if at_least else str(n)
        raise ValueError(
            f"{name} gave {got} rows on this pass but {expected} on the first: a source read "
            "several times must give the same rows every time"
        )


class ChunkSource:
    """Rows of a data set, read chunk by chunk.

    Attributes
    ----------
    n_samples : int or None
        Number of rows, or None until a first pass over an iterable has
        counted them.
    n_features : int
    dtype : numpy dtype
        float32 or float64: the dtype every chunk is converted to.
    """

    n_samples = None
    n_features = None
    dtype = None
    #: Whether the rows can be read more than once (fitting needs several passes).
    reiterable = True

    @property
    def shape(self):
        """``(n_samples, n_features)``, as for an array."""
        return (self.n_samples, self.n_features)

    def chunks(self, chunk_size):
        """Yield ``(start, chunk)``: validated float arrays of up to ``chunk_size`` rows."""
        raise NotImplementedError

    def count(self):
        """Number of rows, counted by one pass when not known yet."""
        if self.n_samples is None:
            for _ in self.chunks(1 << 30):
                pass
        return self.n_samples

    def take(self, indices):
        """The rows at sorted ``indices``, as one in-memory array (one pass)."""
        indices = np.asarray(indices, dtype=np.int64)
        out = np.empty((indices.shape[0], self.n_features), dtype=self.dtype)
        pos = 0
        for start, chunk in self.chunks(1 << 16):
            stop = start + chunk.shape[0]
            end = pos + int(np.searchsorted(indices[pos:], stop))
            out[pos:end] = chunk[indices[pos:end] - start]
            pos = end
            if pos == indices.shape[0]:
                break
        return out

    def to_array(self):
        """All rows as one in-memory array."""
        parts = [chunk for _, chunk in self.chunks(1 << 16)]
        if not parts:
            return np.empty((0, self.n_features), dtype=self.dtype)
        return np.concatenate(parts)


class SlicedSource(ChunkSource):
    """Anything with ``shape``, ``dtype`` and row slicing: memmaps, h5py and
    zarr datasets. Only the rows of one chunk are read at a time.

    memmaps, h5py and zarr datasets are recognised by the estimators; wrap
    any other sliceable array-like in ``SlicedSource(data)`` to have it read
    chunk by chunk rather than converted to one array.
    """

    def __init__(self, data, name="X"):
        shape = tuple(data.shape)
        if len(shape) != 2:
            raise ValueError(f"{name} must be 2-D (rows x features), got shape {shape}")
        self._data = data
        self._name = name
        self.n_samples, self.n_features = int(shape[0]), int(shape[1])
        self.dtype = _float_dtype(data.dtype)

    def chunks(self, chunk_size):
        _check_rows(int(self._data.shape[0]), self.n_samples, self._name)  # a dataset resized since
        for start, stop in iter_chunks(self.n_samples, chunk_size):
            yield start, _check_chunk(self._data[start:stop], start, self.n_features, self.dtype)

    def take(self, indices):
        indices = np.asarray(indices, dtype=np.int64)
        if not isinstance(self._data, np.ndarray):  # h5py/zarr fancy indexing differs; one pass is universal
            return super().take(indices)
        return _finite_rows(np.ascontiguousarray(self._data[indices], dtype=self.dtype), indices)


class NpyFileSource(ChunkSource):
    """A ``.npy`` file named by its path: chunks are read by plain file reads
    (:class:`fastkds.diskcodes.NpyRows`), so a pass over a file larger than
    memory holds one chunk, not the pages a memory map would keep resident.
    The rows :meth:`take` samples are gathered through a memory map whose
    pages are released window by window.
    """

    def __init__(self, rows, name="X"):
        if len(rows.shape) != 2:
            raise ValueError(f"{name} must be 2-D (rows x features), got shape {rows.shape}")
        self._path = rows.path
        self._name = name
        self.n_samples, self.n_features = int(rows.shape[0]), int(rows.shape[1])
        self.dtype = _float_dtype(rows.dtype)

    def chunks(self, chunk_size):
        rows = NpyRows(self._path)  # the header again: a file rewritten since is caught
        _check_rows(int(rows.shape[0]), self.n_samples, self._name)
        for start, stop in iter_chunks(self.n_samples, chunk_size):
            yield start, _check_chunk(rows.read(start, stop), start, self.n_features, self.dtype)

    def take(self, indices):
        indices = np.asarray(indices, dtype=np.int64)
        return _finite_rows(np.ascontiguousarray(NpyRows(self._path).take(indices), dtype=self.dtype), indices)


class IterableSource(ChunkSource):
    """A sequence of chunks, a callable returning a fresh iterator of chunks,
    or a one-shot iterator (read once: fine for ``transform``, not ``fit``)."""

    def __init__(self, chunks, name="X"):
        self._factory = chunks if callable(chunks) else None
        self._chunks = None if callable(chunks) else chunks
        self.reiterable = self._factory is not None or not isinstance(chunks, Iterator)
        self._name = name
        self._used = False
        first = self._first_chunk()
        self.n_features = first.shape[1]
        self.dtype = _float_dtype(first.dtype)

    def _iterate(self):
        if self._factory is not None:
            it = self._factory()
            if not isinstance(it, Iterable):
                raise TypeError(
                    f"{self._name}: the callable must return an iterable of chunks, got {type(it).__name__}"
                )
            return iter(it)
        if not self.reiterable:
            if self._used:
                raise ValueError(
                    f"{self._name} is a one-shot iterator that was already read: fitting needs "
                    "several passes; pass a list of chunks or a callable returning a fresh "
                    "iterator, or learn with partial_fit"
                )
            self._used = True
        return iter(self._chunks)

    def _first_chunk(self):
        if not self.reiterable:
            # peek without losing the chunk: keep it in front of the iterator
            it = iter(self._chunks)
            try:
                first = next(it)
            except StopIteration:
                raise ValueError(f"{self._name} yielded no chunks") from None
            self._chunks = _Prepend(first, it)
        else:
            try:
                first = next(iter(self._iterate()))
            except StopIteration:
                raise ValueError(f"{self._name} yielded no chunks") from None
        first = np.asarray(first) if not sp.issparse(first) else first
        return _check_chunk(first, 0, None, _float_dtype(getattr(first, "dtype", np.float64)))

    def chunks(self, chunk_size):
        start = 0
        for raw in self._iterate():
            chunk = _check_chunk(raw, start, self.n_features, self.dtype)
            if self.n_samples is not None and start + chunk.shape[0] > self.n_samples:
                _check_rows(start + chunk.shape[0], self.n_samples, self._name, at_least=True)
            # split chunks larger than chunk_size: working memory stays bounded
            for lo in range(0, chunk.shape[0], chunk_size):
                part = chunk[lo : lo + chunk_size]
                yield start + lo, part
            start += chunk.shape[0]
        _check_rows(start, self.n_samples, self._name)
        self.n_samples = start


class SparseSource(ChunkSource):
    """A scipy sparse matrix or array, read as dense chunks: the kernels
    read dense rows, and only one chunk's rows (and the rows :meth:`take`
    gathers) are dense at a time. CSR input is read as it is; another
    format is converted to CSR once, a copy (the caller's is not changed).
    """

    def __init__(self, data, name="X"):
        if len(data.shape) != 2:
            raise ValueError(f"{name} must be 2-D (rows x features), got shape {data.shape}")
        self._data = data.tocsr()
        self._name = name
        self.n_samples, self.n_features = int(data.shape[0]), int(data.shape[1])
        self.dtype = _float_dtype(data.dtype)

    def chunks(self, chunk_size):
        for start, stop in iter_chunks(self.n_samples, chunk_size):
            yield start, _check_chunk(self._data[start:stop], start, self.n_features, self.dtype)

    def take(self, indices):
        indices = np.asarray(indices, dtype=np.int64)
        return _finite_rows(np.ascontiguousarray(self._data[indices].toarray(), dtype=self.dtype), indices)


class _Prepend:
    """An iterator yielding ``first`` and then the rest of ``it``."""

    def __init__(self, first, it):
        self._first, self._it = first, it

    def __iter__(self):
        yield self._first
        yield from self._it


class ArraySource(ChunkSource):
    """An in-memory array already validated: chunks are views."""

    def __init__(self, Y):
        self._Y = Y
        self.n_samples, self.n_features = Y.shape
        self.dtype = Y.dtype

    def chunks(self, chunk_size):
        return source_chunks(self._Y, chunk_size)

    def take(self, indices):
        return self._Y[indices]

    def to_array(self):
        return self._Y


def is_chunked_input(X):
    """Whether ``X`` is read chunk by chunk rather than validated as one array."""
    if isinstance(X, (str, os.PathLike, np.memmap, ChunkSource)) or sp.issparse(X):
        return True
    if isinstance(X, np.ndarray):
        return False
    if isinstance(X, (list, tuple)):
        # a list of 2-D arrays is a list of chunks; a nested list of numbers is an array
        return len(X) > 0 and hasattr(X[0], "shape") and len(X[0].shape) == 2
    if callable(X) or isinstance(X, Iterator):
        return True
    module = type(X).__module__ or ""
    return module.startswith(("h5py", "zarr"))


def as_source(X, name="X"):
    """Wrap ``X`` as a :class:`ChunkSource`.

    Parameters
    ----------
    X : str or os.PathLike, numpy.memmap, h5py/zarr dataset, scipy sparse \
matrix, list of arrays, callable or iterator of chunks, or ndarray
        A path must name a ``.npy`` file; it is read chunk by chunk, not
        loaded (by file reads, or through a memory map for Fortran order).
        A sparse matrix is read as dense chunks (:class:`SparseSource`).
        A list (or tuple) of 2-D arrays, or a callable returning a fresh
        iterator of them, can be read many times; a one-shot iterator once.
    name : str
        How errors refer to the data.

    Returns
    -------
    ChunkSource
    """
    if isinstance(X, ChunkSource):
        return X
    if isinstance(X, (str, os.PathLike)):
        path = os.fspath(X)
        if not path.endswith(".npy"):
            raise ValueError(f"{name}: a path must name a .npy file, got {path!r}")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{name}: no such file {path!r}")
        rows = NpyRows.open(path)
        if rows is not None:
            return NpyFileSource(rows, name)
        try:
            data = np.load(path, mmap_mode="r")
        except ValueError as exc:
            raise ValueError(f"{name}: {path!r} is not a readable .npy array ({exc})") from exc
        return SlicedSource(data, name)
    if isinstance(X, np.ndarray) and not isinstance(X, np.memmap):
        return ArraySource(X)
    if sp.issparse(X):
        return SparseSource(X, name)
    if isinstance(X, np.memmap) or (hasattr(X, "shape") and hasattr(X, "dtype") and hasattr(X, "__getitem__")):
        return SlicedSource(X, name)
    if isinstance(X, (list, tuple)) or callable(X) or isinstance(X, Iterable):
        return IterableSource(X, name)
    raise TypeError(f"{name}: cannot read data of type {type(X).__name__}")


def source_chunks(Y, chunk_size):
    """``(start, chunk)`` pairs of an in-memory array or a :class:`ChunkSource`."""
    if isinstance(Y, ChunkSource):
        return Y.chunks(chunk_size)
    return ((start, Y[start:stop]) for start, stop in iter_chunks(Y.shape[0], chunk_size))

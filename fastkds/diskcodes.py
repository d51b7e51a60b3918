"""Codes written to disk chunk by chunk: for 10^7+ points the codes are the
largest object, so ``KDS.transform(X, out=path)`` streams them into a folder
of three ``.npy`` files (``indptr``, ``indices``, ``data``) and returns a CSR
array memory-mapped on them.

The files are plain NumPy arrays, readable without fastkds; :func:`load_codes`
maps them back as a ``scipy.sparse.csr_array``.

An existing file is never written into: it may be mapped by an earlier
result (truncating a mapped file kills the process with SIGBUS) or be the
data being encoded. Each file is written under a temporary name in the
folder and then renamed over its final name; a map of the old file keeps
the old contents.
"""

import mmap
import os
import secrets

import numpy as np
import scipy.sparse as sp

from . import _config

#: Bytes reserved for each file's .npy header, so the final shape (unknown
#: while streaming) can be written in place at the end.
_HEADER_BYTES = 128
_NAMES = ("indptr", "indices", "data")


def _npy_header(dtype, shape):
    """A version 1.0 .npy header of exactly ``_HEADER_BYTES`` bytes."""
    text = repr({"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)})
    body_len = _HEADER_BYTES - 10  # magic (6) + version (2) + header length (2)
    text = text.ljust(body_len - 1) + "\n"
    if len(text) != body_len:
        raise ValueError(f"an array of shape {tuple(shape)} is too long for the reserved .npy header")
    return b"\x93NUMPY\x01\x00" + body_len.to_bytes(2, "little") + text.encode("latin1")


class NpyAppender:
    """A .npy file grown by appending rows, under a temporary name in the
    folder of ``path``; :meth:`close` fixes the header, :meth:`commit`
    renames it to ``path``.

    Parameters
    ----------
    path : str
        The file's final name.
    dtype : numpy dtype
    row_shape : tuple, default=()
        Shape of one row: () for a 1-D file, ``(c,)`` for an n x c one.
    """

    def __init__(self, path, dtype, row_shape=()):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.row_shape = tuple(row_shape)
        self.length = 0
        folder, base = os.path.split(path)
        self.tmp = os.path.join(folder, f".{base}.{secrets.token_hex(6)}.tmp")
        # a new file (O_EXCL), with the usual umask permissions (mode 0o666)
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        self._file = os.fdopen(fd, "wb")
        self._file.write(_npy_header(self.dtype, (0, *self.row_shape)))

    def append(self, values):
        """Write rows after those already written."""
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if values.shape[1:] != self.row_shape:
            raise ValueError(f"rows of shape {values.shape[1:]} appended to a file of rows {self.row_shape}")
        self._file.write(values.data)
        self.length += values.shape[0]

    def close(self):
        """Write the final shape into the header; the file stays under its temporary name.
        Closing again does nothing."""
        if self._file.closed:
            return
        self._file.seek(0)
        self._file.write(_npy_header(self.dtype, (self.length, *self.row_shape)))
        self._file.close()

    def commit(self):
        os.replace(self.tmp, self.path)

    def abort(self):
        self._file.close()
        try:
            os.remove(self.tmp)
        except FileNotFoundError:  # already renamed into place
            pass


class DiskCodesWriter:
    """Collects CSR triples of consecutive chunks into ``.npy`` files.

    Used like the list of parts the in-memory path collects: ``append`` one
    ``(indptr, indices, data)`` triple per chunk, then :meth:`close`.

    Parameters
    ----------
    path : str or os.PathLike
        Folder for ``indptr.npy``, ``indices.npy`` and ``data.npy``; created
        if missing. Existing files of those names are replaced by rename,
        once all the codes are written; they are never written into.
    n_atoms : int
    dtype : numpy dtype of the codes
    """

    def __init__(self, path, n_atoms, dtype):
        self.path = os.fspath(path)
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ValueError(f"out={self.path!r} exists and is not a folder")
        os.makedirs(self.path, exist_ok=True)
        self.n_atoms = n_atoms
        self._files = []
        try:
            # int64 indices like indptr: scipy would otherwise copy both to a common index type
            for name, file_dtype in zip(_NAMES, (np.int64, np.int64, dtype)):
                self._files.append(NpyAppender(os.path.join(self.path, f"{name}.npy"), file_dtype))
        except BaseException:
            self.abort()
            raise
        self._indptr, self._indices, self._data = self._files
        self._indptr.append(np.zeros(1, dtype=np.int64))
        self._nnz = 0

    def append(self, triple):
        """Add the codes of the next chunk (a CSR triple with local indptr)."""
        indptr, indices, data = triple
        self._indptr.append(indptr[1:] + self._nnz)
        self._indices.append(indices)
        self._data.append(data)
        self._nnz += indices.shape[0]

    def close(self, commit=True):
        """Finish the files and, with ``commit``, rename them into place and
        return the codes, memory-mapped.

        ``commit=False`` leaves the finished files under their temporary
        names (:attr:`temporary_paths`) for :meth:`commit`, so that a fit
        writing several results can put them all in place at the end.
        """
        try:
            for f in self._files:
                f.close()
            if not commit:
                return None
            self.commit()
        except BaseException:
            self.abort()
            raise
        return load_codes(self.path, n_atoms=self.n_atoms)

    @property
    def temporary_paths(self):
        """``{"indptr": path, "indices": ..., "data": ...}`` of the files before :meth:`commit`."""
        return {name: f.tmp for name, f in zip(_NAMES, self._files)}

    def commit(self):
        """Rename the closed files into place."""
        for f in self._files:
            f.commit()

    def abort(self):
        """Remove the temporary files (after an error); files already in place stay."""
        for f in self._files:
            f.abort()


class NpyRows:
    """Rows of a C-ordered ``.npy`` file, read by plain file reads.

    A memory map of the file would leave every page it touched resident,
    and counted in the process's memory, until it is unmapped: a pass over
    a 16 GB file would hold 16 GB. Reads into a fresh array hold one chunk;
    the pages stay in the operating system's cache, which is not the
    process's.

    Parameters
    ----------
    path : str or os.PathLike

    Attributes
    ----------
    shape : tuple
    dtype : numpy dtype

    Raises
    ------
    ValueError
        The file is not a C-ordered .npy array of numbers, or is shorter
        than its header says (:meth:`open` returns None instead).
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        # the header, read by NumPy: mapping the file touches none of its pages
        header = np.load(self.path, mmap_mode="r")
        if not isinstance(header, np.memmap) or header.ndim < 1 or header.dtype.hasobject:
            raise ValueError(f"{self.path!r} is not an array of numbers")
        if not header.flags.c_contiguous:
            raise ValueError(f"{self.path!r} is not C-ordered")
        self.shape, self.dtype, self._offset = header.shape, header.dtype, header.offset
        del header
        self._row_items = int(np.prod(self.shape[1:], dtype=np.int64))

    @classmethod
    def open(cls, path):
        """A :class:`NpyRows` of ``path``, or None where it cannot be read row by row."""
        try:
            return cls(path)
        except ValueError:
            return None

    def read(self, start, stop):
        """Rows ``start:stop`` as a new array."""
        count = (stop - start) * self._row_items
        offset = self._offset + start * self._row_items * self.dtype.itemsize
        rows = np.fromfile(self.path, dtype=self.dtype, count=count, offset=offset)
        if rows.shape[0] != count:
            raise ValueError(f"{self.path!r} changed while it was read (rows {start}-{stop} are missing)")
        return rows.reshape((stop - start, *self.shape[1:]))

    def take(self, indices):
        """Rows at sorted ``indices``, as a new array.

        Gathered through a memory map, window by window; the pages of each
        window are released once its rows are copied (``MADV_DONTNEED``), so
        a sample spread over a file larger than memory holds one window.
        """
        indices = np.asarray(indices, dtype=np.int64)
        out = np.empty((indices.shape[0], *self.shape[1:]), dtype=self.dtype)
        if indices.shape[0] == 0:
            return out
        row_bytes = max(self._row_items * self.dtype.itemsize, 1)
        window = max(_config.TAKE_WINDOW_BYTES // row_bytes, 1)
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            data = np.frombuffer(mm, dtype=self.dtype, count=self.shape[0] * self._row_items, offset=self._offset)
            data = data.reshape(self.shape)
            pos = 0
            while pos < indices.shape[0]:
                first = int(indices[pos])
                end = pos + int(np.searchsorted(indices[pos:], first + window))
                out[pos:end] = data[indices[pos:end]]
                pos = end
                if hasattr(mm, "madvise"):  # Python >= 3.8 on Unix
                    lo = (self._offset + first * row_bytes) // mmap.PAGESIZE * mmap.PAGESIZE
                    hi = min(self._offset + (int(indices[end - 1]) + 1) * row_bytes, len(mm))
                    mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            del data  # the map cannot close while an array views it
        return out


def code_chunks(paths, chunk_size):
    """CSR triples ``(indptr, indices, data)`` of consecutive row chunks of
    codes on disk (``paths`` maps ``indptr``, ``indices``, ``data`` to
    files), read by :class:`NpyRows`, with indptr local to each chunk.
    """
    indptr_rows = NpyRows(paths["indptr"])
    indices_rows, data_rows = NpyRows(paths["indices"]), NpyRows(paths["data"])
    n = indptr_rows.shape[0] - 1
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        indptr = indptr_rows.read(start, stop + 1)
        lo, hi = int(indptr[0]), int(indptr[-1])
        yield indptr - lo, indices_rows.read(lo, hi), data_rows.read(lo, hi)


def _input_file(X):
    """The file ``X`` is read from (a path, a memmap or a view of one, an
    h5py dataset), or None."""
    if isinstance(X, (str, os.PathLike)):
        return os.fspath(X)
    base = X
    while isinstance(base, np.ndarray):
        if isinstance(base, np.memmap) and base.filename is not None:
            return base.filename
        base = base.base
    if (type(X).__module__ or "").startswith("h5py"):
        return getattr(getattr(X, "file", None), "filename", None)
    return None


def check_out_folder(out, X):
    """Refuse ``out`` when it holds the file the data ``X`` are read from.

    The codes' files would replace a file of the same name, and the input
    must never change; a folder that holds the input is refused whatever
    its name, before any encoding.

    Raises
    ------
    ValueError
        ``out`` is the folder of the input file.
    """
    out = os.fspath(out)
    source = _input_file(X)
    if source is None or not os.path.isdir(out):
        return
    folder = os.path.dirname(os.path.abspath(source))
    if os.path.isdir(folder) and os.path.samefile(folder, out):
        raise ValueError(
            f"out={out!r} holds the input file {source!r}: the codes' files could replace it; "
            "write the codes to another folder"
        )


def load_codes(path, n_atoms=None):
    """Codes written by ``transform(..., out=path)``, memory-mapped.

    Parameters
    ----------
    path : str or os.PathLike
        The folder given as ``out``.
    n_atoms : int or None
        Number of columns; by default one more than the largest atom index.

    Returns
    -------
    codes : scipy.sparse.csr_array
        Backed by read-only memory maps of the files.
    """
    path = os.fspath(path)
    arrays = {}
    for name in _NAMES:
        file = os.path.join(path, f"{name}.npy")
        if not os.path.exists(file):
            raise FileNotFoundError(f"no codes at {path!r}: {name}.npy is missing")
        arrays[name] = np.load(file, mmap_mode="r")
    indptr, indices, data = arrays["indptr"], arrays["indices"], arrays["data"]
    if indptr.shape[0] < 1 or indptr[-1] != indices.shape[0] or indices.shape[0] != data.shape[0]:
        raise ValueError(f"codes at {path!r} are inconsistent (indptr, indices and data disagree)")
    if n_atoms is None:
        n_atoms = int(indices.max()) + 1 if indices.shape[0] else 0
    return sp.csr_array((data, indices, indptr), shape=(indptr.shape[0] - 1, n_atoms), copy=False)

"""Codes written to disk chunk by chunk: for 10^7+ points the codes are the
largest object, so ``KDS.transform(X, out=path)`` streams them into a folder
of three ``.npy`` files (``indptr``, ``indices``, ``data``) and returns a CSR
array memory-mapped on them.

The files are plain NumPy arrays, readable without fastkds; :func:`load_codes`
maps them back as a ``scipy.sparse.csr_array``.
"""

import os

import numpy as np
import scipy.sparse as sp

#: Bytes reserved for each file's .npy header, so the final shape (unknown
#: while streaming) can be written in place at the end.
_HEADER_BYTES = 128
_NAMES = ("indptr", "indices", "data")


def _npy_header(dtype, length):
    """A version 1.0 .npy header of exactly ``_HEADER_BYTES`` bytes."""
    text = repr({"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (length,)})
    body_len = _HEADER_BYTES - 10  # magic (6) + version (2) + header length (2)
    text = text.ljust(body_len - 1) + "\n"
    if len(text) != body_len:
        raise ValueError(f"array of {length} entries is too long for the reserved .npy header")
    return b"\x93NUMPY\x01\x00" + body_len.to_bytes(2, "little") + text.encode("latin1")


class _NpyAppender:
    """A 1-D .npy file grown by appending; the header is fixed on close."""

    def __init__(self, path, dtype):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.length = 0
        self._file = open(path, "wb")
        self._file.write(_npy_header(self.dtype, 0))

    def append(self, values):
        values = np.ascontiguousarray(values, dtype=self.dtype)
        self._file.write(values.data)
        self.length += values.shape[0]

    def close(self):
        self._file.seek(0)
        self._file.write(_npy_header(self.dtype, self.length))
        self._file.close()

    def abort(self):
        self._file.close()
        os.remove(self.path)


class DiskCodesWriter:
    """Collects CSR triples of consecutive chunks into ``.npy`` files.

    Used like the list of parts the in-memory path collects: ``append`` one
    ``(indptr, indices, data)`` triple per chunk, then :meth:`close`.

    Parameters
    ----------
    path : str or os.PathLike
        Folder for ``indptr.npy``, ``indices.npy`` and ``data.npy``; created
        if missing. Existing files of those names are replaced.
    n_atoms : int
    dtype : numpy dtype of the codes
    """

    def __init__(self, path, n_atoms, dtype):
        self.path = os.fspath(path)
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ValueError(f"out={self.path!r} exists and is not a folder")
        os.makedirs(self.path, exist_ok=True)
        self.n_atoms = n_atoms
        self._indptr = _NpyAppender(os.path.join(self.path, "indptr.npy"), np.int64)
        # int64 like indptr: scipy would otherwise copy both to a common index type
        self._indices = _NpyAppender(os.path.join(self.path, "indices.npy"), np.int64)
        self._data = _NpyAppender(os.path.join(self.path, "data.npy"), dtype)
        self._indptr.append(np.zeros(1, dtype=np.int64))
        self._nnz = 0

    def append(self, triple):
        """Add the codes of the next chunk (a CSR triple with local indptr)."""
        indptr, indices, data = triple
        self._indptr.append(indptr[1:] + self._nnz)
        self._indices.append(indices)
        self._data.append(data)
        self._nnz += indices.shape[0]

    def close(self):
        """Finish the files and return the codes, memory-mapped."""
        for f in (self._indptr, self._indices, self._data):
            f.close()
        return load_codes(self.path, n_atoms=self.n_atoms)

    def abort(self):
        """Remove the partial files (after an error)."""
        for f in (self._indptr, self._indices, self._data):
            f.abort()


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

"""Numba CPU kernels of the CUDA path's host side: parallel copies between
host arrays, where one thread would not keep up with the GPU.

:func:`copy_flat` stages each chunk of data into pinned memory (the copy to
the device is then asynchronous), :func:`copy_shifted` the same less the
centred step's shift; :func:`place_csr_chunk` writes a chunk's
CSR arrays, back from the device, into the final arrays. Compiled code, so it
sits below :mod:`fastkds.gpu` with the other kernels and imports only Numba.
"""

from numba import njit, prange

#: Elements per work item (fixed: any thread count gives the same result, and
#: each item is long enough to stream memory). A compile-time constant of the
#: kernels below, not a setting of _config: numba freezes a global into the
#: code it compiles and caches.
COPY_BLOCK = 1 << 16


@njit(parallel=True, cache=True)
def copy_flat(dst, src):
    """``dst[:] = src`` for 1-D arrays, in parallel (pinned staging of Y)."""
    n = src.shape[0]
    for blk in prange((n + COPY_BLOCK - 1) // COPY_BLOCK):
        lo = blk * COPY_BLOCK
        hi = min(lo + COPY_BLOCK, n)
        for e in range(lo, hi):
            dst[e] = src[e]


@njit(parallel=True, cache=True)
def copy_shifted(dst, src, shift):
    """``dst[:] = src - shift`` for (n, d) arrays and a (d,) ``shift``, in
    parallel (pinned staging of Y for the centred step: one pass where a
    copy and NumPy's subtraction on one thread made two)."""
    n, d = src.shape
    rows = max(1, COPY_BLOCK // max(d, 1))
    for blk in prange((n + rows - 1) // rows):
        lo = blk * rows
        hi = min(lo + rows, n)
        for i in range(lo, hi):
            for k in range(d):
                dst[i, k] = src[i, k] - shift[k]


@njit(parallel=True, cache=True)
def place_csr_chunk(c_indptr, c_indices, c_data, n, nnz, row0, base, indptr, indices, data):
    """Write a chunk's CSR arrays (rows ``row0..row0+n-1``, entries from
    ``base`` on) into the final arrays: ``indptr`` shifted by ``base``,
    ``indices`` and ``data`` copied. In parallel: first touch of the final
    arrays' pages is part of the cost."""
    for blk in prange((n + COPY_BLOCK - 1) // COPY_BLOCK):
        lo = blk * COPY_BLOCK
        hi = min(lo + COPY_BLOCK, n)
        for i in range(lo, hi):
            indptr[row0 + 1 + i] = c_indptr[i + 1] + base
    for blk in prange((nnz + COPY_BLOCK - 1) // COPY_BLOCK):
        lo = blk * COPY_BLOCK
        hi = min(lo + COPY_BLOCK, nnz)
        for p in range(lo, hi):
            indices[base + p] = c_indices[p]
            data[base + p] = c_data[p]

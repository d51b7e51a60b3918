"""Optional numba.cuda path: the encoder, CSR assembly and sufficient statistics
on an NVIDIA GPU.

Importing :mod:`fastkds` never imports this module; ``import fastkds.gpu``
imports :mod:`numba.cuda`, which works without a GPU. Every entry point that
touches the device calls :func:`require_cuda` first, so the error without a
GPU is a clear RuntimeError rather than a driver traceback. The CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported) runs the same
kernels on the CPU, one Python thread per CUDA thread: slow, for tests only.

This module is the host side: availability checks, launch configurations,
device and pinned buffers, streams and the pipelines that run the kernels of
:mod:`fastkds._cuda_kernels` (the device code, the simulator's stand-ins for
the warp primitives, and how threads map to work). Results match the CPU
kernels to rounding, not bitwise (see there).

Streaming: each chunk goes through pinned host buffers on its buffer set's own
CUDA stream: data in, encoder, scan, fill and ``indptr`` back are queued at
once; the host then waits for that chunk's total, copies ``indices`` and
``data`` back and writes them, with ``indptr`` shifted by the rows and
entries before the chunk, straight into the final arrays (a parallel Numba
copy on the host). :func:`encode_csr_cuda` keeps ``_config.CUDA_BUFFER_SETS`` sets, so
while the host places one chunk the GPU encodes the next ones.
"""

import threading
import warnings
from collections import deque

import numpy as np
import scipy.sparse as sp

import numba
from numba import cuda

from . import _config
from ._cuda_kernels import (
    PRODUCT_THREADS,
    PRODUCT_TILE,
    SCAN_MAX_THREADS,
    WARP_MAX_ATOMS,
    bt_kernel,
    encode_kernel,
    fill_kernel,
    may_use_far_kernel,
    merge_near_kernel,
    products_kernel,
    scan_add_kernel,
    scan_offsets_kernel,
    scan_tiles_kernel,
    sqnorm_kernel,
    stats_partial_kernel,
    stats_reduce_kernel,
    vote_kernel,
    warp_active_set_kernel,
    warp_encode_kernel,
)
from ._host_copies import copy_flat, copy_shifted, place_csr_chunk
from ._validation import check_choice, read_only
from .prepared import ENCODERS, PreparedDictionary, csr_from_dense
from .sources import iter_chunks

KERNELS = ("auto", "warp", "thread")

#: CUDA's most blocks along a grid's y (the product kernel's row tiles).
_GRID_Y_MAX = 65535


# --------------------------------------------------------------------------
# Availability
# --------------------------------------------------------------------------


def in_simulator():
    """Whether numba runs CUDA kernels in its simulator (NUMBA_ENABLE_CUDASIM=1)."""
    return bool(numba.config.ENABLE_CUDASIM)


#: numba-cuda releases up to this one register an overload of np.row_stack
#: when they compile a kernel, so they cannot compile under NumPy >= 2.5,
#: which removed that alias (NVIDIA/numba-cuda#907, not to be fixed there).
_ROW_STACK_NUMBA_CUDA = (0, 30)


def numpy_incompatibility():
    """Why the installed numba-cuda cannot compile kernels with this NumPy,
    or None. fastkds does not patch NumPy to work around it: a library must
    not change NumPy for its users.

    Returns
    -------
    str or None
    """
    if hasattr(np, "row_stack") or in_simulator():
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("numba-cuda")
    except PackageNotFoundError:  # numba's own numba.cuda guards the overload
        return None
    parts = tuple(int(p) for p in installed.split(".")[:2] if p.isdigit())
    if parts > _ROW_STACK_NUMBA_CUDA:
        return None
    return (
        f"numba-cuda {installed} cannot compile kernels with NumPy {np.__version__} (it needs np.row_stack, "
        "removed in NumPy 2.5); install numpy<2.5, as `pip install fastkds[gpu]` does"
    )


def cuda_available():
    """Whether CUDA kernels can run here: a usable GPU, or the simulator,
    and a numba-cuda that can compile with the installed NumPy.

    Returns
    -------
    bool
    """
    if in_simulator():
        return True
    if numpy_incompatibility():
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install can raise instead of answering
        return False


def require_cuda():
    """Raise a clear RuntimeError unless CUDA kernels can run here.

    Raises
    ------
    RuntimeError
        ``"numba.cuda reports no CUDA driver/GPU: <reason>"`` when there is no
        usable GPU and the simulator is off.
    """
    if cuda_available():
        return
    clash = numpy_incompatibility()
    if clash:
        raise RuntimeError(clash)
    try:
        reason = cuda.cuda_error()
    except Exception as exc:  # pragma: no cover - depends on the install
        reason = exc
    reason = " ".join(str(reason).split()) if reason else "cuda.is_available() is False"
    raise RuntimeError(
        f"numba.cuda reports no CUDA driver/GPU: {reason} "
        "(install an NVIDIA driver and numba-cuda, or set NUMBA_ENABLE_CUDASIM=1 "
        "before importing numba to run the kernels in the simulator)"
    )


#: numba.cuda's warning for a grid of fewer than 128 blocks. Launches here are
#: sized to their work (a chunk's scan tiles, one block per reduction), so a
#: small grid is intended, and the warning would reach the user's console
#: dozens of times a fit.
#: numba-cuda 0.30 may wrap the text in a terminal's bold codes (seen on an
#: H200): the filter matches it anywhere in the message.
_LOW_OCCUPANCY = r".*Grid size \d+ will likely result in GPU under-utilization"


def _configured(kernel, blocks, threads, stream):
    """``kernel[blocks, threads, stream]``, without numba.cuda's low-occupancy
    warning (matched by its text, which does not depend on where numba-cuda
    defines the warning's class). The warning filter is process-wide while
    it is in place, for the few microseconds of the configuration."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LOW_OCCUPANCY)
        return kernel[blocks, threads, stream]


def _grid(work, threads=None):
    """``(blocks, threads)`` for ``work`` items in a grid-stride kernel. Small
    work gets small blocks (whole warps): that costs nothing on a GPU and
    keeps the simulator from starting hundreds of idle Python threads."""
    threads = min(threads or _config.CUDA_THREADS, max(32, -(-work // 32) * 32))
    return max(1, min(_config.CUDA_MAX_BLOCKS, -(-work // threads))), threads


def _launch(kernel, work, stream, threads=None):
    """``kernel`` configured for ``work`` items on ``stream`` (:func:`_grid`)."""
    return _configured(kernel, *_grid(work, threads), stream)


# --------------------------------------------------------------------------
# Host: the device prefix sum (CSR indptr)
# --------------------------------------------------------------------------


def _pow2_at_least(k):
    p = 32
    while p < k:
        p *= 2
    return p


def _scan_on_device(d_counts, n, d_out, d_tiles, stream, threads=None, items=None):
    """Queue ``d_out[:n + 1] = [0, cumsum(d_counts[:n])]`` on ``stream``.

    ``d_tiles`` (int64) needs ``ceil(n / (threads * items))`` entries; with
    the defaults at most ``ceil(n / (32 * CUDA_SCAN_ITEMS))``. Small inputs get
    small blocks (whole warps).
    """
    items = int(items or _config.CUDA_SCAN_ITEMS)
    threads = min(int(threads or _config.CUDA_SCAN_THREADS), _pow2_at_least(-(-n // items)), SCAN_MAX_THREADS)
    tile = threads * items
    n_tiles = -(-n // tile)
    _configured(scan_tiles_kernel, min(n_tiles, _config.CUDA_MAX_BLOCKS), threads, stream)(
        d_counts, n, items, d_out, d_tiles
    )
    _configured(scan_offsets_kernel, 1, min(_config.CUDA_SCAN_THREADS, _pow2_at_least(n_tiles)), stream)(
        d_tiles, n_tiles
    )
    _launch(scan_add_kernel, n, stream)(d_out, n, tile, d_tiles)


def indptr_cuda(counts, *, threads=None, items=None):
    """Exclusive prefix sum of row counts on the GPU: a CSR ``indptr``.

    The scan the CUDA pipeline runs on the device, for tests and reuse.

    Parameters
    ----------
    counts : array-like of int, shape (n,)
        Non-negative counts (int32 or int64).
    threads, items : int or None
        Threads per block (at most 1024) and rows per thread; by default
        ``_config.CUDA_SCAN_THREADS`` and ``_config.CUDA_SCAN_ITEMS``.

    Returns
    -------
    indptr : ndarray of int64, shape (n + 1,)
        ``[0, counts[0], counts[0] + counts[1], ...]``.
    """
    require_cuda()
    counts = np.ascontiguousarray(counts)
    if counts.ndim != 1 or counts.dtype.kind not in "iu":
        raise ValueError(f"counts must be a 1-D integer array, got {counts.dtype} {counts.shape}")
    n = counts.shape[0]
    out = np.zeros(n + 1, dtype=np.int64)
    if n == 0:
        return out
    stream = cuda.stream()
    items = int(items or _config.CUDA_SCAN_ITEMS)
    if threads is not None and not 1 <= int(threads) <= SCAN_MAX_THREADS:
        raise ValueError(f"threads must be in 1..{SCAN_MAX_THREADS}, got {threads}")
    d_counts = cuda.to_device(counts, stream=stream)
    d_out = cuda.to_device(out, stream=stream)
    smallest = min(int(threads or 32), 32)  # the most tiles any block size here gives
    d_tiles = cuda.device_array(-(-n // (smallest * items)) + 1, dtype=np.int64, stream=stream)
    _scan_on_device(d_counts, n, d_out, d_tiles, stream, threads, items)
    d_out.copy_to_host(out, stream=stream)
    stream.synchronize()
    return out


# --------------------------------------------------------------------------
# Host: sufficient statistics in float64
# --------------------------------------------------------------------------


class _StatsWorkspace:
    """Device partials (n_parts, m, m + 1 + d) and the float64 running total
    ``X^T [X | 1 | Y]`` (m x (m + 1 + d))."""

    def __init__(self, n_atoms, n_features, max_rows, stream):
        self.m = n_atoms
        self.d = n_features
        ncol = n_atoms + 1 + n_features
        per_part = 8 * n_atoms * ncol
        # read once: part boundaries must not move while the total is summed
        self.rows_per_part = _config.CUDA_STATS_ROWS
        # parts that fit the budget, but never more than max_rows needs
        self.max_parts = max(1, min(-(-max_rows // self.rows_per_part), _config.CUDA_PARTIALS_BUDGET // per_part))
        self.stream = stream
        self.P = cuda.device_array((self.max_parts, n_atoms, ncol), dtype=np.float64, stream=stream)
        self.out = cuda.to_device(np.zeros((n_atoms, ncol)), stream=stream)

    @property
    def max_rows(self):
        """Rows one :meth:`add` call takes at most (whole parts)."""
        return self.max_parts * self.rows_per_part

    def add(self, d_indptr, d_indices, d_data, d_Y, n, stream):
        """Add rows 0..n-1 of device CSR arrays and device ``Y`` to the total.

        Rows go through in slices of :attr:`max_rows` (whole parts, so part
        boundaries do not move). ``indptr`` holds offsets into
        ``indices``/``data``, so a slice of it needs no rebasing. Launched on
        ``stream``.
        """
        ncol = self.out.shape[1]
        for lo in range(0, n, self.max_rows):
            hi = min(lo + self.max_rows, n)
            n_parts = -(-(hi - lo) // self.rows_per_part)
            _launch(stats_partial_kernel, n_parts * ncol, stream)(
                d_indptr[lo : hi + 1], d_indices, d_data, d_Y[lo:hi], hi - lo, self.rows_per_part, self.P
            )
            _launch(stats_reduce_kernel, self.m * ncol, stream)(self.P, n_parts, self.out)

    def result(self, stream):
        """Copy the total to the host: ``(XtX, s, XtY)``, float64."""
        out = self.out.copy_to_host(stream=stream)
        stream.synchronize()
        m = self.m
        return (
            np.ascontiguousarray(out[:, :m]),
            np.ascontiguousarray(out[:, m]),
            np.ascontiguousarray(out[:, m + 1 :]),
        )


# --------------------------------------------------------------------------
# Host side: prepared dictionary, buffers, streaming
# --------------------------------------------------------------------------


def _free_device_memory():
    """Free bytes on the current device, or None where it cannot be read (simulator)."""
    try:
        return int(cuda.current_context().get_memory_info()[0])
    except Exception:
        return None


def default_chunk_size_cuda(n_features, n_atoms, itemsize, budget=None):
    """Rows per GPU chunk so that one buffer set fits ``budget`` bytes.

    A row needs its data (d), ``B`` and the dense codes (2 m), ``||y||^2``,
    the objective, the count and indptr, and room for m CSR entries (the
    device's CSR arrays are sized for the worst case, so the whole chunk is
    queued without waiting for its total). Larger chunks than on the CPU:
    each launch should fill the GPU. By default the budget is
    ``_config.CUDA_CHUNK_BUDGET``, or a twelfth of the free device memory when that is
    less (``_config.CUDA_BUFFER_SETS`` buffer sets, the encoder's scratch and the
    statistics' partials share the device).

    Returns
    -------
    int
    """
    if budget is None:
        free = _free_device_memory()
        budget = _config.CUDA_CHUNK_BUDGET if free is None else min(_config.CUDA_CHUNK_BUDGET, free // 12)
    per_row = (n_features + 2 * n_atoms + 2) * itemsize + 16 + n_atoms * (4 + itemsize)
    return int(min(1 << 21, max(1 << 12, budget // per_row)))


def _index_dtype(n_rows, n_atoms):
    """int32 while every possible entry count fits it, as on the CPU."""
    return np.int32 if n_rows * n_atoms < 2**31 else np.int64


class CudaBuffers:
    """Device and pinned host buffers for chunks of up to ``capacity`` rows,
    with their own CUDA stream. Made by :meth:`CudaPreparedDictionary.allocate`.

    Attributes
    ----------
    capacity : int
        Most rows per chunk.
    n_slots : int
        Thread encoder's scratch columns: the most threads one launch uses
        (allocated on its first use; the warp encoder needs none).
    stream : numba.cuda stream
        All work on these buffers is queued here, so buffer sets overlap.
    """

    def __init__(self, capacity, n_atoms, n_features, dtype, n_slots, share=None):
        self.capacity = capacity
        self.n_slots = n_slots
        self.dtype = dtype
        self.n_atoms = n_atoms
        m, d = n_atoms, n_features
        self._thread = None  # Bt, yy and scratch of the thread encoder, on first use
        self._h_X = None  # dense codes on the host: only encode_dense needs them
        self._handed = None  # the active-set encoder's hand-over flags
        self._products = None  # B and yy of the warp encoders' products variant
        #: the near atoms' buffers, with far atoms (see CudaPreparedDictionary.near)
        self.near = None
        if share is not None:
            # the near atoms' encoder: the rows and the stream of ``share``,
            # its own codes, objectives and support sizes
            s = self.stream = share.stream
            self.d_Y = share.d_Y
            self.d_X = cuda.device_array((capacity, m), dtype=dtype, stream=s)
            self.d_obj = cuda.device_array(capacity, dtype=dtype, stream=s)
            self.d_counts = cuda.device_array(capacity, dtype=np.int32, stream=s)
            return
        s = self.stream = cuda.stream()
        self.h_Y = cuda.pinned_array((capacity, d), dtype=dtype)
        self.d_Y = cuda.device_array((capacity, d), dtype=dtype, stream=s)
        self.d_X = cuda.device_array((capacity, m), dtype=dtype, stream=s)
        self.d_obj = cuda.device_array(capacity, dtype=dtype, stream=s)
        self.h_obj = cuda.pinned_array(capacity, dtype=dtype)
        self.d_counts = cuda.device_array(capacity, dtype=np.int32, stream=s)
        # chunk-local CSR on the device, sized for the worst case (m per row)
        idx = _index_dtype(capacity, m)
        self.d_indptr = cuda.device_array(capacity + 1, dtype=idx, stream=s)
        self.h_indptr = cuda.pinned_array(capacity + 1, dtype=idx)
        self.d_tiles = cuda.device_array(-(-capacity // (32 * _config.CUDA_SCAN_ITEMS)) + 1, dtype=np.int64, stream=s)
        self.d_indices = cuda.device_array(max(1, capacity * m), dtype=np.int32, stream=s)
        self.d_data = cuda.device_array(max(1, capacity * m), dtype=dtype, stream=s)
        self._nnz_cap = 0
        self._grow_host(capacity * min(m, 4))

    @property
    def h_X(self):
        if self._h_X is None:
            self._h_X = cuda.pinned_array(self.d_X.shape, dtype=self.dtype)
        return self._h_X

    @property
    def d_handed(self):
        """The rows the active-set encoder hands to the accelerated one
        (int32 flags, made on first use)."""
        if self._handed is None:
            self._handed = cuda.device_array(self.capacity, dtype=np.int32, stream=self.stream)
        return self._handed

    def products_buffers(self, n_columns):
        """``(B, yy)``: ``Y W^T`` (capacity x ``n_columns``, the padded atoms)
        and the squared norms of the rows, for the warp encoders that read
        them (made on first use: every dictionary these buffers serve has
        their atom count, so the same padded columns)."""
        if self._products is None:
            s = self.stream
            self._products = (
                cuda.device_array((self.capacity, n_columns), dtype=self.dtype, stream=s),
                cuda.device_array(self.capacity, dtype=self.dtype, stream=s),
            )
        return self._products

    def thread_buffers(self):
        """``(Bt, yy, scratch, iscratch)`` of the thread encoder."""
        if self._thread is None:
            m, cap, ns, s = self.n_atoms, self.capacity, self.n_slots, self.stream
            self._thread = (
                cuda.device_array((m, cap), dtype=self.dtype, stream=s),
                cuda.device_array(cap, dtype=self.dtype, stream=s),
                # per-thread scratch, one column per slot (see encode_kernel)
                tuple(cuda.device_array((m, ns), dtype=self.dtype, stream=s) for _ in range(5)),
                (
                    cuda.device_array((m, ns), dtype=np.int32, stream=s),  # cand
                    cuda.device_array((2 * m, ns), dtype=np.int32, stream=s),  # zidx
                    cuda.device_array((m, ns), dtype=np.int32, stream=s),  # xs
                ),
            )
        return self._thread

    def for_near(self, near):
        """The buffers of the near atoms' encoder ``near`` (see
        :attr:`CudaPreparedDictionary.near`), sharing these rows and stream:
        made on first use, and again when its atom count differs, since one
        buffer set serves every dictionary of the same shape (the epochs of
        a fit) and their near atoms differ."""
        if self.near is None or self.near.n_atoms != near.n_atoms:
            self.near = CudaBuffers(self.capacity, near.n_atoms, near.n_features, near.dtype, self.n_slots, share=self)
            self.d_uses_far = cuda.device_array(self.capacity, dtype=np.int32, stream=self.stream)
        return self.near

    def _grow_host(self, nnz):
        """Make room for ``nnz`` CSR entries in the pinned host buffers, with slack."""
        if nnz <= self._nnz_cap:
            return
        cap = max(nnz, int(1.5 * self._nnz_cap))
        self.h_indices = cuda.pinned_array(cap, dtype=np.int32)
        self.h_data = cuda.pinned_array(cap, dtype=self.dtype)
        self._nnz_cap = cap


def _resolve_kernel(kernel, n_atoms, encoder="apg"):
    check_choice(kernel, "kernel", KERNELS)
    if encoder == "active-set":  # written for warps alone
        if kernel == "thread":
            raise ValueError('encoder="active-set" runs on the warp kernel only: pass kernel="warp" or "auto"')
        kernel = "warp"
    if kernel == "auto":
        return "warp" if _config.CUDA_WARP_MIN_ATOMS <= n_atoms <= WARP_MAX_ATOMS else "thread"
    if kernel == "warp" and n_atoms > WARP_MAX_ATOMS:
        raise ValueError(f'kernel="warp" takes at most {WARP_MAX_ATOMS} atoms, got {n_atoms}: use "thread"')
    return kernel


class CudaPreparedDictionary:
    """A dictionary prepared for the CUDA encoder; mirrors
    :class:`fastkds.prepared.PreparedDictionary`.

    The host-side quantities (the step ``alpha``, ``G = W W^T``,
    its diagonal, the momentum and the typed constants) are computed exactly
    as on the CPU, by a :class:`PreparedDictionary`, and copied to the device
    once.

    Parameters
    ----------
    W, lam, n_iter, dtype, step
        As for :class:`~fastkds.prepared.PreparedDictionary`.
    encoder : {"apg", "active-set"}, default="apg"
        As for :class:`~fastkds.prepared.PreparedDictionary`: ``n_iter``
        steps of accelerated projected gradient, or the exact codes by the
        CPU's active-set method, one point per warp
        (:func:`fastkds._cuda_kernels.warp_active_set_kernel`), which hands
        its degenerate points to the accelerated encoder. The exact codes
        need no far-atom split (:attr:`near` is then None).
    kernel : {"auto", "warp", "thread"}, default="auto"
        Encoder: one point per warp or one point per thread. "auto" takes the
        warp encoder from ``_config.CUDA_WARP_MIN_ATOMS`` up to
        :data:`WARP_MAX_ATOMS` atoms (its limit), the thread encoder otherwise;
        the active set runs on warps whatever the atom count.
    threads_per_block : int or None
        Thread encoder's block size; by default ``_config.CUDA_ENCODE_THREADS``.
    scratch_budget : int or None
        Bytes of device memory for the thread encoder's per-thread scratch;
        bounds its threads (slots) per launch. By default
        ``_config.CUDA_SCRATCH_BUDGET``.
    warps_per_block : int or None
        Warp encoder's block size in warps; by default
        ``_config.CUDA_WARPS_PER_BLOCK``.
    max_warps : int or None
        Warp encoder's warps per launch (each then encodes several points);
        by default one per point, up to ``_config.CUDA_MAX_BLOCKS`` blocks.
    products : bool or None
        Warp encoders: form ``B = Y W^T`` of each chunk first, by a tiled
        product in shared memory (:func:`fastkds._cuda_kernels.products_kernel`),
        and read it (True), or form each point's products inside the encoder,
        re-reading ``W^T`` for every point (False). The codes are the same
        bits either way. By default True from
        ``_config.CUDA_PRODUCTS_MIN_FEATURES`` features on.

    Raises
    ------
    RuntimeError
        Without a usable GPU (and the simulator off); see :func:`require_cuda`.
    ValueError
        For an unknown ``kernel`` or ``encoder``, and for the active set on
        ``kernel="thread"``.
    """

    def __init__(
        self, W, lam, n_iter, dtype, *, step="centred", encoder="apg", kernel="auto", threads_per_block=None,
        scratch_budget=None, warps_per_block=None, max_warps=None, products=None,
    ):  # fmt: skip
        require_cuda()
        encoder = check_choice(encoder, "encoder", ENCODERS)
        host = PreparedDictionary(W, lam, n_iter, dtype, step)
        settings = dict(
            encoder=encoder, kernel=kernel, threads_per_block=threads_per_block, scratch_budget=scratch_budget,
            warps_per_block=warps_per_block, max_warps=max_warps, products=products,
        )  # fmt: skip
        self._upload(host, host, **settings)
        #: With far atoms (:attr:`PreparedDictionary.near`) and the accelerated
        #: encoder, the encoder of the near atoms at their own step (a
        #: CudaPreparedDictionary), or None. Every chunk is then encoded by
        #: both, and the points that cannot use a far atom take the near
        #: atoms' codes, as on the CPU.
        self.near = None
        if host.near is not None and encoder == "apg":
            near = host.near
            self.near = CudaPreparedDictionary.__new__(CudaPreparedDictionary)
            self.near._upload(host, near, **settings)
            self.near.near = None
            self.screening_ratio, self.screening_slack = host.screening_ratio, host.screening_slack
            self.d_near_index = cuda.to_device(near.index)
            self.d_far_index = cuda.to_device(near.far.astype(np.int32))
            self.d_atoms = cuda.to_device(host.W)
            self.d_atoms_ww = cuda.to_device(host.ww)

    def _upload(
        self, host, atoms, *, encoder, kernel, threads_per_block, scratch_budget, warps_per_block, max_warps, products,
    ):  # fmt: skip
        """Take the encoder's settings from ``host`` (a PreparedDictionary)
        and the atoms' arrays and step from ``atoms`` (``host`` itself, or
        ``host.near``, as the CPU's ``_encode_apg`` does), and copy what the
        kernels read to the device."""
        self.dtype = host.dtype
        self.alpha_value = atoms.alpha_value
        self.W, self.G, self.ww = atoms.W, atoms.G, atoms.ww
        # subtracted from each chunk on its way in (see _submit); the near
        # atoms' encoder reads the rows already shifted
        self.shift = host.shift if atoms is host else None
        self.alpha, self.lam, self.beta, self.ks = atoms.alpha, host.lam, host.beta, atoms.ks
        self.encoder = encoder
        self.kernel = _resolve_kernel(kernel, self.n_atoms, encoder)
        self.threads_per_block = int(_config.CUDA_ENCODE_THREADS if threads_per_block is None else threads_per_block)
        self.scratch_budget = int(_config.CUDA_SCRATCH_BUDGET if scratch_budget is None else scratch_budget)
        wpb = _config.CUDA_WARPS_PER_BLOCK if warps_per_block is None else warps_per_block
        self.warps_per_block = max(1, min(32, int(wpb)))
        self.max_warps = None if max_warps is None else max(1, int(max_warps))
        self.d_beta = cuda.to_device(self.beta)
        self.d_ks = cuda.to_device(self.ks)
        if self.kernel == "warp":
            # atoms padded to 32 R with zeros: every lane reads in bounds
            m, d = self.W.shape
            self.R = max(1, -(-m // 32))
            mp = 32 * self.R
            Wt = np.zeros((d, mp), dtype=self.dtype)
            Wt[:, :m] = self.W.T
            Gp = np.zeros((mp, mp), dtype=self.dtype)
            Gp[:m, :m] = self.G
            wwp = np.zeros(mp, dtype=self.dtype)
            wwp[:m] = self.ww
            self.d_Wt, self.d_Gp, self.d_wwp = cuda.to_device(Wt), cuda.to_device(Gp), cuda.to_device(wwp)
            self.neg_inf = self.dtype.type(-np.inf)
            self.d_every_row = cuda.device_array(0, dtype=np.int32)  # the accelerated encoder's "no mask"
            if products is None:
                products = d >= _config.CUDA_PRODUCTS_MIN_FEATURES
            self.products = bool(products)
            # what the encoders without products get for B and yy
            self.d_no_products = (cuda.device_array((0, 0), dtype=self.dtype), cuda.device_array(0, dtype=self.dtype))
        else:
            self.products = False  # the thread encoder has its own product kernel
            self.d_W = cuda.to_device(self.W)
            self.d_G = cuda.to_device(self.G)
            self.d_ww = cuda.to_device(self.ww)

    @property
    def n_atoms(self):
        return self.W.shape[0]

    @property
    def n_features(self):
        return self.W.shape[1]

    def allocate(self, chunk_size, *, n_slots=None):
        """Buffers for chunks of up to ``chunk_size`` rows.

        Parameters
        ----------
        chunk_size : int
        n_slots : int or None
            Thread encoder's threads per launch (scratch columns). By default
            one per row, capped by ``scratch_budget``; a smaller value makes
            each thread encode several points (grid-stride loop).

        Returns
        -------
        CudaBuffers
        """
        chunk_size = max(1, int(chunk_size))
        buffers = CudaBuffers(chunk_size, self.n_atoms, self.n_features, self.dtype, self._slots(chunk_size, n_slots))
        if self.near is not None:
            buffers.for_near(self.near)
        return buffers

    def _slots(self, chunk_size, n_slots):
        """The thread encoder's scratch columns (see :meth:`allocate`)."""
        if n_slots is None:
            tpb = self.threads_per_block
            per_slot = self.n_atoms * (5 * self.dtype.itemsize + 4 * 4)  # 5 float vectors, 4 m of int32
            by_budget = max(tpb, (self.scratch_budget // per_slot) // tpb * tpb)
            n_slots = min(-(-chunk_size // tpb) * tpb, by_budget)
        return max(1, int(n_slots))

    def _check_chunk(self, Y, buffers):
        """``Y`` checked as :func:`_check_data` does, and against the buffers' capacity."""
        Y = _check_data(Y, self)
        if Y.shape[0] > buffers.capacity:
            raise ValueError(f"chunk of {Y.shape[0]} rows exceeds the buffers' {buffers.capacity}")
        return Y

    def _encode_on_device(self, buf, n):
        """Queue the encoder on rows 0..n-1 of ``buf.d_Y``: ``buf.d_X``,
        ``buf.d_obj`` and ``buf.d_counts``. With far atoms, the near atoms'
        encoder runs on the same rows, and the rows that cannot use a far
        atom take its results."""
        self._encode_rows(buf, n)
        if self.near is None or n == 0:
            return
        s = buf.stream
        self.near._encode_rows(buf.for_near(self.near), n)
        _launch(may_use_far_kernel, n, s)(
            buf.d_Y, self.d_atoms, self.d_atoms_ww, self.d_far_index,
            self.screening_ratio, self.screening_slack, n, buf.d_uses_far,
        )  # fmt: skip
        _launch(merge_near_kernel, n, s)(
            buf.d_X, buf.d_obj, buf.d_counts, buf.near.d_X, buf.near.d_obj, buf.near.d_counts,
            self.d_near_index, buf.d_uses_far, n,
        )  # fmt: skip

    def _products_on_device(self, buf, n):
        """Queue ``B = Y W^T`` (padded atoms) and ``||y||^2`` of rows
        0..n-1 of ``buf.d_Y``; returns the two device arrays."""
        s = buf.stream
        d_B, d_yy = buf.products_buffers(self.d_Wt.shape[1])
        grid = (-(-self.d_Wt.shape[1] // PRODUCT_TILE), max(1, min(_GRID_Y_MAX, -(-n // PRODUCT_TILE))))
        _configured(products_kernel(self.dtype), grid, (PRODUCT_THREADS, PRODUCT_THREADS), s)(
            buf.d_Y, self.d_Wt, n, self.d_ks, d_B
        )
        _launch(sqnorm_kernel, n, s)(buf.d_Y, n, self.d_ks, d_yy)
        return d_B, d_yy

    def _encode_rows(self, buf, n):
        """The encoder of these atoms alone on rows 0..n-1 of ``buf.d_Y``."""
        s = buf.stream
        if self.kernel == "warp":
            warps = n if self.max_warps is None else min(n, self.max_warps)
            tpb = 32 * min(self.warps_per_block, warps)
            blocks = max(1, min(_config.CUDA_MAX_BLOCKS, -(-warps * 32 // tpb)))
            only = self.d_every_row
            d_B, d_yy = self._products_on_device(buf, n) if self.products else self.d_no_products
            if self.encoder == "active-set":
                # exact codes, then the accelerated encoder on the points handed over
                only = buf.d_handed
                _configured(warp_active_set_kernel(self.R, self.dtype, self.products), blocks, tpb, s)(
                    buf.d_Y, self.d_Wt, d_B, d_yy, self.d_Gp, self.d_wwp, float(self.lam),
                    float(np.finfo(self.dtype).eps), self.d_ks, n, self.n_atoms, buf.d_X, buf.d_obj, buf.d_counts,
                    only,
                )  # fmt: skip
            _configured(warp_encode_kernel(self.R, self.dtype, self.products), blocks, tpb, s)(
                buf.d_Y, self.d_Wt, d_B, d_yy, self.d_Gp, self.d_wwp, self.alpha, self.lam, self.d_beta, self.d_ks,
                self.neg_inf, n, self.n_atoms, buf.d_X, buf.d_obj, buf.d_counts, only,
            )  # fmt: skip
            return
        d_Bt, d_yy, scratch, iscratch = buf.thread_buffers()
        m = self.n_atoms
        _launch(bt_kernel, n * m, s)(buf.d_Y, self.d_W, n, self.d_ks, d_Bt)
        _launch(sqnorm_kernel, n, s)(buf.d_Y, n, self.d_ks, d_yy)
        # at most one thread per point and per scratch slot (whole warps)
        busy = min(n, buf.n_slots)
        tpb = min(self.threads_per_block, max(32, -(-busy // 32) * 32))
        blocks = max(1, -(-busy // tpb))
        _configured(encode_kernel, blocks, tpb, s)(
            d_Bt, d_yy, self.d_G, self.d_ww, self.alpha, self.lam, self.d_beta, self.d_ks,
            n, buf.d_X, buf.d_obj, buf.d_counts, *scratch, *iscratch,
        )  # fmt: skip

    def stage(self, Y, buf):
        """Copy the chunk ``Y`` into the pinned rows ``buf.h_Y`` (the copy to
        the device is then asynchronous), less the shift of the centred
        step, so the points are centred as the atoms are."""
        n = Y.shape[0]
        if self.shift is None:
            copy_flat(buf.h_Y[:n].reshape(-1), read_only(Y.reshape(-1)))
        else:
            copy_shifted(buf.h_Y[:n], read_only(Y), self.shift)

    def _submit(self, Y, buf, csr=True, objective=False):
        """Queue on ``buf.stream``: ``Y`` in, encoder, and (with ``csr``) the
        prefix sum, the CSR fill and ``indptr`` back; the objectives back
        when asked. Returns once the host copy into pinned memory is done."""
        n = Y.shape[0]
        s = buf.stream
        self.stage(Y, buf)
        buf.d_Y[:n].copy_to_device(buf.h_Y[:n], stream=s)
        self._encode_on_device(buf, n)
        if csr:
            _scan_on_device(buf.d_counts, n, buf.d_indptr, buf.d_tiles, s)
            _launch(fill_kernel, n, s)(buf.d_X, n, buf.d_indptr, buf.d_indices, buf.d_data)
            buf.d_indptr[: n + 1].copy_to_host(buf.h_indptr[: n + 1], stream=s)
        if objective:
            buf.d_obj[:n].copy_to_host(buf.h_obj[:n], stream=s)

    def _collect(self, buf, n, stats=None):
        """Finish a submitted chunk of ``n`` rows: read its total, optionally
        add it to a :class:`_StatsWorkspace`, copy ``indices`` and ``data``
        back. Returns the number of entries; the chunk's CSR arrays are then
        in ``buf.h_indptr``, ``buf.h_indices``, ``buf.h_data``."""
        s = buf.stream
        s.synchronize()  # indptr (and its total) is on the host now
        nnz = int(buf.h_indptr[n])
        if stats is not None:
            stats.add(buf.d_indptr, buf.d_indices, buf.d_data, buf.d_Y, n, s)
        buf._grow_host(nnz)
        if nnz:
            buf.d_indices[:nnz].copy_to_host(buf.h_indices[:nnz], stream=s)
            buf.d_data[:nnz].copy_to_host(buf.h_data[:nnz], stream=s)
        s.synchronize()
        return nnz

    def encode_dense(self, Y, buffers=None):
        """Dense codes (n x m) and per-point objectives of a chunk ``Y``.

        Same contract as :meth:`PreparedDictionary.encode_dense`: ``Y`` must
        be validated, C-contiguous and of ``self.dtype``; ``buffers`` from
        :meth:`allocate` are reused across chunks; the returned host arrays
        are views into them, valid until the next call with the same buffers.

        Returns
        -------
        X : ndarray of shape (n, m)
        obj : ndarray of shape (n,)
        """
        n = Y.shape[0]
        if buffers is None:
            buffers = self.allocate(n)
        Y = self._check_chunk(Y, buffers)
        if n == 0:
            return buffers.h_X[:0], buffers.h_obj[:0]
        self._submit(Y, buffers, csr=False)
        s = buffers.stream
        buffers.d_X[:n].copy_to_host(buffers.h_X[:n], stream=s)
        buffers.d_obj[:n].copy_to_host(buffers.h_obj[:n], stream=s)
        s.synchronize()
        return buffers.h_X[:n], buffers.h_obj[:n]

    def encode_csr(self, Y, buffers=None):
        """CSR triple and per-point objectives of a chunk ``Y``: the contract
        of :meth:`PreparedDictionary.encode_csr`, so that the CPU epoch loop
        takes this dictionary too (dense codes copied back, CSR on the host)."""
        X, obj = self.encode_dense(Y, buffers)
        return csr_from_dense(X), obj


#: The buffer sets of the last pass that made its own, kept for the next
#: pass of the same rows, atoms, features and dtype (:func:`_spare_sets`).
_spare = {"key": None, "sets": []}
_spare_lock = threading.Lock()


def _spare_key(prepared, rows):
    return (rows, prepared.n_atoms, prepared.n_features, prepared.dtype.str)


def _spare_sets(prepared, rows, count):
    """``count`` buffer sets of ``rows`` rows: the kept ones where they fit,
    else new ones. Allocating pinned host memory costs about as much as
    encoding ten million points (docs/gpu.md), so a pass that made its own
    sets hands them back (:func:`_keep_sets`) for the next call of the same
    shape. A set is taken out while a pass uses it, so concurrent passes
    never share one."""
    key = _spare_key(prepared, rows)
    with _spare_lock:
        if _spare["key"] == key and len(_spare["sets"]) >= count:
            sets, _spare["sets"] = _spare["sets"][:count], _spare["sets"][count:]
            return sets
    return [prepared.allocate(rows) for _ in range(count)]


def _keep_sets(prepared, rows, sets):
    """Keep ``sets`` for the next pass of their shape, in place of any other
    shape's (which are then freed)."""
    key = _spare_key(prepared, rows)
    with _spare_lock:
        if _spare["key"] != key:
            _spare["key"], _spare["sets"] = key, []
        _spare["sets"] = (_spare["sets"] + list(sets))[: _config.CUDA_BUFFER_SETS]


def release_buffers():
    """Free the device and pinned host buffers that :func:`encode_csr_cuda`
    and :func:`run_epoch_cuda` keep between calls (one shape's, at most
    ``_config.CUDA_BUFFER_SETS`` sets of up to ``_config.CUDA_CHUNK_BUDGET``
    bytes each), as ``torch.cuda.empty_cache`` frees PyTorch's."""
    with _spare_lock:
        _spare["key"], _spare["sets"] = None, []


def _buffer_rows(chunk_size, n):
    """Rows of the buffer sets a pass over ``n`` rows makes for itself."""
    return min(chunk_size, max(n, 1))


def _buffer_sets(buffers, prepared, chunk_size, n):
    """The buffer sets a pass uses: the caller's (one CudaBuffers or a
    sequence of them), or its own (up to CUDA_BUFFER_SETS, one per chunk;
    see :func:`_spare_sets`)."""
    rows = _buffer_rows(chunk_size, n)
    if buffers is None:
        return _spare_sets(prepared, rows, max(1, min(_config.CUDA_BUFFER_SETS, -(-n // chunk_size))))
    sets = [buffers] if isinstance(buffers, CudaBuffers) else list(buffers)
    for buf in sets:
        if buf.capacity < rows or buf.dtype != prepared.dtype or buf.n_atoms != prepared.n_atoms:
            raise ValueError(
                f"buffers hold {buf.capacity} rows of {buf.n_atoms} atoms in {buf.dtype}; this pass "
                f"needs {rows} of {prepared.n_atoms} in {prepared.dtype}"
            )
    return sets


def _pipeline(Y, prepared, chunk_size, stats=None, objective=False, buffers=None):
    """Yield ``(start, stop, buf, nnz)`` per chunk, one chunk in flight per buffer set.

    A chunk is queued on a buffer set's stream before older chunks are
    collected, so while the host takes one chunk's results the GPU encodes
    the others. The chunk's CSR arrays (and objectives) are in ``buf``'s
    pinned buffers until the caller asks for the next chunk.
    """
    n = Y.shape[0]
    sets = _buffer_sets(buffers, prepared, chunk_size, n)
    pending = deque()
    for c, (start, stop) in enumerate(iter_chunks(n, chunk_size)):
        buf = sets[c % len(sets)]
        if len(pending) == len(sets):  # buf still holds the oldest chunk
            pbuf, pstart, pstop = pending.popleft()
            yield pstart, pstop, pbuf, prepared._collect(pbuf, pstop - pstart, stats)
        prepared._submit(Y[start:stop], buf, objective=objective)
        pending.append((buf, start, stop))
    while pending:
        pbuf, pstart, pstop = pending.popleft()
        yield pstart, pstop, pbuf, prepared._collect(pbuf, pstop - pstart, stats)
    if buffers is None:  # every chunk collected: the sets are free for the next pass
        _keep_sets(prepared, _buffer_rows(chunk_size, n), sets)


def _check_data(Y, prepared):
    Y = np.asarray(Y)
    if Y.ndim != 2 or Y.shape[1] != prepared.n_features or Y.dtype != prepared.dtype:
        raise ValueError(f"Y must be 2-D {prepared.dtype} with {prepared.n_features} columns, got {Y.dtype} {Y.shape}")
    return np.ascontiguousarray(Y)


def _nnz_capacity(need, rows_done, n_rows, max_nnz, cap):
    """Entries to allocate for the final arrays once ``rows_done`` rows hold
    ``need``: the rate so far over all rows, 10% more, at least 1.5 times the
    old capacity (few regrowths), never more than ``max_nnz`` (n m)."""
    est = int(need / max(rows_done, 1) * n_rows * 1.1) + 1024
    return min(max_nnz, max(need, est, int(1.5 * cap)))


def _grown(a, cap, dtype, keep):
    """``a`` with room for ``cap`` entries, its first ``keep`` kept."""
    out = np.empty(cap, dtype=dtype)
    if a is not None and keep:
        out[:keep] = a[:keep]
    return out


def encode_csr_cuda(Y, prepared, chunk_size, *, return_objective=False, buffers=None):
    """Encode ``Y`` on the GPU chunk by chunk into one CSR array.

    Twin of :func:`fastkds.sparse_encode`'s CPU pass: the dense codes never
    leave the device; each chunk's CSR arrays are assembled there (prefix sum
    and fill), copied back and written straight into the final arrays.

    Parameters
    ----------
    Y : ndarray of shape (n, d)
        Validated data of ``prepared.dtype`` (see :func:`fastkds.sparse_encode`).
    prepared : CudaPreparedDictionary
    chunk_size : int
        Rows per chunk (device memory grows with it).
    return_objective : bool, default=False
        Also return the per-point objectives.
    buffers : CudaBuffers, sequence of CudaBuffers, or None
        Reused buffer sets (see :func:`run_epoch_cuda`); by default
        ``_config.CUDA_BUFFER_SETS`` are allocated (fewer for fewer chunks).

    Returns
    -------
    codes : scipy.sparse.csr_array of shape (n, m)
        Column indices ascending, no explicit zeros; int32 indices when the
        entries fit, as on the CPU.
    obj : ndarray of shape (n,)
        Only when ``return_objective``.
    """
    require_cuda()
    Y = _check_data(Y, prepared)
    chunk_size = max(1, int(chunk_size))
    n, m = Y.shape[0], prepared.n_atoms
    idx = _index_dtype(n, m)
    indptr = np.empty(n + 1, dtype=idx)
    indptr[0] = 0
    indices = data = None
    cap = pos = 0
    obj = np.empty(n, dtype=prepared.dtype) if return_objective else None
    for start, stop, buf, nnz in _pipeline(Y, prepared, chunk_size, None, return_objective, buffers):
        need = pos + nnz
        if indices is None or need > cap:
            cap = _nnz_capacity(need, stop, n, n * m, cap)
            indices = _grown(indices, cap, idx, pos)
            data = _grown(data, cap, prepared.dtype, pos)
        place_csr_chunk(buf.h_indptr, buf.h_indices, buf.h_data, stop - start, nnz, start, pos, indptr, indices, data)
        if obj is not None:
            obj[start:stop] = buf.h_obj[: stop - start]
        pos = need
    if indices is None:
        indices = np.empty(0, dtype=idx)
        data = np.empty(0, dtype=prepared.dtype)
    indices, data = indices[:pos], data[:pos]
    if idx == np.int64 and pos < 2**31:  # as concatenate_csr: int32 when the entries fit
        indptr, indices = indptr.astype(np.int32), indices.astype(np.int32)
    codes = sp.csr_array((data, indices, indptr), shape=(n, m))
    if return_objective:
        return codes, obj
    return codes


def statistics_cuda(indptr, indices, data, Y, *, n_atoms=None, chunk_size=None):
    """Sufficient statistics ``(X^T X, X^T 1, X^T Y)`` of CSR codes on the GPU.

    Twin of ``_kernels.accumulate_statistics``, accumulated in
    float64. Rows stream through the device in chunks that are multiples of
    ``_config.CUDA_STATS_ROWS``, and partial sums are added in a fixed order, so the
    result is the same for any chunk size and launch configuration.

    Parameters
    ----------
    indptr, indices, data : ndarrays
        CSR arrays of the codes X (n x m); ``indptr[0]`` may be nonzero.
    Y : ndarray of shape (n, d)
    n_atoms : int or None
        m; by default ``max(indices) + 1`` (pass it when trailing atoms may
        be unused).
    chunk_size : int or None
        Rows per device chunk, rounded up to whole parts of CUDA_STATS_ROWS; by
        default as many as the partial-sum budget allows.

    Returns
    -------
    XtX : ndarray of shape (m, m), float64
    s : ndarray of shape (m,), float64
    XtY : ndarray of shape (m, d), float64
    """
    require_cuda()
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    data = np.asarray(data)
    Y = np.ascontiguousarray(Y)
    n, d = Y.shape
    if indptr.shape != (n + 1,):
        raise ValueError(f"indptr has {indptr.shape[0]} entries for {n} rows")
    if n_atoms is None:
        n_atoms = int(indices.max()) + 1 if indices.size else 1
    stream = cuda.stream()
    ws = _StatsWorkspace(n_atoms, d, max(n, 1), stream)
    step = ws.max_rows
    if chunk_size is not None:
        step = min(step, -(-int(chunk_size) // ws.rows_per_part) * ws.rows_per_part)
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        a, b = int(indptr[lo]), int(indptr[hi])
        d_indptr = cuda.to_device(indptr[lo : hi + 1] - a, stream=stream)
        d_indices = cuda.to_device(np.ascontiguousarray(indices[a:b], dtype=np.int32), stream=stream)
        d_data = cuda.to_device(np.ascontiguousarray(data[a:b]), stream=stream)
        d_Y = cuda.to_device(Y[lo:hi], stream=stream)
        ws.add(d_indptr, d_indices, d_data, d_Y, hi - lo, stream)
        stream.synchronize()  # the host slices above must outlive the copies
    return ws.result(stream)


def run_epoch_cuda(Y, prepared, chunk_size, stats=None, buffers=None, codes_out=None):
    """GPU twin of :func:`fastkds._backends.run_epoch`.

    Encodes every chunk, assembles its CSR arrays and accumulates the
    sufficient statistics on the device (the dense codes never leave it).
    The statistics of the whole pass are added to ``stats`` at the end;
    objectives and re-seed candidates are added chunk by chunk on the host,
    as :meth:`SufficientStatistics.add_chunk` does.

    Parameters
    ----------
    Y : ndarray of shape (n, d), validated, of ``prepared.dtype``
    prepared : CudaPreparedDictionary
    chunk_size : int
    stats : SufficientStatistics or None
    buffers : CudaBuffers, sequence of CudaBuffers, or None
        From :meth:`CudaPreparedDictionary.allocate` (of any dictionary of
        the same shape and dtype), reused across epochs. Several sets let
        transfers overlap compute; by default ``_config.CUDA_BUFFER_SETS`` are
        allocated per call.
    codes_out : list or None
        Receives each chunk's CSR triple ``(indptr, indices, data)``
        (``indptr`` int64 from 0, ``indices`` int32, as on the CPU).

    Returns
    -------
    stats
    """
    require_cuda()
    Y = _check_data(Y, prepared)
    chunk_size = max(1, int(chunk_size))
    ws = None
    if stats is not None:
        # the workspace serves every buffer set's stream; _collect synchronizes
        # each chunk before the next is collected, so its kernels never overlap
        rows = min(chunk_size, max(Y.shape[0], 1))
        ws = _StatsWorkspace(prepared.n_atoms, prepared.n_features, rows, cuda.stream())
        ws.stream.synchronize()
    for start, stop, buf, nnz in _pipeline(Y, prepared, chunk_size, ws, stats is not None, buffers):
        k = stop - start
        if stats is not None:
            stats.add_objectives(Y[start:stop], buf.h_obj[:k])
        if codes_out is not None:
            codes_out.append(
                (buf.h_indptr[: k + 1].astype(np.int64), buf.h_indices[:nnz].copy(), buf.h_data[:nnz].copy())
            )
    if stats is not None:
        XtX, s, XtY = ws.result(ws.stream)
        if prepared.shift is not None:  # the device summed X^T (Y - 1 shift)
            XtY += np.outer(s, prepared.shift.astype(np.float64))
        stats.XtX += XtX
        stats.s += s
        stats.XtY += XtY
    return stats


class CudaLabelVote:
    """The neighbours' vote of a :class:`fastkds.label_vote.LabelVote` on
    the GPU: :meth:`predict` gives ``model.predict``'s labels.

    The atoms, references, cells and labels go to the device once; the
    points then stream through it in chunks, one thread each (see
    :func:`fastkds._cuda_kernels.vote_kernel`), and only their labels come
    back.

    Parameters
    ----------
    model : fastkds.label_vote.LabelVote
    budget : int or None
        Bytes of device memory for a chunk of points and the threads'
        scratch; by default ``_config.CUDA_CHUNK_BUDGET``.
    """

    def __init__(self, model, budget=None):
        require_cuda()
        self.model = model
        self.budget = int(_config.CUDA_CHUNK_BUDGET if budget is None else budget)
        self.stream = cuda.stream()
        s = self.stream
        self.d_atoms = cuda.to_device(model.atoms, stream=s)
        self.d_references = cuda.to_device(model.references, stream=s)
        self.d_cell_start = cuda.to_device(model.cell_start, stream=s)
        self.d_cell_refs = cuda.to_device(model.cell_refs, stream=s)
        self.d_cell_label = cuda.to_device(model.cell_labels(), stream=s)
        self.d_labels = cuda.to_device(model.labels, stream=s)
        m = model.atoms.shape[0]
        n_probe = min(model.n_probe, m)
        per_slot = 8 * (m + n_probe + 2 * model.n_neighbors)
        self.n_slots = max(_config.CUDA_THREADS, self.budget // 2 // per_slot)
        self._scratch = None
        self._rows = None  # device rows and labels (_rows_buffers)
        self._shape = (m, n_probe, model.n_neighbors)

    def chunk_rows(self, n_features, itemsize):
        """Rows :meth:`predict` sends to the device at once: half the budget
        of points (the other half is the threads' scratch)."""
        return max(1, self.budget // 2 // (n_features * itemsize + 4))

    def predict(self, Y):
        """Labels of the rows of ``Y``, as ``model.predict(Y)`` gives them.

        Parameters
        ----------
        Y : ndarray of shape (n_samples, n_features)
            Validated data (the features of the model's atoms).

        Returns
        -------
        labels : ndarray of int32, shape (n_samples,)
        """
        Y = np.ascontiguousarray(Y)
        n = Y.shape[0]
        out = np.empty(n, dtype=np.int32)
        if n == 0:
            return out
        rows = min(n, self.chunk_rows(Y.shape[1], Y.itemsize))
        slots = min(self.n_slots, rows)
        if self._scratch is None or self._scratch[0].shape[0] < slots:
            m, n_probe, q = self._shape
            self._scratch = (
                cuda.device_array((slots, m), dtype=np.float64, stream=self.stream),
                cuda.device_array((slots, n_probe), dtype=np.int64, stream=self.stream),
                cuda.device_array((slots, q), dtype=np.float64, stream=self.stream),
                cuda.device_array((slots, q), dtype=np.int64, stream=self.stream),
            )
        atom_dist, probe, best_dist, best_idx = (a[:slots] for a in self._scratch)
        d_Y, d_out = self._rows_buffers(rows, Y.shape[1], Y.dtype)
        s = self.stream
        for start, stop in iter_chunks(n, rows):
            k = stop - start
            d_Y[:k].copy_to_device(Y[start:stop], stream=s)
            tpb = min(_config.CUDA_THREADS, -(-min(k, slots) // 32) * 32)
            blocks = -(-min(k, slots) // tpb)
            _configured(vote_kernel, blocks, tpb, s)(
                d_Y[:k], k, self.d_atoms, self.d_references, self.d_cell_start, self.d_cell_refs,
                self.d_cell_label, self.d_labels, self.model.ranked, atom_dist, probe, best_dist, best_idx, d_out,
            )  # fmt: skip
            d_out[:k].copy_to_host(out[start:stop], stream=s)
            s.synchronize()  # the chunk's rows and labels are then free for the next
        return out

    def _rows_buffers(self, rows, n_features, dtype):
        """Device buffers for ``rows`` points and their labels, kept for the
        next calls (a fit labels its points in many chunks of one size)."""
        kept = self._rows
        if kept is None or kept[0].shape[0] < rows or kept[0].shape[1] != n_features or kept[0].dtype != dtype:
            kept = self._rows = (
                cuda.device_array((rows, n_features), dtype=dtype, stream=self.stream),
                cuda.device_array(rows, dtype=np.int32, stream=self.stream),
            )
        return kept

"""Optional numba.cuda path: the encoder, CSR assembly and sufficient statistics
on an NVIDIA GPU.

Importing :mod:`fastkds` never imports this module; ``import fastkds.gpu``
imports :mod:`numba.cuda`, which works without a GPU. Every entry point that
touches the device calls :func:`require_cuda` first, so the error without a
GPU is a clear RuntimeError rather than a driver traceback. The CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported) runs the same
kernels on the CPU, one Python thread per CUDA thread: slow, for tests only.

The kernels are twins of :mod:`fastkds._kernels` (SPEC sections 3-5): the same
mathematics in the same operation order, generic in float32/float64, with
every constant taken from the typed array ``ks = arange(m + 1, dtype)`` (a
Python float literal would promote float32 arithmetic to float64). Results
match the CPU kernels to rounding, not bitwise: the GPU compiler contracts
``a * b + c`` into fused multiply-adds, and ``B = Y W^T`` and ``||y||^2`` are
summed in a different order than BLAS does on the host.

How threads map to work
-----------------------
- ``B = Y W^T`` (stored transposed, ``Bt``: m x n) and ``yy = ||y||^2`` are
  computed on the device (:func:`_bt_kernel`, :func:`_sqnorm_kernel`): on
  low-dimensional data B is far larger than Y, so shipping Y and forming B
  there moves m/d times fewer bytes over PCIe. One thread per entry of ``Bt``,
  the point index fastest, so a warp reads one atom and 32 consecutive points
  and writes 32 consecutive entries of ``Bt``.
- Encoder (:func:`_encode_kernel`): one point per thread, grid-stride loop.
  ``cuda.local.array`` needs a compile-time size, so per-thread scratch lives
  in preallocated global arrays of shape (m, n_slots), one column per thread
  ("slot"): element j of all threads of a warp is contiguous, the layout the
  hardware gives local memory, so the uniform loops over j coalesce. A launch
  may use fewer threads than there are slots, never more (extra threads
  return at once), and every point is computed by one thread alone, so codes
  do not depend on the launch configuration.
- CSR assembly: one thread per row counts its nonzeros; the exclusive prefix
  sum runs on the host (``numpy.cumsum`` on the counts copied back: the host
  needs the total to size the output anyway); one thread per row then writes
  its ascending column indices and values.
- Sufficient statistics (:func:`_stats_partial_kernel`): ``X^T [X | 1 | Y]``
  (m x (m + 1 + d)) in float64. Rows are cut into fixed parts of
  :data:`STATS_ROWS` rows; one thread per (part, output column) loops over the
  rows of its part in order and owns its column of the part's partial sum, so
  there are no atomics. A second kernel, one thread per output entry, adds the
  partials to the running total in part order. The result depends only on the
  row order and the part boundaries, not on the launch configuration (and not
  on how rows are streamed either, when chunks are multiples of STATS_ROWS, as
  :func:`statistics_cuda` makes them).

Streaming: each chunk's data goes through pinned host buffers on the chunk's
own CUDA stream; :func:`encode_csr_cuda` keeps two buffer sets so that one
chunk's transfer and encoding overlap the previous chunk's CSR fill and copy
back.
"""

from collections import deque

import numpy as np

# numba-cuda <= 0.30 registers an overload of np.row_stack while compiling its
# first kernel; NumPy 2.5 removed that alias of np.vstack, and the compile then
# fails with AttributeError (seen on a GPU node with numba-cuda 0.30.4 and
# NumPy 2.5.2). Restore the alias before numba.cuda needs it.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

import numba  # noqa: E402
from numba import cuda  # noqa: E402

from .encoding import PreparedDictionary, concatenate_csr, iter_chunks

#: Rows per part of the sufficient-statistics reduction. Fixed (not derived
#: from the launch) so the order of every sum is a property of the data alone.
STATS_ROWS = 256

#: Default bytes of device memory for the encoder's per-thread scratch.
SCRATCH_BUDGET = 512 * 2**20

#: Default bytes of device memory for the statistics' per-part partial sums.
PARTIALS_BUDGET = 256 * 2**20

#: Threads per block of the encoder (register-heavy) and of the other kernels.
ENCODE_THREADS = 128
THREADS = 256

#: Grid-stride loops cover any size; this caps the blocks of one launch.
MAX_BLOCKS = 1 << 16


# --------------------------------------------------------------------------
# Availability
# --------------------------------------------------------------------------


def in_simulator():
    """Whether numba runs CUDA kernels in its simulator (NUMBA_ENABLE_CUDASIM=1)."""
    return bool(numba.config.ENABLE_CUDASIM)


def cuda_available():
    """Whether CUDA kernels can run here: a usable GPU, or the simulator.

    Returns
    -------
    bool
    """
    if in_simulator():
        return True
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


def _launch(work, stream, threads=None):
    """Launch configuration ``(blocks, threads, stream)`` for ``work`` items in
    a grid-stride kernel. Small work gets small blocks (whole warps): that
    costs nothing on a GPU and keeps the simulator from starting hundreds of
    idle Python threads."""
    threads = min(threads or THREADS, max(32, -(-work // 32) * 32))
    return max(1, min(MAX_BLOCKS, -(-work // threads))), threads, stream


# --------------------------------------------------------------------------
# Device functions: twins of the CPU projection and encoder
# --------------------------------------------------------------------------


@cuda.jit(device=True)
def _vmax(v):
    vmax = v[0]
    for j in range(1, v.shape[0]):
        if v[j] > vmax:
            vmax = v[j]
    return vmax


@cuda.jit(device=True)
def _simplex_support_michelot(v, vmax, floor, ks, cand):
    """Twin of ``_kernels._simplex_support_michelot``: support and threshold
    of the projection of ``v`` relative to ``vmax``; the support is
    ``cand[:k]`` in ascending order. Capped at m + 1 passes (float32 rounding
    can make the count oscillate); ``while going`` as on the CPU."""
    m = v.shape[0]
    one = ks[1]
    s = ks[0]
    k = 0
    for j in range(m):
        vj = v[j] - vmax
        if vj > floor:
            cand[k] = j
            s += vj
            k += 1
    tau = (s - one) / ks[k]
    passes = 0
    going = True
    while going:
        s = ks[0]
        k_new = 0
        for q in range(k):
            j = cand[q]
            vj = v[j] - vmax
            if vj > tau:
                cand[k_new] = j
                s += vj
                k_new += 1
        passes += 1
        if k_new == k or passes > m:
            going = False
        else:
            tau = (s - one) / ks[k_new]
        k = k_new
    return tau, k


@cuda.jit(device=True)
def _encode_point(b, yy, G, ww, alpha, lam, beta, ks, x, ac, dist, v, z, cand, zidx, xs, xold):
    """Twin of ``_kernels._encode_point``: encode one point, return f(x; y, W).

    All vector arguments are 1-D views (possibly strided: columns of the
    scratch arrays and of ``Bt``); ``x`` must be zero on entry. See the CPU
    function for the sparse-iterate bookkeeping, which is identical.
    """
    m = G.shape[0]
    zero = ks[0]
    one = ks[1]
    half = one / (one + one)
    for j in range(m):
        dj = yy - (b[j] + b[j]) + ww[j]
        if dj < zero:  # rounding in the expanded form
            dj = zero
        dist[j] = dj
        ac[j] = -alpha * (lam * dj - b[j])
        z[j] = zero
    nz = 0
    nx = 0
    for t in range(beta.shape[0]):
        # v = z - alpha * (z G + c), summing over the support of z only
        for j in range(m):
            v[j] = ac[j]
        for q in range(nz):
            kz = zidx[q]
            a = alpha * z[kz]
            for j in range(m):
                v[j] -= a * G[kz, j]
        for q in range(nz):
            kz = zidx[q]
            v[kz] += z[kz]
        # project relative to max(v); the previous support bounds tau below
        vmax = _vmax(v)
        floor = -one
        if nx > 0:
            s = ks[0]
            for q in range(nx):
                s += v[xs[q]] - vmax
            s = (s - one) / ks[nx]
            if s > floor:
                floor = s
        tau, k = _simplex_support_michelot(v, vmax, floor, ks, cand)
        # x_new = max(v - tau, 0) on cand[:k]; z = x_new + beta (x_new - x_old)
        bt = beta[t]
        for q in range(nz):
            z[zidx[q]] = zero
        for q in range(nx):
            j = xs[q]
            xold[q] = x[j]
            x[j] = zero
        nz = 0
        for q in range(k):
            j = cand[q]
            xn = (v[j] - vmax) - tau
            x[j] = xn
            z[j] = xn + bt * xn
            zidx[nz] = j
            nz += 1
        for q in range(nx):
            j = xs[q]
            if x[j] == zero:  # left the support: z_j = -beta x_old_j
                zidx[nz] = j
                nz += 1
            z[j] = x[j] + bt * (x[j] - xold[q])
        for q in range(k):
            xs[q] = cand[q]
        nx = k
    # objective: 1/2 ||y - x W||^2 + lam * sum_j x_j dist_j, via the Gram form
    rec = yy
    loc = zero
    for p in range(nx):
        j = xs[p]
        xj = x[j]
        rec -= (xj + xj) * b[j]
        loc += xj * dist[j]
        acc = zero
        for q in range(nx):
            acc += x[xs[q]] * G[j, xs[q]]
        rec += xj * acc
    if rec < zero:
        rec = zero
    return half * rec + lam * loc


# --------------------------------------------------------------------------
# Kernels: per-chunk products, encoder, CSR assembly
# --------------------------------------------------------------------------


@cuda.jit(cache=True)
def _bt_kernel(Y, W, n, ks, Bt):
    """``Bt[j, i] = sum_k Y[i, k] W[j, k]`` for i < n; one thread per entry,
    i fastest (coalesced writes, W broadcast across the warp)."""
    m = W.shape[0]
    d = W.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for e in range(start, n * m, stride):
        j = e // n
        i = e - j * n
        acc = ks[0]
        for k in range(d):
            acc += Y[i, k] * W[j, k]
        Bt[j, i] = acc


@cuda.jit(cache=True)
def _sqnorm_kernel(Y, n, ks, yy):
    """``yy[i] = ||Y[i]||^2`` for i < n; one thread per point."""
    d = Y.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        acc = ks[0]
        for k in range(d):
            acc += Y[i, k] * Y[i, k]
        yy[i] = acc


@cuda.jit(cache=True)
def _encode_kernel(Bt, yy, G, ww, alpha, lam, beta, ks, n, X, obj, ac, dist, v, z, xold, cand, zidx, xs):
    """Encode points 0..n-1: codes into the rows of ``X``, objectives into ``obj``.

    One point per thread in a grid-stride loop. Scratch arrays have shape
    (m, n_slots) (``zidx``: (2m, n_slots)); thread ``slot`` uses column
    ``slot``. Threads beyond n_slots return at once and the stride is capped at
    n_slots, so any launch covers every point exactly once.
    """
    m = G.shape[0]
    zero = ks[0]
    n_slots = ac.shape[1]
    slot = cuda.grid(1)
    stride = cuda.gridsize(1)
    if stride > n_slots:  # (no builtin min: it mis-types in numba's CUDA target)
        stride = n_slots
    if slot >= stride:
        return
    for i in range(slot, n, stride):
        x = X[i]
        for j in range(m):
            x[j] = zero
        obj[i] = _encode_point(
            Bt[:, i], yy[i], G, ww, alpha, lam, beta, ks, x,
            ac[:, slot], dist[:, slot], v[:, slot], z[:, slot],
            cand[:, slot], zidx[:, slot], xs[:, slot], xold[:, slot],
        )  # fmt: skip


@cuda.jit(cache=True)
def _count_kernel(X, n, counts):
    """Twin of ``_kernels.count_row_nonzeros``: nonzeros of rows 0..n-1."""
    m = X.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        k = 0
        for j in range(m):
            if X[i, j] != 0:
                k += 1
        counts[i] = k


@cuda.jit(cache=True)
def _fill_kernel(X, n, indptr, indices, data):
    """Twin of ``_kernels.fill_csr``: ascending column indices, no explicit zeros."""
    m = X.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        p = indptr[i]
        for j in range(m):
            if X[i, j] != 0:
                indices[p] = j
                data[p] = X[i, j]
                p += 1


# --------------------------------------------------------------------------
# Kernels: sufficient statistics in float64
# --------------------------------------------------------------------------


@cuda.jit(cache=True)
def _stats_partial_kernel(indptr, indices, data, Y, n, rows_per_part, P):
    """Per-part partial sums ``P[p] = X_p^T [X_p | 1 | Y_p]`` (m x (m + 1 + d)).

    One thread per (part p, output column c), c fastest: it zeroes column c of
    ``P[p]`` and adds the rows of part p in order. Column c < m is
    ``X^T x_c`` (only rows whose support holds c contribute), c = m is
    ``X^T 1``, c > m is ``X^T y_{c-m-1}``. Each element has one writer, so the
    order of every sum is fixed.
    """
    m = P.shape[1]
    ncol = P.shape[2]
    n_parts = (n + rows_per_part - 1) // rows_per_part
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for e in range(start, n_parts * ncol, stride):
        p = e // ncol
        c = e - p * ncol
        for j in range(m):
            P[p, j, c] = 0.0
        lo = p * rows_per_part
        hi = lo + rows_per_part
        if hi > n:
            hi = n
        for i in range(lo, hi):
            a = indptr[i]
            b = indptr[i + 1]
            if c < m:
                xc = 0.0
                for q in range(a, b):
                    if indices[q] == c:
                        xc = numba.float64(data[q])
                if xc != 0.0:
                    for q in range(a, b):
                        P[p, indices[q], c] += numba.float64(data[q]) * xc
            elif c == m:
                for q in range(a, b):
                    P[p, indices[q], c] += numba.float64(data[q])
            else:
                yk = numba.float64(Y[i, c - m - 1])
                for q in range(a, b):
                    P[p, indices[q], c] += numba.float64(data[q]) * yk


@cuda.jit(cache=True)
def _stats_reduce_kernel(P, n_parts, out):
    """``out += sum_p P[p]``, parts added one after another in order; one thread
    per output entry."""
    m = out.shape[0]
    ncol = out.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for e in range(start, m * ncol, stride):
        j = e // ncol
        c = e - j * ncol
        acc = out[j, c]
        for p in range(n_parts):
            acc += P[p, j, c]
        out[j, c] = acc


@cuda.jit(cache=True)
def _zero_kernel(out):
    m = out.shape[0]
    ncol = out.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for e in range(start, m * ncol, stride):
        j = e // ncol
        out[j, e - j * ncol] = 0.0


class _StatsWorkspace:
    """Device partials (n_parts, m, m + 1 + d) and the float64 running total
    ``X^T [X | 1 | Y]`` (m x (m + 1 + d))."""

    def __init__(self, n_atoms, n_features, max_rows, stream, partials_budget=PARTIALS_BUDGET):
        self.m = n_atoms
        self.d = n_features
        ncol = n_atoms + 1 + n_features
        per_part = 8 * n_atoms * ncol
        # parts that fit the budget, but never more than max_rows needs
        self.max_parts = max(1, min(-(-max_rows // STATS_ROWS), partials_budget // per_part))
        self.stream = stream
        self.P = cuda.device_array((self.max_parts, n_atoms, ncol), dtype=np.float64, stream=stream)
        self.out = cuda.device_array((n_atoms, ncol), dtype=np.float64, stream=stream)
        self.reset()

    @property
    def max_rows(self):
        """Rows one :meth:`add` call takes at most (a multiple of STATS_ROWS)."""
        return self.max_parts * STATS_ROWS

    def reset(self):
        m, ncol = self.out.shape
        _zero_kernel[_launch(m * ncol, self.stream)](self.out)

    def add(self, d_indptr, d_indices, d_data, d_Y, n, stream):
        """Add rows 0..n-1 of device CSR arrays and device ``Y`` to the total.

        Rows go through in slices of :attr:`max_rows` (a multiple of
        STATS_ROWS, so part boundaries do not move). ``indptr`` holds offsets
        into ``indices``/``data``, so a slice of it needs no rebasing.
        Launched on ``stream``.
        """
        ncol = self.out.shape[1]
        for lo in range(0, n, self.max_rows):
            hi = min(lo + self.max_rows, n)
            n_parts = -(-(hi - lo) // STATS_ROWS)
            _stats_partial_kernel[_launch(n_parts * ncol, stream)](
                d_indptr[lo : hi + 1], d_indices, d_data, d_Y[lo:hi], hi - lo, STATS_ROWS, self.P
            )
            _stats_reduce_kernel[_launch(self.m * ncol, stream)](self.P, n_parts, self.out)

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

#: Default bytes of device memory per buffer set (data, B, dense codes, CSR).
CHUNK_BUDGET = 512 * 2**20


def _free_device_memory():
    """Free bytes on the current device, or None where it cannot be read (simulator)."""
    try:
        return int(cuda.current_context().get_memory_info()[0])
    except Exception:
        return None


def default_chunk_size_cuda(n_features, n_atoms, itemsize, budget=None):
    """Rows per GPU chunk so that one buffer set fits ``budget`` bytes.

    A row needs its data (d), ``B`` and the dense codes (2 m), ``||y||^2``
    and the objective, the count and indptr (int64), and room for a few CSR
    entries. Larger chunks than on the CPU: each launch should fill the GPU.
    By default the budget is ``CHUNK_BUDGET``, or an eighth of the free device
    memory when that is less (two buffer sets, the encoder's scratch and the
    statistics' partials share the device).

    Returns
    -------
    int
    """
    if budget is None:
        free = _free_device_memory()
        budget = CHUNK_BUDGET if free is None else min(CHUNK_BUDGET, free // 8)
    per_row = (n_features + 2 * n_atoms + 2) * itemsize + 16 + 4 * (4 + itemsize)
    return int(min(1 << 21, max(1 << 12, budget // per_row)))


class CudaBuffers:
    """Device and pinned host buffers for chunks of up to ``capacity`` rows,
    with their own CUDA stream. Made by :meth:`CudaPreparedDictionary.allocate`.

    Attributes
    ----------
    capacity : int
        Most rows per chunk.
    n_slots : int
        Encoder scratch columns: the most encoder threads one launch uses.
    stream : numba.cuda stream
        All work on these buffers is queued here, so two buffer sets overlap.
    """

    def __init__(self, capacity, n_atoms, n_features, dtype, n_slots):
        self.capacity = capacity
        self.n_slots = n_slots
        self.dtype = dtype
        m, d = n_atoms, n_features
        s = self.stream = cuda.stream()
        self.h_Y = cuda.pinned_array((capacity, d), dtype=dtype)
        self.d_Y = cuda.device_array((capacity, d), dtype=dtype, stream=s)
        self.d_Bt = cuda.device_array((m, capacity), dtype=dtype, stream=s)
        self.d_yy = cuda.device_array(capacity, dtype=dtype, stream=s)
        self.d_X = cuda.device_array((capacity, m), dtype=dtype, stream=s)
        self.d_obj = cuda.device_array(capacity, dtype=dtype, stream=s)
        self.h_obj = cuda.pinned_array(capacity, dtype=dtype)
        # per-thread scratch, one column per slot (see _encode_kernel)
        self.scratch = tuple(cuda.device_array((m, n_slots), dtype=dtype, stream=s) for _ in range(5))
        self.iscratch = (
            cuda.device_array((m, n_slots), dtype=np.int32, stream=s),  # cand
            cuda.device_array((2 * m, n_slots), dtype=np.int32, stream=s),  # zidx
            cuda.device_array((m, n_slots), dtype=np.int32, stream=s),  # xs
        )
        self.d_counts = cuda.device_array(capacity, dtype=np.int64, stream=s)
        self.h_counts = cuda.pinned_array(capacity, dtype=np.int64)
        self.h_indptr = cuda.pinned_array(capacity + 1, dtype=np.int64)
        self.d_indptr = cuda.device_array(capacity + 1, dtype=np.int64, stream=s)
        self._h_X = None  # dense codes on the host: only encode_dense needs them
        self._nnz_cap = 0
        self._grow_csr(capacity * min(m, 4))

    @property
    def h_X(self):
        if self._h_X is None:
            self._h_X = cuda.pinned_array(self.d_X.shape, dtype=self.dtype)
        return self._h_X

    def _grow_csr(self, nnz):
        """Make room for ``nnz`` CSR entries (device and pinned host), with slack."""
        if nnz <= self._nnz_cap:
            return
        cap = max(nnz, int(1.5 * self._nnz_cap))
        self.d_indices = cuda.device_array(cap, dtype=np.int32, stream=self.stream)
        self.d_data = cuda.device_array(cap, dtype=self.dtype, stream=self.stream)
        self.h_indices = cuda.pinned_array(cap, dtype=np.int32)
        self.h_data = cuda.pinned_array(cap, dtype=self.dtype)
        self._nnz_cap = cap


class CudaPreparedDictionary:
    """A dictionary prepared for the CUDA encoder; mirrors
    :class:`fastkds.encoding.PreparedDictionary`.

    The host-side quantities (``alpha = 1 / sigma_max(W)^2``, ``G = W W^T``,
    its diagonal, the momentum and the typed constants) are computed exactly
    as on the CPU, by a :class:`PreparedDictionary`, and copied to the device
    once.

    Parameters
    ----------
    W : ndarray of shape (m, d)
    lam : float
    n_iter : int
    dtype : numpy dtype, float32 or float64
    threads_per_block : int, default=ENCODE_THREADS
        Encoder block size.
    scratch_budget : int, default=SCRATCH_BUDGET
        Bytes of device memory for the encoder's per-thread scratch; bounds
        the number of encoder threads (slots) per launch.

    Raises
    ------
    RuntimeError
        Without a usable GPU (and the simulator off); see :func:`require_cuda`.
    """

    def __init__(
        self, W, lam, n_iter, dtype, *, threads_per_block=ENCODE_THREADS, scratch_budget=SCRATCH_BUDGET
    ):
        require_cuda()
        host = PreparedDictionary(W, lam, n_iter, dtype)
        self.dtype = host.dtype
        self.alpha_value = host.alpha_value
        self.W, self.G, self.ww = host.W, host.G, host.ww
        self.alpha, self.lam, self.beta, self.ks = host.alpha, host.lam, host.beta, host.ks
        self.threads_per_block = int(threads_per_block)
        self.scratch_budget = int(scratch_budget)
        self.d_W = cuda.to_device(self.W)
        self.d_G = cuda.to_device(self.G)
        self.d_ww = cuda.to_device(self.ww)
        self.d_beta = cuda.to_device(self.beta)
        self.d_ks = cuda.to_device(self.ks)

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
            Encoder threads per launch (scratch columns). By default one per
            row, capped by ``scratch_budget``; a smaller value makes each
            thread encode several points (grid-stride loop).

        Returns
        -------
        CudaBuffers
        """
        chunk_size = max(1, int(chunk_size))
        tpb = self.threads_per_block
        if n_slots is None:
            m = self.n_atoms
            per_slot = m * (5 * self.dtype.itemsize + 4 * 4)  # 5 float vectors, 4 m of int32
            by_budget = max(tpb, (self.scratch_budget // per_slot) // tpb * tpb)
            n_slots = min(-(-chunk_size // tpb) * tpb, by_budget)
        return CudaBuffers(chunk_size, self.n_atoms, self.n_features, self.dtype, max(1, int(n_slots)))

    def _check_chunk(self, Y, buffers):
        if Y.ndim != 2 or Y.shape[1] != self.n_features or Y.dtype != self.dtype:
            raise ValueError(
                f"Y must be 2-D {self.dtype} with {self.n_features} columns, got {Y.dtype} {Y.shape}"
            )
        if Y.shape[0] > buffers.capacity:
            raise ValueError(f"chunk of {Y.shape[0]} rows exceeds the buffers' {buffers.capacity}")

    def _submit(self, Y, buf, count=True):
        """Queue on ``buf.stream``: copy ``Y`` in, form Bt and yy, encode and
        (with ``count``) count each row's nonzeros and copy the counts back.
        Returns at once."""
        n = Y.shape[0]
        s = buf.stream
        np.copyto(buf.h_Y[:n], Y)  # pinned staging: the copy below is asynchronous
        buf.d_Y[:n].copy_to_device(buf.h_Y[:n], stream=s)
        m = self.n_atoms
        _bt_kernel[_launch(n * m, s)](buf.d_Y, self.d_W, n, self.d_ks, buf.d_Bt)
        _sqnorm_kernel[_launch(n, s)](buf.d_Y, n, self.d_ks, buf.d_yy)
        # at most one thread per point and per scratch slot (whole warps)
        busy = min(n, buf.n_slots)
        tpb = min(self.threads_per_block, max(32, -(-busy // 32) * 32))
        blocks = max(1, -(-busy // tpb))
        _encode_kernel[blocks, tpb, s](
            buf.d_Bt, buf.d_yy, self.d_G, self.d_ww, self.alpha, self.lam, self.d_beta, self.d_ks,
            n, buf.d_X, buf.d_obj, *buf.scratch, *buf.iscratch,
        )  # fmt: skip
        if count:
            _count_kernel[_launch(n, s)](buf.d_X, n, buf.d_counts)
            buf.d_counts[:n].copy_to_host(buf.h_counts[:n], stream=s)

    def _collect(self, buf, n, stats=None, objective=False):
        """Finish a submitted chunk of ``n`` rows: prefix sum on the host, fill
        the CSR arrays on the device, optionally add the chunk to a
        :class:`_StatsWorkspace`, copy back. Returns ``(indptr, indices, data)``
        (and the objectives when asked), fresh host arrays."""
        s = buf.stream
        s.synchronize()  # the counts are on the host now
        indptr = buf.h_indptr[: n + 1]
        indptr[0] = 0
        np.cumsum(buf.h_counts[:n], out=indptr[1:])
        nnz = int(indptr[n])
        buf._grow_csr(nnz)
        buf.d_indptr[: n + 1].copy_to_device(indptr, stream=s)
        _fill_kernel[_launch(n, s)](buf.d_X, n, buf.d_indptr, buf.d_indices, buf.d_data)
        if stats is not None:
            stats.add(buf.d_indptr, buf.d_indices, buf.d_data, buf.d_Y, n, s)
        if nnz:
            buf.d_indices[:nnz].copy_to_host(buf.h_indices[:nnz], stream=s)
            buf.d_data[:nnz].copy_to_host(buf.h_data[:nnz], stream=s)
        if objective:
            buf.d_obj[:n].copy_to_host(buf.h_obj[:n], stream=s)
        s.synchronize()
        triple = (indptr.copy(), buf.h_indices[:nnz].copy(), buf.h_data[:nnz].copy())
        if objective:
            return triple, buf.h_obj[:n].copy()
        return triple

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
        self._check_chunk(Y, buffers)
        if n == 0:
            return buffers.h_X[:0], buffers.h_obj[:0]
        self._submit(Y, buffers, count=False)
        s = buffers.stream
        buffers.d_X[:n].copy_to_host(buffers.h_X[:n], stream=s)
        buffers.d_obj[:n].copy_to_host(buffers.h_obj[:n], stream=s)
        s.synchronize()
        return buffers.h_X[:n], buffers.h_obj[:n]


def _buffer_sets(buffers, prepared, chunk_size, n):
    """The buffer sets a pass uses: the caller's (one CudaBuffers or a
    sequence of them), or two fresh ones when there is more than one chunk."""
    rows = min(chunk_size, max(n, 1))
    if buffers is None:
        return [prepared.allocate(rows) for _ in range(2 if n > chunk_size else 1)]
    sets = [buffers] if isinstance(buffers, CudaBuffers) else list(buffers)
    for buf in sets:
        if buf.capacity < rows or buf.dtype != prepared.dtype:
            raise ValueError(
                f"buffers hold {buf.capacity} rows of {buf.dtype}; this pass needs {rows} of {prepared.dtype}"
            )
    return sets


def _pipeline(Y, prepared, chunk_size, stats=None, objective=False, buffers=None):
    """Yield ``(start, stop, result)`` per chunk, one chunk in flight per buffer set.

    A chunk is queued on a buffer set's stream before the previous chunk is
    collected, so with two sets one chunk's transfer and encoding run while
    the other is filled and copied back. A set is reused only after the
    chunk it holds has been collected.
    """
    n = Y.shape[0]
    sets = _buffer_sets(buffers, prepared, chunk_size, n)
    pending = deque()
    for c, (start, stop) in enumerate(iter_chunks(n, chunk_size)):
        buf = sets[c % len(sets)]
        if len(pending) == len(sets):  # buf still holds the oldest chunk
            pbuf, pstart, pstop = pending.popleft()
            yield pstart, pstop, prepared._collect(pbuf, pstop - pstart, stats, objective)
        prepared._submit(Y[start:stop], buf)
        pending.append((buf, start, stop))
    while pending:
        pbuf, pstart, pstop = pending.popleft()
        yield pstart, pstop, prepared._collect(pbuf, pstop - pstart, stats, objective)


def _check_data(Y, prepared):
    Y = np.asarray(Y)
    if Y.ndim != 2 or Y.shape[1] != prepared.n_features or Y.dtype != prepared.dtype:
        raise ValueError(
            f"Y must be 2-D {prepared.dtype} with {prepared.n_features} columns, got {Y.dtype} {Y.shape}"
        )
    return np.ascontiguousarray(Y)


def encode_csr_cuda(Y, prepared, chunk_size, *, return_objective=False, buffers=None):
    """Encode ``Y`` on the GPU chunk by chunk into one CSR array.

    Twin of :func:`fastkds.sparse_encode`'s CPU pass: the dense codes never leave
    the device; each chunk's CSR arrays are assembled there and copied back.

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
        Reused buffer sets (see :func:`run_epoch_cuda`); by default two are
        allocated when there is more than one chunk.

    Returns
    -------
    codes : scipy.sparse.csr_array of shape (n, m)
        Column indices ascending, no explicit zeros.
    obj : ndarray of shape (n,)
        Only when ``return_objective``.
    """
    require_cuda()
    Y = _check_data(Y, prepared)
    chunk_size = max(1, int(chunk_size))
    parts = []
    objectives = []
    for _, _, res in _pipeline(Y, prepared, chunk_size, None, return_objective, buffers):
        if return_objective:
            res, obj = res
            objectives.append(obj)
        parts.append(res)
    codes = concatenate_csr(parts, prepared.n_atoms, prepared.dtype)
    if return_objective:
        obj = np.concatenate(objectives) if objectives else np.empty(0, prepared.dtype)
        return codes, obj
    return codes


def statistics_cuda(indptr, indices, data, Y, *, n_atoms=None, chunk_size=None):
    """Sufficient statistics ``(X^T X, X^T 1, X^T Y)`` of CSR codes on the GPU.

    Twin of ``_kernels.accumulate_statistics`` (SPEC 5a), accumulated in
    float64. Rows stream through the device in chunks that are multiples of
    :data:`STATS_ROWS`, and partial sums are added in a fixed order, so the
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
        Rows per device chunk, rounded up to a multiple of STATS_ROWS; by
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
        step = min(step, -(-int(chunk_size) // STATS_ROWS) * STATS_ROWS)
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
    """GPU twin of :func:`fastkds.solvers.run_epoch`.

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
        the same shape and dtype), reused across epochs. Two sets let
        transfers overlap compute; by default two are allocated per call.
    codes_out : list or None
        Receives each chunk's CSR triple ``(indptr, indices, data)``.

    Returns
    -------
    stats
    """
    require_cuda()
    Y = _check_data(Y, prepared)
    chunk_size = max(1, int(chunk_size))
    ws = None
    if stats is not None:
        # the workspace serves both buffer sets' streams; _collect synchronizes
        # each chunk before the next is collected, so its kernels never overlap
        rows = min(chunk_size, max(Y.shape[0], 1))
        ws = _StatsWorkspace(prepared.n_atoms, prepared.n_features, rows, cuda.stream())
        ws.stream.synchronize()
    for start, stop, (triple, obj) in _pipeline(Y, prepared, chunk_size, ws, True, buffers):
        if stats is not None:
            _add_chunk_totals(stats, Y[start:stop], obj)
        if codes_out is not None:
            codes_out.append(triple)
    if stats is not None:
        XtX, s, XtY = ws.result(ws.stream)
        stats.XtX += XtX
        stats.s += s
        stats.XtY += XtY
    return stats


def _add_chunk_totals(stats, Y, objective):
    """What ``SufficientStatistics.add_chunk`` does besides the kernel call:
    objective sum, sample count and the re-seed candidates."""
    stats.objective_sum += float(np.sum(objective, dtype=np.float64))
    stats.n_samples += Y.shape[0]
    if stats.n_candidates:
        stats._sample_candidates(Y, objective)

"""Device code of the optional CUDA path: the numba.cuda kernels and device
functions, and the simulator's stand-ins for the warp primitives.

:mod:`fastkds.gpu`, the host side (availability, launch configurations,
buffers, streams, the prepared dictionary), imports this module and never the
reverse: every size and launch setting reaches a kernel as an argument, so
the host's settings (block sizes, ``CUDA_STATS_ROWS``, the budgets) live in
:mod:`fastkds._config` alone; the constants here are the kernels' own
compile-time limits. Importing this module imports :mod:`numba.cuda`;
``import fastkds`` never does.

The kernels are twins of :mod:`fastkds._kernels`: the same
mathematics, generic in float32/float64, with every constant taken from the
typed array ``ks = arange(m + 1, dtype)`` (a Python float literal would
promote float32 arithmetic to float64). The thread encoder's steps (the
projection, the sparse iterate, the objective) and the CSR fill are the CPU
kernels' own helpers, :mod:`fastkds._shared_kernels`, compiled again as
device functions. Results match the CPU kernels to rounding, not bitwise:
the GPU compiler contracts ``a * b + c`` into fused multiply-adds,
``B = Y W^T`` and ``||y||^2`` are summed in another order than BLAS does on
the host, the CPU encoder first tries each point's previous support as it
is, and the warp encoder adds its sums as a tree.

How threads map to work
-----------------------
- Warp encoder (:func:`_make_warp_encode_kernel`, the default): one point per
  warp of 32 threads, lane ``l`` owning atoms ``l, l + 32, ...`` (R = ceil(m /
  32) of them, a compile-time constant, so the per-atom state lives in
  registers). Supports are warp ballots, the sums and the maximum of the
  projection are butterfly reductions (every lane gets the same bits, since
  addition commutes), and ``z G`` over the support of z broadcasts each
  ``z_k`` with a shuffle and reads row k of ``G`` coalesced. ``B = Y W^T`` and
  ``||y||^2`` are formed in the kernel from Y and ``W^T`` (padded to 32 R
  columns with zeros), so nothing of size n x m is written besides the codes;
  or, on many features, read from the chunk's ``B`` formed first by the tiled
  :func:`products_kernel` (one compiled variant each, the same bits).
  At most :data:`WARP_MAX_ATOMS` atoms. numba's CUDA simulator
  has no shuffles or ballots: under it this module defines stand-ins, a
  barrier per simulated warp.
- Thread encoder (:func:`encode_kernel`, ``kernel="thread"``): one point per
  thread, grid-stride loop, on ``Bt = (Y W^T)^T`` (m x n) and ``yy`` formed by
  :func:`bt_kernel` and :func:`sqnorm_kernel`. ``cuda.local.array`` needs a
  compile-time size, so per-thread scratch lives in global arrays of shape
  (m, n_slots), one column per thread ("slot"); a launch may use fewer
  threads than there are slots, never more.
- Either way every point is computed by one thread or one warp alone, so codes
  do not depend on the launch configuration. Both encoders also write each
  row's support size (``counts``).
- Far atoms (the centred step's rule, :mod:`fastkds.prepared`): with far
  atoms each chunk is encoded on every atom and on the near ones alone;
  :func:`may_use_far_kernel` (one point per thread) marks the points whose
  screening radius holds a far atom, and :func:`merge_near_kernel` (one row
  per thread) gives the other rows the near atoms' codes.
- CSR assembly, all on the device: an exclusive prefix sum of the counts into
  ``indptr`` (:func:`scan_tiles_kernel`: a block scans a tile of
  ``threads * items`` rows in shared memory and writes the tile's total;
  :func:`scan_offsets_kernel`: one block scans the tile totals;
  :func:`scan_add_kernel`: tile offsets added), then one thread per row
  writes its ascending column indices and values (:func:`fill_kernel`).
  Integer sums, so any launch gives the same ``indptr``.
- The neighbours' vote (:func:`vote_kernel`): one point per thread,
  grid-stride loop, with the per-point lists (atom distances, probed
  atoms, the q best references) in global arrays, one row per thread
  ("slot"), as the thread encoder's scratch. The search's helpers are
  :mod:`fastkds._vote_kernels`' own (distances in float64 from the
  differences, ties to the smaller index), so a point's neighbours and
  label are the CPU's up to the rounding of distances within an ulp.
- Sufficient statistics (:func:`stats_partial_kernel`): ``X^T [X | 1 | Y]``
  (m x (m + 1 + d)) in float64. Rows are cut into fixed parts of
  :data:`~fastkds._config.CUDA_STATS_ROWS` rows; one thread per (part, output column)
  loops over the rows of its part in order and owns its column of the part's
  partial sum, so there are no atomics. A second kernel, one thread per output entry, adds the
  partials to the running total in part order. The result depends only on the
  row order and the part boundaries, not on the launch configuration (and not
  on how rows are streamed either, when chunks are multiples of CUDA_STATS_ROWS, as
  :func:`~fastkds.gpu.statistics_cuda` makes them).
"""

import math

import numba
import numpy as np
from numba import cuda

from . import _shared_kernels, _vote_kernels
from ._active_set import MAX_STEPS, RTOL_EPS, SINGULAR

#: The warp encoder keeps a lane's candidate flags in the bits of one int64:
#: at most 64 atoms per lane, 32 lanes.
WARP_MAX_ATOMS = 64 * 32

#: Entries of the scan kernels' shared arrays (a compile-time size): the most
#: threads per block of the prefix sum, CUDA's limit too.
SCAN_MAX_THREADS = 1024

# --------------------------------------------------------------------------
# Warp primitives (the simulator has none: stand-ins below)
# --------------------------------------------------------------------------

if numba.config.ENABLE_CUDASIM:
    import threading

    _SIM_LOCK = threading.Lock()

    def _sim_exchange(value):
        """Every lane of the calling thread's warp deposits ``value``; each
        gets the warp's 32 values. The simulator runs each CUDA thread as a
        Python thread: a barrier per warp stands in for the lockstep a
        shuffle relies on (every lane must call, as with a full mask). Two
        slot lists, used in turn, let one barrier per exchange suffice: a
        lane writes list k % 2 again only after all have passed exchange
        k + 1, so after all have read exchange k."""
        me = threading.current_thread()
        lane = me.thread_id % 32
        with _SIM_LOCK:
            warps = me._manager.__dict__.setdefault("_fastkds_warps", {})
            key = me.thread_id // 32
            if key not in warps:
                warps[key] = (threading.Barrier(32, timeout=120), ([None] * 32, [None] * 32))
            barrier, slots = warps[key]
        turn = me.__dict__.get("_fastkds_turn", 0)
        me._fastkds_turn = 1 - turn
        slots[turn][lane] = value
        barrier.wait()
        return lane, list(slots[turn])

    def _shfl(value, src):
        return _sim_exchange(value)[1][src]

    def _shfl_xor(value, lane_mask):
        lane, values = _sim_exchange(value)
        return values[lane ^ lane_mask]

    def _ballot(pred):
        values = _sim_exchange(bool(pred))[1]
        return sum(1 << lane for lane in range(32) if values[lane])

    # One exchange per reduction instead of five shuffles: the simulator's
    # cost is the number of barriers. Every lane adds in lane order, so all
    # get the same bits, as with the butterfly on a GPU.
    def _warp_sum(value):
        values = _sim_exchange(value)[1]
        for lane in range(1, 32):
            values[0] += values[lane]
        return values[0]

    def _warp_max(value):
        return max(_sim_exchange(value)[1])

    def _warp_count(bits, r):
        return sum(((b >> r) & 1) for b in _sim_exchange(bits)[1])

    def _warp_argmin(value, index):
        best, at = np.inf, -1
        for v, j in _sim_exchange((value, index))[1]:
            if j >= 0 and (at < 0 or v < best or (v == best and j < at)):
                best, at = v, j
        return best, at

else:

    @cuda.jit(device=True)
    def _shfl(value, src):
        return cuda.shfl_sync(0xFFFFFFFF, value, src)

    @cuda.jit(device=True)
    def _shfl_xor(value, lane_mask):
        return cuda.shfl_xor_sync(0xFFFFFFFF, value, lane_mask)

    @cuda.jit(device=True)
    def _ballot(pred):
        # ballot_sync gives an int32: keep its 32 bits, not its sign
        return numba.int64(cuda.ballot_sync(0xFFFFFFFF, pred)) & 0xFFFFFFFF

    @cuda.jit(device=True)
    def _warp_sum(value):
        """Sum over the warp, the same bits on every lane (butterfly: each step
        adds two values that the partner lane adds in the other order)."""
        off = 16
        while off > 0:
            value += _shfl_xor(value, off)
            off //= 2
        return value

    @cuda.jit(device=True)
    def _warp_max(value):
        off = 16
        while off > 0:
            other = _shfl_xor(value, off)
            if other > value:
                value = other
            off //= 2
        return value

    @cuda.jit(device=True)
    def _warp_count(bits, r):
        """Lanes of the warp whose bit ``r`` of ``bits`` is set."""
        return cuda.popc(_ballot(((bits >> r) & 1) != 0))

    @cuda.jit(device=True)
    def _warp_argmin(value, index):
        """The smallest ``value`` of the lanes whose ``index`` is not
        negative, and its index (ties to the smaller index; ``(inf, -1)``
        where every index is negative): a total order, so every lane of the
        butterfly ends with the same pair."""
        off = 16
        while off > 0:
            v = _shfl_xor(value, off)
            j = _shfl_xor(index, off)
            if j >= 0 and (index < 0 or v < value or (v == value and j < index)):
                value = v
                index = j
            off //= 2
        return value, index


@cuda.jit(device=True)
def _warp_min(value):
    """The smallest ``value`` over the warp: the largest of the negated
    (negation is exact), the same bits on every lane."""
    return -_warp_max(-value)


# --------------------------------------------------------------------------
# The warp encoder: one point per warp
# --------------------------------------------------------------------------

_WARP_KERNELS = {}


@cuda.jit(device=True, inline=True)
def _warp_rows(Y, i, Wt, B, yy_rows, lane, b, zero, products):
    """``b = W y`` and ``||y||^2`` of row i of ``Y`` (see
    :func:`_warp_products`), or read from ``B`` and ``yy_rows`` where the
    product kernel formed them first (``products``, a compile-time
    constant): the same bits, as the sums run in the same order."""
    if products:
        for r in range(b.shape[0]):
            b[r] = B[i, 32 * r + lane]
        return yy_rows[i]
    return _warp_products(Y, i, Wt, lane, b, zero)


@cuda.jit(device=True, inline=True)
def _warp_products(Y, i, Wt, lane, b, zero):
    """``b = W y`` for row i of ``Y``, lane ``lane`` for its atoms ``32 r +
    lane`` (``b``'s slots r), from ``Wt`` (d x 32R); returns ``||y||^2``.
    Inlined where numba compiles the kernel, so ``b`` stays in registers."""
    yy = zero
    for r in range(b.shape[0]):
        b[r] = zero
    for k in range(Y.shape[1]):
        yk = Y[i, k]
        yy += yk * yk
        for r in range(b.shape[0]):
            b[r] += yk * Wt[k, 32 * r + lane]
    return yy


def warp_encode_kernel(R, dtype, products=False):
    """The warp encoder for ``R = ceil(m / 32)`` atoms per lane in ``dtype``
    (made once per process; numba caches the compiled code on disk); with
    ``products``, the variant that reads ``B = Y W^T`` and ``||y||^2`` from
    :func:`products_kernel`'s output instead of forming them."""
    key = (int(R), np.dtype(dtype).name, bool(products))
    if key not in _WARP_KERNELS:
        _WARP_KERNELS[key] = _make_warp_encode_kernel(int(R), numba.from_dtype(np.dtype(dtype)), bool(products))
    return _WARP_KERNELS[key]


def _make_warp_encode_kernel(R, nbtype, products):
    """Compile-time R, dtype and ``products``: ``cuda.local.array`` needs the
    first two, and with them the loops over r unroll and the per-atom state
    stays in registers; the third drops the branch not taken."""

    @cuda.jit(cache=True)
    def _warp_encode(Y, Wt, B, yy_rows, G, ww, alpha, lam, beta, ks, neg_inf, n, m, X, obj, counts, only):
        """Encode points 0..n-1 of ``Y``: codes into the rows of ``X``,
        objectives into ``obj``, support sizes into ``counts``; with a
        non-empty ``only`` (int32, n), the points i of ``only[i] != 0``
        alone (those the active-set encoder hands over). ``B`` (n x 32R)
        and ``yy_rows`` (n) are read in the ``products`` variant alone
        (empty arrays otherwise).

        Twin of ``_kernels._encode_point`` with the atoms spread over the
        lanes: lane l holds atom ``j = 32 r + l`` in slot r of ``b``, ``v``,
        ``z``, ``x``. ``Wt`` (d x 32R), ``G`` (32R x 32R) and ``ww`` (32R) are
        zero-padded; padded atoms are never candidates. Warps take points in
        a grid-stride loop; every lane of a warp runs the same iterations, as
        the full-mask shuffles and ballots require.
        """
        zero = ks[0]
        one = ks[1]
        half = one / (one + one)
        lane = cuda.threadIdx.x % 32
        warp = cuda.grid(1) // 32
        n_warps = cuda.gridsize(1) // 32
        b = cuda.local.array(R, nbtype)
        v = cuda.local.array(R, nbtype)
        z = cuda.local.array(R, nbtype)
        x = cuda.local.array(R, nbtype)
        for i in range(warp, n, n_warps):
            if only.shape[0] > 0 and only[i] == 0:
                continue
            # b = W y and ||y||^2, each lane for its atoms
            yy = _warp_rows(Y, i, Wt, B, yy_rows, lane, b, zero, products)
            for r in range(R):
                z[r] = zero
                x[r] = zero
            nx = 0
            for t in range(beta.shape[0]):
                # v = z - alpha * (z G + c), c = lam * dist - b, over supp(z)
                for r in range(R):
                    dj = yy - (b[r] + b[r]) + ww[32 * r + lane]
                    if dj < zero:  # rounding in the expanded form
                        dj = zero
                    v[r] = -alpha * (lam * dj - b[r])
                for r in range(R):
                    mask = _ballot(z[r] != zero)
                    while mask != 0:
                        src = cuda.ffs(mask) - 1
                        mask = mask & (mask - 1)
                        a = alpha * _shfl(z[r], src)
                        row = 32 * r + src
                        for r2 in range(R):
                            v[r2] -= a * G[row, 32 * r2 + lane]
                for r in range(R):
                    v[r] += z[r]
                # projection relative to max(v); the previous support bounds tau below
                vmax = neg_inf
                for r in range(R):
                    if 32 * r + lane < m and v[r] > vmax:
                        vmax = v[r]
                vmax = _warp_max(vmax)
                floor = -one
                if nx > 0:
                    s = zero
                    for r in range(R):
                        if x[r] != zero:
                            s += v[r] - vmax
                    s = (_warp_sum(s) - one) / ks[nx]
                    if s > floor:
                        floor = s
                # Michelot on the candidates (bit r of cb: slot r is one)
                cb = 0
                s = zero
                for r in range(R):
                    u = v[r] - vmax
                    if 32 * r + lane < m and u > floor:
                        cb |= 1 << r
                        s += u
                kc = 0
                for r in range(R):
                    kc += _warp_count(cb, r)
                tau = (_warp_sum(s) - one) / ks[kc]
                passes = 0
                going = True
                while going:
                    nb = 0
                    s = zero
                    for r in range(R):
                        if (cb >> r) & 1:
                            u = v[r] - vmax
                            if u > tau:
                                nb |= 1 << r
                                s += u
                    kn = 0
                    for r in range(R):
                        kn += _warp_count(nb, r)
                    passes += 1
                    if kn == kc or passes > m:  # capped as on the CPU
                        going = False
                    else:  # (the sum only when it is used: kn, kc are warp-uniform)
                        tau = (_warp_sum(s) - one) / ks[kn]
                    kc = kn
                    cb = nb
                # x_new = max(v - tau, 0); z = x_new + beta (x_new - x_old)
                bt = beta[t]
                for r in range(R):
                    xo = x[r]
                    xn = zero
                    if (cb >> r) & 1:
                        xn = (v[r] - vmax) - tau
                    x[r] = xn
                    z[r] = xn + bt * (xn - xo)
                nx = kc
            # objective 1/2 ||y - x W||^2 + lam sum_j x_j dist_j via the Gram
            # form; v becomes G x (G is symmetric: W W^T by syrk)
            for r in range(R):
                v[r] = zero
            for r in range(R):
                mask = _ballot(x[r] != zero)
                while mask != 0:
                    src = cuda.ffs(mask) - 1
                    mask = mask & (mask - 1)
                    xq = _shfl(x[r], src)
                    row = 32 * r + src
                    for r2 in range(R):
                        v[r2] += xq * G[row, 32 * r2 + lane]
            rec = zero
            loc = zero
            for r in range(R):
                xj = x[r]
                if xj != zero:
                    dj = yy - (b[r] + b[r]) + ww[32 * r + lane]
                    if dj < zero:
                        dj = zero
                    rec -= (xj + xj) * b[r]
                    loc += xj * dj
                    rec += xj * v[r]
            rec = yy + _warp_sum(rec)
            loc = _warp_sum(loc)
            if rec < zero:
                rec = zero
            for r in range(R):
                j = 32 * r + lane
                if j < m:
                    X[i, j] = x[r]
            if lane == 0:
                obj[i] = half * rec + lam * loc
                counts[i] = nx

    return _warp_encode


# --------------------------------------------------------------------------
# The warp active-set encoder: exact codes, one point per warp
# --------------------------------------------------------------------------

#: The warp active-set encoder keeps support entry q on lane q: at most 32
#: atoms in a support. A point whose support would grow past it (or past
#: :data:`fastkds._active_set.MAX_STEPS` steps) goes to the accelerated
#: encoder, as the CPU hands over its degenerate points.
ACTIVE_SET_MAX_SUPPORT = 32

_ACTIVE_SET_KERNELS = {}


def warp_active_set_kernel(R, dtype, products=False):
    """The warp active-set encoder for ``R = ceil(m / 32)`` atoms per lane
    in ``dtype``, with or without ``products`` (made once per process, as
    :func:`warp_encode_kernel`)."""
    key = (int(R), np.dtype(dtype).name, bool(products))
    if key not in _ACTIVE_SET_KERNELS:
        nbtype = numba.from_dtype(np.dtype(dtype))
        _ACTIVE_SET_KERNELS[key] = _make_warp_active_set_kernel(int(R), nbtype, bool(products))
    return _ACTIVE_SET_KERNELS[key]


@cuda.jit(device=True)
def _nth_set_bit(mask, j):
    """The place of the ``j``-th set bit (from 0) of the low 32 bits of
    ``mask``, or -1 where fewer are set."""
    seen = 0
    for q in range(32):
        if (mask >> q) & 1:
            if seen == j:
                return q
            seen += 1
    return -1


@cuda.jit(device=True)
def _warp_solve_support(G, atom, c_atom, p, s, lane, row, col):
    """The CPU's ``_active_set._solve_support`` on a warp: lane q < p holds
    support entry q (its atom ``atom`` and ``c_atom = c[atom]``), row q of
    the Cholesky factor of ``G_PP + s 1 1^T`` in ``row`` and column q in
    ``col``. Returns ``(solved, z)``: False where a pivot shows affinely
    dependent atoms; else lane q's weight of the minimiser of q(x) over the
    support's affine hull.

    Right-looking Cholesky: step k's pivot and column come from lane k and
    the lanes below it, each lane updating its own row, so every entry gets
    the CPU's subtractions in the CPU's order. The triangular solves go by
    columns, a shuffle per unknown.
    """
    inside = lane < p
    for j in range(p):
        k = _shfl(atom, j)
        if inside and j <= lane:
            row[j] = numba.float64(G[atom, k]) + s
    for k in range(p):
        diag = _shfl(row[k], k)
        if diag <= SINGULAR * s:
            return False, 0.0
        lkk = math.sqrt(diag)
        if lane == k:
            row[k] = lkk
            col[k] = lkk
        elif inside and lane > k:
            row[k] = row[k] / lkk
        for j in range(k + 1, p):
            ljk = _shfl(row[k], j)
            if lane == k:
                col[j] = ljk
            if inside and lane >= j:
                row[j] -= row[k] * ljk
    # L y = (c_P, 1), then L^T z = y, both right-hand sides at once
    r0 = c_atom
    r1 = 1.0
    y0 = 0.0
    y1 = 0.0
    for i in range(p):
        if lane == i:
            y0 = r0 / row[i]
            y1 = r1 / row[i]
        a0 = _shfl(y0, i)
        a1 = _shfl(y1, i)
        if inside and lane > i:
            r0 -= row[i] * a0
            r1 -= row[i] * a1
    r0 = y0
    r1 = y1
    for i in range(p - 1, -1, -1):
        if lane == i:
            y0 = r0 / row[i]
            y1 = r1 / row[i]
        a0 = _shfl(y0, i)
        a1 = _shfl(y1, i)
        if inside and lane < i:
            r0 -= col[i] * a0
            r1 -= col[i] * a1
    if not inside:
        y0 = 0.0
        y1 = 0.0
    t = (1.0 - _warp_sum(y0)) / _warp_sum(y1)
    return True, y0 + t * y1


def _make_warp_active_set_kernel(R, nbtype, products):
    """Compile-time R, dtype and ``products``, as :func:`_make_warp_encode_kernel`."""
    P_MAX = ACTIVE_SET_MAX_SUPPORT

    @cuda.jit(cache=True)
    def _warp_active_set(Y, Wt, B, yy_rows, G, ww, lam, eps, ks, n, m, X, obj, counts, handed):
        """Exact codes of points 0..n-1 of ``Y`` by the CPU's active-set
        method (:func:`fastkds._active_set._active_set_point`): codes into
        the rows of ``X``, objectives into ``obj``, support sizes into
        ``counts``, and ``handed[i] = 1`` for each point it leaves to the
        accelerated encoder (then its other outputs are not written).

        ``Y``, ``Wt``, ``B``, ``yy_rows``, ``G``, ``ww`` as for the warp
        encoder (padded to 32 R atoms); ``lam`` and ``eps`` (the dtype's epsilon) float64, as the
        arithmetic is, whatever the dtype. Lane l holds ``b``, ``c`` and the
        gradient ``g`` of atoms ``32 r + l``, and support entry l (its atom,
        weight, ``c`` and ``b``); the gradient over all atoms reads row k
        of ``G`` for each support atom k, coalesced, the choice of the
        atom that enters is a warp argmin, and an atom that leaves is
        dropped by a ballot, the entries after it moved down by shuffles.
        """
        zero = ks[0]
        lane = cuda.threadIdx.x % 32
        warp = cuda.grid(1) // 32
        n_warps = cuda.gridsize(1) // 32
        b = cuda.local.array(R, nbtype)
        c = cuda.local.array(R, numba.float64)
        g = cuda.local.array(R, numba.float64)
        row = cuda.local.array(P_MAX, numba.float64)
        col = cuda.local.array(P_MAX, numba.float64)
        tol = RTOL_EPS * eps * (1.0 + lam + lam)
        for i in range(warp, n, n_warps):
            yy64 = numba.float64(_warp_rows(Y, i, Wt, B, yy_rows, lane, b, zero, products))
            # c = b - lam dist, the nearest atom, the largest squared norm
            best = math.inf
            j0 = -1
            s = 0.0
            for r in range(R):
                j = 32 * r + lane
                c[r] = 0.0
                if j < m:
                    bj = numba.float64(b[r])
                    wj = numba.float64(ww[j])
                    dj = _sq_distance(yy64, bj, wj, 0.0)
                    c[r] = bj - lam * dj
                    if dj < best:
                        best = dj
                        j0 = j
                    if wj > s:
                        s = wj
            best, j0 = _warp_argmin(best, j0)
            if j0 < 0:  # no finite distance: the accelerated encoder decides
                if lane == 0:
                    handed[i] = 1
                continue
            s = _warp_max(s)
            if s <= 0.0:
                s = 1.0  # every atom at the mean: any positive shift will do
            # the support starts at the nearest atom's vertex
            atom = -1
            x = 0.0
            c_atom = _shfl(c[j0 // 32], j0 % 32)
            b_atom = numba.float64(_shfl(b[j0 // 32], j0 % 32))
            if lane == 0:
                atom = j0
                x = 1.0
            held = 0  # bit r: atom 32 r + lane is in the support
            if lane == j0 % 32:
                held = 1 << (j0 // 32)
            p = 1
            steps = 0
            ok = True
            going = True
            while going:
                # g = G x - c over all atoms, from the support
                for r in range(R):
                    g[r] = -c[r]
                for q in range(p):
                    k = _shfl(atom, q)
                    xk = _shfl(x, q)
                    for r in range(R):
                        g[r] += xk * numba.float64(G[k, 32 * r + lane])
                tau = 0.0
                s_support = 0.0
                for q in range(p):
                    k = _shfl(atom, q)
                    tau += _shfl(x, q) * _shfl(g[k // 32], k % 32)
                    wk = numba.float64(ww[k])
                    if wk > s_support:  # no max() of two numbers: numba.cuda takes it for an iterable's
                        s_support = wk
                gmin = math.inf
                enter = -1
                for r in range(R):
                    j = 32 * r + lane
                    if j < m and ((held >> r) & 1) == 0 and g[r] < gmin:
                        wj = numba.float64(ww[j])
                        if wj < s_support:
                            wj = s_support
                        if g[r] < tau - tol * (yy64 + wj):
                            gmin = g[r]
                            enter = j
                gmin, enter = _warp_argmin(gmin, enter)
                if enter < 0:
                    going = False
                    continue
                if p == P_MAX:
                    ok = False
                    going = False
                    continue
                c_enter = _shfl(c[enter // 32], enter % 32)
                b_enter = numba.float64(_shfl(b[enter // 32], enter % 32))
                if lane == p:
                    atom = enter
                    x = 0.0
                    c_atom = c_enter
                    b_atom = b_enter
                if lane == enter % 32:
                    held |= 1 << (enter // 32)
                p += 1
                inner = True
                while inner:
                    steps += 1
                    solved = False
                    z = 0.0
                    if steps <= MAX_STEPS:
                        solved, z = _warp_solve_support(G, atom, c_atom, p, s, lane, row, col)
                    if not solved:
                        ok = False
                        inner = False
                        going = False
                        continue
                    inside = lane < p
                    # the largest move towards z that keeps every weight >= 0
                    blocked_here = inside and z <= 0.0
                    ratio = 1.0
                    if blocked_here:
                        ratio = x / (x - z) if x > 0.0 else 0.0
                    t = _warp_min(ratio)  # at most 1: the lanes not blocked offer 1
                    if _ballot(blocked_here) == 0:
                        if inside:
                            x = z
                        inner = False
                        continue
                    # drop the atoms that reach zero (at least the one that set t)
                    xq = 0.0
                    if inside:
                        xq = x + t * (z - x)
                        if blocked_here and (x <= 0.0 or x / (x - z) <= t):
                            xq = 0.0
                    keep = inside and xq > 0.0
                    total = _warp_sum(xq if keep else 0.0)
                    gone = _ballot(inside and not keep)
                    while gone != 0:
                        q = cuda.ffs(gone) - 1
                        gone = gone & (gone - 1)
                        k = _shfl(atom, q)
                        if lane == k % 32:
                            held &= ~(1 << (k // 32))
                    kept = _ballot(keep)
                    src = _nth_set_bit(kept, lane)
                    fetch = src if src >= 0 else lane
                    atom_new = _shfl(atom, fetch)
                    x_new = _shfl(xq, fetch)
                    c_new = _shfl(c_atom, fetch)
                    b_new = _shfl(b_atom, fetch)
                    p = _warp_count(1 if keep else 0, 0)
                    if lane < p:
                        atom = atom_new
                        x = x_new / total  # back onto the simplex after rounding
                        c_atom = c_new
                        b_atom = b_new
                    else:
                        atom = -1
                        x = 0.0
            if not ok:
                if lane == 0:
                    handed[i] = 1
                continue
            inside = lane < p
            total = _warp_sum(x if inside else 0.0)
            if inside:
                x = x / total  # the solves hold sum(x) = 1 to rounding; make it exact
            # f = 1/2 (||y||^2 - 2 x.b + x^T G x) + lam x.dist, from the support;
            # g becomes each lane's atoms' weights, for the row of X
            acc = 0.0
            for r in range(R):
                g[r] = 0.0
            for q in range(p):
                k = _shfl(atom, q)
                xk = _shfl(x, q)
                if inside:
                    acc += xk * numba.float64(G[atom, k])
                if lane == k % 32:
                    g[k // 32] = xk
            rec = 0.0
            loc = 0.0
            if inside:
                dk = _sq_distance(yy64, b_atom, numba.float64(ww[atom]), 0.0)
                rec = x * (acc - (b_atom + b_atom))
                loc = x * dk
            rec = yy64 + _warp_sum(rec)
            loc = _warp_sum(loc)
            if rec < 0.0:
                rec = 0.0
            for r in range(R):
                j = 32 * r + lane
                if j < m:
                    X[i, j] = g[r]
            if lane == 0:
                obj[i] = 0.5 * rec + lam * loc
                counts[i] = p
                handed[i] = 0

    return _warp_active_set


# --------------------------------------------------------------------------
# Device functions: the CPU encoder's helpers, and the thread encoder's point
# --------------------------------------------------------------------------


def _device(helper):
    """A helper of :mod:`fastkds._shared_kernels` compiled, from the Python
    source the CPU kernels compile, as a CUDA device function: the projection
    and the steps of the iteration are written once, so the thread encoder
    cannot drift from the CPU encoder. (numba keys a cached kernel to its own
    file alone: an edit to a helper reaches the kernels cached from this file
    once that cache is cleared.)"""
    return cuda.jit(device=True)(helper.py_func)


_vmax = _device(_shared_kernels.max_entry)
_support_floor = _device(_shared_kernels.support_floor)
_simplex_support_michelot = _device(_shared_kernels.simplex_support_michelot)
_sq_distance = _device(_shared_kernels.sq_distance)
_sq_distances = _device(_shared_kernels.sq_distances)
_gram_step = _device(_shared_kernels.gram_step)
_advance_iterate = _device(_shared_kernels.advance_iterate)
_objective = _device(_shared_kernels.point_objective)
_fill_csr_row = _device(_shared_kernels.fill_csr_row)
_vote_distance = _device(_vote_kernels._sq_distance)
_vote_insert = _device(_vote_kernels._insert)
_vote_next_atoms = _device(_vote_kernels._probe_atoms)


@cuda.jit(device=True)
def _encode_point(b, yy, G, ww, alpha, lam, beta, ks, x, ac, dist, v, z, cand, zidx, xs, xold):
    """The CPU per-point encoder's iteration (``_kernels._encode_point``)
    without its shortcuts: encode one point, return f(x; y, W) and the size
    of the support of x.

    All vector arguments are 1-D views of length m (possibly strided:
    columns of the scratch arrays and of ``Bt``); ``x`` must be zero on
    entry. Each step forms ``v = z - alpha (z G + c)`` over the support of z
    and projects it from a lower bound given by the previous support; the
    CPU encoder first tries the previous support as it is, which changes
    only the rounding.
    """
    m = G.shape[0]
    zero = ks[0]
    _sq_distances(b, yy, ww, ks, dist)
    for j in range(m):
        ac[j] = -alpha * (lam * dist[j] - b[j])
        z[j] = zero
    nz = 0
    nx = 0
    for t in range(beta.shape[0]):
        for j in range(m):
            v[j] = ac[j]
        _gram_step(v, z, zidx, nz, alpha, G, ks)
        vmax = _vmax(v)
        floor = _support_floor(v, xs, 0, nx, vmax, ks)
        tau, k = _simplex_support_michelot(v, vmax, floor, ks, cand)
        nz = _advance_iterate(v, vmax, tau, cand, k, beta[t], x, z, xs, nx, zidx, nz, xold, ks)
        nx = k
    return _objective(b, yy, G, lam, ks, x, xs, nx, dist), nx


# --------------------------------------------------------------------------
# Kernels: per-chunk products and the thread encoder
# --------------------------------------------------------------------------

#: The product kernel's tiles: a block of PRODUCT_THREADS^2 threads forms a
#: PRODUCT_TILE^2 tile of ``B`` (each thread a 4 x 4 micro-tile), reading
#: PRODUCT_DEPTH features of both factors at a time into shared memory.
PRODUCT_THREADS = 16
PRODUCT_TILE = 4 * PRODUCT_THREADS
PRODUCT_DEPTH = 16

_PRODUCT_KERNELS = {}


def products_kernel(dtype):
    """The tiled product ``B = Y Wt`` in ``dtype`` (made once per process)."""
    key = np.dtype(dtype).name
    if key not in _PRODUCT_KERNELS:
        _PRODUCT_KERNELS[key] = _make_products_kernel(numba.from_dtype(np.dtype(dtype)))
    return _PRODUCT_KERNELS[key]


@cuda.jit(device=True, inline=True)
def _stage_entry(src, r0, c0, rows, cols, tile, e, zero):
    """Entry ``e`` (row-major) of the shared ``tile``: ``src[r0 + r, c0 +
    c]``, or zero past the first ``rows`` x ``cols`` of ``src``."""
    r = e // tile.shape[1]
    c = e - r * tile.shape[1]
    value = zero
    if r0 + r < rows and c0 + c < cols:
        value = src[r0 + r, c0 + c]
    tile[r, c] = value


def _make_products_kernel(nbtype):
    """Compile-time dtype: the shared tiles and the micro-tile need it."""
    T, DEPTH, P = PRODUCT_TILE, PRODUCT_DEPTH, PRODUCT_THREADS
    U = T // P  # micro-tile side
    LOADS = T * DEPTH // (P * P)  # entries of each factor one thread loads per depth step

    @cuda.jit(cache=True)
    def _products(Y, Wt, n, ks, B):
        """``B[i, j] = sum_k Y[i, k] Wt[k, j]`` for i < n, summed over k in
        order from ``ks[0]``, as :func:`_warp_products` sums: the warp
        encoders get the same bits either way.

        Blocks of P x P threads; block (bx, by) forms the column tile ``bx``
        of the row tiles ``by, by + gridDim.y, ...``; thread (tx, ty) owns
        the entries of rows ``ty + P u`` and columns ``tx + P v`` of its
        tile. Each depth step loads T x DEPTH entries of Y and DEPTH x T of
        ``Wt`` into shared memory (zeros past the edges, which are never
        summed) and every thread reads them from there.
        """
        zero = ks[0]
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        flat = ty * P + tx
        d = Y.shape[1]
        mp = Wt.shape[1]
        Ys = cuda.shared.array((T, DEPTH), nbtype)
        Ws = cuda.shared.array((DEPTH, T), nbtype)
        acc = cuda.local.array((U, U), nbtype)
        a = cuda.local.array(U, nbtype)
        j0 = cuda.blockIdx.x * T
        for i0 in range(cuda.blockIdx.y * T, n, cuda.gridDim.y * T):
            for u in range(U):
                for v in range(U):
                    acc[u, v] = zero
            for k0 in range(0, d, DEPTH):
                for q in range(LOADS):
                    # Y by rows (consecutive threads, consecutive features),
                    # Wt by columns (consecutive threads, consecutive atoms)
                    _stage_entry(Y, i0, k0, n, d, Ys, flat + P * P * q, zero)
                    _stage_entry(Wt, k0, j0, d, mp, Ws, flat + P * P * q, zero)
                cuda.syncthreads()
                depth = d - k0  # (not min(): this numba-cuda's overload takes an iterable alone)
                if depth > DEPTH:
                    depth = DEPTH
                for kk in range(depth):
                    for u in range(U):
                        a[u] = Ys[ty + P * u, kk]
                    for v in range(U):
                        w = Ws[kk, tx + P * v]
                        for u in range(U):
                            acc[u, v] += a[u] * w
                cuda.syncthreads()
            for u in range(U):
                i = i0 + ty + P * u
                if i < n:
                    for v in range(U):
                        j = j0 + tx + P * v
                        if j < mp:
                            B[i, j] = acc[u, v]

    return _products


@cuda.jit(cache=True)
def bt_kernel(Y, W, n, ks, Bt):
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
def sqnorm_kernel(Y, n, ks, yy):
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
def encode_kernel(Bt, yy, G, ww, alpha, lam, beta, ks, n, X, obj, counts, ac, dist, v, z, xold, cand, zidx, xs):
    """Encode points 0..n-1: codes into the rows of ``X``, objectives into
    ``obj``, support sizes into ``counts``.

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
        f, nx = _encode_point(
            Bt[:, i], yy[i], G, ww, alpha, lam, beta, ks, x,
            ac[:, slot], dist[:, slot], v[:, slot], z[:, slot],
            cand[:, slot], zidx[:, slot], xs[:, slot], xold[:, slot],
        )  # fmt: skip
        obj[i] = f
        counts[i] = nx


# --------------------------------------------------------------------------
# Kernels: far atoms (fastkds.prepared.PreparedDictionary.may_use_far)
# --------------------------------------------------------------------------


@cuda.jit(cache=True)
def may_use_far_kernel(Y, W, ww, far, ratio, slack, n, uses_far):
    """``uses_far[i] = 1`` when a far atom lies within the screening radius
    of point i (``||y - w_j||^2 <= ratio * min_k ||y - w_k||^2``), else 0.

    The CPU's rule and margin (:meth:`PreparedDictionary.may_use_far`): each
    squared distance is taken ``slack * (||y||^2 + ||w||^2)`` towards "may
    use", here from direct differences in float64. One point per thread.
    """
    m = W.shape[0]
    d = W.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        yy = 0.0
        for k in range(d):
            yy += float(Y[i, k]) * float(Y[i, k])
        nearest = np.inf
        for j in range(m):
            acc = 0.0
            for k in range(d):
                diff = float(Y[i, k]) - float(W[j, k])
                acc += diff * diff
            acc += slack * (yy + float(ww[j]))
            if acc < nearest:
                nearest = acc
        flag = 0
        for q in range(far.shape[0]):
            j = far[q]
            acc = 0.0
            for k in range(d):
                diff = float(Y[i, k]) - float(W[j, k])
                acc += diff * diff
            if acc - slack * (yy + float(ww[j])) <= ratio * nearest:
                flag = 1
        uses_far[i] = flag


@cuda.jit(cache=True)
def merge_near_kernel(X, obj, counts, X_near, obj_near, counts_near, near, uses_far, n):
    """Rows i < n with ``uses_far[i] == 0`` take the near atoms' code
    (``X_near[i, q]`` into column ``near[q]``), objective and support size.
    One row per thread."""
    m = X.shape[1]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        if uses_far[i] == 0:
            for j in range(m):
                X[i, j] = 0
            for q in range(near.shape[0]):
                X[i, near[q]] = X_near[i, q]
            obj[i] = obj_near[i]
            counts[i] = counts_near[i]


# --------------------------------------------------------------------------
# Kernels: CSR assembly (prefix sum and fill)
# --------------------------------------------------------------------------


@cuda.jit(device=True)
def _block_scan(sh, value):
    """Inclusive sum of ``value`` over the threads of the block (all must
    call): ``(this thread's prefix, the block's total)``. Hillis-Steele in
    the shared array ``sh`` (at least blockDim.x entries)."""
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    sh[t] = value
    cuda.syncthreads()
    off = 1
    while off < nt:
        add = sh[t - off] if t >= off else 0
        cuda.syncthreads()
        sh[t] += add
        cuda.syncthreads()
        off *= 2
    res = sh[t]
    total = sh[nt - 1]
    cuda.syncthreads()  # sh is written again by the next call
    return res, total


@cuda.jit(cache=True)
def scan_tiles_kernel(counts, n, items, out, tile_sums):
    """Phase 1 of ``out[0] = 0, out[i + 1] = counts[0] + ... + counts[i]``.

    Block-stride loop over tiles of ``blockDim.x * items`` rows; thread t of
    a tile owns ``items`` consecutive rows. Writes the scan within each tile
    to ``out[i + 1]`` and each tile's total to ``tile_sums``.
    """
    sh = cuda.shared.array(SCAN_MAX_THREADS, numba.int64)
    t = cuda.threadIdx.x
    tile = cuda.blockDim.x * items
    n_tiles = (n + tile - 1) // tile
    for tb in range(cuda.blockIdx.x, n_tiles, cuda.gridDim.x):
        lo = tb * tile + t * items
        s = 0
        for q in range(items):
            if lo + q < n:
                s += counts[lo + q]
        incl, total = _block_scan(sh, s)
        run = incl - s
        for q in range(items):
            if lo + q < n:
                run += counts[lo + q]
                out[lo + q + 1] = run
        if t == 0:
            tile_sums[tb] = total


@cuda.jit(cache=True)
def scan_offsets_kernel(tile_sums, n_tiles):
    """Phase 2, one block: ``tile_sums`` becomes its exclusive prefix sum."""
    sh = cuda.shared.array(SCAN_MAX_THREADS, numba.int64)
    t = cuda.threadIdx.x
    carry = 0
    for base in range(0, n_tiles, cuda.blockDim.x):
        i = base + t
        val = tile_sums[i] if i < n_tiles else 0
        incl, total = _block_scan(sh, val)
        if i < n_tiles:
            tile_sums[i] = carry + incl - val
        carry += total


@cuda.jit(cache=True)
def scan_add_kernel(out, n, tile, tile_offsets):
    """Phase 3: add each tile's offset; ``out[0] = 0``."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    if start == 0:
        out[0] = 0
    for i in range(start, n, stride):
        out[i + 1] += tile_offsets[i // tile]


@cuda.jit(cache=True)
def fill_kernel(X, n, indptr, indices, data):
    """``_kernels.fill_csr`` on rows 0..n-1, one thread per row: ascending
    column indices, no explicit zeros."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        _fill_csr_row(X, i, indptr[i], indices, data)


# --------------------------------------------------------------------------
# Kernels: sufficient statistics in float64
# --------------------------------------------------------------------------


@cuda.jit(cache=True)
def stats_partial_kernel(indptr, indices, data, Y, n, rows_per_part, P):
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
def stats_reduce_kernel(P, n_parts, out):
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
def vote_kernel(
    Y, n, W, R, cell_start, cell_refs, cell_label, ref_label, ranked, atom_dist, probe, best_dist, best_idx, out
):
    """``out[i]``: the label :meth:`fastkds.label_vote.LabelVote.predict`
    gives row ``i < n`` of ``Y``, by the CPU's search and vote
    (:func:`fastkds._vote_kernels.nearest_references` with settled points,
    then :func:`fastkds._vote_kernels.vote` with no own votes).

    ``W`` the atoms, ``R`` the references, ``cell_refs[cell_start[a]:
    cell_start[a + 1]]`` atom ``a``'s cell, ``cell_label[a]`` the label all
    of them hold (-1: none or several), ``ref_label`` the references'
    labels, ``ranked`` whether the r-th voter counts ``1 / r``. Scratch,
    one row per thread: ``atom_dist`` (m), ``probe`` (``n_probe`` columns:
    the probed atoms), ``best_dist`` and ``best_idx`` (q columns: the
    voters).
    """
    slot = cuda.grid(1)
    stride = atom_dist.shape[0]  # one thread per scratch row, the rest idle
    if slot >= stride:
        return
    m = W.shape[0]
    q = best_idx.shape[1]
    dist = atom_dist[slot]
    probed = probe[slot]
    bd = best_dist[slot]
    bi = best_idx[slot]
    for i in range(slot, n, stride):
        for a in range(m):
            dist[a] = _vote_distance(Y, i, W, a)
        _vote_next_atoms(dist, probed)
        count = 0
        label = -2  # no reference in the probed cells yet
        for p in range(probed.shape[0]):
            a = probed[p]
            if cell_start[a + 1] > cell_start[a]:
                count += cell_start[a + 1] - cell_start[a]
                label = cell_label[a] if label == -2 or label == cell_label[a] else -1
        if label >= 0:  # every candidate holds one label: that is the vote
            out[i] = label
            continue
        for c in range(q):
            bd[c] = np.inf
            bi[c] = -1
        for p in range(probed.shape[0]):
            a = probed[p]
            for t in range(cell_start[a], cell_start[a + 1]):
                _vote_insert(bd, bi, _vote_distance(Y, i, R, cell_refs[t]), cell_refs[t])
        # no reference in the probed cells: further atoms, nearest first, up
        # to the first cell that holds one (dist marks the probed ones)
        p = probed.shape[0]
        while count == 0 and p < m:
            _vote_next_atoms(dist, probed[:1])
            a = probed[0]
            for t in range(cell_start[a], cell_start[a + 1]):
                count += 1
                _vote_insert(bd, bi, _vote_distance(Y, i, R, cell_refs[t]), cell_refs[t])
            p += 1
        # the label most voters hold, a tie to the nearest voter's: voters
        # come nearest first, so the first to reach the most votes wins
        top = 0.0
        out[i] = -1
        for c in range(q):
            if bi[c] >= 0:
                held = 0.0  # summed in the CPU's order: the same float
                for e in range(q):
                    if bi[e] >= 0 and ref_label[bi[e]] == ref_label[bi[c]]:
                        held += 1.0 / (e + 1.0) if ranked else 1.0
                if held > top:
                    top = held
                    out[i] = ref_label[bi[c]]

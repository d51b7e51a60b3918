"""Numba CPU kernels: simplex projection, the KDS encoder, CSR assembly and
sufficient statistics.

Conventions (docs/algorithm.md): rows are points. Every kernel is generic in
the floating dtype (float32 or float64). Numba types a Python float literal as
float64, which would silently promote float32 arithmetic, so kernels take their
constants from a typed array ``ks = arange(m + 1, dtype)``: ``ks[0]`` is zero,
``ks[1]`` is one and ``ks[k]`` is ``k`` as a float of the working dtype.

Parallel kernels split the points into blocks (fixed blocks of ``BLOCK`` or
``CLAIM_ROWS`` rows, which the threads claim as they come free, or, for the
lockstep encoder, blocks whose size may follow the thread count but whose
split changes no point's code), so the work each point gets, and the order of
every reduction, does not depend on the number of threads: results are
bitwise identical for any ``n_jobs``.

Parallel kernels (here and in the other kernel modules) hold no array
expressions: no ``np.zeros``, ``np.full`` or ``np.arange``, no slice
assignment, no ``.max()``. Numba turns each into a parallel loop of its own,
compiled apart, several seconds of a first fit in all; they allocate with
``np.empty`` and fill by loops, or call a plain ``njit`` helper.
"""

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from ._shared_kernels import (
    advance_iterate,
    fill_csr_row,
    point_objective,
    simplex_support_michelot,
    sq_distances,
    support_floor,
    max_entry,
)

#: Points per parallel work item. Fixed (not derived from the thread count) so
#: that results do not depend on how many threads run.
BLOCK = 256

#: k-means++ skips a row for a candidate only where a bound puts the
#: candidate at least ``1 + SEEDING_SLACK`` times as far from the row as its
#: nearest seed: the excess covers the rounding of the distances compared
#: (relative 1e-6, far above float64's for the sums of any d a machine
#: holds), so a skip never changes a distance the kernel would have kept.
SEEDING_SLACK = 1e-6


#: Points per block of the per-point encoders (:func:`encode_codes_points`,
#: :func:`fastkds._active_set.encode_codes_active_set`), which the threads
#: claim one at a time (:func:`claim_block`): short beside a chunk, so the
#: threads finish together, and long beside the claim (one atomic addition).
CLAIM_ROWS = 32


@njit(cache=True, nogil=True)
def block_counter():
    """The counter :func:`claim_block` hands blocks out from: no block taken yet."""
    counter = np.empty(1, dtype=np.int64)
    counter[0] = 0
    return counter


@intrinsic
def claim_block(typingctx, counter):
    """The next block no thread has taken yet, from a :func:`block_counter`
    (an int64 array): ``counter[0] += 1`` as one atomic instruction, the
    value before returned.

    The parallel kernels run one loop a thread, ``for _ in
    prange(n_threads)``, whose body claims blocks until they run out,
    rather than a ``prange`` over the blocks, which hands each thread a
    fixed share. Blocks take uneven time (sorted data, points whose codes
    take more steps), and on a shared machine a core is now and then lent
    to other work; with a fixed share the fit waits for the thread that
    drew the slower part, where claimed blocks go to whichever thread is
    free, so the threads finish within a block of each other
    (docs/experiments.md, "Blocks claimed as the threads come free").
    Each block's work and output do not depend on the thread that takes
    it, so results do not depend on the number of threads.
    """
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None
    sig = types.int64(counter)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", array.data, ir.Constant(ir.IntType(64), 1), "monotonic")

    return sig, codegen


# --------------------------------------------------------------------------
# Projection onto the probability simplex
# --------------------------------------------------------------------------


# Both methods work relative to max(v) (see fastkds._shared_kernels).


@njit(cache=True, nogil=True)
def _simplex_threshold_sorted(v, vmax, ks):
    """Threshold of the projection of ``v``, relative to ``vmax = max(v)``,
    by the sorted method (the reference).

    Sort descending, cumulative sums c, rho = the largest j with
    ``u_j - (c_j - 1) / j > 0``; ``tau = (c_rho - 1) / rho``.
    """
    one = ks[1]
    u = np.sort(v - vmax)[::-1]
    c = ks[0]
    c_rho = ks[0]
    rho = 1
    # The j that pass the test form a prefix: stop at the first that fails,
    # before the running sum can reach entries so negative that it overflows.
    in_prefix = True
    for j in range(v.shape[0]):
        if in_prefix:
            c += u[j]
            if u[j] - (c - one) / ks[j + 1] > 0:
                rho = j + 1
                c_rho = c
            else:
                in_prefix = False
    return (c_rho - one) / ks[rho]


@njit(parallel=True, cache=True)
def project_simplex_rows(V, out, ks, sorted_method):
    """Project every row of ``V`` onto the probability simplex, into ``out``."""
    n, m = V.shape
    zero = ks[0]
    one = ks[1]
    for i in prange(n):
        vmax = max_entry(V[i])
        if sorted_method:
            tau = _simplex_threshold_sorted(V[i], vmax, ks)
        else:
            tau, _ = simplex_support_michelot(V[i], vmax, -one, ks, np.empty(m, dtype=np.int64))
        for j in range(m):
            x = (V[i, j] - vmax) - tau
            out[i, j] = x if x > zero else zero


# --------------------------------------------------------------------------
# Encoder: accelerated projected gradient in Gram form (docs/algorithm.md, "Encoder")
# --------------------------------------------------------------------------


#: The encoder's length-m loops run over the atoms padded to a multiple of
#: this. LLVM vectorises them 8 wide and 4 deep (AVX-512), so a loop of fewer
#: than 32 iterations would run entirely in its scalar remainder: for m = 24
#: that is 3x slower than one padded vector pass. Padding atoms have G = 0 and
#: a first step of -inf, so they never enter a support.
PAD = 32


def padded_atoms(m):
    """Length of the encoder's padded atom loops for ``m`` atoms."""
    return -(-m // PAD) * PAD


@njit(cache=True, nogil=True, error_model="numpy")
def _encode_point(b, yy, G, ww, alpha, lam, beta, ks, x, ac, dist, v, z, ins, cand, zidx, xs, xold):
    """Encode one point; returns its objective f(x; y, W) and the size of
    its support, ``xs[:nx]`` (ascending).

    ``b = W y`` (m), ``yy = ||y||^2``, ``G = W W^T`` zero-padded to
    (m, mp) columns, ``ww = diag(G)``; ``x`` (zeros on entry) receives the
    code. Scratch: ``ac, v, z`` (floats) and ``ins`` (ints) of length mp,
    with ``ac[m:] = -inf`` and ``z, ins`` zero on entry (and on return);
    ``dist, xold`` of length m; ``cand, xs`` of length mp; ``zidx`` of 2 mp.
    Each iteration computes ``v = z - alpha (z G + c)`` with
    ``c = lam * dist - b``, ``dist_j = ||y - w_j||^2``, and projects it.

    The iterate is sparse, and the kernel keeps it so:
    - ``z G`` sums only the rows of G on the support of z (``zidx``), so an
      iteration costs O(m * nnz(z)) instead of O(m^2); for up to three rows
      one fused, vectorised pass computes all of v;
    - the support rarely changes from one iteration to the next, so the old
      support S is tried first: its threshold ``tau = (sum_S v - 1) / |S|``
      is the exact one iff ``{j : v_j > tau} = S``, which one vectorised pass
      over ``ins`` (the indicator of S) checks;
    - otherwise the same tau is a lower bound on the new threshold (each
      x_j <= its share of the unit mass), so the candidates above it are a
      superset of the new support and Michelot's iteration runs on that
      short list alone;
    - x and z are updated only on the old and new supports.
    """
    m = b.shape[0]
    mp = G.shape[1]
    zero = ks[0]
    one = ks[1]
    sq_distances(b, yy, ww, ks, dist)
    for j in range(m):
        ac[j] = -alpha * (lam * dist[j] - b[j])
    # int64 from the start: from a literal 0, Numba's type inference would
    # first compile each helper these reach for Literal[int](0) as well
    nz = np.int64(0)
    nx = np.int64(0)
    for t in range(beta.shape[0]):
        # v = ac + z - sum_{k in supp z} alpha z_k G[k]
        if nz == 0:
            for j in range(mp):
                v[j] = ac[j]
        elif nz == 1:
            k0 = zidx[0]
            a0 = alpha * z[k0]
            for j in range(mp):
                v[j] = (ac[j] + z[j]) - a0 * G[k0, j]
        elif nz == 2:
            k0 = zidx[0]
            k1 = zidx[1]
            a0 = alpha * z[k0]
            a1 = alpha * z[k1]
            for j in range(mp):
                v[j] = ((ac[j] + z[j]) - a0 * G[k0, j]) - a1 * G[k1, j]
        elif nz == 3:
            k0 = zidx[0]
            k1 = zidx[1]
            k2 = zidx[2]
            a0 = alpha * z[k0]
            a1 = alpha * z[k1]
            a2 = alpha * z[k2]
            for j in range(mp):
                v[j] = (((ac[j] + z[j]) - a0 * G[k0, j]) - a1 * G[k1, j]) - a2 * G[k2, j]
        else:  # the same sums, four rows per pass
            for j in range(mp):
                v[j] = ac[j] + z[j]
            q = 0
            while q + 4 <= nz:
                k0 = zidx[q]
                k1 = zidx[q + 1]
                k2 = zidx[q + 2]
                k3 = zidx[q + 3]
                a0 = alpha * z[k0]
                a1 = alpha * z[k1]
                a2 = alpha * z[k2]
                a3 = alpha * z[k3]
                for j in range(mp):
                    v[j] = (((v[j] - a0 * G[k0, j]) - a1 * G[k1, j]) - a2 * G[k2, j]) - a3 * G[k3, j]
                q += 4
            while q < nz:
                k0 = zidx[q]
                a0 = alpha * z[k0]
                for j in range(mp):
                    v[j] -= a0 * G[k0, j]
                q += 1
        # try the old support: exact iff exactly the entries above its tau
        # are the old support (relative to one of its entries, so "- 1" is
        # not lost to rounding however large v is)
        nbad = 1
        c = zero
        tau = zero
        if nx > 0:
            c = v[xs[0]]
            s = zero
            for q in range(nx):
                s += v[xs[q]] - c
            tau = (s - one) / ks[nx]
            nbad = 0
            for j in range(mp):
                nbad += ((v[j] - c) > tau) ^ ins[j]
        if nbad == 0:
            # same support: x and z change on it alone (z is 0 elsewhere now)
            bt = beta[t]
            if nz != nx:
                for q in range(nz):
                    z[zidx[q]] = zero
            for q in range(nx):
                j = xs[q]
                xn = (v[j] - c) - tau
                z[j] = xn + bt * (xn - x[j])
                x[j] = xn
                zidx[q] = j
            nz = nx
            continue
        # relative to max(v); the old support's tau is a lower bound
        c = max_entry(v)
        floor = support_floor(v, xs, 0, nx, c, ks)
        tau, k = simplex_support_michelot(v, c, floor, ks, cand)
        # ins: the indicator of the new support cand[:k]
        for q in range(nx):
            ins[xs[q]] = 0
        for q in range(k):
            ins[cand[q]] = 1
        nz = advance_iterate(v, c, tau, cand, k, beta[t], x, z, xs, nx, zidx, nz, xold, ks)
        nx = k
    # leave the scratch clean for the next point
    for q in range(nz):
        z[zidx[q]] = zero
    for q in range(nx):
        ins[xs[q]] = 0
    return point_objective(b, yy, G, lam, ks, x, xs, nx, dist), nx


# --------------------------------------------------------------------------
# Per-point products b = W y and ||y||^2, for data of few features
# --------------------------------------------------------------------------

#: Up to this many features ``Y W^T`` is formed by :func:`point_products`:
#: BLAS is slow for so small an inner dimension, and the checks the encoder
#: needs (finite, largest |b| and ||y||^2) come in the same pass.
SMALL_D = 16


@njit(parallel=True, cache=True)
def centre_rows(Y, shift, out):
    """``out = Y - shift``, each row less the vector ``shift``, by blocks of
    rows on Numba's threads: with the centred step a chunk of few features
    is centred on the mean atom before :func:`point_products` (one pass
    over the chunk, and the first touch of ``out``'s pages, that NumPy
    makes on one thread); with many, :func:`blas_products` centres each
    block itself."""
    n, d = Y.shape
    n_blocks = (n + BLOCK - 1) // BLOCK
    for blk in prange(n_blocks):
        for i in range(blk * BLOCK, min(blk * BLOCK + BLOCK, n)):
            for c in range(d):
                out[i, c] = Y[i, c] - shift[c]


@njit(cache=True, nogil=True)
def _row_sq_norm(Y, i):
    s = Y[i, 0] * Y[i, 0]
    for c in range(1, Y.shape[1]):
        s += Y[i, c] * Y[i, c]
    return s


@njit(cache=True, nogil=True)
def _checked_max(current, value):
    """``max(current, |value|)`` in float64 for the overflow checks, with NaN
    taken as inf, so that a NaN anywhere makes the maximum not finite."""
    v = abs(np.float64(value))
    if v <= current:
        return current
    return v if v > current else np.inf


@njit(cache=True, nogil=True)
def _largest(b_max, y_max):
    """The largest of the per-block maxima of :func:`point_products` and
    :func:`blas_products`; a block with a non-finite norm counts as an
    overflow of the products too."""
    bm = 0.0
    ym = 0.0
    for blk in range(b_max.shape[0]):
        bm = max(bm, b_max[blk] if y_max[blk] < np.inf else np.inf)
        ym = max(ym, y_max[blk])
    return bm, ym


@njit(parallel=True, cache=True)
def point_products(Y, W, B, yy):
    """``B = Y W^T`` and ``yy`` = squared row norms of ``Y``.

    Returns ``(max |B|, max yy)`` as float64, or ``inf`` for the first when
    some product is not finite (the caller's overflow check)."""
    n, d = Y.shape
    m = W.shape[0]
    n_blocks = (n + BLOCK - 1) // BLOCK
    # no array expressions (see the module's docstring)
    b_max = np.empty(n_blocks)
    y_max = np.empty(n_blocks)
    for blk in prange(n_blocks):
        lo = blk * BLOCK
        hi = min(lo + BLOCK, n)
        bm = 0.0
        ym = 0.0
        for i in range(lo, hi):
            s = _row_sq_norm(Y, i)
            yy[i] = s
            ym = _checked_max(ym, s)
            for j in range(m):
                a = Y[i, 0] * W[j, 0]
                for c in range(1, d):
                    a += Y[i, c] * W[j, c]
                B[i, j] = a
                bm = _checked_max(bm, a)
        b_max[blk] = bm
        y_max[blk] = ym
    return _largest(b_max, y_max)


# --------------------------------------------------------------------------
# Encoder, lockstep form: many points at once, one per SIMD lane
# --------------------------------------------------------------------------

#: A lockstep group holds ``LANE_BYTES // itemsize`` points (64 in float64,
#: 128 in float32): each row of a group's (m, lanes) arrays is then eight
#: AVX-512 vectors, two passes of the 8x4 / 16x4 pattern LLVM vectorises the
#: lane loops to (no lane loop falls into its scalar remainder), and the
#: cost of entering each short loop is spread over more points
#: (``bench/encoder_paths.py`` measures it).
LANE_BYTES = 512

#: Points sorted together by nearest atom before they are grouped. Points of
#: a group then share most of their supports, so the rows a group's iterate
#: touches (the union of its supports) stay few; a longer sort costs more
#: than its groups gain. Small chunks are cut finer, so that every thread
#: gets work; a point's code does not depend on its group, so this changes
#: no result.
SORT_BLOCK = 8192

#: Up to this many features the lockstep encoder runs; above it, the
#: per-point sparse one. In few dimensions, points sorted by nearest atom
#: share their supports, and ``v`` comes cheaply from ``r = z W`` (d numbers
#: per point). In more dimensions a group's union of supports is wide and
#: the Gram form is needed, so the per-point encoder wins;
#: ``bench/encoder_paths.py`` compares the two (docs/scaling.md).
LOCKSTEP_MAX_FEATURES = 4


@njit(cache=True, nogil=True)
def _sort_by_nearest_atom(B, ww, lo, hi, near, starts, pts):
    """``pts[:hi - lo]`` = the rows ``lo..hi-1`` ordered by their nearest
    atom (argmin of ``||w_j||^2 - 2 b_j``), a counting sort."""
    m = B.shape[1]
    starts[:] = 0
    for p in range(hi - lo):
        i = lo + p
        best = 0
        bv = ww[0] - (B[i, 0] + B[i, 0])
        for j in range(1, m):
            vv = ww[j] - (B[i, j] + B[i, j])
            if vv < bv:
                bv = vv
                best = j
        near[p] = best
        starts[best + 1] += 1
    for j in range(m):
        starts[j + 1] += starts[j]
    for p in range(hi - lo):
        pts[starts[near[p]]] = lo + p
        starts[near[p]] += 1


#: Rows per BLAS call in :func:`blas_products`: a fixed count, not one share
#: per thread, so that each product (and so each code) is the same whatever
#: the number of threads.
GEMM_ROWS = 256


@njit(cache=True, nogil=True)
def _block_products(X, Wt, B, yy):
    """One block of :func:`blas_products`: ``B = X Wt`` by BLAS, ``yy`` the
    rows' squared norms; returns ``(max |B|, max yy)`` (see
    :func:`_checked_max`)."""
    np.dot(X, Wt, B)
    bm = 0.0
    ym = 0.0
    for i in range(X.shape[0]):
        s = _row_sq_norm(X, i)
        yy[i] = s
        ym = _checked_max(ym, s)
        for j in range(B.shape[1]):
            bm = _checked_max(bm, B[i, j])
    return bm, ym


@njit(parallel=True, cache=True)
def blas_products(Y, shift, Wt, B, yy, n_threads):
    """``B = (Y - shift) Wt`` and ``yy`` = squared row norms of ``Y -
    shift``, for many features (``shift`` empty: ``Y`` as it is).

    One BLAS product per block of :data:`GEMM_ROWS` rows, the blocks
    claimed by the ``n_threads`` threads (:func:`claim_block`): BLAS's own
    threads are held to one while the kernels run
    (:func:`fastkds._config.numba_threads`), since they would spin on the
    cores the encoder needs next. With a shift, each block is centred into
    a thread's scratch just before its product (as :func:`centre_rows`
    centres, so the products are the same), not into a chunk-sized copy:
    one pass over the chunk fewer, and no chunk-sized buffer. ``Wt`` is the
    transposed dictionary (a view). Returns ``(max |B|, max yy)`` as
    float64, or ``inf`` for the first when some product or norm is not
    finite, as :func:`point_products` does.
    """
    n, d = Y.shape
    n_blocks = (n + GEMM_ROWS - 1) // GEMM_ROWS
    b_max = np.empty(n_blocks)
    y_max = np.empty(n_blocks)
    counter = block_counter()
    for _ in prange(n_threads):
        X = np.empty((GEMM_ROWS if shift.shape[0] > 0 else 0, d), dtype=Y.dtype)
        blk = claim_block(counter)
        while blk < n_blocks:
            lo = blk * GEMM_ROWS
            hi = min(lo + GEMM_ROWS, n)
            if shift.shape[0] > 0:
                for i in range(lo, hi):
                    for c in range(d):
                        X[i - lo, c] = Y[i, c] - shift[c]
                b_max[blk], y_max[blk] = _block_products(X[: hi - lo], Wt, B[lo:hi], yy[lo:hi])
            else:
                b_max[blk], y_max[blk] = _block_products(Y[lo:hi], Wt, B[lo:hi], yy[lo:hi])
            blk = claim_block(counter)
    return _largest(b_max, y_max)


@njit(cache=True, nogil=True)
def _v_d2(ac, z, r, w0, w1, j, l):
    """Entry (j, l) of ``v = ac + z - alpha (z W) W^T`` with two features,
    ``w = alpha W[j]``: the one formula for it, inlined into fused loops."""
    return (ac[j, l] + z[j, l]) - (w0 * r[0, l] + w1 * r[1, l])


@njit(cache=True, nogil=True)
def _group_v_row(j, ac, z, v, r, aW):
    """Row j of ``v = ac + z - alpha (z W) W^T`` for every lane of a group,
    from ``r = z W`` (d numbers per lane)."""
    L = v.shape[1]
    if aW.shape[1] == 2:  # one loop (see the caller)
        w0 = aW[j, 0]
        w1 = aW[j, 1]
        for l in range(L):
            v[j, l] = _v_d2(ac, z, r, w0, w1, j, l)
        return
    for l in range(L):
        v[j, l] = ac[j, l] + z[j, l]
    for c in range(aW.shape[1]):
        w = aW[j, c]
        for l in range(L):
            v[j, l] -= w * r[c, l]


@njit(cache=True, nogil=True, error_model="numpy")
def _encode_group(
    B, yy, G, W, aW, ww, alpha, lam, beta, ks, pts, i0, n_pts, counts, slot_idx, slot_val, obj, rows, r, lanes, idx
):
    """Encode the points ``pts[i0:i0 + L]`` together, one per lane.

    The encoder's iteration in the direct form ``v = ac + z - alpha (z W) W^T``
    (``r = z W`` costs d per lane and active row), for d <= 4 features; the
    projection is the per-point encoder's: the old support's threshold,
    checked, else Michelot's passes from it. Every lane runs exactly the
    per-point iteration; what is shared is only which rows are visited, and
    a row a lane does not use adds exact zeros to it, so each point's code
    and objective do not depend on the other points of its group. Arrays of
    shape (m, L) hold atom j of lane l at ``[j, l]``; ``flag[j]`` (zero on
    entry, and on return) marks the rows nonzero in some lane: bit 0 for x
    (listed in ``xs``), bit 1 for z (``act``), bit 2 for this iteration's
    candidates (``cand``).

    A short last group repeats its last point in the spare lanes. Scratch:
    ``rows`` (5, m, L) holds ac, v, z, x and the transposed b; ``r`` (d, L);
    ``lanes`` (6, L) holds ||y||^2, tau, three per-lane sums and ``ref``;
    ``idx`` (4, m) the row lists act, xs, cand and flag.

    v is as large as ``alpha max_j ||w_j||^2``, over 1 only with the near
    atoms' step (docs/algorithm.md, "Far atoms"). Then the thresholds are
    taken relative to ``ref``, the mean of v over the lane's old support (0
    before there is one), as the per-point encoder takes them relative to
    one entry: relative values keep the "- 1" of every threshold, so the
    codes still sum to 1 to rounding. Otherwise ``ref`` stays 0, and the
    thresholds are v's own.
    """
    ac, v, z, x, bt = rows[0], rows[1], rows[2], rows[3], rows[4]
    yl, tau, sm, cnt, mis, ref = lanes[0], lanes[1], lanes[2], lanes[3], lanes[4], lanes[5]
    act, xs, cand, flag = idx[0], idx[1], idx[2], idx[3]
    m = B.shape[1]
    L = v.shape[1]
    d = W.shape[1]
    zero = ks[0]
    one = ks[1]
    half = one / (one + one)
    relative = np.float64(alpha) * np.float64(ww.max()) > 1.0
    for l in range(L):
        ref[l] = zero
    for l in range(L):  # transpose the group's b and ||y||^2 into lanes
        i = pts[min(i0 + l, n_pts - 1)]
        yl[l] = yy[i]
        for j in range(m):
            bt[j, l] = B[i, j]
    # first step ac = -alpha (lam dist - b), relative to its lane maximum:
    # the projection ignores a common shift, and relative values keep the
    # "- 1" of every threshold however far the point is from the atoms
    for l in range(L):
        tau[l] = -np.inf
    for j in range(m):
        for l in range(L):
            bj = bt[j, l]
            dj = yl[l] - (bj + bj) + ww[j]
            dj = dj if dj > zero else zero  # rounding in the expanded form
            a = -alpha * (lam * dj - bj)
            ac[j, l] = a
            tau[l] = a if a > tau[l] else tau[l]
            z[j, l] = zero
            x[j, l] = zero
    for j in range(m):
        for l in range(L):
            ac[j, l] -= tau[l]
    na = 0
    nx = 0
    for t in range(beta.shape[0]):
        # r = z W over the rows where z is nonzero in some lane
        for c in range(d):
            for l in range(L):
                r[c, l] = zero
        for q in range(na):
            k = act[q]
            if d == 2:
                w0 = W[k, 0]
                w1 = W[k, 1]
                for l in range(L):
                    zk = z[k, l]
                    r[0, l] += w0 * zk
                    r[1, l] += w1 * zk
            else:
                for c in range(d):
                    w = W[k, c]
                    for l in range(L):
                        r[c, l] += w * z[k, l]
        # v on the old supports first: their threshold tau(A) is a lower bound
        # on the new one (-1 when there is none yet)
        for l in range(L):
            sm[l] = zero
            cnt[l] = zero
        for q in range(nx):
            j = xs[q]
            if d == 2:  # one loop, as below
                w0 = aW[j, 0]
                w1 = aW[j, 1]
                for l in range(L):
                    vj = _v_d2(ac, z, r, w0, w1, j, l)
                    v[j, l] = vj
                    inx = x[j, l] > zero
                    sm[l] += vj if inx else zero
                    cnt[l] += one if inx else zero
                continue
            _group_v_row(j, ac, z, v, r, aW)
            for l in range(L):
                inx = x[j, l] > zero
                sm[l] += v[j, l] if inx else zero
                cnt[l] += one if inx else zero
        if relative:
            # relative to ref, their mean (0 before there is one), the sum
            # of the support loses nothing to rounding however large v is
            for l in range(L):
                ref[l] = sm[l] / cnt[l] if cnt[l] > zero else zero
                sm[l] = zero
            for q in range(nx):  # from here on v is relative to ref
                j = xs[q]
                for l in range(L):
                    vr = v[j, l] - ref[l]
                    v[j, l] = vr
                    sm[l] += vr if x[j, l] > zero else zero
        for l in range(L):
            tau[l] = (sm[l] - one) / cnt[l] if cnt[l] > zero else -one
        # all rows: which lie above tau(A) in some lane. Where no lane's set
        # {v > tau(A)} differs from its old support A, tau(A) is exact in
        # every lane (the common case: supports rarely change). Each row is
        # one loop over the lanes: a vectorised loop costs about as much to
        # enter as to run over a few vectors.
        nc = 0
        changed = False
        for j in range(m):
            above = False
            if flag[j] & 1:  # v done above; x is nonzero in some lane
                for l in range(L):
                    inn = v[j, l] > tau[l]
                    changed |= inn != (x[j, l] > zero)
                    above |= inn
            elif d == 2:  # x is zero in every lane: any v > tau is a change
                w0 = aW[j, 0]
                w1 = aW[j, 1]
                for l in range(L):
                    vj = _v_d2(ac, z, r, w0, w1, j, l) - ref[l]
                    v[j, l] = vj
                    above |= vj > tau[l]
                changed |= above
            else:
                _group_v_row(j, ac, z, v, r, aW)
                for l in range(L):
                    v[j, l] -= ref[l]
                    above |= v[j, l] > tau[l]
                changed |= above
            if above:
                cand[nc] = j
                nc += 1
                flag[j] |= 4
        # otherwise Michelot's passes from that superset of the supports: the
        # sets shrink and tau rises until the counts hold; only candidate rows
        # can take part (a lane whose support did not change gets tau(A)
        # again, bit for bit: the same sum in the same order). Rounding can
        # make a count flip in float32: cap the passes (written as
        # `while going`, see simplex_support_michelot).
        going = changed
        for l in range(L):
            cnt[l] = -one
        passes = 0
        while going:
            for l in range(L):
                sm[l] = zero
                mis[l] = cnt[l]
                cnt[l] = zero
            for q in range(nc):
                j = cand[q]
                for l in range(L):
                    vj = v[j, l]
                    inn = vj > tau[l]
                    sm[l] += vj if inn else zero
                    cnt[l] += one if inn else zero
            going = False
            for l in range(L):
                going |= cnt[l] != mis[l]
                tau[l] = (sm[l] - one) / cnt[l]
            passes += 1
            if passes > m:
                going = False
        # x and z on the rows nonzero before or now
        b_t = beta[t]
        na = 0
        nx = 0
        for j in range(m):
            if flag[j] == 0:
                continue
            anyz = False
            anyx = False
            for l in range(L):
                xn = v[j, l] - tau[l]
                xn = xn if xn > zero else zero
                zn = xn + b_t * (xn - x[j, l])
                x[j, l] = xn
                z[j, l] = zn
                anyz |= zn != zero
                anyx |= xn > zero
            f = 0
            if anyx:
                xs[nx] = j
                nx += 1
                f = 1
            if anyz:
                act[na] = j
                na += 1
                f |= 2
            flag[j] = f
    # objective 1/2 ||y - x W||^2 + lam sum_j x_j dist_j in the Gram form,
    # lane by lane over the support rows
    for l in range(L):
        sm[l] = yl[l]  # reconstruction term
        cnt[l] = zero  # locality term
    for p in range(nx):
        j = xs[p]
        for l in range(L):
            mis[l] = zero
        for q in range(nx):
            k = xs[q]
            g = G[j, k]
            for l in range(L):
                mis[l] += g * x[k, l]
        for l in range(L):
            xj = x[j, l]
            bj = bt[j, l]
            dj = yl[l] - (bj + bj) + ww[j]
            dj = dj if dj > zero else zero
            sm[l] += xj * (mis[l] - (bj + bj))
            cnt[l] += xj * dj
    for l in range(min(L, n_pts - i0)):
        i = pts[i0 + l]
        rec = sm[l] if sm[l] > zero else zero
        obj[i] = half * rec + lam * cnt[l]
        k = 0
        for p in range(nx):
            j = xs[p]
            if x[j, l] > zero:
                slot_idx[i, k] = j
                slot_val[i, k] = x[j, l]
                k += 1
        counts[i] = k
    for j in range(m):
        flag[j] = 0


def encode_codes(B, yy, G, Gp, W, ww, alpha, lam, beta, ks, counts, slot_idx, slot_val, obj, n_threads):
    """Encode a chunk of points: codes as per-row slots, and objectives.

    Parameters
    ----------
    B : (n, m) array, ``Y W^T`` for the chunk (computed with BLAS by the caller).
    yy : (n,) array, squared norms of the points.
    G : (m, m) array, ``W W^T``; ``Gp`` the same zero-padded to
        ``padded_atoms(m)`` columns (the per-point encoder's loops);
        ``ww`` its diagonal.
    W : (m, d) array, the dictionary.
    alpha, lam : scalars of the working dtype.
    beta : (T,) momentum coefficients ``t / (t + 3)``.
    ks : ``arange(m + 1)`` in the working dtype (typed constants).
    counts, slot_idx, slot_val, obj : outputs. Row i's code has
        ``counts[i]`` nonzeros, at atoms ``slot_idx[i, :counts[i]]``
        (ascending) with values ``slot_val[i, :counts[i]]``; ``obj[i]`` is
        its objective f(x; y, W).
    n_threads : int
        Numba's thread count: small chunks are split finer so that every
        thread gets work (the results do not depend on it).

    Up to ``LOCKSTEP_MAX_FEATURES`` features the points are encoded in lockstep
    groups (:func:`_encode_group`), otherwise one by one
    (:func:`_encode_point`); the same iteration either way.
    """
    # two parallel kernels, not one with a branch: each compiles only when
    # used, and a parallel function compiles slowly in proportion to its body
    if W.shape[1] <= LOCKSTEP_MAX_FEATURES:
        aW = (alpha * W).astype(W.dtype)
        encode_codes_lockstep(B, yy, G, W, aW, ww, alpha, lam, beta, ks, counts, slot_idx, slot_val, obj, n_threads)
    else:
        encode_codes_points(B, yy, Gp, ww, alpha, lam, beta, ks, counts, slot_idx, slot_val, obj, n_threads)


@njit(parallel=True, cache=True)
def encode_codes_lockstep(B, yy, G, W, aW, ww, alpha, lam, beta, ks, counts, slot_idx, slot_val, obj, n_threads):
    n, m = B.shape
    d = W.shape[1]
    L = LANE_BYTES // B.itemsize
    n_blocks = max((n + SORT_BLOCK - 1) // SORT_BLOCK, min(4 * n_threads, (n + 1023) // 1024))
    size = (n + n_blocks - 1) // n_blocks
    # the block's work is written out here, not in a function of its own:
    # Numba optimises a callee's code again inside each caller, and in the
    # parallel loop that is the slowest compile of all
    counter = block_counter()
    for _ in prange(n_threads):
        blk = claim_block(counter)
        while blk < n_blocks:
            rows = np.empty((5, m, L), dtype=B.dtype)
            r = np.empty((d, L), dtype=B.dtype)
            lanes = np.empty((6, L), dtype=B.dtype)
            idx = np.empty((4, m), dtype=np.int64)
            for j in range(m):  # the flags start at zero (not np.zeros: see the module's docstring)
                idx[3, j] = 0
            starts = np.empty(m + 1, dtype=np.int64)
            lo = min(blk * size, n)
            hi = min(lo + size, n)
            near = np.empty(hi - lo, dtype=np.int64)
            pts = np.empty(hi - lo, dtype=np.int64)
            _sort_by_nearest_atom(B, ww, lo, hi, near, starts, pts)
            for i0 in range(0, hi - lo, L):
                _encode_group(
                    B,
                    yy,
                    G,
                    W,
                    aW,
                    ww,
                    alpha,
                    lam,
                    beta,
                    ks,
                    pts,
                    i0,
                    hi - lo,
                    counts,
                    slot_idx,
                    slot_val,
                    obj,
                    rows,
                    r,
                    lanes,
                    idx,
                )
            blk = claim_block(counter)


@njit(cache=True, nogil=True)
def point_scratch(m, mp, dt):
    """Scratch of :func:`encode_point_to_slots` for m atoms padded to mp, dtype ``dt``."""
    return (
        np.zeros(mp, dtype=dt),  # x
        np.full(mp, -np.inf, dtype=dt),  # ac
        np.empty(mp, dtype=dt),  # v
        np.zeros(mp, dtype=dt),  # z
        np.zeros(mp, dtype=np.int64),  # ins
        np.empty(m, dtype=dt),  # dist
        np.empty(mp, dtype=dt),  # xold
        np.empty(mp, dtype=np.int64),  # cand
        np.empty(2 * mp, dtype=np.int64),  # zidx
        np.empty(mp, dtype=np.int64),  # xs
    )


@njit(cache=True, nogil=True)
def encode_point_to_slots(i, B, yy, Gp, ww, alpha, lam, beta, ks, scratch, counts, slot_idx, slot_val, obj):
    """Encode point i by :func:`_encode_point` into row i of the slots."""
    x, ac, v, z, ins, dist, xold, cand, zidx, xs = scratch
    obj[i], nx = _encode_point(B[i], yy[i], Gp, ww, alpha, lam, beta, ks, x, ac, dist, v, z, ins, cand, zidx, xs, xold)
    for q in range(nx):
        j = xs[q]
        slot_idx[i, q] = j
        slot_val[i, q] = x[j]
        x[j] = ks[0]  # x back to zeros for the next point
    counts[i] = nx


@njit(parallel=True, cache=True)
def encode_codes_points(B, yy, Gp, ww, alpha, lam, beta, ks, counts, slot_idx, slot_val, obj, n_threads):
    n, m = B.shape
    n_blocks = (n + CLAIM_ROWS - 1) // CLAIM_ROWS
    counter = block_counter()
    for _ in prange(n_threads):
        scratch = point_scratch(m, Gp.shape[1], B.dtype)
        blk = claim_block(counter)
        while blk < n_blocks:
            for i in range(blk * CLAIM_ROWS, min(blk * CLAIM_ROWS + CLAIM_ROWS, n)):
                encode_point_to_slots(i, B, yy, Gp, ww, alpha, lam, beta, ks, scratch, counts, slot_idx, slot_val, obj)
            blk = claim_block(counter)


@njit(parallel=True, cache=True)
def slots_to_dense(counts, slot_idx, slot_val, X):
    """Dense codes ``X`` (n x m) from the encoder's slots."""
    n = X.shape[0]
    for i in prange(n):
        for j in range(X.shape[1]):
            X[i, j] = 0
        for q in range(counts[i]):
            X[i, slot_idx[i, q]] = slot_val[i, q]


@njit(parallel=True, cache=True)
def fill_csr_from_slots(counts, slot_idx, slot_val, indptr, indices, data):
    """CSR ``indices`` and ``data`` from the encoder's slots, given ``indptr``."""
    n = counts.shape[0]
    for i in prange(n):
        p = indptr[i]
        for q in range(counts[i]):
            indices[p + q] = slot_idx[i, q]
            data[p + q] = slot_val[i, q]


# --------------------------------------------------------------------------
# Far atoms: which points may use one, and the two groups' rows
# --------------------------------------------------------------------------


@njit(parallel=True, cache=True)
def may_use_far(B, yy, ww, far, ratio, slack, out):
    """``out[i]``: whether a far atom lies within the screening radius of
    point i, ``||y - w_j||^2 <= ratio * min_k ||y - w_k||^2``.

    Distances ``yy - 2 B + ww`` in float64; each is taken ``slack * (yy +
    ww_j)`` towards "may use" (their rounding in the working dtype). See
    :meth:`fastkds.prepared.PreparedDictionary.may_use_far`.
    """
    n, m = B.shape
    for i in prange(n):
        y2 = np.float64(yy[i])
        nearest = np.inf
        for j in range(m):
            w2 = np.float64(ww[j])
            dist = (y2 - 2.0 * np.float64(B[i, j])) + w2
            nearest = min(nearest, dist + slack * (y2 + w2))
        hit = False
        for q in range(far.shape[0]):
            j = far[q]
            w2 = np.float64(ww[j])
            dist = (y2 - 2.0 * np.float64(B[i, j])) + w2
            if dist - slack * (y2 + w2) <= ratio * nearest:
                hit = True
        out[i] = hit


@njit(parallel=True, cache=True)
def gather_block(A, rows, cols, out):
    """``out[r, c] = A[rows[r], cols[c]]``."""
    for r in prange(rows.shape[0]):
        i = rows[r]
        for c in range(cols.shape[0]):
            out[r, c] = A[i, cols[c]]


@njit(parallel=True, cache=True)
def scatter_slots(rows, atoms, part_counts, part_idx, part_val, part_obj, counts, slot_idx, slot_val, obj):
    """Row ``r`` of a group's slots into row ``rows[r]`` of the chunk's, its
    atom numbers mapped through ``atoms`` (the group's atoms, ascending, so
    the slots stay ascending)."""
    for r in prange(rows.shape[0]):
        i = rows[r]
        k = part_counts[r]
        counts[i] = k
        obj[i] = part_obj[r]
        for q in range(k):
            slot_idx[i, q] = atoms[part_idx[r, q]]
            slot_val[i, q] = part_val[r, q]


# --------------------------------------------------------------------------
# CSR assembly: count, prefix sum, fill
# --------------------------------------------------------------------------


@njit(parallel=True, cache=True)
def count_row_nonzeros(X, counts):
    """``counts[i]`` = number of nonzeros in row i of the dense codes ``X``."""
    n, m = X.shape
    for i in prange(n):
        k = 0
        for j in range(m):
            if X[i, j] != 0:
                k += 1
        counts[i] = k


@njit(parallel=True, cache=True)
def fill_csr(X, indptr, indices, data):
    """Second pass of CSR assembly: column indices ascending, no explicit zeros."""
    for i in prange(X.shape[0]):
        fill_csr_row(X, i, indptr[i], indices, data)


# --------------------------------------------------------------------------
# Sufficient statistics (docs/algorithm.md, "Dictionary"): X^T X, s = X^T 1, X^T Y
# --------------------------------------------------------------------------


@njit(parallel=True, cache=True)
def accumulate_statistics(indptr, indices, data, Y, n_parts, XtX, s, XtY):
    """Add one chunk's ``X^T X``, ``X^T 1`` and ``X^T Y`` to float64 accumulators.

    The rows are split into ``n_parts`` fixed ranges, each summed into its own
    partial buffer in parallel; the partials are then added in order (in
    parallel over the atoms), so the result does not depend on the number
    of threads.
    """
    n, d = Y.shape
    m = s.shape[0]
    # each part zeroes its own buffers (not np.zeros: see the module's docstring)
    pXtX = np.empty((n_parts, m, m))
    ps = np.empty((n_parts, m))
    pXtY = np.empty((n_parts, m, d))
    step = (n + n_parts - 1) // n_parts
    for p in prange(n_parts):
        for j in range(m):
            ps[p, j] = 0.0
            for k in range(m):
                pXtX[p, j, k] = 0.0
            for k in range(d):
                pXtY[p, j, k] = 0.0
        lo = p * step
        hi = min(lo + step, n)
        for i in range(lo, hi):
            a = indptr[i]
            e = indptr[i + 1]
            for q in range(a, e):
                j = indices[q]
                xj = np.float64(data[q])
                ps[p, j] += xj
                for r in range(a, e):
                    pXtX[p, j, indices[r]] += xj * data[r]
                for k in range(d):
                    pXtY[p, j, k] += xj * Y[i, k]
    # the partials added in order, each atom's row on its own thread
    for j in prange(m):
        for p in range(n_parts):
            s[j] += ps[p, j]
            for k in range(m):
                XtX[j, k] += pXtX[p, j, k]
            for k in range(d):
                XtY[j, k] += pXtY[p, j, k]


#: One part's partial sums (``m x (m + d)`` float64) past this many bytes
#: are not kept: :func:`accumulate_statistics_by_atom` forms the same sums
#: atom by atom in a few kilobytes of scratch. Each thread writes its parts'
#: partials and reads them back; past a share of a core's cache that is
#: two passes over memory (MNIST-5's 500 atoms: 41 MB a chunk), and the
#: threads wait on memory, not arithmetic.
STATISTICS_PART_BYTES = 1 << 18


@njit(cache=True, nogil=True)
def _entries_by_atom(indptr, indices, n, m):
    """The entries of CSR rows ``0..n-1`` atom by atom, rows ascending (a
    counting sort): atom j's are ``col_start[j]:col_start[j + 1]`` of
    ``col_row`` (their rows) and ``col_entry`` (their places in ``indices``)."""
    col_start = np.zeros(m + 1, dtype=np.int64)
    for q in range(indptr[0], indptr[n]):
        col_start[indices[q] + 1] += 1
    for j in range(m):
        col_start[j + 1] += col_start[j]
    col_row = np.empty(col_start[m], dtype=np.int64)
    col_entry = np.empty(col_start[m], dtype=np.int64)
    fill = col_start[:m].copy()
    for i in range(n):
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            col_row[fill[j]] = i
            col_entry[fill[j]] = q
            fill[j] += 1
    return col_start, col_row, col_entry


@njit(parallel=True, cache=True)
def accumulate_statistics_by_atom(indptr, indices, data, Y, n_parts, XtX, s, XtY, n_threads):
    """:func:`accumulate_statistics` atom by atom, without partial buffers:
    the same sums in the same order, so the same numbers, bit for bit.

    Atom j's row of each sum is formed on one thread: for each of the
    ``n_parts`` row ranges in turn, the range's contributions are summed
    (rows ascending) into scratch, which is then added to the accumulators,
    as :func:`accumulate_statistics` adds its partials. A range without
    atom j adds nothing there (its partial row is zeros: adding +0.0 to a
    sum that is never -0.0 leaves it as it is), so it is skipped here. The
    ``n_threads`` threads claim the atoms one at a time
    (:func:`claim_block`), as their use is uneven and often sorted.
    """
    n, d = Y.shape
    m = s.shape[0]
    col_start, col_row, col_entry = _entries_by_atom(indptr, indices, n, m)
    counter = block_counter()
    for _ in prange(n_threads):
        row_xx = np.empty(m)
        row_xy = np.empty(d)
        columns = (col_start, col_row, col_entry)
        j = claim_block(counter)
        while j < m:
            _atom_statistics(j, indptr, indices, data, Y, n_parts, columns, row_xx, row_xy, XtX, s, XtY)
            j = claim_block(counter)


@njit(cache=True, nogil=True)
def _atom_statistics(j, indptr, indices, data, Y, n_parts, columns, row_xx, row_xy, XtX, s, XtY):
    """Atom j's rows of :func:`accumulate_statistics_by_atom`'s sums, its
    ``n_parts`` row ranges in turn (``row_xx``, ``row_xy``: scratch)."""
    n, d = Y.shape
    m = s.shape[0]
    col_start, col_row, col_entry = columns
    step = (n + n_parts - 1) // n_parts
    u = col_start[j]
    for p in range(n_parts):
        hi = min((p + 1) * step, n)
        if u == col_start[j + 1] or col_row[u] >= hi:
            continue
        sj = 0.0
        for k in range(m):
            row_xx[k] = 0.0
        for k in range(d):
            row_xy[k] = 0.0
        while u < col_start[j + 1] and col_row[u] < hi:
            i = col_row[u]
            xj = np.float64(data[col_entry[u]])
            sj += xj
            for r in range(indptr[i], indptr[i + 1]):
                row_xx[indices[r]] += xj * data[r]
            for k in range(d):
                row_xy[k] += xj * Y[i, k]
            u += 1
        s[j] += sj
        for k in range(m):
            XtX[j, k] += row_xx[k]
        for k in range(d):
            XtY[j, k] += row_xy[k]


# --------------------------------------------------------------------------
# The spectral embedding of codes (fastkds.spectral.embedding_rows)
# --------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _squares4(U, i, j):
    a, b, c, d = U[i, j], U[i, j + 1], U[i, j + 2], U[i, j + 3]
    return a * a, b * b, c * c, d * d


#: The most columns :func:`embed_codes` takes: up to this many, NumPy's
#: pairwise sum adds a row's squares without splitting it (past it, it
#: recurses on halves, and a recursive kernel loaded from Numba's cache
#: crashes the process).
PAIRWISE_BLOCK = 128


@njit(cache=True, nogil=True)
def _pairwise_sum_squares(U, i, n):
    """The sum of ``U[i, :n] ** 2`` (n <= :data:`PAIRWISE_BLOCK`) in
    NumPy's pairwise order (``pairwise_sum`` of its umath loops, which
    ``np.linalg.norm`` of a row takes): one by one below 8 entries, else
    eight running sums, then the rest one by one. So a row's norm here is
    NumPy's, bit for bit."""
    if n < 8:
        res = 0.0
        for j in range(n):
            res += U[i, j] * U[i, j]
        return res
    if n <= PAIRWISE_BLOCK:
        # eight scalars, not an array: this runs once per row of n
        r0, r1, r2, r3 = _squares4(U, i, 0)
        r4, r5, r6, r7 = _squares4(U, i, 4)
        j = 8
        while j < n - n % 8:
            s0, s1, s2, s3 = _squares4(U, i, j)
            s4, s5, s6, s7 = _squares4(U, i, j + 4)
            r0 += s0
            r1 += s1
            r2 += s2
            r3 += s3
            r4 += s4
            r5 += s5
            r6 += s6
            r7 += s7
            j += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while j < n:
            res += U[i, j] * U[i, j]
            j += 1
        return res
    return np.nan  # more columns than the caller may give


@njit(parallel=True, cache=True)
def embed_codes(indptr, indices, data, P, out):
    """``out`` (n x c, float64): the rows of the CSR codes ``(indptr,
    indices, data)`` times ``P`` (m x c, float64, c at most
    :data:`PAIRWISE_BLOCK`), each scaled to unit norm (zero rows stay
    zero), one row per iteration.

    The same numbers as ``normalize_rows(codes @ P)``: a row's products are
    added in the order of its entries from zero, as scipy's ``csr_matvecs``
    adds them, and its norm is NumPy's (:func:`_pairwise_sum_squares`).
    """
    n = indptr.shape[0] - 1
    c = P.shape[1]
    for i in prange(n):
        for k in range(c):
            out[i, k] = 0.0
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            a = np.float64(data[q])
            for k in range(c):
                out[i, k] += a * P[j, k]
        norm = np.sqrt(_pairwise_sum_squares(out, i, c))
        if norm == 0.0:
            norm = 1.0
        for k in range(c):
            out[i, k] /= norm


# --------------------------------------------------------------------------
# k-means++ seeding (fastkds.seeding)
# --------------------------------------------------------------------------


@njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
def seeding_distances(Y, candidates, closest, seed_of, reach, Z, spread, margin, D, block_sums, n_threads):
    """``D[i, t] = min(closest[i], ||Y[i] - Y[candidates[t]]||^2)`` and
    ``block_sums[b, t]``, the sum of ``D[:, t]`` over block ``b`` of
    ``BLOCK`` rows, all in float64. The ``n_threads`` threads claim the
    blocks (:func:`claim_block`).

    One pass over ``Y`` scores every candidate: k-means++ reads the data
    once per atom, so the pass is bound by memory, and float32 data are read
    at half the cost. The sums go by fixed blocks, so they do not depend on
    the number of threads; the squared distances are summed in float64 with
    reassociation allowed, which lets the feature loop vectorise.

    A pair a bound rules out is not summed: its ``D[i, t]`` is
    ``closest[i]``, the value the sum would give, so the results are the
    same with or without the bounds. Two bounds, each off where its array
    has no rows or columns (the first seed's pass has neither):

    - the triangle inequality: row i's nearest seed so far is
      ``seed_of[i]``, and ``reach[seed_of[i], t]`` bounds that seed's
      squared distance from candidate t from below; at four times
      ``closest[i]`` or more the candidate is no nearer than the seed;
    - a projection: ``Z`` holds the rows' coordinates on a few orthonormal
      directions (less their mean), so ``||Z[i] - Z[c]||`` is at most
      ``||Y[i] - Y[c]||`` but for rounding, which ``margin * spread[i]``
      bounds for row i (``spread``: its distance from that mean).
    """
    n, d = Y.shape
    t = candidates.shape[0]
    n_blocks = (n + BLOCK - 1) // BLOCK
    bounded = reach.shape[0] > 0
    projected = Z.shape[1] > 0
    far = 4.0 * (1.0 + SEEDING_SLACK) ** 2
    counter = block_counter()
    for _ in prange(n_threads):
        # each block's sums in a buffer of the thread's own: neighbouring
        # blocks' rows of block_sums share cache lines, which the other
        # threads write (docs/experiments.md, "Shared cache lines")
        sums = np.empty(t)
        blk = claim_block(counter)
        while blk < n_blocks:
            lo = blk * BLOCK
            hi = min(lo + BLOCK, n)
            for j in range(t):
                sums[j] = 0.0
            for i in range(lo, hi):
                near = closest[i]
                reach_i = np.sqrt(near) * (1.0 + SEEDING_SLACK) + margin * spread[i] if projected else 0.0
                for j in range(t):
                    c = candidates[j]
                    v = near
                    if not (bounded and reach[seed_of[i], j] >= far * near):
                        keep = True
                        if projected:
                            lim = reach_i + margin * spread[c]
                            acc = 0.0
                            for k in range(Z.shape[1]):
                                diff = Z[i, k] - Z[c, k]
                                acc += diff * diff
                            keep = acc < lim * lim
                        if keep:
                            acc = 0.0
                            for k in range(d):
                                diff = np.float64(Y[i, k]) - np.float64(Y[c, k])
                                acc += diff * diff
                            v = min(acc, near)
                    D[i, j] = v
                    sums[j] += v
            for j in range(t):
                block_sums[blk, j] = sums[j]
            blk = claim_block(counter)


@njit(cache=True, nogil=True)
def seeding_reach(seeds, seed_norms, candidates):
    """Lower bounds on the squared distances of ``seeds`` (float64, with
    their squared norms) from ``candidates`` (float64), as a (seeds,
    candidates) array: the expanded form ``|s|^2 + |c|^2 - 2 s.c`` by one
    BLAS product, less twice the most its rounding can add (``d + 4``
    float64 epsilons of ``|s|^2 + |c|^2``, for any order of the sums)."""
    t, d = candidates.shape
    products = np.dot(seeds, candidates.T)
    slack = 2 * (d + 4) * np.finfo(np.float64).eps
    out = np.empty((seeds.shape[0], t))
    for j in range(t):
        cn = 0.0
        for k in range(d):
            cn += candidates[j, k] * candidates[j, k]
        for s in range(seeds.shape[0]):
            out[s, j] = (seed_norms[s] + cn) * (1.0 - slack) - 2.0 * products[s, j]
    return out


@njit(cache=True)
def seeding_rounds(
    Y, draws, indices, closest, potential, seed_of, seeds, seed_norms, Z, spread, margin, D, block_sums, n_threads
):
    """k-means++ after its first seed: seed ``c`` (1, 2, ...) is the best of
    the candidates at which the uniforms ``draws[c - 1]`` fall in the D^2
    distribution, all scored by one pass of :func:`seeding_distances`.

    ``indices[0]`` is the first seed and ``closest`` (float64) the rows'
    squared distances from it, of sum ``potential``; ``draws`` holds the
    uniforms scikit-learn's loop draws, a row a seed; the seeds chosen go
    to ``indices[1:]``. ``seeds`` and ``seed_norms`` (rows and squared norms
    of the seeds, float64) and ``seed_of`` keep the triangle bound where
    ``seeds`` has rows; ``Z``, ``spread`` and ``margin`` the projection
    bound (see :func:`seeding_distances`). The loop runs here, not in
    Python: its own work is a few passes over n numbers a seed, less than
    the interpreter's calls would cost.
    """
    n = Y.shape[0]
    t = draws.shape[1]
    triangle = seeds.shape[0] > 0
    cumulative = np.empty(n)
    candidates = np.empty(t, dtype=np.int64)
    points = np.empty((t, Y.shape[1]))
    reach = np.empty((0, t))
    potentials = np.empty(t)
    for c in range(1, indices.shape[0]):
        # NumPy's cumsum and searchsorted: one addition after another, the
        # first place at or past each draw
        acc = 0.0
        for i in range(n):
            acc += closest[i]
            cumulative[i] = acc
        for j in range(t):
            candidates[j] = min(np.searchsorted(cumulative, draws[c - 1, j] * potential), n - 1)
        if triangle:
            for j in range(t):
                for k in range(Y.shape[1]):
                    points[j, k] = Y[candidates[j], k]
            reach = seeding_reach(seeds[:c], seed_norms[:c], points)
        seeding_distances(Y, candidates, closest, seed_of, reach, Z, spread, margin, D, block_sums, n_threads)
        # the potentials as NumPy's sum over axis 0: block after block
        for j in range(t):
            potentials[j] = block_sums[0, j]
        for b in range(1, block_sums.shape[0]):
            for j in range(t):
                potentials[j] += block_sums[b, j]
        best = np.argmin(potentials)
        row = candidates[best]
        indices[c] = row
        if triangle:
            for i in range(n):
                if D[i, best] < closest[i]:
                    seed_of[i] = c
            norm = 0.0
            for k in range(Y.shape[1]):
                seeds[c, k] = Y[row, k]
                norm += seeds[c, k] * seeds[c, k]
            seed_norms[c] = norm
        for i in range(n):
            closest[i] = D[i, best]
        potential = potentials[best]


#: 2^64 / phi, odd: Fibonacci hashing's multiplier, and Philox's first Weyl
#: constant.
_GOLDEN_64 = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True)
def first_distinct(values, size):
    """The first ``size`` distinct entries of ``values`` (non-negative
    integers), in the order they come; fewer when there are not as many.

    An open-addressing hash set of twice ``len(values)`` slots: time and
    memory linear in ``len(values)``, where ``np.unique(values,
    return_index=True)`` sorts them (:func:`fastkds._naive.first_distinct`,
    the twin, gives the same entries).
    """
    cap = 1
    while cap < 2 * values.shape[0]:
        cap *= 2
    mask = cap - 1
    table = np.full(cap, -1, dtype=np.int64)
    out = np.empty(min(size, values.shape[0]), dtype=np.int64)
    k = 0
    for v in values:
        if k == out.shape[0]:
            break
        # Fibonacci hashing: the product's high bits spread nearby integers
        slot = np.int64((np.uint64(v) * _GOLDEN_64) >> np.uint64(32)) & mask
        while table[slot] != -1 and table[slot] != v:
            slot = (slot + 1) & mask
        if table[slot] == -1:
            table[slot] = v
            out[k] = v
            k += 1
    return out[:k]


# Philox4x64-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
# 3", SC 2011), NumPy's ``np.random.Philox``: its multipliers and Weyl
# constants.
_PHILOX_M0 = np.uint64(0xD2E7470EE14C6C93)
_PHILOX_M1 = np.uint64(0xCA5A826395121157)
_PHILOX_W0 = _GOLDEN_64
_PHILOX_W1 = np.uint64(0xBB67AE8584CAA73B)
_PHILOX_ZERO = np.uint64(0)
_DOUBLE_SHIFT = np.uint64(11)
_DOUBLE_SCALE = 1.0 / 9007199254740992.0  # 2^-53


@intrinsic
def _mul_high(typingctx, a, b):
    """The high 64 bits of the 128-bit product of two uint64: one
    instruction on x86-64 and ARM64, where Numba has no 128-bit integer."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _philox_block(counter, key):
    """The four 64-bit outputs of Philox4x64-10 at counter ``(counter, 0, 0,
    0)`` with key ``(key, 0)``."""
    c0, c1, c2, c3 = counter, _PHILOX_ZERO, _PHILOX_ZERO, _PHILOX_ZERO
    k0, k1 = key, _PHILOX_ZERO
    for r in range(10):
        if r > 0:
            k0 += _PHILOX_W0
            k1 += _PHILOX_W1
        hi0, lo0 = _mul_high(_PHILOX_M0, c0), _PHILOX_M0 * c0
        hi1, lo1 = _mul_high(_PHILOX_M1, c2), _PHILOX_M1 * c2
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


@njit(parallel=True, cache=True)
def reservoir_top(key, row_start, objective, top_keys, top_rows):
    """Each block's largest Efraimidis-Spirakis keys ``log(u_i) / w_i``,
    the reservoir sample of :class:`fastkds.solvers.SufficientStatistics`.

    ``u_i`` is output ``r = row_start + i`` of ``np.random.Philox(key=key)``
    made a double as NumPy makes one (its top 53 bits times 2^-53). NumPy
    steps the counter before each block of four outputs, so output ``r`` is
    word ``r % 4`` of the block at counter ``r // 4 + 1``: any row's is
    found without the ones before it. ``w_i = objective[i]``; a zero weight
    gives ``-inf`` (drawn last).

    The rows are cut into ``top_keys.shape[0]`` blocks; block ``b`` keeps its
    ``k = top_keys.shape[1]`` best keys (the largest, ties to the lower
    row), in no order, in ``top_keys[b]`` and their chunk-local rows in
    ``top_rows[b]``, ``-1`` in the slots a short block leaves empty. The
    chunk's best ``k`` are among them whatever the blocks. One pass makes
    the uniforms, the keys and the selection, on the threads, where NumPy's
    generator, ``log``, division and ``partition`` made four on one (the
    twin, :func:`fastkds._naive.reservoir_top`).
    """
    n = objective.shape[0]
    n_blocks, k = top_keys.shape
    for b in prange(n_blocks):
        lo = n * b // n_blocks
        hi = n * (b + 1) // n_blocks
        keys = top_keys[b]
        rows = top_rows[b]
        for j in range(k):
            keys[j] = -np.inf
            rows[j] = -1
        count = 0
        worst = 0  # the kept key that goes first: the smallest, ties to the higher row
        block = -1
        words = (_PHILOX_ZERO, _PHILOX_ZERO, _PHILOX_ZERO, _PHILOX_ZERO)
        for i in range(lo, hi):
            r = row_start + i
            if r // 4 != block:
                block = r // 4
                words = _philox_block(np.uint64(block + 1), key)
            u = (words[r % 4] >> _DOUBLE_SHIFT) * _DOUBLE_SCALE
            w = np.float64(objective[i])
            value = np.log(u) / w if w > 0.0 else -np.inf
            if count < k:  # rows come in order: a new one loses every tie
                keys[count] = value
                rows[count] = i
                count += 1
                if count == k:
                    worst = _reservoir_worst(keys, rows)
            elif value > keys[worst]:
                keys[worst] = value
                rows[worst] = i
                worst = _reservoir_worst(keys, rows)


@njit(cache=True, nogil=True, inline="always")
def _reservoir_worst(keys, rows):
    """The slot of the kept key that a better one replaces: the smallest,
    ties to the higher row."""
    worst = 0
    for j in range(1, keys.shape[0]):
        if keys[j] < keys[worst] or (keys[j] == keys[worst] and rows[j] > rows[worst]):
            worst = j
    return worst

"""Numba CPU kernels: simplex projection, the KDS encoder, CSR assembly and
sufficient statistics.

Conventions (SPEC sections 1-5): rows are points. Every kernel is generic in
the floating dtype (float32 or float64). Numba types a Python float literal as
float64, which would silently promote float32 arithmetic, so kernels take their
constants from a typed array ``ks = arange(m + 1, dtype)``: ``ks[0]`` is zero,
``ks[1]`` is one and ``ks[k]`` is ``k`` as a float of the working dtype.

Parallel kernels split the points into fixed blocks of ``BLOCK`` rows, so the
work each point gets, and the order of every reduction, does not depend on the
number of threads: results are bitwise identical for any ``n_jobs``.
"""

import numpy as np
from numba import njit, prange

#: Points per parallel work item. Fixed (not derived from the thread count) so
#: that results do not depend on how many threads run.
BLOCK = 256


# --------------------------------------------------------------------------
# Projection onto the probability simplex
# --------------------------------------------------------------------------


# Both methods work relative to max(v): the projection is unchanged by a common
# shift, and after it the "- 1" in tau = (sum - 1) / k is never lost to rounding,
# however large |v| is (a point far from every atom has huge locality weights).


@njit(cache=True, nogil=True)
def _vmax(v):
    vmax = v[0]
    for j in range(1, v.shape[0]):
        if v[j] > vmax:
            vmax = v[j]
    return vmax


@njit(cache=True, nogil=True)
def _simplex_threshold_sorted(v, vmax, ks):
    """Threshold of the projection of ``v``, relative to ``vmax = max(v)``,
    by the sorted method of SPEC 3 (the reference).

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


@njit(cache=True, nogil=True)
def _simplex_support_michelot(v, vmax, floor, ks, cand):
    """Support and threshold of the projection of ``v`` by Michelot's method.

    Works relative to ``vmax = max(v)``. ``floor`` must be a lower bound on
    the (relative) threshold: every ``v_j - vmax > floor`` is gathered into
    ``cand``, then Michelot's iteration ``tau = (sum_{j in S} v_j - 1) / |S|``,
    ``S = {j : v_j > tau}`` runs on that list alone, compacting it. Started
    from any superset of the support, tau rises monotonically to the exact
    threshold, the sorted method's. ``floor = -1`` is always valid (no output
    exceeds 1); so is ``(sum_{j in A} v_j - 1) / |A|`` for any index set A.

    Rounding can make the count flip back and forth in float32, hence the cap
    of m + 1 passes (written as ``while going``: Numba 0.68 miscompiled a
    ``while True`` form of such a loop). The maximum always stays in the list
    (its relative value 0 exceeds any tau <= -1/k), so the count never hits 0.

    Returns
    -------
    tau : threshold relative to vmax; the projection is ``max(v - vmax - tau, 0)``.
    k : the support is ``cand[:k]`` (ascending indices).
    """
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


@njit(parallel=True, cache=True)
def project_simplex_rows(V, out, ks, sorted_method):
    """Project every row of ``V`` onto the probability simplex, into ``out``."""
    n, m = V.shape
    zero = ks[0]
    one = ks[1]
    for i in prange(n):
        vmax = _vmax(V[i])
        if sorted_method:
            tau = _simplex_threshold_sorted(V[i], vmax, ks)
        else:
            tau, _ = _simplex_support_michelot(V[i], vmax, -one, ks, np.empty(m, dtype=np.int64))
        for j in range(m):
            x = (V[i, j] - vmax) - tau
            out[i, j] = x if x > zero else zero


# --------------------------------------------------------------------------
# Encoder: accelerated projected gradient in Gram form (SPEC 3)
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
    """Encode one point; returns its objective f(x; y, W).

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
    half = one / (one + one)
    for j in range(m):
        dj = yy - (b[j] + b[j]) + ww[j]
        if dj < zero:  # rounding in the expanded form
            dj = zero
        dist[j] = dj
        ac[j] = -alpha * (lam * dj - b[j])
    nz = 0
    nx = 0
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
        c = _vmax(v)
        floor = -one
        if nx > 0:
            s = zero
            for q in range(nx):
                s += v[xs[q]] - c
            s = (s - one) / ks[nx]
            if s > floor:
                floor = s
        tau, k = _simplex_support_michelot(v, c, floor, ks, cand)
        # x_new = v - c - tau on cand[:k]; z = x_new + beta (x_new - x_old)
        bt = beta[t]
        for q in range(nz):
            z[zidx[q]] = zero
        for q in range(nx):
            j = xs[q]
            xold[q] = x[j]
            x[j] = zero
            ins[j] = 0
        nz = 0
        for q in range(k):
            j = cand[q]
            xn = (v[j] - c) - tau
            x[j] = xn
            z[j] = xn + bt * xn
            ins[j] = 1
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
    # leave the scratch clean for the next point
    for q in range(nz):
        z[zidx[q]] = zero
    for q in range(nx):
        ins[xs[q]] = 0
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


@njit(parallel=True, cache=True)
def encode_dense(B, yy, G, ww, alpha, lam, beta, ks, X, obj):
    """Encode a chunk of points into dense codes ``X`` (n x m) and objectives.

    Parameters
    ----------
    B : (n, m) array, ``Y W^T`` for the chunk (computed with BLAS by the caller).
    yy : (n,) array, squared norms of the points.
    G : (m, mp) array, ``W W^T`` zero-padded to ``mp = padded_atoms(m)``
        columns; ``ww`` its diagonal (m).
    alpha, lam : scalars of the working dtype.
    beta : (T,) momentum coefficients ``t / (t + 3)``.
    ks : ``arange(m + 1)`` in the working dtype (typed constants).
    X, obj : outputs, (n, m) and (n,).
    """
    n, m = B.shape
    mp = G.shape[1]
    n_blocks = (n + BLOCK - 1) // BLOCK
    for blk in prange(n_blocks):
        ac = np.full(mp, -np.inf, dtype=B.dtype)
        v = np.empty(mp, dtype=B.dtype)
        z = np.zeros(mp, dtype=B.dtype)
        ins = np.zeros(mp, dtype=np.int64)
        dist = np.empty(m, dtype=B.dtype)
        xold = np.empty(mp, dtype=B.dtype)
        cand = np.empty(mp, dtype=np.int64)
        zidx = np.empty(2 * mp, dtype=np.int64)
        xs = np.empty(mp, dtype=np.int64)
        lo = blk * BLOCK
        hi = min(lo + BLOCK, n)
        for i in range(lo, hi):
            x = X[i]
            x[:] = ks[0]
            obj[i] = _encode_point(
                B[i], yy[i], G, ww, alpha, lam, beta, ks, x, ac, dist, v, z, ins, cand, zidx, xs, xold
            )


# --------------------------------------------------------------------------
# CSR assembly (SPEC 4): count, prefix sum, fill
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
    n, m = X.shape
    for i in prange(n):
        p = indptr[i]
        for j in range(m):
            if X[i, j] != 0:
                indices[p] = j
                data[p] = X[i, j]
                p += 1


# --------------------------------------------------------------------------
# Sufficient statistics (SPEC 5a): X^T X, s = X^T 1, X^T Y
# --------------------------------------------------------------------------


@njit(parallel=True, cache=True)
def accumulate_statistics(indptr, indices, data, Y, n_parts, XtX, s, XtY):
    """Add one chunk's ``X^T X``, ``X^T 1`` and ``X^T Y`` to float64 accumulators.

    The rows are split into ``n_parts`` fixed ranges, each summed into its own
    partial buffer in parallel; the partials are then added in order, so the
    result does not depend on the number of threads.
    """
    n, d = Y.shape
    m = s.shape[0]
    pXtX = np.zeros((n_parts, m, m))
    ps = np.zeros((n_parts, m))
    pXtY = np.zeros((n_parts, m, d))
    step = (n + n_parts - 1) // n_parts
    for p in prange(n_parts):
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
    for p in range(n_parts):
        for j in range(m):
            s[j] += ps[p, j]
            for k in range(m):
                XtX[j, k] += pXtX[p, j, k]
            for k in range(d):
                XtY[j, k] += pXtY[p, j, k]

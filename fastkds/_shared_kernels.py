"""Numba helpers written once for the CPU kernels and the CUDA thread encoder.

Each is compiled twice from the same Python source: by ``njit`` here, for
:mod:`fastkds._kernels` and :mod:`fastkds._unrolled_kernels`, and by
``cuda.jit(device=True)`` from its ``.py_func`` in :mod:`fastkds._cuda_kernels`.
Both paths then take the same steps in the same order, and a fix to one
reaches the other. So that the device compiler takes them:

- each is a leaf: a call to another of them would reach, from device code,
  the CPU dispatcher its name stands for here;
- they use only scalar arithmetic and the indexing of the arrays they are
  given (no allocation, no NumPy functions), with constants from the typed
  array ``ks = arange(m + 1, dtype)`` (see :mod:`fastkds._kernels`).

The projection works relative to ``vmax = max(v)``: it is unchanged by a
common shift, and after it the "- 1" in ``tau = (sum - 1) / k`` is never lost
to rounding, however large |v| is (a point far from every atom has huge
locality weights).
"""

from numba import njit


@njit(cache=True, nogil=True)
def max_entry(v):
    vmax = v[0]
    for j in range(1, v.shape[0]):
        if v[j] > vmax:
            vmax = v[j]
    return vmax


@njit(cache=True, nogil=True)
def support_floor(v, idx, lo, hi, vmax, ks):
    """A lower bound on the threshold of the projection of ``v`` (relative to
    ``vmax = max(v)``), for :func:`simplex_support_michelot`.

    ``(sum_{j in A} v_j - vmax - 1) / |A|`` over a previous support
    ``A = idx[lo:hi]`` bounds the new threshold below (each output is at most
    its share of the unit mass), and so does -1; returns the larger, or -1
    when A is empty.
    """
    one = ks[1]
    floor = -one
    if hi > lo:
        s = ks[0]
        for q in range(lo, hi):
            s += v[idx[q]] - vmax
        s = (s - one) / ks[hi - lo]
        if s > floor:
            floor = s
    return floor


@njit(cache=True, nogil=True)
def simplex_support_michelot(v, vmax, floor, ks, cand):
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


@njit(cache=True, nogil=True)
def sq_distance(yy, b, ww, zero):
    """``||y - w||^2 = yy - 2 b + ww`` from ``b = y.w`` and the squared
    norms, held at ``zero`` (0 of their dtype) where the expanded form
    rounds below it."""
    d = yy - (b + b) + ww
    if d < zero:  # rounding in the expanded form
        d = zero
    return d


@njit(cache=True, nogil=True)
def sq_distances(b, yy, ww, ks, dist):
    """:func:`sq_distance` of ``y`` from each atom j of ``b = W y``."""
    for j in range(b.shape[0]):
        dist[j] = sq_distance(yy, b[j], ww[j], ks[0])


@njit(cache=True, nogil=True)
def gram_step(v, z, zidx, nz, alpha, G, ks):
    """``v += z - alpha z G`` with z nonzero only at ``zidx[:nz]``: O(m nnz(z))
    instead of O(m^2). A row whose ``alpha z_k`` is zero is skipped (it would
    add only zeros)."""
    zero = ks[0]
    m = v.shape[0]
    for q in range(nz):
        k = zidx[q]
        a = alpha * z[k]
        if a != zero:
            for j in range(m):
                v[j] -= a * G[k, j]
    for q in range(nz):
        k = zidx[q]
        v[k] += z[k]


@njit(cache=True, nogil=True)
def advance_iterate(v, vmax, tau, cand, k, bt, x, z, xs, nx, zidx, nz, xold, ks):
    """One momentum step on the sparse iterate after a projection; returns
    the new ``nz``.

    ``x`` (support ``xs[:nx]``) becomes ``x_new = v - vmax - tau`` on the new
    support ``cand[:k]``, which is copied to ``xs[:k]``;
    ``z = x_new + bt (x_new - x_old)``, nonzero only on the old and new
    supports, listed in ``zidx`` (the entries of z outside them are zeroed).
    ``xold`` is scratch of length ``nx``.
    """
    zero = ks[0]
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
    return nz


@njit(cache=True, nogil=True)
def point_objective(b, yy, G, lam, ks, x, xs, nx, dist):
    """f(x; y, W) = 1/2 ||y - x W||^2 + lam sum_j x_j dist_j in the Gram form
    ``||y||^2 - 2 x.b + x G x^T``, over the support ``xs[:nx]`` of x (the
    reconstruction term held at 0 where rounding takes it below)."""
    zero = ks[0]
    one = ks[1]
    half = one / (one + one)
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


@njit(cache=True, nogil=True)
def fill_csr_row(X, i, p, indices, data):
    """Row i of the dense codes ``X`` into CSR from entry ``p`` on: column
    indices ascending, no explicit zeros."""
    for j in range(X.shape[1]):
        if X[i, j] != 0:
            indices[p] = j
            data[p] = X[i, j]
            p += 1

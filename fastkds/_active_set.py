"""Numba CPU kernel: exact codes by an active-set method (docs/algorithm.md, "Exact codes").

Per point, the encoder problem is a small quadratic programme over the
simplex::

    min_x  q(x) = 1/2 x^T G x - c^T x,   x >= 0, sum(x) = 1,
    c_j = b_j - lam * dist_j,   dist_j = ||y - w_j||^2,   b = W y,   G = W W^T,

which differs from f(x; y, W) by the constant ``||y||^2 / 2``. Its gradient is
``g = G x - c``; x is optimal iff, for some tau, ``g_j = tau`` where
``x_j > 0`` and ``g_j >= tau`` where ``x_j = 0`` (the KKT conditions).

Locality makes the optimal support small (a handful of atoms out of
hundreds), so a primal active-set method in the manner of Lawson and
Hanson's NNLS finds it in a few steps, each exact:

1. Start at the vertex of the nearest atom (the best single atom).
2. Compute g for all m atoms from the support alone, O(m |P|). If no atom
   outside the support P has ``g_j < tau`` (to rounding), x is optimal:
   stop. Otherwise add the atom of the smallest g_j.
3. Solve the equality-constrained problem on P (``g_P = tau 1``,
   ``sum x_P = 1``) exactly, by a Cholesky factorisation of
   ``G_PP + s 1 1^T``: on the simplex the added term is the constant s, so
   the solution is the same, and the matrix is positive definite exactly
   when the atoms of P are affinely independent. If the solution is
   positive, take it and go to 2; otherwise move towards it until the first
   weight reaches zero, drop that atom, and solve again.

Each step lowers q, so no support repeats, and the method ends at the
optimum after finitely many steps. Affinely dependent atoms in P (a
singular factorisation), or a step count past the cap, hand the point to
the accelerated projected-gradient encoder of :mod:`fastkds._kernels`,
which needs no factorisation.

The arithmetic is float64 whatever the data's dtype: the systems are tiny,
and float32 rounding in them would decide which atoms enter.
"""

import numpy as np
from numba import njit, prange

from ._kernels import CLAIM_ROWS, block_counter, claim_block, encode_point_to_slots, point_scratch
from ._shared_kernels import sq_distance

#: Active-set steps per point before the point is handed to the accelerated
#: encoder: each step adds or drops one atom, and an optimal support has a
#: handful. Past this many something is degenerate (ties in rounding).
MAX_STEPS = 64

#: Optimality tolerance on the KKT conditions, in units of the rounding of
#: the gradient: ``g_j >= tau - RTOL_EPS * eps * scale`` counts as satisfied,
#: ``eps`` the data dtype's machine epsilon and ``scale`` the size of the
#: terms of ``g_j`` and ``tau``: ``||y||^2 + max(||w_j||^2, max over the
#: support of ||w_k||^2)``, times 1 + 2 lam.
RTOL_EPS = 64.0

#: A Cholesky pivot below this fraction of the diagonal's scale means the
#: atoms of the support are affinely dependent (to rounding).
SINGULAR = 1e-10


@njit(cache=True, nogil=True)
def _solve_support(G, c, P, p, s, L, rhs, z):
    """Minimise q over the affine hull of the atoms ``P[:p]``: solve
    ``(G_PP + s 1 1^T) z = c_P + t 1`` with t chosen so that ``sum z = 1``.

    Returns False when the factorisation breaks down (affinely dependent
    atoms); ``z[:p]`` holds the solution otherwise. ``L`` (p x p) and
    ``rhs`` (2, p) are scratch.
    """
    # Cholesky factor of A = G_PP + s 1 1^T, in the lower triangle of L
    for i in range(p):
        for k in range(i + 1):
            a = np.float64(G[P[i], P[k]]) + s
            for q in range(k):
                a -= L[i, q] * L[k, q]
            if k == i:
                if a <= SINGULAR * s:
                    return False
                L[i, i] = np.sqrt(a)
            else:
                L[i, k] = a / L[k, k]
    # A^-1 c_P and A^-1 1 by two triangular solves each
    for col in range(2):
        for i in range(p):
            a = c[P[i]] if col == 0 else 1.0
            for q in range(i):
                a -= L[i, q] * rhs[col, q]
            rhs[col, i] = a / L[i, i]
        for i in range(p - 1, -1, -1):
            a = rhs[col, i]
            for q in range(i + 1, p):
                a -= L[q, i] * rhs[col, q]
            rhs[col, i] = a / L[i, i]
    sc = 0.0
    s1 = 0.0
    for i in range(p):
        sc += rhs[0, i]
        s1 += rhs[1, i]
    t = (1.0 - sc) / s1
    for i in range(p):
        z[i] = rhs[0, i] + t * rhs[1, i]
    return True


@njit(cache=True, nogil=True)
def _active_set_point(b, yy, G, ww, lam, eps, c, g, inP, P, x, z, L, rhs):
    """Exact code of one point by the active-set method (module doc).

    ``b`` (m), ``yy``, ``G`` (m x m), ``ww`` (m) as for the accelerated
    encoder, ``lam`` and ``eps`` (the dtype's epsilon) as floats. Scratch:
    ``c, g`` (float64, m), ``inP`` (int64, m, zero on entry and on return),
    ``P`` (int64, m), ``x, z`` (float64, m), ``L`` (m x m), ``rhs`` (2 x m).

    Returns ``(p, ok)``: the support is ``P[:p]`` with weights ``x[:p]``, in
    ascending atom order; ``ok`` is False when the point must go to the
    accelerated encoder instead.
    """
    m = b.shape[0]
    yy64 = np.float64(yy)
    j0 = 0
    best = np.inf
    s = 0.0
    for j in range(m):
        bj = np.float64(b[j])
        wj = np.float64(ww[j])
        dj = sq_distance(yy64, bj, wj, 0.0)
        c[j] = bj - lam * dj
        if dj < best:
            best = dj
            j0 = j
        if wj > s:
            s = wj
    tol = RTOL_EPS * eps * (1.0 + lam + lam)  # per unit of the gradient's scale
    if s <= 0.0:
        s = 1.0  # every atom at the mean: any positive shift will do
    P[0] = j0
    x[0] = 1.0
    inP[j0] = 1
    p = 1
    steps = 0
    ok = True
    going = True
    while going:
        # gradient over all atoms from the support: g = G x - c
        for j in range(m):
            g[j] = -c[j]
        for q in range(p):
            k = P[q]
            xk = x[q]
            for j in range(m):
                g[j] += xk * np.float64(G[k, j])
        tau = 0.0
        s_support = 0.0
        for q in range(p):
            tau += x[q] * g[P[q]]
            s_support = max(s_support, np.float64(ww[P[q]]))
        # each atom's own tolerance: the rounding of g_j and of tau grows with
        # the norms of atom j and of the support's atoms, not with those of
        # atoms far from both (one far atom made it wide enough to accept
        # a wrong support in float32)
        enter = -1
        gmin = np.inf
        for j in range(m):
            if inP[j] == 0 and g[j] < gmin:
                if g[j] < tau - tol * (yy64 + max(np.float64(ww[j]), s_support)):
                    gmin = g[j]
                    enter = j
        if enter < 0:
            going = False
            continue
        P[p] = enter
        x[p] = 0.0
        inP[enter] = 1
        p += 1
        inner = True
        while inner:
            steps += 1
            if steps > MAX_STEPS or not _solve_support(G, c, P, p, s, L, rhs, z):
                ok = False
                inner = False
                going = False
                continue
            # the largest move towards z that keeps every weight >= 0
            t = 1.0
            blocked = False
            for q in range(p):
                if z[q] <= 0.0:
                    blocked = True
                    r = x[q] / (x[q] - z[q]) if x[q] > 0.0 else 0.0
                    if r < t:
                        t = r
            if not blocked:
                for q in range(p):
                    x[q] = z[q]
                inner = False
                continue
            # drop the atoms that reach zero (at least the one that set t)
            keep = 0
            total = 0.0
            for q in range(p):
                xq = x[q] + t * (z[q] - x[q])
                if z[q] <= 0.0 and (x[q] <= 0.0 or x[q] / (x[q] - z[q]) <= t):
                    xq = 0.0
                if xq > 0.0:
                    P[keep] = P[q]
                    x[keep] = xq
                    total += xq
                    keep += 1
                else:
                    inP[P[q]] = 0
            p = keep
            for q in range(p):  # back onto the simplex after rounding
                x[q] /= total
    total = 0.0
    for q in range(p):
        total += x[q]
    for q in range(p):  # the solves hold sum(x) = 1 to rounding; make it exact
        x[q] /= total
    # ascending atom order (insertion sort: the support is short)
    for q in range(1, p):
        k = P[q]
        xq = x[q]
        r = q - 1
        while r >= 0 and P[r] > k:
            P[r + 1] = P[r]
            x[r + 1] = x[r]
            r -= 1
        P[r + 1] = k
        x[r + 1] = xq
    for q in range(p):
        inP[P[q]] = 0
    return p, ok


@njit(parallel=True, cache=True)
def encode_codes_active_set(
    B, yy, G, Gp, ww, alpha, lam, beta, ks, counts, slot_idx, slot_val, obj, fallbacks, n_threads
):
    """Exact codes of a chunk by the active-set method; the same outputs as
    :func:`fastkds._kernels.encode_codes` (``G`` unpadded, ``Gp`` padded for
    the accelerated encoder that takes the points the active set cannot).

    ``fallbacks[i]`` is set to 1 for each point so handed over, else 0.
    ``n_threads`` (Numba's thread count) sizes the blocks, not the results.
    """
    n, m = B.shape
    eps = np.float64(np.finfo(B.dtype).eps)
    lam64 = np.float64(lam)
    n_blocks = (n + CLAIM_ROWS - 1) // CLAIM_ROWS
    counter = block_counter()
    for _ in prange(n_threads):  # blocks claimed as the threads come free (claim_block)
        c = np.empty(m)
        g = np.empty(m)
        inP = np.empty(m, dtype=np.int64)
        for j in range(m):  # not np.zeros (see fastkds._kernels)
            inP[j] = 0
        P = np.empty(m, dtype=np.int64)
        x = np.empty(m)
        z = np.empty(m)
        L = np.empty((min(m, MAX_STEPS + 1), min(m, MAX_STEPS + 1)))
        rhs = np.empty((2, min(m, MAX_STEPS + 1)))
        scratch = point_scratch(m, Gp.shape[1], B.dtype)  # for the points handed over
        blk = claim_block(counter)
        while blk < n_blocks:
            for i in range(blk * CLAIM_ROWS, min(blk * CLAIM_ROWS + CLAIM_ROWS, n)):
                p, ok = _active_set_point(B[i], yy[i], G, ww, lam64, eps, c, g, inP, P, x, z, L, rhs)
                if ok:
                    fallbacks[i] = 0
                    # f = 1/2 (||y||^2 - 2 x.b + x^T G x) + lam x.dist, from the support
                    rec = np.float64(yy[i])
                    loc = 0.0
                    for q in range(p):
                        k = P[q]
                        bk = np.float64(B[i, k])
                        dk = sq_distance(np.float64(yy[i]), bk, np.float64(ww[k]), 0.0)
                        acc = 0.0
                        for r in range(p):
                            acc += x[r] * np.float64(G[k, P[r]])
                        rec += x[q] * (acc - (bk + bk))
                        loc += x[q] * dk
                        slot_idx[i, q] = k
                        slot_val[i, q] = x[q]
                    if rec < 0.0:
                        rec = 0.0
                    obj[i] = 0.5 * rec + lam64 * loc
                    counts[i] = p
                else:
                    fallbacks[i] = 1
                    encode_point_to_slots(
                        i, B, yy, Gp, ww, alpha, lam, beta, ks, scratch, counts, slot_idx, slot_val, obj
                    )
            blk = claim_block(counter)

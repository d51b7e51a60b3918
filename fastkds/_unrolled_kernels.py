"""Numba kernels of the unrolled solver: forward and backward pass through the
T steps of the KDS encoder (docs/unrolled.md) for a mini-batch.

Per point the forward pass is the encoder of :mod:`fastkds._kernels` (Gram
form over the sparse iterate, Michelot's projection on a short candidate
list); it also records each step's support and values on a tape. The
backward pass walks the tape in reverse. Every adjoint it needs lives on the
supports (the projection's Jacobian ``I_S - 1_S 1_S^T / |S|`` is zero off its
support S), so a backward step costs O(nnz^2), less than the forward step.

The gradient with respect to W is returned in a factored form. With
``b = W y``, ``G = W W^T`` and ``dist_j = ||y||^2 - 2 b_j + G_jj``, the loss
of a batch depends on W only through G and the b and dist of each point, so

    dL/dW = (K + K^T) W + C^T Y,   K = sum_i (Gbar_i + diag(distbar_i)),
                                 C[i] = bbar_i - 2 distbar_i,

and the caller forms the products with BLAS. K is summed over fixed parts of
the batch (not over threads) and the parts are added in order by the caller,
so the result does not depend on the number of threads.

Typed constants: as in :mod:`fastkds._kernels`, ``ks = arange(m + 1)`` in the
working dtype supplies 0, 1 and the counts.
"""

import numpy as np
from numba import njit, prange

from ._shared_kernels import gram_step, simplex_support_michelot, sq_distances, support_floor, max_entry


@njit(cache=True, nogil=True)
def _unrolled_point(b, yy, G, ww, alpha, lam, beta, ks, off, tidx, tval, dist, v, z, xd, cand, zidx, vb, ab, crow, H):
    """Forward and backward pass of one point; returns ``(f, df/dalpha)``.

    ``b = W y`` (m), ``yy = ||y||^2``. ``off`` (T + 1), ``tidx`` and ``tval``
    (T * m) are the tape: step t's output x_{t+1} has support
    ``tidx[off[t]:off[t+1]]`` (ascending) and values ``tval[...]``. ``dist``,
    ``v``, ``z``, ``xd``, ``vb`` (m) and ``ab`` (3 x m) are float scratch,
    ``cand`` (m) and ``zidx`` (2 m) integer scratch; ``xd``, ``vb`` and
    ``ab`` must be zero on entry and are left zero. ``crow`` (m, zero on
    entry) receives ``bbar - 2 distbar``; ``Gbar + diag(distbar)`` is added
    to ``H`` (m x m).
    """
    m = G.shape[0]
    T = beta.shape[0]
    zero = ks[0]
    one = ks[1]
    two = one + one
    half = one / two
    # ---- forward: the encoder, recording each x_{t+1} --------------------
    sq_distances(b, yy, ww, ks, dist)
    for j in range(m):
        z[j] = zero
    nz = 0
    off[0] = 0
    for t in range(T):
        # v = z - alpha (z G - b + lam dist), z G over the support of z only
        for j in range(m):
            v[j] = -alpha * (lam * dist[j] - b[j])
        gram_step(v, z, zidx, nz, alpha, G, ks)
        vmax = max_entry(v)
        # the previous support bounds the threshold from below
        o0 = off[t - 1] if t > 0 else 0
        o1 = off[t]
        floor = support_floor(v, tidx, o0, o1, vmax, ks)
        tau, k = simplex_support_michelot(v, vmax, floor, ks, cand)
        for q in range(k):
            j = cand[q]
            tidx[o1 + q] = j
            tval[o1 + q] = (v[j] - vmax) - tau
        off[t + 1] = o1 + k
        # z_{t+1} = (1 + beta_t) x_{t+1} - beta_t x_t on the union of supports
        bt = beta[t]
        for q in range(nz):
            z[zidx[q]] = zero
        nz = 0
        for q in range(o1, o1 + k):
            j = tidx[q]
            xd[j] = tval[q]
            z[j] = tval[q] + bt * tval[q]
            zidx[nz] = j
            nz += 1
        for q in range(o0, o1):
            j = tidx[q]
            if xd[j] == zero:  # left the support
                zidx[nz] = j
                nz += 1
            z[j] -= bt * tval[q]
        for q in range(o1, o1 + k):
            xd[tidx[q]] = zero
    # ---- loss f(x_T) in the Gram form and its direct gradients -----------
    oT0 = off[T - 1]
    oT1 = off[T]
    cur = 0  # rows of ab: adjoints of x_{s+1}, x_s, x_{s-1}
    rec = yy
    loc = zero
    for p in range(oT0, oT1):
        j = tidx[p]
        xj = tval[p]
        acc = zero
        for q in range(oT0, oT1):
            xk = tval[q]
            acc += xk * G[j, tidx[q]]
            H[j, tidx[q]] += half * xj * xk  # Gbar = x x^T / 2
        rec += xj * acc - (xj + xj) * b[j]
        loc += xj * dist[j]
        # df/dx_j = (x G)_j - b_j + lam dist_j
        ab[cur, j] = acc - b[j] + lam * dist[j]
        # bbar = -x, distbar = lam x
        crow[j] -= xj + two * lam * xj
        H[j, j] += lam * xj
    if rec < zero:
        rec = zero
    f = half * rec + lam * loc
    # ---- backward through the steps, s = T-1 .. 0 ------------------------
    dalpha = zero
    alam = alpha * lam
    for s in range(T - 1, -1, -1):
        mid = (cur + 1) % 3
        old = (cur + 2) % 3
        p0 = off[s]
        p1 = off[s + 1]  # support of x_{s+1}
        # vbar = J_P^T xbar_{s+1} = xbar - mean over the support
        mean = zero
        for q in range(p0, p1):
            mean += ab[cur, tidx[q]]
        mean = mean / ks[p1 - p0]
        for q in range(p0, p1):
            j = tidx[q]
            vb[j] = ab[cur, j] - mean
            ab[cur, j] = zero
        # v_s = z_s - alpha (z_s G - b + lam dist): the b and dist terms
        for q in range(p0, p1):
            j = tidx[q]
            crow[j] += (alpha + two * alam) * vb[j]
            H[j, j] -= alam * vb[j]
        if s == 0:  # z_0 = 0: g_0 = -b + lam dist
            for q in range(p0, p1):
                j = tidx[q]
                dalpha -= vb[j] * (lam * dist[j] - b[j])
                vb[j] = zero
            break
        # z_s = (1 + beta_{s-1}) x_s - beta_{s-1} x_{s-1}, on zidx[:nz]
        bt = beta[s - 1]
        r0 = off[s - 1]  # support of x_s: tidx[r0:p0]
        u0 = off[s - 2] if s > 1 else r0  # support of x_{s-1}: tidx[u0:r0]
        nz = 0
        for q in range(r0, p0):
            j = tidx[q]
            xd[j] = tval[q]
            z[j] = tval[q] + bt * tval[q]
            zidx[nz] = j
            nz += 1
        for q in range(u0, r0):
            j = tidx[q]
            if xd[j] == zero:
                z[j] = zero
                zidx[nz] = j
                nz += 1
            z[j] -= bt * tval[q]
        for q in range(r0, p0):
            xd[tidx[q]] = zero
        # One pass over the rows of G on (supp z_s) x S_{s+1} gives
        # - g_s = z_s G - b + lam dist on S_{s+1} (into v, free scratch now),
        #   for dalpha (dv/dalpha = -g_s);
        # - Gbar += -alpha z_s vbar^T, into H;
        # - zbar = vbar - alpha G vbar on the supports of x_s and x_{s-1}.
        # A large support is swept densely (vb is zero off it): contiguous
        # loops vectorise, gathers through tidx do not.
        dense = 2 * (p1 - p0) > m
        if dense:
            for j in range(m):
                v[j] = lam * dist[j] - b[j]
        else:
            for q in range(p0, p1):
                j = tidx[q]
                v[j] = lam * dist[j] - b[j]
        for r in range(nz):
            k = zidx[r]
            zk = z[k]
            azk = alpha * zk
            acc = zero
            Gk = G[k]
            Hk = H[k]
            if dense:
                for j in range(m):
                    gkj = Gk[j]
                    vbj = vb[j]
                    v[j] += zk * gkj
                    Hk[j] -= azk * vbj
                    acc += gkj * vbj
            elif zk != zero:
                for q in range(p0, p1):
                    j = tidx[q]
                    gkj = Gk[j]
                    vbj = vb[j]
                    v[j] += zk * gkj
                    Hk[j] -= azk * vbj
                    acc += gkj * vbj
            else:
                for q in range(p0, p1):
                    j = tidx[q]
                    acc += Gk[j] * vb[j]
            # z[k] is reused as zbar_k (its value is no longer needed)
            z[k] = vb[k] - alpha * acc
        for q in range(p0, p1):
            j = tidx[q]
            dalpha -= vb[j] * v[j]
        # z_s feeds x_s with weight 1 + beta and x_{s-1} with -beta
        for q in range(r0, p0):
            j = tidx[q]
            ab[mid, j] += z[j] + bt * z[j]
        for q in range(u0, r0):
            j = tidx[q]
            ab[old, j] -= bt * z[j]
        for r in range(nz):
            z[zidx[r]] = zero
        for q in range(p0, p1):
            vb[tidx[q]] = zero
        cur = mid
    for j in range(m):  # adjoints left on supports when T = 1 or s = 0 broke out
        ab[0, j] = zero
        ab[1, j] = zero
        ab[2, j] = zero
    return f, dalpha


@njit(parallel=True, cache=True)
def unrolled_batch(B, yy, G, ww, alpha, lam, beta, ks, H_parts, C, loss, dalpha):
    """Loss and gradient factors of the unrolled encoder over a mini-batch.

    Parameters
    ----------
    B : (n, m) array, ``Y W^T`` for the batch.
    yy : (n,) squared norms of the points.
    G : (m, m) ``W W^T``; ``ww`` its diagonal.
    alpha, lam : scalars of the working dtype.
    beta : (T,) momentum coefficients ``t / (t + 3)``.
    ks : ``arange(m + 1)`` in the working dtype.
    H_parts : (n_parts, m, m) output; part p holds the sum of
        ``Gbar_i + diag(distbar_i)`` over its points. The number of parts is
        the caller's (fixed by n and m, never by the threads).
    C : (n, m) output, ``bbar_i - 2 distbar_i`` per point.
    loss, dalpha : (n,) outputs, ``f(x_T; y_i, W)`` and its derivative in alpha.

    With ``K = sum_p H_parts[p]``, the gradient of ``sum_i f`` over W is
    ``(K + K^T) W + C^T Y``.
    """
    n, m = B.shape
    T = beta.shape[0]
    n_parts = H_parts.shape[0]
    step = (n + n_parts - 1) // n_parts
    zero = ks[0]
    for p in prange(n_parts):
        H = H_parts[p]
        off = np.empty(T + 1, dtype=np.int64)
        tidx = np.empty(T * m, dtype=np.int64)
        tval = np.empty(T * m, dtype=B.dtype)
        dist = np.empty(m, dtype=B.dtype)
        v = np.empty(m, dtype=B.dtype)
        z = np.empty(m, dtype=B.dtype)
        xd = np.empty(m, dtype=B.dtype)
        vb = np.empty(m, dtype=B.dtype)
        ab = np.empty((3, m), dtype=B.dtype)
        # zeroed by loops, not array expressions (see fastkds._kernels)
        for j in range(m):
            xd[j] = zero
            vb[j] = zero
            for r in range(3):
                ab[r, j] = zero
            for k in range(m):
                H[j, k] = zero
        cand = np.empty(m, dtype=np.int64)
        zidx = np.empty(2 * m, dtype=np.int64)
        lo = p * step
        hi = min(lo + step, n)
        for i in range(lo, hi):
            crow = C[i]
            for j in range(m):
                crow[j] = zero
            f, da = _unrolled_point(
                B[i], yy[i], G, ww, alpha, lam, beta, ks, off, tidx, tval, dist, v, z, xd, cand, zidx, vb, ab, crow, H
            )
            loss[i] = f
            dalpha[i] = da


@njit(cache=True)
def adam_update(W, g, m, v, scale, lr, b1, b2, c1, c2, eps):
    """One Adam step on ``W`` in place, with the moments ``m`` and ``v``.

    The gradient is ``scale * g`` (the clipping factor). The arithmetic is
    the NumPy form's, element by element and in the same order, in one pass
    instead of a dozen over arrays the size of the dictionary (at d = 32,256
    the NumPy form took a quarter of a Yale B training step).

    Parameters
    ----------
    W, g, m, v : C-contiguous float64 arrays of one shape; ``W``, ``m``, ``v`` updated.
    scale, lr, b1, b2, eps : floats.
    c1, c2 : bias corrections ``1 - b1**k`` and ``1 - b2**k``.
    """
    Wf = W.reshape(-1)
    gf = g.reshape(-1)
    mf = m.reshape(-1)
    vf = v.reshape(-1)
    for i in range(Wf.size):
        gi = gf[i] * scale
        mi = mf[i] * b1 + (1.0 - b1) * gi
        vi = vf[i] * b2 + (1.0 - b2) * gi * gi
        mf[i] = mi
        vf[i] = vi
        Wf[i] -= lr * (mi / c1) / (np.sqrt(vi / c2) + eps)

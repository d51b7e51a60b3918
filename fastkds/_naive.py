"""Plain NumPy implementation of the KDS mathematics.

This is the independent twin of :mod:`fastkds._kernels`: the test oracle and the
benchmark baseline ("what a user would write"). It follows docs/algorithm.md
literally -- full sorts, dense batched products, the direct form of the
locality weights -- and favours clarity over speed.
"""

import numpy as np


def project_simplex(V):
    """Project each row of ``V`` onto the probability simplex (sorted method).

    Parameters
    ----------
    V : ndarray of shape (n, m)

    Returns
    -------
    X : ndarray of shape (n, m)
        ``X[i] = argmin_{x >= 0, sum x = 1} ||x - V[i]||``.
    """
    V = np.atleast_2d(V)
    n, m = V.shape
    # shifting each row by its maximum leaves the projection unchanged and
    # keeps the "- 1" below from vanishing in rounding when |V| is huge
    V = V - V.max(axis=1, keepdims=True)
    U = -np.sort(-V, axis=1)
    C = np.cumsum(U, axis=1)
    j = np.arange(1, m + 1, dtype=V.dtype)
    cond = U - (C - 1) / j > 0
    rho = m - np.argmax(cond[:, ::-1], axis=1)  # largest j (1-based) with cond
    tau = (C[np.arange(n), rho - 1] - 1) / rho.astype(V.dtype)
    return np.maximum(V - tau[:, None], 0)


def squared_distances(Y, W):
    """``D[i, j] = ||y_i - w_j||^2`` by direct differences (n x m)."""
    return ((Y[:, None, :] - W[None, :, :]) ** 2).sum(axis=2)


def step_size(W, step="centred", dtype=np.float64):
    """The encoder step: ``1 / sigma_max(W - mean atom)^2`` (docs/algorithm.md), or
    the paper's ``1 / sigma_max(W)^2`` with ``step="paper"``.

    The centred ``sigma_max^2`` is held above ``eps^2`` (of ``dtype``)
    times the uncentred one, so atoms that coincide to rounding get a
    finite step; their codes are all optimal then.
    """
    W = np.asarray(W, dtype=np.float64)
    top = np.linalg.norm(W, 2) ** 2
    if step == "centred":
        top = max(np.linalg.norm(W - W.mean(axis=0), 2) ** 2, np.finfo(dtype).eps ** 2 * top)
    return 1.0 / top


def far_out(W):
    """Atoms beyond Tukey's far-out fence (upper quartile + 3 IQR) of the
    atoms' distances from the mean atom (boolean, length m)."""
    W = np.asarray(W, dtype=np.float64)
    if W.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    radii = np.linalg.norm(W - W.mean(axis=0), axis=1)
    q1, q3 = np.quantile(radii, [0.25, 0.75])
    return radii > q3 + 3 * (q3 - q1)


def encode(Y, W, lam, n_iter, alpha=None, step="centred"):
    """Accelerated projected-gradient encoder, batched.

    With the centred step, when some atoms are :func:`far_out`, the points
    that the screening rule ``||y - w_j||^2 <= (1 + 1/lam)^2 min_k ||y -
    w_k||^2`` lets use none of them are encoded on the other atoms alone, at
    those atoms' own centred step (docs/algorithm.md, "Far atoms").

    Parameters
    ----------
    Y : ndarray of shape (n, d)
    W : ndarray of shape (m, d)
    lam : float
    n_iter : int
        T, the number of iterations.
    alpha : float, optional
        Step; defaults to :func:`step_size` of ``W`` by the rule ``step``
        (a given step applies to every point and atom).
    step : {"centred", "paper"}, default="centred"

    Returns
    -------
    X : ndarray of shape (n, m), rows on the simplex.
    """
    dtype = Y.dtype
    shift = W.mean(axis=0) if step == "centred" else None
    with np.errstate(over="ignore", divide="ignore"):
        ratio = np.square(1 + 1 / np.float64(lam)) if lam > 0 else np.inf
    near = None
    far = far_out(W)
    if alpha is None and step == "centred" and np.isfinite(ratio) and far.any():
        near = ~far
        # their own step, unless their spread is lost to the dtype's rounding
        W64 = np.asarray(W, dtype=np.float64)
        spread = np.linalg.norm(W64[near] - W64[near].mean(axis=0), 2) ** 2
        near = near if spread > np.sqrt(np.finfo(dtype).eps) * ((W64[near] - W64.mean(axis=0)) ** 2).sum() else None
    if near is None:
        alpha = step_size(W, step, dtype) if alpha is None else alpha
        return _accelerated(Y, W, lam, n_iter, alpha, shift)
    dist = squared_distances(Y.astype(np.float64), np.asarray(W, dtype=np.float64))
    uses_far = (dist[:, far] <= ratio * dist.min(axis=1, keepdims=True)).any(axis=1)
    X = np.zeros((Y.shape[0], W.shape[0]), dtype=dtype)
    # both groups on the problem less the whole dictionary's mean atom
    X[uses_far] = _accelerated(Y[uses_far], W, lam, n_iter, step_size(W, step, dtype), shift)
    X[np.ix_(~uses_far, near)] = _accelerated(Y[~uses_far], W[near], lam, n_iter, 1.0 / spread, shift)
    return X


def _accelerated(Y, W, lam, n_iter, alpha, shift):
    """T steps of accelerated projected gradient at step ``alpha``, on the
    problem less ``shift`` (a point, or None). The first step starts from
    zero, so it is the one step that depends on the shift."""
    dtype = Y.dtype
    if shift is not None:  # the same problem, centred
        Y, W = Y - shift.astype(dtype), W - shift
    alpha = dtype.type(alpha)
    lam = dtype.type(lam)
    Dist = squared_distances(Y, W)
    x_prev = np.zeros((Y.shape[0], W.shape[0]), dtype=dtype)
    z = np.zeros_like(x_prev)
    x_new = x_prev
    for t in range(n_iter):
        grad = (z @ W - Y) @ W.T + lam * Dist
        x_new = project_simplex(z - alpha * grad)
        z = x_new + dtype.type(t / (t + 3)) * (x_new - x_prev)
        x_prev = x_new
    return x_new


def kkt_residual(Y, W, X, lam):
    """How far each code is from optimal, by the KKT conditions.

    With ``g = (x W - y) W^T + lam * dist`` the gradient of f at x (on the
    simplex), x is optimal iff, for tau the mean of g over the support,
    ``g_j = tau`` on the support and ``g_j >= tau`` off it. Returns, per
    point, the largest violation ``max(|g_S - tau|, (tau - g_off)^+)``,
    relative to the gradient's scale ``||y||^2 + max_j ||w_j||^2`` (times
    1 + 2 lam), so that 0 is optimal and rounding gives about ``eps``.
    """
    Y = np.asarray(Y, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    mu = W.mean(axis=0)  # g's common shift does not matter; centring keeps its digits
    Yc, Wc = Y - mu, W - mu
    g = (X @ Wc - Yc) @ Wc.T + lam * squared_distances(Yc, Wc)
    support = X > 0
    tau = (g * support).sum(axis=1) / support.sum(axis=1)
    on = np.where(support, np.abs(g - tau[:, None]), 0.0).max(axis=1)
    off = np.where(support, 0.0, np.maximum(tau[:, None] - g, 0.0)).max(axis=1)
    scale = ((Yc**2).sum(axis=1) + (Wc**2).sum(axis=1).max()) * (1.0 + 2.0 * lam)
    return np.maximum(on, off) / scale


def objective(Y, W, X, lam):
    """Per-point objective ``f(x_i; y_i, W)`` (length n)."""
    R = Y - X @ W
    return 0.5 * (R**2).sum(axis=1) + lam * (X * squared_distances(Y, W)).sum(axis=1)


def statistics(X, Y):
    """Sufficient statistics ``(X^T X, X^T 1, X^T Y)`` of the dictionary step."""
    X = np.asarray(X, dtype=np.float64)
    return X.T @ X, X.sum(axis=0), X.T @ np.asarray(Y, dtype=np.float64)


def dictionary_step(X, Y, lam):
    """Exact minimiser over W of ``sum_i f(x_i; y_i, W)`` for fixed codes.

    Solves ``(X^T X + 2 lam diag(s)) W = (1 + 2 lam) X^T Y``; every
    atom must be used (s > 0).
    """
    XtX, s, XtY = statistics(X, Y)
    return np.linalg.solve(XtX + 2 * lam * np.diag(s), (1 + 2 * lam) * XtY)


def dictionary_gradient(X, Y, W, lam):
    """Gradient over W of ``sum_i f(x_i; y_i, W)`` (m x d)."""
    s = X.sum(axis=0)
    return X.T @ (X @ W - Y) + 2 * lam * (s[:, None] * W - X.T @ Y)


def spectral_embedding(X, k, embedding="leading", steps=None):
    """Normalized spectral embedding of the bipartite code graph.

    Computed the slow way: the left singular vectors of the full
    ``Z = X diag(s)^(-1/2)`` (n x m), whose squared singular values are the
    eigenvalues of the point -> atom -> point walk. ``"leading"``: the top
    k. ``"diffusion"``: the top 2k (at most m), column j > k weighted by
    ``(sigma_j^2 / sigma_k^2)^steps`` (``steps`` given). Returns ``(U,
    sigma)`` (the singular values of the columns returned).
    """
    s = X.sum(axis=0)
    Z = X / np.sqrt(s)
    U, sigma, _ = np.linalg.svd(Z, full_matrices=False)
    c = k if embedding == "leading" else min(2 * k, sigma.size)
    weights = np.ones(c)
    if c > k:
        weights[k:] = (sigma[k:c] ** 2 / sigma[k - 1] ** 2) ** steps
    return U[:, :c] * weights, sigma[:c]


def unrolled_loss_grad(Y, W, lam, n_iter, alpha):
    """Mean loss of the unrolled encoder and its gradients (docs/unrolled.md), by hand.

    The loss is ``(1/n) sum_i f(x_T(y_i); y_i, W)`` with ``x_T`` the output
    of :func:`encode` at step ``alpha``. The backward pass keeps every
    iterate, uses the direct form (no Gram matrix) and the projection's
    Jacobian ``I_S - 1_S 1_S^T / |S|`` on the support S of its output.

    Returns
    -------
    loss : float
    grad_W : ndarray of shape (m, d)
        Gradient over W at fixed ``alpha``.
    grad_alpha : float
    """
    n = Y.shape[0]
    D = squared_distances(Y, W)
    beta = [t / (t + 3) for t in range(n_iter)]
    Xs = [np.zeros((n, W.shape[0]))]
    Zs = [np.zeros((n, W.shape[0]))]
    grads = []
    for t in range(n_iter):
        grad = (Zs[t] @ W - Y) @ W.T + lam * D
        x = project_simplex(Zs[t] - alpha * grad)
        grads.append(grad)
        Xs.append(x)
        Zs.append(x + beta[t] * (x - Xs[t]))
    X = Xs[-1]
    R = X @ W - Y
    loss = np.mean(0.5 * (R**2).sum(axis=1) + lam * (X * D).sum(axis=1))
    gW = X.T @ R + 2 * lam * (X.sum(axis=0)[:, None] * W - X.T @ Y)
    ga = 0.0
    Xbar = [np.zeros_like(X) for _ in range(n_iter + 1)]
    Xbar[n_iter] = R @ W.T + lam * D
    for t in range(n_iter - 1, -1, -1):
        S = Xs[t + 1] > 0
        xb = np.where(S, Xbar[t + 1], 0.0)
        Vb = np.where(S, xb - xb.sum(axis=1, keepdims=True) / S.sum(axis=1, keepdims=True), 0.0)
        Z = Zs[t]
        ga -= np.sum(Vb * grads[t])
        # v = z - alpha ((z W - y) W^T + lam ||y - w_j||^2)
        gW -= alpha * (Z.T @ (Vb @ W) + Vb.T @ (Z @ W - Y))
        gW -= 2 * alpha * lam * (Vb.sum(axis=0)[:, None] * W - Vb.T @ Y)
        Zb = Vb - alpha * (Vb @ W) @ W.T
        if t >= 1:
            Xbar[t] += (1 + beta[t - 1]) * Zb
            Xbar[t - 1] -= beta[t - 1] * Zb
    return loss, gW / n, ga / n


def vote_neighbours(Y, W, R, q, probe_atoms, skip=None):
    """Twin of :func:`fastkds._vote_kernels.nearest_references` (without
    its shortcut): each row's ``q`` nearest references ``R`` among the cells
    (nearest atom of ``W``) of its ``probe_atoms`` nearest atoms, then of
    further ones, nearest first, until a cell holds a candidate; ordered by
    distance, then index; -1 where there are fewer. ``skip[i]`` (optional)
    leaves one reference out of row i's candidates.
    """
    cells = np.argmin(squared_distances(R.astype(np.float64), W.astype(np.float64)), axis=1)
    out = np.full((Y.shape[0], q), -1)
    for i, y in enumerate(Y.astype(np.float64)):
        order = np.argsort(((y - W) ** 2).sum(axis=1), kind="stable")
        for n_probed in range(1, W.shape[0] + 1):
            candidates = np.flatnonzero(np.isin(cells, order[:n_probed]))
            if skip is not None:
                candidates = candidates[candidates != skip[i]]
            if n_probed >= probe_atoms and candidates.size:
                break
        d = ((R[candidates].astype(np.float64) - y) ** 2).sum(axis=1)
        best = candidates[np.lexsort((candidates, d))][:q]
        out[i, : best.size] = best
    return out


def vote(neighbours, labels, own, n_clusters, ranked=False):
    """Twin of :func:`fastkds._vote_kernels.vote`: each row's label held by
    most of its neighbours (-1: none; with ``ranked`` the r-th listed counts
    ``1 / r``), ``own[i] >= 0`` half a vote; ties to the nearest neighbour's
    label; no neighbours: ``own[i]``."""
    out = np.empty(neighbours.shape[0], dtype=int)
    for i, row in enumerate(neighbours):
        counts = np.zeros(n_clusters)
        for rank, j in enumerate(row, start=1):
            if j >= 0:
                counts[labels[j]] += 1.0 / rank if ranked else 1.0
        if own[i] >= 0:
            counts[own[i]] += 0.5
        tied = [labels[j] for j in row[row >= 0] if counts[labels[j]] == counts.max()]
        out[i] = tied[0] if tied else own[i]
    return out


def first_distinct(values, size):
    """The first ``size`` distinct entries of ``values``, in the order they
    come (fewer when there are not as many), by sorting: the twin of
    ``_kernels.first_distinct``."""
    _, first = np.unique(values, return_index=True)
    return values[np.sort(first)[:size]]


def philox_uniforms(key, row_start, n):
    """Uniforms in [0, 1) of rows ``row_start .. row_start + n - 1``, from
    NumPy's Philox: those :func:`fastkds._kernels.reservoir_top` forms.

    Philox is counter-based: each counter value gives four 64-bit outputs,
    so output ``i`` is found without drawing the ones before it.
    """
    counter, skip = divmod(row_start, 4)
    raw = np.random.Philox(key=key, counter=counter).random_raw(n + skip)[skip:]
    return (raw >> np.uint64(11)) * (1.0 / 2**53)


def reservoir_top(key, row_start, objective, k):
    """The ``k`` largest keys ``log(u) / w`` of a chunk's rows and those
    rows (chunk-local), largest first, ties to the lower row: twin of
    :func:`fastkds._kernels.reservoir_top` with its blocks joined, by
    NumPy's ``log``, division and ``partition``."""
    n = objective.shape[0]
    k = min(k, n)
    w = objective.astype(np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        keys = np.log(philox_uniforms(key, row_start, n)) / w  # w = 0 -> -inf: drawn last
    if k == 0:
        return np.empty(0), np.empty(0, dtype=np.int64)
    thr = np.partition(keys, n - k)[n - k]
    top = np.flatnonzero(keys > thr)
    top = np.concatenate([top, np.flatnonzero(keys == thr)[: k - top.size]])
    order = np.lexsort((top, -keys[top]))
    return keys[top][order], top[order]

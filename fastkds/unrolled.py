"""The paper's main solver: train the dictionary by backpropagation
through the unrolled encoder, with Adam on mini-batches.

The loss of a mini-batch is the mean KDS objective of the codes the T-step
encoder produces, ``(1/n) sum_i f(x_T(y_i; W, alpha); y_i, W)``. Its gradient
comes from the hand-written forward/backward kernel of
:mod:`fastkds._unrolled_kernels`; no autodiff framework is involved.

The encoder step. With a fixed step (``train_step=False``) it is
``alpha = 1 / sigma_max(W)^2``, recomputed from the current dictionary at
every mini-batch, exactly as the encoder uses it afterwards; the gradient
includes the dependence of alpha on W (through the top eigenpair of
``W W^T``). With a trainable step it is reparametrised as

    alpha = STEP_BOUND * sigmoid(theta) / sigma_max(W)^2,   theta_0 = logit(1 / STEP_BOUND),

so it starts where the fixed step is and can never leave
``(0, STEP_BOUND / sigma_max(W)^2)``: Adam moves a parameter by about the
learning rate per step whatever the gradient's scale (the gradient clipping
does not hold it), so an unbounded step drifts past the range where the
accelerated iteration converges, the codes become 1-sparse and the
clustering collapses (docs/unrolled.md, "The step bound, and why").
"""

import numpy as np
import scipy.linalg

from . import _config, _unrolled_kernels
from .prepared import momentum, typed_constants

#: The trainable step is at most this multiple of 1 / sigma_max(W)^2. On
#: noisy moons (10 seeds, 1000 epochs) a bound of 1.5 matched the fixed step's
#: accuracy; 2 let one seed fall by 0.7% (docs/unrolled.md).
STEP_BOUND = 1.5


def _n_parts(n, m, itemsize):
    """Parts of a batch reduced separately: fixed by n and m, never by the threads."""
    return int(
        max(1, min(16, -(-n // _config.UNROLLED_PART_POINTS), _config.UNROLLED_PARTS_BUDGET // (itemsize * m * m)))
    )


def _top_eigenpair(W, G=None):
    """Largest eigenvalue of ``W W^T`` (= sigma_max(W)^2) and its unit eigenvector
    (``G``: ``W W^T`` when the caller has it)."""
    if G is None:
        with np.errstate(over="ignore", invalid="ignore"):
            G = W @ W.T
    _refuse_overflow(G)  # eigh would give no eigenpair at all
    m = G.shape[0]
    vals, vecs = scipy.linalg.eigh(G, subset_by_index=[m - 1, m - 1], check_finite=False)
    return float(vals[0]), vecs[:, 0]


def _refuse_overflow(products):
    """Raise where the atoms' products (their Gram matrix, or their squared
    norms, which bound it) are not finite in float64."""
    if not np.all(np.isfinite(products)):
        raise ValueError(
            "the atoms' squared norms overflow float64: the training diverged (lower learning_rate) "
            "or the data need rescaling"
        )


def _sigmoid(theta):
    return 1.0 / (1.0 + np.exp(-theta))


def initial_theta():
    """theta with ``STEP_BOUND * sigmoid(theta) = 1``: the trainable step starts at the fixed one."""
    return float(-np.log(STEP_BOUND - 1.0))


def step_size(W, theta=None):
    """The encoder step for dictionary ``W``: ``1 / sigma_max(W)^2``, or the
    bounded trainable step when ``theta`` is given (see the module doc)."""
    top, _ = _top_eigenpair(np.asarray(W, dtype=np.float64))
    scale = 1.0 if theta is None else STEP_BOUND * _sigmoid(theta)
    return scale / top if top > 0 else scale


def theta_from_step(W, step):
    """Inverse of :func:`step_size` in theta (to resume training from a fitted step)."""
    top, _ = _top_eigenpair(np.asarray(W, dtype=np.float64))
    frac = min(max(step * (top if top > 0 else 1.0) / STEP_BOUND, 1e-12), 1 - 1e-12)
    return float(np.log(frac / (1.0 - frac)))


class _Workspace:
    """Kernel buffers reused from one mini-batch to the next."""

    def __init__(self):
        self._bufs = {}

    def get(self, name, shape, dtype):
        buf = self._bufs.get(name)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = np.empty(shape, dtype=dtype)
            self._bufs[name] = buf
        return buf


def loss_and_gradient_fixed_step(Y, W, lam, n_iter, alpha, workspace=None, gram=None):
    """Mean unrolled loss of the batch ``Y`` and its gradients at a given step.

    Parameters
    ----------
    Y : ndarray of shape (n, d), float32 or float64, C-contiguous
        The working dtype is Y's.
    W : ndarray of shape (m, d)
    lam : float
    n_iter : int
        Encoder steps T.
    alpha : float
        Encoder step, held fixed.
    workspace : _Workspace or None
        Buffers reused between calls.
    gram : ndarray of shape (m, m) or None
        ``W W^T`` in float64, when the caller has it.

    Returns
    -------
    loss : float
    grad_W : ndarray of shape (m, d), float64
    grad_alpha : float
    """
    dtype = Y.dtype
    n, _ = Y.shape
    W64 = np.asarray(W, dtype=np.float64)
    m = W64.shape[0]
    ws = workspace if workspace is not None else _Workspace()
    Wd = W64.astype(dtype, copy=False)
    G64 = W64 @ W64.T if gram is None else gram
    G = G64.astype(dtype, copy=False)
    ww = np.ascontiguousarray(np.diag(G64)).astype(dtype)
    B = ws.get("B", (n, m), dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        np.dot(Y, Wd.T, out=B)
        yy = np.einsum("ij,ij->i", Y, Y)
    H_parts = ws.get("H", (_n_parts(n, m, dtype.itemsize), m, m), dtype)
    C = ws.get("C", (n, m), dtype)
    loss = ws.get("loss", (n,), dtype)
    dalpha = ws.get("dalpha", (n,), dtype)
    _unrolled_kernels.unrolled_batch(
        B,
        yy,
        G,
        ww,
        dtype.type(alpha),
        dtype.type(lam),
        momentum(n_iter, dtype),
        typed_constants(m, dtype),
        H_parts,
        C,
        loss,
        dalpha,
    )
    K = H_parts.sum(axis=0, dtype=np.float64)
    H = K + K.T
    grad = H @ W64
    grad += (C.T @ Y).astype(np.float64, copy=False)
    grad /= n
    f = float(np.sum(loss, dtype=np.float64)) / n
    ga = float(np.sum(dalpha, dtype=np.float64)) / n
    if not (np.isfinite(f) and np.isfinite(ga) and np.all(np.isfinite(grad))):
        raise ValueError(
            f"the unrolled loss or its gradient is not finite in {dtype.name}: rescale the data"
            + (" or use float64" if dtype == np.float32 else "")
        )
    return f, grad, ga


def loss_and_gradient(Y, W, lam, n_iter, theta=None, workspace=None):
    """Mean unrolled loss and its gradient, with the step a function of W.

    The step is ``1 / sigma_max(W)^2`` (``theta=None``) or the bounded
    trainable step of the module doc; the gradient over W includes its
    dependence on W: ``d lambda_max(W W^T) / dW = 2 u u^T W`` with u the top
    eigenvector.

    Returns
    -------
    loss : float
    grad_W : ndarray of shape (m, d), float64
    grad_theta : float (0.0 when ``theta`` is None)
    alpha : float, the step used
    """
    W64 = np.asarray(W, dtype=np.float64)
    G64 = W64 @ W64.T
    top, u = _top_eigenpair(W64, G64)
    scale = 1.0 if theta is None else STEP_BOUND * _sigmoid(theta)
    if top > 0:
        alpha = scale / top
    else:  # a zero dictionary: any step works, and none depends on W
        alpha = scale
    f, gW, ga = loss_and_gradient_fixed_step(Y, W64, lam, n_iter, alpha, workspace, gram=G64)
    if top > 0:
        gW -= (2.0 * ga * alpha / top) * np.outer(u, u @ W64)
    gt = 0.0 if theta is None else ga * alpha * (1.0 - _sigmoid(theta))
    return f, gW, gt, alpha


class UnrolledTrainer:
    """Adam on the unrolled loss: the state of a fit, kept for ``partial_fit``.

    Parameters
    ----------
    W : ndarray of shape (m, d)
        Initial dictionary (copied, kept in float64).
    lam : float
    n_iter : int
    train_step : bool
        Train the bounded step (theta) as well as W.
    learning_rate : float
        Adam's learning rate (the paper: 1e-3).
    clip_norm : float
        The gradient of (W, theta) is rescaled to at most this norm before
        each Adam step (the paper: 1e-4), as torch's ``clip_grad_norm_``.
    theta : float or None
        Initial theta (default: the step starts at ``1 / sigma_max(W)^2``).
    fixed_step : float or None
        Hold the encoder step at this value (the paper's released code holds
        it at ``1 / sigma_max(W_0)^2``, see ``freeze_step`` of
        :class:`fastkds.KDS`) instead of following the current dictionary.
        Only with ``train_step=False``.
    """

    BETA1 = 0.9
    BETA2 = 0.999
    EPS = 1e-8

    def __init__(self, W, *, lam, n_iter, train_step, learning_rate, clip_norm, theta=None, fixed_step=None):
        if fixed_step is not None and train_step:
            raise ValueError("a fixed step and train_step exclude each other")
        self.W = np.array(W, dtype=np.float64)
        self.fixed_step = None if fixed_step is None else float(fixed_step)
        self.lam = lam
        self.n_iter = n_iter
        self.train_step = train_step
        self.learning_rate = learning_rate
        self.clip_norm = clip_norm
        self.theta = (initial_theta() if theta is None else float(theta)) if train_step else None
        self.m_W = np.zeros_like(self.W)
        self.v_W = np.zeros_like(self.W)
        self.m_t = 0.0
        self.v_t = 0.0
        self.n_steps = 0
        self._ws = _Workspace()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_ws"] = None  # buffers, not state
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._ws = _Workspace()

    @property
    def step(self):
        """The encoder step for the current dictionary (or the fixed one)."""
        if self.fixed_step is not None:
            return self.fixed_step
        return step_size(self.W, self.theta)

    def adam_step(self, Y):
        """One Adam step on the mini-batch ``Y``; returns the batch's loss (before the step)."""
        if self.fixed_step is not None:
            f, gW, _ = loss_and_gradient_fixed_step(Y, self.W, self.lam, self.n_iter, self.fixed_step, self._ws)
            gt = 0.0
        else:
            f, gW, gt, _ = loss_and_gradient(Y, self.W, self.lam, self.n_iter, self.theta, self._ws)
        norm = float(np.sqrt(np.sum(gW * gW) + gt * gt))
        c = 1.0
        if norm > self.clip_norm:
            c = self.clip_norm / (norm + 1e-6)
            gt *= c
        self.n_steps += 1
        k = self.n_steps
        b1, b2, lr, eps = self.BETA1, self.BETA2, self.learning_rate, self.EPS
        c1 = 1.0 - b1**k
        c2 = 1.0 - b2**k
        _unrolled_kernels.adam_update(self.W, gW, self.m_W, self.v_W, c, lr, b1, b2, c1, c2, eps)
        with np.errstate(over="ignore"):
            _refuse_overflow(np.einsum("ij,ij->i", self.W, self.W))  # a step this large ends the fit here
        if self.theta is not None:
            self.m_t = b1 * self.m_t + (1.0 - b1) * gt
            self.v_t = b2 * self.v_t + (1.0 - b2) * gt * gt
            self.theta -= lr * (self.m_t / c1) / (np.sqrt(self.v_t / c2) + eps)
        return f

    def epoch(self, Y, batch_size, rng=None):
        """One pass over ``Y`` in mini-batches (shuffled when ``rng`` is given).

        Returns the mean over the points of the batch losses.
        """
        n = Y.shape[0]
        order = rng.permutation(n) if rng is not None else None
        total = 0.0
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)
            if order is None:
                batch = Y[start:stop]
            else:
                batch = np.ascontiguousarray(Y[np.sort(order[start:stop])])
            total += self.adam_step(batch) * (stop - start)
        return total / n


def fit_unrolled(
    Y,
    W_init,
    *,
    lam,
    n_iter,
    max_epochs,
    batch_size,
    learning_rate,
    clip_norm,
    shuffle,
    train_step,
    random_state,
    progress=None,
    freeze_step=False,
):
    """Train the dictionary by backpropagation through the unrolled encoder.

    Parameters
    ----------
    Y : ndarray of shape (n, d), validated, float32 or float64
    W_init : ndarray of shape (m, d)
    lam, n_iter : the objective and the encoder (T)
    max_epochs : int
        Passes over the data (the paper runs a fixed number).
    batch_size, learning_rate, clip_norm, shuffle, train_step :
        See :class:`fastkds.KDS`.
    random_state : numpy RandomState
        Shuffles the points each epoch.
    progress : callable or None
        Called as ``progress(epoch, mean_loss, 0)`` after each epoch.
    freeze_step : bool, default=False
        See :class:`fastkds.KDS`.

    Returns
    -------
    trainer : UnrolledTrainer
        Its ``W`` and ``step`` are the result; kept to continue with ``partial_fit``.
    history : list of float
        Mean mini-batch loss of each epoch.
    """
    trainer = UnrolledTrainer(
        W_init,
        lam=lam,
        n_iter=n_iter,
        train_step=train_step,
        learning_rate=learning_rate,
        clip_norm=clip_norm,
        fixed_step=step_size(W_init) if freeze_step else None,
    )
    history = []
    for epoch in range(1, max_epochs + 1):
        F = trainer.epoch(Y, batch_size, random_state if shuffle else None)
        history.append(F)
        if progress is not None:
            progress(epoch, F, 0)
    return trainer, history

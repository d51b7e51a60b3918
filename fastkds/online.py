"""Online dictionary learning with the exact dictionary step: ``partial_fit``
for the exact solver.

Each chunk is encoded with the current dictionary and its sufficient
statistics ``X^T X``, ``s = X^T 1`` and ``X^T Y`` (docs/algorithm.md, "Dictionary") are added to
running sums after these are decayed, as in online dictionary learning
(Mairal, Bach, Ponce, Sapiro, JMLR 2010, section 3.4, and scikit-learn's
MiniBatchDictionaryLearning)::

    A_t = beta_t A_{t-1} + A_chunk,    beta_t = (1 - 1/t)^rho,

t counting the chunks. The codes of old chunks were computed with older
dictionaries; the decay lets them fade (chunk i weighs ``(i/t)^rho`` at step
t). Then the dictionary solves ``(A + 2 lam diag(s)) W = (1 + 2 lam) B`` from
the running sums. Memory is independent of the stream's length.
"""

import numpy as np

from .solvers import SufficientStatistics, duplicate_atoms, solve_dictionary

#: rho of the decay ``(1 - 1/t)^rho``; 1 weighs chunk i by i/t (scikit-learn's choice).
FORGET_EXPONENT = 1.0


class RunningStatistics:
    """Decayed running sums of the sufficient statistics over a stream of chunks.

    Parameters
    ----------
    n_atoms, n_features : int
    rho : float or None
        Exponent of the decay (None: :data:`FORGET_EXPONENT`).
    """

    def __init__(self, n_atoms, n_features, rho=None):
        self.XtX = np.zeros((n_atoms, n_atoms))
        self.s = np.zeros(n_atoms)
        self.XtY = np.zeros((n_atoms, n_features))
        self.rho = FORGET_EXPONENT if rho is None else float(rho)
        self.n_chunks = 0
        self.candidates = np.empty((0, n_features))

    def add(self, chunk):
        """Decay the sums, then add a chunk's :class:`SufficientStatistics`."""
        self.n_chunks += 1
        decay = (1.0 - 1.0 / self.n_chunks) ** self.rho
        for name in ("XtX", "s", "XtY"):
            total = getattr(self, name)
            total *= decay
            total += getattr(chunk, name)
        self.candidates = chunk.candidates

    def forget_atoms(self, atoms):
        """Drop the history of re-seeded atoms: their statistics describe the old place."""
        self.XtX[atoms, :] = 0.0
        self.XtX[:, atoms] = 0.0
        self.s[atoms] = 0.0
        self.XtY[atoms] = 0.0


def online_step(Y, W, running, *, lam, n_iter, chunk_size, backend, random_state, step="centred", encoder="apg"):
    """Encode the chunk ``Y`` with ``W``, update ``running`` and return the new dictionary.

    Atoms unused since they were placed, and atoms that coincide with
    another, are re-seeded at badly coded points of the chunk (drawn as in
    :class:`~fastkds.solvers.SufficientStatistics`).

    Returns
    -------
    W : ndarray of shape (m, d), float64
    objective : float
        Mean objective of the chunk's codes under the old ``W``.
    n_reseeded : int
    """
    m, d = W.shape
    prepared = backend.prepare(W, lam, n_iter, Y.dtype, step, encoder)
    chunk = SufficientStatistics(m, d, n_candidates=m, random_state=random_state)
    backend.run_epoch(Y, prepared, min(chunk_size, Y.shape[0]), chunk)
    running.add(chunk)
    # re-seeding is done here, where the running sums of those atoms can be reset
    solver_view = _StatsView(running)
    W_new, _ = solve_dictionary(solver_view, lam, W)
    dead = np.flatnonzero((running.s <= 0) | duplicate_atoms(W_new))
    n_seed = min(dead.size, running.candidates.shape[0])
    if n_seed:
        W_new[dead[:n_seed]] = running.candidates[:n_seed]
        running.forget_atoms(dead[:n_seed])
    return W_new, chunk.mean_objective, n_seed


class _StatsView:
    """The running sums as :func:`solve_dictionary` reads them, without re-seed candidates."""

    def __init__(self, running):
        self.XtX = running.XtX
        self.s = running.s
        self.XtY = running.XtY
        self.candidates = np.empty((0, running.XtY.shape[1]))

"""Figures of the paper's experiments (matplotlib, the optional ``plot`` extra).

matplotlib is imported only when a figure is drawn; without it every
function raises an ImportError that names the extra to install. Figures are
built on :class:`matplotlib.figure.Figure` directly (no pyplot state), so
they work on machines without a display.
"""

import os

import numpy as np


def require_matplotlib():
    """Import matplotlib, or raise an ImportError naming the ``plot`` extra.

    Returns
    -------
    module
        The ``matplotlib`` module.
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            "fastkds's figures need matplotlib: pip install 'fastkds[plot]' (or pip install matplotlib)"
        ) from exc
    return matplotlib


def _figure(figsize):
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained")


def plot_atoms_2d(Y, labels, atoms, *, title=None, max_points=5000, random_state=0):
    """Two-dimensional data coloured by label, with the learned atoms on top.

    Parameters
    ----------
    Y : ndarray of shape (n, 2)
    labels : ndarray of shape (n,)
    atoms : ndarray of shape (m, 2)
    title : str or None
    max_points : int, default=5000
        Plot a random subset of at most this many points.
    random_state : int, default=0
        Seeds that subset.

    Returns
    -------
    matplotlib.figure.Figure
    """
    Y, atoms = np.asarray(Y), np.asarray(atoms)
    if Y.ndim != 2 or Y.shape[1] != 2 or atoms.ndim != 2 or atoms.shape[1] != 2:
        raise ValueError(f"plot_atoms_2d needs 2-D points and atoms, got {Y.shape} and {atoms.shape}")
    if Y.shape[0] > max_points:
        keep = np.random.default_rng(random_state).choice(Y.shape[0], max_points, replace=False)
        Y, labels = Y[keep], np.asarray(labels)[keep]
    fig = _figure((4.2, 3.6))
    ax = fig.add_subplot()
    ax.scatter(Y[:, 0], Y[:, 1], c=labels, s=2, cmap="coolwarm", alpha=0.45, linewidths=0)
    ax.scatter(atoms[:, 0], atoms[:, 1], s=28, c="black", marker="x", linewidths=1.4, label=f"{len(atoms)} atoms")
    ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def plot_heatmap(n_atoms, deltas, accuracy, *, title=None):
    """Accuracy over a grid of atom counts (rows) and separations (columns).

    Parameters
    ----------
    n_atoms : sequence of int
    deltas : sequence of float
    accuracy : ndarray of shape (len(n_atoms), len(deltas))
    title : str or None

    Returns
    -------
    matplotlib.figure.Figure
    """
    accuracy = np.asarray(accuracy, dtype=float)
    if accuracy.shape != (len(n_atoms), len(deltas)):
        raise ValueError(f"accuracy has shape {accuracy.shape}, expected ({len(n_atoms)}, {len(deltas)})")
    fig = _figure((5.0, 3.8))
    ax = fig.add_subplot()
    im = ax.imshow(accuracy, origin="lower", cmap="viridis", vmin=0.5, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(deltas)), [f"{d:g}" for d in deltas])
    ax.set_yticks(range(len(n_atoms)), [str(m) for m in n_atoms])
    ax.set_xlabel("separation delta")
    ax.set_ylabel("atoms m")
    for i in range(accuracy.shape[0]):
        for j in range(accuracy.shape[1]):
            a = accuracy[i, j]
            ax.text(j, i, f"{a:.2f}"[1:] if a < 1 else "1", ha="center", va="center", fontsize=7,
                    color="black" if a > 0.8 else "white")
    fig.colorbar(im, ax=ax, label="accuracy")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def plot_atom_grid(atoms, image_shape, *, n_cols=10, n_rows=None, title=None):
    """A grid of atoms drawn as images (e.g. learned MNIST atoms).

    Parameters
    ----------
    atoms : ndarray of shape (m, height * width)
    image_shape : (int, int)
    n_cols : int, default=10
    n_rows : int or None
        Defaults to as many rows as needed, at most 10; the first
        ``n_rows * n_cols`` atoms are drawn.
    title : str or None

    Returns
    -------
    matplotlib.figure.Figure
    """
    atoms = np.asarray(atoms)
    h, w = image_shape
    if atoms.ndim != 2 or atoms.shape[1] != h * w:
        raise ValueError(f"atoms of shape {atoms.shape} are not images of shape {image_shape}")
    if n_rows is None:
        n_rows = min(10, -(-atoms.shape[0] // n_cols))
    count = min(atoms.shape[0], n_rows * n_cols)
    canvas = np.full((n_rows * (h + 1) + 1, n_cols * (w + 1) + 1), np.nan)
    for idx in range(count):
        r, c = divmod(idx, n_cols)
        a = atoms[idx].reshape(h, w)
        span = a.max() - a.min()
        canvas[1 + r * (h + 1) : 1 + r * (h + 1) + h, 1 + c * (w + 1) : 1 + c * (w + 1) + w] = (
            (a - a.min()) / span if span > 0 else 0.0
        )
    fig = _figure((0.5 * n_cols, 0.5 * n_rows + (0.3 if title else 0)))
    ax = fig.add_subplot()
    ax.imshow(canvas, cmap="gray_r", interpolation="nearest")
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def plot_embedding(embedding, labels, *, title=None, max_points=5000, random_state=0):
    """The spectral embedding coloured by the true label.

    The embedding's rows are projected on their two leading principal axes.

    Parameters
    ----------
    embedding : ndarray of shape (n, k)
        E.g. ``KDSClustering.embedding_``.
    labels : ndarray of shape (n,)
    title : str or None
    max_points : int, default=5000
    random_state : int, default=0

    Returns
    -------
    matplotlib.figure.Figure
    """
    E = np.asarray(embedding, dtype=float)
    labels = np.asarray(labels)
    if E.ndim != 2 or E.shape[0] != labels.shape[0]:
        raise ValueError(f"embedding of shape {E.shape} does not match {labels.shape[0]} labels")
    if E.shape[0] > max_points:
        keep = np.random.default_rng(random_state).choice(E.shape[0], max_points, replace=False)
        E, labels = E[keep], labels[keep]
    centred = E - E.mean(axis=0)
    if E.shape[1] > 2:
        _, _, Vt = np.linalg.svd(centred, full_matrices=False)
        P = centred @ Vt[:2].T
    else:
        P = np.c_[centred, np.zeros((E.shape[0], 2 - E.shape[1]))]
    fig = _figure((4.4, 3.8))
    ax = fig.add_subplot()
    for value in np.unique(labels):
        sel = labels == value
        ax.scatter(P[sel, 0], P[sel, 1], s=3, alpha=0.5, linewidths=0, label=str(value))
    ax.legend(title="label", fontsize=7, title_fontsize=8, markerscale=4, frameon=False, loc="best")
    ax.set_xlabel("principal axis 1")
    ax.set_ylabel("principal axis 2")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def _save(fig, directory, name):
    path = os.path.join(directory, name)
    fig.savefig(path, dpi=100)
    return path


def paper_figures(rows, grid, directory, *, quick=False):
    """Write the figures of an experiments run (:mod:`fastkds.experiments`).

    Parameters
    ----------
    rows : list of fastkds.experiments.Row
        Rows whose seed-0 models are drawn (moons atoms, MNIST atoms and the
        MNIST spectral embedding, or the first other fitted row's embedding).
    grid : fastkds.experiments.CirclesGrid or None
        Its heat map is drawn, and one circles fit (delta = 0.15, as in the
        paper's figure) for the atoms.
    directory : str or path-like
        Created if needed.
    quick : bool, default=False
        Fit the circles figure on few points.

    Returns
    -------
    list of str
        Paths written.
    """
    from .experiments import _fit_kds
    from .datasets import make_circles

    require_matplotlib()
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    written = []
    by_name = {r.exp.name: r for r in rows if r.model is not None}
    if "moons" in by_name:
        r = by_name["moons"]
        Y, y = r.data
        written.append(_save(plot_atoms_2d(
            Y, y, r.model.components_,
            title=f"noisy moons: {r.exp.n_atoms} learned atoms (n={len(Y)})"), directory, "moons_atoms.png"))
    if grid is not None and grid.accuracy is not None:
        written.append(_save(plot_heatmap(
            grid.n_atoms, grid.deltas, grid.accuracy.mean(axis=2),
            title=f"concentric circles: KDS accuracy (n={grid.n_samples})"), directory, "circles_heatmap.png"))
        m = 12 if quick else 100
        Y, y = make_circles(300 if quick else grid.n_samples, 0.15, random_state=0)
        model, _ = _fit_kds(Y, 2, m, grid.lam, grid.n_iter, 100, 0)
        written.append(_save(plot_atoms_2d(
            Y, y, model.components_, title=f"concentric circles, delta=0.15: {m} learned atoms"),
            directory, "circles_atoms.png"))
    if "mnist5" in by_name:
        r = by_name["mnist5"]
        written.append(_save(plot_atom_grid(
            r.model.components_, (28, 28), title=f"MNIST-5: {min(100, r.exp.n_atoms)} of the {r.exp.n_atoms} learned atoms"),
            directory, "mnist_atoms.png"))
    embedded = by_name.get("mnist5") or next(iter(by_name.values()), None)
    if embedded is not None:
        written.append(_save(plot_embedding(
            embedded.model.embedding_, embedded.data[1],
            title=f"{embedded.exp.title}: spectral embedding of the codes"), directory, "embedding.png"))
    return written

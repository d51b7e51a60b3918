"""Plotting helpers for fitted models (matplotlib, the optional ``plot``
extra).

Each ``plot_*`` helper draws on the Axes given as ``ax=`` and returns it, as
seaborn's and scikit-learn's helpers do, so figures with several panels are
built the usual way::

    fig, (left, right) = plt.subplots(1, 2)
    plot_atoms_2d(Y, y, model.components_, ax=left)
    plot_embedding(model.embedding_, y, ax=right)

Without ``ax`` a helper opens a new figure through :mod:`matplotlib.pyplot`
(so ``plt.show()``, ``ax.figure.show()`` and notebooks display it) and
returns its Axes. No helper calls ``plt.show()``. The paper's figures are
drawn with these helpers by :func:`fastkds.experiments.paper_figures`, on
figures outside pyplot's state (:func:`new_figure`), so a run writing many
files keeps none of them open; :func:`atom_grid_shape` and
:func:`atom_grid_figsize` size a figure for :func:`plot_atom_grid`.

matplotlib is imported only when a figure is drawn; without it every
function raises an ImportError that names the extra to install.
"""

import numpy as np


def require_matplotlib():
    """Import matplotlib, or raise an ImportError naming the ``plot`` extra.

    Returns
    -------
    module
        The ``matplotlib`` module.

    Examples
    --------
    >>> from fastkds.plotting import require_matplotlib
    >>> require_matplotlib().__name__
    'matplotlib'
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            "fastkds's figures need matplotlib: pip install 'fastkds[plot]' (or pip install matplotlib)"
        ) from exc
    return matplotlib


def new_figure(figsize):
    """A matplotlib Figure outside pyplot's state, for figures written to files.

    pyplot keeps every figure it opens until it is closed; a Figure made
    here is freed with its last reference, so a loop writing many files
    keeps none of them open. Draw on it with ``new_figure(size).add_subplot()``
    and the ``plot_*`` helpers' ``ax=``.

    Parameters
    ----------
    figsize : (float, float)
        Width and height in inches.

    Returns
    -------
    matplotlib.figure.Figure
        With the constrained layout.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from fastkds.plotting import new_figure
    >>> before = plt.get_fignums()
    >>> ax = new_figure((4, 3)).add_subplot()
    >>> plt.get_fignums() == before
    True
    """
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained")


def _axes(ax, figsize):
    """``ax``, or the Axes of a new pyplot figure of size ``figsize``."""
    require_matplotlib()
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize, layout="constrained").add_subplot()


def _subsample(max_points, random_state, n, *arrays):
    """The arrays restricted to a random subset of at most ``max_points`` rows."""
    if max_points is None or n <= max_points:
        return arrays
    keep = np.random.default_rng(random_state).choice(n, max_points, replace=False)
    return tuple(None if a is None else a[keep] for a in arrays)


def plot_atoms_2d(Y, labels, atoms, *, ax=None, title=None, max_points=5000, random_state=0):
    """Two-dimensional data coloured by label, with the learned atoms on top.

    Parameters
    ----------
    Y : array-like of shape (n, 2)
        The points.
    labels : array-like of shape (n,) or None
        Colours of the points (true classes or ``labels_``); None draws
        them all in grey.
    atoms : array-like of shape (m, 2)
        The dictionary, e.g. ``KDS.components_``, drawn as black crosses.
    ax : matplotlib.axes.Axes or None, default=None
        Axes to draw on; None opens a new figure.
    title : str or None, default=None
        Title of the Axes.
    max_points : int or None, default=5000
        Draw a random subset of at most this many points (None: all).
    random_state : int, default=0
        Seeds that subset.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on: two collections, the points then the atoms, a
        legend and an equal aspect ratio.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from fastkds import KDS, make_moons
    >>> from fastkds.plotting import plot_atoms_2d
    >>> Y, y = make_moons(1000, random_state=0)
    >>> kds = KDS(12, lam=5.0, n_iter=10, random_state=0).fit(Y)
    >>> fig, ax = plt.subplots()
    >>> plot_atoms_2d(Y, y, kds.components_, ax=ax) is ax
    True
    >>> len(ax.collections)
    2
    >>> plt.close(fig)
    """
    Y, atoms = np.asarray(Y), np.asarray(atoms)
    if Y.ndim != 2 or Y.shape[1] != 2 or atoms.ndim != 2 or atoms.shape[1] != 2:
        raise ValueError(f"plot_atoms_2d needs 2-D points and atoms, got {Y.shape} and {atoms.shape}")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (Y.shape[0],):
            raise ValueError(f"{labels.shape[0] if labels.ndim else 0} labels for {Y.shape[0]} points")
    Y, labels = _subsample(max_points, random_state, Y.shape[0], Y, labels)
    ax = _axes(ax, (4.2, 3.6))
    if labels is None:
        ax.scatter(Y[:, 0], Y[:, 1], s=2, c="0.6", alpha=0.45, linewidths=0)
    else:
        ax.scatter(Y[:, 0], Y[:, 1], c=labels, s=2, cmap="coolwarm", alpha=0.45, linewidths=0)
    ax.scatter(atoms[:, 0], atoms[:, 1], s=28, c="black", marker="x", linewidths=1.4, label=f"{len(atoms)} atoms")
    ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_heatmap(n_atoms, deltas, accuracy, *, ax=None, title=None, colorbar=True):
    """Accuracy over a grid of atom counts (rows) and separations (columns).

    Parameters
    ----------
    n_atoms : sequence of int
        Row labels.
    deltas : sequence of float
        Column labels.
    accuracy : array-like of shape (len(n_atoms), len(deltas))
        Values in [0.5, 1] (the colour scale); each cell is written in it.
    ax : matplotlib.axes.Axes or None, default=None
        Axes to draw on; None opens a new figure.
    title : str or None, default=None
        Title of the Axes.
    colorbar : bool, default=True
        Add a colour bar beside ``ax`` (a second Axes of its figure).

    Returns
    -------
    matplotlib.axes.Axes
        The Axes of the heat map (one image and one text per cell), not the
        colour bar's.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from fastkds.plotting import plot_heatmap
    >>> fig, ax = plt.subplots()
    >>> accuracy = [[0.6, 0.9, 1.0], [0.7, 1.0, 1.0]]
    >>> ax = plot_heatmap([10, 20], [0.1, 0.2, 0.3], accuracy, ax=ax)
    >>> len(ax.images), len(ax.texts), len(fig.axes)
    (1, 6, 2)
    >>> plt.close(fig)
    """
    accuracy = np.asarray(accuracy, dtype=float)
    if accuracy.shape != (len(n_atoms), len(deltas)):
        raise ValueError(f"accuracy has shape {accuracy.shape}, expected ({len(n_atoms)}, {len(deltas)})")
    ax = _axes(ax, (5.0, 3.8))
    im = ax.imshow(accuracy, origin="lower", cmap="viridis", vmin=0.5, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(deltas)), [f"{d:g}" for d in deltas])
    ax.set_yticks(range(len(n_atoms)), [str(m) for m in n_atoms])
    ax.set_xlabel("separation delta")
    ax.set_ylabel("atoms m")
    for i in range(accuracy.shape[0]):
        for j in range(accuracy.shape[1]):
            a = accuracy[i, j]
            ax.text(
                j,
                i,
                f"{a:.2f}"[1:] if a < 1 else "1",
                ha="center",
                va="center",
                fontsize=7,
                color="black" if a > 0.8 else "white",
            )
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="accuracy")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def atom_grid_shape(n_atoms, n_cols=10, n_rows=None):
    """Rows and columns of :func:`plot_atom_grid`'s grid of ``n_atoms`` atoms.

    Parameters
    ----------
    n_atoms : int
    n_cols : int, default=10
    n_rows : int or None, default=None
        None: as many rows as the atoms need, at most 10.

    Returns
    -------
    n_rows, n_cols : int

    Examples
    --------
    >>> from fastkds.plotting import atom_grid_shape
    >>> atom_grid_shape(23, 5)
    (5, 5)
    >>> atom_grid_shape(500)    # at most 10 rows: the first 100 atoms
    (10, 10)
    """
    return (min(10, -(-n_atoms // n_cols)) if n_rows is None else n_rows), n_cols


def atom_grid_figsize(n_rows, n_cols, title=None):
    """Figure size (inches) of a grid of atom images: half an inch an atom,
    and room for a title when there is one.

    Parameters
    ----------
    n_rows, n_cols : int
        From :func:`atom_grid_shape`.
    title : str or None, default=None

    Returns
    -------
    (float, float)
        Width and height, for :func:`new_figure` or pyplot.
    """
    return 0.5 * n_cols, 0.5 * n_rows + (0.3 if title else 0)


def plot_atom_grid(atoms, image_shape, *, ax=None, n_cols=10, n_rows=None, title=None):
    """A grid of atoms drawn as images (e.g. learned MNIST atoms).

    Each atom is scaled to [0, 1] on its own and drawn dark on light, in one
    image with a one-pixel gap between atoms.

    Parameters
    ----------
    atoms : array-like of shape (m, height * width)
        The dictionary, e.g. ``KDS.components_``, one image per row.
    image_shape : (int, int)
        ``(height, width)`` of one image.
    ax : matplotlib.axes.Axes or None, default=None
        Axes to draw on; None opens a new figure sized to the grid.
    n_cols : int, default=10
        Atoms per row of the grid.
    n_rows : int or None, default=None
        Defaults to as many rows as needed, at most 10; the first
        ``n_rows * n_cols`` atoms are drawn.
    title : str or None, default=None
        Title of the Axes.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on: one image, axis lines off.

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib.pyplot as plt
    >>> from fastkds.plotting import plot_atom_grid
    >>> atoms = np.random.default_rng(0).random((12, 28 * 28))
    >>> ax = plot_atom_grid(atoms, (28, 28), n_cols=6)
    >>> ax.images[0].get_array().shape    # 2 x 6 images of 28 x 28
    (59, 175)
    >>> plt.close(ax.figure)
    """
    atoms = np.asarray(atoms)
    h, w = image_shape
    if atoms.ndim != 2 or atoms.shape[1] != h * w:
        raise ValueError(f"atoms of shape {atoms.shape} are not images of shape {image_shape}")
    n_rows, n_cols = atom_grid_shape(atoms.shape[0], n_cols, n_rows)
    count = min(atoms.shape[0], n_rows * n_cols)
    canvas = np.full((n_rows * (h + 1) + 1, n_cols * (w + 1) + 1), np.nan)
    for idx in range(count):
        r, c = divmod(idx, n_cols)
        a = atoms[idx].reshape(h, w)
        span = a.max() - a.min()
        canvas[1 + r * (h + 1) : 1 + r * (h + 1) + h, 1 + c * (w + 1) : 1 + c * (w + 1) + w] = (
            (a - a.min()) / span if span > 0 else 0.0
        )
    ax = _axes(ax, atom_grid_figsize(n_rows, n_cols, title))
    ax.imshow(canvas, cmap="gray_r", interpolation="nearest")
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_embedding(embedding, labels, *, ax=None, title=None, max_points=5000, random_state=0):
    """The spectral embedding coloured by label, one colour per label.

    The embedding's rows are projected on their two leading principal axes.

    Parameters
    ----------
    embedding : array-like of shape (n, k)
        E.g. ``KDSClustering.embedding_``.
    labels : array-like of shape (n,)
        True classes or ``labels_``; one scatter and one legend entry each.
    ax : matplotlib.axes.Axes or None, default=None
        Axes to draw on; None opens a new figure.
    title : str or None, default=None
        Title of the Axes.
    max_points : int or None, default=5000
        Draw a random subset of at most this many points (None: all).
    random_state : int, default=0
        Seeds that subset.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on: one collection per distinct label, and a legend.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from fastkds import KDSClustering, make_moons
    >>> from fastkds.plotting import plot_embedding
    >>> Y, y = make_moons(1000, random_state=0)
    >>> model = KDSClustering(2, n_atoms=12, lam=5.0, n_iter=10,
    ...                       random_state=0).fit(Y)
    >>> ax = plot_embedding(model.embedding_, y)
    >>> len(ax.collections)
    2
    >>> plt.close(ax.figure)
    """
    E = np.asarray(embedding, dtype=float)
    labels = np.asarray(labels)
    if E.ndim != 2 or E.shape[0] != labels.shape[0]:
        raise ValueError(f"embedding of shape {E.shape} does not match {labels.shape[0]} labels")
    E, labels = _subsample(max_points, random_state, E.shape[0], E, labels)
    centred = E - E.mean(axis=0)
    if E.shape[1] > 2:
        _, _, Vt = np.linalg.svd(centred, full_matrices=False)
        P = centred @ Vt[:2].T
    else:
        P = np.c_[centred, np.zeros((E.shape[0], 2 - E.shape[1]))]
    ax = _axes(ax, (4.4, 3.8))
    for value in np.unique(labels):
        sel = labels == value
        ax.scatter(P[sel, 0], P[sel, 1], s=3, alpha=0.5, linewidths=0, label=str(value))
    ax.legend(title="label", fontsize=7, title_fontsize=8, markerscale=4, frameon=False, loc="best")
    ax.set_xlabel("principal axis 1")
    ax.set_ylabel("principal axis 2")
    if title:
        ax.set_title(title, fontsize=10)
    return ax

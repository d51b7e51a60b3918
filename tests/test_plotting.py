"""The plotting helpers (:mod:`fastkds.plotting`): each draws on the Axes it
is given, or on a new pyplot figure, returns that Axes, never calls
``plt.show()``; :func:`~fastkds.experiments.paper_figures`, which draws the
paper's figures with them, leaves no pyplot figure open. Agg backend
throughout."""

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fastkds import experiments, plotting  # noqa: E402

RNG = np.random.default_rng(0)
Y = RNG.normal(size=(300, 2))
LABELS = (Y[:, 0] > 0).astype(int)
ATOMS = RNG.normal(size=(7, 2))
EMBEDDING = RNG.normal(size=(300, 4))
IMAGES = RNG.random((12, 5 * 4))

# name -> (call drawing on ax, what it leaves on that Axes)
HELPERS = {
    "plot_atoms_2d": (
        lambda ax: plotting.plot_atoms_2d(Y, LABELS, ATOMS, ax=ax, title="t"),
        {"collections": 2, "images": 0, "texts": 0},
    ),
    "plot_heatmap": (
        lambda ax: plotting.plot_heatmap([5, 10], [0.1, 0.2, 0.3], np.full((2, 3), 0.9), ax=ax),
        {"collections": 0, "images": 1, "texts": 6},
    ),
    "plot_atom_grid": (
        lambda ax: plotting.plot_atom_grid(IMAGES, (5, 4), ax=ax, n_cols=5),
        {"collections": 0, "images": 1, "texts": 0},
    ),
    "plot_embedding": (
        lambda ax: plotting.plot_embedding(EMBEDDING, LABELS * 2 + (Y[:, 1] > 0), ax=ax),
        {"collections": 4, "images": 0, "texts": 0},
    ),
}


@pytest.fixture(autouse=True)
def _no_show_and_no_leak(monkeypatch):
    """Fail on any plt.show() call; close the test's figures afterwards."""

    def show(*args, **kwargs):
        raise AssertionError("a plotting helper called plt.show()")

    monkeypatch.setattr(plt, "show", show)
    before = set(plt.get_fignums())
    yield
    for num in set(plt.get_fignums()) - before:
        plt.close(num)


def _counts(ax):
    return {"collections": len(ax.collections), "images": len(ax.images), "texts": len(ax.texts)}


def test_every_public_helper_is_tested():
    public = {name for name in dir(plotting) if name.startswith("plot_")}
    assert public == set(HELPERS)


@pytest.mark.parametrize("name", HELPERS)
def test_draws_on_the_given_axes(name):
    draw, expected = HELPERS[name]
    fig, (left, right) = plt.subplots(1, 2)
    n_figures = len(plt.get_fignums())
    assert draw(right) is right
    assert _counts(right) == expected
    assert _counts(left) == {"collections": 0, "images": 0, "texts": 0}
    assert not left.get_legend() and not left.get_title()
    assert len(plt.get_fignums()) == n_figures  # no figure of its own


@pytest.mark.parametrize("name", HELPERS)
def test_without_axes_opens_one_pyplot_figure(name):
    draw, expected = HELPERS[name]
    before = set(plt.get_fignums())
    ax = draw(None)
    new = set(plt.get_fignums()) - before
    assert len(new) == 1
    fig = plt.figure(new.pop())
    assert ax.figure is fig and fig.axes[0] is ax
    assert _counts(ax) == expected
    # pyplot manages it, so show() works (on Agg it does nothing, or warns
    # that Agg cannot show); a Figure made outside pyplot raises
    # AttributeError("Figure.show works only for figures managed by pyplot").
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.show()


def test_the_helpers_draw_what_they_say():
    ax = plotting.plot_atoms_2d(Y, LABELS, ATOMS, title="moons")
    points, atoms = ax.collections
    assert len(points.get_offsets()) == len(Y) and len(atoms.get_offsets()) == len(ATOMS)
    assert ax.get_title() == "moons" and ax.get_legend().get_texts()[0].get_text() == "7 atoms"
    assert points.get_array() is not None  # coloured by label
    ax = plotting.plot_atoms_2d(Y, None, ATOMS, max_points=50)
    assert len(ax.collections[0].get_offsets()) == 50 and ax.collections[0].get_array() is None

    fig, ax = plt.subplots()
    plotting.plot_heatmap([5], [0.1], [[0.7]], ax=ax, colorbar=False)
    assert fig.axes == [ax] and ax.texts[0].get_text() == ".70"
    plotting.plot_heatmap([5], [0.1], [[1.0]], ax=ax)
    assert len(fig.axes) == 2 and ax.texts[-1].get_text() == "1"

    ax = plotting.plot_atom_grid(IMAGES, (5, 4), n_cols=5)
    assert ax.images[0].get_array().shape == (3 * 6 + 1, 5 * 5 + 1) and not ax.axison
    w, h = ax.figure.get_size_inches()
    assert (w, h) == (2.5, 1.5)  # sized to the grid

    ax = plotting.plot_embedding(EMBEDDING, LABELS, max_points=100)
    assert sum(len(c.get_offsets()) for c in ax.collections) == 100
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["0", "1"]


def test_input_checks():
    before = plt.get_fignums()
    with pytest.raises(ValueError, match="2-D points"):
        plotting.plot_atoms_2d(np.zeros((5, 3)), np.zeros(5), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="4 labels for 5 points"):
        plotting.plot_atoms_2d(np.zeros((5, 2)), np.zeros(4), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="expected \\(2, 1\\)"):
        plotting.plot_heatmap([5, 10], [0.1], [[1.0, 0.9]])
    with pytest.raises(ValueError, match="not images"):
        plotting.plot_atom_grid(np.zeros((4, 10)), (3, 3))
    with pytest.raises(ValueError, match="does not match"):
        plotting.plot_embedding(np.zeros((5, 2)), np.zeros(4))
    assert plt.get_fignums() == before  # checked before any figure is opened


def test_paper_figures_keep_no_pyplot_figure(tmp_path):
    def row(name, Y, y, atoms):
        model = SimpleNamespace(components_=atoms, embedding_=np.c_[Y, Y[:, :1]])
        return SimpleNamespace(exp=SimpleNamespace(name=name, n_atoms=len(atoms), title=name), model=model, data=(Y, y))

    before = plt.get_fignums()
    images = RNG.random((60, 28 * 28))
    rows = [row("moons", Y, LABELS, ATOMS), row("mnist5", images[:, :2], np.arange(60) % 5, images)]
    paths = experiments.paper_figures(rows, None, tmp_path)
    assert sorted(p.rsplit("/", 1)[-1] for p in paths) == ["embedding.png", "mnist_atoms.png", "moons_atoms.png"]
    assert all((tmp_path / p).read_bytes().startswith(b"\x89PNG") for p in paths)
    assert plt.get_fignums() == before


def test_atom_grid_tiles_the_atoms_in_rows_of_n_cols():
    # 23 atoms of 3 x 3 pixels, 5 a row: 5 rows of tiles with 1-pixel borders
    ax = plotting.plot_atom_grid(np.random.default_rng(0).random((23, 9)), (3, 3), n_cols=5)
    assert ax.images[0].get_array().shape == (5 * 4 + 1, 5 * 4 + 1)

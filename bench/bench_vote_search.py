"""The neighbours' vote's search with many features (``fastkds._vote_kernels``):
distances screened by BLAS products and then summed for the few pairs that
can be among the nearest (``search_screened``, ``probe_atoms_screened``)
against direct sums for every pair (``search_shared_reads``,
``probe_atoms_direct``, what the search did before for every cell size).
Both give the same neighbours and probes (asserted here); the data are
MNIST-shaped: n = 10,000 points of 784 features about ten centres, every
point a reference, searched for its 11 nearest among its probed cells, as
the fit searches. The atoms are drawn from the points, as many as make
cells of 100 references (the defaults' 100 atoms for 10,000 points), or of
16 and of 8 (more atoms, as with ``n_atoms=500`` on MNIST-5 or on a small
set): the thinner the cells, the thinner the products, which is why the
search sums directly below ``SCREEN_MIN_REFS`` references a cell.

The exact search of a small set (every reference a candidate) is timed
three ways: as the vote runs it (``LabelVote.neighbours``: up to 32
features, only the cells the triangle inequality cannot rule out,
``search_pruned``; past them, one cell that holds every reference,
screened by BLAS), as one cell at any number of features (what the vote
ran before the pruned search), and cell by cell with every atom probed.
The same neighbours each way. The pruned search pays most where a fit on a
few thousand points then labels many new ones: n new moons points among
3,000 references, against one cell and scikit-learn's k-d tree.

Where the references are a sample (few atoms on many points: the paper's
24 atoms, 2,400 references), the other points are labelled screened, most
of them settling without a search, not exactly: n moons labelled both
ways.

With few features (the moons) the search sums every distance directly
(``search_direct``); it is timed against scikit-learn's k-d tree, the
exact search a user would reach for, on the same references: the fit's
10,000 references of 100 atoms, and n points searched.

    pytest bench/bench_vote_search.py --benchmark-only --benchmark-group-by=group,param:per_cell,param:data
"""

import functools

import numba
import numpy as np
import pytest

from conftest import bench_n, mnist_shaped_blobs, moons_data, record
from fastkds import _config, _vote_kernels
from fastkds.label_vote import LabelVote, _probe

#: Neighbours searched per reference in the fit: q = 10 others and itself.
NEIGHBOURS = 11


def vote_problem(Y, n_atoms):
    """``Y``, every point a reference of a vote on ``n_atoms`` atoms drawn
    from them, and each point's probed atoms."""
    atoms = Y[np.random.default_rng(1).choice(Y.shape[0], n_atoms, replace=False)]
    vote = LabelVote(atoms, Y, np.zeros(Y.shape[0], dtype=np.int32), NEIGHBOURS, 2)
    return Y, vote, _probe(Y, vote.atoms, vote.n_probe, None)


@functools.lru_cache(maxsize=3)
def problem(n, per_cell):
    """MNIST-shaped points in cells of ``per_cell`` references (:func:`vote_problem`)."""
    return vote_problem(mnist_shaped_blobs(n, scale=0.7), n // per_cell)


def size():
    return min(bench_n(), 10_000)


def screened_search(*args):
    """``search_screened`` on the calling thread's Numba threads."""
    _vote_kernels.search_screened(*args, numba.get_num_threads())


def screened_probes(*args):
    """``probe_atoms_screened`` on the calling thread's Numba threads."""
    _vote_kernels.probe_atoms_screened(*args, numba.get_num_threads())


def run_search(search, Y, vote, probes):
    dist = np.full((Y.shape[0], NEIGHBOURS), np.inf)
    idx = np.full((Y.shape[0], NEIGHBOURS), -1, dtype=np.int64)
    with _config.numba_threads(None):  # BLAS on one thread, as the vote runs it
        search(Y, Y, vote.cell_start, vote.cell_refs, probes, np.arange(Y.shape[0]), dist, idx)
    return idx


def run_probe(probe, Y, atoms, out):
    with _config.numba_threads(None):
        probe(Y, atoms, out)


@pytest.mark.benchmark(group="vote search")
@pytest.mark.parametrize("per_cell", [100, 16, 8])
@pytest.mark.parametrize("impl", ["screened", "direct sums"])
def test_nearest_references(benchmark, impl, per_cell):
    n = size()
    Y, vote, probes = problem(n, per_cell)
    search = screened_search if impl == "screened" else _vote_kernels.search_shared_reads
    run_search(search, Y[:64], vote, probes[:64])  # compile
    found = benchmark.pedantic(run_search, args=(search, Y, vote, probes), rounds=3, iterations=1)
    record(benchmark, n, n_probe=vote.n_probe, n_atoms=vote.atoms.shape[0])
    np.testing.assert_array_equal(found, run_search(_vote_kernels.search_shared_reads, Y, vote, probes))


@pytest.mark.benchmark(group="vote probes")
@pytest.mark.parametrize("per_cell", [100])
@pytest.mark.parametrize("impl", ["screened", "direct sums"])
def test_probe_atoms(benchmark, impl, per_cell):
    n = size()
    Y, vote, probes = problem(n, per_cell)
    probe = screened_probes if impl == "screened" else _vote_kernels.probe_atoms_direct
    out = np.empty_like(probes)
    run_probe(probe, Y[:64], vote.atoms, out[:64])  # compile
    benchmark.pedantic(run_probe, args=(probe, Y, vote.atoms, out), rounds=3, iterations=1)
    record(benchmark, n)
    np.testing.assert_array_equal(out, probes)


@functools.lru_cache(maxsize=1)
def real_problem(case):
    """A real set's points as every reference, atoms drawn from them: the
    thin cells of a small set (Yale B, 16 atoms for 128 faces: 8 a cell)
    and of many atoms (MNIST-5 at the paper's 500: about 10 a cell)."""
    from fastkds.datasets import find_data_dir
    from fastkds.experiments import load_data_set

    name, n_atoms = case.split("-")
    try:
        Y, _ = load_data_set(name, find_data_dir(), 0)
    except FileNotFoundError as exc:
        pytest.skip(f"needs the shared data: {exc}")
    return vote_problem(np.ascontiguousarray(Y), int(n_atoms))


@pytest.mark.benchmark(group="vote search, real data")
@pytest.mark.parametrize("per_cell", ["yaleb-16", "mnist5-500"])
@pytest.mark.parametrize("impl", ["screened", "direct sums"])
def test_nearest_references_real_data(benchmark, impl, per_cell):
    Y, vote, probes = real_problem(per_cell)
    search = screened_search if impl == "screened" else _vote_kernels.search_shared_reads
    run_search(search, Y[:8], vote, probes[:8])  # compile
    found = benchmark.pedantic(run_search, args=(search, Y, vote, probes), rounds=5, iterations=1)
    record(benchmark, Y.shape[0], n_probe=vote.n_probe, n_atoms=vote.atoms.shape[0])
    np.testing.assert_array_equal(found, run_search(_vote_kernels.search_shared_reads, Y, vote, probes))


@functools.lru_cache(maxsize=1)
def exact_problem(data):
    """A small set's points as every reference of an exact search (every
    cell probed, as ``probe_count`` chooses below a few thousand
    references): ``n = min(bench_n(), 3000)`` points, about sqrt(n) atoms
    drawn from them."""
    from fastkds.datasets import make_curves, make_moons, make_nested_spheres

    n = min(bench_n(), 3000)
    make = {
        "moons, d=2": lambda: make_moons(n, random_state=0),
        "shells, d=30": lambda: make_nested_spheres(n, 3, 30, random_state=0),
        "curves, d=256": lambda: make_curves(n, 20, 256, random_state=0),
    }
    Y = np.ascontiguousarray(make[data]()[0])
    n_atoms = int(np.sqrt(n))
    atoms = Y[np.random.default_rng(1).choice(n, n_atoms, replace=False)]
    return Y, LabelVote(atoms, Y, np.zeros(n, dtype=np.int32), NEIGHBOURS, 2, n_probe=n_atoms)


def every_cell_search(Y, vote):
    """The exact search as the screened one would run it with every cell
    probed: every atom ranked for every point, then each cell's kernel."""
    probes = _probe(Y, vote.atoms, vote.atoms.shape[0], None)
    out = np.empty((Y.shape[0], NEIGHBOURS), dtype=np.int64)
    settled = np.empty(Y.shape[0], dtype=np.int64)
    no_label = np.full(vote.atoms.shape[0], -1, dtype=np.int64)
    with _config.numba_threads(None):
        _vote_kernels.nearest_references(
            Y, vote.atoms, vote.references, vote.cell_start, vote.cell_refs, no_label, probes, out, settled
        )
    return out


def one_cell_search(Y, vote):
    """The exact search as one cell that holds every reference (BLAS
    screens each block's product of the points with all of them)."""
    n_refs = vote.references.shape[0]
    out = np.empty((Y.shape[0], NEIGHBOURS), dtype=np.int64)
    settled = np.empty(Y.shape[0], dtype=np.int64)
    with _config.numba_threads(None):
        _vote_kernels.nearest_references(
            Y,
            vote.atoms[:1],
            vote.references,
            np.array([0, n_refs], dtype=np.int64),
            np.arange(n_refs, dtype=np.int64),
            np.full(1, -1, dtype=np.int64),
            np.zeros((Y.shape[0], 1), dtype=np.int64),
            out,
            settled,
        )
    return out


@pytest.mark.benchmark(group="vote search, exact")
@pytest.mark.parametrize("data", ["moons, d=2", "shells, d=30", "curves, d=256"])
@pytest.mark.parametrize("impl", ["the vote's", "one cell", "every cell"])
def test_exact_search(benchmark, impl, data):
    Y, vote = exact_problem(data)
    search = {
        "the vote's": lambda rows: vote.neighbours(rows, NEIGHBOURS)[0],
        "one cell": lambda rows: one_cell_search(rows, vote),
        "every cell": lambda rows: every_cell_search(rows, vote),
    }[impl]

    search(Y[:8])  # compile
    found = benchmark.pedantic(search, args=(Y,), rounds=5, iterations=1)
    record(benchmark, Y.shape[0], n_atoms=vote.atoms.shape[0])
    np.testing.assert_array_equal(found, every_cell_search(Y, vote))


@pytest.mark.benchmark(group="vote search, exact, new points")
@pytest.mark.parametrize("impl", ["the vote's (pruned cells)", "one cell", "scikit-learn KDTree"])
def test_exact_search_of_new_points(benchmark, impl):
    from sklearn.neighbors import KDTree

    _, vote = exact_problem("moons, d=2")
    n = min(bench_n(), 100_000)
    Y = np.ascontiguousarray(moons_data(n + 10_000)[0][10_000:])  # not among the references
    search = {
        "the vote's (pruned cells)": lambda rows: vote.neighbours(rows, NEIGHBOURS)[0],
        "one cell": lambda rows: one_cell_search(rows, vote),
        "scikit-learn KDTree": lambda rows: KDTree(vote.references).query(rows, k=NEIGHBOURS)[1],
    }[impl]
    search(Y[:8])  # compile
    found = benchmark.pedantic(search, args=(Y,), rounds=3, iterations=1)
    record(benchmark, n, n_references=vote.references.shape[0], n_atoms=vote.atoms.shape[0])
    np.testing.assert_array_equal(vote.neighbours(Y, NEIGHBOURS)[0], one_cell_search(Y, vote))
    assert (found == KDTree(vote.references).query(Y, k=NEIGHBOURS)[1]).mean() > 0.999  # ties aside


@pytest.mark.benchmark(group="vote labels, a sample of references")
@pytest.mark.parametrize("impl", ["screened, settling", "exact"])
def test_labels_of_a_sample_of_references(benchmark, impl):
    from fastkds.label_vote import probe_count

    n = min(bench_n(), 100_000)
    points = moons_data(max(n, 10_000))[0]
    R = np.ascontiguousarray(points[:2_400])
    atoms = R[np.random.default_rng(1).choice(R.shape[0], 24, replace=False)]
    labels = (R[:, 1] > 0.25).astype(np.int32)  # two labels, a boundary across the cells
    n_probe = probe_count(2_400, 24, n_samples=n) if impl.startswith("screened") else 24
    vote = LabelVote(atoms, R, labels, 10, 2, n_probe=n_probe)
    Y = np.ascontiguousarray(points[:n])
    vote.predict(Y[:8])  # compile
    found = benchmark.pedantic(vote.predict, args=(Y,), rounds=3, iterations=1)
    record(benchmark, n, n_probe=n_probe)
    exact = LabelVote(atoms, R, labels, 10, 2, n_probe=24).predict(Y)
    assert (found == exact).mean() > 0.99


@functools.lru_cache(maxsize=1)
def moons_problem(n):
    """``n`` moons searched among 10,000 of them as references, in the cells
    of 100 atoms drawn from those (the defaults' atoms and references on
    many points), and each point's probed atoms."""
    from fastkds.label_vote import probe_count

    points = moons_data(max(n, 10_000))[0]
    Y, R = np.ascontiguousarray(points[:n]), np.ascontiguousarray(points[:10_000])
    atoms = R[np.random.default_rng(1).choice(R.shape[0], 100, replace=False)]
    vote = LabelVote(atoms, R, np.zeros(R.shape[0], dtype=np.int32), NEIGHBOURS, 2)
    assert not vote.exact and vote.n_probe == probe_count(R.shape[0], 100)
    return Y, vote, _probe(Y, vote.atoms, vote.n_probe, None)


def run_moons_search(Y, vote, probes):
    dist = np.full((Y.shape[0], NEIGHBOURS), np.inf)
    idx = np.full((Y.shape[0], NEIGHBOURS), -1, dtype=np.int64)
    with _config.numba_threads(None):
        _vote_kernels.search_direct(
            Y, vote.references, vote.cell_start, vote.cell_refs, probes, np.arange(Y.shape[0]), dist, idx
        )
    return idx


@pytest.mark.benchmark(group="vote search, few features")
@pytest.mark.parametrize("impl", ["screened", "scikit-learn KDTree"])
def test_few_features_search(benchmark, impl):
    from sklearn.neighbors import KDTree

    n = min(bench_n(), 100_000)
    Y, vote, probes = moons_problem(n)
    if impl == "screened":
        run_moons_search(Y[:8], vote, probes[:8])  # compile
        found = benchmark.pedantic(run_moons_search, args=(Y, vote, probes), rounds=3, iterations=1)
    else:
        tree = KDTree(vote.references)
        found = benchmark.pedantic(tree.query, args=(Y,), kwargs=dict(k=NEIGHBOURS), rounds=3, iterations=1)[1]
    record(benchmark, n, n_probe=vote.n_probe)
    exact = KDTree(vote.references).query(Y, k=NEIGHBOURS)[1]
    recall = np.mean([len(np.intersect1d(a, b)) for a, b in zip(found, exact)]) / NEIGHBOURS
    assert recall >= 0.99  # the atoms' screen loses almost none of the moons' nearest

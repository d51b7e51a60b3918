"""Localised modes of the code graph: sized by mode_sizes, not counted towards k."""

import numpy as np
import pytest
from sklearn.cluster import KMeans

from fastkds import KDSClustering, clustering_accuracy, load
from fastkds.spectral import MIN_CLUSTER_POINTS, BipartiteSpectrum, mode_sizes, normalize_rows


def _faint_codes(rng):
    """Three clusters of 300 points over 4 atoms each, linked to the next
    cluster by 60 points that put 0.1 on one of its atoms, and two points that
    put 0.999 on an atom of their own and 0.001 on atom 0 (a faint edge)."""
    a = 4
    m = 3 * a + 1
    blocks = []
    for b in range(3):
        X = np.zeros((300, m))
        X[:, b * a : (b + 1) * a] = rng.dirichlet(np.ones(a), 300)
        X[:60] *= 0.9
        X[:60, ((b + 1) % 3) * a] += 0.1
        blocks.append(X)
    hoard = np.zeros((2, m))
    hoard[:, -1] = 0.999
    hoard[:, 0] = 0.001
    return np.vstack(blocks + [hoard]), np.repeat([0, 1, 2], 300)


def test_mode_size_of_a_component_is_its_number_of_points():
    rng = np.random.default_rng(0)
    X = np.zeros((70, 6))
    X[:50, :3] = rng.dirichlet(np.ones(3), 50)
    X[50:, 3:] = rng.dirichlet(np.ones(3), 20)
    s = X.sum(axis=0)
    # the eigenvector of eigenvalue 1 of each component: sqrt(s_j / S) on its atoms
    V = np.zeros((6, 2))
    V[:3, 0] = np.sqrt(s[:3] / s[:3].sum())
    V[3:, 1] = np.sqrt(s[3:] / s[3:].sum())
    M = (X.T @ X) / np.sqrt(np.outer(s, s))
    np.testing.assert_allclose(M @ V, V, atol=1e-12)  # they are eigenvectors
    np.testing.assert_allclose(mode_sizes(V, s), [50, 20], rtol=1e-12)
    # a mode on a single atom has that atom's degree as its size
    np.testing.assert_allclose(mode_sizes(np.eye(6)[:, [4]], s), [s[4]], rtol=1e-12)


def test_trivial_mode_spans_all_points():
    rng = np.random.default_rng(1)
    X, _ = _faint_codes(rng)
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0), embedding="leading")
    np.testing.assert_allclose(spec.eigenvalues[0], 1.0, atol=1e-12)
    np.testing.assert_allclose(mode_sizes(spec.eigenvectors[:, :1], X.sum(axis=0)), [X.shape[0]], rtol=1e-9)


def test_localised_mode_does_not_count_towards_k():
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X, y = _faint_codes(rng)
        s = X.sum(axis=0)
        # plain (the paper's): the two hoarding points' mode is the second
        # eigenvector, above two of the three clusters' modes, and takes one
        # of the three columns of the embedding
        plain = BipartiteSpectrum(X.T @ X, s, min_component=0.0, embedding="leading")
        assert plain.n_outlier_atoms == 0  # not a separate component
        sizes = mode_sizes(plain.eigenvectors, s)
        assert sizes[1] < 3 and plain.eigenvalues[1] > plain.eigenvalues[2]
        assert plain.spread.all() and plain.n_columns(3) == 3
        # with min_component it is marked localised: the embedding extends
        # to the third spread mode, and the clusters are found
        robust = BipartiteSpectrum(X.T @ X, s, min_component=0.01, embedding="leading")
        np.testing.assert_array_equal(robust.eigenvalues, plain.eigenvalues)
        assert not robust.spread[1] and robust.spread[[0, 2, 3]].all()
        assert robust.n_columns(3) == 4
        assert robust.projection(3).shape == (13, 4)
        U = normalize_rows(robust.embed(X, 3))
        labels = KMeans(3, n_init=10, random_state=0).fit_predict(U)
        assert clustering_accuracy(y, labels[:900]) == 1.0
        # the eigengap counts spread modes only: three clusters
        assert robust.eigengap(10) == 3


def test_the_gap_ratio_is_what_the_eigengap_maximises():
    X, _ = _faint_codes(np.random.default_rng(0))
    spectrum = BipartiteSpectrum(X.T @ X, X.sum(axis=0), min_component=0.01)
    mu = 1.0 - spectrum.eigenvalues[spectrum.spread]
    ratios = [spectrum.gap_ratio(k) for k in range(2, mu.size)]
    np.testing.assert_allclose(ratios, mu[2:] / mu[1:-1])
    assert spectrum.eigengap() == int(np.argmax(ratios)) + 2 == 3
    assert spectrum.gap_ratio(mu.size) is None  # no (k + 1)-th spread mode


def test_too_many_clusters_for_the_spread_modes_fails_clearly():
    X, _ = _faint_codes(np.random.default_rng(0))
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0), min_component=0.01, embedding="leading")
    n_spread = int(spec.spread.sum())
    assert spec.n_columns(n_spread) <= spec.eigenvalues.size
    assert spec.n_columns(n_spread + 1) == spec.n_columns(n_spread)  # every spread mode, for the vote
    with pytest.raises(ValueError, match="localised"):
        spec.check_shows(n_spread + 1)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_model_file_without_spread_loads_with_every_mode_counted(tmp_path):
    rng = np.random.default_rng(0)
    Y = np.r_[rng.normal(size=(150, 2)), rng.normal(size=(150, 2)) + [8, 0]]
    model = KDSClustering(2, n_atoms=12, lam=1.0, n_iter=30, max_epochs=5, random_state=0).fit(Y)
    path = tmp_path / "model.npz"
    model.save(path)
    with np.load(path) as npz:  # as written before localised modes were marked
        entries = {name: npz[name] for name in npz.files if name != "spectrum_.spread"}
    old = tmp_path / "old.npz"
    np.savez(old, **entries)
    loaded = load(old)
    assert loaded.spectrum_.spread.all() and loaded.spectrum_.spread.size == loaded.eigenvalues_.size
    np.testing.assert_array_equal(loaded.predict(Y), model.predict(Y))


def test_diffusion_extras_skip_localised_modes():
    """The diffusion embedding's modes past the k-th spread one are spread
    modes only; a localised mode among the leading ones stays (n_columns)."""
    X, _ = _faint_codes(np.random.default_rng(0))
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0), min_component=0.01)
    assert not spec.spread[1] and spec.spread[[0, 2, 3, 4]].all()
    np.testing.assert_array_equal(spec.columns(1), [0, 2])  # the localised mode 1 is past the first spread one
    np.testing.assert_array_equal(spec.columns(2), [0, 1, 2, 3, 4])  # it leads the second: kept
    assert spec.n_columns(2) == 5 and spec.projection(2).shape == (13, 5)
    np.testing.assert_array_equal(spec.column_weights(1)[1], (spec.eigenvalues[2] / spec.eigenvalues[0]) ** 16)


def test_nothing_large_keeps_every_mode():
    rng = np.random.default_rng(2)
    X, _ = _faint_codes(rng)
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0), min_component=2.0, embedding="leading")  # no mode has 2n points
    assert spec.spread.all() and spec.n_columns(3) == 3


def _small_codes(rng, n_hoard=3):
    """Two clusters of 60 points over 4 atoms each, linked by 12 points that put
    0.1 on an atom of the other, and ``n_hoard`` points on an atom of their own
    with a faint edge to atom 0: as in Yale B, 1% of the points is about one."""
    a, n = 4, 60
    m = 2 * a + 1
    blocks = []
    for b in range(2):
        X = np.zeros((n, m))
        X[:, b * a : (b + 1) * a] = rng.dirichlet(np.ones(a), n)
        X[:12] *= 0.9
        X[:12, (1 - b) * a] += 0.1
        blocks.append(X)
    hoard = np.zeros((n_hoard, m))
    hoard[:, -1] = 0.999
    hoard[:, 0] = 0.001
    return np.vstack(blocks + [hoard]), np.repeat([0, 1], n)


def test_a_mode_of_a_few_points_is_localised_on_small_data_too():
    for seed in range(3):
        X, y = _small_codes(np.random.default_rng(seed))
        s = X.sum(axis=0)
        plain = BipartiteSpectrum(X.T @ X, s, min_component=0.0, embedding="leading")
        size = mode_sizes(plain.eigenvectors, s)[1]
        # the hoarding points' mode leads, and 1% of the 123 points is less than its size
        assert 0.01 * X.shape[0] < size < MIN_CLUSTER_POINTS
        assert plain.n_columns(2) == 2
        robust = BipartiteSpectrum(X.T @ X, s, min_component=0.01, embedding="leading")
        assert not robust.spread[1] and robust.n_columns(2) == 3
        labels = KMeans(2, n_init=10, random_state=0).fit_predict(normalize_rows(robust.embed(X, 2)))
        assert clustering_accuracy(y, labels[:120]) == 1.0
        # the plain embedding splits off the hoarding points instead
        labels = KMeans(2, n_init=10, random_state=0).fit_predict(normalize_rows(plain.embed(X, 2)))
        assert clustering_accuracy(y, labels[:120]) < 0.9


def test_a_component_of_a_few_points_is_an_outlier_on_small_data_too():
    X, _ = _small_codes(np.random.default_rng(0))
    X[-3:, 0] = 0.0  # cut the faint edge: the three points form a component
    X[-3:, -1] = 1.0
    s = X.sum(axis=0)
    assert BipartiteSpectrum(X.T @ X, s, min_component=0.0, embedding="leading").n_outlier_atoms == 0
    spec = BipartiteSpectrum(X.T @ X, s, min_component=0.01, embedding="leading")
    assert spec.n_outlier_atoms == 1 and not spec.used[-1]


def test_clusters_of_an_even_split_past_fifty_are_not_outliers():
    # 120 clusters, each a component of the code graph over two atoms of
    # its own: ten of 60 points (1.2%) and 110 of 40 (0.8%, below the
    # default 1%, so each of those was an outlier, joined to a large one);
    # half an even split is the bound past 50 clusters
    from fastkds.spectral import cluster_codes, outlier_share

    k = 120
    sizes = np.r_[np.full(10, 60), np.full(k - 10, 40)]
    rng = np.random.default_rng(0)
    X = np.zeros((sizes.sum(), 2 * k))
    starts = np.r_[0, np.cumsum(sizes)]
    for c in range(k):
        X[starts[c] : starts[c + 1], 2 * c : 2 * c + 2] = rng.dirichlet(np.ones(2), sizes[c])
    truth = np.repeat(np.arange(k), sizes)
    s = X.sum(axis=0)
    assert BipartiteSpectrum(X.T @ X, s, min_component=0.01).n_outlier_atoms == 2 * (k - 10)
    assert outlier_share(0.01, k) == pytest.approx(0.5 / k) and outlier_share(0.01, 10) == 0.01
    assert outlier_share(0.01, None) == 0.01

    class Results:  # the codes' embedding, as ClusteringResults gives it
        n = X.shape[0]

        def embed(self, projection, sample):
            self.rows = normalize_rows(X @ projection)
            return self.rows[sample]

        def label(self, kmeans):
            self.labels = kmeans.predict(self.rows)

    results = Results()
    spectrum, n_clusters, _ = cluster_codes(
        X.T @ X, s, np.eye(2 * k), results, np.random.RandomState(0), (k, 3, 0.01, 20, "leading")
    )
    assert spectrum.n_outlier_atoms == 0 and n_clusters == k
    assert clustering_accuracy(truth, results.labels) == 1.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_outlier_atoms_take_the_nearest_kept_atom(dtype):
    """The stand-ins, found a query at a time, are those of all pairs'
    differences at once (the same squared distances, bit for bit), ties to
    the first kept atom."""
    from fastkds.spectral import _nearest_rows

    rng = np.random.default_rng(3)
    rows = rng.normal(size=(40, 300)).astype(dtype)
    queries = np.vstack([rng.normal(size=(6, 300)), rows[[7, 7]] + 0.0]).astype(dtype)
    rows[9] = rows[7]  # a tie: the first of the two
    d2 = ((queries[:, None, :] - rows[None, :, :]) ** 2).sum(axis=2)
    got = _nearest_rows(queries, rows)
    np.testing.assert_array_equal(got, np.argmin(d2, axis=1))
    assert got[-1] == 7 and got.dtype == np.intp

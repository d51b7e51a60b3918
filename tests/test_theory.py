"""Facts from the paper (SPEC section 7) checked on the implementation.

* Delaunay recovery: for atoms in general position and y inside a simplex of
  their Delaunay triangulation, the weighted-l1 program with exact
  reconstruction is minimised only by y's barycentric coordinates on that
  simplex's vertices. The KDS objective replaces the exact reconstruction by the
  penalty ``1/2 ||y - x W||^2``; its minimiser is supported on the same
  vertices and differs from the barycentric code by exactly ``lam * g(y)`` (on
  a fixed support the optimality conditions are linear in lam), so the encoder
  must (i) put no weight off the simplex, (ii) be within O(lam) of the
  barycentric code and (iii) recover it exactly by extrapolation to lam = 0.
* Laplacian form: ``sum_ij X_ij ||y_i - w_j||^2 = trace(R L R^T)`` for the
  bipartite point-atom graph.
* Spectral embedding: the linear-in-n embedding of ``BipartiteSpectrum`` spans
  the top-k left singular subspace of ``X diag(s)^(-1/2)``; eigenvalue 1 has the
  multiplicity of the number of connected components.
"""

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from scipy.spatial import Delaunay

import fastkds
from fastkds import _naive
from fastkds.prepared import PreparedDictionary
from fastkds.spectral import DIFFUSION_STEPS, BipartiteSpectrum

# --------------------------------------------------------------------------
# Delaunay recovery
# --------------------------------------------------------------------------


def _min_angle_deg(P):
    angles = []
    for i in range(3):
        u = P[(i + 1) % 3] - P[i]
        v = P[(i + 2) % 3] - P[i]
        angles.append(np.degrees(np.arccos(u @ v / np.linalg.norm(u) / np.linalg.norm(v))))
    return min(angles)


def _circumcircle(P):
    a, b, c = P
    den = 2 * (a[0] * (b[1] - c[1]) + b[0] * (c[1] - a[1]) + c[0] * (a[1] - b[1]))
    ux = ((a @ a) * (b[1] - c[1]) + (b @ b) * (c[1] - a[1]) + (c @ c) * (a[1] - b[1])) / den
    uy = ((a @ a) * (c[0] - b[0]) + (b @ b) * (a[0] - c[0]) + (c @ c) * (b[0] - a[0])) / den
    centre = np.array([ux, uy])
    return centre, np.linalg.norm(a - centre)


def general_position_atoms(rng, m=8, min_angle=20.0, margin=0.1):
    """m random atoms in the unit square, in general position with a margin.

    Rejection sampling until every Delaunay triangle has all angles above
    ``min_angle`` degrees and every other atom lies outside its circumcircle by
    ``margin`` times the radius: the Delaunay program then has a unique,
    well-conditioned solution.
    """
    for _ in range(5000):
        W = rng.random((m, 2))
        tri = Delaunay(W)
        ok = True
        for simplex in tri.simplices:
            if _min_angle_deg(W[simplex]) < min_angle:
                ok = False
                break
            centre, radius = _circumcircle(W[simplex])
            others = np.setdiff1d(np.arange(m), simplex)
            if (np.linalg.norm(W[others] - centre, axis=1).min() - radius) / radius < margin:
                ok = False
                break
        if ok:
            return W, tri
    raise AssertionError("no well-conditioned atom configuration found")


def points_in_simplices(rng, W, tri, n, min_weight=0.1):
    """n points strictly inside random Delaunay triangles; their barycentric codes."""
    Y = np.empty((n, 2))
    B = np.zeros((n, W.shape[0]))
    for i in range(n):
        verts = tri.simplices[rng.integers(len(tri.simplices))]
        b = rng.dirichlet(np.full(3, 3.0))
        while b.min() < min_weight:
            b = rng.dirichlet(np.full(3, 3.0))
        Y[i] = b @ W[verts]
        B[i, verts] = b
    return Y, B


@pytest.fixture(scope="module", params=[0, 1, 2])
def delaunay_problem(request):
    rng = np.random.default_rng(request.param)
    W, tri = general_position_atoms(rng)
    Y, B = points_in_simplices(rng, W, tri, 40)
    # sanity of the ground truth: scipy locates each point in the simplex we drew it in
    located = tri.find_simplex(Y)
    for i in range(len(Y)):
        assert set(tri.simplices[located[i]]) == set(np.flatnonzero(B[i]))
    return W, tri, Y, B


def test_weighted_l1_program_gives_barycentric(delaunay_problem):
    """The paper's program (exact reconstruction, simplex, weights ||y - w_j||^2),
    solved as an LP by scipy, returns the barycentric coordinates."""
    W, _, Y, B = delaunay_problem
    m = W.shape[0]
    A_eq = np.vstack([W.T, np.ones((1, m))])
    for y, b in zip(Y, B):
        res = scipy.optimize.linprog(
            c=((y - W) ** 2).sum(axis=1),
            A_eq=A_eq,
            b_eq=np.append(y, 1.0),
            bounds=[(0, None)] * m,
            method="highs",
        )
        assert res.status == 0
        np.testing.assert_allclose(res.x, b, atol=1e-8)


LAM_SMALL = 2e-4
N_ITER = 20000


@pytest.fixture(scope="module")
def delaunay_codes(delaunay_problem):
    W, _, Y, B = delaunay_problem
    X1 = fastkds.sparse_encode(Y, W, lam=LAM_SMALL, encoder="apg", n_iter=N_ITER).toarray()
    X2 = fastkds.sparse_encode(Y, W, lam=2 * LAM_SMALL, encoder="apg", n_iter=N_ITER).toarray()
    return X1, X2


def test_encoder_support_is_the_delaunay_simplex(delaunay_problem, delaunay_codes):
    W, _, Y, B = delaunay_problem
    for X in delaunay_codes:
        off = np.where(B > 0, 0.0, X)
        assert np.abs(off).max() <= 1e-9
        assert np.all(X[B > 0] > 0.05)  # every vertex keeps (about) its weight


def test_encoder_recovers_barycentric_coordinates(delaunay_problem, delaunay_codes):
    W, _, Y, B = delaunay_problem
    X1, X2 = delaunay_codes
    # within O(lam) of the barycentric code
    np.testing.assert_allclose(X1, B, atol=1e-3)
    np.testing.assert_allclose(X2, B, atol=2e-3)
    # the deviation is linear in lam: extrapolating to lam = 0 gives the code itself
    np.testing.assert_allclose(2 * X1 - X2, B, atol=1e-4)
    # the barycentric code reconstructs exactly; the KDS code trades a little
    # reconstruction for locality and has the lower KDS objective
    assert np.abs(B @ W - Y).max() <= 1e-12
    f_enc = _naive.objective(Y, W, X1, LAM_SMALL)
    f_bar = _naive.objective(Y, W, B, LAM_SMALL)
    assert np.all(f_enc <= f_bar + 1e-15)


@pytest.mark.parametrize("lam", [2e-3, 2e-2])
def test_encoder_reaches_the_exact_kds_minimiser(delaunay_problem, lam):
    """Independent optimality check of the encoder's codes for the KDS objective:
    on the simplex's vertices S the minimiser solves the KKT system
    ``[[W_S W_S^T, 1], [1^T, 0]] [x_S; mu] = [W_S y - lam d_S; 1]``; off S the
    gradient must be at least the multiplier (the problem is convex)."""
    W, _, Y, B = delaunay_problem
    Y, B = Y[:15], B[:15]
    # the accelerated scheme without restarts converges slowly near the end
    # (about 1e-5 after 2e4 steps, 1e-11 after 8e4 on these problems)
    X = fastkds.sparse_encode(Y, W, lam=lam, encoder="apg", n_iter=80000).toarray()
    for y, b, x in zip(Y, B, X):
        S = np.flatnonzero(b)
        dist = ((y - W) ** 2).sum(axis=1)
        K = np.zeros((4, 4))
        K[:3, :3] = W[S] @ W[S].T
        K[:3, 3] = K[3, :3] = 1.0
        rhs = np.append(W[S] @ y - lam * dist[S], 1.0)
        sol = np.linalg.solve(K, rhs)
        x_star = np.zeros_like(x)
        x_star[S] = sol[:3]
        mu = -sol[3]
        assert np.all(x_star[S] > 0)
        grad = W @ (x_star @ W - y) + lam * dist
        np.testing.assert_allclose(grad[S], mu, atol=1e-12)
        off = np.setdiff1d(np.arange(W.shape[0]), S)
        assert np.all(grad[off] > mu)  # strictly: the support is unique
        np.testing.assert_allclose(x, x_star, rtol=0, atol=1e-9)


# --------------------------------------------------------------------------
# Laplacian form of the locality term
# --------------------------------------------------------------------------


def bipartite_laplacian(X):
    """Graph Laplacian of the (n + m)-node bipartite graph with edge weights X."""
    n, m = X.shape
    A = np.zeros((n + m, n + m))
    A[:n, n:] = X
    A[n:, :n] = X.T
    return np.diag(A.sum(axis=1)) - A


@pytest.mark.parametrize("lam", [0.3, 2.0])
def test_laplacian_identity(lam):
    rng = np.random.default_rng(23)
    n, m, d = 30, 6, 3
    Y = rng.normal(size=(n, d))
    W = rng.normal(size=(m, d))
    prep = PreparedDictionary(W, lam, 60, np.float64)
    X, obj = prep.encode_dense(Y)
    X = X.copy()
    obj = obj.copy()
    L = bipartite_laplacian(X)
    np.testing.assert_allclose(L.sum(axis=1), 0.0, atol=1e-12)
    assert np.linalg.eigvalsh(L).min() >= -1e-10
    R = np.vstack([Y, W]).T  # d x (n + m): points, then atoms, as columns
    quad = np.trace(R @ L @ R.T)
    direct = float((X * _naive.squared_distances(Y, W)).sum())
    np.testing.assert_allclose(quad, direct, rtol=1e-10)
    # the encoder's objectives contain exactly lam times this quantity
    recon = 0.5 * ((Y - X @ W) ** 2).sum()
    np.testing.assert_allclose(obj.sum() - recon, lam * quad, rtol=1e-8)


def test_laplacian_identity_random_weights():
    """The identity holds for any nonnegative weights, not only simplex rows."""
    rng = np.random.default_rng(24)
    X = rng.random((12, 5)) * (rng.random((12, 5)) < 0.5)
    Y = rng.normal(size=(12, 4))
    W = rng.normal(size=(5, 4))
    R = np.vstack([Y, W]).T
    lhs = sum(X[i, j] * np.sum((Y[i] - W[j]) ** 2) for i in range(12) for j in range(5))
    np.testing.assert_allclose(np.trace(R @ bipartite_laplacian(X) @ R.T), lhs, rtol=1e-12)


# --------------------------------------------------------------------------
# spectral embedding
# --------------------------------------------------------------------------


def projector(U):
    Q, _ = np.linalg.qr(U)
    return Q @ Q.T


@pytest.fixture(scope="module")
def clustered_codes():
    """Codes of three separated blobs in a dictionary drawn from them."""
    rng = np.random.default_rng(31)
    centres = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    Y = np.vstack([c + 0.6 * rng.normal(size=(70, 2)) for c in centres])
    W = Y[rng.choice(len(Y), size=15, replace=False)]
    codes = fastkds.sparse_encode(Y, W, lam=1.0, encoder="apg", n_iter=50)
    return codes


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_spectral_embedding_matches_naive(clustered_codes, k):
    codes = clustered_codes
    X = codes.toarray()
    XtX, s, _ = _naive.statistics(X, np.zeros((X.shape[0], 1)))
    spec = BipartiteSpectrum(XtX, s, embedding="leading")
    U = spec.embed(codes, k)
    U_ref, sigma_ref = _naive.spectral_embedding(X, k)
    assert U.shape == (X.shape[0], k)
    # the eigenvalues are the squared singular values of X diag(s)^(-1/2)
    np.testing.assert_allclose(spec.eigenvalues[:k], sigma_ref**2, rtol=1e-10, atol=1e-12)
    # the embedding is orthonormal and spans the same subspace
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-8)
    sig_all = np.linalg.svd(X / np.sqrt(X.sum(axis=0)), compute_uv=False)
    gap = sig_all[k - 1] - (sig_all[k] if k < len(sig_all) else 0.0)
    assert gap > 1e-3  # the subspace is well defined for these k
    np.testing.assert_allclose(projector(U), projector(U_ref), atol=1e-7)
    # columns agree up to sign where the singular values are distinct
    distinct = np.all(np.abs(np.diff(sig_all[: k + 1])) > 1e-3) if k > 1 else True
    if distinct:
        np.testing.assert_allclose(np.abs(U), np.abs(U_ref), atol=1e-7)
    # sparse and dense codes embed alike
    np.testing.assert_allclose(spec.embed(X, k), U, atol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_diffusion_embedding_matches_naive(clustered_codes, k):
    """The diffusion embedding: the leading one's k columns, then the next k
    eigenvectors of the point -> atom -> point walk, each weighted by
    (lambda_j / lambda_k)^DIFFUSION_STEPS: against the dense SVD oracle."""
    codes = clustered_codes
    X = codes.toarray()
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0))
    assert spec.embedding == "diffusion"
    U = spec.embed(codes, k)
    assert U.shape == (X.shape[0], 2 * k) and spec.n_columns(k) == 2 * k
    U_ref, sigma_ref = _naive.spectral_embedding(X, k, "diffusion", DIFFUSION_STEPS)
    np.testing.assert_allclose(spec.eigenvalues[: 2 * k], sigma_ref**2, rtol=1e-10, atol=1e-12)
    # the first k columns are the leading embedding's, bit for bit
    leading = BipartiteSpectrum(X.T @ X, X.sum(axis=0), embedding="leading").embed(codes, k)
    assert U[:, :k].tobytes() == np.ascontiguousarray(leading).tobytes()
    # orthogonal columns of lengths 1 (leading) and the weights (past k), below 1
    weights = spec.column_weights(k)
    lam = spec.eigenvalues
    np.testing.assert_allclose(weights[k:], (lam[k : 2 * k] / lam[k - 1]) ** DIFFUSION_STEPS, rtol=1e-12)
    assert np.all(weights[k:] <= 1.0) and np.all(np.diff(weights[k:]) <= 0)
    np.testing.assert_allclose(U.T @ U, np.diag(weights**2), atol=1e-8)
    # the same weighted columns as the oracle (signs aside; eigenspaces share a weight)
    np.testing.assert_allclose(U @ U.T, U_ref @ U_ref.T, atol=1e-7)


def test_other_weights_give_other_embeddings(clustered_codes):
    """``projection(k, n_extra, steps)`` builds any embedding of the family
    (bench/embeddings.py): k extra modes at DIFFUSION_STEPS are the
    diffusion embedding, no extra mode is the leading one, and infinitely
    many steps leave the extra modes nothing."""
    X = clustered_codes.toarray()
    diffusion = BipartiteSpectrum(X.T @ X, X.sum(axis=0))
    leading = BipartiteSpectrum(X.T @ X, X.sum(axis=0), embedding="leading")
    np.testing.assert_array_equal(leading.column_weights(2, 2, DIFFUSION_STEPS), diffusion.column_weights(2))
    np.testing.assert_array_equal(leading.projection(2, 2, DIFFUSION_STEPS), diffusion.projection(2))
    np.testing.assert_array_equal(diffusion.projection(2, 0), leading.projection(2))
    np.testing.assert_array_equal(leading.column_weights(2, 2, np.inf)[2:], 0.0)
    assert leading.columns(2, 100).size == leading.eigenvalues.size  # at most every mode


def test_diffusion_embedding_with_few_modes_or_a_zero_kth():
    """Fewer than 2k spread modes: all of them; more clusters than modes:
    every mode (for the vote), and check_shows refuses them; a k-th
    eigenvalue of 0: the modes past it weigh nothing (nothing of them is
    left)."""
    rng = np.random.default_rng(5)
    X = block_codes(rng, [(30, 2), (30, 2)])  # two components of 2 atoms: 4 modes
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0))
    assert spec.eigenvalues.size == 4
    assert spec.n_columns(3) == 4 and spec.n_columns(2) == 4 and spec.n_columns(1) == 2
    assert spec.n_columns(5) == 4 and spec.shows(4) and not spec.shows(5)
    with pytest.raises(ValueError, match="n_clusters=5 exceeds the 4 modes"):
        spec.check_shows(5)
    degenerate = BipartiteSpectrum.from_arrays(
        eigenvalues=np.array([1.0, 0.0, 0.0]),
        eigenvectors=np.eye(3),
        used=np.ones(3, dtype=bool),
        inv_sqrt_s=np.ones(3),
        spread=np.ones(3, dtype=bool),
        n_outlier_atoms=0,
    )
    np.testing.assert_array_equal(degenerate.column_weights(2), [1.0, 1.0, 0.0])
    assert np.isfinite(degenerate.projection(2)).all()


def test_diffusion_embedding_finds_separate_components():
    """Clusters that are components of the code graph (lambda_1..lambda_k =
    1): the modes past the k-th are internal, their weights small, and
    k-means on the diffusion embedding finds the components."""
    from sklearn.cluster import KMeans

    from fastkds.spectral import normalize_rows

    rng = np.random.default_rng(7)
    sizes = [(40, 4), (30, 5), (35, 3)]
    X = block_codes(rng, sizes)
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0))
    assert np.all(spec.column_weights(3)[3:] < 1e-3)
    labels = KMeans(3, n_init=10, random_state=0).fit_predict(normalize_rows(spec.embed(X, 3)))
    truth = np.repeat(np.arange(3), [nb for nb, _ in sizes])
    assert fastkds.clustering_accuracy(truth, labels) == 1.0


def test_embedding_must_be_a_known_name():
    X = block_codes(np.random.default_rng(6), [(10, 2)])
    with pytest.raises(ValueError, match="embedding must be one of"):
        BipartiteSpectrum(X.T @ X, X.sum(axis=0), embedding="spectral")


def test_leading_eigenvalue_is_one_with_constant_vector(clustered_codes):
    X = clustered_codes.toarray()
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0), embedding="leading")
    assert spec.eigenvalues[0] == pytest.approx(1.0, abs=1e-12)
    assert np.all(spec.eigenvalues <= 1.0 + 1e-12)
    u = spec.embed(X, 1)[:, 0]
    np.testing.assert_allclose(np.abs(u), 1.0 / np.sqrt(X.shape[0]), rtol=1e-8)


def block_codes(rng, sizes):
    """Block-diagonal codes: block b has n_b points on m_b atoms of its own,
    every row a dense Dirichlet draw (so each block is connected)."""
    blocks = [rng.dirichlet(np.ones(mb), size=nb) for nb, mb in sizes]
    return sp.block_diag(blocks, format="csr").toarray()


@pytest.mark.parametrize("sizes", [[(30, 4), (25, 3)], [(20, 3), (15, 5), (10, 2)], [(40, 6)]])
def test_eigenvalue_one_multiplicity_counts_components(sizes):
    rng = np.random.default_rng(len(sizes))
    X = block_codes(rng, sizes)
    n_comp = len(sizes)
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0), embedding="leading")
    ev = spec.eigenvalues
    assert np.sum(ev > 1 - 1e-10) == n_comp
    assert ev[n_comp - 1] == pytest.approx(1.0, abs=1e-10)
    if ev.size > n_comp:
        assert ev[n_comp] < 1 - 1e-3
    if n_comp >= 2:
        assert spec.eigengap() == n_comp
        # the top eigenspace is spanned by the components' indicator vectors
        U = spec.embed(sp.csr_array(X), n_comp)
        labels = np.repeat(np.arange(n_comp), [nb for nb, _ in sizes])
        indicators = (labels[:, None] == np.arange(n_comp)[None, :]).astype(float)
        np.testing.assert_allclose(projector(U), projector(indicators), atol=1e-8)
        # and the naive SVD agrees on the multiplicity
        _, sigma = _naive.spectral_embedding(X, X.shape[1])
        assert np.sum(sigma**2 > 1 - 1e-10) == n_comp


def test_unused_atom_is_left_out():
    rng = np.random.default_rng(41)
    X = block_codes(rng, [(20, 3), (20, 3)])
    X = np.hstack([X[:, :2], np.zeros((40, 1)), X[:, 2:]])  # atom 2 unused
    spec = BipartiteSpectrum(X.T @ X, X.sum(axis=0), embedding="leading")
    np.testing.assert_array_equal(spec.used, np.arange(7) != 2)
    assert spec.eigenvalues.size == 6
    P = spec.projection(2)
    np.testing.assert_array_equal(P[2], 0.0)
    Xu = np.delete(X, 2, axis=1)
    U_ref, _ = _naive.spectral_embedding(Xu, 2)
    np.testing.assert_allclose(projector(spec.embed(X, 2)), projector(U_ref), atol=1e-8)
    with pytest.raises(ValueError, match="n_clusters=7 exceeds the 6 modes"):
        spec.check_shows(7)

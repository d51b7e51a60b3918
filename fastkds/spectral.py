"""Spectral embedding of the bipartite point-atom graph, linear in n (docs/algorithm.md, "Clustering").

The codes X (n x m, rows on the simplex) are the edge weights between points
and atoms. With ``s = X^T 1`` and ``M = diag(s)^(-1/2) X^T X diag(s)^(-1/2)``
(m x m) = ``V diag(sigma^2) V^T``, the normalized embedding of the points is
``U = X diag(s)^(-1/2) V_k diag(sigma_k)^(-1)``: an m x m eigenproblem plus a
sparse product, never an n x n matrix.
"""

import os
import time
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from . import _config, _kernels
from ._validation import check_choice
from .diskcodes import DiskCodesWriter, NpyAppender, NpyRows, code_chunks

#: With ``min_component > 0``, a component or a mode of fewer points than
#: this is never a cluster, whatever the fraction says: on small data 1% is a
#: point or two, and a mode on the few points that share one atom would take
#: the place of a mode that separates clusters (Yale B's 128 images;
#: docs/experiments.md).
MIN_CLUSTER_POINTS = 5

#: Steps of the random walk point -> atom -> point by which the
#: ``"diffusion"`` embedding weighs the modes past the k-th: mode j keeps
#: ``(lambda_j / lambda_k)^DIFFUSION_STEPS`` of its length.
DIFFUSION_STEPS = 16

#: ``1 - lambda`` below this counts as 0 in :meth:`BipartiteSpectrum.eigengap`:
#: the eigenvalue 1 of a connected component, up to the eigensolver's
#: rounding (about 1e-15), far below a real cut between clusters.
ZERO_MU = 1e-10


def _nearest_rows(queries, rows):
    """For each row of ``queries``, the index of the nearest row of ``rows``
    (squared distances summed from the differences, ties to the first).

    One query at a time: the differences of all pairs at once are a
    (queries x rows x features) array, hundreds of megabytes where many
    atoms are outliers, and slower for it; the distances are the same bits.
    """
    nearest = np.empty(queries.shape[0], dtype=np.intp)
    for q in range(queries.shape[0]):
        diff = rows - queries[q]
        np.square(diff, out=diff)
        nearest[q] = np.argmin(diff.sum(axis=1))
    return nearest


class BipartiteSpectrum:
    """Eigen-decomposition of the atom-side matrix M, and the map from codes
    to the embedding.

    Parameters
    ----------
    XtX : ndarray of shape (m, m)
        ``X^T X`` of the codes.
    s : ndarray of shape (m,)
        Atom degrees ``X^T 1``.
    min_component : float, default=0.0
        Connected components of the code graph that hold less than this
        fraction of the total degree (of the points) are outliers: a point
        far from the rest that owns an atom forms a tiny component of
        eigenvalue 1, and a few of them crowd the real clusters out of the
        leading eigenvectors. They are left out of the eigenproblem; their
        atoms take the embedding of the nearest kept atom in ``atoms``.
        When > 0, the threshold is at least ``MIN_CLUSTER_POINTS`` points.
        The same threshold marks *localised modes*: eigenvectors spread
        over fewer than this fraction of the points (see :func:`mode_sizes`).
        A few points that put nearly all their weight on an atom of their
        own, joined to the rest by a faint edge, are not a separate
        component, but they make an eigenvalue just below 1 all the same.
        Localised modes do not count towards the k eigenvectors of a
        k-cluster embedding (:meth:`n_columns`).
    atoms : ndarray of shape (m, d) or None
        The dictionary, to find those nearest kept atoms. Without it the
        outliers' atoms embed at the origin.
    embedding : {"diffusion", "leading"}, default="diffusion"
        What k-means clusters (:meth:`projection`). ``"leading"``: the
        eigenvectors of the k leading modes (Ng, Jordan and Weiss; the
        paper's). ``"diffusion"``: those, and the next k spread modes, mode
        j weighted by ``(lambda_j / lambda_k)^DIFFUSION_STEPS``: what is left
        of it, relative to the k-th mode, after that many more steps of the
        random walk point -> atom -> point, whose eigenvalues are the
        lambdas. Where the clusters are components of the code graph, each
        mode past the k-th varies inside one of them, and k-means finds the
        components as with the leading modes. Where clusters touch (two
        moons joined at a tip, digits that share atoms), the k leading modes
        mix them, and the next modes, about as slow, still separate them
        (docs/algorithm.md, "The diffusion embedding").

    Attributes
    ----------
    eigenvalues : ndarray
        ``sigma^2`` in decreasing order, one per atom in use (atoms with
        ``s_j = 0`` have no edge and are left out). The multiplicity of the
        eigenvalue 1 is the number of connected components of the graph.
    eigenvectors : ndarray of shape (m_used, m_used)
    spread : ndarray of bool, shape (m_used,)
        Eigenvectors spread over at least ``min_component`` of the points
        (and ``MIN_CLUSTER_POINTS``); the others are localised modes (all
        True when ``min_component`` is 0).
    used : ndarray of bool, shape (m,)
        Atoms in the eigenproblem: used by some point, and not in an outlier
        component.
    n_outlier_atoms : int
        Atoms left out as outlier components.
    inv_sqrt_s : ndarray of shape (m_used,)
        ``s^(-1/2)`` of the atoms in the eigenproblem.
    stand_in : tuple of two int ndarrays, or None
        The outlier components' atoms, and the kept atom whose embedding
        each takes (None when there are none or no ``atoms`` were given).
    embedding : str
        The ``embedding`` parameter.
    """

    def __init__(self, XtX, s, *, min_component=0.0, atoms=None, embedding="diffusion"):
        self.embedding = check_choice(embedding, "embedding", _config.EMBEDDINGS)
        s = np.asarray(s, dtype=np.float64)
        XtX = np.asarray(XtX, dtype=np.float64)
        self.used = s > 0
        if not self.used.any():
            raise ValueError("the codes use no atom: cannot build the spectral embedding")
        outliers = self._outlier_atoms(XtX, s, min_component)
        self.n_outlier_atoms = int(outliers.sum())
        self.used &= ~outliers
        self.stand_in = None
        if self.n_outlier_atoms and atoms is not None:
            kept = np.flatnonzero(self.used)
            out = np.flatnonzero(outliers)
            self.stand_in = (out, kept[_nearest_rows(atoms[out], atoms[kept])])
        r = 1.0 / np.sqrt(s[self.used])
        M = r[:, None] * np.asarray(XtX, dtype=np.float64)[np.ix_(self.used, self.used)] * r[None, :]
        M = 0.5 * (M + M.T)
        vals, vecs = np.linalg.eigh(M)
        order = np.argsort(vals)[::-1]
        self.eigenvalues = np.clip(vals[order], 0.0, None)
        self.eigenvectors = vecs[:, order]
        self.inv_sqrt_s = r
        self.spread = np.ones(order.size, dtype=bool)
        if min_component > 0:
            # the degrees of the kept atoms sum to the points in the eigenproblem
            spread = mode_sizes(self.eigenvectors, s[self.used]) >= min_points(min_component, s[self.used].sum())
            if spread.any():  # nothing spread: every mode counts
                self.spread = spread

    @classmethod
    def from_arrays(
        cls,
        *,
        eigenvalues,
        eigenvectors,
        used,
        inv_sqrt_s,
        spread,
        n_outlier_atoms,
        stand_in=None,
        embedding="diffusion",
    ):
        """A spectrum from its stored attributes, as :func:`fastkds.load`
        rebuilds it (computing it again would need the codes' ``X^T X``).

        Parameters
        ----------
        eigenvalues, eigenvectors, used, inv_sqrt_s, spread, n_outlier_atoms, stand_in, embedding
            The attributes of that name (see the class's Attributes).

        Returns
        -------
        BipartiteSpectrum
        """
        spectrum = cls.__new__(cls)
        spectrum.embedding = check_choice(embedding, "embedding", _config.EMBEDDINGS)
        spectrum.eigenvalues = eigenvalues
        spectrum.eigenvectors = eigenvectors
        spectrum.used = used
        spectrum.inv_sqrt_s = inv_sqrt_s
        spectrum.spread = spread
        spectrum.n_outlier_atoms = n_outlier_atoms
        spectrum.stand_in = stand_in
        return spectrum

    def _outlier_atoms(self, XtX, s, min_component):
        """Atoms in components of the atom graph with a small share of the degree."""
        outliers = np.zeros(s.size, dtype=bool)
        if min_component <= 0:
            return outliers
        used = np.flatnonzero(self.used)
        # two atoms are linked when some point uses both: X^T X > 0
        n_comp, label = connected_components(sp.csr_array(XtX[np.ix_(used, used)] > 0), directed=False)
        if n_comp == 1:
            return outliers
        mass = np.bincount(label, weights=s[used], minlength=n_comp)
        small = mass < min_points(min_component, s.sum())
        if small.all():  # nothing large: keep everything
            return outliers
        outliers[used[small[label]]] = True
        return outliers

    def eigengap(self, max_clusters=None):
        """Number of clusters: the k >= 2 at which the normalised Laplacian's
        spectrum grows most, relatively.

        With ``mu_j = 1 - lambda_j`` over the spread modes (increasing),
        the k in ``2..max_clusters`` that maximises ``mu_{k+1} / mu_k``.
        k separated clusters make ``mu_1, ..., mu_k`` small (cuts between
        clusters are cheap) and ``mu_{k+1}`` large (any cut inside a cluster
        is dear): a graph is well clustered in k parts when this ratio is
        large (Peng, Sun and Zanetti 2015; ``mu_k`` is within a constant of
        the best k-way conductance, Lee, Oveis Gharan and Trevisan 2014).

        The ratio, not the difference ``lambda_k - lambda_{k+1}``: along an
        elongated cluster (a moon, a spiral arm, a circle) the atoms form a
        chain, whose Laplacian eigenvalues grow like ``j^2``. Differences
        then grow with k, and the largest falls among small pieces of the
        chains (k of 8-20 on noisy moons), while the ratios
        ``(j + 1)^2 / j^2`` shrink. Connected components (``mu = 0`` up to
        rounding) count as ``mu =`` :data:`ZERO_MU`, so c components give
        the ratio ``mu_{c+1} / ZERO_MU`` at k = c, far above any ratio of
        real cuts, and the rule returns their number.

        Where clusters group at two levels (two pairs of close blobs), the
        rule takes the level whose separation is clearer, relatively.

        Parameters
        ----------
        max_clusters : int or None
            Largest k considered (None: one less than the spread modes).

        Returns
        -------
        k : int
            1 when fewer than three spread modes leave nothing to compare.
        """
        ev = self.eigenvalues[self.spread]
        kmax = ev.size - 1 if max_clusters is None else min(max_clusters, ev.size - 1)
        if kmax < 2:
            return 1
        return int(np.argmax(gap_ratios(1.0 - ev[: kmax + 1])[1:])) + 2

    def gap_ratio(self, k):
        """``mu_{k+1} / mu_k``, the ratio :meth:`eigengap` maximises, at
        ``k``: how clearly the code graph shows k clusters. None where fewer
        than ``k + 1`` modes are spread."""
        ev = self.eigenvalues[self.spread]
        if ev.size < k + 1:
            return None
        return float(gap_ratios(1.0 - ev[: k + 1])[k - 1])

    def n_columns(self, k):
        """Columns of the k-cluster embedding: the leading eigenvectors up to
        the k-th spread one, and with ``embedding="diffusion"`` the next k
        spread ones (or as many as there are); see :meth:`columns`.

        Localised modes among the leading ones do not count towards k, but
        they stay in the embedding: where a localised mode's eigenvalue
        nearly equals a cluster mode's, the eigensolver returns mixtures of
        the two, and the cluster's direction is then shared between them.
        For the points outside a localised mode's few atoms its column is
        nearly zero.
        """
        return self.columns(k).size

    def columns(self, k, n_extra=None):
        """Eigenvectors of the k-cluster embedding, by their index.

        Parameters
        ----------
        k : int
        n_extra : int or None, default=None
            Spread modes past the k-th spread one to add (None: k with
            ``embedding="diffusion"``, 0 with ``"leading"``). The localised
            modes past the k-th spread one never enter: with a weight near
            1, each would give its few points a direction of their own
            (docs/experiments.md, "The diffusion embedding").

        Returns
        -------
        ndarray of int
        """
        leading = self._leading_columns(k)
        if n_extra is None:
            n_extra = k if self.embedding == "diffusion" else 0
        past = leading + np.flatnonzero(self.spread[leading:])[:n_extra]
        return np.r_[np.arange(leading), past]

    def column_weights(self, k, n_extra=None, steps=DIFFUSION_STEPS):
        """Weights of the :meth:`columns`: 1 for the leading ones to the
        k-th spread mode, ``(lambda_j / lambda_k)^steps`` past it (see
        ``embedding``).

        Parameters
        ----------
        k : int
        n_extra : int or None, default=None
            As for :meth:`columns`.
        steps : float, default=DIFFUSION_STEPS

        Returns
        -------
        ndarray of shape (columns(k, n_extra).size,)
        """
        leading = self._leading_columns(k)
        past = self.eigenvalues[self.columns(k, n_extra)[leading:]]
        lam_k = self.eigenvalues[leading - 1]
        # eigenvalues decrease, so past <= lam_k; a k-th mode of eigenvalue 0 leaves nothing past it
        return np.r_[np.ones(leading), (past / lam_k) ** steps if lam_k > 0 else np.zeros(past.size)]

    def shows(self, k):
        """Whether the code graph has the k spread modes a k-cluster
        embedding needs (:meth:`check_shows` says what to do if not)."""
        return k <= int(self.spread.sum())

    def check_shows(self, k):
        """Refuse k clusters where the code graph has fewer spread modes:
        where its labels are the clustering's, k-means would have fewer
        directions than clusters.

        Raises
        ------
        ValueError
            Naming k and the modes there are.
        """
        if not self.shows(k):
            spread = int(self.spread.sum())
            raise ValueError(
                f"n_clusters={k} exceeds the {spread} modes of the code graph "
                f"(one per atom in use by the codes, less {self.spread.size - spread} localised): "
                "ask for fewer clusters, or lower lam: longer codes join the pieces of the graph "
                "that hold too few codes to count (with fewer atoms in use than clusters, use more atoms)"
            )

    def _leading_columns(self, k):
        """The leading eigenvectors up to the k-th spread one (``n_columns``
        of the ``"leading"`` embedding), or up to the last spread one where
        there are fewer than k: the neighbours' vote then labels the points
        from their own graph (:func:`cluster_codes`), and the embedding
        keeps every mode the code graph has."""
        k = min(k, int(self.spread.sum()))
        return int(np.searchsorted(np.cumsum(self.spread), k)) + 1

    def projection(self, k, n_extra=None, steps=DIFFUSION_STEPS):
        """The m x c matrix P with ``U = X P`` (zero rows for unused atoms):
        the :meth:`columns`, ``c = n_columns(k)`` (k, 2k with
        ``embedding="diffusion"``, more where localised modes lead), each
        weighted by :meth:`column_weights`. ``n_extra`` and ``steps`` give
        other embeddings of the family (``bench/embeddings.py``)."""
        columns = self.columns(k, n_extra)
        weights = self.column_weights(k, n_extra, steps)
        sigma = np.sqrt(np.maximum(self.eigenvalues[columns], np.finfo(np.float64).eps))
        P = np.zeros((self.used.size, columns.size))
        P[self.used] = self.inv_sqrt_s[:, None] * self.eigenvectors[:, columns] / sigma * weights
        if self.stand_in is not None:
            out, nearest = self.stand_in
            P[out] = P[nearest]
        return P

    def embed(self, codes, k):
        """Spectral embedding (n x ``n_columns(k)``) of points from their codes (sparse or dense)."""
        return np.asarray(codes @ self.projection(k))


def gap_ratios(mu):
    """``mu[j + 1] / mu[j]`` of a normalised Laplacian's increasing
    eigenvalues ``mu``, each below :data:`ZERO_MU` (a connected component's
    0, up to rounding) counted as ``ZERO_MU``."""
    mu = np.maximum(np.asarray(mu, dtype=np.float64), ZERO_MU)
    return mu[1:] / mu[:-1]


def outlier_share(min_component, n_clusters):
    """The fraction of the points below which a component or a mode is no
    cluster: ``min_component``, or half an even split, ``1 / (2 k)``, where
    that is smaller (``k`` the clusters asked for; None: "auto", the fraction
    as given). Past 50 clusters an even split holds less than 1% of the
    points each, and the default 1% would call the clusters themselves
    outliers (10^5 points in 100 blobs: 291 of 400 atoms left out, accuracy
    0.55; docs/experiments.md, "Many clusters")."""
    return min_component if n_clusters is None else min(min_component, 0.5 / n_clusters)


def min_points(min_component, n_points):
    """Fewest points of a cluster: the fraction ``min_component`` of
    ``n_points``, at least ``MIN_CLUSTER_POINTS``."""
    return max(min_component * n_points, MIN_CLUSTER_POINTS)


def mode_sizes(eigenvectors, s):
    """Number of points each eigenvector of M is spread over.

    The degree-weighted participation ratio ``1 / sum_j v_j^4 / s_j`` of a
    unit eigenvector v of ``M = diag(s)^(-1/2) X^T X diag(s)^(-1/2)``. For
    the eigenvector of a connected component of the code graph,
    ``v_j = sqrt(s_j / S)`` on its atoms (S the sum of their degrees), so
    the ratio is S: the number of points in the component (each point has
    degree 1). A mode concentrated on one atom of degree s_j has size s_j.

    Parameters
    ----------
    eigenvectors : ndarray of shape (m, p)
        Unit eigenvectors of M, as columns.
    s : ndarray of shape (m,)
        Atom degrees (all > 0).

    Returns
    -------
    sizes : ndarray of shape (p,)
    """
    v2 = np.asarray(eigenvectors, dtype=np.float64) ** 2
    return 1.0 / ((v2 * v2) / np.asarray(s, dtype=np.float64)[:, None]).sum(axis=0)


def embedding_rows(codes, projection, out=None):
    """The row-normalised spectral embedding of ``codes``:
    ``normalize_rows(codes @ projection)``.

    CSR codes (any scipy CSR array or matrix) are embedded on the
    caller's Numba threads (:func:`fastkds._kernels.embed_codes`; see
    :func:`fastkds._config.numba_threads`), with the same numbers
    as scipy and NumPy give; dense codes, and embeddings of more than
    :data:`fastkds._kernels.PAIRWISE_BLOCK` columns, by NumPy.

    Parameters
    ----------
    codes : scipy sparse CSR or ndarray of shape (n, m)
    projection : ndarray of shape (m, c), float64
        :meth:`BipartiteSpectrum.projection`.
    out : ndarray of shape (n, c), float64, or None
        Where the kernel writes the embedding of CSR codes (None: a new
        array); the NumPy path makes its own.

    Returns
    -------
    ndarray of shape (n, c), float64
    """
    if not sp.issparse(codes) or codes.format != "csr" or projection.shape[1] > _kernels.PAIRWISE_BLOCK:
        return normalize_rows(np.asarray(codes @ projection), copy=False)
    if out is None:
        out = np.empty((codes.shape[0], projection.shape[1]))
    _kernels.embed_codes(
        codes.indptr.astype(np.int64, copy=False),
        codes.indices.astype(np.int32, copy=False),  # fewer signatures; m is far below 2^31
        codes.data,
        np.ascontiguousarray(projection, dtype=np.float64),
        out,
    )
    return out


def normalize_rows(U, *, copy=True):
    """Rows scaled to unit Euclidean norm (zero rows stay zero), as in Ng-Jordan-Weiss.

    ``copy=False`` scales ``U`` in place (for an embedding of 10^7 points it
    saves a second n x k array).
    """
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    if copy:
        return U / norms
    U /= norms
    return U


def kmeans_sample(n, random_state):
    """Sorted indices of the embedded points k-means is fitted on: all of
    them up to :data:`fastkds._config.KMEANS_SAMPLE`, else a random sample of that many."""
    if n <= _config.KMEANS_SAMPLE:
        return np.arange(n)
    # Generator.choice draws k of n without an n-long permutation
    return np.sort(np.random.default_rng(random_state).choice(n, _config.KMEANS_SAMPLE, replace=False))


def fit_kmeans(rows, n_clusters, n_init, random_state):
    """k-means of embedded ``rows``, as ``KMeans(n_clusters, n_init=n_init,
    random_state=random_state).fit(rows)`` on one OpenMP thread
    (:func:`fastkds._config.single_thread_kmeans`), but with its restarts
    on a sample where the rows are many.

    Past ``max(KMEANS_RESTART_MIN, KMEANS_RESTART_PER_CLUSTER * n_clusters)``
    rows (:mod:`fastkds._config`), the ``n_init`` restarts run on a random
    sample of that many and one Lloyd run on every row starts from the best
    of them (the returned model's ``init``): on 2 x 10^5 rows of 20 clusters
    about a tenth of the time, at the same inertia to within the spread of
    restarts (docs/experiments.md, "k-means restarts on a sample").

    Returns
    -------
    sklearn.cluster.KMeans
        Fitted on all of ``rows``.
    """
    from sklearn.cluster import KMeans

    size = max(_config.KMEANS_RESTART_MIN, _config.KMEANS_RESTART_PER_CLUSTER * n_clusters)
    with _config.single_thread_kmeans():
        if rows.shape[0] <= size or n_init == 1:
            return KMeans(n_clusters, n_init=n_init, random_state=random_state).fit(rows)
        pick = np.random.default_rng(random_state).choice(rows.shape[0], size, replace=False)
        best = KMeans(n_clusters, n_init=n_init, random_state=random_state).fit(rows[pick])
        return KMeans(n_clusters, init=best.cluster_centers_, n_init=1, random_state=random_state).fit(rows)


class EmbeddingPass:
    """The spectral embedding of codes that arrive chunk by chunk.

    It takes the encoder's CSR triples in row order (as the encoder hands
    them to a ``codes_out``), writes the row-normalised embedding of each
    chunk to ``sink`` and keeps the rows k-means will be fitted on: no
    array of all the codes or of a transient embedding is formed.

    Parameters
    ----------
    projection : ndarray of shape (m, c)
        :meth:`BipartiteSpectrum.projection`.
    sink : object with ``append(rows)``
        Where the embedded rows go, in order (an array filled in memory, or a
        file, :class:`fastkds.diskcodes.NpyAppender`).
    sample : ndarray of int
        Sorted row indices to keep (:func:`kmeans_sample`).

    Attributes
    ----------
    sample_rows : ndarray of shape (len(sample), c)
    n_rows : int
        Rows embedded so far.
    """

    def __init__(self, projection, sink, sample):
        self.projection = projection
        self.sink = sink
        self.sample = sample
        self.sample_rows = np.empty((sample.shape[0], projection.shape[1]))
        # one chunk's embedding, reused: fresh pages for every chunk, faulted
        # in by the kernel's threads, cost more than the embedding
        # (docs/experiments.md, "Page faults on two threads")
        self._scratch = np.empty((0, projection.shape[1]))
        self.n_rows = 0
        self._next = 0  # first entry of sample not yet reached

    def append(self, triple):
        """Embed the codes of the next chunk, a CSR triple ``(indptr, indices, data)``."""
        indptr, indices, data = triple
        n_chunk = indptr.shape[0] - 1
        codes = sp.csr_array((data, indices, indptr), shape=(n_chunk, self.projection.shape[0]))
        if self._scratch.shape[0] < n_chunk:
            self._scratch = np.empty((n_chunk, self.projection.shape[1]))
        rows = embedding_rows(codes, self.projection, out=self._scratch[:n_chunk])
        self.sink.append(rows)
        stop = self.n_rows + n_chunk
        end = self._next + int(np.searchsorted(self.sample[self._next :], stop))
        self.sample_rows[self._next : end] = rows[self.sample[self._next : end] - self.n_rows]
        self._next = end
        self.n_rows = stop


class ArrayRows:
    """An in-memory array of a known shape filled by appending rows (the
    in-memory twin of :class:`fastkds.diskcodes.NpyAppender`)."""

    def __init__(self, shape, dtype=np.float64):
        self.array = np.empty(shape, dtype=dtype)
        self.length = 0

    def append(self, rows):
        self.array[self.length : self.length + rows.shape[0]] = rows
        self.length += rows.shape[0]


def cluster_codes(XtX, s, atoms, results, rng, params, timings=None, label=True):
    """The clustering step of every clusterer, from the code graph to the labels.

    The spectrum of the graph (``XtX = X^T X`` and the atom degrees ``s``
    of the codes X), the number of clusters, the embedding of the codes
    ``results`` holds (:meth:`ClusteringResults.embed`), k-means on a
    sample of it (:func:`kmeans_sample`), and, with ``label``, the label of
    every point (:meth:`ClusteringResults.label`; the neighbours' vote
    writes its own instead). Where the k-means labels are the clustering's
    (``label``), or fewer atoms are in use than k, the code graph must
    show the k clusters (:meth:`BipartiteSpectrum.check_shows`); otherwise
    the vote labels the points from their own neighbours' graph where it
    shows fewer (:func:`fastkds.label_vote.fit_label_vote`), and its
    k-means then only fills ``kmeans_``.

    Parameters
    ----------
    XtX, s : ndarray
    atoms : ndarray of shape (m, d)
        The dictionary (the spectrum places outlier atoms by it).
    results : ClusteringResults
        Or anything with its ``n``, ``embed(projection, sample)`` and
        ``label(kmeans)`` (the Dask backend's, whose codes stay on the workers).
    rng : numpy.random.RandomState
        Draws the k-means seed.
    params : tuple
        The checked ``(n_clusters, n_init, min_component, max_clusters,
        embedding)`` (``n_clusters`` None: chosen by the eigengap).
    timings : dict or None
        Gets the seconds of ``embed`` and ``kmeans``.
    label : bool
        Whether to label every point by its nearest k-means centre.

    Returns
    -------
    spectrum : BipartiteSpectrum
    n_clusters : int
    kmeans : sklearn.cluster.KMeans
    """
    from sklearn.exceptions import ConvergenceWarning

    k, n_init, min_component, max_clusters, embedding = params
    timings = {} if timings is None else timings
    # BLAS on one thread: its problems here are m x m, and OpenBLAS threads
    # left spinning after one (about 0.1 s) take the cores from k-means
    with _config.single_thread_blas():
        t0 = time.perf_counter()
        share = outlier_share(min_component, k)
        spectrum = BipartiteSpectrum(XtX, s, min_component=share, atoms=atoms, embedding=embedding)
        # "auto": never more clusters than points (a stack of dictionaries may hold more atoms)
        n_clusters = spectrum.eigengap(min(max_clusters, results.n)) if k is None else k
        if label or spectrum.eigenvalues.size + spectrum.n_outlier_atoms < n_clusters:
            # the k-means labels are final, or fewer atoms are in use than
            # clusters asked for: a setting to change, not a case for the vote
            spectrum.check_shows(n_clusters)
        seed = rng.randint(np.iinfo(np.int32).max)
        sample_rows = results.embed(spectrum.projection(n_clusters), kmeans_sample(results.n, seed))
        timings["embed"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        with warnings.catch_warnings():
            if not spectrum.shows(n_clusters):
                # fewer distinct embedded points than clusters, maybe: these
                # labels are replaced by the vote's
                warnings.simplefilter("ignore", ConvergenceWarning)
            kmeans = fit_kmeans(sample_rows, n_clusters, n_init, seed)
        if label:
            results.label(kmeans)
        timings["kmeans"] = time.perf_counter() - t0
    return spectrum, n_clusters, kmeans


def _drain(parts):
    """Yield the items of ``parts`` from its end, dropping each: the codes
    of a chunk are freed once embedded."""
    while parts:
        yield parts.pop()


class HeldCodes(list):
    """The CSR triples of the first pass, held until embedded; a chunk's
    indptr counts its own entries only, so it is kept as int32 where it fits
    (the encoder hands it over as int64: 8 bytes a point, a fifth of the
    codes)."""

    def append(self, triple):
        indptr, indices, data = triple
        if indptr[-1] <= np.iinfo(np.int32).max:  # a chunk_size given huge may not fit
            indptr = indptr.astype(np.int32)
        super().append((indptr, indices, data))


class ClusteringResults:
    """Where a clustering fit keeps what grows with n: in memory, or in the
    files of ``out`` (written under temporary names, put in place by
    :meth:`commit`, removed by :meth:`abort`).

    The codes of the first pass (appended to :attr:`codes` as CSR triples)
    are held until embedded: in memory, each chunk's freed once its rows
    are embedded, or in ``out/codes``.

    Parameters
    ----------
    out : str or None
        The results' folder, or None to keep them in memory.
    n : int
        Rows of the data (or of the codes already computed).
    n_atoms : int
    dtype : numpy dtype
        The codes'.
    n_jobs : int or None
        Numba threads of the embedding (None: all).
    """

    def __init__(self, out, n, n_atoms, dtype, n_jobs=None):
        self.out = out
        self.n = n
        self.n_jobs = n_jobs
        self._files = []
        if out is not None:
            self.codes = DiskCodesWriter(os.path.join(out, "codes"), n_atoms, dtype)
            self._files.append(self.codes)
        else:
            self.codes = HeldCodes()
        self._embedding = self._labels = None

    def embed(self, projection, sample):
        """Write the embedding of the held codes; return its rows ``sample``
        (sorted indices), the rows k-means is fitted on."""
        embed = EmbeddingPass(projection, self._embedding_sink(projection.shape[1]), sample)
        with _config.numba_threads(self.n_jobs):
            for triple in self._code_chunks():
                embed.append(triple)
        return embed.sample_rows

    def label(self, kmeans):
        """Write the label of every point: its nearest centre of ``kmeans``."""
        self.write_labels(kmeans.predict(rows) for rows in self._embedding_chunks())

    def kmeans_labels(self, kmeans):
        """Every point's nearest centre of ``kmeans``, as one array: the
        labels :meth:`label` would write."""
        return np.concatenate([kmeans.predict(rows) for rows in self._embedding_chunks()])

    def write_labels(self, chunks):
        """Write the label of every point, given as arrays of consecutive rows."""
        labels = self._labels_sink()
        for rows in chunks:
            labels.append(rows)

    def _code_chunks(self):
        """CSR triples of the codes of the first pass, in order."""
        if isinstance(self.codes, DiskCodesWriter):
            self.codes.close(commit=False)
            return code_chunks(self.codes.temporary_paths, _config.LABEL_CHUNK)
        parts, self.codes = self.codes[::-1], None
        return _drain(parts)

    def _embedding_sink(self, n_columns):
        if self.out is None:
            self._embedding = ArrayRows((self.n, n_columns))
        else:
            self._embedding = NpyAppender(os.path.join(self.out, "embedding.npy"), np.float64, (n_columns,))
            self._files.append(self._embedding)
        return self._embedding

    def _embedding_chunks(self):
        """The embedding again, in chunks of :data:`fastkds._config.LABEL_CHUNK` rows."""
        step = _config.LABEL_CHUNK
        if self.out is None:
            E = self._embedding.array
            return (E[start : start + step] for start in range(0, self.n, step))
        self._embedding.close()
        rows = NpyRows(self._embedding.tmp)
        return (rows.read(start, min(start + step, self.n)) for start in range(0, self.n, step))

    def _labels_sink(self):
        if self.out is None:
            self._labels = ArrayRows((self.n,), np.int32)
        else:
            self._labels = NpyAppender(os.path.join(self.out, "labels.npy"), np.int32)
            self._files.append(self._labels)
        return self._labels

    def commit(self):
        """``(labels, embedding)``: the arrays, or memory maps of the files put in place."""
        if self.out is None:
            return self._labels.array, self._embedding.array
        self._labels.close()
        self._embedding.close()  # not yet closed where the labels came from the data
        for f in self._files:
            f.commit()
        return (
            np.load(os.path.join(self.out, "labels.npy"), mmap_mode="r"),
            np.load(os.path.join(self.out, "embedding.npy"), mmap_mode="r"),
        )

    def abort(self):
        """Remove the files not yet in place."""
        for f in self._files:
            f.abort()

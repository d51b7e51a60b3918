"""The neighbours' vote: cluster labels at the data's own resolution.

The code graph's nodes are the atoms, each standing for about n / m points
(70-100 with the default atoms), so the spectral embedding places the
boundary between two clusters no more finely than the atoms do. The vote
moves the labels along the boundaries at the points' own resolution: each
point takes the label most of its ``q`` nearest neighbours hold. The
neighbours are searched among a reference sample of the points (all of
them up to :data:`fastkds._config.VOTE_REFERENCES_PER_ATOM` per atom) and
screened by the dictionary: a point's candidates are the references whose
nearest atom is one of its :data:`fastkds._config.VOTE_PROBE_ATOMS` nearest
atoms, or of more where the cells hold fewer than
:data:`fastkds._config.VOTE_REFERENCES_PER_ATOM` references on average
(:func:`probe_count`; :mod:`fastkds._vote_kernels`). So a point costs a few
hundred distances, whatever n, and the fit stays linear in n. Where that
screen would save little (few references, or many small cells), the
references' own search reads every reference: an exact search
(:attr:`LabelVote.exact`); so does every later search where the
references are every point of the fit, while the other points of a fit
whose references are a sample are searched screened (most of them settle
without a search).

Two steps (docs/algorithm.md, "The neighbours' vote"):

1. :func:`fit_label_vote`: the references start from the labels of the
   code graph's k-means. Where the graph joining each reference to its q
   nearest others holds fewer than ``n_clusters`` pieces but a narrower
   one (each joined to its q' < q nearest, the most at which it does:
   :func:`_finer_pieces`) falls into exactly ``n_clusters`` pieces, each
   larger than q and than the spectral step's outliers, and those pieces
   cut the graph of min(q, 3 q') neighbours
   (:data:`fastkds._config.VOTE_PIECES_REACH`: the q-graph where 3 q' >=
   q) less than the k-means labels do (a
   smaller normalised cut, :func:`normalised_cut`), the pieces are the
   labels: clusters apart
   at the points' finest reach and joined at q by a few bridges (the two
   faces of Yale B: their 2-NN graph holds the two subjects, 64 images
   each, while about a tenth of the 10-NN graph's edges join them). The
   cut keeps a narrow graph from splitting a cluster at a thin place
   (noisy moons whose 4-NN graph parts 445 points from 555). Otherwise
   they vote among themselves, each counting the labels of its q nearest
   other references and half a vote for its own, until no label changes
   (at most :data:`fastkds._config.VOTE_MAX_ROUNDS` rounds), or until a
   round would leave fewer labels than it found (the rounds move
   boundaries; a cluster of fewer points than q would otherwise be voted
   away a layer a round); a reference whose probed cells all hold one
   label keeps it (its own cell is among them). Then the same rounds again
   with ranked votes, the r-th nearest counting ``1 / r``: one vote each
   moves a boundary placed by the atoms across their cells, and the ranked
   vote, the better classifier of the two (a leave-one-out accuracy of the
   true labels at least as high on every set of ``bench/real_data.py``:
   ``bench/vote_weights.py``), settles it where the nearest points put it
   (docs/experiments.md, "Ranked votes and a wider screen"). Unless
   the code graph joins what the neighbours part: where the graph joining
   each reference to its q nearest others (or, where that falls into more
   than ``n_clusters`` pieces, to the fewest up to 2q that fall into at
   most ``n_clusters``:
   :func:`_pieces`) falls into 2 to ``n_clusters`` pieces and the k-means
   labels put more than a stray group of references
   (:data:`fastkds._config.VOTE_STRAY_SHARE`) outside their label's main
   piece, and the atoms' cells (each reference in its nearest atom's) put
   more than a stray group (of an even split over the atoms) outside
   theirs too, the atoms are too coarse for these data (concentric circles or
   shells closer than the atoms are spaced), and the references take the
   labels of their own graph instead: its pieces where there are
   ``n_clusters`` of them, else the k-means of its spectral embedding, as
   SpectralClustering would label them. So too where the search is exact
   (the references' graph is then the kNN graph of the points) and that
   graph shows ``n_clusters`` clusters more clearly than the code graph: a
   larger eigengap ratio (:func:`_clearer`; not computed where the k-means
   labels are already the graph's ``n_clusters`` pieces, which both
   choices then give), unless its labels cut it more than the k-means
   labels do (:func:`normalised_cut`; noisy moons, whose graph's spectral
   labels cut a moon); where the k-means labels cut that graph by more
   than half of what labels drawn at random would (:func:`_near_random`:
   codes of about one atom, in many features whose noise is most of every
   distance, give a code graph that tells the classes apart no better
   than chance); and where the code graph has
   fewer than ``n_clusters`` spread modes, so that its k-means labels cannot
   hold the clusters (classes of a few points each: atoms that hold two or
   three points code them alone, and the graph falls into pieces too small
   to count).
2. :meth:`LabelVote.predict`: every point, a training point or a new one,
   takes the label its q nearest references hold most, by ranked votes (a
   reference is its own nearest). One rule for both, so ``predict`` on the
   training points gives ``labels_``.
"""

import functools
import warnings

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from . import _config
from ._validation import read_only
from ._vote_kernels import (
    EXACT_CELL_REFS,
    FEW_FEATURES,
    cell_radii,
    nearest_references,
    nearest_references_exact,
    probe_atoms,
    vote,
)
from .sources import random_rows
from .spectral import fit_kmeans, gap_ratios, min_points, outlier_share


def reference_rows(n_samples, n_atoms, rng):
    """Sorted indices of the references: every point up to
    ``VOTE_REFERENCES_PER_ATOM * n_atoms`` points, else a random sample of
    that many.

    Parameters
    ----------
    n_samples, n_atoms : int
    rng : numpy.random.RandomState
        Draws the sample (only when one is needed).

    Returns
    -------
    ndarray of int64
    """
    size = _config.VOTE_REFERENCES_PER_ATOM * n_atoms
    if n_samples <= size:
        return np.arange(n_samples, dtype=np.int64)
    return np.sort(random_rows(rng, n_samples, size)).astype(np.int64)


def vote_reach(n_neighbors, n_references, n_clusters):
    """The neighbours a vote counts: ``n_neighbors``, but at most half an
    even split of the references among the clusters,
    ``n_references // (2 n_clusters)`` (and at least 1).

    A cluster of fewer points than about q / 2 holds the majority of no
    point's q nearest, and the vote takes it away. Among many clusters of a
    few points each (a face set of ten images a person) a fixed q of 10
    reaches across clusters; capped, every cluster of an even share holds
    at least 2q points. On data of a few hundred points a class or more the
    cap is past the default q and changes nothing.

    Parameters
    ----------
    n_neighbors : int
        The clusterer's ``vote_neighbors``.
    n_references, n_clusters : int

    Returns
    -------
    int
    """
    return int(max(1, min(n_neighbors, n_references // (2 * n_clusters))))


def probe_count(n_references, n_atoms, n_samples=None, n_features=0):
    """How many atoms' cells a point's search reads: the cells of
    :data:`fastkds._config.VOTE_PROBE_ATOMS` atoms, or as many as hold
    ``VOTE_PROBE_ATOMS * VOTE_REFERENCES_PER_ATOM`` references on average
    where the cells are smaller (fewer points than that an atom, or the
    stacked atoms of several dictionaries), so that a point's candidates do
    not thin out with the cells: nearest neighbours found among too few
    candidates reach past gaps in the data. In more than
    :data:`fastkds._vote_kernels.FEW_FEATURES` features, a screened search
    reads :data:`fastkds._config.VOTE_PROBE_WIDEN` times as many cells:
    there distances to the atoms tell less, and a point by a boundary
    between clusters finds its nearest references in further cells (on
    MNIST-5's 70 cells, the 6 nearest held 90% of such a point's 11 nearest
    references, the 18 nearest 99%).

    Every cell (an exact search) where the screened search would read more
    than ``1 / VOTE_SCREEN_SAVING`` of the distances an exact one reads
    (:data:`fastkds._config.VOTE_SCREEN_SAVING`): on few references, or
    on many small cells. That is the search of the references themselves;
    where they are a sample of the points a fit labels, the other points
    are searched screened whatever the ratio: a screened search lets most of
    them skip it (those whose probed cells hold one label), while an exact
    one reads every reference for each (on 10^6 points with 24 atoms, 2,400
    references, it took ten times the rest of the fit).

    Parameters
    ----------
    n_references, n_atoms : int
    n_samples : int or None, default=None
        The points to be searched, of which the references are all or a
        sample (None: the references alone).
    n_features : int, default=0
        The points' features.

    Returns
    -------
    int
        At most ``n_atoms``.
    """
    wanted = _config.VOTE_PROBE_ATOMS * _config.VOTE_REFERENCES_PER_ATOM
    cells = -(-wanted * n_atoms // max(n_references, 1))  # ceil(wanted / mean cell size)
    n_probe = int(min(n_atoms, max(_config.VOTE_PROBE_ATOMS, cells)))
    # a point's reads: its distances to the atoms, then to the probed cells' references
    screened = n_atoms + n_probe * n_references / max(n_atoms, 1)
    every_point = n_samples is None or n_samples <= n_references
    if every_point and n_atoms + n_references < _config.VOTE_SCREEN_SAVING * screened:
        return int(n_atoms)
    # whether to screen is judged on the narrow screen, and only then widened
    if n_features > FEW_FEATURES:
        n_probe = min(n_atoms, _config.VOTE_PROBE_WIDEN * n_probe)
    return int(n_probe)


def _every_cell(n_probe, n_atoms):
    """Whether probing ``n_probe`` of ``n_atoms`` atoms reads every cell."""
    return n_probe >= n_atoms


class LabelVote:
    """Cluster labels by a vote of each point's nearest references.

    Parameters
    ----------
    atoms : ndarray of shape (n_atoms, n_features)
        The dictionary that screens the search: a reference belongs to the
        cell of its nearest atom.
    references : ndarray of shape (n_references, n_features)
    labels : array-like of int, shape (n_references,)
        The references' labels, in ``0 .. n_clusters - 1``.
    n_neighbors : int
        q, the voting neighbours.
    n_clusters : int
    cells : ndarray of int or None
        Each reference's nearest atom, where already known.
    n_probe : int or None
        The atoms whose cells hold a point's candidates (None:
        :func:`probe_count`'s).
    ranked : bool, default=True
        Whether the r-th nearest reference votes ``1 / r``
        (:func:`fastkds._vote_kernels.vote`), else one vote each (the
        vote of models saved before ranked votes).

    Attributes
    ----------
    atoms, references, labels, n_neighbors, n_clusters, ranked
        As given.
    n_probe : int
        As given, or :func:`probe_count`'s.
    cell_start, cell_refs : ndarray of int64
        ``cell_refs[cell_start[a]:cell_start[a + 1]]``: the references of
        atom ``a``'s cell.
    """

    def __init__(self, atoms, references, labels, n_neighbors, n_clusters, cells=None, n_probe=None, ranked=True):
        self.atoms = np.ascontiguousarray(atoms)
        self.references = np.ascontiguousarray(references)
        self.labels = np.array(labels, dtype=np.int32)  # a copy: the vote rewrites it
        self.n_neighbors = int(n_neighbors)
        self.n_clusters = int(n_clusters)
        self.ranked = bool(ranked)
        if n_probe is None:
            n_references, n_features = self.references.shape
            n_probe = probe_count(n_references, self.atoms.shape[0], n_features=n_features)
        self.n_probe = int(n_probe)
        if cells is None:
            cells = _probe(self.references, self.atoms, 1, None)[:, 0]
        self.cell_refs = np.argsort(cells, kind="stable").astype(np.int64)
        self.cell_start = np.searchsorted(cells[self.cell_refs], np.arange(self.atoms.shape[0] + 1)).astype(np.int64)

    @property
    def exact(self):
        """Whether a point's search reads every cell: an exact search."""
        return _every_cell(self.n_probe, self.atoms.shape[0])

    def cell_labels(self):
        """Per atom, the label all references of its cell hold, or -1 (none
        or several)."""
        out = np.full(self.atoms.shape[0], -1, dtype=np.int64)
        sizes = np.diff(self.cell_start)
        full = np.flatnonzero(sizes > 0)
        held = self.labels[self.cell_refs]
        low = np.minimum.reduceat(held, self.cell_start[full]) if full.size else held[:0]
        high = np.maximum.reduceat(held, self.cell_start[full]) if full.size else held[:0]
        out[full] = np.where(low == high, low, -1)
        return out

    def neighbours(self, Y, n_neighbors=None, n_jobs=None, settle=False, probes=None):
        """The references nearest each row of ``Y``.

        Parameters
        ----------
        Y : ndarray of shape (n_samples, n_features)
        n_neighbors : int or None
            How many (default ``self.n_neighbors``).
        n_jobs : int or None
        settle : bool
            Whether rows whose candidates all hold one label may skip the search.
        probes : ndarray or None
            The atoms whose cells hold each row's candidates, where already
            known (:func:`_probe`); not read by an exact search.

        Returns
        -------
        neighbours : ndarray of int64, shape (n_samples, n_neighbors)
            Indices into ``references``, nearest first; -1 where there are
            fewer (and in the rows of settled points).
        settled : ndarray of int64, shape (n_samples,)
            The label of a settled row, else -1.
        """
        Y = read_only(np.ascontiguousarray(Y))
        out = np.empty((Y.shape[0], n_neighbors or self.n_neighbors), dtype=np.int64)
        settled = np.empty(Y.shape[0], dtype=np.int64)
        if self.exact:
            # every reference a candidate: where they all hold one label,
            # every point settles on it
            one = np.unique(self.labels) if settle else ()
            if len(one) == 1:
                settled[:] = one[0]
                out[:] = -1
                return out, settled
            if Y.shape[1] <= FEW_FEATURES:
                # the cells that cannot hold one of the nearest go unread:
                # the same neighbours in a fraction of the reads
                settled[:] = -1
                with _config.numba_threads(n_jobs):
                    nearest_references_exact(
                        Y,
                        read_only(self.atoms),
                        read_only(self.references),
                        read_only(self.cell_start),
                        read_only(self.cell_refs),
                        read_only(self._cell_radii),  # read-only where joblib memory-maps it
                        out,
                    )
                return out, settled
            # longer rows: the references in runs of EXACT_CELL_REFS, every
            # one probed by every point, and no atoms to rank: the products
            # span many references at once, and the runs spread over the
            # threads (one cell of them all ran on one); every reference is
            # a candidate whatever the runs, so the neighbours are the same
            n_refs = self.references.shape[0]
            cell_start = np.append(np.arange(0, n_refs, EXACT_CELL_REFS), n_refs).astype(np.int64)
            n_cells = cell_start.shape[0] - 1
            # no point is alone (every run is probed), so no atom is read: one a run
            atoms = np.repeat(self.atoms[:1], n_cells, axis=0)
            cell_refs = np.arange(n_refs, dtype=np.int64)
            probes = np.ascontiguousarray(np.broadcast_to(np.arange(n_cells, dtype=np.int64), (Y.shape[0], n_cells)))
            cell_label = np.full(n_cells, -1, dtype=np.int64)
        else:
            atoms, cell_start, cell_refs = self.atoms, self.cell_start, self.cell_refs
            probes = _probe(Y, self.atoms, self.n_probe, n_jobs) if probes is None else probes
            cell_label = self.cell_labels() if settle else np.full(self.atoms.shape[0], -1, dtype=np.int64)
        with _config.numba_threads(n_jobs):
            # the model's arrays are read-only where joblib memory-maps it
            nearest_references(
                Y,
                read_only(atoms),
                read_only(self.references),
                read_only(cell_start),
                read_only(cell_refs),
                cell_label,
                probes,
                out,
                settled,
            )
        return out, settled

    def check_rows(self, Y):
        """Refuse rows whose squared distances to the references could
        overflow float64 (every distance would read inf, and the nearest
        would be arbitrary): ``||y - r||^2 <= 2 ||y||^2 + 2 ||r||^2``.

        Parameters
        ----------
        Y : ndarray of shape (n_samples, n_features)

        Raises
        ------
        ValueError
            If that bound is not finite.
        """
        with np.errstate(over="ignore"):
            if not np.isfinite(2.0 * (_largest_sq_norm(Y) + self._largest_reference_sq_norm)):
                raise ValueError(
                    "the squared distances of the data to the vote's references overflow float64: rescale the data"
                )

    @functools.cached_property
    def _largest_reference_sq_norm(self):
        return _largest_sq_norm(self.references)

    @functools.cached_property
    def _cell_radii(self):
        """Per atom, the largest distance of its cell's references to it."""
        radius = np.empty(self.atoms.shape[0])
        with _config.numba_threads(None):
            cell_radii(read_only(self.atoms), read_only(self.references), self.cell_start, self.cell_refs, radius)
        return radius

    def predict(self, Y, n_jobs=None):
        """The label most of each row's ``n_neighbors`` nearest references
        hold (weighted by rank where :attr:`ranked`).

        Parameters
        ----------
        Y : ndarray of shape (n_samples, n_features)
            Validated data (the features of ``atoms``).
        n_jobs : int or None

        Returns
        -------
        labels : ndarray of int32, shape (n_samples,)
        """
        neighbours, settled = self.neighbours(Y, n_jobs=n_jobs, settle=True)
        return _vote(neighbours, self.labels, None, self.n_clusters, n_jobs, self.ranked, settled)


def _largest_sq_norm(Y):
    """The largest squared norm of a row of ``Y``, in float64 (0 for no rows)."""
    with np.errstate(over="ignore"):
        return float(np.einsum("ij,ij->i", Y, Y, dtype=np.float64).max(initial=0.0))


def _probe(Y, atoms, n_probe, n_jobs):
    """The ``n_probe`` atoms nearest each row of ``Y`` (int64, nearest first;
    ties to the smaller index): the cells that hold its candidates, the
    first of them its own cell."""
    Y = read_only(np.ascontiguousarray(Y))
    out = np.empty((Y.shape[0], min(n_probe, atoms.shape[0])), dtype=np.int64)
    with _config.numba_threads(n_jobs):
        probe_atoms(Y, read_only(np.ascontiguousarray(atoms)), out)
    return out


def _vote(neighbours, labels, own, n_clusters, n_jobs, ranked, settled=None):
    """:func:`fastkds._vote_kernels.vote` into a new array (``own`` None:
    no own votes; ``ranked``: the r-th neighbour counts ``1 / r``); rows
    with ``settled >= 0`` take that label."""
    out = np.empty(neighbours.shape[0], dtype=np.int32)
    own = np.full(out.shape[0], -1, dtype=np.int32) if own is None else own
    with _config.numba_threads(n_jobs):
        vote(neighbours, read_only(labels), own, n_clusters, ranked, out)
    if settled is not None:
        out = np.where(settled >= 0, settled, out).astype(np.int32)
    return out


def fit_label_vote(
    atoms,
    references,
    labels,
    n_neighbors,
    n_clusters,
    n_jobs=None,
    rng=None,
    n_init=10,
    code_gap_ratio=None,
    code_graph_shows=True,
    n_samples=None,
    min_component=0.0,
):
    """The references' labels after their own vote (step 1 of the module's
    description), as a :class:`LabelVote` that labels any point.

    Parameters
    ----------
    atoms, references, n_clusters
        As for :class:`LabelVote`.
    labels : array-like of int
        The references' first labels (the k-means labels of their embedding).
    n_neighbors : int
        q, at most :func:`vote_reach`'s (the model's ``n_neighbors``).
    n_jobs : int or None
    rng : numpy.random.RandomState or None
        Draws the seed of the references' own spectral clustering, where
        they need one (None: seed 0).
    n_init : int
        Its k-means' runs.
    code_gap_ratio : float or None
        The code graph's ``mu_{k+1} / mu_k``
        (:meth:`fastkds.spectral.BipartiteSpectrum.gap_ratio`): where the
        search is exact, the references' graph takes the labels if it shows
        ``n_clusters`` clusters more clearly (None: it does not).
    code_graph_shows : bool
        Whether the code graph has ``n_clusters`` spread modes
        (:meth:`fastkds.spectral.BipartiteSpectrum.shows`). Where it has
        fewer (atoms that hold a few points each, coded by one atom apiece:
        a graph of many small pieces), ``labels`` cannot hold the clusters,
        and the references take their own graph's labels.
    n_samples : int or None
        The points the fit labels, of which the references are all or a
        sample (None: all). The references' rounds search as
        :func:`probe_count` chooses for them alone; the model then searches
        as it chooses for ``n_samples`` points (screened where the
        references are a sample).
    min_component : float, default=0.0
        The clusterer's: a piece of a narrower graph holding fewer
        references than :func:`fastkds.spectral.outlier_share` of them
        (and than :data:`fastkds.spectral.MIN_CLUSTER_POINTS`), or no more
        than q, is no cluster (:func:`_finer_pieces`), and the cut of
        k-means labels as small is not weighed (:func:`_near_random`).

    Returns
    -------
    model : LabelVote
    reference_labels : ndarray of int32
        The references' labels by the vote of their rounds' search: what
        ``model.predict(references)`` gives where they are every point.
    """
    n_neighbors = vote_reach(n_neighbors, references.shape[0], n_clusters)
    n_probe = probe_count(references.shape[0], atoms.shape[0], n_features=references.shape[1])
    # an exact search needs no ranking of the atoms: only each reference's cell
    probes = _probe(references, atoms, 1 if _every_cell(n_probe, atoms.shape[0]) else n_probe, n_jobs)
    model = LabelVote(atoms, references, labels, n_neighbors, n_clusters, cells=probes[:, 0], n_probe=n_probe)
    # a piece of q references or fewer is no cluster at q: its points' q
    # nearest reach outside it whatever the data
    least = max(min_points(outlier_share(min_component, n_clusters), references.shape[0]), n_neighbors + 1)
    reference_labels = _vote_of_references(model, probes, rng, n_init, code_gap_ratio, code_graph_shows, least, n_jobs)
    model.n_probe = probe_count(references.shape[0], atoms.shape[0], n_samples, references.shape[1])
    return model, reference_labels


def _vote_of_references(model, probes, rng, n_init, code_gap_ratio, code_graph_shows, least, n_jobs):
    """The references' rounds of :func:`fit_label_vote` (or their graph's
    labels), which leave their labels in ``model.labels``; returns each
    reference's vote of its q nearest under them. ``least``: the fewest
    references of a narrower graph's piece (:func:`_finer_pieces`), and of
    every label whose cut :func:`_near_random` weighs."""
    q = model.n_neighbors
    # Each reference's q + 1 nearest, itself among them: the first q are
    # predict's neighbours, the q others than itself its graph's edges and
    # its voters in the rounds.
    nearest, _ = model.neighbours(model.references, n_neighbors=q + 1, n_jobs=n_jobs, probes=probes)
    graph, n_pieces, piece = _pieces(model, nearest, probes, n_jobs)
    affinity = _affinity(graph)
    finer, reach = _finer_pieces(nearest, model.n_clusters, least) if n_pieces < model.n_clusters else (None, 0)
    if finer is not None:
        # judged on the graph of VOTE_PIECES_REACH times their own reach,
        # at most q
        width = min(q, _config.VOTE_PIECES_REACH * reach) + 1
        judge = affinity if width == nearest.shape[1] else _affinity(_neighbour_graph(nearest[:, :width]))
        if normalised_cut(judge, finer) < normalised_cut(judge, model.labels):
            return _take_labels(model, finer, nearest, n_jobs)
    # the k-means labels join pieces, and so do the atoms' cells: atoms too
    # coarse for the gap (where every cell lies in one piece, the atoms part
    # the pieces, and a label across them is the code graph's own choice)
    coarse = (
        2 <= n_pieces <= model.n_clusters
        and _joins_pieces(model.labels, piece, model.n_clusters)
        and _joins_pieces(probes[:, 0], piece, model.atoms.shape[0])
    )
    # The references take their graph's labels where the code graph cannot
    # hold the clusters, where its atoms are coarser than a gap, where its
    # k-means labels are nearer random than any partition of that graph, and
    # where an exact search's graph (the kNN graph of the points,
    # SpectralClustering's own) shows k clusters more clearly. Where the
    # k-means labels are its k pieces, either labels give the same
    # partition (the rounds change nothing: each reference's q nearest lie
    # in its piece), so no test is made and no spectrum solved. The
    # spectrum is solved when first asked for, and at most once.
    spectrum = functools.cache(functools.partial(_laplacian_spectrum, affinity, model.n_clusters + 1, piece))
    if not _are_pieces(model.labels, piece, n_pieces, model.n_clusters):
        distrusted = not code_graph_shows or coarse or _near_random(affinity, model.labels, model.n_clusters, least)
        if distrusted or (
            model.exact and code_gap_ratio is not None and _clearer(spectrum(), model.n_clusters, code_gap_ratio)
        ):
            if n_pieces == model.n_clusters:
                fine = piece.astype(np.int32)
            else:
                seed = 0 if rng is None else rng.randint(np.iinfo(np.int32).max)
                fine = _spectral_labels(affinity, spectrum(), model.n_clusters, seed, n_init)
            # Where only the eigengap speaks for the graph, its labels must
            # also part it better: the spectral labels relax its normalised
            # cut, and where the k-means labels cut it less they are the
            # better partition of that same graph (noisy moons, whose
            # spectral labels cut a moon: docs/experiments.md, "The graph's
            # labels where they cut it less").
            if distrusted or normalised_cut(affinity, fine) < normalised_cut(affinity, model.labels):
                return _take_labels(model, fine, nearest, n_jobs)
    current = model.labels
    n_labels = np.unique(current).size
    voters = _others(nearest, q)  # the same in every round
    for ranked in (False, True) if model.ranked else (False,):
        for _ in range(_config.VOTE_MAX_ROUNDS):
            rows = np.flatnonzero(_mixed(probes, model))
            new = current.copy()
            new[rows] = _vote(voters[rows], current, current[rows], model.n_clusters, n_jobs, ranked)
            # a round that erases a label is not taken (module docstring); none adds one
            if np.array_equal(new, current) or np.unique(new).size < n_labels:
                break
            current = model.labels = new
    rows = np.flatnonzero(_mixed(probes, model))
    reference_labels = current.copy()
    reference_labels[rows] = _vote(
        np.ascontiguousarray(nearest[rows, :q]), current, None, model.n_clusters, n_jobs, model.ranked
    )
    return reference_labels


def _take_labels(model, labels, nearest, n_jobs):
    """The references take ``labels`` (their graph's) without rounds;
    returns each one's vote of its q nearest (``nearest``'s first q
    columns) under them."""
    model.labels = labels
    voters = np.ascontiguousarray(nearest[:, : model.n_neighbors])
    return _vote(voters, labels, None, model.n_clusters, n_jobs, model.ranked)


def _finer_pieces(nearest, n_clusters, least):
    """The pieces of the references' graph at the most neighbours below q
    at which it falls into exactly ``n_clusters`` pieces, each of at least
    ``least`` references, as int32 labels, and that count of neighbours;
    ``(None, 0)`` where there is none.

    ``nearest`` holds each reference's q + 1 nearest, itself first. Fewer
    neighbours only split pieces, so the narrower graphs' pieces refine the
    wider ones': the search ends at the first graph of ``n_clusters``
    pieces or more, and a smaller piece there stays one further down.
    """
    for width in range(nearest.shape[1] - 1, 1, -1):  # q - 1 neighbours down to 1
        n_pieces, piece = connected_components(_neighbour_graph(nearest[:, :width]), directed=False)
        if n_pieces < n_clusters:
            continue
        if n_pieces == n_clusters and np.bincount(piece).min() >= least:
            return piece.astype(np.int32), width - 1
        return None, 0
    return None, 0


def normalised_cut(affinity, labels):
    """Shi and Malik's normalised cut of the partition ``labels`` of a
    symmetric ``affinity`` (sparse): over the labels, the weight of the
    edges that leave a label's points over the weight of all edges at them
    (its volume). The smaller, the fewer and weaker the edges between labels.

    Parameters
    ----------
    affinity : scipy.sparse matrix of shape (n, n)
    labels : ndarray of int, shape (n,)

    Returns
    -------
    float
    """
    edges = affinity.tocoo()
    tail, head = labels[edges.row], labels[edges.col]
    n_labels = int(labels.max()) + 1
    volume = np.bincount(tail, weights=edges.data, minlength=n_labels)
    leaving = tail != head
    cut = np.bincount(tail[leaving], weights=edges.data[leaving], minlength=n_labels)
    held = volume > 0
    return float((cut[held] / volume[held]).sum())


def _pieces(model, nearest, probes, n_jobs):
    """The references' graph (each joined to its q nearest others) and its
    connected pieces: ``(graph, n_pieces, piece)``.

    Where it falls into more than ``n_clusters`` pieces, the graph of the
    fewest neighbours from q + 1 to 2q that falls into at most
    ``n_clusters`` instead, if one does. The references are a random sample
    where the points are many, and a sample of a curve leaves gaps wider
    than q neighbours reach (one seed in eight of 300,000 points on two
    concentric circles split a circle in two at q = 10, and was labelled
    half wrong); a piece split off by such a gap joins at a few more
    neighbours, while pieces still apart at 2q are apart in the data.
    """
    graph = _neighbour_graph(nearest)
    n_pieces, piece = connected_components(graph, directed=False)
    q = model.n_neighbors
    if n_pieces <= model.n_clusters:
        return graph, n_pieces, piece
    wider, _ = model.neighbours(model.references, n_neighbors=2 * q + 1, n_jobs=n_jobs, probes=probes)
    for reach in range(q + 2, 2 * q + 2):
        wide_graph = _neighbour_graph(wider[:, :reach])
        wide_pieces, wide_piece = connected_components(wide_graph, directed=False)
        if wide_pieces <= model.n_clusters:
            return wide_graph, wide_pieces, wide_piece
    return graph, n_pieces, piece


def _neighbour_graph(nearest):
    """The references' graph: an edge from each to each of its ``nearest``
    other than itself (-1: none), as a CSR matrix of ones, as
    scikit-learn's ``kneighbors_graph`` gives."""
    n, width = nearest.shape
    tails = np.repeat(np.arange(n), width)
    heads = nearest.ravel()
    edge = (heads >= 0) & (heads != tails)
    return sparse.csr_matrix((np.ones(int(edge.sum())), (tails[edge], heads[edge])), shape=(n, n))


def piece_table(groups, piece, n_groups):
    """``table[g, p]``: how many of the references of group ``g`` (of
    ``n_groups``) lie in piece ``p``. ``groups.shape[0] -
    table.max(axis=1).sum()`` are outside their group's main piece."""
    table = np.zeros((n_groups, piece.max() + 1), dtype=np.int64)
    np.add.at(table, (groups, piece), 1)
    return table


def _are_pieces(labels, piece, n_pieces, n_clusters):
    """Whether ``labels`` part the references exactly as the graph's
    ``n_pieces`` pieces do, and there are ``n_clusters`` of them."""
    if n_pieces != n_clusters:
        return False
    held = piece_table(labels, piece, n_clusters) > 0
    return bool((held.sum(axis=0) == 1).all() and (held.sum(axis=1) == 1).all())


def _near_random(affinity, labels, n_clusters, least):
    """Whether ``labels`` cut the references' symmetric graph ``affinity``
    by more than :data:`fastkds._config.VOTE_RANDOM_CUT` of what labels
    drawn at random would: each edge leaves its label with probability
    ``1 - p_l``, so their normalised cut is ``n_clusters - 1`` in
    expectation, and a partition the graph supports cuts it near 0.

    False where a label holds fewer than ``least`` references (more than
    q): a label of q or fewer is cut by most of its points' q edges
    whatever the data, and its cut tells nothing of the labels.
    """
    if np.bincount(labels, minlength=n_clusters).min() < least:
        return False
    return normalised_cut(affinity, labels) > _config.VOTE_RANDOM_CUT * (n_clusters - 1)


def _joins_pieces(groups, piece, n_groups):
    """Whether ``groups`` (the references' labels, of ``n_groups =
    n_clusters``, or their atoms' cells, of ``n_groups = n_atoms``) put
    more than a stray group of the references outside the piece that holds
    most of their group: more than
    :data:`fastkds._config.VOTE_STRAY_SHARE` of an even split,
    ``n / n_groups``."""
    outside = groups.shape[0] - piece_table(groups, piece, n_groups).max(axis=1).sum()
    return outside > _config.VOTE_STRAY_SHARE * groups.shape[0] / n_groups


def _laplacian_spectrum(affinity, n_vectors, piece):
    """The ``n_vectors`` smallest eigenvalues of the normalised Laplacian of
    the references' graph (made symmetric by :func:`_affinity`; ``piece``
    its connected pieces), ascending, and their eigenvectors (columns):
    ``(mu, vectors)``, or None where no eigensolver converges. One solve
    serves both the eigengap test (:func:`_clearer`) and the graph's
    spectral labels (:func:`_spectral_labels`).

    Each piece contributes an eigenvalue 0, whose eigenvector is known: the
    square roots of its references' degrees. The others come from Lanczos
    (ARPACK) on ``2 I - L`` with those vectors projected out, to a relative
    accuracy of :data:`fastkds._config.VOTE_LANCZOS_TOL` in up to
    :data:`fastkds._config.VOTE_LANCZOS_PRODUCTS` products; where that does
    not converge, from shift-invert ARPACK, whose sparse LU costs little on
    the graphs that defeat Lanczos (low intrinsic dimension, eigenvalues
    crowded near 0) but most of a fit on those of high-dimensional data
    (docs/experiments.md, "One spectrum for the vote").
    """
    from scipy.linalg import eigh
    from scipy.sparse.csgraph import laplacian
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    L = laplacian(affinity, normed=True)
    n = L.shape[0]
    if n <= _config.VOTE_DENSE_EIGEN or n_vectors >= n - 1:  # ARPACK takes fewer than n - 1
        return eigh(L.toarray(), subset_by_index=[0, min(n_vectors, n) - 1])
    v0 = np.random.RandomState(0).uniform(-1.0, 1.0, n)
    n_pieces = int(piece.max()) + 1
    if n_pieces < n_vectors:
        null = np.zeros((n, n_pieces))
        null[np.arange(n), piece] = _root_degrees(affinity)
        null /= np.linalg.norm(null, axis=0)
        shifted = 2.0 * sparse.identity(n, format="csr") - L

        def projected(x):  # x without its part along the pieces' vectors
            return x - null @ (null.T @ x)

        rest = n_vectors - n_pieces
        ncv = min(n - 1, max(2 * rest + 1, 20))
        try:
            theta, vectors = eigsh(
                LinearOperator((n, n), matvec=lambda x: shifted @ projected(x), dtype=np.float64),
                k=rest,
                which="LA",
                ncv=ncv,
                v0=projected(v0),
                maxiter=max(1, _config.VOTE_LANCZOS_PRODUCTS // (ncv - rest)),
                tol=_config.VOTE_LANCZOS_TOL,
            )
        except ArpackNoConvergence:
            pass
        else:
            order = np.argsort(-theta)
            return np.concatenate([np.zeros(n_pieces), 2.0 - theta[order]]), np.hstack([null, vectors[:, order]])
    # shift-invert just below the smallest (all >= 0): L + 1e-3 I is
    # positive definite, pieces or not, and maps them far apart (about
    # scikit-learn's shift, -1, they crowd near 1: ARPACK is slower,
    # docs/experiments.md)
    try:
        mu, vectors = eigsh(L, k=n_vectors, sigma=-1e-3, which="LM", v0=v0)
    except ArpackNoConvergence:
        return None
    order = np.argsort(mu)
    return mu[order], vectors[:, order]


def _root_degrees(affinity):
    """The square roots of the references' degrees in ``affinity``: the
    normalised Laplacian's eigenvector of eigenvalue 0 on each piece, and
    the scale its other eigenvectors are divided by for k-means."""
    return np.sqrt(np.asarray(affinity.sum(axis=1)).ravel())


def _clearer(spectrum, n_clusters, code_gap_ratio):
    """Whether the references' graph shows ``n_clusters`` clusters more
    clearly than the code graph: a larger ratio ``mu_{k+1} / mu_k`` of its
    normalised Laplacian's eigenvalues (``spectrum``, from
    :func:`_laplacian_spectrum`), the ratio by which ``n_clusters="auto"``
    chooses k, than the code graph's ``code_gap_ratio``. False where the
    spectrum is None (no convergence) or holds no (k + 1)-th eigenvalue."""
    if spectrum is None or spectrum[0].size <= n_clusters:
        return False
    return bool(gap_ratios(spectrum[0][: n_clusters + 1])[n_clusters - 1] > code_gap_ratio)


def _affinity(graph):
    """The references' graph made symmetric as scikit-learn's kNN affinity
    makes it: ``(A + A^T) / 2``."""
    return 0.5 * (graph + graph.T)


def _spectral_labels(affinity, spectrum, n_clusters, seed, n_init):
    """SpectralClustering's labels of the references' graph made symmetric
    by :func:`_affinity`: k-means of its normalised Laplacian's first
    ``n_clusters`` eigenvectors (from ``spectrum``, see
    :func:`_laplacian_spectrum`; None: scikit-learn's solver) over the
    square roots of the degrees, as scikit-learn's ``spectral_embedding``
    gives them up to an orthogonal map of the columns, which k-means does
    not see. The k-means restarts on a sample where the references are
    many, as the clusterers' own (:func:`fastkds.spectral.fit_kmeans`)."""
    if spectrum is None:
        from sklearn.manifold import spectral_embedding

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "Graph is not fully connected": we know
            embedding = spectral_embedding(affinity, n_components=n_clusters, random_state=seed, drop_first=False)
    else:
        embedding = spectrum[1][:, :n_clusters] / _root_degrees(affinity)[:, None]
    return fit_kmeans(embedding, n_clusters, n_init, seed).labels_.astype(np.int32)


def _mixed(probes, model):
    """Whether each row's probed cells hold more than one label of ``model``
    (or none); in an exact search, every cell."""
    if model.exact:
        return np.full(probes.shape[0], np.unique(model.labels).size > 1)
    held = model.cell_labels()[probes]
    return (held < 0).any(axis=1) | (held != held[:, :1]).any(axis=1)


def _others(nearest, q):
    """The first ``q`` of each row of ``nearest`` (the references' own
    search, row i that of reference i) other than the reference itself."""
    keep = nearest != np.arange(nearest.shape[0])[:, None]
    return np.ascontiguousarray(np.take_along_axis(nearest, np.argsort(~keep, axis=1, kind="stable"), axis=1)[:, :q])

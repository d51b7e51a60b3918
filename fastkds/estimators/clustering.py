""":class:`KDSClustering`: spectral clustering on the code graph of a :class:`KDS`."""

import os
import time

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .. import _dask, persistence
from .._config import numba_threads
from .._backends import clustering_encoder
from .._validation import (
    auto_n_atoms,
    check_clustering_params,
    check_enough_samples,
    check_n_jobs,
    check_vote_neighbors,
)
from ..diskcodes import check_out_folder
from ..solvers import LastEpoch, SufficientStatistics
from ..spectral import ClusteringResults, HeldCodes, cluster_codes, embedding_rows
from . import _saved
from ._base import (
    KDS_PARAMS_DOC,
    EmbeddingFeaturesMixin,
    SaveMixin,
    SparseInputMixin,
    check_fit_input,
    check_input,
    commit_fit,
    fit_vote,
    is_fitted,
    predict_by_vote,
)
from .kds import KDS, check_fit_params, fit_attributes, fitted_encoder, read_fit_params


@persistence.register
class KDSClustering(SparseInputMixin, SaveMixin, EmbeddingFeaturesMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    __doc__ = (
        """Spectral clustering on the K-Deep Simplex code graph, linear in n.

    Fits :class:`KDS`, then embeds the points through the bipartite
    point-atom graph of their codes (an m x m eigenproblem; docs/algorithm.md),
    normalises the rows and runs k-means (Ng, Jordan, Weiss).

    Parameters
    ----------
    n_clusters : int or "auto", default="auto"
        Number of clusters. ``"auto"`` takes the k in 2..``max_clusters``
        at which the code graph's Laplacian eigenvalues ``1 - lambda`` (over
        the spread modes) grow by the largest factor from the k-th to the
        (k+1)-th: the number of connected components when the graph falls
        apart, and a relative eigengap otherwise (details, and why relative:
        ``fastkds.spectral.BipartiteSpectrum.eigengap``). It finds 2 on
        noisy moons and on concentric circles a third of the radius apart
        (3 a tenth apart, ``make_circles(5000, 0.1)``), 3 on three spirals
        and 4 on four separate blobs. Where clusters come in groups (two
        pairs of close blobs) it takes the level that is more clearly
        separated, which may be the groups. On real data it finds fewer
        than the classes: 2 on MNIST t10k's ten digits and on Salinas-A's
        six classes, 3 on MNIST-5's five (seeds 0-2). Give the number when
        it is known.
    n_atoms : int or "auto", default="auto"
        Number of atoms m. ``"auto"``: about sqrt(n_samples), at least 16
        and 4 per cluster asked for, at most 100 (more when 4 per cluster
        asks for more), never more than the points
        (``fastkds._validation.auto_n_atoms``), or the rows of an ``init``
        array; ``kds_.n_atoms`` holds the number used.
    """
        + KDS_PARAMS_DOC
        + """
    min_component : float, default=0.01
        Connected components of the code graph holding less than this
        fraction of the points are outliers (typically a stray point that
        owns an atom). Each would add an eigenvalue 1 and crowd the real
        clusters out of the leading eigenvectors, so they are left out of the
        eigenproblem and their points join the cluster of the nearest kept
        atom. Likewise, eigenvectors spread over less than this fraction of
        the points (localised modes: a few points hoarding an atom, joined
        to the rest by a faint edge, give an eigenvalue just below 1) do not
        count towards the ``n_clusters_`` eigenvectors of the embedding,
        which extends to the next spread ones (the localised columns stay:
        see ``fastkds.spectral.BipartiteSpectrum.n_columns``). Either
        threshold is at least 5 points (``fastkds.spectral.MIN_CLUSTER_POINTS``),
        which matters on small data only, and at most half an even split,
        ``1 / (2 n_clusters)`` of the points, which matters past 50 clusters
        (``fastkds.spectral.outlier_share``). 0 gives the plain embedding of
        the paper (docs/algorithm.md, "Clustering").
    n_init : int, default=10
        k-means restarts; on more than 10,000 embedded points (100 per
        cluster where that is more) they run on a sample of that many, and
        one run on all of them refines the best (``fastkds.spectral.fit_kmeans``).
    max_clusters : int, default=20
        Largest number of clusters ``"auto"`` may choose (never more than
        the points).
    embedding : {"diffusion", "leading"}, default="diffusion"
        What the k-means clusters. ``"leading"``: the eigenvectors of the
        code graph's k leading modes (Ng, Jordan and Weiss; the paper's,
        which ``fastkds paper`` uses). ``"diffusion"``: those and the next
        k, each weighted by what is left of it relative to the k-th after
        ``t = fastkds.spectral.DIFFUSION_STEPS`` (16) more steps of the
        random walk point -> atom -> point (``(lambda_j / lambda_k)^t``).
        Where clusters touch (the digits of MNIST, two moons joined at a
        tip) the k leading modes mix them and the next ones still tell them
        apart (details: ``fastkds.spectral.BipartiteSpectrum``).
    vote_neighbors : int or None, default=10
        The neighbours' vote (``fastkds.label_vote``): after the k-means on
        the embedding, each point takes the label its ``vote_neighbors``
        nearest points hold most, the r-th nearest counting ``1 / r`` (one
        vote each in the first rounds among the references, which move the
        boundaries, ranked in the last ones). The code graph places a
        boundary between clusters no more finely than its atoms, each
        standing for tens of points; the vote moves it at the points' own
        resolution. The neighbours are searched among at most 100 reference
        points per atom, screened by the atoms (the cells of a point's 4
        nearest atoms, 12 in more than 32 features), so the cost per point does
        not grow with n (among every reference, exactly, where the screen
        would save little: a few thousand points). ``predict`` labels new
        points by the same vote
        (``vote_`` keeps the references). None: the labels of the k-means
        (the paper's, which ``fastkds paper`` uses). 10 is the neighbourhood
        of scikit-learn's ``SpectralClustering``; the vote counts at most
        half an even split of the reference points among the clusters
        (``vote_.n_neighbors``; ``fastkds.label_vote.vote_reach``), so that
        classes of a few points each are not voted away. Where the reference
        points' ``vote_neighbors``-nearest-neighbour graph falls into 2 to
        ``n_clusters`` pieces that the k-means labels join, and the atoms'
        cells too (atoms spaced wider than a gap between clusters, as in
        concentric circles), the labels come from that graph instead: its
        pieces, or its spectral clustering; so too where the search is
        exact and that graph shows ``n_clusters`` clusters more clearly
        than the code graph (a larger eigengap ratio ``mu_{k+1} / mu_k``)
        and its spectral clustering cuts it less than the k-means labels
        do, and where the code graph has fewer than ``n_clusters`` spread modes
        (classes of a few points each, whose atoms code them alone: without
        the vote such a fit raises, naming the modes there are). And where
        a narrower graph (fewer neighbours than ``vote_neighbors``) falls
        into exactly ``n_clusters`` pieces of more than ``vote_neighbors``
        points each that cut a wider graph (of three times their
        neighbours, at most ``vote_neighbors``) less than the k-means labels
        do (a smaller normalised cut), the pieces are the labels: clusters
        joined by a few bridges (two faces of Yale B).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point.
    embedding_ : ndarray of shape (n_samples, n_columns)
        Row-normalised spectral embedding the k-means ran on: the leading
        eigenvectors up to the ``n_clusters_``-th spread one (and, with
        ``embedding="diffusion"``, the next ``n_clusters_`` spread ones,
        weighted), so ``n_columns = spectrum_.n_columns(n_clusters_)``:
        ``n_clusters_`` or twice that, more where localised modes lead (see
        ``min_component``), and every spread mode where there are fewer
        than ``n_clusters_`` (the vote's labels then come from the points'
        own graph).
    eigenvalues_ : ndarray
        Eigenvalues of the atom-side matrix M, decreasing; the multiplicity
        of 1 counts connected components of the code graph.
    n_clusters_ : int
        Number of clusters: ``n_clusters``, or the one ``"auto"`` chose.
    components_ : ndarray of shape (n_atoms, n_features)
        The learned atoms.
    kds_ : KDS
        The fitted dictionary model.
    spectrum_ : fastkds.spectral.BipartiteSpectrum
        The atom-side eigenproblem; ``spectrum_.n_outlier_atoms`` counts the
        atoms left out as outlier components (see ``min_component``).
    kmeans_ : sklearn.cluster.KMeans
        Fitted on the embedding, or on a random sample of 200,000 of its rows
        when there are more (``fastkds._config.KMEANS_SAMPLE``); every
        point is then labelled by its nearest centre (before the vote). Its
        ``init`` holds the centres the restarts found where they ran on a
        sample (see ``n_init``).
    vote_ : fastkds.label_vote.LabelVote or None
        The neighbours' vote: its reference points and their labels (None
        with ``vote_neighbors=None``).
    timings_ : dict
        Seconds spent in each stage of the last fit: ``dictionary``,
        ``encode``, ``embed``, ``kmeans`` and ``vote``. ``encode`` is the
        pass that encodes every point after the dictionary's fit: 0.0 where
        the fit converged with its codes in memory and embedded its last
        epoch's codes instead (docs/algorithm.md, "Dictionary").
    n_features_in_ : int
        Number of features seen during the fit.
    feature_names_in_ : ndarray of str objects, one per feature
        Column names of a DataFrame fitted on, when they are all strings.

    See Also
    --------
    KDS : The dictionary and the codes alone.
    KDSEnsembleClustering : The same on several dictionaries at once.

    Notes
    -----
    :meth:`transform` gives the dense embedding, so pandas and polars
    output (``set_output``) work; its columns are named
    ``"kdsclustering0"``, ... by :meth:`get_feature_names_out`.

    Examples
    --------
    >>> from fastkds import KDSClustering, clustering_accuracy, make_moons
    >>> Y, y = make_moons(5000, random_state=0)
    >>> model = KDSClustering(2, n_atoms=24, lam=5.0, n_iter=15, random_state=0)
    >>> labels = model.fit_predict(Y)
    >>> print(round(clustering_accuracy(y, labels), 2))
    1.0
    >>> KDSClustering(random_state=0).fit(Y).n_clusters_   # n_clusters="auto"
    2
    """
    )

    def __init__(
        self,
        n_clusters="auto",
        *,
        n_atoms="auto",
        lam=1.0,
        n_iter=50,
        step="centred",
        encoder="auto",
        max_epochs=100,
        tol=1e-2,
        init="k-means++",
        presample="auto",
        min_component=0.01,
        n_init=10,
        max_clusters=20,
        embedding="diffusion",
        vote_neighbors=10,
        chunk_size=None,
        random_state=None,
        n_jobs=None,
        verbose=0,
        device="cpu",
        solver="exact",
        learning_rate=1e-3,
        batch_size=1024,
        clip_norm=1e-4,
        shuffle=True,
        train_step=False,
        freeze_step=False,
    ):
        self.n_clusters = n_clusters
        self.n_atoms = n_atoms
        self.lam = lam
        self.n_iter = n_iter
        self.step = step
        self.encoder = encoder
        self.max_epochs = max_epochs
        self.tol = tol
        self.init = init
        self.presample = presample
        self.min_component = min_component
        self.n_init = n_init
        self.max_clusters = max_clusters
        self.embedding = embedding
        self.vote_neighbors = vote_neighbors
        self.chunk_size = chunk_size
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.device = device
        self.solver = solver
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.clip_norm = clip_norm
        self.shuffle = shuffle
        self.train_step = train_step
        self.freeze_step = freeze_step

    def _inner_kds(self, rng, n_samples, n_clusters):
        """The :class:`KDS` this model fits: its shared parameters (``n_atoms``
        resolved for ``n_samples`` points and ``n_clusters``, None for
        "auto"), and a seed from ``rng``."""
        params = {name: getattr(self, name) for name in KDS().get_params(deep=False)}
        if isinstance(self.n_atoms, str):  # "auto", as check_clustering_params makes sure
            # initial atoms given as an array say how many there are
            given = not isinstance(self.init, str) and np.ndim(self.init) == 2
            params["n_atoms"] = np.shape(self.init)[0] if given else auto_n_atoms(n_samples, n_clusters)
        params["encoder"] = clustering_encoder(params["encoder"], n_samples, params["n_atoms"])
        params["random_state"] = rng.randint(np.iinfo(np.int32).max)
        return KDS(**params)

    def fit(self, X, y=None, out=None):
        """Learn the dictionary, embed the points and cluster them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or data read in chunks
            As for :meth:`KDS.fit`: a ``.npy`` path, memmap, h5py or zarr
            dataset, or chunks, for data larger than memory; a scipy sparse
            matrix, read as dense chunks.
        y : Ignored
        out : str, os.PathLike or None, default=None
            A folder for the results that grow with n: ``labels.npy``,
            ``embedding.npy`` and the codes (``codes/``, readable with
            :func:`fastkds.diskcodes.load_codes`). They are written chunk by
            chunk and put in place when the fit succeeds (files of an earlier
            result are replaced, never written into); ``labels_`` and
            ``embedding_`` are then memory-mapped on them. With a ``.npy``
            path as ``X`` no O(n) array is held in memory at any time. A
            folder that holds the input file is refused.

        Returns
        -------
        self : KDSClustering
        """
        params = check_clustering_params(self)
        vote_neighbors = check_vote_neighbors(self)
        n_jobs = check_n_jobs(self.n_jobs)
        dask = _dask.is_dask_array(X)
        if out is not None:
            if dask:
                raise ValueError("out= is not supported for Dask arrays: their results are Dask arrays already")
            out = os.fspath(out)
            check_out_folder(out, X)
        Y, fitted = check_fit_input(self, X)
        check_enough_samples(Y.shape[0], params[0])
        rng = check_random_state(self.random_state)
        kds = self._inner_kds(rng, Y.shape[0], params[0])
        timings = {}
        t0 = time.perf_counter()
        if dask:
            Y = _dask.persist(Y)  # the dictionary's epochs and the encoding read it
        # codes held in memory can be the fit's last epoch's (not files, nor Dask workers')
        last_epoch = LastEpoch(None if dask or out is not None else HeldCodes)
        commit_fit(kds, {**fit_attributes(kds, Y, last_epoch), "n_features_in_": Y.shape[1]})
        timings["dictionary"] = time.perf_counter() - t0
        if dask:
            results = _dask.ClusteringResults(Y, fitted_encoder(kds), n_jobs)
        else:
            results = ClusteringResults(out, Y.shape[0], kds.components_.shape[0], Y.dtype, n_jobs)
        try:
            if last_epoch.codes is not None:  # every point encoded with components_ already: no pass
                results.codes, stats = last_epoch.codes, last_epoch.stats
                timings["encode"] = 0.0
            else:
                t0 = time.perf_counter()
                if dask:
                    stats = results.encode()
                else:
                    stats = SufficientStatistics(kds.components_.shape[0], Y.shape[1])
                    fitted_encoder(kds).run(Y, stats, codes_out=results.codes)
                timings["encode"] = time.perf_counter() - t0
            spectrum, n_clusters, kmeans = cluster_codes(
                stats.XtX, stats.s, kds.components_, results, rng, params, timings, label=vote_neighbors is None
            )
            label_vote = None
            if vote_neighbors is not None:
                t0 = time.perf_counter()

                def embed(rows):
                    return _embedding(spectrum, fitted_encoder(kds).encode(rows), n_clusters, n_jobs)

                label_vote = fit_vote(
                    results,
                    Y,
                    kds.components_,
                    kmeans,
                    embed,
                    vote_neighbors,
                    n_clusters,
                    rng,
                    n_jobs,
                    params[1],
                    self.device,
                    spectrum=spectrum,
                    min_component=params[2],
                )
                timings["vote"] = time.perf_counter() - t0
            labels, embedding = results.commit()
        except BaseException:
            results.abort()
            raise
        # all points' labels, as load restores them (k-means may have seen a sample)
        kmeans.labels_ = np.asarray(labels) if dask else labels
        fitted.update(
            labels_=labels,
            kds_=kds,
            kmeans_=kmeans,
            vote_=label_vote,
            spectrum_=spectrum,
            components_=kds.components_,
            embedding_=embedding,
            eigenvalues_=spectrum.eigenvalues,
            n_clusters_=n_clusters,
            timings_=timings,
        )
        commit_fit(self, fitted)
        return self

    def transform(self, X):
        """Row-normalised spectral embedding of ``X`` (n_samples x ``spectrum_.n_columns(n_clusters_)``)."""
        check_is_fitted(self)
        if _dask.is_dask_array(X):
            return _dask.transform_clustering(self, X)
        Y = check_input(self, X, reset=False)
        return _embedding(self.spectrum_, fitted_encoder(self.kds_).encode(Y), self.n_clusters_, self.n_jobs)

    def predict(self, X):
        """Cluster labels of new points: the neighbours' vote among ``vote_``'s
        references, or (``vote_neighbors=None``) encode, embed, nearest
        k-means centre. On the training points it gives ``labels_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if _dask.is_dask_array(X):
            return _dask.predict_clustering(self, X)
        if self.vote_ is not None:
            Y = check_input(self, X, reset=False)
            return predict_by_vote(self.vote_, Y, check_n_jobs(self.n_jobs), self.device)
        return self.kmeans_.predict(self.transform(X))

    # -- model files (fastkds.persistence) --------------------------------------

    # Fitted scalars in a model file (JSON); the arrays are _saved.ARRAYS.
    _SAVED_SCALARS = ("n_features_in_", "n_clusters_", "timings_")

    def _to_entries(self, writer, prefix):
        writer.params(prefix, self)
        if not is_fitted(self):
            return
        persistence.require(isinstance(self.kds_, KDS) and is_fitted(self.kds_), "kds_ must be a fitted KDS")
        writer.attributes(prefix, self, _saved.ARRAYS, self._SAVED_SCALARS)
        self.kds_._to_entries(writer, f"{prefix}kds_.")
        _saved.write_spectral_step(writer, prefix, self)

    @classmethod
    def _from_entries(cls, reader, prefix):
        # files written before the embedding was a parameter clustered the
        # leading one, and those before the vote had none
        model = cls(**{"embedding": "leading", "vote_neighbors": None, **read_fit_params(reader, prefix, cls)})
        fitted = reader.has(f"{prefix}attributes")
        if fitted:
            vars(model).update(reader.attributes(prefix, _saved.ARRAYS, cls._SAVED_SCALARS))
        check_clustering_params(model)
        check_vote_neighbors(model)
        n_atoms = None if isinstance(model.n_atoms, str) else model.n_atoms  # "auto", resolved by a fit
        check_fit_params(model, n_atoms, model.n_features_in_ if fitted else None)
        if not fitted:
            return model
        model.kds_ = KDS._from_entries(reader, f"{prefix}kds_.", fitted=True)
        persistence.require(
            isinstance(model.timings_, dict), f"{prefix}timings_ must be a dict, got {type(model.timings_).__name__}"
        )
        model.components_ = model.kds_.components_  # shared, as after fit
        _saved.read_spectral_step(reader, prefix, model, [model.kds_])
        return model


def _embedding(spectrum, codes, n_clusters, n_jobs=None):
    """The row-normalised spectral embedding of ``codes`` (``transform``'s),
    on ``n_jobs`` Numba threads (None: all)."""
    with numba_threads(check_n_jobs(n_jobs)):
        return embedding_rows(codes, spectrum.projection(n_clusters))

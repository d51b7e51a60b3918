"""Spectral clustering on the joint code graph of several KDS dictionaries.

One KDS dictionary depends on its random initial atoms, and on small or hard
data so does the clustering: on two Yale B faces (128 images, m = 64) one
seed in five scores 1.0 and the others misplace 1-3 of the darkest images,
different ones from seed to seed (docs/experiments.md). Fitting r
dictionaries from independent initial atoms and coding every point in each
gives r bipartite graphs on the same points; side by side, with the codes
scaled by 1/r so that every point still has degree 1, they form one
bipartite graph with r*m atoms. Its spectral embedding (unchanged;
docs/algorithm.md, "Clustering") is that of the point-point affinity ``Z Z^T``, with
``Z = X diag(s)^(-1/2)``, and for the joint graph that affinity is the mean
of the r dictionaries' own: a point misplaced by one dictionary is held in
place by the others. Time and memory stay linear in n: r fits, r
encodings, and an (r m) x (r m) eigenproblem.
"""

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted

from .. import _config, _dask, persistence, warmstart
from .._backends import clustering_encoder
from .._config import effective_n_jobs
from .._validation import (
    auto_n_atoms,
    check_clustering_params,
    check_enough_samples,
    check_n_jobs,
    check_positive_int,
    check_vote_neighbors,
)
from ..exceptions import warn
from ..solvers import SufficientStatistics
from ..sources import ChunkSource
from ..spectral import ClusteringResults, cluster_codes
from . import _saved
from ._base import (
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
from .clustering import KDSClustering, _embedding
from .kds import KDS, fit_attributes, fitted_encoder


def _fit_dictionary(kds, Y, threads=None, span=None):
    """Fit one unfitted clone on validated ``Y``; return it and its warnings.

    The fit is :meth:`KDS.fit`'s, ending on its last epoch's update, not
    on the dictionary that epoch encoded with as
    :class:`~fastkds.KDSClustering`'s does: the ensemble encodes the points
    again either way (docs/algorithm.md, "Dictionary").

    With ``threads`` given it runs in a joblib worker process: the clone's
    kernels run on that many Numba threads (only if its own ``n_jobs`` is
    None; restored afterwards, so that encoding back in the caller's
    process uses all its threads), and its warnings are recorded as
    ``(message, category)`` pairs for the caller to raise, where the
    caller's warning filters apply. Otherwise they are raised as usual and
    the list is empty. ``span``: ``Y``'s :class:`~fastkds.warmstart.DataSpan`,
    one for all the dictionaries (see :func:`~fastkds.estimators.kds.fit_attributes`).
    """
    if threads is None:
        fitted = fit_attributes(kds, Y, span=span)
        caught = []
    else:
        n_jobs = kds.n_jobs
        if n_jobs is None:
            kds.n_jobs = threads
        try:
            with warnings.catch_warnings(record=True) as records:
                warnings.simplefilter("always")
                fitted = fit_attributes(kds, Y, span=span)
        finally:
            kds.n_jobs = n_jobs
        caught = [(str(w.message), w.category) for w in records]
    commit_fit(kds, {**fitted, "n_features_in_": Y.shape[1]})
    return kds, caught


@persistence.register
class KDSEnsembleClustering(
    SparseInputMixin, SaveMixin, EmbeddingFeaturesMixin, ClusterMixin, TransformerMixin, BaseEstimator
):
    """Spectral clustering on the codes of several independently seeded KDS
    dictionaries, joined in one bipartite graph.

    Fits ``n_estimators`` clones of ``estimator``, each with its own random
    initial atoms (``random_state`` drawn from this model's), codes every
    point in each dictionary, and places the codes side by side, scaled by
    ``1 / n_estimators``: the rows stay on the probability simplex, now over
    ``n_estimators * n_atoms`` atoms. The points are then embedded and
    clustered exactly as in :class:`~fastkds.KDSClustering`.
    The result depends far less on the draw of initial atoms than one
    dictionary's does; it costs ``n_estimators`` fits.

    Parameters
    ----------
    n_clusters : int or "auto", default="auto"
        Number of clusters; ``"auto"`` chooses it from the joint code
        graph's spectrum as :class:`~fastkds.KDSClustering` does.
    estimator : KDS or None, default=None
        The dictionary model to clone, with its settings (``n_atoms``,
        ``lam``, ``n_iter``, ``solver``, ...); its ``random_state`` is
        replaced in each clone. None means the dictionary
        :class:`~fastkds.KDSClustering` fits with its defaults: ``n_atoms``
        by its ``"auto"`` rule for the points and ``n_clusters``
        (``fastkds._validation.auto_n_atoms``), its ``tol`` (1e-2), and
        KDS's defaults otherwise. With ``verbose=1`` each dictionary's fit
        shows its own progress bar.
    n_estimators : int, default=5
        Number of dictionaries.
    min_component : float, default=0.01
        As in :class:`~fastkds.KDSClustering`: components and eigenvectors of
        the joint code graph spread over less than this fraction of the
        points (and fewer than 5 points; at most half an even split, past
        50 clusters) do not count as clusters.
    n_init : int, default=10
        k-means restarts; on more than 10,000 embedded points (100 per
        cluster where that is more) they run on a sample of that many, and
        one run on all of them refines the best (``fastkds.spectral.fit_kmeans``).
    max_clusters : int, default=20
        Largest number of clusters ``"auto"`` may choose (never more than
        the points).
    embedding : {"diffusion", "leading"}, default="diffusion"
        As in :class:`~fastkds.KDSClustering`: the joint code graph's k
        leading modes, or those and the next k, weighted.
    vote_neighbors : int or None, default=10
        As in :class:`~fastkds.KDSClustering`: each point then takes the
        label its ``vote_neighbors`` nearest points hold most (ranked
        votes), searched
        among reference points screened by all the dictionaries' atoms
        (on all of Numba's threads). None: the k-means labels.
    random_state : int, RandomState instance or None, default=None
        Seeds the dictionaries' initial atoms and k-means.
    n_jobs : int or None, default=None
        Number of dictionaries fitted at once, each in its own process
        (joblib's ``loky`` backend): processes, where the ``n_jobs`` of
        :class:`~fastkds.KDS` counts threads. None means 1, as in
        scikit-learn (one fit at a time, its kernels on all threads); -1
        means as many as Numba has threads (by default one per CPU); never
        more than ``n_estimators``. The threads are shared out: a clone whose own
        ``n_jobs`` is None runs its kernels on ``threads // n_jobs`` of them
        while it fits. The dictionaries are the same whatever ``n_jobs``;
        only the fit is faster, most where one fit cannot use all the cores
        (small mini-batches, such as the paper's Yale B training at batch
        1). Data read in chunks are fitted one dictionary at a time.

    Attributes
    ----------
    estimators_ : list of KDS
        The fitted dictionary models.
    components_ : ndarray of shape (n_estimators * n_atoms, n_features)
        Their atoms, stacked in the order of ``estimators_``.
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point.
    embedding_ : ndarray of shape (n_samples, n_columns)
        Row-normalised spectral embedding the k-means ran on.
    eigenvalues_ : ndarray
        Eigenvalues of the joint atom-side matrix M, decreasing.
    n_clusters_ : int
        Number of clusters: ``n_clusters``, or the one ``"auto"`` chose.
    spectrum_ : fastkds.spectral.BipartiteSpectrum
        The joint atom-side eigenproblem.
    kmeans_ : sklearn.cluster.KMeans
        Fitted on the embedding.
    vote_ : fastkds.label_vote.LabelVote or None
        The neighbours' vote: its reference points and their labels.
    n_features_in_ : int
        Number of features seen during the fit.
    feature_names_in_ : ndarray of str objects, one per feature
        Column names of a DataFrame fitted on, when they are all strings.

    See Also
    --------
    KDSClustering : the same with one dictionary.

    Examples
    --------
    >>> from fastkds import KDS, KDSEnsembleClustering, make_moons
    >>> Y, y = make_moons(2000, random_state=0)
    >>> model = KDSEnsembleClustering(
    ...     2, estimator=KDS(n_atoms=24, lam=5.0, n_iter=30), n_estimators=3, random_state=0)
    >>> labels = model.fit_predict(Y)
    >>> model.components_.shape          # 3 dictionaries of 24 atoms
    (72, 2)
    """

    def __init__(
        self,
        n_clusters="auto",
        *,
        estimator=None,
        n_estimators=5,
        min_component=0.01,
        n_init=10,
        max_clusters=20,
        embedding="diffusion",
        vote_neighbors=10,
        random_state=None,
        n_jobs=None,
    ):
        self.n_clusters = n_clusters
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.min_component = min_component
        self.n_init = n_init
        self.max_clusters = max_clusters
        self.embedding = embedding
        self.vote_neighbors = vote_neighbors
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _validated_params(self):
        """The parameters fit reads, validated: the spectral step's
        ``(k, n_init, min_component, max_clusters, embedding)`` (as
        :func:`fastkds._validation.check_clustering_params` returns them),
        ``n_estimators`` and ``n_jobs``. The template ``estimator`` is
        checked to be a KDS or None; its own parameters, by its fit."""
        spectral_params = check_clustering_params(self)
        check_vote_neighbors(self)
        if self.estimator is not None and not isinstance(self.estimator, KDS):
            raise TypeError(f"estimator must be a fastkds.KDS or None, got {type(self.estimator).__name__}")
        return spectral_params, check_positive_int(self.n_estimators, "n_estimators"), check_n_jobs(self.n_jobs)

    @staticmethod
    def _default_estimator(n_samples, n_clusters):
        """The template for ``estimator=None``: the KDS that
        ``KDSClustering(n_clusters)`` fits on ``n_samples`` points (``n_clusters``
        None for "auto"), so that one dictionary of the ensemble is one of
        KDSClustering's and the two models' defaults compare."""
        return KDS(n_atoms=auto_n_atoms(n_samples, n_clusters), tol=KDSClustering().tol)

    def _joint_codes(self, Y, estimators=None):
        """Codes of validated ``Y`` in every dictionary (``estimators_`` by
        default), side by side, scaled by 1/r."""
        estimators = self.estimators_ if estimators is None else estimators
        joint = sp.hstack([fitted_encoder(kds).encode(Y) for kds in estimators], format="csr")
        joint.data *= 1.0 / len(estimators)  # in place: the codes are the largest object
        return joint

    def fit(self, X, y=None):
        """Fit the dictionaries, embed the points and cluster them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or data read in chunks
            As for :meth:`fastkds.KDS.fit`; data read in chunks are read
            again for every dictionary's fit and codes. Dask arrays are not
            supported here.
        y : Ignored

        Returns
        -------
        self : KDSEnsembleClustering
        """
        if _dask.is_dask_array(X):
            raise TypeError(
                "KDSEnsembleClustering does not take Dask arrays; fit KDSClustering on them, or compute the array first"
            )
        spectral_params, n_estimators, n_jobs = self._validated_params()
        Y, fitted = check_fit_input(self, X)
        check_enough_samples(Y.shape[0], spectral_params[0])
        rng = check_random_state(self.random_state)
        base = self._default_estimator(Y.shape[0], spectral_params[0]) if self.estimator is None else self.estimator
        seeds = [rng.randint(np.iinfo(np.int32).max) for _ in range(n_estimators)]
        # the joint code graph's atoms are every dictionary's
        encoder = clustering_encoder(base.encoder, Y.shape[0], n_estimators * base.n_atoms)
        clones = [clone(base).set_params(encoder=encoder, random_state=seed) for seed in seeds]
        # many more features than points: one span for every dictionary
        span = warmstart.data_span(Y, base._validated_params(), base.init)
        n_workers = 1 if n_jobs is None else min(n_estimators, effective_n_jobs(n_jobs))
        if n_workers == 1 or isinstance(Y, ChunkSource):
            results = [_fit_dictionary(kds, Y, span=span) for kds in clones]
        else:
            threads = max(1, effective_n_jobs(None) // n_workers)
            results = Parallel(n_jobs=n_workers, backend="loky")(
                delayed(_fit_dictionary)(kds, Y, threads, span) for kds in clones
            )
        estimators = [kds for kds, _ in results]
        for message, category in (w for _, caught in results for w in caught):
            warn(message, category)
        components = np.vstack([kds.components_ for kds in estimators])

        codes = self._joint_codes(Y, estimators)
        # X^T X and X^T 1 by the fit's own kernel (float64 sums, on every
        # core), not scipy's sparse product (3.6 s against 0.27 s for the
        # codes of 3 x 10^5 moons in five dictionaries)
        stats = SufficientStatistics(components.shape[0], 0)
        with _config.numba_threads(None):
            stats.add_chunk(
                codes.indptr.astype(np.int64),
                codes.indices.astype(np.int32, copy=False),
                codes.data,
                np.empty((codes.shape[0], 0), dtype=codes.dtype),
                np.zeros(codes.shape[0]),
            )
        XtX, s = stats.XtX, stats.s
        results = ClusteringResults(None, codes.shape[0], components.shape[0], codes.dtype)
        for start in range(0, codes.shape[0], _config.LABEL_CHUNK):
            rows = codes[start : start + _config.LABEL_CHUNK]
            results.codes.append((rows.indptr, rows.indices, rows.data))
        del codes, rows
        vote_neighbors = self.vote_neighbors
        spectrum, n_clusters, kmeans = cluster_codes(
            XtX, s, components, results, rng, spectral_params, label=vote_neighbors is None
        )
        label_vote = None
        if vote_neighbors is not None:

            def embed(rows):
                return _embedding(spectrum, self._joint_codes(rows, estimators), n_clusters)

            label_vote = fit_vote(
                results,
                Y,
                components,
                kmeans,
                embed,
                vote_neighbors,
                n_clusters,
                rng,
                None,
                spectral_params[1],
                spectrum=spectrum,
                min_component=spectral_params[2],
            )
        labels, embedding = results.commit()
        kmeans.labels_ = labels  # all points', as after KDSClustering.fit
        fitted.update(
            estimators_=estimators,
            components_=components,
            kmeans_=kmeans,
            vote_=label_vote,
            labels_=labels,
            spectrum_=spectrum,
            embedding_=embedding,
            eigenvalues_=spectrum.eigenvalues,
            n_clusters_=n_clusters,
        )
        commit_fit(self, fitted)
        return self

    def transform(self, X):
        """Row-normalised spectral embedding of ``X`` from its codes in every dictionary.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        embedding : ndarray of shape (n_samples, n_columns)
            ``n_columns = spectrum_.n_columns(n_clusters_)``, as for ``embedding_``.
        """
        check_is_fitted(self)
        _refuse_dask(X)
        Y = check_input(self, X, reset=False)
        if isinstance(Y, ChunkSource) and not Y.reiterable and len(self.estimators_) > 1:
            raise TypeError(
                f"transform reads the data once per dictionary ({len(self.estimators_)} times), but X is a "
                "one-shot iterator: pass a list of chunks or a callable returning a fresh iterator"
            )
        return _embedding(self.spectrum_, self._joint_codes(Y), self.n_clusters_)

    def predict(self, X):
        """Cluster labels of new points: the neighbours' vote among ``vote_``'s
        references, or (``vote_neighbors=None``) encode in every dictionary,
        embed, nearest k-means centre. On the training points it gives ``labels_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if self.vote_ is None:
            return self.kmeans_.predict(self.transform(X))
        _refuse_dask(X)
        return predict_by_vote(self.vote_, check_input(self, X, reset=False), None)

    # -- model files (fastkds.persistence) --------------------------------------

    # Fitted scalars in a model file (JSON); the arrays are _saved.ARRAYS.
    _SAVED_SCALARS = ("n_features_in_", "n_clusters_")

    def _to_entries(self, writer, prefix):
        writer.params(prefix, self)
        if not is_fitted(self):
            return
        # load reads n_estimators dictionaries
        persistence.require(
            len(self.estimators_) == self.n_estimators,
            f"{len(self.estimators_)} dictionaries in estimators_, but n_estimators={self.n_estimators}",
        )
        writer.attributes(prefix, self, _saved.ARRAYS, self._SAVED_SCALARS)
        for i, kds in enumerate(self.estimators_):
            persistence.require(isinstance(kds, KDS) and is_fitted(kds), f"estimators_.{i} must be a fitted KDS")
            kds._to_entries(writer, f"{prefix}estimators_.{i}.")
        _saved.write_spectral_step(writer, prefix, self)

    @classmethod
    def _from_entries(cls, reader, prefix):
        # files written before the embedding was a parameter clustered the
        # leading one, and those before the vote had none
        model = cls(
            **{
                "embedding": "leading",
                "vote_neighbors": None,
                **reader.params(prefix, cls, templates={"estimator": KDS}),
            }
        )
        fitted = reader.has(f"{prefix}attributes")
        if fitted:
            vars(model).update(reader.attributes(prefix, _saved.ARRAYS, cls._SAVED_SCALARS))
        _, n_estimators, _ = model._validated_params()
        check_random_state(model.random_state)
        if not fitted:
            return model
        # a fitted ensemble holds n_estimators dictionaries; a missing one is named by the reader
        model.estimators_ = [
            KDS._from_entries(reader, f"{prefix}estimators_.{i}.", fitted=True) for i in range(n_estimators)
        ]
        features = {kds.n_features_in_ for kds in model.estimators_}
        persistence.require(len(features) == 1, f"the dictionaries have different feature counts {sorted(features)}")
        model.components_ = np.vstack([kds.components_ for kds in model.estimators_])
        _saved.read_spectral_step(reader, prefix, model, model.estimators_)
        return model


def _refuse_dask(X):
    """The ensemble's ``transform`` and ``predict`` take no Dask array."""
    if _dask.is_dask_array(X):
        raise TypeError("KDSEnsembleClustering does not take Dask arrays; compute the array first")

"""What the estimators share: input checks, the all-or-nothing commit of a
fit, ``save`` and the hooks of model files, the clusterers' feature names,
and the docstring of KDS's parameters that KDSClustering repeats."""

import copy
import functools

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassNamePrefixFeaturesOutMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import _config, _dask, persistence
from .._backends import runs_on_cuda
from ..exceptions import FewerClustersWarning, warn
from .._validation import (
    float_dtypes,
    check_nonneg_float,
    check_positive_int,
)
from ..label_vote import fit_label_vote, reference_rows
from ..sources import ChunkSource, as_source, is_chunked_input, refuse_empty, source_chunks

KDS_PARAMS_DOC = """
    lam : float, default=1.0
        Locality weight lambda: how strongly a point prefers nearby atoms.
        Larger values give sparser, more local codes.
    n_iter : int, default=50
        Iterations T of the accelerated encoder per point (the paper's
        unrolled layers). The exact encoder (``encoder="active-set"``, which
        ``"auto"`` takes on the CPU at ``lam <= 1``) needs none: they serve
        only the rare points it hands over (affinely dependent atoms). Not
        the bound of the fitted ``n_iter_``, which counts epochs (bounded
        by ``max_epochs``): the name is the paper's T, kept for the command
        line, saved models and published settings.
    encoder : {"auto", "apg", "active-set"}, default="auto"
        How the codes are found. ``"active-set"``: the exact codes, per
        point, by an active-set method on the few atoms of the support,
        checked against the optimality (KKT) conditions for all atoms; its
        cost is close to one product ``Y W^T`` and does not grow with
        ``n_iter``. ``"apg"``: ``n_iter`` steps of the paper's accelerated
        projected gradient from x = 0, the paper's encoder (``fastkds
        paper`` and ``fastkds demo`` use it). On ill-conditioned problems
        they stop short of the optimum (MNIST-5, 500 atoms: T=100 of the
        paper's steps leave codes 0.11 from optimal in the median), and the
        codes they give are longer and smoother than the optimal ones,
        which links more atoms in the code graph. ``"auto"``: the exact
        codes on the CPU where ``lam <= 1``; ``"apg"`` past it (most exact
        codes then hold one atom, too few links for the code graph), on
        the GPU (whose exact codes, one point per warp, are yet to be timed
        there) and with ``solver="unrolled"``, the only encoder it runs
        (``fastkds._backends.resolve_encoder``), and in the clusterers
        below 60 points an atom (``fastkds._backends.clustering_encoder``).
        At the clusterers' defaults the exact codes cluster the project's
        sets about as well as the accelerated steps, in a fraction of the
        time (docs/algorithm.md, "Exact codes by default").
    step : {"centred", "paper"}, default="centred"
        The accelerated encoder's step. ``"centred"``: the encoder runs on
        the points and atoms less the mean atom, with step ``1 /
        sigma_max(W - mean atom)^2``. Codes sum to 1, so the objective does
        not change when the data and the atoms move together: the same
        optimum, and codes that do not depend on where the data sit. Atoms
        far out from the rest (beyond Tukey's far-out fence of their
        distances from the mean atom) do not set that step for the points
        that provably cannot use them: those are encoded on the other atoms
        at their own step (docs/algorithm.md, "Far atoms").
        ``"paper"``: ``1 / sigma_max(W)^2``,
        which shrinks as the data move away from the origin (a warning says
        when T steps may then stop short); ``fastkds paper`` uses it to
        reproduce the paper as written. ``solver="unrolled"`` trains the
        paper's encoder and always uses its step.
    max_epochs : int, default=100
        Maximum number of alternating-minimisation epochs (passes over the data).
    tol : float, default=1e-4 (KDS), 1e-2 (KDSClustering)
        Stop at the first epoch whose mean objective is not below the lowest
        of the earlier epochs by more than this fraction of it (with codes
        that stop short of the optimum, the objective need not fall every
        epoch); 0 runs ``max_epochs`` epochs. KDSClustering stops sooner by
        default: its labels, read from the code graph, stop changing before
        the objective does (docs/experiments.md, "When to stop").
    init : {"k-means++", "random"} or array of shape (n_atoms, n_features), default="k-means++"
        Initial dictionary. Both named choices pick a random subset of the
        data points: ``"random"`` uniformly (the paper's choice), ``"k-means++"``
        with scikit-learn's D^2 seeding, which spreads the atoms over the data
        and avoids local minima where one region hoards the atoms. An array
        gives the atoms directly.
    presample : "auto", int or None, default="auto"
        Warm start for large data: learn first on a random subsample of this
        many points, then refine on all of them with the same stopping rule.
        The result is still a fit to all the data; the full passes start from
        a dictionary already fitted to the subsample. ``"auto"`` uses
        ``max(20000, 200 * n_atoms)`` points when n is at least five times
        that, else no subsample; ``None`` never subsamples. For much larger
        n the warm start is a ladder of nested subsamples, each ten times
        the last (while at most n / 5 points and 256 MiB), so the slow
        last epochs of a fit run on the smaller samples and only a few run
        on all points: the cost stays linear in n.
    chunk_size : int or None, default=None
        Points encoded at once. ``None`` picks it from a 64 MiB budget, so
        working memory does not grow with n.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial dictionary (and, for clustering, k-means).
    n_jobs : int or None, default=None
        Threads of the Numba kernels (k-means++ seeding, encoding,
        statistics) in this process:
        ``None`` or -1 means all of Numba's threads (``NUMBA_NUM_THREADS``,
        one per core by default), -2 all but one, and so on. Unlike
        scikit-learn's ``n_jobs=None`` (one job), the default uses every
        core, as scikit-learn's OpenMP-parallel ``KMeans`` does. Results do
        not depend on it. The clusterers' k-means of the embedding runs on
        one thread whatever it says: its problems are small, and its
        OpenMP threads would take the cores from the kernels'.
    verbose : bool or int, default=0
        Show a progress bar over the epochs when true or > 0.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where encoding, CSR assembly and the statistics run: the Numba CPU
        kernels, or their numba.cuda twins on a GPU. ``"cuda"`` raises a
        RuntimeError naming the cause when no GPU can be used; ``"auto"``
        uses one when available and otherwise warns once and runs on the CPU.
    solver : {"exact", "unrolled"}, default="exact"
        How the dictionary is learned. ``"exact"``: alternating minimisation
        with the closed-form dictionary step (``max_epochs``, ``tol``,
        ``presample`` apply). ``"unrolled"``: the paper's method, Adam on the
        mean objective of the T-step encoder's codes, backpropagated through
        the unrolled encoder on mini-batches; it runs exactly ``max_epochs``
        epochs (the paper: 1000 for moons, 30 for MNIST-5) and ignores
        ``tol`` and ``presample``. See docs/unrolled.md.
    learning_rate : float, default=1e-3
        Adam's learning rate (``solver="unrolled"``; the paper: 1e-3).
    batch_size : int, default=1024
        Points per mini-batch (``solver="unrolled"``; the paper: 1024 for
        MNIST-5, 10000 for moons).
    clip_norm : float, default=1e-4
        Gradients are rescaled to at most this norm before each Adam step
        (``solver="unrolled"``; the paper: 1e-4).
    shuffle : bool, default=True
        Shuffle the points every epoch (``solver="unrolled"``).
    train_step : bool, default=False
        Learn the encoder step along with the atoms (``solver="unrolled"``).
        The step stays below ``1.5 / sigma_max(W)^2`` (a sigmoid bound), so it
        cannot grow into the range where the encoder's codes collapse to
        single atoms. Otherwise the step is ``1 / sigma_max(W)^2``.
    freeze_step : bool, default=False
        Hold the step at ``1 / sigma_max(W_0)^2`` of the initial dictionary
        through training and encoding, as the paper's released code does
        with a fixed step (``solver="unrolled"``, ``train_step=False``). By
        default the step follows the current dictionary, as the encoder's
        convergence needs.
"""


def validate_array(estimator, X, *, reset):
    """``X`` as one in-memory array, by scikit-learn's ``validate_data``
    (which sets ``n_features_in_`` where ``reset``); a sparse ``X`` (a
    ``partial_fit`` batch) made dense, as the kernels read dense rows."""
    Y = validate_data(estimator, X, accept_sparse="csr", dtype=float_dtypes(X), order="C", reset=reset)
    return Y.toarray() if sp.issparse(Y) else Y


def check_input(estimator, X, *, reset, passes=1):
    """``X`` validated: an in-memory array, or a :class:`ChunkSource` for data
    read chunk by chunk (``.npy`` path, memmap, h5py/zarr dataset, scipy
    sparse matrix, iterable of chunks). ``passes > 1`` requires a source that can be read again.
    ``reset=True`` sets ``n_features_in_`` (and ``feature_names_in_``) on
    ``estimator``: a fit calls it through :func:`check_fit_input`."""
    if not is_chunked_input(X):
        return validate_array(estimator, X, reset=reset)
    source = as_source(X)
    refuse_empty(source.shape, rows=False)  # the rows after the count below
    if passes > 1 and not source.reiterable:
        raise TypeError(
            "fitting reads the data several times, but X is a one-shot iterator: pass a "
            "list of chunks or a callable returning a fresh iterator, or call partial_fit "
            "on each chunk"
        )
    if reset:
        estimator.n_features_in_ = source.n_features
        estimator.__dict__.pop("feature_names_in_", None)
    elif source.n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {source.n_features} features, but {type(estimator).__name__} "
            f"is expecting {estimator.n_features_in_} features as input."
        )
    if passes > 1:
        source.count()
    refuse_empty(source.shape)  # rows known without a pass (a file, a dataset) or counted
    return source


#: Fitted state that is not named like a fitted attribute (``name_``).
PRIVATE_FITTED = ("_stream_state",)


def is_fitted_attribute(name):
    return (name.endswith("_") and not name.startswith("__")) or name in PRIVATE_FITTED


def check_fit_input(estimator, X, *, passes=2, chunked=True):
    """``X`` validated for a fit, and the feature attributes the fit will set.

    ``chunked=False`` accepts in-memory arrays only (``partial_fit``). A
    Dask array is checked by :func:`fastkds._dask.check_dask_array` and
    stays lazy.
    Validation runs on a shallow copy of ``estimator``, which is left as it
    was: a fit that fails later must not have changed ``n_features_in_``.

    Returns
    -------
    Y : ndarray or ChunkSource
    features : dict
        ``n_features_in_``, and ``feature_names_in_`` for a DataFrame.
    """
    if chunked and _dask.is_dask_array(X):
        Y = _dask.check_dask_array(X)
        _dask.check_device(estimator.device)
        return Y, {"n_features_in_": Y.shape[1]}
    probe = copy.copy(estimator)
    if chunked:
        Y = check_input(probe, X, reset=True, passes=passes)
    else:
        Y = validate_array(probe, X, reset=True)
    names = ("n_features_in_", "feature_names_in_")
    return Y, {name: vars(probe)[name] for name in names if name in vars(probe)}


def commit_fit(estimator, fitted):
    """Replace the fitted state of ``estimator`` by ``fitted`` (name -> value).

    A fit computes into locals and calls this last, so an error or a
    ``KeyboardInterrupt`` before it leaves the estimator as it was.
    Attributes of an earlier fit that ``fitted`` lacks (``feature_names_in_``,
    ``_stream_state``) are dropped; parameters and other state are kept. The
    new ``__dict__`` is assigned in one step, never half updated.
    """
    state = {name: value for name, value in vars(estimator).items() if not is_fitted_attribute(name)}
    state.update(fitted)
    estimator.__dict__ = state


def take_rows(Y, indices):
    """Rows ``indices`` (sorted) of an array or a :class:`ChunkSource`, in memory."""
    return Y.take(indices) if isinstance(Y, ChunkSource) else Y[indices]


def fit_vote(
    results,
    Y,
    atoms,
    kmeans,
    embed,
    n_neighbors,
    n_clusters,
    rng,
    n_jobs,
    n_init,
    device="cpu",
    spectrum=None,
    min_component=0.0,
):
    """The neighbours' vote of a clusterer's fit (:mod:`fastkds.label_vote`):
    fit it, and write every point's label into ``results``.

    Parameters
    ----------
    results : fastkds.spectral.ClusteringResults
        Or the Dask backend's.
    Y : ndarray, ChunkSource or dask.array.Array
        The validated data of the fit.
    atoms : ndarray of shape (n_atoms, n_features)
        The dictionary (or dictionaries, stacked) that screens the search.
    kmeans : sklearn.cluster.KMeans
        The k-means of the embedding, whose labels the references start from
        (where every point is a reference, read from ``results``' embedding).
    embed : callable
        Rows -> their row-normalised embedding (the clusterer's
        ``transform``), for a sample of references.
    n_neighbors, n_clusters : int
    rng : numpy.random.RandomState
        Draws the references where they are a sample.
    n_jobs : int or None
    n_init : int
        The clusterer's k-means restarts, for the references' own spectral
        clustering where they need one (``kmeans`` may have run one, from
        restarts on a sample: :func:`fastkds.spectral.fit_kmeans`).
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the points not among the references are labelled (see
        :func:`vote_labeller`).
    spectrum : fastkds.spectral.BipartiteSpectrum or None, default=None
        The code graph's, whose eigengap at ``n_clusters`` the references'
        graph is compared with where the search is exact, and where it has
        fewer than ``n_clusters`` spread modes, the references take their
        graph's labels (None: no comparison).
    min_component : float, default=0.0
        The clusterer's ``min_component``: no piece of the references'
        graph holding a smaller share counts as a cluster
        (:func:`fastkds.label_vote.fit_label_vote`).

    Returns
    -------
    fastkds.label_vote.LabelVote
    """
    dask = _dask.is_dask_array(Y)
    indices = reference_rows(Y.shape[0], atoms.shape[0], rng)
    references = _dask._gather_rows(Y, indices) if dask else take_rows(Y, indices)
    every_point = indices.shape[0] == Y.shape[0]
    first = results.kmeans_labels(kmeans) if every_point else kmeans.predict(embed(references))
    label_vote, reference_labels = fit_label_vote(
        atoms,
        references,
        first,
        n_neighbors,
        n_clusters,
        n_jobs,
        rng=rng,
        n_init=n_init,
        code_gap_ratio=None if spectrum is None else spectrum.gap_ratio(n_clusters),
        code_graph_shows=spectrum is None or spectrum.shows(n_clusters),
        n_samples=Y.shape[0],
        min_component=min_component,
    )
    held = np.zeros(n_clusters, dtype=np.int64)  # points of each label

    def counted(parts):
        for part in parts:
            held[:] += np.bincount(part, minlength=n_clusters)
            yield part

    if every_point:  # every point is a reference: its label is known
        step = _config.LABEL_CHUNK
        results.write_labels(counted(reference_labels[start : start + step] for start in range(0, Y.shape[0], step)))
    elif dask:
        results.vote(label_vote)
        return label_vote  # lazy labels: not counted
    else:
        label, rows = vote_labeller(label_vote, device, n_jobs, Y.shape[1], Y.dtype.itemsize)
        results.write_labels(counted(label(chunk) for _, chunk in source_chunks(Y, rows)))
    if not held.all():
        warn(
            f"the neighbours' vote left {np.count_nonzero(held)} distinct clusters of n_clusters={n_clusters}: "
            f"a cluster of fewer points than vote_neighbors={n_neighbors} was outvoted; set a smaller "
            f"vote_neighbors, or None for the code graph's labels",
            FewerClustersWarning,
        )
    return label_vote


def vote_labeller(label_vote, device, n_jobs, n_features, itemsize):
    """``(label, rows)``: ``label`` maps rows to their labels by
    ``label_vote``, on the GPU where ``device`` runs the kernels there
    (:class:`fastkds.gpu.CudaLabelVote`, the same labels), else on
    ``n_jobs`` CPU threads; ``rows`` is how many to give it at once.

    ``rows`` is :data:`~fastkds._config.LABEL_CHUNK` on the CPU, and on the
    GPU as many as its budget holds, if more: each call there is a copy to
    the device, a launch and a synchronisation, which on 10^7 low-dimensional
    points in chunks of ``LABEL_CHUNK`` cost more than the labelling itself.
    """
    if runs_on_cuda(device):
        from .. import gpu

        on_device = gpu.CudaLabelVote(label_vote)
        return on_device.predict, max(_config.LABEL_CHUNK, on_device.chunk_rows(n_features, itemsize))
    return functools.partial(label_vote.predict, n_jobs=n_jobs), _config.LABEL_CHUNK


def predict_by_vote(label_vote, Y, n_jobs, device="cpu"):
    """Labels of validated ``Y`` (an array or a :class:`ChunkSource`) by ``label_vote``, on ``device``."""
    label, rows = vote_labeller(label_vote, device, n_jobs, Y.shape[1], Y.dtype.itemsize)
    parts = []
    for _, chunk in source_chunks(Y, rows):
        label_vote.check_rows(chunk)  # new points: the fit's were checked by its encoder
        parts.append(label(chunk))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)


def check_bool(est, name):
    value = getattr(est, name)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_solver_params(est):
    """The unrolled solver's training parameters, validated."""
    p = {
        "learning_rate": check_nonneg_float(est.learning_rate, "learning_rate"),
        "batch_size": check_positive_int(est.batch_size, "batch_size"),
        "clip_norm": check_nonneg_float(est.clip_norm, "clip_norm"),
        "shuffle": check_bool(est, "shuffle"),
    }
    for name in ("learning_rate", "clip_norm"):
        if p[name] == 0:
            raise ValueError(f"{name} must be > 0, got {p[name]}")
    return p


def is_fitted(estimator):
    """Whether ``estimator`` is fitted, as scikit-learn's ``check_is_fitted`` tells."""
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


class SparseInputMixin:
    """The estimators' scikit-learn tags say they take scipy sparse data,
    which they read as dense chunks (:class:`fastkds.sources.SparseSource`)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class SaveMixin:
    """``save(path)`` for the estimators (read back with :func:`fastkds.load`),
    and the two hooks through which :mod:`fastkds.persistence` writes and
    reads a model file: each class says how its state becomes named entries
    and back, and registers itself with :func:`fastkds.persistence.register`.
    """

    def save(self, path):
        """Save the model to ``path`` as a portable ``.npz`` file (no pickle).

        Read it back with :func:`fastkds.load`; the loaded model gives
        identical results. See :func:`fastkds.persistence.save`.

        Parameters
        ----------
        path : str or os.PathLike
            Destination file, replaced atomically if it exists.
        """
        persistence.save(self, path)

    def _to_entries(self, writer, prefix):
        """Write the parameters and, when fitted, the fitted state.

        Parameters
        ----------
        writer : fastkds.persistence.Writer
        prefix : str
            Starts the name of every entry written: ``""`` for the model of
            the file, the attribute name and a dot for a nested model.
        """
        raise NotImplementedError

    @classmethod
    def _from_entries(cls, reader, prefix):
        """The model stored under ``prefix``, checked.

        Parameters
        ----------
        reader : fastkds.persistence.Reader
        prefix : str
            As for :meth:`_to_entries`.

        Returns
        -------
        model : cls
            Fitted if its fitted state is stored.

        Raises
        ------
        ValueError or TypeError
            If an entry is missing or malformed, a parameter fails the
            estimator's own validation, or an array's dtype or shape
            disagrees with the parameters and the other arrays.
        """
        raise NotImplementedError


def refuse_dataframe_output(est):
    """A ValueError when ``est`` is set to give pandas or polars output.

    The codes are a scipy.sparse array, and scikit-learn's DataFrame output
    has no sparse form (it refuses sparse output the same way, with this
    message's first sentence). Checked before any work, so that a refused
    ``fit_transform`` leaves the model as it was.
    """
    container = _get_output_config("transform", est)["dense"]
    if container != "default":
        raise ValueError(
            f"{container.capitalize()} output does not support sparse data. {type(est).__name__} "
            f"codes are a scipy.sparse array (n_samples x n_atoms, mostly zeros): set "
            f"set_output(transform='default') on this step (a Pipeline's set_output sets every step), "
            f"or build a DataFrame of sparse columns from the codes: "
            f"pandas.DataFrame.sparse.from_spmatrix(codes, columns=model.get_feature_names_out())"
        )


class EmbeddingFeaturesMixin(ClassNamePrefixFeaturesOutMixin):
    """``get_feature_names_out`` of the clusterers, whose ``transform`` is
    the spectral embedding (dense, so pandas and polars output work)."""

    @property
    def _n_features_out(self):
        """Columns of the embedding (read by ``get_feature_names_out``)."""
        return self.spectrum_.n_columns(self.n_clusters_)

    def get_feature_names_out(self, input_features=None):
        """Names of the embedding columns: the class name in lower case and
        the column number (``"kdsclustering0"``, ...).

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Only checked against ``feature_names_in_``.

        Returns
        -------
        feature_names_out : ndarray of str objects, shape (n_columns,)
        """
        return super().get_feature_names_out(input_features)

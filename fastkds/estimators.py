"""scikit-learn estimators: :class:`KDS` (dictionary + sparse simplex codes)
and :class:`KDSClustering` (spectral clustering on the code graph)."""

import copy
import os
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import check_is_fitted, validate_data

from ._backends import get_backend
from . import _dask, _progress
from . import warmstart
from . import _config
from ._config import numba_threads
from ._validation import (
    FLOAT_DTYPES, auto_n_atoms, check_clustering_params, check_n_jobs, check_nonneg_float, check_positive_int,
    check_verbose, fit_n_atoms,
)
from .diskcodes import DiskCodesWriter, check_out_folder
from .exceptions import warn
from .online import RunningStatistics, online_step
from .prepared import PreparedDictionary, check_encoder, check_step, concatenate_csr
from .solvers import SufficientStatistics
from .unrolled import UnrolledTrainer, fit_unrolled, step_size, theta_from_step
from .sources import ChunkSource, as_source, is_chunked_input, random_rows
from .spectral import ClusteringResults, cluster_codes, normalize_rows

_KDS_PARAMS_DOC = """
    lam : float, default=1.0
        Locality weight lambda: how strongly a point prefers nearby atoms.
        Larger values give sparser, more local codes.
    n_iter : int, default=50
        Iterations T of the accelerated encoder per point (the paper's
        unrolled layers). With ``encoder="active-set"`` they serve only the
        rare points it hands over (affinely dependent atoms). Not the bound
        of the fitted ``n_iter_``, which counts epochs (bounded by
        ``max_epochs``): the name is the paper's T, kept for the command
        line, saved models and published settings.
    encoder : {"apg", "active-set"}, default="apg"
        How the codes are found. ``"apg"``: ``n_iter`` steps of the paper's
        accelerated projected gradient from x = 0. On ill-conditioned
        problems they stop short of the optimum (MNIST-5, 500 atoms: T=100
        of the paper's steps leave codes 0.11 from optimal in the median),
        and the codes they give are longer and smoother than the optimal
        ones, which links more atoms in the code graph. ``"active-set"``:
        the exact codes, per point, by an active-set method on the few atoms
        of the support, checked against the optimality (KKT) conditions for
        all atoms; its cost is close to one product ``Y W^T`` and does not
        grow with ``n_iter``. The exact codes are sparser, and cluster worse
        at the paper's settings (noisy moons: docs/algorithm.md), so
        ``"apg"`` stays the default for clustering. ``solver="unrolled"``
        and the GPU use ``"apg"``.
    step : {"centred", "paper"}, default="centred"
        The accelerated encoder's step. ``"centred"``: the encoder runs on
        the points and atoms less the mean atom, with step ``1 /
        sigma_max(W - mean atom)^2``. Codes sum to 1, so the objective does
        not change when the data and the atoms move together: the same
        optimum, and codes that do not depend on where the data sit. ``"paper"``: ``1 / sigma_max(W)^2``,
        which shrinks as the data move away from the origin (a warning says
        when T steps may then stop short); ``fastkds paper`` uses it to
        reproduce the paper as written. ``solver="unrolled"`` trains the
        paper's encoder and always uses its step.
    max_epochs : int, default=100
        Maximum number of alternating-minimisation epochs (passes over the data).
    tol : float, default=1e-4
        Stop when the mean objective changes by less than this, relatively,
        between two epochs.
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
        Threads of the Numba kernels (encoding, statistics) in this process:
        ``None`` or -1 means all of Numba's threads (``NUMBA_NUM_THREADS``,
        one per core by default), -2 all but one, and so on. Unlike
        scikit-learn's ``n_jobs=None`` (one job), the default uses every
        core, as scikit-learn's OpenMP-parallel ``KMeans`` does. Results do
        not depend on it.
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


def _check_input(estimator, X, *, reset, passes=1):
    """``X`` validated: an in-memory array, or a :class:`ChunkSource` for data
    read chunk by chunk (``.npy`` path, memmap, h5py/zarr dataset, iterable
    of chunks). ``passes > 1`` requires a source that can be read again.
    ``reset=True`` sets ``n_features_in_`` (and ``feature_names_in_``) on
    ``estimator``: a fit calls it through :func:`_check_fit_input`."""
    if not is_chunked_input(X):
        return validate_data(estimator, X, dtype=FLOAT_DTYPES, order="C", reset=reset)
    source = as_source(X)
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
    return source


#: Fitted state that is not named like a fitted attribute (``name_``).
_PRIVATE_FITTED = ("_stream_state",)


def _is_fitted_attribute(name):
    return (name.endswith("_") and not name.startswith("__")) or name in _PRIVATE_FITTED


def _check_fit_input(estimator, X, *, passes=2, chunked=True):
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
        Y = _check_input(probe, X, reset=True, passes=passes)
    else:
        Y = validate_data(probe, X, dtype=FLOAT_DTYPES, order="C", reset=True)
    names = ("n_features_in_", "feature_names_in_")
    return Y, {name: vars(probe)[name] for name in names if name in vars(probe)}


def _commit_fit(estimator, fitted):
    """Replace the fitted state of ``estimator`` by ``fitted`` (name -> value).

    A fit computes into locals and calls this last, so an error or a
    ``KeyboardInterrupt`` before it leaves the estimator as it was.
    Attributes of an earlier fit that ``fitted`` lacks (``feature_names_in_``,
    ``_stream_state``) are dropped; parameters and other state are kept. The
    new ``__dict__`` is assigned in one step, never half updated.
    """
    state = {name: value for name, value in vars(estimator).items() if not _is_fitted_attribute(name)}
    state.update(fitted)
    estimator.__dict__ = state


def _take_rows(Y, indices):
    """Rows ``indices`` (sorted) of an array or a :class:`ChunkSource`, in memory."""
    return Y.take(indices) if isinstance(Y, ChunkSource) else Y[indices]


def _check_bool(est, name):
    value = getattr(est, name)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def _check_solver_params(est):
    """The unrolled solver's training parameters, validated."""
    p = {
        "learning_rate": check_nonneg_float(est.learning_rate, "learning_rate"),
        "batch_size": check_positive_int(est.batch_size, "batch_size"),
        "clip_norm": check_nonneg_float(est.clip_norm, "clip_norm"),
        "shuffle": _check_bool(est, "shuffle"),
    }
    for name in ("learning_rate", "clip_norm"):
        if p[name] == 0:
            raise ValueError(f"{name} must be > 0, got {p[name]}")
    return p


class _SaveMixin:
    """``save(path)`` for the estimators (read back with :func:`fastkds.load`)."""

    def save(self, path):
        """Save the model to ``path`` as a portable ``.npz`` file (no pickle).

        Read it back with :func:`fastkds.load`; the loaded model gives
        identical results. See :func:`fastkds.persistence.save`.

        Parameters
        ----------
        path : str or os.PathLike
            Destination file, replaced atomically if it exists.
        """
        # imported here: fastkds.persistence imports this module
        from .persistence import save

        save(self, path)


def _refuse_dataframe_output(est):
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


class KDS(_SaveMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    # assigned, not a bare string: a concatenation is no docstring, and
    # help() would show nothing
    __doc__ = """K-Deep Simplex: a dictionary of landmark atoms and sparse simplex codes.

    Learns ``n_atoms`` atoms W (m x d) and codes every point as a convex
    combination of nearby atoms by minimising::

        (1/n) sum_i 1/2 ||y_i - x_i W||^2 + lam * sum_j x_ij ||y_i - w_j||^2

    over W and codes x_i on the probability simplex. The codes come from T
    steps of accelerated projected gradient (the paper's unrolled encoder);
    the dictionary from alternating minimisation with the exact dictionary
    step, accumulated chunk by chunk.

    Parameters
    ----------
    n_atoms : int, default=16
        Number of atoms m. A fit on fewer points learns one atom per point
        and says so with a :class:`fastkds.exceptions.TooFewSamplesWarning`.
    """ + _KDS_PARAMS_DOC + """
    Attributes
    ----------
    components_ : ndarray of shape (n_atoms, n_features)
        The learned atoms, one per row, in the dtype of the training data.
    step_ : float
        Encoder step of ``components_`` by the ``step`` rule, or the learned step
        (``solver="unrolled"`` with ``train_step=True``).
    n_iter_ : int
        Epochs run (passes over the data; ``partial_fit`` calls add one each).
    objective_ : ndarray
        Mean objective of each epoch's codes (``n_iter_`` entries).
    n_features_in_ : int
        Number of features seen during the fit.
    feature_names_in_ : ndarray of str objects, one per feature
        Column names of a DataFrame fitted on, when they are all strings.

    See Also
    --------
    KDSClustering : Spectral clustering on the codes.
    fastkds.sparse_encode : The encoder as a function.

    Notes
    -----
    **Output.** :meth:`transform` gives a ``scipy.sparse.csr_array``, one
    column per atom, named ``"kds0"``, ``"kds1"``, ... by
    :meth:`get_feature_names_out`. ``set_output(transform="pandas")`` (or
    ``"polars"``), and ``sklearn.set_config(transform_output="pandas")``,
    make :meth:`transform` and :meth:`fit_transform` raise a ValueError
    before any work, as scikit-learn does for every transformer with sparse
    output: a DataFrame of sparse columns is
    ``pandas.DataFrame.sparse.from_spmatrix(codes, columns=kds.get_feature_names_out())``.

    **Choosing lam.** No score of the model alone can compare ``lam``
    values: on held-out points the reconstruction error ``||y - x W||^2``
    falls as ``lam`` falls (to 0 at ``lam=0``, where points inside the
    hull of the atoms are rebuilt exactly), and the locality term falls as
    ``lam`` grows (towards k-means). Choose ``lam`` by the task: a search
    over ``"kds__lam"`` in a Pipeline scored by its last step, or over
    :class:`KDSClustering`'s ``lam`` with
    ``scoring="adjusted_rand_score"`` on labelled points. :meth:`score`
    (minus the objective) is deprecated for that reason; :meth:`objective`
    gives the value.

    **Warnings** are subclasses of :class:`fastkds.exceptions.KDSWarning`
    (:class:`fastkds.exceptions.KDSConvergenceWarning` is also a
    ``sklearn.exceptions.ConvergenceWarning``), reported at the line of the
    caller's code.

    References
    ----------
    Tasissa, Tankala, Murphy, Ba. "K-Deep Simplex: Manifold Learning via Local
    Dictionaries."

    Examples
    --------
    >>> from fastkds import KDS, make_moons
    >>> Y, _ = make_moons(2000, random_state=0)
    >>> kds = KDS(24, lam=5.0, n_iter=15, random_state=0).fit(Y)
    >>> codes = kds.transform(Y)          # scipy.sparse.csr_array, rows sum to 1
    >>> codes.shape
    (2000, 24)
    >>> kds.get_feature_names_out()[:3]
    array(['kds0', 'kds1', 'kds2'], dtype=object)
    """

    def __init__(
        self,
        n_atoms=16,
        *,
        lam=1.0,
        n_iter=50,
        step="centred",
        encoder="apg",
        max_epochs=100,
        tol=1e-4,
        init="k-means++",
        presample="auto",
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
        self.n_atoms = n_atoms
        self.lam = lam
        self.n_iter = n_iter
        self.step = step
        self.encoder = encoder
        self.max_epochs = max_epochs
        self.tol = tol
        self.init = init
        self.presample = presample
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

    # -- helpers -----------------------------------------------------------

    def _encoding_params(self):
        """The parameters an encoding pass reads, validated.

        ``transform``, ``score`` and every fit call it, not only ``fit``:
        ``set_params`` may change them on a fitted model. The number of
        atoms is not among them: encoding takes it from ``components_``.
        """
        if not isinstance(self.solver, str) or self.solver not in ("exact", "unrolled"):
            raise ValueError(f"solver must be 'exact' or 'unrolled', got {self.solver!r}")
        p = {
            "lam": check_nonneg_float(self.lam, "lam"),
            "n_iter": check_positive_int(self.n_iter, "n_iter"),
            "step": check_step(self.step),
            "encoder": check_encoder(self.encoder),
            "chunk_size": None if self.chunk_size is None else check_positive_int(self.chunk_size, "chunk_size"),
            "n_jobs": check_n_jobs(self.n_jobs),
            "solver": self.solver,
            "train_step": _check_bool(self, "train_step"),
            "freeze_step": _check_bool(self, "freeze_step"),
        }
        if p["freeze_step"] and p["train_step"]:
            raise ValueError("freeze_step=True holds the step fixed; it excludes train_step=True")
        if p["solver"] == "unrolled":  # it trains the paper's encoder, step included
            p["step"] = "paper"
            p["encoder"] = "apg"
        return p

    def _validated_params(self):
        """All the parameters a fit reads, validated."""
        p = self._encoding_params()
        p.update(
            n_atoms=check_positive_int(self.n_atoms, "n_atoms"),
            max_epochs=check_positive_int(self.max_epochs, "max_epochs"),
            tol=check_nonneg_float(self.tol, "tol"),
        )
        check_verbose(self.verbose)
        p.update(_check_solver_params(self))
        return p

    def _run(self, Y, stats=None, codes_out=None):
        """One encoding pass over validated ``Y`` with the learned dictionary."""
        p = self._encoding_params()
        W = self.components_
        backend = get_backend(self.device, p["encoder"])
        prepared = backend.prepare(W, p["lam"], p["n_iter"], Y.dtype, p["step"], p["encoder"])
        if p["solver"] == "unrolled" and (p["train_step"] or p["freeze_step"]):  # not 1/sigma_max^2
            prepared.alpha_value = float(self.step_)
            prepared.alpha = prepared.dtype.type(self.step_)
        with numba_threads(p["n_jobs"]):
            chunk_size = warmstart.chunk_size(backend, p, Y.shape[1], W.shape[0])
            backend.run_epoch(Y, prepared, chunk_size, stats, codes_out=codes_out)

    def _fit_unrolled(self, Y, p, rng):
        """The unrolled solver's fit (see :mod:`fastkds.unrolled`); returns
        the fitted attributes."""
        W = warmstart.initial_dictionary(Y, self.init, rng, p)
        bar, progress = _progress.epochs(self, f"KDS unrolled epochs (n={Y.shape[0]:,})", p["max_epochs"])
        try:
            with numba_threads(p["n_jobs"]):
                trainer, history = fit_unrolled(
                    Y, W, lam=p["lam"], n_iter=p["n_iter"], max_epochs=p["max_epochs"],
                    batch_size=p["batch_size"], learning_rate=p["learning_rate"], clip_norm=p["clip_norm"],
                    shuffle=p["shuffle"], train_step=p["train_step"], random_state=rng, progress=progress,
                    freeze_step=p["freeze_step"],
                )
        finally:
            _progress.close(bar)
        return {
            "_stream_state": {"solver": "unrolled", "rng": rng, "trainer": trainer},
            "components_": trainer.W.astype(Y.dtype),
            "step_": trainer.step,
            "n_iter_": p["max_epochs"],
            "objective_": np.asarray(history),
        }

    def _fit_validated(self, Y):
        """Fit on data already checked by :func:`_check_fit_input`.

        Returns the fitted attributes (name -> value) for
        :func:`_commit_fit`, without setting any: a fit that fails leaves
        the estimator as it was.
        """
        p = self._validated_params()
        if _dask.is_dask_array(Y):
            return _dask.fit_dictionary(
                Y, p, init=self.init, presample=self.presample, random_state=self.random_state, display=self
            )
        n, d = Y.shape
        p["n_atoms"] = fit_n_atoms(n, p["n_atoms"], self.init)
        backend = get_backend(self.device, p["encoder"])
        rng = check_random_state(self.random_state)
        if p["solver"] == "unrolled":
            if isinstance(Y, ChunkSource):
                if n * d * Y.dtype.itemsize > _config.LOAD_WHOLE_BYTES:
                    raise ValueError(
                        "solver='unrolled' trains on shuffled mini-batches of in-memory data; "
                        "for data read chunk by chunk call partial_fit on each chunk, or use solver='exact'"
                    )
                Y = Y.to_array()
            return self._fit_unrolled(Y, p, rng)
        n_pre = warmstart.presample_size(self.presample, self.n_atoms, n)
        if not n_pre and isinstance(Y, ChunkSource) and n * d * Y.dtype.itemsize <= _config.LOAD_WHOLE_BYTES:
            Y = Y.to_array()  # small: fit exactly as on the in-memory array
        ladder = warmstart.presample_ladder(n_pre, n, d, Y.dtype.itemsize)
        samples = warmstart.nested_samples(lambda rows: _take_rows(Y, rows), rng, n, ladder)
        if samples:
            Y_first = samples[0]
        elif isinstance(Y, ChunkSource):
            # too large to load: k-means++ on a random subsample seeds the atoms
            Y_first = Y.take(np.sort(random_rows(rng, n, warmstart.seeding_size(n, p["n_atoms"]))))
        else:
            Y_first = Y
        W = warmstart.initial_dictionary(Y_first, self.init, rng, p)
        stages = [("subsample", sample, backend) for sample in samples]
        stages.append(("all points", Y, backend))
        return warmstart.fit_stages(stages, W, p, rng, Y.dtype, self)

    def partial_fit(self, X, y=None):
        """Update the dictionary with one chunk of a stream of data.

        For a stream that never fits in memory: call it once per chunk. The
        first call draws the initial dictionary from its chunk (a first
        chunk of fewer than ``n_atoms`` points gives one atom per point, as
        :meth:`fit` does, with a warning); a call after :meth:`fit` continues
        from the fitted model.

        - ``solver="exact"``: one step of online dictionary learning. The
          chunk is encoded with the current dictionary, its sufficient
          statistics are added to decayed running sums (Mairal et al. 2010,
          as scikit-learn's MiniBatchDictionaryLearning) and the dictionary
          solves the exact step from them (see :mod:`fastkds.online`).
        - ``solver="unrolled"``: one pass of Adam over the chunk in
          mini-batches of ``batch_size``, continuing the optimiser's state.

        ``n_iter_`` counts the calls (after a fit, on top of its epochs);
        ``objective_`` gains the chunk's mean objective (exact: codes under
        the dictionary before the update; unrolled: the mini-batch losses).
        A model read back with :func:`fastkds.load` continues with fresh
        running sums or Adam moments.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        self : KDS
        """
        first = not hasattr(self, "components_")
        if first:
            Y, fitted = _check_fit_input(self, X, chunked=False)
        else:
            Y, fitted = validate_data(self, X, dtype=FLOAT_DTYPES, order="C", reset=False), {}
        p = self._validated_params()
        state = None if first else getattr(self, "_stream_state", None)
        if state is not None and state["solver"] != p["solver"]:
            state = None
        if state is not None:
            # the step updates the running sums (or Adam's state) in place:
            # work on a copy, so that a failed call leaves the model as it was
            state = copy.deepcopy(state)
        else:
            rng = check_random_state(self.random_state)
            if first:
                # the initial atoms are drawn from the first chunk
                p["n_atoms"] = fit_n_atoms(Y.shape[0], p["n_atoms"], self.init)
                W = warmstart.initial_dictionary(Y, self.init, rng, p)
            else:
                W = np.asarray(self.components_, dtype=np.float64)
            state = {"solver": p["solver"], "rng": rng}
            if p["solver"] == "unrolled":
                theta = theta_from_step(W, self.step_) if (p["train_step"] and not first) else None
                # a frozen step stays the fitted model's, not the current W's
                fixed = (step_size(W) if first else self.step_) if p["freeze_step"] else None
                state["trainer"] = UnrolledTrainer(
                    W, lam=p["lam"], n_iter=p["n_iter"], train_step=p["train_step"],
                    learning_rate=p["learning_rate"], clip_norm=p["clip_norm"], theta=theta, fixed_step=fixed,
                )
            else:
                # a fitted model continues with its own atoms, whatever n_atoms says now
                state["running"] = RunningStatistics(W.shape[0], Y.shape[1])
                state["W"] = W
        with numba_threads(p["n_jobs"]):
            if p["solver"] == "unrolled":
                trainer = state["trainer"]
                F = trainer.epoch(Y, p["batch_size"], state["rng"] if p["shuffle"] else None)
                W = trainer.W
                step = trainer.step
            else:
                backend = get_backend(self.device, p["encoder"])
                W, F, _ = online_step(
                    Y, state["W"], state["running"], lam=p["lam"], n_iter=p["n_iter"], step=p["step"],
                    encoder=p["encoder"],
                    chunk_size=warmstart.chunk_size(backend, p, Y.shape[1], state["W"].shape[0]), backend=backend,
                    random_state=state["rng"],
                )
                state["W"] = W
                step = PreparedDictionary(W, p["lam"], 1, np.float64, p["step"]).alpha_value
        fitted.update(
            _stream_state=state,
            components_=W.astype(Y.dtype),
            step_=step,
            n_iter_=1 if first else self.n_iter_ + 1,
            objective_=np.append(np.asarray([] if first else self.objective_, dtype=np.float64), F),
        )
        if first:
            _commit_fit(self, fitted)
        else:
            vars(self).update(fitted)  # one step; the feature attributes stay
        return self

    def _encode(self, Y, *, statistics=False, out=None):
        """Codes of validated ``Y`` and, optionally, their sufficient statistics.

        With ``out`` (a folder) the codes are written there chunk by chunk
        and come back memory-mapped (see :mod:`fastkds.diskcodes`).
        """
        m = self.components_.shape[0]  # not n_atoms, which set_params may have changed
        stats = SufficientStatistics(m, Y.shape[1])
        parts = [] if out is None else DiskCodesWriter(out, m, Y.dtype)
        try:
            self._run(Y, stats if statistics else None, codes_out=parts)
        except BaseException:
            if out is not None:
                parts.abort()
            raise
        codes = concatenate_csr(parts, m, Y.dtype) if out is None else parts.close()
        return (codes, stats) if statistics else codes

    # -- public API ----------------------------------------------------------

    def fit(self, X, y=None):
        """Learn the dictionary from data ``X`` (n_samples x n_features).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or data read in chunks
            Data, one point per row. float32 is kept; other types become float64.
            Data larger than memory can be given as a ``.npy`` path or
            ``np.memmap`` (memory-mapped), an h5py or zarr dataset (sliced),
            a list of chunks or a callable returning a fresh iterator of
            chunks (each a 2-D array): only one chunk is in memory at a time.
        y : Ignored

        Returns
        -------
        self : KDS
        """
        Y, fitted = _check_fit_input(self, X)
        fitted.update(self._fit_validated(Y))
        _commit_fit(self, fitted)
        return self

    def transform(self, X, out=None):
        """Sparse simplex codes of ``X`` in the learned dictionary.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or data read in chunks
            As for :meth:`fit`; a one-shot iterator of chunks is fine here.
        out : str, os.PathLike or None, default=None
            A folder to write the codes to, chunk by chunk, as
            ``indptr.npy``, ``indices.npy`` and ``data.npy`` (for data whose
            codes do not fit in memory). The result is then memory-mapped on
            those files; :func:`fastkds.diskcodes.load_codes` opens them later.
            Files of an earlier result there are replaced, not overwritten:
            arrays still mapped on them keep their values. A folder that
            holds the input file is refused.

        Returns
        -------
        codes : scipy.sparse.csr_array of shape (n_samples, n_atoms)
            Rows are on the probability simplex; column indices ascending.
        """
        check_is_fitted(self)
        _refuse_dataframe_output(self)
        if _dask.is_dask_array(X):
            return _dask.transform_kds(self, X, out)
        if out is not None:
            check_out_folder(out, X)
        Y = _check_input(self, X, reset=False)
        return self._encode(Y, out=out)

    def fit_transform(self, X, y=None):
        """Fit, then return the codes of ``X`` (see :meth:`transform`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or data read in chunks
            As for :meth:`fit`.
        y : Ignored

        Returns
        -------
        codes : scipy.sparse.csr_array of shape (n_samples, n_atoms)
        """
        _refuse_dataframe_output(self)
        if _dask.is_dask_array(X):
            return self.fit(X).transform(X)
        Y, fitted = _check_fit_input(self, X)
        fitted.update(self._fit_validated(Y))
        # encoded by a fitted copy: the model changes only once the codes are made
        model = copy.copy(self)
        _commit_fit(model, fitted)
        codes = model._encode(Y)
        _commit_fit(self, fitted)
        return codes

    def inverse_transform(self, X):
        """Reconstruct points ``X W`` from codes.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_atoms)
            Codes, as returned by :meth:`transform`.

        Returns
        -------
        Y_hat : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        from sklearn.utils import check_array

        # NaN and inf are refused in sparse codes too (their stored values)
        codes = check_array(X, accept_sparse="csr", dtype=FLOAT_DTYPES, input_name="X")
        m = self.components_.shape[0]
        if codes.shape[1] != m:
            raise ValueError(f"codes have {codes.shape[1]} columns, expected one per fitted atom: n_atoms={m}")
        if sp.issparse(codes):
            # The product trusts the index arrays: a column index >= m would
            # read out of bounds. Checked on a new array over the same
            # buffers, as check_format may reassign the ones it checks.
            try:
                codes = sp.csr_array((codes.data, codes.indices, codes.indptr), shape=codes.shape, copy=False)
                codes.check_format(full_check=True)
            except ValueError as exc:
                raise ValueError(f"X is not a valid sparse array of codes: its {exc}") from None
            return np.asarray(codes @ self.components_)
        return codes @ self.components_

    def objective(self, X):
        """Mean KDS objective of ``X`` under the learned dictionary (lower is better).

        ``(1/n) sum_i 1/2 ||y_i - x_i W||^2 + lam sum_j x_ij ||y_i - w_j||^2``
        with the codes x_i of :meth:`transform`: the quantity a fit
        minimises. It compares models of the same ``lam`` (other ``n_atoms``,
        ``init`` or epochs; training against held-out data), not ``lam``
        values: see "Choosing lam" in the class docstring.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or data read in chunks
            As for :meth:`transform`; Dask arrays are reduced block by block.

        Returns
        -------
        objective : float
        """
        check_is_fitted(self)
        if _dask.is_dask_array(X):
            return -_dask.score_kds(self, X)
        Y = _check_input(self, X, reset=False)
        stats = SufficientStatistics(self.components_.shape[0], Y.shape[1])
        self._run(Y, stats)
        return stats.mean_objective

    def score(self, X, y=None):
        """Minus :meth:`objective`. Deprecated: removed in fastkds 0.3.

        A FutureWarning says so at every call. The objective's scale depends on
        ``lam``, so a search over ``lam`` by this score (``GridSearchCV``
        without ``scoring``) always picked the smallest ``lam``, and no score
        of the model alone can do better (see "Choosing lam" in the class
        docstring). Use :meth:`objective` for the value, and a scorer of the
        task to choose ``lam``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        score : float
        """
        warn(
            "KDS.score is deprecated and will be removed in fastkds 0.3: it is minus the mean objective, "
            "whose scale depends on lam, so a search over lam by it always picks the smallest lam. Use "
            "KDS.objective(X) for the value; to choose lam, score the task (a Pipeline's last step, or "
            "KDSClustering with scoring='adjusted_rand_score')",
            FutureWarning,
        )
        return -self.objective(X)

    @property
    def _n_features_out(self):
        """Columns of the codes: one per fitted atom (read by ``get_feature_names_out``)."""
        return self.components_.shape[0]

    def get_feature_names_out(self, input_features=None):
        """Names of the code columns: ``"kds0"``, ``"kds1"``, ... one per atom.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Only checked against ``feature_names_in_`` (the codes are named
            after the atoms, not the input features).

        Returns
        -------
        feature_names_out : ndarray of str objects, shape (n_atoms,)
        """
        return super().get_feature_names_out(input_features)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class _EmbeddingFeaturesMixin(ClassNamePrefixFeaturesOutMixin):
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


class KDSClustering(_SaveMixin, _EmbeddingFeaturesMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    __doc__ = """Spectral clustering on the K-Deep Simplex code graph, linear in n.

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
        noisy moons and on concentric circles, 3 on three spirals and 4 on
        four separate blobs. Where clusters come in groups (two pairs of
        close blobs) it takes the level that is more clearly separated,
        which may be the groups; give the number when it is known.
    n_atoms : int or "auto", default="auto"
        Number of atoms m. ``"auto"``: about sqrt(n_samples), at least 16
        and 4 per cluster asked for, at most 100 (more when 4 per cluster
        asks for more), never more than the points
        (``fastkds._validation.auto_n_atoms``); ``kds_.n_atoms`` holds the
        number used.
    """ + _KDS_PARAMS_DOC + """
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
        which matters on small data only. 0 gives the plain embedding of the
        paper (docs/algorithm.md, "Clustering").
    n_init : int, default=10
        k-means restarts.
    max_clusters : int, default=20
        Largest number of clusters ``"auto"`` may choose.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point.
    embedding_ : ndarray of shape (n_samples, n_columns)
        Row-normalised spectral embedding the k-means ran on: the leading
        eigenvectors up to the ``n_clusters_``-th spread one, so
        ``n_columns = spectrum_.n_columns(n_clusters_)``, which is
        ``n_clusters_`` unless localised modes lead (see ``min_component``).
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
        when there are more (``fastkds.spectral.KMEANS_SAMPLE``); every
        point is then labelled by its nearest centre.
    timings_ : dict
        Seconds spent in each stage of the last fit: ``dictionary``,
        ``encode``, ``embed`` and ``kmeans``.
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

    def __init__(
        self,
        n_clusters="auto",
        *,
        n_atoms="auto",
        lam=1.0,
        n_iter=50,
        step="centred",
        encoder="apg",
        max_epochs=100,
        tol=1e-4,
        init="k-means++",
        presample="auto",
        min_component=0.01,
        n_init=10,
        max_clusters=20,
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
        params = {name: getattr(self, name) for name in KDS._get_param_names()}
        if isinstance(self.n_atoms, str):  # "auto", as check_clustering_params makes sure
            params["n_atoms"] = auto_n_atoms(n_samples, n_clusters)
        params["random_state"] = rng.randint(np.iinfo(np.int32).max)
        return KDS(**params)

    def fit(self, X, y=None, out=None):
        """Learn the dictionary, embed the points and cluster them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or data read in chunks
            As for :meth:`KDS.fit`: a ``.npy`` path, memmap, h5py or zarr
            dataset, or chunks, for data larger than memory.
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
        dask = _dask.is_dask_array(X)
        if out is not None:
            if dask:
                raise ValueError("out= is not supported for Dask arrays: their results are Dask arrays already")
            out = os.fspath(out)
            check_out_folder(out, X)
        Y, fitted = _check_fit_input(self, X)
        rng = check_random_state(self.random_state)
        kds = self._inner_kds(rng, Y.shape[0], params[0])
        timings = {}
        t0 = time.perf_counter()
        if dask:
            Y = _dask.persist(Y)  # the dictionary's epochs and the encoding read it
        _commit_fit(kds, {**kds._fit_validated(Y), "n_features_in_": Y.shape[1]})
        timings["dictionary"] = time.perf_counter() - t0
        if dask:
            results = _dask.ClusteringResults(Y, kds, check_n_jobs(self.n_jobs))
        else:
            results = ClusteringResults(out, Y.shape[0], kds.components_.shape[0], Y.dtype)
        try:
            t0 = time.perf_counter()
            if dask:
                stats = results.encode()
            else:
                stats = SufficientStatistics(kds.components_.shape[0], Y.shape[1])
                kds._run(Y, stats, codes_out=results.codes)
            timings["encode"] = time.perf_counter() - t0
            spectrum, n_clusters, kmeans = cluster_codes(
                stats.XtX, stats.s, kds.components_, results, rng, params, timings
            )
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
            spectrum_=spectrum,
            components_=kds.components_,
            embedding_=embedding,
            eigenvalues_=spectrum.eigenvalues,
            n_clusters_=n_clusters,
            timings_=timings,
        )
        _commit_fit(self, fitted)
        return self

    def transform(self, X):
        """Row-normalised spectral embedding of ``X`` (n_samples x ``spectrum_.n_columns(n_clusters_)``)."""
        check_is_fitted(self)
        if _dask.is_dask_array(X):
            return _dask.transform_clustering(self, X)
        Y = _check_input(self, X, reset=False)
        return normalize_rows(self.spectrum_.embed(self.kds_._encode(Y), self.n_clusters_), copy=False)

    def predict(self, X):
        """Cluster labels of new points: encode, embed, nearest k-means centre.

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
        return self.kmeans_.predict(self.transform(X))


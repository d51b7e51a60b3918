""":class:`KDS`: the dictionary and the sparse simplex codes."""

import copy
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .. import _config, _dask, _progress, persistence, warmstart
from .._backends import DEVICES, get_backend, resolve_encoder
from .._config import numba_threads
from .._validation import (
    float_dtypes,
    check_choice,
    check_n_jobs,
    check_nonneg_float,
    check_positive_int,
    check_verbose,
    fit_n_atoms,
)
from ..diskcodes import check_out_folder
from ..encoding import FittedEncoder, chunk_rows
from ..exceptions import warn
from ..online import RunningStatistics, online_step
from ..prepared import PreparedDictionary, check_encoder, check_step, encoder_step
from ..solvers import SufficientStatistics
from ..sources import ChunkSource
from ..unrolled import UnrolledTrainer, fit_unrolled, step_size, theta_from_step
from ._base import (
    KDS_PARAMS_DOC,
    SaveMixin,
    SparseInputMixin,
    check_bool,
    check_fit_input,
    check_input,
    check_solver_params,
    commit_fit,
    is_fitted,
    refuse_dataframe_output,
    take_rows,
    validate_array,
)


@persistence.register
class KDS(SparseInputMixin, SaveMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    # assigned, not a bare string: a concatenation is no docstring, and
    # help() would show nothing
    __doc__ = (
        """K-Deep Simplex: a dictionary of landmark atoms and sparse simplex codes.

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
    """
        + KDS_PARAMS_DOC
        + """
    Attributes
    ----------
    components_ : ndarray of shape (n_atoms, n_features)
        The learned atoms, one per row, in the dtype of the training data.
    step_ : float
        Encoder step of ``components_`` by the ``step`` rule, or the learned step
        (``solver="unrolled"`` with ``train_step=True``). With the centred
        step and atoms far out from the rest, this is the step of the points
        that may use a far atom; the others take the larger step of the
        near atoms (docs/algorithm.md, "Far atoms").
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
    )

    def __init__(
        self,
        n_atoms=16,
        *,
        lam=1.0,
        n_iter=50,
        step="centred",
        encoder="auto",
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
            "train_step": check_bool(self, "train_step"),
            "freeze_step": check_bool(self, "freeze_step"),
        }
        if p["freeze_step"] and p["train_step"]:
            raise ValueError("freeze_step=True holds the step fixed; it excludes train_step=True")
        if p["solver"] == "unrolled":  # it trains the paper's encoder, step included
            p["step"] = "paper"
            p["encoder"] = "apg"
        p["encoder"] = resolve_encoder(p["encoder"], self.device, p["lam"])
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
        p.update(check_solver_params(self))
        return p

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
          mini-batches of ``batch_size``, continuing the optimiser's state
          with the current ``lam``, ``n_iter``, ``learning_rate`` and
          ``clip_norm`` (a :meth:`set_params` between calls takes effect).

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
            Y, fitted = check_fit_input(self, X, chunked=False)
        else:
            Y, fitted = validate_array(self, X, reset=False), {}
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
                    W,
                    lam=p["lam"],
                    n_iter=p["n_iter"],
                    train_step=p["train_step"],
                    learning_rate=p["learning_rate"],
                    clip_norm=p["clip_norm"],
                    theta=theta,
                    fixed_step=fixed,
                )
            else:
                # a fitted model continues with its own atoms, whatever n_atoms says now
                state["running"] = RunningStatistics(W.shape[0], Y.shape[1])
                state["W"] = W
        with numba_threads(p["n_jobs"]):
            if p["solver"] == "unrolled":
                trainer = state["trainer"]
                # the current parameters, as set_params left them, not those of the first call
                for name in ("lam", "n_iter", "learning_rate", "clip_norm"):
                    setattr(trainer, name, p[name])
                F = trainer.epoch(Y, p["batch_size"], state["rng"] if p["shuffle"] else None)
                W = trainer.W
                step = trainer.step
            else:
                backend = get_backend(self.device)
                W, F, _ = online_step(
                    Y,
                    state["W"],
                    state["running"],
                    lam=p["lam"],
                    n_iter=p["n_iter"],
                    step=p["step"],
                    encoder=p["encoder"],
                    chunk_size=chunk_rows(backend, p["chunk_size"], Y.shape[1], state["W"].shape[0]),
                    backend=backend,
                    random_state=state["rng"],
                )
                state["W"] = W
                step = encoder_step(W, p["step"])
        fitted.update(
            _stream_state=state,
            components_=W.astype(Y.dtype),
            step_=step,
            n_iter_=1 if first else self.n_iter_ + 1,
            objective_=np.append(np.asarray([] if first else self.objective_, dtype=np.float64), F),
        )
        if first:
            commit_fit(self, fitted)
        else:
            vars(self).update(fitted)  # one step; the feature attributes stay
        return self

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
            A scipy sparse matrix is read the same way, each chunk made dense.
        y : Ignored

        Returns
        -------
        self : KDS
        """
        Y, fitted = check_fit_input(self, X)
        fitted.update(fit_attributes(self, Y))
        commit_fit(self, fitted)
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
        refuse_dataframe_output(self)
        if _dask.is_dask_array(X):
            return _dask.transform_kds(self, X, fitted_encoder(self), out)
        if out is not None:
            check_out_folder(out, X)
        Y = check_input(self, X, reset=False)
        return fitted_encoder(self).encode(Y, out=out)

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
        refuse_dataframe_output(self)
        if _dask.is_dask_array(X):
            return self.fit(X).transform(X)
        Y, fitted = check_fit_input(self, X)
        fitted.update(fit_attributes(self, Y))
        # encoded by a fitted copy: the model changes only once the codes are made
        model = copy.copy(self)
        commit_fit(model, fitted)
        codes = fitted_encoder(model).encode(Y)
        commit_fit(self, fitted)
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
        codes = check_array(X, accept_sparse="csr", dtype=float_dtypes(X), input_name="X")
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
            return _dask.objective_kds(self, X, fitted_encoder(self))
        Y = check_input(self, X, reset=False)
        stats = SufficientStatistics(self.components_.shape[0], Y.shape[1])
        fitted_encoder(self).run(Y, stats)
        if stats.n_samples == 0:  # chunks that held no rows: no mean to take
            raise ValueError("Found data with 0 sample(s) while a minimum of 1 is required.")
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

    # -- model files (fastkds.persistence) --------------------------------------

    # Fitted attributes in a model file: arrays, and scalars (JSON).
    _SAVED_ARRAYS = ("components_", "objective_")
    _SAVED_SCALARS = ("step_", "n_iter_", "n_features_in_")

    def _to_entries(self, writer, prefix):
        writer.params(prefix, self)
        if is_fitted(self):
            writer.attributes(prefix, self, self._SAVED_ARRAYS, self._SAVED_SCALARS)

    @classmethod
    def _from_entries(cls, reader, prefix, *, fitted=False):
        """See :meth:`SaveMixin._from_entries`; ``fitted=True`` (a
        clusterer's dictionaries) requires the fitted state."""
        kds = cls(**read_fit_params(reader, prefix, cls))
        if not (fitted or reader.has(f"{prefix}attributes")):
            check_fit_params(kds, kds.n_atoms, None)
            return kds
        vars(kds).update(reader.attributes(prefix, cls._SAVED_ARRAYS, cls._SAVED_SCALARS))
        check_fit_params(kds, kds.n_atoms, kds.n_features_in_)
        kds._check_fitted_state(prefix)
        return kds

    def _check_fitted_state(self, prefix):
        """The fitted state of a loaded or saved model, against its
        parameters (checked first); ``prefix`` names its entries in errors.

        The atoms are the rows of ``components_``, which a fitted model
        encodes with: ``n_atoms`` is the count the next fit learns, and may
        differ (a fit on fewer points learns fewer, and ``set_params`` may
        change it).
        """
        d = check_positive_int(self.n_features_in_, f"{prefix}n_features_in_")
        persistence.check_array(
            self.components_,
            f"{prefix}components_",
            persistence.FLOATS,
            (None, d),
            finite=True,
            meaning=f" = (atoms, {prefix}n_features_in_)",
        )
        persistence.require(len(self.components_) > 0, f"{prefix}components_ holds no atom")
        persistence.check_array(self.objective_, f"{prefix}objective_", "f", (None,))
        step = self.step_
        persistence.require(
            isinstance(step, numbers.Real) and not isinstance(step, bool) and np.isfinite(step) and step > 0,
            f"{prefix}step_ must be a finite float > 0, got {step!r}",
        )
        persistence.check_count(self.n_iter_, f"{prefix}n_iter_")
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            persistence.check_array(names, f"{prefix}feature_names_in_", "OU", (d,))
        # the encoder's own checks of the atoms: their squared norms and step fit the dtype
        p = self._validated_params()
        PreparedDictionary(self.components_, p["lam"], p["n_iter"], self.components_.dtype, p["step"], p["encoder"])


def read_fit_params(reader, prefix, cls):
    """The parameters of a :class:`KDS` or a :class:`KDSClustering` stored
    under ``prefix`` in a model file (:class:`fastkds.persistence.Reader`).

    Files written before the encoder and its step were parameters used the
    paper's, and load as such.
    """
    return {"step": "paper", "encoder": "apg", **reader.params(prefix, cls)}


def check_fit_params(est, n_atoms, n_features):
    """The parameters a :class:`KDS` fit reads, of a KDS or of a
    KDSClustering (which passes them on), validated as the fit validates
    them: for a model read from a file, or about to be written to one.

    ``n_atoms`` is None for KDSClustering's unresolved ``"auto"``;
    ``n_features`` is None for an unfitted model.
    """
    probe = KDS(**{name: getattr(est, name) for name in KDS().get_params(deep=False)})
    # an unresolved "auto" stands as 1, which passes every check that depends on the count
    probe.n_atoms = 1 if n_atoms is None else n_atoms
    p = probe._validated_params()
    warmstart.presample_size(est.presample, p["n_atoms"], 0)
    # sizes not known yet are taken from an init array, which must still be 2-D
    rows, cols = np.shape(est.init) if np.ndim(est.init) == 2 else (-1, -1)
    warmstart.check_init(est.init, rows if n_atoms is None else n_atoms, cols if n_features is None else n_features)
    check_choice(est.device, "device", DEVICES)
    check_random_state(est.random_state)


# -- what the clusterers and the Dask path call -------------------------------


def fitted_encoder(kds):
    """The encoder of a fitted :class:`KDS`, with its parameters validated now.

    :meth:`KDS.transform`, :meth:`KDS.objective` and the clusterers encode
    through it. The parameters are read at each call, not only at the fit:
    ``set_params`` may change them on a fitted model. The number of atoms
    is not among them: it is that of ``components_``.

    Parameters
    ----------
    kds : KDS
        Fitted.

    Returns
    -------
    fastkds.encoding.FittedEncoder
    """
    p = kds._encoding_params()
    # the unrolled solver's trained or frozen step is kept, not the rule's 1/sigma_max^2
    learned = p["solver"] == "unrolled" and (p["train_step"] or p["freeze_step"])
    return FittedEncoder(
        kds.components_,
        lam=p["lam"],
        n_iter=p["n_iter"],
        step=p["step"],
        encoder=p["encoder"],
        chunk_size=p["chunk_size"],
        n_jobs=p["n_jobs"],
        device=kds.device,
        fixed_step=float(kds.step_) if learned else None,
    )


def fit_attributes(kds, Y, last_epoch=None, span=None):
    """Fit ``kds`` on data already checked by :func:`check_fit_input`.

    Parameters
    ----------
    kds : KDS
    Y : ndarray, fastkds.sources.ChunkSource or dask.array.Array
    last_epoch : fastkds.solvers.LastEpoch or None, default=None
        A clusterer's: the exact solver's fit then ends on the dictionary
        whose codes its last epoch computed, and keeps them there
        (:func:`fastkds.solvers.fit_alternating`). The unrolled solver
        ignores it.
    span : fastkds.warmstart.DataSpan or None, default=None
        ``Y``'s, where the caller has it already (the dictionaries of an
        ensemble share one); None: :func:`fastkds.warmstart.data_span`'s.

    Returns
    -------
    dict
        The fitted attributes (name -> value) for :func:`commit_fit`, none
        of them set: a fit that fails leaves the estimator as it was.
    """
    p = kds._validated_params()
    if _dask.is_dask_array(Y):
        return _dask.fit_dictionary(
            Y,
            p,
            init=kds.init,
            presample=kds.presample,
            random_state=kds.random_state,
            display=kds,
            last_epoch=last_epoch,
        )
    n, d = Y.shape
    p["n_atoms"] = fit_n_atoms(n, p["n_atoms"], kds.init)
    backend = get_backend(kds.device)
    rng = check_random_state(kds.random_state)
    if p["solver"] == "unrolled":
        if isinstance(Y, ChunkSource):
            if n * d * Y.dtype.itemsize > _config.LOAD_WHOLE_BYTES:
                raise ValueError(
                    "solver='unrolled' trains on shuffled mini-batches of in-memory data; "
                    "for data read chunk by chunk call partial_fit on each chunk, or use solver='exact'"
                )
            Y = Y.to_array()
        return _fit_unrolled(kds, Y, p, rng)
    n_pre = warmstart.presample_size(kds.presample, kds.n_atoms, n)
    if not n_pre and isinstance(Y, ChunkSource) and n * d * Y.dtype.itemsize <= _config.LOAD_WHOLE_BYTES:
        Y = Y.to_array()  # small: fit exactly as on the in-memory array
    if span is None:
        span = warmstart.data_span(Y, p, kds.init)
    if span is not None:  # many more features than points: the same fit on n of them
        Y = span.coordinates

    def take(rows):
        return take_rows(Y, rows)

    def seeding_points():
        if isinstance(Y, ChunkSource):  # too large to load: k-means++ on a random subsample
            return warmstart.seeding_sample(take, rng, n, p["n_atoms"])
        return Y

    fitted = warmstart.fit_exact(
        Y,
        p,
        n_pre,
        kds.init,
        rng,
        take=take,
        seeding_points=seeding_points,
        backend=backend,
        display=kds,
        last_epoch=last_epoch,
    )
    if span is not None:
        fitted["components_"] = span.features(fitted["components_"])
    return fitted


def _fit_unrolled(kds, Y, p, rng):
    """The unrolled solver's fit (see :mod:`fastkds.unrolled`); returns the
    fitted attributes."""
    W = warmstart.initial_dictionary(Y, kds.init, rng, p)
    bar, progress = _progress.epochs(kds, f"KDS unrolled epochs (n={Y.shape[0]:,})", p["max_epochs"])
    try:
        with numba_threads(p["n_jobs"]):
            trainer, history = fit_unrolled(
                Y,
                W,
                lam=p["lam"],
                n_iter=p["n_iter"],
                max_epochs=p["max_epochs"],
                batch_size=p["batch_size"],
                learning_rate=p["learning_rate"],
                clip_norm=p["clip_norm"],
                shuffle=p["shuffle"],
                train_step=p["train_step"],
                random_state=rng,
                progress=progress,
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

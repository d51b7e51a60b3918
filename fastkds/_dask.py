"""Dask backend: fit, transform and predict on a ``dask.array.Array``.

The Numba CPU kernels run on the workers, one task per block of rows; only
small things travel (after stumpy's ``stumped``, which reuses its CPU kernel
on each worker):

* ``fit``: each epoch, every block is encoded where it lives and returns its
  :class:`~fastkds.solvers.SufficientStatistics` (``X^T X``, ``s``,
  ``X^T Y``, objective sum, count and re-seed candidates: m x m + m x d
  numbers). A tree reduction sums them; the client solves the m x m system
  (:func:`~fastkds.solvers.solve_dictionary`) and sends the new dictionary
  as one graph key, which the scheduler copies to each worker once, not once
  per task. The loop itself is :func:`~fastkds.solvers.fit_alternating`,
  given :class:`DaskBackend`, so the dictionary steps are those of the
  in-memory fit.
* ``KDSClustering.fit``: the spectral step (:func:`fastkds.spectral.cluster_codes`,
  as in memory) needs only ``X^T X`` and ``s`` (reduced the same way). The
  codes stay on the workers (:class:`ClusteringResults`); only the
  row-normalised embedding (n x n_clusters) comes to the client, for
  scikit-learn's k-means.
* ``KDS.transform`` and ``KDS.objective``: block-wise (the transform
  lazily); the dictionary, prepared once on the client
  (:class:`fastkds.encoding.FittedEncoder`), is one graph key, and the
  tasks never see the estimator.
* ``KDSClustering.transform`` / ``predict``: block-wise, lazily; the fitted
  model is one graph key.

Identical results: the fit's plan is the in-memory fit's
(:mod:`fastkds.warmstart`); the warm-start subsamples (the same indices,
gathered by sorted fancy indexing), the k-means++ seeding and the re-seed
candidates (keys addressed by global row index) are the in-memory fit's, so
a Dask fit equals the in-memory fit on the same data and seed up to the
rounding of sums taken in another order.

Dask is imported only inside these functions: importing fastkds never needs
it (:func:`is_dask_array` looks at ``sys.modules``). Every function sent to
the workers is defined at module level, so tasks pickle by reference.
"""

import copy
import operator
import sys
import uuid

import numba
import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from . import _config, warmstart
from ._backends import run_epoch
from ._config import numba_threads
from .encoding import encode_prepared
from ._validation import check_choice, check_n_jobs, fit_n_atoms, working_dtype
from .solvers import SufficientStatistics
from .spectral import embedding_rows


def is_dask_array(X):
    """Whether ``X`` is a ``dask.array.Array``, without importing Dask.

    A Dask array can only exist once ``dask.array`` has been imported, so
    the check costs nothing (and imports nothing) when it has not.
    """
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(X, module.Array)


# -- input checks ------------------------------------------------------------


def check_dask_array(X, n_features=None, estimator=None):
    """``X`` as a float32/float64 2-D Dask array with one chunk along features.

    Other numeric dtypes become float64 (``_validation.working_dtype``;
    float32 stays float32 in either byte order) and several feature chunks are
    rechunked to one (lazily). Finiteness is checked inside each block task.

    Raises
    ------
    ValueError
        Not 2-D, unknown chunk sizes, no rows, or a feature count different
        from ``n_features``.
    TypeError
        A non-numeric dtype.
    """
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D dask array, got {X.ndim}-D with shape {X.shape}")
    if any(np.isnan(c) for c in X.chunks[0]) or np.isnan(X.shape[1]):
        raise ValueError("the dask array has unknown chunk sizes (NaN in .chunks): call X.compute_chunk_sizes() first")
    if X.dtype.kind not in "fiub":
        raise TypeError(f"the dask array must be numeric, got dtype {X.dtype}")
    dtype = working_dtype(X.dtype)
    if sp.issparse(getattr(X, "_meta", None)):
        # blocks of scipy sparse matrices: each made dense in its own task,
        # as an in-memory sparse matrix is read as dense chunks
        X = X.map_blocks(_dense_block, dtype=dtype, meta=np.empty((0, 0), dtype=dtype))
    if X.dtype != dtype:
        X = X.astype(dtype)
    if X.shape[0] < 1:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting {n_features} features as input."
        )
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # a block task needs whole rows
    return X


def _dense_block(block):
    """A block of a Dask array of sparse blocks, dense."""
    return block.toarray() if sp.issparse(block) else np.asarray(block)


def _check_block(Y, row_start, dtype):
    """A block as C-contiguous ``dtype``, refusing NaN/inf with the rows named."""
    Y = np.ascontiguousarray(Y, dtype=dtype)
    if not np.isfinite(Y).all():
        bad = row_start + int(np.flatnonzero(~np.isfinite(Y).all(axis=1))[0])
        raise ValueError(f"Input X contains NaN or infinity (row {bad})")
    return Y


# -- threads -----------------------------------------------------------------


def thread_plan(n_jobs):
    """How many Numba threads each task should use, decided on the client.

    ``n_jobs`` given: that many (capped on each worker). Otherwise the
    cores are shared among the tasks that run at once: on a distributed
    cluster, a worker's cores divided by the worker threads of all workers on
    its host (so 2 one-thread workers on 2 cores use 1 thread per task); with
    the local threaded scheduler, the cores over its pool size; with the
    synchronous scheduler, all of them.

    Returns
    -------
    int, or dict mapping host to total worker threads on that host
    """
    if n_jobs is not None:
        return int(n_jobs)
    import dask
    from dask.base import get_scheduler

    scheduler = get_scheduler()
    client = getattr(scheduler, "__self__", None)
    if client is not None and type(client).__name__ == "Client":
        from distributed.comm import get_address_host

        hosts = {}
        for address, n in client.nthreads().items():
            host = get_address_host(address)
            hosts[host] = hosts.get(host, 0) + n
        return hosts
    import dask.local

    if scheduler is dask.local.get_sync:
        return numba.config.NUMBA_NUM_THREADS
    pool = dask.config.get("num_workers", None) or numba.config.NUMBA_NUM_THREADS
    return max(1, numba.config.NUMBA_NUM_THREADS // int(pool))


def _task_threads(plan):
    """Numba threads for this task (runs on the worker)."""
    if not isinstance(plan, dict):
        return plan
    try:
        from distributed import get_worker
        from distributed.comm import get_address_host

        total = plan.get(get_address_host(get_worker().address))
    except (ImportError, ValueError):  # not on a distributed worker
        total = None
    return max(1, numba.config.NUMBA_NUM_THREADS // total) if total else 1


# -- block tasks (module level: they pickle by reference) ---------------------


def block_statistics(Y, prepared, row_start, n_candidates, key, chunk_size, threads):
    """Encode one block and return its :class:`SufficientStatistics`.

    ``row_start`` is the block's first global row: it addresses the
    reservoir keys, so the candidates do not depend on the blocks.
    """
    Y = _check_block(Y, row_start, prepared.dtype)
    stats = SufficientStatistics(prepared.n_atoms, Y.shape[1], n_candidates, key=key, row_start=row_start)
    with numba_threads(_task_threads(threads)):
        run_epoch(Y, prepared, max(1, min(chunk_size, Y.shape[0])), stats=stats)
    return stats


def merge_statistics(*parts):
    """Sum partial statistics, in the order given."""
    total = parts[0]
    for part in parts[1:]:
        total.merge(part)
    return total


def encode_block(Y, prepared, row_start, chunk_size, threads, statistics=False):
    """Codes (``scipy.sparse.csr_array``) of one block under a fitted
    dictionary prepared on the client; with ``statistics``, a pair of the
    codes and their :class:`SufficientStatistics` (no re-seed candidates)."""
    Y = _check_block(Y, row_start, prepared.dtype)
    stats = SufficientStatistics(prepared.n_atoms, Y.shape[1]) if statistics else None
    with numba_threads(_task_threads(threads)):
        codes = encode_prepared(Y, prepared, chunk_size, stats=stats)
    return (codes, stats) if statistics else codes


def embed_block(codes, projection):
    """Row-normalised spectral embedding of one block of codes, on one
    Numba thread (Dask runs the blocks side by side)."""
    with numba_threads(1):
        return embedding_rows(codes, projection)


def _with_threads(model, threads):
    """A shallow copy of a fitted clusterer running on this task's share of
    threads, on the CPU (the workers run the CPU kernels)."""
    model = copy.copy(model)
    model.n_jobs = _task_threads(threads)
    model.device = "cpu"
    model.kds_ = copy.copy(model.kds_)
    model.kds_.n_jobs = model.n_jobs
    model.kds_.device = "cpu"
    return model


def transform_block(model, Y, threads):
    """``model.transform`` of one block (the model is a fitted KDSClustering)."""
    return _with_threads(model, threads).transform(Y)


def vote_block(label_vote, Y, threads):
    """The neighbours' vote on one block of data."""
    return label_vote.predict(np.ascontiguousarray(Y), n_jobs=_task_threads(threads))  # checked by the fit's encoding


def predict_block(model, Y, threads):
    """``model.predict`` of one block."""
    return _with_threads(model, threads).predict(Y)


# -- graph helpers -----------------------------------------------------------


def _as_key(obj, prefix):
    """``obj`` as one key of the graph: sent to the scheduler once, copied to
    the workers that need it once, whatever the number of tasks."""
    from dask import delayed

    return delayed(obj, name=f"{prefix}-{uuid.uuid4().hex}", traverse=False)


def _blocks(Y):
    """The row blocks of ``Y`` as Delayed objects with their first row."""
    blocks = Y.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(Y.chunks[0])[:-1]]).astype(np.int64)
    return list(zip(blocks, (int(s) for s in starts), Y.chunks[0]))


def tree_merge(parts, split_every=None):
    """A tree of :func:`merge_statistics` tasks over ``parts`` (in order),
    ``split_every`` (default :data:`fastkds._config.DASK_SPLIT_EVERY`) a task."""
    from dask import delayed

    split_every = split_every or _config.DASK_SPLIT_EVERY
    while len(parts) > 1:
        parts = [
            delayed(merge_statistics, pure=False)(*parts[i : i + split_every])
            for i in range(0, len(parts), split_every)
        ]
    return parts[0]


def _lean_model(est):
    """A shallow copy of a fitted clusterer without its per-training-point
    attributes (labels, embedding), so a task graph does not carry them."""
    model = copy.copy(est)
    for name in ("labels_", "embedding_"):
        model.__dict__.pop(name, None)
    model.kmeans_ = copy.copy(model.kmeans_)
    model.kmeans_.__dict__.pop("labels_", None)
    return model


def _on_workers(encoder, Y):
    """What the block tasks of ``encoder`` on ``Y`` share: its dictionary
    prepared once on the client for the CPU kernels, as one graph key, and
    the rows they encode at once."""
    from ._backends import CpuBackend

    cpu = CpuBackend()
    prepared = _as_key(encoder.prepare(cpu, Y.dtype), "fastkds-dictionary")
    return prepared, encoder.rows_per_chunk(cpu, Y.shape[1])


class DaskBackend:
    """Runs :func:`fastkds.solvers.fit_alternating`'s epochs on a Dask array.

    The dictionary is prepared on the client (an m x m eigenproblem) and
    sent as one graph key per epoch; each block returns its statistics;
    a tree reduction sums them into the client's statistics object.

    Parameters
    ----------
    threads : int or dict
        From :func:`thread_plan`.
    """

    name = "dask"

    def __init__(self, threads):
        from ._backends import CpuBackend

        self._cpu = CpuBackend()
        self.threads = threads

    def prepare(self, W, lam, n_iter, dtype, step="centred", encoder="apg"):
        return self._cpu.prepare(W, lam, n_iter, dtype, step, encoder)

    def chunk_size(self, n_features, n_atoms, itemsize):
        return self._cpu.chunk_size(n_features, n_atoms, itemsize)

    def allocate(self, prepared, chunk_size):
        return None  # each task allocates its own

    def run_epoch(self, Y, prepared, chunk_size, stats=None, buffers=None, codes_out=None):
        from dask import delayed

        if codes_out is not None:
            raise NotImplementedError("the Dask backend keeps codes on the workers")
        n_candidates = stats.n_candidates if stats is not None else 0
        key = stats.key if stats is not None else None
        prep = _as_key(prepared, "fastkds-dictionary")
        parts = [
            delayed(block_statistics, pure=False)(blk, prep, start, n_candidates, key, chunk_size, self.threads)
            for blk, start, _ in _blocks(Y)
        ]
        total = tree_merge(parts).compute()
        if stats is not None:
            stats.merge(total)
            return stats
        return total


# -- estimator entry points --------------------------------------------------


def check_device(device):
    """Refuse a device the workers cannot run (they run the CPU kernels)."""
    from ._backends import DEVICES

    check_choice(device, "device", DEVICES)
    if device == "cuda":
        raise ValueError(
            "device='cuda' is not supported with a dask array: the workers run the CPU "
            "kernels; use device='cpu' (or 'auto')"
        )


def persist(Y):
    """``Y`` kept in the workers' memory: the epochs read every block many
    times. Unfused, so the user's annotations (retries=...) stay on the tasks."""
    return Y.persist(optimize_graph=False)


class _RowGatherer:
    """A Dask array seen by :func:`fastkds.warmstart.initial_dictionary`
    with ``init="random"`` or an array: indexing gathers only the rows asked for."""

    def __init__(self, Y):
        self._Y = Y
        self.shape = Y.shape
        self.dtype = Y.dtype

    def __getitem__(self, idx):
        return _gather_rows(self._Y, idx)


def _gather_rows(Y, idx):
    """Rows ``idx`` (sorted) of a Dask array, in memory; refuses NaN/inf."""
    rows = np.ascontiguousarray(Y[idx if isinstance(idx, slice) else np.asarray(idx)].compute())
    if not np.isfinite(rows).all():
        raise ValueError("Input X contains NaN or infinity")
    return rows


def fit_dictionary(Y, p, *, init, presample, random_state, display, last_epoch=None):
    """The exact solver's fit on a checked Dask array: the in-memory fit's
    plan (:mod:`fastkds.warmstart`), with the warm-start samples gathered to
    the client and the epochs on all points run on the workers.

    Parameters
    ----------
    Y : dask.array.Array
        From :func:`check_dask_array`.
    p : dict
        The estimator's validated fit parameters.
    init, presample, random_state :
        The estimator's parameters.
    display : estimator
        Whose ``verbose`` sets the epoch display.
    last_epoch : fastkds.solvers.LastEpoch or None, default=None
        A clusterer's, keeping no codes (they stay on the workers): the fit
        then ends on the dictionary its last epoch encoded with, as in memory.

    Returns
    -------
    dict
        The fitted attributes (see :func:`fastkds.warmstart.fit_stages`).
    """
    if p.get("solver", "exact") != "exact":
        raise ValueError(
            f"solver={p['solver']!r} trains on shuffled mini-batches in memory; with a dask "
            "array use solver='exact', or compute the array first"
        )
    n, d = Y.shape
    n_pre = warmstart.presample_size(presample, p["n_atoms"], n)
    p = {**p, "n_atoms": fit_n_atoms(n, p["n_atoms"], init)}
    rng = check_random_state(random_state)
    Y = persist(Y)

    def take(rows):
        return _gather_rows(Y, rows)

    def seeding_points():
        if not (isinstance(init, str) and init == "k-means++"):
            return _RowGatherer(Y)  # "random" gathers its m rows; an array init none
        if n * d * Y.dtype.itemsize <= _config.LOAD_WHOLE_BYTES:
            return take(slice(None))  # small: seed on all points, as in memory
        return warmstart.seeding_sample(take, rng, n, p["n_atoms"])  # too large to gather

    from ._backends import CpuBackend

    # the subsamples are in memory on the client; all points stay on the workers
    return warmstart.fit_exact(
        Y,
        p,
        n_pre,
        init,
        rng,
        take=take,
        seeding_points=seeding_points,
        backend=DaskBackend(thread_plan(p["n_jobs"])),
        sample_backend=CpuBackend(),
        display=display,
        last_epoch=last_epoch,
    )


class ClusteringResults:
    """The codes, embedding and labels of a clustering fit on a Dask array
    (the in-memory fit's :class:`fastkds.spectral.ClusteringResults`).

    One block-wise pass keeps each block's codes on the workers and reduces
    ``X^T X`` and ``s`` for the spectral step; the embedding of each block
    comes to the client for k-means (n x n_clusters numbers; the data and
    the codes stay put). :meth:`commit` gives Dask arrays chunked like the data.

    Parameters
    ----------
    Y : dask.array.Array
        Checked and persisted.
    encoder : fastkds.encoding.FittedEncoder
        The fitted dictionary model's encoder.
    n_jobs : int or None
        Threads per task (checked), or None to share the cores (:func:`thread_plan`).
    """

    def __init__(self, Y, encoder, n_jobs):
        self.n = Y.shape[0]
        self._Y = Y
        self._encoder = encoder
        self._threads = thread_plan(n_jobs)
        self._pairs = None
        self._embedding = self._labels = None

    def encode(self):
        """Encode every block where it lives; return the reduced statistics."""
        import dask
        from dask import delayed

        prepared, chunk_size = _on_workers(self._encoder, self._Y)
        pairs = [
            delayed(encode_block, pure=False)(blk, prepared, start, chunk_size, self._threads, statistics=True)
            for blk, start, _ in _blocks(self._Y)
        ]
        self._pairs = dask.persist(*pairs)  # codes stay on the workers for the embedding
        return tree_merge([delayed(operator.getitem)(p, 1) for p in self._pairs]).compute()

    def embed(self, projection, sample):
        """Embed each block on its worker and gather the embedding; return
        its rows ``sample``."""
        import dask.array as da
        from dask import delayed

        P = _as_key(projection, "fastkds-projection")
        blocks = [
            da.from_delayed(
                delayed(embed_block, pure=False)(delayed(operator.getitem)(p, 0), P),
                shape=(rows, projection.shape[1]),
                dtype=np.float64,
            )
            for p, (_, _, rows) in zip(self._pairs, _blocks(self._Y))
        ]
        self._embedding = np.ascontiguousarray(da.concatenate(blocks, axis=0).compute())
        self._pairs = None  # the codes on the workers are no longer needed
        return self._embedding[sample]

    def label(self, kmeans):
        """The nearest centre of every embedded point."""
        self._labels = self.kmeans_labels(kmeans)

    def kmeans_labels(self, kmeans):
        """Every point's nearest centre of ``kmeans``."""
        return kmeans.predict(self._embedding)

    def write_labels(self, chunks):
        """The label of every point, given as arrays of consecutive rows."""
        self._labels = np.concatenate(list(chunks))

    def vote(self, label_vote):
        """The label ``label_vote`` (a :class:`fastkds.label_vote.LabelVote`)
        gives every point, each block voted on its worker."""
        import dask.array as da
        from dask import delayed

        V = _as_key(label_vote, "fastkds-vote")
        blocks = [
            da.from_delayed(delayed(vote_block, pure=False)(V, blk, self._threads), shape=(rows,), dtype=np.int32)
            for blk, _, rows in _blocks(self._Y)
        ]
        self._labels = np.ascontiguousarray(da.concatenate(blocks).compute())

    def commit(self):
        """``(labels, embedding)`` as Dask arrays chunked like the data."""
        import dask.array as da

        chunks = self._Y.chunks[0]
        return (
            da.from_array(self._labels, chunks=(chunks,)),
            da.from_array(self._embedding, chunks=(chunks, self._embedding.shape[1])),
        )

    def abort(self):
        """Nothing to remove: the results are in memory."""


def transform_kds(est, X, encoder, out=None):
    """:meth:`KDS.transform` on a Dask array: a lazy Dask array of
    ``scipy.sparse.csr_array`` blocks (n x n_atoms, chunked like ``X``).
    ``.compute()`` joins them into one CSR array.

    Parameters
    ----------
    est : KDS
        The fitted model, whose ``n_features_in_`` ``X`` must have.
    X : dask.array.Array
    encoder : fastkds.encoding.FittedEncoder
        The model's encoder; the tasks receive its prepared dictionary.
    out : None
        Refused: for a Dask array the codes are a Dask array already.
    """
    import dask.array as da
    from dask import delayed

    if out is not None:
        raise ValueError(
            "out= writes in-memory codes to a folder; for a dask array the codes are a "
            "dask array already (store its blocks with dask, e.g. to_delayed())"
        )
    Y = check_dask_array(X, est.n_features_in_, est)
    threads = thread_plan(encoder.n_jobs)
    prepared, chunk_size = _on_workers(encoder, Y)
    meta = sp.csr_array((0, encoder.n_atoms), dtype=Y.dtype)
    blocks = [
        da.from_delayed(
            delayed(encode_block, pure=False)(blk, prepared, start, chunk_size, threads),
            shape=(rows, encoder.n_atoms),
            dtype=Y.dtype,
            meta=meta,
        )
        for blk, start, rows in _blocks(Y)
    ]
    return da.concatenate(blocks, axis=0)


def objective_kds(est, X, encoder):
    """:meth:`KDS.objective` on a Dask array (objective sums reduced, computed
    now); the parameters as for :func:`transform_kds`."""
    from dask import delayed

    Y = check_dask_array(X, est.n_features_in_, est)
    threads = thread_plan(encoder.n_jobs)
    prepared, chunk_size = _on_workers(encoder, Y)
    parts = [
        delayed(block_statistics, pure=False)(blk, prepared, start, 0, None, chunk_size, threads)
        for blk, start, _ in _blocks(Y)
    ]
    return tree_merge(parts).compute().mean_objective


def _map_model(est, X, func, n_cols, dtype):
    import dask.array as da
    from dask import delayed

    Y = check_dask_array(X, est.n_features_in_, est)
    model = _as_key(_lean_model(est), "fastkds-model")
    threads = thread_plan(check_n_jobs(est.n_jobs))
    blocks = [
        da.from_delayed(
            delayed(func, pure=False)(model, blk, threads),
            shape=(rows,) if n_cols is None else (rows, n_cols),
            dtype=dtype,
        )
        for blk, _, rows in _blocks(Y)
    ]
    return da.concatenate(blocks, axis=0)


def transform_clustering(est, X):
    """:meth:`KDSClustering.transform` on a Dask array: lazy, block-wise."""
    return _map_model(est, X, transform_block, est.spectrum_.n_columns(est.n_clusters_), np.float64)


def predict_clustering(est, X):
    """:meth:`KDSClustering.predict` on a Dask array: lazy labels, block-wise."""
    return _map_model(est, X, predict_block, None, np.int32)

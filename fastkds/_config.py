"""Thread control and memory-budget defaults shared by the wrappers."""

import functools
import numbers
import threading
from contextlib import contextmanager, nullcontext

import numba
import numpy as np
from threadpoolctl import ThreadpoolController

# Numba's workqueue threading layer is not thread-safe: two Python threads
# running parallel kernels at once abort the process. Under it, kernel calls
# take this lock and run one at a time (reentrant: a call may nest another).
_WORKQUEUE_LOCK = threading.RLock()

#: Bytes of working memory a chunk may use by default (codes buffer + data copy).
CHUNK_MEMORY_BUDGET = 64 * 2**20

#: Data read in chunks (or a Dask array) up to this many bytes are loaded
#: whole where a fit needs all of them at once (k-means++ without a
#: warm-start subsample); the largest warm-start subsample stays below it.
LOAD_WHOLE_BYTES = 256 * 2**20

#: The warm-start subsample of ``presample="auto"``: ``max(PRESAMPLE_MIN,
#: PRESAMPLE_PER_ATOM * n_atoms)`` points (enough for every atom to be fitted
#: on many), taken when the data hold at least ``PRESAMPLE_FACTOR`` times as
#: many (below that the full passes cost little more than the subsample's).
PRESAMPLE_MIN = 20_000
PRESAMPLE_PER_ATOM = 200
PRESAMPLE_FACTOR = 5

#: ``encoder="auto"`` takes the exact codes up to this ``lam``
#: (:func:`fastkds._backends.resolve_encoder`): a point between two atoms
#: codes with both within a band ``1 / (1 + 2 lam)`` of their distance wide,
#: so from lam = 1 down at least a third of such points link the two atoms
#: in the code graph, and past it ever fewer do.
EXACT_CODES_MAX_LAM = 1.0

#: ... and the clusterers' ``encoder="auto"`` takes them where the data hold
#: at least this many points an atom
#: (:func:`fastkds._backends.clustering_encoder`): at lam = 1, 20 of them in
#: the bands whose codes link the atom to a neighbour, so that the code
#: graph's weights are sums over many points, not a few.
EXACT_CODES_MIN_POINTS_PER_ATOM = 60

#: The exact fit of in-memory data with at least this many features a
#: point runs on the points' coordinates in their own span
#: (:class:`fastkds.warmstart.DataSpan`): the same fit, on n features
#: instead of d. Below it the Gram matrix of the points costs about what
#: the features it saves do (docs/scaling.md, "Many more features than
#: points").
SPAN_FEATURES_PER_POINT = 20

#: Bytes of the centred columns :class:`fastkds.warmstart.DataSpan` forms at
#: once, in one buffer (a few MiB: larger blocks were slower, their pages
#: faulted in afresh).
SPAN_BLOCK_BYTES = 4 * 2**20

#: ``n_atoms="auto"`` of :class:`fastkds.KDSClustering`: about sqrt(n) atoms,
#: within these bounds (see :func:`fastkds._validation.auto_n_atoms`).
AUTO_ATOMS_MIN = 16
AUTO_ATOMS_PER_CLUSTER = 4
AUTO_ATOMS_MAX = 100

#: Bytes allowed for the per-part partial statistics of one chunk
#: (:class:`fastkds.solvers.SufficientStatistics`).
STATISTICS_PARTS_BUDGET = 64 * 2**20

#: The unrolled solver's gradient reduction: points per part, and the memory
#: the parts may use.
UNROLLED_PART_POINTS = 64
UNROLLED_PARTS_BUDGET = 32 * 2**20

#: Bytes of a file mapped at once by :meth:`fastkds.diskcodes.NpyRows.take`.
TAKE_WINDOW_BYTES = 64 * 2**20

#: The embeddings k-means may cluster (the clusterers' ``embedding``;
#: :class:`fastkds.spectral.BipartiteSpectrum`).
EMBEDDINGS = ("diffusion", "leading")

#: k-means is fitted on at most this many embedded points; the rest are
#: labelled by their nearest centre. In the row-normalised embedding the
#: clusters are tight and far apart, so the centres are found as well from a
#: sample, and memory and time stay small for 10^7 points.
KMEANS_SAMPLE = 200_000

#: Where k-means clusters more embedded points than
#: ``max(KMEANS_RESTART_MIN, KMEANS_RESTART_PER_CLUSTER * k)``, its
#: ``n_init`` restarts run on a sample of that many and one Lloyd run on
#: all of them refines the best (:func:`fastkds.spectral.fit_kmeans`):
#: restarts guard against a poor seeding, which a hundred points a
#: cluster already expose, and each costs as much as the final run.
KMEANS_RESTART_MIN = 10_000
KMEANS_RESTART_PER_CLUSTER = 100

#: The neighbours' vote of the clusterers (``vote_neighbors``;
#: :mod:`fastkds.label_vote`): references per atom (every point up to that
#: many, else a sample: a point's search then costs about
#: ``VOTE_PROBE_ATOMS * VOTE_REFERENCES_PER_ATOM`` distances whatever n), the
#: nearest atoms whose cells hold a point's candidates (more where the cells
#: are smaller: :func:`fastkds.label_vote.probe_count`), and the rounds of
#: the references' own vote.
VOTE_REFERENCES_PER_ATOM = 100
VOTE_PROBE_ATOMS = 4
#: In more features than ``fastkds._vote_kernels.FEW_FEATURES`` a screened
#: search reads this many times the cells: there the nearest references of
#: a point by a boundary between clusters spread over more cells
#: (docs/experiments.md, "Ranked votes and a wider screen").
VOTE_PROBE_WIDEN = 3
VOTE_MAX_ROUNDS = 20
#: Pieces that a narrower graph of the references falls into, at r
#: neighbours, are weighed against the k-means labels by their cut of the
#: graph of min(q, VOTE_PIECES_REACH * r) neighbours (docs/experiments.md,
#: "Pieces judged near their own reach").
VOTE_PIECES_REACH = 3

#: The vote screens its search by the atoms only where that reads fewer
#: than 1 / VOTE_SCREEN_SAVING of the distances an exact search reads
#: (:func:`fastkds.label_vote.probe_count`); else it reads every cell. A
#: screened search misses a few nearest neighbours, and a missed one can
#: join two pieces of the data, so it must pay for itself in time: below
#: about 4,000 references with the default atoms it saves too little.
VOTE_SCREEN_SAVING = 8

#: The vote takes the references' own graph for its labels where the
#: k-means labels put more than this share of an even split (``n_references
#: / n_clusters``) outside the graph's pieces (:mod:`fastkds.label_vote`):
#: fewer are a stray group, not a cluster the code graph joined to another.
VOTE_STRAY_SHARE = 0.1

#: The vote takes the references' own graph for its labels where the
#: k-means labels cut it (:func:`fastkds.label_vote.normalised_cut`) by more
#: than this share of what labels drawn at random would, ``n_clusters - 1``:
#: labels nearer random than any partition the graph supports, the code
#: graph having failed at the points' resolution.
VOTE_RANDOM_CUT = 0.5

#: Up to this many references the eigenvalues of their graph
#: (:func:`fastkds.label_vote._clearer`) come from a dense solver: below it
#: the dense matrix is small and ARPACK's set-up dominates.
VOTE_DENSE_EIGEN = 500

#: From this many atoms the largest eigenvalue of a dictionary's Gram
#: matrix (the encoder's step, :func:`fastkds.prepared.top_eigenvalue`)
#: comes from Lanczos iterations: below it the whole spectrum costs less
#: than ARPACK's set-up (docs/experiments.md, "The step from Lanczos").
GRAM_LANCZOS_ATOMS = 192

#: Restarts Lanczos may spend on that eigenvalue before the whole spectrum
#: is computed instead: about the cost of that spectrum at 500 atoms.
GRAM_LANCZOS_RESTARTS = 10

#: Products with the references' graph that Lanczos may spend on its
#: spectrum (:func:`fastkds.label_vote._laplacian_spectrum`) before
#: shift-invert takes over: a few hundred where the graph is of
#: high-dimensional data, thousands where its small eigenvalues crowd near 0.
VOTE_LANCZOS_PRODUCTS = 500

#: Relative accuracy at which that Lanczos stops (ARPACK's ``tol``; 0, its
#: default, is machine precision). Its eigenvectors feed k-means and its
#: eigenvalues an eigengap ratio, neither of which can tell apart what
#: lies below it, and machine precision costs two-thirds more products
#: (docs/experiments.md, "The eleventh session").
VOTE_LANCZOS_TOL = 1e-8

#: Rows of the embedding labelled (or codes embedded) at once by the last
#: passes of a clustering fit.
LABEL_CHUNK = 1 << 17

#: Partial statistics merged per task of the Dask tree reduction.
DASK_SPLIT_EVERY = 8

# The CUDA path (fastkds.gpu): launch settings and device-memory budgets, all
# passed to the kernels as arguments. A kernel's compile-time constants stay
# with it: WARP_MAX_ATOMS and SCAN_MAX_THREADS in fastkds._cuda_kernels,
# COPY_BLOCK in fastkds._host_copies.

#: Bytes of device memory per buffer set (data, ``B``, dense codes, CSR) by
#: default, when a twelfth of the free device memory is not less.
CUDA_CHUNK_BUDGET = 512 * 2**20

#: Bytes of device memory for the thread encoder's per-thread scratch.
CUDA_SCRATCH_BUDGET = 512 * 2**20

#: Bytes of device memory for the GPU statistics' per-part partial sums.
CUDA_PARTIALS_BUDGET = 256 * 2**20

#: Rows per part of the GPU statistics' reduction. Fixed (not derived from the
#: launch) so that the order of every sum is a property of the data alone.
CUDA_STATS_ROWS = 256

#: Threads per block of the thread encoder (register-heavy) and of the other
#: grid-stride kernels; warps per block of the warp encoder.
CUDA_ENCODE_THREADS = 128
CUDA_THREADS = 256
CUDA_WARPS_PER_BLOCK = 4

#: The device prefix sum: threads per block (at most
#: ``_cuda_kernels.SCAN_MAX_THREADS``) and rows per thread.
CUDA_SCAN_THREADS = 256
CUDA_SCAN_ITEMS = 8

#: Grid-stride loops cover any size; this caps the blocks of one launch.
CUDA_MAX_BLOCKS = 1 << 16

#: Buffer sets (streams) the GPU pipelines keep in flight: while the host
#: takes one chunk's codes, the GPU encodes the next ones.
CUDA_BUFFER_SETS = 3

#: ``kernel="auto"`` takes the warp encoder from this many atoms on (the
#: thread encoder below). Chosen by measurement: see docs/gpu.md.
CUDA_WARP_MIN_ATOMS = 1

#: The warp encoders read ``B = Y W^T`` formed first by the tiled product
#: kernel from this many features on, and form it themselves below: a point's
#: products then re-read all of ``W^T``, while the tiles read it once per 64
#: rows. Not yet measured on a GPU (docs/gpu.md says how to).
CUDA_PRODUCTS_MIN_FEATURES = 32


def effective_n_jobs(n_jobs):
    """Map scikit-learn style ``n_jobs`` to a Numba thread count.

    ``None`` and ``-1`` mean all threads Numba was started with; ``-2`` all but
    one, and so on; a positive value is capped at that maximum.
    """
    max_threads = numba.config.NUMBA_NUM_THREADS
    if n_jobs is None:
        return max_threads
    # NumPy integers count, as for every integer parameter; bools do not
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be an int or None, got {type(n_jobs).__name__} {n_jobs!r}")
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None, -1 or a positive int")
    if n_jobs < 0:
        return max(1, max_threads + 1 + n_jobs)
    return min(n_jobs, max_threads)


@functools.cache
def _blas_controller():
    """One ``ThreadpoolController`` for the process: building one scans the
    loaded libraries (about 4 ms, as long as encoding a few thousand points).

    SciPy's BLAS is loaded first: Numba's ``np.dot`` in the kernels calls
    it (through ``scipy.linalg.cython_blas``), and it may not be loaded yet
    when the first kernel runs, where a controller built then would leave
    it free to start its own threads beside Numba's."""
    import scipy.linalg.cython_blas  # noqa: F401

    return ThreadpoolController()


def single_thread_blas():
    """Hold BLAS to one thread in the enclosed code (see :func:`numba_threads`)."""
    return _blas_controller().limit(limits=1, user_api="blas")


@functools.cache
def _kmeans_controller():
    """A ``ThreadpoolController`` that sees the OpenMP runtime scikit-learn's
    k-means runs on, which loads with ``sklearn.cluster`` (perhaps after
    :func:`_blas_controller` scanned the libraries)."""
    import sklearn.cluster  # noqa: F401

    return ThreadpoolController()


def single_thread_kmeans():
    """Hold scikit-learn's k-means to one OpenMP thread in the enclosed code.

    Its problems here are small (k columns of an embedding), and its OpenMP
    runtime is not Numba's: the threads of each spin for a while after a
    parallel region, so run between the kernels on two threads the two
    pools take each other's cores (the vote's k-means of MNIST-5 at the
    paper's settings: 0.03 s on one thread, 0.03-0.13 s on two;
    docs/experiments.md, "The two-thread fit's serial part").
    """
    return _kmeans_controller().limit(limits=1, user_api="openmp")


@contextmanager
def numba_threads(n_jobs):
    """Run the enclosed kernels on ``n_jobs`` Numba threads, then restore.

    BLAS is held to one thread meanwhile: its calls here are small per chunk,
    and OpenBLAS threads spin after each call, stealing the cores the
    parallel kernels run on (measured: a third slower encoding on 2 cores).
    For the same reason a dictionary's preparation holds BLAS to one thread
    wherever it runs (:class:`fastkds.prepared.PreparedDictionary`).

    Under Numba's ``workqueue`` threading layer the enclosed kernels hold a
    process-wide lock, so concurrent callers run one after another instead
    of aborting the process; ``omp`` and ``tbb`` run them concurrently.
    """
    n_threads = effective_n_jobs(n_jobs)
    # get_num_threads starts Numba's thread pool, which fixes the layer
    previous = numba.get_num_threads()
    serialise = numba.threading_layer() == "workqueue"
    with _WORKQUEUE_LOCK if serialise else nullcontext():
        numba.set_num_threads(n_threads)
        try:
            with single_thread_blas():
                yield
        finally:
            numba.set_num_threads(previous)


def default_chunk_size(n_features, n_atoms, itemsize):
    """Rows per chunk so that a chunk's encoder buffers (``Y W^T``, the code
    slots: values and int32 atom indices) and data fit the budget."""
    per_row = (n_atoms * 2 + n_features + 4) * itemsize + n_atoms * 4
    return int(min(1 << 17, max(1024, CHUNK_MEMORY_BUDGET // per_row)))

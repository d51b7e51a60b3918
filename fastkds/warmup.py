"""Compile (or load from the cache) every CPU kernel before timing-sensitive work.

Numba compiles a kernel on its first call for each dtype, a few seconds each
(``cache=True`` stores the result, so later processes only load it, ~0.3 s).
:func:`warmup` pays that cost up front: call it in a benchmark before the
clock starts, or in each Dask worker before the first task.
"""

import time
import warnings

import numpy as np


#: Atoms of warmup's statistics of many atoms (past the partial buffers'
#: size, :func:`fastkds.solvers.statistics_by_atom`).
_BY_ATOM_ATOMS = 192


def warmup(dtypes=(np.float64, np.float32)):
    """Compile or load the encoders, CSR, statistics, projection and vote kernels.

    Runs, for each dtype, tiny encodings (both encoders, with few and with
    many features, to CSR and to dense codes), a CSR assembly from dense
    codes, a fit and clustering by the exact solver (with the neighbours'
    vote) and one epoch of the unrolled solver: every kernel a fit,
    ``transform``, ``predict`` or ``partial_fit`` calls. Idempotent and
    cheap once done (the kernels stay loaded in the process).

    Parameters
    ----------
    dtypes : sequence of {numpy.float64, numpy.float32}
        The dtypes to prepare, both by default.

    Returns
    -------
    seconds : float
        Time spent (compilation, or loading from Numba's cache).
    """
    from . import _kernels, _vote_kernels
    from .encoding import project_simplex, sparse_encode
    from .prepared import PreparedDictionary, csr_from_dense
    from .estimators import KDS, KDSClustering
    from .label_vote import LabelVote
    from .solvers import SufficientStatistics
    from .sources import random_rows

    # Each call below reaches kernels no other call does (tests/test_warmup.py
    # names every kernel Python code calls and checks each gets a signature):
    # the projection; both encoders with many features (the per-point path);
    # the accelerated encoder with far atoms (may_use_far, gather_block,
    # scatter_slots); dense codes and their CSR assembly (slots_to_dense,
    # fill_csr); the exact solver with few features and the accelerated
    # encoder (lockstep encoder, statistics, k-means++ seeding) and the
    # clusterer's neighbours' vote (an exact search of short rows, its
    # cells pruned: search_pruned, cell_radii); the statistics of many
    # atoms and features (accumulate_statistics_by_atom); the
    # vote's search with few features in probed cells, with many features in
    # cells of many references and of few, and for a point whose probed
    # cells are empty; the unrolled solver (unrolled_batch,
    # adam_update); a sample of rows of many (first_distinct).
    t0 = time.perf_counter()
    random_rows(np.random.RandomState(0), 1000, 10)
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(64, 2))
    # past the lockstep encoder's few features, and past SMALL_D (BLAS products)
    Y8 = rng.normal(size=(64, _kernels.SMALL_D + 1))
    Y40 = rng.normal(size=(64, _vote_kernels.FEW_FEATURES + 1))
    for dtype in dtypes:
        dtype = np.dtype(dtype)
        if dtype not in (np.float64, np.float32):
            raise ValueError(f"dtypes must be float64 or float32, got {dtype}")
        Yd = Y.astype(dtype)
        project_simplex(Yd, method="michelot")
        project_simplex(Yd, method="sorted")
        Y8d = Y8.astype(dtype)
        for encoder in ("apg", "active-set"):
            sparse_encode(Y8d, Y8d[:4], n_iter=3, encoder=encoder)
        # two atoms far out from ten: the far-atom split's kernels
        sparse_encode(Y8d, np.vstack([Y8d[:10], Y8d[:2] + 20]), n_iter=3, encoder="apg")
        codes, _ = PreparedDictionary(Y8d[:4], 1.0, 3, dtype).encode_dense(Y8d)
        csr_from_dense(codes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            KDSClustering(2, n_atoms=4, n_iter=3, encoder="apg", max_epochs=2, n_init=1, random_state=0).fit(Yd)
            KDS(4, n_iter=3, solver="unrolled", max_epochs=1, batch_size=32, random_state=0).fit(Yd)
        # few features, cells probed (the clusterer's few references search exactly)
        LabelVote(Yd[:16], Yd, np.arange(64) % 2, 5, 2, n_probe=2).predict(Yd)
        Y40d = Y40.astype(dtype)
        # statistics of many atoms and features, formed atom by atom
        SufficientStatistics(_BY_ATOM_ATOMS, Y40d.shape[1]).add_chunk(
            *csr_from_dense(np.eye(Y40d.shape[0], _BY_ATOM_ATOMS, dtype=dtype)), Y40d, np.ones(64, dtype)
        )
        for n_atoms in (2, 16):  # 32 and 4 references a cell
            LabelVote(Y40d[:n_atoms], Y40d, np.arange(64) % 2, 5, 2).predict(Y40d)
        # a point by atom 1, whose cell is empty, probes further
        LabelVote(np.vstack([Y40d[:1], Y40d[:1] + 50]), Y40d[:1], [0], 1, 1, n_probe=1).predict(Y40d[:1] + 60)
    return time.perf_counter() - t0

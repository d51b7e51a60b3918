"""Numba kernels of the neighbours' vote (:mod:`fastkds.label_vote`).

Each point's nearest reference points are searched among the points of its
nearest atoms' cells (a reference belongs to the cell of its nearest atom, found by
:func:`probe_atoms` too),
so a search costs a point about ``n_probe`` cells' references, however many
points there are. A point's distance to a reference is a direct sum of
squared differences in float64 (no cancellation, as the k-means++
seeding's), computed by one function for every pair, and every choice
between equal distances goes to the smaller index, so the neighbours of a
point do not depend on the chunk it comes in, the points beside it or the
number of threads.

:func:`_sq_distance`, :func:`_insert` and :func:`_probe_atoms` are also
compiled as device functions of the CUDA vote (:mod:`fastkds._cuda_kernels`),
so each is a leaf that only indexes the arrays it is given, as the helpers
of :mod:`fastkds._shared_kernels` are.
"""

import numpy as np
from numba import njit, prange

#: Points per block of the parallel loops (each block allocates its scratch once).
BLOCK = 256

#: Up to this many features a point reads its candidates itself; past it,
#: the points of a group share each reference's read (:func:`nearest_references`).
FEW_FEATURES = 32


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _sq_distance(A, i, B, j):
    """``||A[i] - B[j]||^2`` in float64, from the differences."""
    acc = 0.0
    for t in range(A.shape[1]):
        diff = np.float64(A[i, t]) - np.float64(B[j, t])
        acc += diff * diff
    return acc


@njit(cache=True, nogil=True)
def _insert(dist, idx, d, j):
    """Put ``(d, j)`` into the ascending lists ``dist``, ``idx`` (by
    distance, then index; an empty slot has index -1) if it goes before
    their last entry."""
    p = dist.shape[0] - 1
    if not (idx[p] < 0 or d < dist[p] or (d == dist[p] and j < idx[p])):
        return
    while p > 0 and (idx[p - 1] < 0 or d < dist[p - 1] or (d == dist[p - 1] and j < idx[p - 1])):
        dist[p] = dist[p - 1]
        idx[p] = idx[p - 1]
        p -= 1
    dist[p] = d
    idx[p] = j


@njit(cache=True, nogil=True)
def _probe_atoms(atom_dist, probe):
    """The ``probe.shape[0]`` atoms of smallest ``atom_dist`` into ``probe``,
    nearest first (ties: smaller index); the chosen entries of ``atom_dist``
    are set to inf, so a further call continues with the next ones."""
    m = atom_dist.shape[0]
    for p in range(probe.shape[0]):
        a = 0
        for b in range(1, m):
            if atom_dist[b] < atom_dist[a]:
                a = b
        probe[p] = a
        atom_dist[a] = np.inf


@njit(cache=True, nogil=True)
def _search_one(Y, i, W, R, cell_start, cell_refs, n_probe, best_dist, best_idx):
    """The plain search of one point (:func:`nearest_references`' rule),
    probing atoms nearest first until ``n_probe`` are probed and a cell
    held a reference."""
    m = W.shape[0]
    atom_dist = np.empty(m)
    for a in range(m):
        atom_dist[a] = _sq_distance(Y, i, W, a)
    one = np.empty(1, dtype=np.int64)
    found = 0
    for p in range(m):
        if p >= n_probe and found > 0:
            break
        _probe_atoms(atom_dist, one)
        for t in range(cell_start[one[0]], cell_start[one[0] + 1]):
            found += 1
            _insert(best_dist, best_idx, _sq_distance(Y, i, R, cell_refs[t]), cell_refs[t])


@njit(parallel=True, cache=True)
def probe_atoms(Y, W, probes):
    """``probes[i]``: the ``probes.shape[1]`` atoms nearest ``Y[i]``,
    nearest first (ties: smaller index), whose cells
    :func:`nearest_references` searches."""
    n = Y.shape[0]
    m = W.shape[0]
    for blk in prange((n + BLOCK - 1) // BLOCK):
        atom_dist = np.empty(m)
        for i in range(blk * BLOCK, min(blk * BLOCK + BLOCK, n)):
            for a in range(m):
                atom_dist[a] = _sq_distance(Y, i, W, a)
            _probe_atoms(atom_dist, probes[i])


@njit(parallel=True, cache=True)
def nearest_references(Y, W, R, cell_start, cell_refs, cell_label, probes, neighbours, settled):
    """Each point's nearest references, screened by the atoms.

    ``neighbours[i]``: indices into ``R`` of the ``q = neighbours.shape[1]``
    references nearest ``Y[i]`` among the cells of its probed atoms
    ``probes[i]`` (:func:`probe_atoms`), nearest first (ties: smaller
    index), -1 where there are fewer. A point whose probed cells hold no
    reference probes further atoms, nearest first, until one does.

    ``cell_refs[cell_start[a]:cell_start[a + 1]]`` are the references of
    atom ``a``'s cell. ``cell_label[a] >= 0`` says that all of them hold
    that label (-1 otherwise): a point whose probed cells all hold one
    label L gets ``settled[i] = L`` and no search (its vote is L, whichever
    of them are nearest); else ``settled[i] = -1``.

    With more than :data:`FEW_FEATURES` features the points are taken in
    groups of the same nearest atom, and each reference of the cells a
    group probes is read once for the whole group (its row stays in cache
    while every point of the group that probes its cell measures it), so
    the data move once per group, not once per point.
    """
    n = Y.shape[0]
    m = W.shape[0]
    q = neighbours.shape[1]
    n_probe = probes.shape[1]
    alone = np.zeros(n, dtype=np.bool_)  # points whose probed cells hold no reference
    for i in prange(n):
        count = 0
        label = -2  # no non-empty cell yet
        for p in range(n_probe):
            a = probes[i, p]
            if cell_start[a + 1] > cell_start[a]:
                count += cell_start[a + 1] - cell_start[a]
                label = cell_label[a] if label == -2 or label == cell_label[a] else -1
        alone[i] = count == 0
        settled[i] = label if label >= 0 else -1
    best_dist = np.full((n, q), np.inf)
    best_idx = np.full((n, q), -1, dtype=np.int64)
    if Y.shape[1] <= FEW_FEATURES:
        # short rows: each point reads its cells' references in turn (they
        # stay in cache anyway), keeping its own best list at hand
        for i in prange(n):
            if alone[i] or settled[i] >= 0:
                continue
            for p in range(n_probe):
                a = probes[i, p]
                for s in range(cell_start[a], cell_start[a + 1]):
                    j = cell_refs[s]
                    _insert(best_dist[i], best_idx[i], _sq_distance(Y, i, R, j), j)
        m_groups = 0
    else:
        m_groups = m
    order = np.argsort(probes[:, 0], kind="mergesort")
    group_start = np.searchsorted(probes[order, 0], np.arange(m + 1))
    for g in prange(m_groups):
        lo = group_start[g]
        hi = group_start[g + 1]
        # the group's points that probe each cell, as lists in one array
        n_probing = np.zeros(m + 1, dtype=np.int64)
        for t in range(lo, hi):
            i = order[t]
            if not alone[i] and settled[i] < 0:
                for p in range(n_probe):
                    n_probing[probes[i, p] + 1] += 1
        for a in range(m):
            n_probing[a + 1] += n_probing[a]
        probing = np.empty(n_probing[m], dtype=np.int64)
        filled = n_probing[:m].copy()
        for t in range(lo, hi):
            i = order[t]
            if not alone[i] and settled[i] < 0:
                for p in range(n_probe):
                    probing[filled[probes[i, p]]] = i
                    filled[probes[i, p]] += 1
        for a in range(m):
            for s in range(cell_start[a], cell_start[a + 1]):
                j = cell_refs[s]
                for u in range(n_probing[a], n_probing[a + 1]):
                    i = probing[u]
                    _insert(best_dist[i], best_idx[i], _sq_distance(Y, i, R, j), j)
    for i in prange(n):
        if alone[i]:
            _search_one(Y, i, W, R, cell_start, cell_refs, n_probe, best_dist[i], best_idx[i])
        for c in range(q):
            neighbours[i, c] = best_idx[i, c]


@njit(parallel=True, cache=True)
def vote(neighbours, labels, own, n_clusters, out):
    """``out[i]``: the label most of ``neighbours[i]`` hold in ``labels``
    (one vote each; -1 entries none), ``own[i] >= 0`` adding half a vote for
    that label; a tie goes to the label of the nearest neighbour among the
    tied ones, and a point without neighbours keeps ``own[i]``."""
    n, q = neighbours.shape
    for blk in prange((n + BLOCK - 1) // BLOCK):
        counts = np.zeros(n_clusters)
        for i in range(blk * BLOCK, min(blk * BLOCK + BLOCK, n)):
            counts[:] = 0.0
            for c in range(q):
                j = neighbours[i, c]
                if j >= 0:
                    counts[labels[j]] += 1.0
            if own[i] >= 0:
                counts[own[i]] += 0.5
            top = counts.max()
            out[i] = own[i]
            for c in range(q):
                j = neighbours[i, c]
                if j >= 0 and counts[labels[j]] == top:
                    out[i] = labels[j]
                    break

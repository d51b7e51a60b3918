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
number of threads. With many features, BLAS products first screen out the
pairs that cannot be among the nearest, by a bound on their rounding
error (:func:`search_screened`), and only the others are summed: the
same neighbours, for a fraction of the work.

:func:`_sq_distance`, :func:`_insert` and :func:`_probe_atoms` are also
compiled as device functions of the CUDA vote (:mod:`fastkds._cuda_kernels`),
so each is a leaf that only indexes the arrays it is given, as the helpers
of :mod:`fastkds._shared_kernels` are.
"""

import numba
import numpy as np
from numba import njit, prange

from ._kernels import CLAIM_ROWS, block_counter, claim_block

#: Points per block of the parallel loops (each block allocates its scratch once).
BLOCK = 256

#: Up to this many features a point reads its candidates itself; past it,
#: BLAS products screen the distances (:func:`nearest_references`, :func:`probe_atoms`).
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
def _span(lo, hi):
    """``np.arange(lo, hi)``, for parallel functions, which hold no array
    expressions (see :mod:`fastkds._kernels`). Bounds are int64: a literal
    0 would compile a second signature, so callers pass ``np.int64(0)``."""
    return np.arange(lo, hi)


# inlined where it is called: most candidates go after the last entry, and
# a call per candidate, with its two row views, cost the searches 2-4x
@njit(cache=True, nogil=True, inline="always")
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
    are set to inf, so a further call continues with the next ones.

    One pass over the atoms, each compared with the farthest kept so far
    and, when nearer, inserted in order in ``probe`` (it holds the kept
    atoms' indices, so no scratch is needed on the GPU either): a few more
    than m comparisons where taking the nearest ``probe.shape[0]`` times
    made that many passes. Where more are asked for than there are atoms,
    the rest are atom 0, as those passes gave.
    """
    m = atom_dist.shape[0]
    n_probe = probe.shape[0]
    kept = 0
    farthest = np.inf  # the farthest kept atom's distance, once n_probe are kept
    for a in range(m):
        d = atom_dist[a]
        if not d < farthest:
            continue  # atoms come in order: a tie with the farthest kept loses
        j = kept if kept < n_probe else n_probe - 1
        while j > 0 and atom_dist[probe[j - 1]] > d:
            probe[j] = probe[j - 1]
            j -= 1
        probe[j] = a
        if kept < n_probe:
            kept += 1
        if kept == n_probe:
            farthest = atom_dist[probe[n_probe - 1]]
    for p in range(kept, n_probe):
        probe[p] = 0
    for p in range(kept):
        atom_dist[probe[p]] = np.inf


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


#: References per cell of the exact search of long rows
#: (:meth:`fastkds.label_vote.LabelVote.neighbours`): every cell is probed,
#: and :func:`search_screened` runs its cells' products on every thread.
EXACT_CELL_REFS = 512

#: Fewest references per cell, on average, for which :func:`nearest_references`
#: screens the distances by BLAS products: a product with fewer columns
#: costs more in gathering its points than it saves (docs/algorithm.md,
#: "The neighbours' vote").
SCREEN_MIN_REFS = 12

#: Formed distances held at once by :func:`search_screened` (8 bytes
#: each): the searching points are taken in blocks of about this many
#: candidates, and of at most this many entries of their centred rows.
SCREEN_SLOTS = 1 << 22

#: Points per BLAS product of :func:`search_screened` (a cell probed by
#: more is taken in parts): bounds each thread's scratch.
PAIR_ROWS = 512

#: The float64 unit roundoff, the unit of the screening's error bound.
_UNIT_ROUNDOFF = 2.0**-53

#: The float32 unit roundoff and smallest normal number: the units of the
#: bound where :func:`search_screened` forms its products in float32.
_UNIT_ROUNDOFF_32 = 2.0**-24
_TINY_32 = 2.0**-126

#: :func:`search_screened` forms its products in float32 where every
#: centred squared norm lies below the upper end (no product or sum of
#: them can overflow float32, whose largest is about 2^128) and the
#: largest lies above the lower end (there the absolute error that
#: float32's underflow adds is far below the bound's relative one), and in
#: float64 otherwise.
SCREEN_FLOAT32_NORMS = (2.0**-60, 2.0**100)

#: References :func:`search_screened` averages, evenly spread over them,
#: for the centre it subtracts from the rows before their products.
CENTRE_REFS = 256


def probe_atoms(Y, W, probes):
    """``probes[i]``: the ``probes.shape[1]`` atoms nearest ``Y[i]``,
    nearest first (ties: smaller index), whose cells
    :func:`nearest_references` searches.

    With more than :data:`FEW_FEATURES` features the distances are screened
    by BLAS products first (:func:`probe_atoms_screened`), unless half the
    atoms or more are probed (each of those is summed anyway); the probes
    are the same either way.
    """
    # two parallel kernels, not one with a branch: each compiles only when used
    if Y.shape[1] <= FEW_FEATURES or 2 * probes.shape[1] >= W.shape[0]:
        probe_atoms_direct(Y, W, probes)
    else:
        probe_atoms_screened(Y, W, probes, numba.get_num_threads())


@njit(parallel=True, cache=True)
def probe_atoms_direct(Y, W, probes):
    """:func:`probe_atoms` by direct sums alone.

    A point's distances to every atom are summed feature by feature over
    the transposed atoms, so the loop over the atoms vectorises; each sum
    is still :func:`_sq_distance`'s, the features in order from zero, so
    the distances, and the probes, are the same bits.
    """
    n, d = Y.shape
    m = W.shape[0]
    Wt = np.empty((d, m))
    for a in range(m):
        for t in range(d):
            Wt[t, a] = np.float64(W[a, t])
    for blk in prange((n + BLOCK - 1) // BLOCK):
        atom_dist = np.empty(m)
        for i in range(blk * BLOCK, min(blk * BLOCK + BLOCK, n)):
            for a in range(m):
                atom_dist[a] = 0.0
            for t in range(d):
                y = np.float64(Y[i, t])
                for a in range(m):
                    diff = y - Wt[t, a]
                    atom_dist[a] += diff * diff
            _probe_atoms(atom_dist, probes[i])


@njit(parallel=True, cache=True)
def probe_atoms_screened(Y, W, probes, n_threads):
    """:func:`probe_atoms`, the distances screened as :func:`search_screened`
    screens the references': one product a block of points with every
    atom, on the rows less a centre (the mean of up to
    :data:`CENTRE_REFS` atoms), in float32 where the block's centred norms
    allow; the bound ``E`` at the largest centred norm of the atoms. The
    atoms that can be among a point's ``probes.shape[1]`` nearest are
    measured by :func:`_sq_distance`, and the others cannot be, so the
    probes are those of :func:`probe_atoms_direct`, bit for bit. The
    ``n_threads`` threads claim the blocks of points
    (:func:`fastkds._kernels.claim_block`)."""
    n, d = Y.shape
    m = W.shape[0]
    atoms = _span(np.int64(0), m)
    centre = _spread_mean(W, atoms)
    cc = np.empty(m)
    cc_max = 0.0
    for a in range(m):
        cc[a] = _sq_distance(W, a, centre, 0)
        cc_max = max(cc_max, cc[a])
    # the atoms less the centre in both dtypes: each block takes the one
    # its own norms allow
    C = np.empty((m, d))
    _centred_rows(W, atoms, centre, C)
    C32 = np.empty((m, d), dtype=np.float32)
    _centred_rows(W, atoms, centre, C32)
    # blocks claimed as the threads come free (fastkds._kernels.claim_block)
    n_blocks = (n + BLOCK - 1) // BLOCK
    counter = block_counter()
    for _ in prange(n_threads):
        blk = claim_block(counter)
        while blk < n_blocks:
            lo = blk * BLOCK
            hi = min(lo + BLOCK, n)
            rows = _span(lo, hi)
            pp = np.empty(hi - lo)
            largest = cc_max
            for u in range(hi - lo):
                pp[u] = _sq_distance(Y, lo + u, centre, 0)
                largest = max(largest, pp[u])
            in_float32, scale, floor = _screen_units(largest, d)
            if in_float32:
                P32 = np.empty((hi - lo, d), dtype=np.float32)
                _centred_rows(Y, rows, centre, P32)
                _probe_formed(np.dot(P32, C32.T), Y, lo, W, pp, cc, cc_max, scale, floor, probes)
            else:
                P = np.empty((hi - lo, d))
                _centred_rows(Y, rows, centre, P)
                _probe_formed(np.dot(P, C.T), Y, lo, W, pp, cc, cc_max, scale, floor, probes)
            blk = claim_block(counter)


@njit(cache=True, nogil=True)
def _probe_formed(D, Y, lo, W, pp, cc, cc_max, scale, floor, probes):
    """The probes of the points ``lo, lo + 1, ...`` (of squared centred
    norms ``pp``) from their centred products ``D`` (float32 or float64)
    with every atom (of squared centred norms ``cc``, the largest
    ``cc_max``), by :func:`probe_atoms_screened`'s screen."""
    m = W.shape[0]
    n_probe = probes.shape[1]
    formed = np.empty(m)
    atom_dist = np.empty(m)
    upper = np.empty(n_probe)
    for u in range(D.shape[0]):
        for a in range(m):
            formed[a] = (pp[u] + cc[a]) - 2.0 * np.float64(D[u, a])
        top = _qth_smallest(formed, 0, m, upper) + _screen_margin(scale, floor, pp[u], cc_max)
        for a in range(m):
            # not ">": a bound that is not finite lets every atom through
            atom_dist[a] = np.inf if formed[a] > top else _sq_distance(Y, lo + u, W, a)
        _probe_atoms(atom_dist, probes[lo + u])


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

    The search itself is one of three kernels, with the same results: up
    to :data:`FEW_FEATURES` features, :func:`search_direct`; past them, the
    distances screened by BLAS products (:func:`search_screened`), unless
    the cells hold fewer than :data:`SCREEN_MIN_REFS` references on average
    (:func:`search_shared_reads`). One cell of them all (``W`` one atom) is
    screened at any number of features.
    """
    alone = np.empty(Y.shape[0], dtype=np.bool_)  # points whose probed cells hold no reference
    settle(probes, cell_start, cell_label, alone, settled)
    searching = np.flatnonzero(~alone & (settled < 0))
    best_dist = np.full(neighbours.shape, np.inf)
    neighbours[:] = -1  # the searches fill it in place, nearest first
    args = (Y, R, cell_start, cell_refs, probes, searching, best_dist, neighbours)
    if W.shape[0] == 1 and cell_refs.shape[0] >= SCREEN_MIN_REFS:
        # one cell (an exact search): each block's product spans every
        # reference, and pays for its gathering at any number of features
        search_screened(*args, numba.get_num_threads())
    elif Y.shape[1] <= FEW_FEATURES:
        search_direct(*args)
    elif cell_refs.shape[0] < SCREEN_MIN_REFS * W.shape[0]:
        search_shared_reads(*args)
    else:
        search_screened(*args, numba.get_num_threads())
    search_alone(Y, W, R, cell_start, cell_refs, probes.shape[1], np.flatnonzero(alone), best_dist, neighbours)


def nearest_references_exact(Y, W, R, cell_start, cell_refs, radius, neighbours):
    """Each point's nearest references among all of them, for rows of at
    most :data:`FEW_FEATURES` features: the neighbours of
    :func:`nearest_references` given one cell that holds every reference
    (the same, bit for bit), read only from the cells of ``W`` that can
    hold one of them (:func:`search_pruned`; ``radius`` from
    :func:`cell_radii`)."""
    best_dist = np.full(neighbours.shape, np.inf)
    neighbours[:] = -1
    search_pruned(Y, W, R, cell_start, cell_refs, radius, best_dist, neighbours)


@njit(parallel=True, cache=True)
def settle(probes, cell_start, cell_label, alone, settled):
    """Per point: ``alone[i]``, whether its probed cells hold no reference,
    and ``settled[i]``, the one label they all hold, else -1."""
    for i in prange(probes.shape[0]):
        count = 0
        label = -2  # no non-empty cell yet
        for p in range(probes.shape[1]):
            a = probes[i, p]
            if cell_start[a + 1] > cell_start[a]:
                count += cell_start[a + 1] - cell_start[a]
                label = cell_label[a] if label == -2 or label == cell_label[a] else -1
        alone[i] = count == 0
        settled[i] = label if label >= 0 else -1


@njit(parallel=True, cache=True)
def search_direct(Y, R, cell_start, cell_refs, probes, searching, best_dist, best_idx):
    """The nearest references of the points ``searching`` among their
    probed cells, into their rows of ``best_dist`` / ``best_idx`` (inf / -1
    on entry), for short rows: each point reads its cells' references in
    turn (they stay in cache anyway), keeping its own best list at hand."""
    for t in prange(searching.shape[0]):
        i = searching[t]
        dist, idx = best_dist[i], best_idx[i]
        for p in range(probes.shape[1]):
            a = probes[i, p]
            for s in range(cell_start[a], cell_start[a + 1]):
                j = cell_refs[s]
                _insert(dist, idx, _sq_distance(Y, i, R, j), j)


@njit(parallel=True, cache=True)
def search_alone(Y, W, R, cell_start, cell_refs, n_probe, alone, best_dist, best_idx):
    """The points ``alone``, whose probed cells hold no reference: each
    probes further atoms until a cell holds one (:func:`_search_one`)."""
    for t in prange(alone.shape[0]):
        i = alone[t]
        _search_one(Y, i, W, R, cell_start, cell_refs, n_probe, best_dist[i], best_idx[i])


@njit(parallel=True, cache=True)
def search_shared_reads(Y, R, cell_start, cell_refs, probes, searching, best_dist, best_idx):
    """:func:`search_direct` for long rows with few references per cell.

    The points are taken in groups of the same nearest atom, and each
    reference of the cells a group probes is read once for the whole group
    (its row stays in cache while every point of the group that probes its
    cell measures it), so the data move once per group, not once per point.
    """
    m = cell_start.shape[0] - 1
    order = searching[np.argsort(probes[searching, 0], kind="mergesort")]
    group_start = np.searchsorted(probes[order, 0], _span(np.int64(0), m + 1))
    for g in prange(m):
        group = order[group_start[g] : group_start[g + 1]]
        first, row, _ = _pairs_by_cell(probes, group, m)
        for a in range(m):
            for s in range(cell_start[a], cell_start[a + 1]):
                j = cell_refs[s]
                for u in range(first[a], first[a + 1]):
                    i = group[row[u]]
                    _insert(best_dist[i], best_idx[i], _sq_distance(Y, i, R, j), j)


@njit(cache=True, nogil=True)
def _pairs_by_cell(probes, points, m):
    """The (point, probe) pairs of ``points`` grouped by the probed cell, by
    a counting sort: ``first[a]:first[a + 1]`` index cell ``a``'s pairs in
    ``row`` (the point's position in ``points``) and ``slot`` (which of its
    probes)."""
    n_probe = probes.shape[1]
    first = np.zeros(m + 1, dtype=np.int64)
    for t in range(points.shape[0]):
        for p in range(n_probe):
            first[probes[points[t], p] + 1] += 1
    for a in range(m):
        first[a + 1] += first[a]
    row = np.empty(first[m], dtype=np.int64)
    slot = np.empty(first[m], dtype=np.int64)
    fill = first[:m].copy()
    for t in range(points.shape[0]):
        for p in range(n_probe):
            a = probes[points[t], p]
            row[fill[a]] = t
            slot[fill[a]] = p
            fill[a] += 1
    return first, row, slot


@njit(cache=True, nogil=True)
def _cell_tasks(cell_start, first):
    """The tasks of :func:`search_screened`'s products: ``task_cell[k]``
    and ``task_start[k]``, a cell and the first of the (at most
    :data:`PAIR_ROWS`) pairs of it that task k takes, from
    :func:`_pairs_by_cell`'s ``first``; cells without pairs or references
    get none."""
    m = cell_start.shape[0] - 1
    n_tasks = 0
    for a in range(m):
        if cell_start[a + 1] > cell_start[a]:
            n_tasks += (first[a + 1] - first[a] + PAIR_ROWS - 1) // PAIR_ROWS
    task_cell = np.empty(n_tasks, dtype=np.int64)
    task_start = np.empty(n_tasks, dtype=np.int64)
    k = 0
    for a in range(m):
        if cell_start[a + 1] > cell_start[a]:
            for v0 in range(first[a], first[a + 1], PAIR_ROWS):
                task_cell[k] = a
                task_start[k] = v0
                k += 1
    return task_cell, task_start


@njit(cache=True, nogil=True)
def _spread_mean(R, refs):
    """The mean of up to :data:`CENTRE_REFS` of the rows ``R[refs]``, evenly
    spread over them, in float64, as a (1, d) array: the centre of
    :func:`search_screened`."""
    d = R.shape[1]
    centre = np.zeros((1, d))
    step = max(1, refs.shape[0] // CENTRE_REFS)
    count = 0
    for s in range(0, refs.shape[0], step):
        for t in range(d):
            centre[0, t] += np.float64(R[refs[s], t])
        count += 1
    for t in range(d):
        centre[0, t] /= max(count, 1)
    return centre


@njit(cache=True, nogil=True)
def _centred_rows(A, rows, centre, out):
    """``out[u] = A[rows[u]] - centre`` in the dtype of ``out``, each
    difference taken in float64 and rounded to it."""
    for u in range(rows.shape[0]):
        for t in range(A.shape[1]):
            out[u, t] = np.float64(A[rows[u], t]) - centre[0, t]


@njit(cache=True, nogil=True)
def _centred_rows_into(A, rows, centre, out32, out64):
    """:func:`_centred_rows` into ``out32`` where it has rows, else into
    ``out64``: the one buffer of the products' dtype, the other empty."""
    if out32.shape[0] > 0:
        _centred_rows(A, rows, centre, out32)
    else:
        _centred_rows(A, rows, centre, out64)


@njit(cache=True, nogil=True)
def _products_with_rows(P, pair_t, v0, v1, C):
    """``P[pair_t[v0:v1]] C^T`` by one BLAS product: the rows of ``P`` a
    view where ``pair_t[v0:v1]`` runs on by one (as an exact search's
    do: every point probes the one cell), else gathered."""
    t0 = pair_t[v0]
    if pair_t[v1 - 1] - t0 == v1 - 1 - v0:  # ascending within a cell, so consecutive
        return np.dot(P[t0 : t0 + v1 - v0], C.T)
    rows = np.empty((v1 - v0, P.shape[1]), dtype=P.dtype)
    for v in range(v0, v1):
        for t in range(P.shape[1]):
            rows[v - v0, t] = P[pair_t[v], t]
    return np.dot(rows, C.T)


@njit(cache=True, nogil=True)
def _screen_units(largest, d):
    """``(in_float32, scale, floor)`` of the screened products, given the
    largest squared centred norm among their rows: whether they are formed
    in float32 (:data:`SCREEN_FLOAT32_NORMS`), and the two terms of their
    error bound ``e = scale (||a||^2 + ||b||^2) + floor``
    (:func:`search_screened`)."""
    low, high = SCREEN_FLOAT32_NORMS
    in_float32 = low <= largest <= high
    if in_float32:
        return True, (4 * d + 16) * _UNIT_ROUNDOFF_32, 4.0 * (d + 2) * _TINY_32
    return False, (4 * d + 16) * _UNIT_ROUNDOFF, 0.0


@njit(cache=True, nogil=True)
def _screen_margin(scale, floor, pp, cc_max):
    """``2 E``: how far past the q-th smallest formed distance a point's
    candidates may lie and still be among its q nearest, ``E`` the error
    bound at its own squared centred norm ``pp`` and its candidates'
    largest ``cc_max`` (:func:`search_screened`)."""
    return 2.0 * (scale * (pp + cc_max) + floor)


@njit(cache=True, nogil=True)
def _keep_smallest(values, v):
    """Put ``v`` into the ascending ``values`` if it goes before their last
    entry, dropping that one."""
    r = values.shape[0] - 1
    if not (v < values[r]):
        return
    while r > 0 and v < values[r - 1]:
        values[r] = values[r - 1]
        r -= 1
    values[r] = v


@njit(parallel=True, cache=True)
def search_screened(Y, R, cell_start, cell_refs, probes, searching, best_dist, best_idx, n_threads):
    """:func:`search_direct` for long rows, screened by BLAS products.

    For each cell, products (one a part of up to :data:`PAIR_ROWS` of the
    points that probe it, each a task of the threads) give the squared
    distances of those points to its references, as ``||a||^2 + ||b||^2 -
    2 a.b`` with ``a = y - c`` and ``b = r - c``, the rows less a centre
    ``c`` (the mean of :data:`CENTRE_REFS` references), so that the norms
    are the data's spread, not their distance from the origin. The products
    are float32 BLAS's (half the time of float64's) where the centred norms
    allow (:data:`SCREEN_FLOAT32_NORMS`), else float64's; the norms and the
    rest are float64. The centred rows are formed once in the products'
    dtype, the references' in cell order (each cell's factor a run of
    them) and a block's points' as the block begins, so a product gathers
    at most its points' rows, and none where they run on by one.

    The formed distances differ from the direct sum :func:`_sq_distance`
    by at most ``e = (4 d + 16) u (||a||^2 + ||b||^2) + f``, u the
    products' unit roundoff (float32's or float64's), and ``f = 4 (d + 2)
    2^-126`` for float32's underflow (0 in float64): the
    product's own bound, ``(d + 2) u ||a|| ||b||``, twice, the rounding of
    the rows to the products' dtype, ``2 u ||a|| ||b||``, twice, and the
    float64 sums of the norms and of the direct sum, each below ``(d + 2)
    2^-53`` times its magnitude. So with ``T`` the q-th smallest ``formed +
    e`` over a point's candidates, every reference whose direct distance is
    among its q smallest has ``formed - e <= T``. With ``E`` the bound at
    the largest ``||b||^2`` of the point's probed cells, ``T <= T0 + E``
    for ``T0`` the q-th smallest ``formed``, so each of them has ``formed
    <= T0 + 2 E``: one bound a point, which its ranking pass finds from the
    formed distances alone. The few that pass are measured by
    :func:`_sq_distance` on the rows as given and ranked as the direct
    search ranks them (ties to the smaller index), so the neighbours are the
    same, bit for bit, whichever the products' dtype. A bound that is not
    finite lets every candidate through.

    The ``n_threads`` threads claim the products and the points' rankings
    (:func:`fastkds._kernels.claim_block`), so the neighbours do not
    depend on which thread takes which, or on how many there are.
    """
    d = Y.shape[1]
    m = cell_start.shape[0] - 1
    n_probe = probes.shape[1]
    q = best_dist.shape[1]
    n = searching.shape[0]
    n_refs = cell_refs.shape[0]
    centre = _spread_mean(R, cell_refs)
    # centred squared norms of the references and of the searching points
    cc = np.empty(n_refs)
    for s in prange(n_refs):
        cc[s] = _sq_distance(R, cell_refs[s], centre, 0)
    pp = np.empty(n)
    for t in prange(n):
        pp[t] = _sq_distance(Y, searching[t], centre, 0)
    largest = 0.0
    for s in range(n_refs):
        largest = max(largest, cc[s])
    for t in range(n):
        largest = max(largest, pp[t])
    in_float32, scale, floor = _screen_units(largest, d)
    # each cell's largest: one bound serves all of a point's candidates
    cell_cc_max = np.empty(m)
    for a in prange(m):
        cell_cc_max[a] = 0.0
        for s in range(cell_start[a], cell_start[a + 1]):
            cell_cc_max[a] = max(cell_cc_max[a], cc[s])
    # the references less the centre, in the products' dtype and in cell
    # order, once: each cell's factor is then a run of rows, not a gather
    # for every product that takes it
    Rc32 = np.empty((n_refs if in_float32 else 0, d), dtype=np.float32)
    Rc = np.empty((0 if in_float32 else n_refs, d))
    for b in prange((n_refs + BLOCK - 1) // BLOCK):
        s0, s1 = b * BLOCK, min(b * BLOCK + BLOCK, n_refs)
        _centred_rows_into(R, cell_refs[s0:s1], centre, Rc32[s0:s1], Rc[s0:s1])
    # the same for a block's searching points, in a buffer of as many rows
    # as a block may hold
    block_rows = min(n, max(1, SCREEN_SLOTS // d))
    Pc32 = np.empty((block_rows if in_float32 else 0, d), dtype=np.float32)
    Pc = np.empty((0 if in_float32 else block_rows, d))
    # slot[t, p]: where the t-th searching point's distances to its p-th
    # probed cell start, in the formed distances of its block
    slot = np.empty((n, n_probe + 1), dtype=np.int64)
    # one buffer for every block (the first is the longest, or as long):
    # fresh pages for each would cost a page fault per 4 KiB of them
    formed = np.empty(0)
    lo = 0
    while lo < n:
        hi = lo
        total = 0
        while hi < n and (hi == lo or (total <= SCREEN_SLOTS and hi - lo < block_rows)):
            slot[hi, 0] = total
            for p in range(n_probe):
                a = probes[searching[hi], p]
                total += cell_start[a + 1] - cell_start[a]
                slot[hi, p + 1] = total
            hi += 1
        if formed.shape[0] < total:
            formed = np.empty(total)
        for b in prange((hi - lo + BLOCK - 1) // BLOCK):
            t0, t1 = lo + b * BLOCK, min(lo + b * BLOCK + BLOCK, hi)
            _centred_rows_into(Y, searching[t0:t1], centre, Pc32[t0 - lo : t1 - lo], Pc[t0 - lo : t1 - lo])
        first, pair_t, pair_p = _pairs_by_cell(probes, searching[lo:hi], m)  # pair_t from lo
        # one task a cell's product with up to PAIR_ROWS of its points, not
        # one a cell: cells are few and uneven (an exact search has ten);
        # the tasks, then the points' rankings by CLAIM_ROWS, are claimed as
        # the threads come free (fastkds._kernels.claim_block)
        task_cell, task_start = _cell_tasks(cell_start, first)
        counter = block_counter()
        for _ in prange(n_threads):
            k = claim_block(counter)
            while k < task_cell.shape[0]:
                a = task_cell[k]
                v0 = task_start[k]
                v1 = min(v0 + PAIR_ROWS, first[a + 1])
                s0, s1 = cell_start[a], cell_start[a + 1]
                if in_float32:
                    D32 = _products_with_rows(Pc32, pair_t, v0, v1, Rc32[s0:s1])
                    _form_distances(D32, pp, cc, s0, lo, v0, pair_t, pair_p, slot, formed)
                else:
                    D = _products_with_rows(Pc, pair_t, v0, v1, Rc[s0:s1])
                    _form_distances(D, pp, cc, s0, lo, v0, pair_t, pair_p, slot, formed)
                k = claim_block(counter)
        counter = block_counter()
        for _ in prange(n_threads):
            upper = np.empty(q)
            g = claim_block(counter)
            while lo + g * CLAIM_ROWS < hi:
                for t in range(lo + g * CLAIM_ROWS, min(lo + (g + 1) * CLAIM_ROWS, hi)):
                    i = searching[t]
                    cc_max = 0.0
                    for p in range(n_probe):
                        cc_max = max(cc_max, cell_cc_max[probes[i, p]])
                    top = _qth_smallest(formed, slot[t, 0], slot[t, n_probe], upper)
                    top += _screen_margin(scale, floor, pp[t], cc_max)
                    for p in range(n_probe):
                        s0 = cell_start[probes[i, p]] - slot[t, p]
                        for c in range(slot[t, p], slot[t, p + 1]):
                            if not (formed[c] > top):
                                j = cell_refs[s0 + c]
                                _insert(best_dist[i], best_idx[i], _sq_distance(Y, i, R, j), j)
                g = claim_block(counter)
        lo = hi


@njit(cache=True, nogil=True)
def _qth_smallest(values, lo, hi, upper):
    """The q-th smallest of ``values[lo:hi]``, q = ``len(upper)`` (a
    scratch array): inf where there are fewer. The screens' threshold
    before its margin (a point's formed distances)."""
    q = upper.shape[0]
    for c in range(q):  # not np.full (see fastkds._kernels)
        upper[c] = np.inf
    for c in range(lo, hi):
        _keep_smallest(upper, values[c])
    return upper[q - 1]


@njit(cache=True, nogil=True)
def _form_distances(D, pp, cc, s0, lo, v0, pair_t, pair_p, slot, formed):
    """One task's formed distances, ``||a||^2 + ||b||^2 - 2 a.b`` in float64
    from its products ``D`` (float32 or float64), into their slots of
    ``formed`` (:func:`search_screened`)."""
    for v in range(v0, v0 + D.shape[0]):
        t = pair_t[v]
        base = slot[lo + t, pair_p[v]]
        for c in range(D.shape[1]):
            formed[base + c] = (pp[lo + t] + cc[s0 + c]) - 2.0 * np.float64(D[v - v0, c])


#: Relative slack of :func:`search_pruned`'s bound, far above the rounding
#: of its float64 sums at up to :data:`FEW_FEATURES` features (about 1e-14).
PRUNE_SLACK = 1e-9


@njit(parallel=True, cache=True)
def cell_radii(W, R, cell_start, cell_refs, radius):
    """``radius[a]``: the largest distance (not squared) of cell ``a``'s
    references to atom ``a``, 0 for an empty cell."""
    for a in prange(W.shape[0]):
        far = 0.0
        for s in range(cell_start[a], cell_start[a + 1]):
            far = max(far, _sq_distance(R, cell_refs[s], W, a))
        radius[a] = np.sqrt(far)


@njit(parallel=True, cache=True)
def search_pruned(Y, W, R, cell_start, cell_refs, radius, best_dist, best_idx):
    """The exact search (every reference a candidate) for short rows,
    reading only the cells that can hold one of the nearest.

    A reference of atom ``a``'s cell lies at least ``||y - w_a|| -
    radius[a]`` from ``y`` (the triangle inequality). The cells are read in
    the order of that bound, and the search stops at the first whose bound
    exceeds the q-th distance found, less :data:`PRUNE_SLACK` of both for
    rounding: no reference past it can enter the list, which keeps the q
    smallest (distance, index) pairs whatever the order they come in. So
    the neighbours are those of reading every reference, bit for bit, where
    on data of a few features most cells go unread (the fit of a few
    thousand points that then labels a million new ones).
    """
    n = Y.shape[0]
    m = W.shape[0]
    q = best_dist.shape[1]
    for blk in prange((n + BLOCK - 1) // BLOCK):
        bound = np.empty(m)
        for i in range(blk * BLOCK, min(blk * BLOCK + BLOCK, n)):
            for a in range(m):
                centre = np.sqrt(_sq_distance(Y, i, W, a))
                gap = (centre - radius[a]) - PRUNE_SLACK * (centre + radius[a])
                bound[a] = gap * gap if gap > 0.0 else 0.0
            dist, idx = best_dist[i], best_idx[i]
            for _ in range(m):
                a = 0  # the unread cell of the smallest bound
                for b in range(1, m):
                    if bound[b] < bound[a]:
                        a = b
                if idx[q - 1] >= 0 and bound[a] > dist[q - 1] * (1.0 + PRUNE_SLACK):
                    break  # this cell and every later one lie past the q-th
                bound[a] = np.inf  # read
                for s in range(cell_start[a], cell_start[a + 1]):
                    j = cell_refs[s]
                    _insert(dist, idx, _sq_distance(Y, i, R, j), j)


@njit(parallel=True, cache=True)
def vote(neighbours, labels, own, n_clusters, ranked, out):
    """``out[i]``: the label most of ``neighbours[i]`` hold in ``labels``
    (-1 entries none), ``own[i] >= 0`` adding half a vote for that label; a
    tie goes to the label of the nearest neighbour among the tied ones, and
    a point without neighbours keeps ``own[i]``.

    Each neighbour has one vote, or with ``ranked`` ``1 / r`` for the r-th
    listed (nearest first): harmonic rank weights."""
    n, q = neighbours.shape
    for blk in prange((n + BLOCK - 1) // BLOCK):
        # loops, not array expressions (see fastkds._kernels)
        counts = np.empty(n_clusters)
        for i in range(blk * BLOCK, min(blk * BLOCK + BLOCK, n)):
            for c in range(n_clusters):
                counts[c] = 0.0
            for c in range(q):
                j = neighbours[i, c]
                if j >= 0:
                    counts[labels[j]] += 1.0 / (c + 1.0) if ranked else 1.0
            if own[i] >= 0:
                counts[own[i]] += 0.5
            top = 0.0
            for c in range(n_clusters):
                top = max(top, counts[c])
            out[i] = own[i]
            for c in range(q):
                j = neighbours[i, c]
                if j >= 0 and counts[labels[j]] == top:
                    out[i] = labels[j]
                    break

"""Where the kernels run: the CPU (Numba) or a GPU (numba.cuda).

A backend changes where encoding, CSR assembly and statistics happen, not the
estimator code around them. The CUDA backend is imported lazily, so importing
fastkds never needs CUDA.
"""

import numbers
import warnings

from . import _config
from ._config import default_chunk_size
from .exceptions import DeviceFallbackWarning, warn
from ._validation import check_choice
from .prepared import PreparedDictionary, concatenate_csr
from .sources import ChunkSource, source_chunks

DEVICES = ("cpu", "cuda", "auto")


class CpuBackend:
    """Numba CPU kernels (:mod:`fastkds._kernels`)."""

    name = "cpu"

    def prepare(self, W, lam, n_iter, dtype, step="centred", encoder="apg"):
        return PreparedDictionary(W, lam, n_iter, dtype, step, encoder)

    def chunk_size(self, n_features, n_atoms, itemsize):
        return default_chunk_size(n_features, n_atoms, itemsize)

    def allocate(self, prepared, chunk_size):
        return prepared.allocate(chunk_size)

    def run_epoch(self, Y, prepared, chunk_size, stats=None, buffers=None, codes_out=None):
        return run_epoch(Y, prepared, chunk_size, stats, buffers, codes_out)

    def encode(self, Y, prepared, chunk_size, stats=None):
        """Codes of ``Y`` (an array or a ChunkSource) as one CSR array; each
        chunk's statistics added to ``stats`` when given."""
        return encode_by_chunks(self, Y, prepared, chunk_size, stats)


def encode_by_chunks(backend, Y, prepared, chunk_size, stats=None):
    """One pass of ``backend`` keeping each chunk's codes, joined into one CSR array."""
    parts = []
    backend.run_epoch(Y, prepared, chunk_size, stats, codes_out=parts)
    return concatenate_csr(parts, prepared.n_atoms, prepared.dtype)


def run_epoch(Y, prepared, chunk_size, stats=None, buffers=None, codes_out=None):
    """Encode all of ``Y`` chunk by chunk with ``prepared``.

    ``Y`` is a validated array or a :class:`fastkds.sources.ChunkSource`.
    Adds each chunk to ``stats`` (a :class:`fastkds.solvers.SufficientStatistics`) when given,
    and appends its CSR triple to ``codes_out`` (a list, or anything with
    ``append``) when given.
    """
    if buffers is None:  # chunks never exceed chunk_size, nor the data's length
        n = Y.shape[0]
        buffers = prepared.allocate(chunk_size if n is None else max(1, min(chunk_size, n)))
    for _, chunk in source_chunks(Y, chunk_size):
        triple, obj = prepared.encode_csr(chunk, buffers)
        if stats is not None:
            stats.add_chunk(*triple, chunk, obj)
        if codes_out is not None:
            codes_out.append(triple)
    return stats


class CudaBackend:
    """numba.cuda kernels (:mod:`fastkds.gpu`): codes and statistics on the GPU."""

    name = "cuda"

    def __init__(self):
        from . import gpu

        gpu.require_cuda()
        self._gpu = gpu
        self._kept = None  # the last buffer sets allocate made (see allocate)

    def prepare(self, W, lam, n_iter, dtype, step="centred", encoder="apg"):
        return self._gpu.CudaPreparedDictionary(W, lam, n_iter, dtype, step=step, encoder=encoder)

    def chunk_size(self, n_features, n_atoms, itemsize):
        return self._gpu.default_chunk_size_cuda(n_features, n_atoms, itemsize)

    def allocate(self, prepared, chunk_size):
        """``_config.CUDA_BUFFER_SETS`` buffer sets for chunks of up to
        ``chunk_size`` rows: while the host takes one chunk's codes, the GPU
        encodes the next ones.

        The sets of the last call are given again where they hold as many
        rows of the same atoms, features and dtype: pinned host memory is
        slow to allocate (docs/gpu.md), and a fit's warm-start stages each
        ask for sets, the first for its largest stage's rows
        (:func:`fastkds.warmstart.fit_stages`). One fit uses its backend
        at a time, so the sets are never in two passes at once.
        """
        key = (prepared.n_atoms, prepared.n_features, prepared.dtype)
        if self._kept is not None and self._kept[0] == key and self._kept[1][0].capacity >= chunk_size:
            return self._kept[1]
        sets = [prepared.allocate(chunk_size) for _ in range(_config.CUDA_BUFFER_SETS)]
        self._kept = (key, sets)
        return sets

    def run_epoch(self, Y, prepared, chunk_size, stats=None, buffers=None, codes_out=None):
        if not isinstance(Y, ChunkSource):
            return self._gpu.run_epoch_cuda(Y, prepared, chunk_size, stats, buffers, codes_out)
        # data read in chunks: each source chunk streams through the GPU in turn
        for _, chunk in Y.chunks(chunk_size):
            self._gpu.run_epoch_cuda(chunk, prepared, chunk_size, stats, buffers, codes_out)
        return stats

    def encode(self, Y, prepared, chunk_size, stats=None):
        """Codes of ``Y`` as one CSR array: without ``stats``, an array's
        chunks are written straight into the final arrays
        (:func:`fastkds.gpu.encode_csr_cuda`), with no per-chunk copies and
        no join."""
        if isinstance(Y, ChunkSource) or stats is not None:
            return encode_by_chunks(self, Y, prepared, chunk_size, stats)
        return self._gpu.encode_csr_cuda(Y, prepared, chunk_size)


def runs_on_cuda(device):
    """Whether ``get_backend(device)`` gives the CUDA backend; for
    ``"auto"`` without a GPU, no second fallback warning (the fit that
    chose the device gave it)."""
    if device in ("cpu", "cuda"):
        return device == "cuda"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeviceFallbackWarning)
        return get_backend(device).name == "cuda"


def resolve_encoder(encoder, device, lam):
    """The encoder that ``encoder="auto"`` stands for (any other comes back as it is).

    The exact codes (``"active-set"``) on the CPU where ``lam`` is at most
    :data:`~fastkds._config.EXACT_CODES_MAX_LAM`. Locality keeps a
    point's support to a handful of atoms, so the active set reaches the
    optimum in about as many steps, for about the cost of the product
    ``Y W^T``, where the accelerated encoder spends all of its ``n_iter``
    steps on every point and may still stop short of the optimum.

    The accelerated encoder (``"apg"``) elsewhere: on the GPU, whose
    active-set encoder (one point per warp) has not yet been timed against
    its accelerated one (docs/gpu.md), and in the unrolled solver, which
    sets it itself. And at a larger
    ``lam`` most exact codes hold one atom: a point between two atoms
    codes with both only within a band ``1 / (1 + 2 lam)`` of their
    distance wide, so few points link neighbouring atoms, and the code
    graph falls into pieces that are not clusters (docs/algorithm.md,
    "Exact codes by default"); the accelerated encoder stopped after T
    steps gives longer codes that keep the links.

    Parameters
    ----------
    encoder : {"auto", "apg", "active-set"}
        Validated (:func:`fastkds.prepared.check_encoder`).
    device : {"cpu", "cuda", "auto"}
    lam : float
        The locality weight, validated.

    Returns
    -------
    {"apg", "active-set"}
    """
    if encoder != "auto":
        return encoder
    if lam > _config.EXACT_CODES_MAX_LAM or runs_on_cuda(device):
        return "apg"
    return "active-set"


def clustering_encoder(encoder, n_samples, n_atoms):
    """The encoder of a clusterer's dictionaries: ``"apg"`` for ``"auto"``
    where ``n_samples`` points give fewer than
    :data:`~fastkds._config.EXACT_CODES_MIN_POINTS_PER_ATOM` to each of
    the code graph's ``n_atoms`` atoms (every dictionary's, for an
    ensemble), else ``encoder`` as it is (:func:`resolve_encoder` goes on
    from there).

    The code graph of exact codes links two neighbouring atoms only through
    the points whose codes hold both (a band between them, see
    :func:`resolve_encoder`); with few points an atom its weights are sums
    over a few points, and the spectral step splits a cluster where those
    happen to be fewer (noisy moons of 1,000-3,000 points: docs/algorithm.md,
    "Exact codes by default"). The accelerated encoder's longer codes link
    every atom to several.
    """
    few = isinstance(n_atoms, numbers.Integral) and n_samples < _config.EXACT_CODES_MIN_POINTS_PER_ATOM * n_atoms
    return "apg" if encoder == "auto" and few else encoder


def get_backend(device):
    """The backend for ``device`` in {"cpu", "cuda", "auto"}.

    ``"cuda"`` raises a RuntimeError naming the cause when CUDA cannot run;
    ``"auto"`` falls back to the CPU with a one-line warning. Both run
    either encoder.
    """
    check_choice(device, "device", DEVICES)
    if device == "cpu":
        return CpuBackend()
    if device == "cuda":
        return CudaBackend()
    try:
        return CudaBackend()
    except (RuntimeError, ImportError) as exc:
        warn(f"device='auto': no usable CUDA GPU, running on the CPU ({exc})", DeviceFallbackWarning)
        return CpuBackend()

"""The paper's data: noisy two moons, concentric circles, and an MNIST loader.

Nothing is downloaded: generated data are seeded, files are read from a path.
"""

import gzip
import os
import struct

import numpy as np
from sklearn import datasets as _skdatasets
from sklearn.utils import check_random_state

from ._validation import check_nonneg_float, check_positive_int

#: The MNIST-5 digits of the paper (after Elhamifar and Vidal).
MNIST5_DIGITS = (0, 3, 4, 6, 7)


def make_moons(n_samples=5000, *, noise=0.1, random_state=None):
    """Noisy two moons, the paper's protocol.

    scikit-learn's ``make_moons`` (two interleaving half circles, shuffled)
    with Gaussian noise of standard deviation ``noise`` added to each
    coordinate.

    Parameters
    ----------
    n_samples : int, default=5000
    noise : float, default=0.1
    random_state : int, RandomState instance or None

    Returns
    -------
    Y : ndarray of shape (n_samples, 2), float64
    labels : ndarray of shape (n_samples,), int64 in {0, 1}
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    noise = check_nonneg_float(noise, "noise")
    Y, labels = _skdatasets.make_moons(n_samples, noise=noise, random_state=random_state)
    return Y, labels.astype(np.int64)


def make_circles(n_samples=5000, delta=0.1, *, random_state=None):
    """Two concentric circles of radii 1 and ``1 - delta``, no noise.

    The paper's narrow-separation experiment: points uniform in angle, half
    on each circle (the outer one takes the odd point).

    Parameters
    ----------
    n_samples : int, default=5000
    delta : float in [0, 1], default=0.1
        Separation between the circles.
    random_state : int, RandomState instance or None

    Returns
    -------
    Y : ndarray of shape (n_samples, 2)
    labels : ndarray of shape (n_samples,), 0 = outer circle, 1 = inner circle
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    delta = check_nonneg_float(delta, "delta")
    if delta > 1:
        raise ValueError(f"delta must be in [0, 1], got {delta}")
    rng = check_random_state(random_state)
    n_outer = n_samples - n_samples // 2
    labels = np.r_[np.zeros(n_outer, np.int64), np.ones(n_samples - n_outer, np.int64)]
    radius = np.where(labels == 0, 1.0, 1.0 - delta)
    theta = rng.uniform(0.0, 2.0 * np.pi, n_samples)
    Y = np.c_[radius * np.cos(theta), radius * np.sin(theta)]
    order = rng.permutation(n_samples)
    return Y[order], labels[order]


def _open_maybe_gz(path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _read_idx(path, magic_expected, ndim):
    if not os.path.exists(path):
        raise FileNotFoundError(f"MNIST file not found: {path}")
    try:
        with _open_maybe_gz(path) as f:
            header = f.read(4 + 4 * ndim)
            if len(header) < 4 + 4 * ndim:
                raise ValueError(f"{path}: file too short for an IDX header")
            magic, *dims = struct.unpack(">" + "I" * (1 + ndim), header)
            if magic != magic_expected:
                raise ValueError(f"{path}: IDX magic number {magic}, expected {magic_expected}")
            body = f.read()
    except (EOFError, OSError) as exc:  # truncated or corrupt gzip stream
        raise ValueError(f"{path}: cannot read the file ({exc})") from exc
    expected = int(np.prod(dims))
    if len(body) != expected:
        raise ValueError(f"{path}: {len(body)} data bytes, header promises {expected}")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)


def _find(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no {stem}[.gz] in {directory}")


def load_mnist(path, *, split="t10k", digits=MNIST5_DIGITS, unit_norm=True):
    """Load MNIST from its IDX files (gzipped or not), e.g. ``shared/data/mnist``.

    The paper's MNIST-5: the test split, digits 0, 3, 4, 6, 7 (4958 images),
    pixels scaled to [0, 1], each row scaled to unit norm.

    Parameters
    ----------
    path : str or path-like
        Folder holding ``{split}-images-idx3-ubyte[.gz]`` and
        ``{split}-labels-idx1-ubyte[.gz]``.
    split : {"t10k", "train"}, default="t10k"
    digits : sequence of int or None, default=(0, 3, 4, 6, 7)
        Digits to keep; None keeps all ten.
    unit_norm : bool, default=True
        Scale each image vector to unit Euclidean norm.

    Returns
    -------
    Y : ndarray of shape (n, 784), float64
    labels : ndarray of shape (n,), int64 digit labels
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"MNIST folder not found: {path}")
    images = _read_idx(_find(path, f"{split}-images-idx3-ubyte"), 2051, 3)
    labels = _read_idx(_find(path, f"{split}-labels-idx1-ubyte"), 2049, 1)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{images.shape[0]} images but {labels.shape[0]} labels")
    if digits is not None:
        keep = np.isin(labels, np.asarray(digits))
        images, labels = images[keep], labels[keep]
    Y = images.reshape(images.shape[0], -1).astype(np.float64) / 255.0
    if unit_norm:
        norms = np.linalg.norm(Y, axis=1, keepdims=True)
        Y /= np.where(norms > 0, norms, 1.0)
    return Y, labels.astype(np.int64)

"""The paper's data: noisy two moons, concentric circles, and loaders for
MNIST (IDX files), Extended Yale B (folders of PGM images) and Salinas-A
(MATLAB ``.mat`` files); and two high-dimensional manifold sets for
benchmarks (closed curves through a common centre, nested spheres).

Nothing is downloaded: generated data are seeded, files are read from a path.
A missing file raises :class:`FileNotFoundError` naming it; a malformed one
raises :class:`ValueError` naming the file and what is wrong with it.
"""

import gzip
import os
import struct
from pathlib import Path

import numpy as np
from sklearn import datasets as _skdatasets
from sklearn.utils import check_random_state

from ._validation import check_nonneg_float, check_positive_int

#: The MNIST-5 digits of the paper (after Elhamifar and Vidal).
MNIST5_DIGITS = (0, 3, 4, 6, 7)

#: The two subjects of the paper's "Yale B, 2 faces" experiment.
YALEB_SUBJECTS = ("yaleB05", "yaleB09")

#: Salinas-A bands absorbed by water vapour (0-based; 1-based 108-112,
#: 154-167 and 224), which the paper's copy of the scene had removed.
SALINAS_WATER_BANDS = tuple(range(107, 112)) + tuple(range(153, 167)) + (223,)


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


def make_curves(n_samples=10000, n_classes=6, n_features=100, *, noise=0.03, random_state=None):
    """Closed curves through a common centre, in high dimension: one class each.

    Class c is the loop ``t -> A_c [cos t, sin t, cos 2t, sin 2t] / sqrt(2)``,
    t uniform in [0, 2 pi), with ``A_c`` a random n_features x 4 matrix of
    orthonormal columns; Gaussian noise of standard deviation ``noise`` is
    added to every coordinate. Every loop has radius 1 and is centred on the
    origin, so the classes have the same mean (k-means cannot tell them
    apart), while in their random subspaces they pass about sqrt(2) apart:
    a set for methods that follow the manifolds.

    Parameters
    ----------
    n_samples : int, default=10000
    n_classes : int, default=6
    n_features : int, default=100
        At least 4.
    noise : float, default=0.03
    random_state : int, RandomState instance or None

    Returns
    -------
    Y : ndarray of shape (n_samples, n_features)
    labels : ndarray of shape (n_samples,), int64 in [0, n_classes)
    """
    n_samples, n_classes, noise, rng = _manifold_args(n_samples, n_classes, n_features, noise, random_state, 4)
    labels = np.arange(n_samples, dtype=np.int64) % n_classes
    t = rng.uniform(0.0, 2.0 * np.pi, n_samples)
    U = np.c_[np.cos(t), np.sin(t), np.cos(2 * t), np.sin(2 * t)] / np.sqrt(2.0)
    Y = np.empty((n_samples, n_features))
    for c in range(n_classes):
        A = np.linalg.qr(rng.normal(size=(n_features, 4)))[0]
        Y[labels == c] = U[labels == c] @ A.T
    return _noisy_shuffled(Y, labels, noise, rng)


def make_nested_spheres(n_samples=10000, n_classes=5, n_features=60, *, noise=0.05, random_state=None):
    """Concentric 2-spheres of radii 1, 2, ..., one class each, in high dimension.

    The spheres lie in one random 3-dimensional subspace of R^n_features
    (points uniform on each sphere, as many on each); Gaussian noise of
    standard deviation ``noise`` is added to every coordinate. The classes
    share their mean and are one unit apart radially: the high-dimensional
    kin of the concentric circles.

    Parameters
    ----------
    n_samples : int, default=10000
    n_classes : int, default=5
    n_features : int, default=60
        At least 3.
    noise : float, default=0.05
    random_state : int, RandomState instance or None

    Returns
    -------
    Y : ndarray of shape (n_samples, n_features)
    labels : ndarray of shape (n_samples,), int64; class c has radius c + 1
    """
    n_samples, n_classes, noise, rng = _manifold_args(n_samples, n_classes, n_features, noise, random_state, 3)
    labels = np.arange(n_samples, dtype=np.int64) % n_classes
    V = rng.normal(size=(n_samples, 3))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    A = np.linalg.qr(rng.normal(size=(n_features, 3)))[0]
    Y = ((labels + 1.0)[:, None] * V) @ A.T
    return _noisy_shuffled(Y, labels, noise, rng)


def _manifold_args(n_samples, n_classes, n_features, noise, random_state, min_features):
    n_samples = check_positive_int(n_samples, "n_samples")
    n_classes = check_positive_int(n_classes, "n_classes")
    if check_positive_int(n_features, "n_features") < min_features:
        raise ValueError(f"n_features must be at least {min_features}, got {n_features}")
    if n_classes > n_samples:
        raise ValueError(f"n_classes={n_classes} exceeds n_samples={n_samples}")
    return n_samples, n_classes, check_nonneg_float(noise, "noise"), check_random_state(random_state)


def _noisy_shuffled(Y, labels, noise, rng):
    Y += noise * rng.normal(size=Y.shape)
    order = rng.permutation(Y.shape[0])
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


# -- PGM images (Extended Yale B) ------------------------------------------------


def read_pgm(path):
    """Read one binary (P5) or plain (P2) PGM greyscale image.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    image : ndarray of shape (height, width)
        uint8 when the header's maxval is below 256, else uint16.
    maxval : int
        The header's maximum grey value.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"PGM file not found: {path}")
    with open(path, "rb") as f:
        raw = f.read()
    # Header: magic, width, height, maxval, separated by whitespace, with
    # '#' comments to the end of a line; one whitespace byte ends it.
    tokens, pos = [], 0
    while len(tokens) < 4:
        while pos < len(raw) and raw[pos : pos + 1].isspace():
            pos += 1
        if pos < len(raw) and raw[pos : pos + 1] == b"#":
            end = raw.find(b"\n", pos)
            pos = len(raw) if end < 0 else end + 1
            continue
        start = pos
        while pos < len(raw) and not raw[pos : pos + 1].isspace() and raw[pos : pos + 1] != b"#":
            pos += 1
        if start == pos:
            raise ValueError(f"{path}: file too short for a PGM header")
        tokens.append(raw[start:pos])
        if len(tokens) == 1 and tokens[0] not in (b"P5", b"P2"):
            raise ValueError(f"{path}: not a greyscale PGM image (magic {tokens[0][:8]!r}, expected b'P5' or b'P2')")
    magic = tokens[0]
    try:
        width, height, maxval = (int(t) for t in tokens[1:])
    except ValueError:
        raise ValueError(f"{path}: malformed PGM header {b' '.join(tokens)!r}") from None
    if width < 1 or height < 1 or not 0 < maxval < 65536:
        raise ValueError(f"{path}: bad PGM header: width {width}, height {height}, maxval {maxval}")
    if pos >= len(raw) or not raw[pos : pos + 1].isspace():
        raise ValueError(f"{path}: PGM header is not followed by whitespace and pixel data")
    body = raw[pos + 1 :]
    if magic == b"P2":
        try:
            values = np.array(body.split(), dtype=np.int64)
        except ValueError:
            raise ValueError(f"{path}: non-numeric pixel values in a plain PGM") from None
        if values.size != width * height:
            raise ValueError(f"{path}: {values.size} pixel values, header promises {width * height}")
        if values.size and (values.min() < 0 or values.max() > maxval):
            raise ValueError(f"{path}: pixel values outside [0, {maxval}]")
        dtype = np.uint8 if maxval < 256 else np.uint16
        return values.astype(dtype).reshape(height, width), maxval
    dtype = np.dtype(np.uint8) if maxval < 256 else np.dtype(">u2")
    expected = width * height * dtype.itemsize
    if len(body) != expected:
        raise ValueError(f"{path}: {len(body)} pixel bytes, header promises {expected}")
    image = np.frombuffer(body, dtype=dtype).reshape(height, width)
    if image.max(initial=0) > maxval:
        raise ValueError(f"{path}: pixel values above maxval {maxval}")
    return image.astype(np.uint8 if maxval < 256 else np.uint16), maxval


def load_yaleb(path, *, subjects=YALEB_SUBJECTS, unit_norm=False, include_ambient=False):
    """Load cropped Extended Yale B faces from one folder of PGM images per subject.

    The paper's "Yale B, 2 faces": subjects ``yaleB05`` and ``yaleB09``, 64
    illumination conditions each, 192 x 168 pixels (d = 32256).

    Parameters
    ----------
    path : str or path-like
        Folder holding one sub-folder of ``.pgm`` files per subject, e.g.
        ``shared/data/yaleb``.
    subjects : sequence of str or None, default=("yaleB05", "yaleB09")
        Sub-folders to read, in this order; ``None`` reads every sub-folder
        that holds ``.pgm`` files, sorted by name.
    unit_norm : bool, default=False
        Scale each image vector to unit Euclidean norm.
    include_ambient : bool, default=False
        Also read the ``*_Ambient.pgm`` image (no directed light) that the
        cropped database ships with each subject.

    Returns
    -------
    Y : ndarray of shape (n, height * width), float64
        Pixels scaled to [0, 1] (by the header's maxval), images in file-name
        order within each subject.
    labels : ndarray of shape (n,), int64
        Index of the subject in ``subjects``.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"Yale B folder not found: {path}")
    if subjects is None:
        subjects = sorted(
            e
            for e in os.listdir(path)
            if os.path.isdir(os.path.join(path, e))
            and any(f.lower().endswith(".pgm") for f in os.listdir(os.path.join(path, e)))
        )
        if not subjects:
            raise FileNotFoundError(f"no sub-folder of .pgm images in {path}")
    elif isinstance(subjects, (str, bytes)):
        raise TypeError(f"subjects must be a sequence of folder names, got the string {subjects!r}")
    rows, labels, shape = [], [], None
    for label, subject in enumerate(subjects):
        folder = os.path.join(path, subject)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"Yale B subject folder not found: {folder}")
        names = sorted(
            f
            for f in os.listdir(folder)
            if f.lower().endswith(".pgm") and (include_ambient or "ambient" not in f.lower())
        )
        if not names:
            raise FileNotFoundError(f"no .pgm images in {folder}")
        for name in names:
            image, maxval = read_pgm(os.path.join(folder, name))
            if shape is None:
                shape = image.shape
            elif image.shape != shape:
                raise ValueError(
                    f"{os.path.join(folder, name)}: image is {image.shape[0]} x {image.shape[1]}, "
                    f"the first image read was {shape[0]} x {shape[1]}"
                )
            rows.append(image.reshape(-1).astype(np.float64) / maxval)
            labels.append(label)
    Y = np.stack(rows)
    if unit_norm:
        norms = np.linalg.norm(Y, axis=1, keepdims=True)
        Y /= np.where(norms > 0, norms, 1.0)
    return Y, np.asarray(labels, dtype=np.int64)


# -- MATLAB files (Salinas-A) ------------------------------------------------------


def _loadmat_array(path, key):
    """The array stored under ``key`` in a MATLAB file, with clear errors."""
    from scipy.io import loadmat

    if not os.path.isfile(path):
        raise FileNotFoundError(f"MATLAB file not found: {path}")
    try:
        contents = loadmat(path)
    except Exception as exc:  # scipy raises several types for a corrupt file
        raise ValueError(f"{path}: cannot read it as a MATLAB .mat file ({type(exc).__name__}: {exc})") from exc
    if key not in contents:
        found = sorted(k for k in contents if not k.startswith("__"))
        raise ValueError(f"{path}: no variable {key!r} in the file (found {found})")
    value = contents[key]
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
        raise ValueError(f"{path}: variable {key!r} is not a numeric array")
    return value


def load_salinas_a(path, *, labelled_only=True, drop_water_bands=False, unit_norm=False):
    """Load the Salinas-A hyperspectral scene (AVIRIS) and its ground truth.

    Reads ``SalinasA.mat`` (variable ``salinasA``, an 83 x 86 x 224 cube)
    and ``SalinasA_gt.mat`` (variable ``salinasA_gt``, 83 x 86 labels, 0 =
    unlabelled). The paper clusters the labelled pixels into its 6 crop
    classes (5348 pixels in this copy of the scene).

    Parameters
    ----------
    path : str or path-like
        Folder holding the two files, e.g. ``shared/data/salinasA``.
    labelled_only : bool, default=True
        Keep only pixels with a nonzero label; otherwise return every pixel
        (label 0 included), in row-major order.
    drop_water_bands : bool, default=False
        Remove the 20 water-absorption bands (``SALINAS_WATER_BANDS``), as in
        the paper's copy (204 bands).
    unit_norm : bool, default=False
        Scale each pixel's spectrum to unit Euclidean norm.

    Returns
    -------
    Y : ndarray of shape (n, n_bands), float64
        Raw radiance values, one pixel per row.
    labels : ndarray of shape (n,), int64
        Ground-truth class codes (1, 10, 11, 12, 13, 14 in this scene).
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"Salinas-A folder not found: {path}")
    cube = _loadmat_array(os.path.join(path, "SalinasA.mat"), "salinasA")
    gt = _loadmat_array(os.path.join(path, "SalinasA_gt.mat"), "salinasA_gt")
    if cube.ndim != 3:
        raise ValueError(f"{os.path.join(path, 'SalinasA.mat')}: expected a 3-D cube, got shape {cube.shape}")
    if gt.shape != cube.shape[:2]:
        raise ValueError(f"ground truth is {gt.shape}, but the image is {cube.shape[:2]} pixels")
    if gt.dtype.kind == "f" and not np.all(gt == np.round(gt)):
        raise ValueError("ground-truth labels are not integers")
    Y = cube.reshape(-1, cube.shape[2]).astype(np.float64)
    labels = gt.reshape(-1).astype(np.int64)
    if not np.all(np.isfinite(Y)):
        raise ValueError(f"{os.path.join(path, 'SalinasA.mat')}: the cube holds NaN or infinite values")
    if drop_water_bands:
        if cube.shape[2] != 224:
            raise ValueError(f"drop_water_bands needs the 224-band cube, this one has {cube.shape[2]} bands")
        Y = np.delete(Y, SALINAS_WATER_BANDS, axis=1)
    if labelled_only:
        keep = labels != 0
        Y, labels = Y[keep], labels[keep]
    if unit_norm:
        norms = np.linalg.norm(Y, axis=1, keepdims=True)
        Y /= np.where(norms > 0, norms, 1.0)
    return np.ascontiguousarray(Y), labels


# -- where the data live, and the paper's preprocessing ----------------------


def find_data_dir(path=None):
    """The folder holding ``mnist/``, ``yaleb/`` and ``salinasA/``, or None.

    Parameters
    ----------
    path : str, path-like or None
        Used as given when not None. Otherwise the environment variable
        ``FASTKDS_DATA``, else the first existing ``shared/data`` folder in
        or beside the current directory, or beside the fastkds checkout.

    Returns
    -------
    pathlib.Path or None
    """
    if path is not None:
        return Path(path)
    env = os.environ.get("FASTKDS_DATA")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parent.parent
    for base in (Path.cwd(), Path.cwd().parent, checkout, checkout.parent):
        candidate = base / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return None


#: The paper's three preprocessings (supplement, "Pre-processing of data"):
#: P1 scales each feature to [0, 1], P2 standardises each feature, P3 scales
#: each point to unit norm. The paper reports the best of the three.
PREPROCESSING = ("minmax", "standardize", "unit_norm")


def preprocess(Y, how):
    """One of the paper's preprocessings of the data (a new array).

    Parameters
    ----------
    Y : ndarray of shape (n, d)
    how : {"minmax", "standardize", "unit_norm"}
        ``"minmax"`` (the paper's P1): each feature (column) scaled to
        [0, 1]. ``"standardize"`` (P2): each feature to mean 0 and standard
        deviation 1. ``"unit_norm"`` (P3): each point (row) to unit
        Euclidean norm. A constant feature or a zero row is left at 0.

    Returns
    -------
    ndarray of shape (n, d), float64
    """
    if how not in PREPROCESSING:
        raise ValueError(f"preprocess must be one of {PREPROCESSING}, got {how!r}")
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2:
        raise ValueError(f"expected a 2-D array (points x features), got shape {Y.shape}")
    if how == "unit_norm":
        scale = np.linalg.norm(Y, axis=1, keepdims=True)
        return Y / np.where(scale > 0, scale, 1.0)
    if how == "minmax":
        shift, scale = Y.min(axis=0), np.ptp(Y, axis=0)
    else:
        shift, scale = Y.mean(axis=0), Y.std(axis=0)
    return (Y - shift) / np.where(scale > 0, scale, 1.0)


def moons_bayes_labels(Y, noise=0.1, n_grid=2001, chunk=20000):
    """Labels of the Bayes classifier for scikit-learn's noisy moons.

    It knows the generating model (two half circles, Gaussian noise of
    standard deviation ``noise``, equal priors) and labels each point by the
    larger class likelihood, so no method beats it on average.

    Parameters
    ----------
    Y : ndarray of shape (n, 2)
    noise : float, default=0.1

    Returns
    -------
    labels : ndarray of shape (n,), int64 in {0, 1}
    """
    t = np.linspace(0.0, np.pi, n_grid)
    curves = (np.c_[np.cos(t), np.sin(t)], np.c_[1.0 - np.cos(t), 0.5 - np.sin(t)])
    out = np.empty(Y.shape[0], dtype=np.int64)
    for s in range(0, Y.shape[0], chunk):
        P = Y[s : s + chunk]
        lik = [np.exp(-((P[:, None, :] - C[None]) ** 2).sum(axis=2) / (2 * noise**2)).sum(axis=1) for C in curves]
        out[s : s + chunk] = lik[1] > lik[0]
    return out

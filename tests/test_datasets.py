"""Tests of the paper's data sets (:mod:`fastkds.datasets`: generators and the
IDX, PGM and .mat loaders) and of :func:`fastkds.clustering_accuracy`.

Malformed and missing files are generated in ``tmp_path``; the real data in
``../shared/data`` are checked when present, else those tests skip."""

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import sklearn.datasets

from fastkds import clustering_accuracy, load_mnist, make_circles, make_moons
from fastkds.datasets import (
    make_curves,
    make_nested_spheres,
    MNIST5_DIGITS,
    SALINAS_WATER_BANDS,
    load_salinas_a,
    load_yaleb,
    read_pgm,
)

MNIST_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"

# Label counts of the MNIST t10k split, digits 0..9 (shared/data/README.md).
T10K_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


# -- make_moons -----------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_make_moons_shapes_and_labels(n):
    Y, labels = make_moons(n, random_state=0)
    assert Y.shape == (n, 2)
    assert Y.dtype == np.float64
    assert labels.shape == (n,)
    assert labels.dtype == np.int64
    assert set(np.unique(labels)) <= {0, 1}
    # sklearn puts n // 2 points on the outer moon (label 0), the rest on the inner.
    assert np.sum(labels == 0) == n // 2
    assert np.sum(labels == 1) == n - n // 2


@pytest.mark.parametrize("n, seed", [(1, 0), (100, 0), (2001, 1), (500, 42)])
def test_make_moons_equals_sklearn_with_noise_0_1(n, seed):
    Y, labels = make_moons(n, random_state=seed)
    Y_sk, labels_sk = sklearn.datasets.make_moons(n, noise=0.1, random_state=seed)
    assert np.array_equal(Y, Y_sk)
    assert np.array_equal(labels, labels_sk)


def test_make_moons_seed_reproducible():
    a = make_moons(300, random_state=7)
    b = make_moons(300, random_state=7)
    c = make_moons(300, random_state=8)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    rng_a, rng_b = np.random.RandomState(3), np.random.RandomState(3)
    assert np.array_equal(make_moons(50, random_state=rng_a)[0], make_moons(50, random_state=rng_b)[0])


def test_make_moons_without_noise_lies_on_half_circles():
    Y, labels = make_moons(400, noise=0.0, random_state=0)
    outer, inner = Y[labels == 0], Y[labels == 1]
    np.testing.assert_allclose(np.hypot(outer[:, 0], outer[:, 1]), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.hypot(inner[:, 0] - 1, inner[:, 1] - 0.5), 1.0, atol=1e-12)
    assert np.all(outer[:, 1] >= -1e-12) and np.all(inner[:, 1] <= 0.5 + 1e-12)


def test_make_moons_noise_has_requested_scale():
    # sklearn shuffles before it adds the noise, so with one seed the noisy and
    # clean samples differ by the Gaussian noise alone.
    clean, labels_clean = make_moons(4000, noise=0.0, random_state=0)
    noisy, labels_noisy = make_moons(4000, noise=0.3, random_state=0)
    assert np.array_equal(labels_clean, labels_noisy)
    diff = noisy - clean
    assert abs(diff.mean()) < 0.02
    assert np.std(diff) == pytest.approx(0.3, rel=0.05)


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        (dict(n_samples=0), ValueError),
        (dict(n_samples=-5), ValueError),
        (dict(n_samples=2.5), TypeError),
        (dict(n_samples=10, noise=-0.1), ValueError),
        (dict(n_samples=10, noise=np.inf), ValueError),
    ],
)
def test_make_moons_bad_arguments(kwargs, exc):
    name = "noise" if "noise" in kwargs else "n_samples"
    with pytest.raises(exc, match=name):
        make_moons(**kwargs)


# -- make_circles ---------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
@pytest.mark.parametrize("delta", [0.0, 0.05, 0.5, 1.0])
def test_make_circles_radii_and_balance(n, delta):
    Y, labels = make_circles(n, delta, random_state=0)
    assert Y.shape == (n, 2)
    assert Y.dtype == np.float64
    assert labels.shape == (n,)
    assert labels.dtype == np.int64
    radius = np.hypot(Y[:, 0], Y[:, 1])
    np.testing.assert_allclose(radius[labels == 0], 1.0, rtol=0, atol=1e-14)
    np.testing.assert_allclose(radius[labels == 1], 1.0 - delta, rtol=0, atol=1e-14)
    # Half on each circle; the outer one takes the odd point.
    assert np.sum(labels == 0) == n - n // 2
    assert np.sum(labels == 1) == n // 2


def test_make_circles_shuffled_and_uniform_in_angle():
    Y, labels = make_circles(4000, 0.2, random_state=1)
    assert not np.all(np.diff(labels) >= 0), "points must be shuffled, not sorted by label"
    theta = np.arctan2(Y[:, 1], Y[:, 0])
    counts, _ = np.histogram(theta, bins=8, range=(-np.pi, np.pi))
    # Uniform angles: about 500 per bin (binomial sd ~ 21).
    assert counts.min() > 400 and counts.max() < 600


def test_make_circles_seed_reproducible():
    a = make_circles(200, 0.1, random_state=5)
    b = make_circles(200, 0.1, random_state=5)
    c = make_circles(200, 0.1, random_state=6)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize("delta, exc", [(-0.1, ValueError), (1.5, ValueError), (np.nan, ValueError), ("x", TypeError)])
def test_make_circles_delta_validation(delta, exc):
    with pytest.raises(exc, match="delta"):
        make_circles(10, delta)


def test_make_circles_n_samples_validation():
    with pytest.raises(ValueError, match="n_samples"):
        make_circles(0, 0.1)


@pytest.mark.parametrize("make,k,d,rank", [(make_curves, 6, 100, 4), (make_nested_spheres, 5, 60, 3)])
def test_manifold_sets_shapes_classes_and_geometry(make, k, d, rank):
    """Balanced classes with a common mean (k-means has nothing to go on),
    each on its own manifold: without noise, curves lie on 4-D subspaces at
    radius 1, spheres in one 3-D subspace at radius c + 1."""
    Y, y = make(3000, random_state=0)
    assert Y.shape == (3000, d) and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y), 3000 // k)
    clean, yc = make(3000, noise=0.0, random_state=0)
    for c in range(k):
        P = clean[yc == c]
        assert np.linalg.matrix_rank(P, tol=1e-8) == rank
        radius = np.linalg.norm(P, axis=1)
        np.testing.assert_allclose(radius, 1.0 if make is make_curves else c + 1.0, atol=1e-12)
        assert np.linalg.norm(P.mean(axis=0)) < 0.1 * (c + 1)
    assert np.std(Y - clean) == pytest.approx(make.__kwdefaults__["noise"], rel=0.05)
    again, _ = make(3000, random_state=0)
    np.testing.assert_array_equal(Y, again)


@pytest.mark.parametrize("make", [make_curves, make_nested_spheres])
def test_manifold_sets_validation(make):
    with pytest.raises(ValueError, match="n_features must be at least"):
        make(100, n_features=2)
    with pytest.raises(ValueError, match="n_classes=200 exceeds n_samples=100"):
        make(100, n_classes=200)
    with pytest.raises(ValueError, match="noise"):
        make(100, noise=-1.0)


# -- load_mnist: the real files ---------------------------------------------------


@pytest.fixture(scope="module")
def mnist_dir():
    if not (MNIST_DIR / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip(f"MNIST data not found at {MNIST_DIR}")
    return MNIST_DIR


@pytest.fixture(scope="module")
def mnist5(mnist_dir):
    return load_mnist(mnist_dir)


def test_load_mnist5(mnist5):
    Y, labels = mnist5
    assert Y.shape == (4958, 784)
    assert Y.dtype == np.float64
    assert labels.shape == (4958,)
    assert labels.dtype == np.int64
    assert set(np.unique(labels)) == set(MNIST5_DIGITS) == {0, 3, 4, 6, 7}
    np.testing.assert_allclose(np.linalg.norm(Y, axis=1), 1.0, rtol=0, atol=1e-12)
    assert Y.min() >= 0
    for digit in MNIST5_DIGITS:
        assert np.sum(labels == digit) == T10K_COUNTS[digit]


def test_load_mnist_all_digits(mnist_dir, mnist5):
    Y, labels = load_mnist(mnist_dir, digits=None)
    assert Y.shape == (10000, 784)
    assert np.array_equal(np.bincount(labels, minlength=10), T10K_COUNTS)
    # MNIST-5 is the subset of these rows, in file order.
    keep = np.isin(labels, MNIST5_DIGITS)
    assert np.array_equal(Y[keep], mnist5[0])
    assert np.array_equal(labels[keep], mnist5[1])


def test_load_mnist_raw_pixels(mnist_dir):
    Y, labels = load_mnist(mnist_dir, digits=[1], unit_norm=False)
    assert Y.shape == (T10K_COUNTS[1], 784)
    assert np.all(labels == 1)
    assert Y.min() == 0.0 and Y.max() == 1.0
    # Pixels are k / 255.
    np.testing.assert_allclose(Y * 255, np.round(Y * 255), atol=1e-9)


def test_load_mnist_accepts_str_path(mnist_dir):
    Y, _ = load_mnist(str(mnist_dir), digits=[0])
    assert Y.shape == (T10K_COUNTS[0], 784)


# -- load_mnist: synthetic IDX files ----------------------------------------------


def _idx_bytes(array, magic):
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", s) for s in array.shape)
    return header + array.astype(np.uint8).tobytes()


def _write_idx(folder, split, images, labels, *, gz):
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        f"{split}-images-idx3-ubyte": _idx_bytes(images, 2051),
        f"{split}-labels-idx1-ubyte": _idx_bytes(labels, 2049),
    }
    for name, data in files.items():
        if gz:
            with gzip.open(folder / (name + ".gz"), "wb") as f:
                f.write(data)
        else:
            (folder / name).write_bytes(data)


@pytest.fixture
def tiny_mnist():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(12, 28, 28), dtype=np.uint8)
    images[5] = 0  # an all-black image must not divide by zero
    labels = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 3], dtype=np.uint8)
    return images, labels


@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "raw"])
@pytest.mark.parametrize("split", ["t10k", "train"])
def test_load_mnist_synthetic_files(tmp_path, tiny_mnist, gz, split):
    images, labels = tiny_mnist
    _write_idx(tmp_path, split, images, labels, gz=gz)
    Y, out_labels = load_mnist(tmp_path, split=split, digits=None, unit_norm=False)
    np.testing.assert_array_equal(Y, images.reshape(12, 784) / 255.0)
    np.testing.assert_array_equal(out_labels, labels)

    Y5, labels5 = load_mnist(tmp_path, split=split)
    keep = np.isin(labels, MNIST5_DIGITS)
    np.testing.assert_array_equal(labels5, labels[keep])
    norms = np.linalg.norm(Y5, axis=1)
    black = np.all(images[keep] == 0, axis=(1, 2))
    np.testing.assert_allclose(norms[~black], 1.0, atol=1e-12)
    assert np.all(Y5[black] == 0) and np.all(np.isfinite(Y5))


# -- load_mnist: errors -------------------------------------------------------------


def test_load_mnist_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_mnist(tmp_path / "nowhere")


def test_load_mnist_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
        load_mnist(tmp_path)


def test_load_mnist_missing_split(tmp_path, tiny_mnist):
    _write_idx(tmp_path, "t10k", *tiny_mnist, gz=False)
    with pytest.raises(FileNotFoundError, match="train-images"):
        load_mnist(tmp_path, split="train")


@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "raw"])
def test_load_mnist_truncated_body(tmp_path, tiny_mnist, gz):
    images, labels = tiny_mnist
    data = _idx_bytes(images, 2051)[:-100]  # a valid header promising more than is there
    name = "t10k-images-idx3-ubyte"
    if gz:
        with gzip.open(tmp_path / (name + ".gz"), "wb") as f:
            f.write(data)
    else:
        (tmp_path / name).write_bytes(data)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(_idx_bytes(labels, 2049))
    with pytest.raises(ValueError, match="header promises"):
        load_mnist(tmp_path)


def test_load_mnist_truncated_gzip_stream(tmp_path, tiny_mnist):
    """A download cut short: the gzip stream itself ends early."""
    images, labels = tiny_mnist
    _write_idx(tmp_path, "t10k", images, labels, gz=True)
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte"):
        load_mnist(tmp_path)


def test_load_mnist_corrupt_gzip(tmp_path, tiny_mnist):
    _write_idx(tmp_path, "t10k", *tiny_mnist, gz=False)
    (tmp_path / "t10k-images-idx3-ubyte").unlink()
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte"):
        load_mnist(tmp_path)


def test_load_mnist_garbage_file(tmp_path, tiny_mnist):
    _write_idx(tmp_path, "t10k", *tiny_mnist, gz=False)
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(b"this is not an IDX file at all" * 10)
    with pytest.raises(ValueError, match="magic"):
        load_mnist(tmp_path)


def test_load_mnist_swapped_files(tmp_path, tiny_mnist):
    images, labels = tiny_mnist
    tmp_path.joinpath("t10k-images-idx3-ubyte").write_bytes(_idx_bytes(labels, 2049))
    tmp_path.joinpath("t10k-labels-idx1-ubyte").write_bytes(_idx_bytes(images, 2051))
    with pytest.raises(ValueError, match="magic"):
        load_mnist(tmp_path)


def test_load_mnist_file_shorter_than_header(tmp_path, tiny_mnist):
    _write_idx(tmp_path, "t10k", *tiny_mnist, gz=False)
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(b"\x00\x00\x08")
    with pytest.raises(ValueError, match="too short"):
        load_mnist(tmp_path)


def test_load_mnist_count_mismatch(tmp_path, tiny_mnist):
    images, labels = tiny_mnist
    _write_idx(tmp_path, "t10k", images, labels[:-1], gz=False)
    with pytest.raises(ValueError, match="labels"):
        load_mnist(tmp_path)


# -- clustering_accuracy -----------------------------------------------------------


def test_accuracy_invariant_to_label_permutation():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 5, size=200)
    perm = np.array([3, 0, 4, 1, 2])
    assert clustering_accuracy(truth, perm[truth]) == 1.0
    assert clustering_accuracy(truth, perm[truth] + 10) == 1.0


def test_accuracy_known_examples():
    # Cluster 1 -> class 0 (2 right), cluster 0 -> class 1 (3 right): 5 of 6.
    assert clustering_accuracy([0, 0, 0, 1, 1, 1], [1, 1, 0, 0, 0, 0]) == pytest.approx(5 / 6)
    # More clusters than classes: only one cluster per class counts.
    assert clustering_accuracy([0, 0, 1, 1], [0, 1, 2, 3]) == pytest.approx(0.5)
    # More classes than clusters.
    assert clustering_accuracy([0, 1, 2, 2], [0, 0, 0, 0]) == pytest.approx(0.5)
    # Everything wrong under the identity, right under the swap.
    assert clustering_accuracy([0, 1, 0, 1], [1, 0, 1, 0]) == 1.0


def test_accuracy_accepts_strings_and_columns():
    assert clustering_accuracy(["a", "a", "b"], np.array([[7], [7], [9]])) == 1.0


def test_accuracy_errors():
    with pytest.raises(ValueError, match="entries"):
        clustering_accuracy([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="empty"):
        clustering_accuracy([], [])


# -- read_pgm / load_yaleb: synthetic PGM files ---------------------------------------

YALEB_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "yaleb"
SALINAS_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "salinasA"


def _pgm_bytes(image, maxval=255, comment=None, plain=False):
    h, w = image.shape
    header = b"P2\n" if plain else b"P5\n"
    if comment:
        header += b"# " + comment + b"\n"
    header += f"{w} {h}\n{maxval}\n".encode()
    if plain:
        return header + " ".join(str(int(v)) for v in image.ravel()).encode() + b"\n"
    dtype = np.uint8 if maxval < 256 else ">u2"
    return header + image.astype(dtype).tobytes()


def test_read_pgm_binary_8bit(tmp_path):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(7, 5), dtype=np.uint8)
    image[0, 0] = 10  # a first pixel equal to b"\n" must stay a pixel, not header whitespace
    image[0, 1] = 32  # and b" "
    path = tmp_path / "a.pgm"
    path.write_bytes(_pgm_bytes(image, comment=b"made by a test"))
    out, maxval = read_pgm(path)
    assert maxval == 255 and out.dtype == np.uint8
    np.testing.assert_array_equal(out, image)


def test_read_pgm_binary_16bit_and_plain(tmp_path):
    image = np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000
    (tmp_path / "b.pgm").write_bytes(_pgm_bytes(image, maxval=65535))
    out, maxval = read_pgm(tmp_path / "b.pgm")
    assert maxval == 65535 and out.dtype == np.uint16
    np.testing.assert_array_equal(out, image)
    small = np.array([[0, 1, 2], [3, 4, 15]])
    (tmp_path / "c.pgm").write_bytes(_pgm_bytes(small, maxval=15, plain=True))
    out, maxval = read_pgm(str(tmp_path / "c.pgm"))
    assert maxval == 15
    np.testing.assert_array_equal(out, small)


@pytest.mark.parametrize(
    "data, match",
    [
        (b"", "too short"),
        (b"P5\n4 4\n", "too short"),
        (b"P6\n1 1\n255\n\x00\x00\x00", "not a greyscale PGM"),
        (b"GIF89a garbage", "not a greyscale PGM"),
        (b"P5\n4 x\n255\n" + bytes(16), "malformed PGM header"),
        (b"P5\n0 4\n255\n", "bad PGM header"),
        (b"P5\n2 2\n0\n" + bytes(4), "bad PGM header"),
        (b"P5\n4 4\n255\n" + bytes(15), "header promises 16"),
        (b"P5\n4 4\n255\n" + bytes(17), "header promises 16"),
        (b"P5\n2 2\n100\n" + bytes([0, 1, 2, 200]), "above maxval"),
        (b"P2\n2 2\n9\n1 2 3\n", "header promises 4"),
        (b"P2\n2 2\n9\n1 2 3 x\n", "non-numeric"),
        (b"P2\n2 2\n9\n1 2 3 10\n", "outside"),
    ],
)
def test_read_pgm_malformed(tmp_path, data, match):
    path = tmp_path / "bad.pgm"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match) as excinfo:
        read_pgm(path)
    assert "bad.pgm" in str(excinfo.value)


def test_read_pgm_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere.pgm"):
        read_pgm(tmp_path / "nothere.pgm")


@pytest.fixture
def tiny_yaleb(tmp_path):
    """Two subjects of three 6 x 4 images, plus an ambient image each."""
    rng = np.random.default_rng(1)
    images = {}
    for subject in ("yaleB05", "yaleB09"):
        folder = tmp_path / subject
        folder.mkdir()
        for name in ("P00A+000E+00", "P00A+010E-20", "P00A-005E+10", "P00_Ambient"):
            image = rng.integers(0, 256, size=(6, 4), dtype=np.uint8)
            (folder / f"{subject}_{name}.pgm").write_bytes(_pgm_bytes(image))
            images[(subject, name)] = image
    (tmp_path / "README.txt").write_text("not a subject")
    return tmp_path, images


def test_load_yaleb_synthetic(tiny_yaleb):
    root, images = tiny_yaleb
    Y, labels = load_yaleb(root)
    assert Y.shape == (6, 24) and Y.dtype == np.float64
    np.testing.assert_array_equal(labels, [0, 0, 0, 1, 1, 1])
    # File-name order within a subject; pixels scaled by maxval; no ambient image.
    expected = [images[("yaleB05", n)] for n in ("P00A+000E+00", "P00A+010E-20", "P00A-005E+10")]
    np.testing.assert_allclose(Y[:3], np.stack(expected).reshape(3, 24) / 255.0)

    Y2, labels2 = load_yaleb(root, subjects=["yaleB09", "yaleB05"], include_ambient=True, unit_norm=True)
    assert Y2.shape == (8, 24)
    np.testing.assert_array_equal(labels2, [0] * 4 + [1] * 4)
    np.testing.assert_allclose(np.linalg.norm(Y2, axis=1), 1.0, atol=1e-12)
    # Discovery: every sub-folder with .pgm files, sorted.
    Y3, labels3 = load_yaleb(root, subjects=None)
    np.testing.assert_array_equal(Y3, Y)
    np.testing.assert_array_equal(labels3, labels)


def test_load_yaleb_errors(tiny_yaleb, tmp_path_factory):
    root, _ = tiny_yaleb
    with pytest.raises(FileNotFoundError, match="Yale B folder not found"):
        load_yaleb(root / "nowhere")
    with pytest.raises(FileNotFoundError, match="yaleB99"):
        load_yaleb(root, subjects=["yaleB05", "yaleB99"])
    with pytest.raises(TypeError, match="subjects"):
        load_yaleb(root, subjects="yaleB05")
    (root / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .pgm images"):
        load_yaleb(root, subjects=["empty"])
    with pytest.raises(FileNotFoundError, match="no sub-folder"):
        load_yaleb(tmp_path_factory.mktemp("nofaces"), subjects=None)
    # One image of another size.
    odd = np.zeros((5, 4), np.uint8)
    (root / "yaleB09" / "yaleB09_P00A+000E+00.pgm").write_bytes(_pgm_bytes(odd))
    with pytest.raises(ValueError, match="5 x 4"):
        load_yaleb(root)
    # A truncated image names its file.
    (root / "yaleB09" / "yaleB09_P00A+000E+00.pgm").write_bytes(b"P5\n4 6\n255\n" + bytes(5))
    with pytest.raises(ValueError, match="yaleB09_P00A\\+000E\\+00.pgm"):
        load_yaleb(root)


# -- load_yaleb: the real files --------------------------------------------------------


@pytest.mark.skipif(not YALEB_DIR.is_dir(), reason=f"Yale B data not found at {YALEB_DIR}")
def test_load_yaleb_real():
    Y, labels = load_yaleb(YALEB_DIR)
    assert Y.shape == (128, 192 * 168)
    np.testing.assert_array_equal(np.bincount(labels), [64, 64])
    assert 0.0 <= Y.min() and Y.max() <= 1.0
    # Independently: the data README's recipe (skip the text header, read w*h bytes).
    first = sorted((YALEB_DIR / "yaleB05").glob("*.pgm"))[0]
    raw = first.read_bytes()
    assert raw.startswith(b"P5\n168 192\n255\n")
    pixels = np.frombuffer(raw[-192 * 168 :], dtype=np.uint8)
    np.testing.assert_array_equal(Y[0], pixels / 255.0)


# -- load_salinas_a: synthetic .mat files -----------------------------------------------


def _write_salinas(folder, cube, gt, *, cube_key="salinasA", gt_key="salinasA_gt"):
    from scipy.io import savemat

    folder.mkdir(parents=True, exist_ok=True)
    savemat(folder / "SalinasA.mat", {cube_key: cube})
    savemat(folder / "SalinasA_gt.mat", {gt_key: gt})


@pytest.fixture
def tiny_salinas(tmp_path):
    rng = np.random.default_rng(2)
    cube = rng.integers(-10, 9000, size=(4, 5, 224)).astype(np.int16)
    gt = np.array([[0, 1, 1, 10, 10], [0, 0, 11, 11, 12], [13, 13, 14, 14, 0], [1, 10, 0, 12, 14]], np.uint8)
    _write_salinas(tmp_path / "salinasA", cube, gt)
    return tmp_path / "salinasA", cube, gt


def test_load_salinas_a_synthetic(tiny_salinas):
    folder, cube, gt = tiny_salinas
    Y, labels = load_salinas_a(folder)
    keep = gt.ravel() != 0
    assert Y.shape == (keep.sum(), 224) and Y.dtype == np.float64
    np.testing.assert_array_equal(Y, cube.reshape(20, 224)[keep])
    np.testing.assert_array_equal(labels, gt.ravel()[keep])

    Y_all, labels_all = load_salinas_a(str(folder), labelled_only=False, drop_water_bands=True)
    assert Y_all.shape == (20, 204)
    np.testing.assert_array_equal(labels_all, gt.ravel())
    kept_bands = [b for b in range(224) if b not in SALINAS_WATER_BANDS]
    np.testing.assert_array_equal(Y_all, cube.reshape(20, 224)[:, kept_bands])
    # 1-based bands 108-112, 154-167 and 224 (shared/data/README.md).
    assert sorted(b + 1 for b in SALINAS_WATER_BANDS) == list(range(108, 113)) + list(range(154, 168)) + [224]

    Y_unit, _ = load_salinas_a(folder, unit_norm=True)
    np.testing.assert_allclose(np.linalg.norm(Y_unit, axis=1), 1.0, atol=1e-12)


def test_load_salinas_a_missing(tmp_path, tiny_salinas):
    folder, cube, gt = tiny_salinas
    with pytest.raises(FileNotFoundError, match="Salinas-A folder not found"):
        load_salinas_a(tmp_path / "nowhere")
    (folder / "SalinasA_gt.mat").unlink()
    with pytest.raises(FileNotFoundError, match="SalinasA_gt.mat"):
        load_salinas_a(folder)


def test_load_salinas_a_malformed(tmp_path):
    cube = np.zeros((4, 5, 224), np.int16)
    gt = np.ones((4, 5), np.uint8)
    # Not a MATLAB file at all.
    _write_salinas(tmp_path / "a", cube, gt)
    (tmp_path / "a" / "SalinasA.mat").write_bytes(b"this is not a MATLAB file" * 20)
    with pytest.raises(ValueError, match="SalinasA.mat: cannot read"):
        load_salinas_a(tmp_path / "a")
    # A truncated one.
    _write_salinas(tmp_path / "b", cube, gt)
    path = tmp_path / "b" / "SalinasA.mat"
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(ValueError, match="SalinasA.mat"):
        load_salinas_a(tmp_path / "b")
    # The wrong variable name.
    _write_salinas(tmp_path / "c", cube, gt, cube_key="salinas")
    with pytest.raises(ValueError, match="no variable 'salinasA'.*salinas"):
        load_salinas_a(tmp_path / "c")
    # Ground truth of another size.
    _write_salinas(tmp_path / "d", cube, np.ones((4, 6), np.uint8))
    with pytest.raises(ValueError, match="ground truth"):
        load_salinas_a(tmp_path / "d")
    # A 2-D "cube".
    _write_salinas(tmp_path / "e", np.zeros((20, 224)), gt)
    with pytest.raises(ValueError, match="3-D cube"):
        load_salinas_a(tmp_path / "e")
    # Non-numeric content.
    _write_salinas(tmp_path / "f", np.array(["abc"]), gt)
    with pytest.raises(ValueError, match="not a numeric array"):
        load_salinas_a(tmp_path / "f")
    # NaN in the cube; water bands asked of a cube without 224 bands.
    bad = np.zeros((4, 5, 224))
    bad[1, 1, 3] = np.nan
    _write_salinas(tmp_path / "g", bad, gt)
    with pytest.raises(ValueError, match="NaN"):
        load_salinas_a(tmp_path / "g")
    _write_salinas(tmp_path / "h", np.zeros((4, 5, 204)), gt)
    with pytest.raises(ValueError, match="224-band"):
        load_salinas_a(tmp_path / "h", drop_water_bands=True)


# -- load_salinas_a: the real files ------------------------------------------------------


@pytest.mark.skipif(not SALINAS_DIR.is_dir(), reason=f"Salinas-A data not found at {SALINAS_DIR}")
def test_load_salinas_a_real():
    Y, labels = load_salinas_a(SALINAS_DIR)
    assert Y.shape == (5348, 224)
    classes, counts = np.unique(labels, return_counts=True)
    # Class counts from shared/data/README.md.
    assert dict(zip(classes.tolist(), counts.tolist())) == {1: 391, 10: 1343, 11: 616, 12: 1525, 13: 674, 14: 799}
    Y_all, labels_all = load_salinas_a(SALINAS_DIR, labelled_only=False)
    assert Y_all.shape == (83 * 86, 224)
    assert np.sum(labels_all == 0) == 1790
    np.testing.assert_array_equal(Y_all[labels_all != 0], Y)

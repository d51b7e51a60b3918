"""Tests of the paper's data sets (:mod:`fastkds.datasets`) and of
:func:`fastkds.clustering_accuracy`."""

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import sklearn.datasets

from fastkds import clustering_accuracy, load_mnist, make_circles, make_moons
from fastkds.datasets import MNIST5_DIGITS

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


@pytest.mark.parametrize(
    "delta, exc", [(-0.1, ValueError), (1.5, ValueError), (np.nan, ValueError), ("x", TypeError)]
)
def test_make_circles_delta_validation(delta, exc):
    with pytest.raises(exc, match="delta"):
        make_circles(10, delta)


def test_make_circles_n_samples_validation():
    with pytest.raises(ValueError, match="n_samples"):
        make_circles(0, 0.1)


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

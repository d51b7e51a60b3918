"""The exact (active-set) encoder against the accelerated one, in one run.

    python bench/exact_encoder.py [--data DIR] [--repeats 3] [--threads]
    python bench/exact_encoder.py --moons [--seeds 3]

Default: MNIST-5 (4958 images) with a 500-atom dictionary fitted by
``KDS(500, lam=0.5, n_iter=100, max_epochs=3, random_state=0)``. For each
dtype, the seconds of ``sparse_encode`` (best of ``--repeats``, after a
warm-up call) with the active set, with T=100 accelerated steps at the
centred step, and with T=100 at the paper's step, and their atoms per code;
the product ``Y W^T`` alone for scale; then how far T accelerated steps
leave the codes from the exact ones (median and largest max-norm distance
over the points). ``--threads``: each encoder's seconds in float64 on one
thread and on all (``n_jobs=1`` and ``None``), and their ratio: how well
the encoding pass itself uses the cores, beside the fit's scaling
(``bench/mnist5.py --n-jobs 1 2``).

``--moons``: clustering accuracy of ``KDSClustering(2, n_atoms=m, lam=lam,
encoder="active-set")`` on noisy moons (5000 points, seeds 0 to
``--seeds``-1) over m in (24, 48) and lam in (0.5, 1, 2, 5, 10), beside the
accelerated encoder at the paper's settings (m=24, lam=5, T=15, its step).
"""

import argparse
import time
import warnings

import numpy as np

from fastkds import KDS, KDSClustering, clustering_accuracy, datasets, sparse_encode
from fastkds.datasets import find_data_dir
from fastkds.experiments import PAPER_SETTINGS

MNIST5, MOONS = PAPER_SETTINGS["mnist5"], PAPER_SETTINGS["moons"]


def encoders(args):
    data_dir = find_data_dir(args.data)
    if data_dir is None:
        raise SystemExit("no data folder: give --data DIR (holding mnist/)")
    Y, _ = datasets.load_mnist(data_dir / "mnist")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        W = KDS(MNIST5.n_atoms, lam=MNIST5.lam, n_iter=MNIST5.n_iter, max_epochs=3, random_state=0).fit(Y).components_
    print(f"MNIST-5, n={Y.shape[0]}, d={Y.shape[1]}, m={MNIST5.n_atoms}, lam={MNIST5.lam:g}")
    T = MNIST5.n_iter
    variants = [
        ("active set (exact)", "active-set", "centred"),
        (f"accelerated T={T}, centred step", "apg", "centred"),
        (f"accelerated T={T}, paper's step", "apg", "paper"),
    ]
    codes = {}
    for dtype in (np.float32, np.float64):
        Yd = Y.astype(dtype)
        for title, encoder, step in variants:
            sparse_encode(Yd[:100], W, lam=MNIST5.lam, n_iter=T, encoder=encoder, step=step)  # compile / load
            best, C = _best(
                args.repeats, lambda: sparse_encode(Yd, W, lam=MNIST5.lam, n_iter=T, encoder=encoder, step=step)
            )
            codes[title, dtype] = C
            print(f"  {np.dtype(dtype).name:8s} {title:34s} {best:.3f} s, {C.nnz / Y.shape[0]:.2f} atoms per code")
        t0 = time.perf_counter()
        Yd @ W.astype(dtype).T
        print(f"  {np.dtype(dtype).name:8s} {'the product Y W^T alone':34s} {time.perf_counter() - t0:.3f} s")
    if args.threads:
        Yd = Y.astype(np.float64)
        for title, encoder, step in variants:
            one, every = (
                _best(
                    args.repeats,
                    lambda: sparse_encode(Yd, W, lam=MNIST5.lam, n_iter=T, encoder=encoder, step=step, n_jobs=n_jobs),
                )[0]
                for n_jobs in (1, None)
            )
            print(f"  float64  {title:34s} one thread {one:.3f} s, all {every:.3f} s: {one / every:.2f}x")
    exact = codes["active set (exact)", np.float64].toarray()
    for title, _, _ in variants[1:]:
        dist = np.abs(codes[title, np.float64].toarray() - exact).max(axis=1)
        print(f"  distance to the exact codes, {title}: median {np.median(dist):.3f}, largest {dist.max():.3f}")


def _best(repeats, call):
    """Least seconds of ``repeats`` calls, and the last call's result."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - t0)
    return best, result


def moons(args):
    def accuracy(seed, **params):
        Y, y = datasets.make_moons(MOONS.n_samples, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = KDSClustering(2, random_state=seed, **params).fit(Y)
        return clustering_accuracy(y, model.labels_)

    seeds = range(args.seeds)
    print(f"noisy moons, {MOONS.n_samples} points, mean accuracy over seeds 0-{args.seeds - 1}")
    paper = np.mean(
        [
            accuracy(s, n_atoms=MOONS.n_atoms, lam=MOONS.lam, n_iter=MOONS.n_iter, step="paper", encoder="apg")
            for s in seeds
        ]
    )
    print(f"  accelerated, the paper's settings (m={MOONS.n_atoms}, lam={MOONS.lam:g}, T={MOONS.n_iter}): {paper:.4f}")
    for m in (MOONS.n_atoms, 2 * MOONS.n_atoms):
        cells = [
            np.mean([accuracy(s, n_atoms=m, lam=lam, encoder="active-set") for s in seeds])
            for lam in (0.5, 1.0, 2.0, 5.0, 10.0)
        ]
        print(f"  active set, m={m}: lam 0.5/1/2/5/10: " + " ".join(f"{a:.4f}" for a in cells))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--moons", action="store_true")
    parser.add_argument("--threads", action="store_true", help="also time each encoder on one thread and on all")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    (moons if args.moons else encoders)(args)


if __name__ == "__main__":
    main()

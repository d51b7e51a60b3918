"""Noisy moons at the paper's settings over seeds, beside the Bayes-optimal
classifier on the same points.

    python bench/moons_accuracy.py [--n 5000] [--seeds 10] [--first-seed 0]
    python bench/moons_accuracy.py --defaults --n 2000 --seeds 30 [--encoder apg]

With ``--defaults`` the clusterer runs with its own defaults
(``KDSClustering(2, random_state=seed)``) instead of the paper's settings,
beside SpectralClustering at its defaults (10 neighbours) on the same points;
``--encoder`` names its encoder instead of ``"auto"``.

The Bayes classifier knows the generating model (scikit-learn's two half
circles, Gaussian noise of standard deviation 0.1) and labels each point by
the larger class likelihood; no method can beat its accuracy on average, so it
is the ceiling to compare with.
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.cluster import SpectralClustering

from fastkds import KDSClustering, clustering_accuracy, make_moons
from fastkds.experiments import PAPER_SETTINGS
from fastkds.datasets import moons_bayes_labels as bayes_labels  # the generating model's classifier

PAPER = PAPER_SETTINGS["moons"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=PAPER.n_samples)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0, help="first seed (each seed draws the points and the fit)")
    ap.add_argument(
        "--defaults", action="store_true", help="KDSClustering's defaults, beside SpectralClustering's (10 neighbours)"
    )
    ap.add_argument(
        "--n-iter", type=int, default=PAPER.n_iter, help=f"encoder iterations T (the paper: {PAPER.n_iter})"
    )
    ap.add_argument(
        "--step",
        default="paper",
        choices=["paper", "centred"],
        help="the encoder's step (default the paper's; fastkds's default is centred)",
    )
    ap.add_argument(
        "--encoder",
        default="auto",
        choices=["auto", "apg", "active-set"],
        help="with --defaults: the encoder (default 'auto', KDSClustering's own)",
    )
    args = ap.parse_args(argv)
    if args.defaults:
        print(
            f"noisy moons n={args.n:,}, KDSClustering(2) with its defaults (encoder={args.encoder!r}); "
            "SpectralClustering(2, 10 neighbours)"
        )
    else:
        print(f"noisy moons n={args.n:,}, m={PAPER.n_atoms}, T={args.n_iter}, lam={PAPER.lam:g}")
    print(
        f"{'seed':>4} {'fastkds':>8} {'Bayes':>8} {'fit s':>7}"
        + (f" {'Spectral':>8} {'fit s':>7}" if args.defaults else "")
    )
    ours, best, theirs = [], [], []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        Y, y = make_moons(args.n, random_state=seed)
        if args.defaults:
            model = KDSClustering(2, encoder=args.encoder, random_state=seed)
        else:
            model = KDSClustering(
                2,
                n_atoms=PAPER.n_atoms,
                lam=PAPER.lam,
                n_iter=args.n_iter,
                step=args.step,
                encoder="apg",
                random_state=seed,
            )
        labels, sec = _fit(model, Y)
        ours.append(clustering_accuracy(y, labels))
        best.append(np.mean(bayes_labels(Y) == y))
        line = f"{seed:>4} {ours[-1]:8.4f} {best[-1]:8.4f} {sec:7.2f}"
        if args.defaults:
            labels, sc_sec = _fit(SpectralClustering(2, affinity="nearest_neighbors", random_state=seed), Y)
            theirs.append(clustering_accuracy(y, labels))
            line += f" {theirs[-1]:8.4f} {sc_sec:7.2f}"
        print(line)
    for name, reduce in (("mean", np.mean), (" min", np.min)):
        print(f"{name} {reduce(ours):8.4f} {reduce(best):8.4f}" + (f" {'':7} {reduce(theirs):8.4f}" if theirs else ""))
    print(f"seeds >= 0.999: fastkds {np.sum(np.array(ours) >= 0.999)}, Bayes {np.sum(np.array(best) >= 0.999)}")
    print(
        f"seeds < 0.99: fastkds {np.sum(np.array(ours) < 0.99)}"
        + (f", Spectral {np.sum(np.array(theirs) < 0.99)}" if theirs else "")
    )


def _fit(model, Y):
    """``model.fit(Y)``'s labels and seconds, warnings silenced."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        labels = model.fit(Y).labels_
    return labels, time.perf_counter() - t0


if __name__ == "__main__":
    main()

"""Noisy moons at the paper's settings over seeds, beside the Bayes-optimal
classifier on the same points.

    python bench/moons_accuracy.py [--n 5000] [--seeds 10]

The Bayes classifier knows the generating model (scikit-learn's two half
circles, Gaussian noise of standard deviation 0.1) and labels each point by
the larger class likelihood; no method can beat its accuracy on average, so it
is the ceiling to compare with.
"""

import argparse
import time
import warnings

import numpy as np

from fastkds import KDSClustering, clustering_accuracy, make_moons
from fastkds.experiments import PAPER_SETTINGS
from fastkds.datasets import moons_bayes_labels as bayes_labels  # the generating model's classifier

PAPER = PAPER_SETTINGS["moons"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=PAPER.n_samples)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument(
        "--n-iter", type=int, default=PAPER.n_iter, help=f"encoder iterations T (the paper: {PAPER.n_iter})"
    )
    ap.add_argument(
        "--step",
        default="paper",
        choices=["paper", "centred"],
        help="the encoder's step (default the paper's; fastkds's default is centred)",
    )
    args = ap.parse_args()
    print(f"noisy moons n={args.n:,}, m={PAPER.n_atoms}, T={args.n_iter}, lam={PAPER.lam:g}")
    print(f"{'seed':>4} {'fastkds':>8} {'Bayes':>8} {'fit s':>7}")
    ours, best = [], []
    for seed in range(args.seeds):
        Y, y = make_moons(args.n, random_state=seed)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = KDSClustering(
                2, n_atoms=PAPER.n_atoms, lam=PAPER.lam, n_iter=args.n_iter, step=args.step, random_state=seed
            ).fit(Y)
        sec = time.perf_counter() - t0
        ours.append(clustering_accuracy(y, model.labels_))
        best.append(np.mean(bayes_labels(Y) == y))
        print(f"{seed:>4} {ours[-1]:8.4f} {best[-1]:8.4f} {sec:7.2f}")
    print(f"mean {np.mean(ours):8.4f} {np.mean(best):8.4f}")
    print(f" min {np.min(ours):8.4f} {np.min(best):8.4f}")
    print(f"seeds >= 0.999: fastkds {np.sum(np.array(ours) >= 0.999)}, Bayes {np.sum(np.array(best) >= 0.999)}")


if __name__ == "__main__":
    main()

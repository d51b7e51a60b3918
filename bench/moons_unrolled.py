"""Noisy moons with the unrolled solver at the paper's settings, after 500 and
1000 epochs, beside the Bayes-optimal classifier on the same points.

    python bench/moons_unrolled.py [--seeds 10] [--epochs 500 1000] [--fixed-step] [--init k-means++]
                                   [--n 10000] [--n-iter 15] [--compare-exact]

The paper's moons run (``fastkds.experiments.PAPER_SETTINGS["moons"]``):
n=5000, m=24, T=15, lam=5, Adam with learning rate 1e-3, batch 10000 (the
whole set), gradient clipping 1e-4, a trainable encoder step, atoms
initialised at random data points, 1000 epochs. The
original implementation's trainable step grew until the codes were 1-sparse
and accuracy fell between epochs 500 and 1000; fastkds bounds the step
(docs/unrolled.md), and this script shows accuracy at both lengths.

``--compare-exact`` also fits the exact solver (same T, atoms and seed) and
prints the unrolled loss (the mean T-step objective, fixed step) of both
dictionaries and the norm of its gradient: whether the unrolled solver falls
short of the exact one for want of optimisation or because its own
objective's minimum clusters worse.
"""

import argparse
import time
import warnings

import numpy as np

from fastkds import KDSClustering, clustering_accuracy, make_moons
from fastkds.experiments import PAPER_SETTINGS
from fastkds.datasets import moons_bayes_labels as bayes_labels  # the generating model's classifier
from fastkds.unrolled import STEP_BOUND, loss_and_gradient

PAPER = PAPER_SETTINGS["moons"]


def _exp(x):
    """A power of ten as the paper writes it: 1e-3."""
    return f"{x:.0e}".replace("e-0", "e-")


def unrolled_loss(Y, W, lam, n_iter):
    """The unrolled loss at the fixed step, and the norm of its gradient."""
    f, grad, _, _ = loss_and_gradient(Y, W.astype(np.float64), lam, n_iter)
    return f, np.linalg.norm(grad)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=PAPER.n_samples)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--epochs", type=int, nargs="+", default=[PAPER.max_epochs // 2, PAPER.max_epochs])
    ap.add_argument(
        "--n-iter", type=int, default=PAPER.n_iter, help=f"encoder iterations T (the paper: {PAPER.n_iter})"
    )
    ap.add_argument("--fixed-step", action="store_true", help="step 1/sigma_max(W)^2 instead of a trained one")
    ap.add_argument(
        "--init",
        default=PAPER.training["init"],
        choices=["random", "k-means++"],
        help="initial atoms: the paper's random data points (default) or fastkds's default",
    )
    ap.add_argument(
        "--compare-exact",
        action="store_true",
        help="also fit the exact solver, and print both dictionaries' unrolled loss and gradient norm",
    )
    args = ap.parse_args()
    train_step = PAPER.training["train_step"] and not args.fixed_step
    training = dict(PAPER.training, train_step=train_step, init=args.init)
    print(
        f"noisy moons n={args.n:,}, m={PAPER.n_atoms}, T={args.n_iter}, lam={PAPER.lam:g}, "
        f"solver={training['solver']!r}, batch {training['batch_size']}, lr {_exp(training['learning_rate'])}, "
        f"clip {_exp(training['clip_norm'])}, init {args.init}, {'trainable (bounded)' if train_step else 'fixed'} step"
    )
    head = " ".join(f"{f'acc@{e}':>9} {'step':>7} {'fit s':>6}" for e in args.epochs)
    if args.compare_exact:
        head += f" {'loss':>8} {'|grad|':>8} {'exact':>7} {'loss':>8} {'|grad|':>8}"
    print(f"{'seed':>4} {head} {'Bayes':>8}")
    acc = {e: [] for e in args.epochs}
    exact = []
    bayes = []
    for seed in range(args.seeds):
        Y, y = make_moons(args.n, random_state=seed)
        row = []
        for e in args.epochs:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = KDSClustering(
                    2,
                    n_atoms=PAPER.n_atoms,
                    lam=PAPER.lam,
                    n_iter=args.n_iter,
                    max_epochs=e,
                    random_state=seed,
                    **training,
                ).fit(Y)
            sec = time.perf_counter() - t0
            acc[e].append(clustering_accuracy(y, model.labels_))
            # the step relative to 1 / sigma_max(W)^2 (bounded by STEP_BOUND)
            rel = model.kds_.step_ * np.linalg.norm(model.components_.astype(np.float64), 2) ** 2
            row.append(f"{acc[e][-1]:9.4f} {rel:7.3f} {sec:6.1f}")
        if args.compare_exact:  # the last length's dictionary against the exact solver's
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = KDSClustering(
                    2, n_atoms=PAPER.n_atoms, lam=PAPER.lam, n_iter=args.n_iter, init=args.init, random_state=seed
                ).fit(Y)
            exact.append(clustering_accuracy(y, ref.labels_))
            f, g = unrolled_loss(Y, model.components_, model.lam, args.n_iter)
            fe, ge = unrolled_loss(Y, ref.components_, ref.lam, args.n_iter)
            row.append(f"{f:8.5f} {g:8.1e} {exact[-1]:7.4f} {fe:8.5f} {ge:8.1e}")
        bayes.append(np.mean(bayes_labels(Y) == y))
        print(f"{seed:>4} {' '.join(row)} {bayes[-1]:8.4f}", flush=True)
    pad = " " * 15
    print(f"mean {' '.join(f'{np.mean(acc[e]):9.4f}{pad}' for e in args.epochs)} {np.mean(bayes):8.4f}")
    print(f" min {' '.join(f'{np.min(acc[e]):9.4f}{pad}' for e in args.epochs)} {np.min(bayes):8.4f}")
    for e in args.epochs:
        print(
            f"seeds >= 0.999 at {e} epochs: fastkds {np.sum(np.array(acc[e]) >= 0.999)}, "
            f"Bayes {np.sum(np.array(bayes) >= 0.999)}"
        )
    if exact:
        print(
            f"exact solver (T={args.n_iter}): mean {np.mean(exact):.4f}, min {np.min(exact):.4f}, "
            f"seeds >= 0.999: {np.sum(np.array(exact) >= 0.999)}; loss: the unrolled loss at the fixed step"
        )
    print(f"step column: learned step x sigma_max(W)^2 (1 = the fixed step; the bound is {STEP_BOUND:g})")


if __name__ == "__main__":
    main()

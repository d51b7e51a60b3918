"""MNIST-5 with the unrolled solver at the paper's settings (m=500, T=100,
lam=0.5; Adam, learning rate 1e-3, 30 epochs, batch 1024, clipping 1e-4,
fixed step; ``fastkds.experiments.PAPER_SETTINGS["mnist5"]``): accuracy and
fit time. The initial atoms are fastkds's default (k-means++ seeding among
the data points); ``--init random`` takes the paper's uniformly random data
points.

    python bench/mnist5_unrolled.py [--data ../shared/data/mnist] [--seeds 0 1 2] [--epochs 30] [--init random|exact]
        [--freeze-step] [--center] [--save DIR]

Each seed's line gives the accuracy, the fit time by stage, the training
loss of the first and last epoch, the columns of the spectral embedding
(more than 5 when localised modes lead, see docs/unrolled.md) and the
confusion matrix (rows: digits 0, 3, 4, 6, 7; columns: matched clusters).
``--freeze-step`` holds the step at its initial value (the paper's code).
``--center`` fits the images minus their mean image (the encoder's step
depends on where the origin is; docs/algorithm.md).
``--save DIR`` writes each seed's dictionary and codes (``seed<S>.npz``).
"""

import argparse
import os
import time
import warnings

import numpy as np

from fastkds import KDS, KDSClustering, clustering_accuracy, load_mnist
from fastkds.datasets import find_data_dir
from fastkds.experiments import PAPER_SETTINGS
from fastkds.metrics import matched_confusion

PAPER = PAPER_SETTINGS["mnist5"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data",
        default=None,
        help="the mnist/ folder (default: mnist/ in the data folder of fastkds.datasets.find_data_dir)",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epochs", type=int, default=PAPER.max_epochs)
    ap.add_argument(
        "--init",
        default="k-means++",
        choices=["random", "k-means++", "exact"],
        help="initial atoms; 'exact': the exact solver's dictionary (its fit time included)",
    )
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--center", action="store_true", help="subtract the mean image first")
    ap.add_argument("--batch-size", type=int, default=PAPER.training["batch_size"])
    ap.add_argument(
        "--freeze-step",
        action="store_true",
        help="hold the step at its initial value, as the paper's code does with a fixed step",
    )
    ap.add_argument("--save", default=None, help="folder for each seed's dictionary and codes")
    args = ap.parse_args()
    if args.data is None:
        data_dir = find_data_dir()
        if data_dir is None:
            ap.error("no data folder: give --data DIR (the mnist/ folder) or set FASTKDS_DATA")
        args.data = os.path.join(data_dir, "mnist")
    Y, y = load_mnist(args.data)
    if args.center:
        Y = Y - Y.mean(axis=0)
    if args.float32:
        Y = Y.astype("float32")
    print(
        f"MNIST-5: n={Y.shape[0]}, d={Y.shape[1]}, k=5, m={PAPER.n_atoms}, T={PAPER.n_iter}, lam={PAPER.lam:g}, "
        f"solver={PAPER.training['solver']!r}, "
        f"{args.epochs} epochs, batch {args.batch_size}, init {args.init}, {Y.dtype}"
        + (", centred" if args.center else "")
    )
    accuracy = []
    for seed in args.seeds:
        t0 = time.perf_counter()
        init = args.init
        if init == "exact":  # warm start: the exact solver's dictionary, fine-tuned by the unrolled training
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ConvergenceWarning at max_epochs
                init = KDS(PAPER.n_atoms, lam=PAPER.lam, n_iter=PAPER.n_iter, random_state=seed).fit(Y).components_
        training = dict(PAPER.training, batch_size=args.batch_size, init=init)
        model = KDSClustering(
            5,
            n_atoms=PAPER.n_atoms,
            lam=PAPER.lam,
            n_iter=PAPER.n_iter,
            max_epochs=args.epochs,
            random_state=seed,
            freeze_step=args.freeze_step,
            **training,
        ).fit(Y)
        sec = time.perf_counter() - t0
        t = model.timings_
        obj = model.kds_.objective_
        accuracy.append(clustering_accuracy(y, model.labels_))
        spec = model.spectrum_
        print(
            f"seed {seed}: accuracy {accuracy[-1]:.4f}, fit {sec:.1f} s "
            f"(dictionary {t['dictionary']:.1f} s, encode {t['encode']:.2f} s, embed {t['embed']:.2f} s, "
            f"k-means {t['kmeans']:.2f} s); loss epoch 1 {obj[0]:.5f} -> epoch {len(obj)} {obj[-1]:.5f}; "
            f"embedding columns {spec.n_columns(5)} ({int((~spec.spread[: spec.n_columns(5)]).sum())} localised)",
            flush=True,
        )
        print(
            "  confusion " + " | ".join(" ".join(f"{v:4d}" for v in row) for row in matched_confusion(y, model.labels_))
        )
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            codes = model.kds_.transform(Y)
            np.savez_compressed(
                os.path.join(args.save, f"seed{seed}.npz"),
                W=model.components_,
                labels=model.labels_,
                objective=obj,
                indptr=codes.indptr,
                indices=codes.indices,
                data=codes.data,
            )
    if len(accuracy) > 1:
        print(f"accuracy over {len(accuracy)} seeds: mean {np.mean(accuracy):.4f}, min {np.min(accuracy):.4f}")


if __name__ == "__main__":
    main()

"""The two embeddings on data that chose nothing: scikit-learn's bundled
sets, beside SpectralClustering (docs/experiments.md, "The diffusion
embedding").

    python bench/bundled_sets.py [--seeds 5]

scikit-learn ships these sets with its package (no download): digits (8 x 8
images, 10 classes), iris, wine and breast cancer. None of them was looked
at while fastkds's defaults were chosen. Digits are given as they are, the
other three with standardised features. For each: ``KDSClustering(k,
random_state=seed)`` with ``embedding="leading"`` and with the default
``"diffusion"`` (mean accuracy over the seeds), and
``SpectralClustering(affinity="nearest_neighbors")``, the best of
n_neighbors 5, 10 and 20.
"""

import argparse
import warnings

import numpy as np
from sklearn import datasets
from sklearn.cluster import SpectralClustering
from sklearn.preprocessing import StandardScaler

from fastkds import KDSClustering, clustering_accuracy

SETS = {
    "digits": datasets.load_digits,
    "iris": datasets.load_iris,
    "wine": datasets.load_wine,
    "breast cancer": datasets.load_breast_cancer,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="fastkds seeds per set (default 5)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    print("| data | n | d | k | leading | diffusion | SpectralClustering best |")
    print("|---|---|---|---|---|---|---|")
    for name, load in SETS.items():
        X, y = load(return_X_y=True)
        X = X.astype(np.float64) if name == "digits" else StandardScaler().fit_transform(X)
        k = int(np.unique(y).size)
        acc = {
            embedding: np.mean(
                [
                    clustering_accuracy(y, KDSClustering(k, embedding=embedding, random_state=seed).fit(X).labels_)
                    for seed in range(args.seeds)
                ]
            )
            for embedding in ("leading", "diffusion")
        }
        spectral = max(
            clustering_accuracy(
                y, SpectralClustering(k, affinity="nearest_neighbors", n_neighbors=nn, random_state=0).fit_predict(X)
            )
            for nn in (5, 10, 20)
        )
        print(
            f"| {name} | {X.shape[0]} | {X.shape[1]} | {k} | {acc['leading']:.4f} | {acc['diffusion']:.4f} "
            f"| {spectral:.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

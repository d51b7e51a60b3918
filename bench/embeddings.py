"""Which embedding k-means should cluster: the k leading modes of the code
graph, or more, weighted by diffusion (issue 21; docs/experiments.md, "The
diffusion embedding").

    python bench/embeddings.py [--data DIR] [--only NAME ...] [--seeds 0 1 2 3 4 5]
                               [--columns k+1 2k 3k] [--steps 4 8 16 32]

For each set of ``fastkds.experiments.DATA_SETS`` but the million moons,
and each seed (the generated sets drawn afresh per seed, as
``bench/real_data.py`` does), one ``KDSClustering(k, random_state=seed)``
fit with the defaults gives the dictionary and the codes of every point
(the embedding does not change the fit of the dictionary). Its code graph's
spectrum (``fastkds.spectral.BipartiteSpectrum``, as the fit builds it) is
then clustered in several embeddings, each row-normalised and given to
``KMeans(k, n_init=10)``:

- ``leading``: the k leading modes (``embedding="leading"``);
- ``C, t`` for each C of ``--columns`` and t of ``--steps``: those, and the
  spread modes past the k-th up to C in all, mode j weighted by
  ``(lambda_j / lambda_k)^t`` (``embedding="diffusion"`` is ``2k, 16``;
  ``fastkds.spectral.BipartiteSpectrum.projection``).

Printed: the mean accuracy over the seeds, one row per embedding, one
column per set.
"""

import argparse
import warnings

import numpy as np
from sklearn.cluster import KMeans

from fastkds import KDSClustering, clustering_accuracy
from fastkds.datasets import find_data_dir
from fastkds.experiments import DATA_SETS, load_data_set
from fastkds.spectral import BipartiteSpectrum, normalize_rows


def extra_modes(text, k, n_modes):
    """Spread modes past the k-th for ``--columns`` ``"k+N"``, ``"Nk"`` (k + N
    or N k columns in all) or ``"all"``, with k clusters."""
    if text == "all":
        return n_modes
    if text.startswith("k+"):
        return int(text[2:])
    if text.endswith("k"):
        return (int(text[:-1] or 1) - 1) * k
    raise ValueError(f"--columns takes k+N, Nk or all, got {text!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None)
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(6)))
    ap.add_argument("--columns", nargs="+", default=["k+1", "2k", "3k"], help="k+1, 2k, 3k, ... or all")
    ap.add_argument("--steps", type=float, nargs="+", default=[4, 8, 16, 32])
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    data_dir = find_data_dir(args.data)
    names = [(n, t) for n, t in DATA_SETS if n != "moons1m" and (args.only is None or n in args.only)]
    variants = ["leading"] + [f"{c}, {t:g}" for c in args.columns for t in args.steps]
    acc = {}
    for name, title in names:
        for seed in args.seeds:
            try:
                Y, y = load_data_set(name, data_dir, seed)
            except FileNotFoundError as exc:
                print(f"{title}: skipped ({exc})")
                break
            k = int(np.unique(y).size)
            model = KDSClustering(k, random_state=seed).fit(Y)
            codes = model.kds_.transform(Y)
            spectrum = BipartiteSpectrum(
                (codes.T @ codes).toarray(),
                np.asarray(codes.sum(axis=0)).ravel(),
                min_component=model.min_component,
                atoms=model.components_,
                embedding="leading",
            )
            for variant in variants:
                if variant == "leading":
                    P = spectrum.projection(k)
                else:
                    cols, steps = variant.split(", ")
                    P = spectrum.projection(k, extra_modes(cols, k, spectrum.eigenvalues.size), float(steps))
                U = normalize_rows(np.asarray(codes @ P))
                labels = KMeans(k, n_init=10, random_state=seed).fit_predict(U)
                acc.setdefault((name, variant), []).append(clustering_accuracy(y, labels))
            print(f"{title}, seed {seed}: done", flush=True)
    shown = [(n, t) for n, t in names if (n, "leading") in acc]
    print(f"\nmean accuracy over seeds {args.seeds}")
    print("| embedding | " + " | ".join(t for _, t in shown) + " |")
    print("|---|" + "---|" * len(shown))
    for variant in variants:
        print(f"| {variant} | " + " | ".join(f"{np.mean(acc[n, variant]):.4f}" for n, _ in shown) + " |")


if __name__ == "__main__":
    main()

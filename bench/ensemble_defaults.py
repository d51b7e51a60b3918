"""KDSEnsembleClustering with its defaults, beside KDSClustering's and
SpectralClustering, on the sets of ``bench/real_data.py``.

    python bench/ensemble_defaults.py [--data DIR] [--only NAME ...] [--seeds 3] [--quick]

For each set (the million-point moons left out: five fits of it are a
scaling run, not a table cell) and each seed (generated sets drawn afresh
for each seed, as ``bench/real_data.py`` does): ``KDSClustering(k,
random_state=seed)``; ``KDSEnsembleClustering(k, estimator=KDS(),
random_state=seed)``, the template ``estimator=None`` stood for until
2026-11-27 (five dictionaries of 16 atoms, ``tol=1e-4``); and
``KDSEnsembleClustering(k, random_state=seed)``, whose template is now the
dictionary KDSClustering fits (``n_atoms="auto"``, ``tol=1e-2``). Printed:
accuracy mean and min over the seeds, and the mean fit seconds; then
``SpectralClustering(affinity="nearest_neighbors")``, the best of
n_neighbors 5, 10 and 20 (accuracy and seconds, in a child process under
``--timeout``), as ``bench/real_data.py`` runs it. ``--quick`` runs every
set on a 600-point subsample with one seed, to check the script.
"""

import datetime
import platform
import time
import warnings

import numpy as np

from fastkds import KDS, KDSClustering, KDSEnsembleClustering, clustering_accuracy
from fastkds.datasets import find_data_dir
from fastkds.experiments import load_data_set
from real_data import NEIGHBOURS, _quick, _spectral, table_parser, table_sets, timed_baseline

MODELS = {
    "KDSClustering": lambda k, seed: KDSClustering(k, random_state=seed),
    "ensemble, KDS() template": lambda k, seed: KDSEnsembleClustering(k, estimator=KDS(), random_state=seed),
    "ensemble, defaults": lambda k, seed: KDSEnsembleClustering(k, random_state=seed),
}


def _drawn(name, data_dir, seed, quick):
    """The set for ``seed``: generated sets are drawn afresh for each seed,
    files are the same (as in ``bench/real_data.py``)."""
    Y, y = load_data_set(name, data_dir, seed)
    return _quick(Y, y) if quick else (Y, y)


def main(argv=None):
    ap = table_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=3, help="seeds per model (default 3)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for each SpectralClustering run")
    ap.add_argument("--quick", action="store_true", help="600 points per set, one seed")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    seeds = range(1 if args.quick else args.seeds)
    data_dir = find_data_dir(args.data)
    print(f"bench/ensemble_defaults.py, {datetime.date.today()}, Python {platform.python_version()}")
    print("| data | " + " | ".join(f"{name} (mean / min, s)" for name in MODELS) + " | Spectral kNN best (s) |")
    print("|---|" + "---|" * (len(MODELS) + 1))
    for name, title, Y, y in table_sets(data_dir, args.only):
        if Y is None:
            print(f"| {title} | skipped: {y} |")
            continue
        if args.quick:
            Y, y = _quick(Y, y)
        k = int(np.unique(y).size)
        KDSClustering(k, max_epochs=1, random_state=0).fit(Y[:300])  # compile before timing
        acc = {model: [] for model in MODELS}
        seconds = {model: [] for model in MODELS}
        for seed in seeds:
            Ys, ys = (Y, y) if seed == 0 else _drawn(name, data_dir, seed, args.quick)
            for model, make in MODELS.items():
                estimator = make(k, seed)
                t0 = time.perf_counter()
                estimator.fit(Ys)
                seconds[model].append(time.perf_counter() - t0)
                acc[model].append(clustering_accuracy(ys, estimator.labels_))
        cells = [f"{np.mean(acc[m]):.4f} / {np.min(acc[m]):.4f}, {np.mean(seconds[m]):.2f}" for m in MODELS]
        best = None
        for nn in NEIGHBOURS:
            labels, seconds = timed_baseline(_spectral, (Y, k, nn), args.timeout)
            if labels is not None and (best is None or clustering_accuracy(y, labels) > best[0]):
                best = (clustering_accuracy(y, labels), seconds)
        cells.append("-" if best is None else f"{best[0]:.4f}, {best[1]:.2f}")
        print(f"| {title} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

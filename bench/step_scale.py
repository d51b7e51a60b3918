"""Exploration for issue 21: how far the defaults' codes are from converged,
and why (the encoder's one step for all points against each point's scale).

    python bench/step_scale.py [--data DIR] [--only NAME ...] [--seed 0]
    python bench/step_scale.py --entropic 0.03,0.1,0.3,1,3 [--only moons circles] [--seeds 2]

For each set of ``fastkds.experiments.DATA_SETS`` (not the million moons
unless named), ``KDSClustering(k, random_state=seed)`` is fitted with its
defaults, and its dictionary read for:

- ``step``: the accelerated encoder's step, ``1 / sigma_max(W - mean atom)^2``,
  one for every point;
- ``local``: the median over the points of ``1 / sum_{j in R} ||y - w_j||^2``,
  a step that is valid for each point's own problem restricted to ``R``, the
  atoms that can be in its optimal code. ``R`` holds the atoms with
  ``||y - w_j|| <= ||y - w_nearest|| (1 + sqrt(1 + 2 lam) / lam)``: from the
  optimality conditions, no other atom has weight in the optimal code
  (docs/algorithm.md, "Which atoms an optimal code can use");
- ``|R|``: its median size;
- atoms per code of the defaults' codes (``n_iter`` accelerated steps) and of
  the exact codes (``encoder="active-set"``), and the median over the points
  of the largest difference between the two codes;
- accuracy of the defaults, and of the spectral step on the exact codes of
  the same dictionary (the bipartite embedding ``X D^(-1/2) V_k``,
  row-normalised, then k-means; no outlier components left out).

A ``local`` step many times ``step`` means the defaults' few steps stop far
from the optimal codes, spread over more atoms than those codes use.

``--entropic KAPPAS``: a smoothing of the codes at each point's own scale,
in place of the defaults' early stop. On the defaults' dictionary (seeds
0 to ``--seeds``-1), each point's code minimises ``f(x) + eps sum_j x_j
log x_j`` over its 24 nearest atoms, ``eps = kappa * d_min`` (its squared
distance to the nearest atom), by 300 steps of exponentiated gradient;
printed: accuracy (mean/min) of the defaults, of the exact codes and of
each kappa, through the spectral step below.
"""

import argparse
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans

from fastkds import KDSClustering, clustering_accuracy, sparse_encode
from fastkds.datasets import find_data_dir
from fastkds.experiments import DATA_SETS, load_data_set
from fastkds.spectral import BipartiteSpectrum, normalize_rows


def screened_step(Y, W, lam):
    """Median per-point step over the atoms that can be in the optimal code, and median ``|R|``."""
    sq = (W * W).sum(1)
    steps, sizes = [], []
    for lo in range(0, Y.shape[0], 2048):
        y = Y[lo : lo + 2048]
        d = np.maximum((y * y).sum(1)[:, None] - 2.0 * (y @ W.T) + sq[None, :], 0.0)
        reach = d <= d.min(1, keepdims=True) * (1.0 + np.sqrt(1.0 + 2.0 * lam) / lam) ** 2
        steps.append(1.0 / np.maximum(np.where(reach, d, 0.0).sum(1), np.finfo(float).tiny))
        sizes.append(reach.sum(1))
    return float(np.median(np.concatenate(steps))), float(np.median(np.concatenate(sizes)))


def spectral_labels(X, k, seed):
    """k-means on the row-normalised bipartite embedding of the codes ``X``
    (sparse): fastkds's spectral step, with no outlier components left out."""
    spectrum = BipartiteSpectrum((X.T @ X).toarray(), np.asarray(X.sum(axis=0)).ravel())
    return KMeans(k, n_init=10, random_state=seed).fit_predict(normalize_rows(spectrum.embed(X, k)))


def entropic_codes(Y, W, lam, kappa, r=24, n_steps=300):
    """Codes minimising ``f(x) + kappa d_min sum_j x_j log x_j`` over the ``r`` nearest atoms (dense n x m)."""
    n, m = Y.shape[0], W.shape[0]
    r = min(r, m)
    D = np.maximum((Y * Y).sum(1)[:, None] - 2.0 * (Y @ W.T) + (W * W).sum(1)[None, :], 0.0)
    idx = np.argpartition(D, r - 1, axis=1)[:, :r]
    d = np.take_along_axis(D, idx, 1)
    c = np.take_along_axis(Y @ W.T, idx, 1) - lam * d  # f = 1/2 x G x - c x + const
    G = (W @ W.T)[idx[:, :, None], idx[:, None, :]]
    eps = kappa * np.maximum(d.min(1, keepdims=True), np.finfo(float).tiny)
    eta = 1.0 / (d.sum(1, keepdims=True) + eps)  # 1 / Lipschitz bound along the simplex
    logx = -(lam * d) / eps
    for _ in range(n_steps):
        logx -= logx.max(1, keepdims=True)
        x = np.exp(logx)
        x /= x.sum(1, keepdims=True)
        logx = np.log(np.maximum(x, 1e-300))
        logx = logx - eta * (np.einsum("nij,nj->ni", G, x) - c + eps * (logx + 1.0))
    logx -= logx.max(1, keepdims=True)
    x = np.exp(logx)
    X = np.zeros((n, m))
    np.put_along_axis(X, idx, x / x.sum(1, keepdims=True), 1)
    return sp.csr_array(X)


def entropic(names, data_dir, n_seeds, kappas):
    for name in names:
        Y, y = load_data_set(name, data_dir, 0)
        Y = np.asarray(Y, dtype=np.float64)
        k = len(np.unique(y))
        rows = {"defaults": [], "exact": [], **{f"kappa {kappa:g}": [] for kappa in kappas}}
        for seed in range(n_seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = KDSClustering(k, random_state=seed).fit(Y)
            W = model.kds_.components_.astype(np.float64)
            rows["defaults"].append(clustering_accuracy(y, model.labels_))
            exact = sparse_encode(Y, W, lam=model.kds_.lam, encoder="active-set")
            rows["exact"].append(clustering_accuracy(y, spectral_labels(exact, k, seed)))
            for kappa in kappas:
                X = entropic_codes(Y - W.mean(0), W - W.mean(0), model.kds_.lam, kappa)
                rows[f"kappa {kappa:g}"].append(clustering_accuracy(y, spectral_labels(X, k, seed)))
        print(name, "  ".join(f"{key} {np.mean(v):.4f}/{np.min(v):.4f}" for key, v in rows.items()), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--entropic", default=None, help="comma-separated kappas")
    parser.add_argument("--seeds", type=int, default=2, help="with --entropic")
    args = parser.parse_args(argv)
    data_dir = find_data_dir(args.data)
    names = args.only or [name for name, _ in DATA_SETS if name != "moons1m"]
    if args.entropic:
        entropic(names, data_dir, args.seeds, [float(v) for v in args.entropic.split(",")])
        return
    print(
        "| data | atoms | step | local step (median) | local / step | abs R | atoms per code, defaults | "
        "exact | code difference (median) | accuracy, defaults | exact codes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        try:
            Y, y = load_data_set(name, data_dir, args.seed)
        except (FileNotFoundError, ValueError) as exc:
            print(f"| {name} | skipped: {exc} |")
            continue
        k = len(np.unique(y))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = KDSClustering(k, random_state=args.seed).fit(Y)
            kds = model.kds_
            W = kds.components_.astype(np.float64)
        Y64 = np.asarray(Y, dtype=np.float64)
        local, size = screened_step(Y64 - W.mean(0), W - W.mean(0), kds.lam)
        apg = kds.transform(Y)
        exact = sparse_encode(Y, kds.components_, lam=kds.lam, encoder="active-set")
        diff = np.asarray(abs(apg - exact).max(axis=1).todense()).ravel()
        print(
            f"| {name} | {W.shape[0]} | {kds.step_:.3g} | {local:.3g} | {local / kds.step_:.3g} | {size:.0f} | "
            f"{apg.nnz / Y.shape[0]:.2f} | {exact.nnz / Y.shape[0]:.2f} | {np.median(diff):.3f} | "
            f"{clustering_accuracy(y, model.labels_):.4f} | {clustering_accuracy(y, spectral_labels(exact, k, args.seed)):.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

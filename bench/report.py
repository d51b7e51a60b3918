"""Scaling report: KDSClustering on noisy moons read from a .npy memmap, over n.

    python bench/report.py                          # n = 1e5, 1e6, 1e7
    python bench/report.py --sizes 1e5,3e5,1e6 --n-iter 15
    python bench/report.py --plot docs/figures/scaling.png --markdown docs/scaling_table.md

For each n the data are generated once and saved to a .npy file; a fresh
interpreter then memory-maps the file, compiles (or loads) the kernels on a
tiny problem, and times ``KDSClustering(2, n_atoms=24, lam=5).fit(path)``
stage by stage. It reports seconds per stage, points/s, the peak resident
memory of that interpreter, the size of the codes, and the accuracy; then the
log-log slope of total time in n (1.0 is linear), beside the paper's own
figures for 100,000 points. The PNG needs matplotlib (``fastkds[plot]``).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

#: The paper's reported timings on 100,000 moons points, on its authors' hardware.
PAPER = {"n": 100_000, "codes_s": 130.0, "cluster_s": 1.5}

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np
from fastkds import KDSClustering, clustering_accuracy, make_moons
path, labels_path, n_iter, n_jobs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
n_jobs = None if n_jobs == "all" else int(n_jobs)
params = dict(n_atoms=24, lam=5.0, n_iter=n_iter, random_state=0, n_jobs=n_jobs)
warnings.simplefilter("ignore")
Y0, _ = make_moons(2000, random_state=1)
KDSClustering(2, **{**params, "max_epochs": 2}).fit(Y0)   # compile / load the kernels
rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
model = KDSClustering(2, **params).fit(path)
total = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
labels = np.load(labels_path)
acc = clustering_accuracy(labels, model.labels_)
codes = model.kds_.transform(path)                      # after the peak was read
codes_bytes = codes.data.nbytes + codes.indices.nbytes + codes.indptr.nbytes
print(json.dumps(dict(total=total, **model.timings_, peak_rss=peak, rss_before=rss_before,
                      codes_bytes=codes_bytes, nnz=int(codes.nnz), accuracy=acc,
                      epochs=int(model.kds_.n_iter_))))
"""


def run_one(n, n_iter, n_jobs, workdir):
    from fastkds import make_moons

    path = os.path.join(workdir, f"moons_{n}.npy")
    labels_path = os.path.join(workdir, f"labels_{n}.npy")
    Y, labels = make_moons(n, random_state=0)
    np.save(path, Y)
    np.save(labels_path, labels)
    del Y, labels
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, path, labels_path, str(n_iter), str(n_jobs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"n={n}: the child failed:\n{proc.stderr}")
    os.remove(path)
    os.remove(labels_path)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def loglog_slope(ns, seconds):
    """Least-squares slope of log(seconds) against log(n)."""
    return float(np.polyfit(np.log(ns), np.log(seconds), 1)[0])


def table(rows):
    mib = 2.0**20
    head = (
        "| n | dictionary s | encode s | embed s | k-means s | total s | points/s "
        "| peak RSS MiB | codes MiB | RSS - codes MiB | accuracy |"
    )
    lines = [head, "|" + "---|" * 11]
    for n, r in rows:
        lines.append(
            f"| {n:,} | {r['dictionary']:.2f} | {r['encode']:.2f} | {r['embed']:.3f} | {r['kmeans']:.2f} "
            f"| {r['total']:.2f} | {n / r['total']:,.0f} | {r['peak_rss'] / mib:,.0f} "
            f"| {r['codes_bytes'] / mib:,.0f} | {(r['peak_rss'] - r['codes_bytes']) / mib:,.0f} "
            f"| {r['accuracy']:.4f} |"
        )
    p = PAPER
    lines.append(
        f"| {p['n']:,} (the paper's reported time, on its hardware) | | {p['codes_s']:.0f} (codes) | | {p['cluster_s']:.1f} (cluster) "
        f"| {p['codes_s'] + p['cluster_s']:.1f} | {p['n'] / (p['codes_s'] + p['cluster_s']):,.0f} | | | | |"
    )
    return "\n".join(lines)


def plot(rows, slope, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'fastkds[plot]'): no plot written")
        return
    ns = np.array([n for n, _ in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(5.5, 4), dpi=110)
    for key, label in [("total", "total"), ("dictionary", "dictionary"), ("encode", "encode"), ("kmeans", "k-means")]:
        ax.loglog(ns, [r[key] for _, r in rows], "o-", label=label)
    ref = np.array([r["total"] for _, r in rows])
    ax.loglog(ns, ref[0] * ns / ns[0], "k:", label="linear in n")
    ax.loglog([PAPER["n"]], [PAPER["codes_s"] + PAPER["cluster_s"]], "r*", ms=12, label="paper (100k points)")
    ax.set_xlabel("points n")
    ax.set_ylabel("seconds")
    ax.set_title(f"KDSClustering on noisy moons from a .npy memmap\nlog-log slope of total time {slope:.3f}")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    print(f"plot written to {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e5,1e6,1e7", help="comma-separated n (default 1e5,1e6,1e7)")
    ap.add_argument("--n-iter", type=int, default=30, help="encoder iterations T (default 30, as the demo)")
    ap.add_argument("--n-jobs", default="all", help="Numba threads (default: all)")
    ap.add_argument("--plot", default=None, help="write the log-log plot to this PNG")
    ap.add_argument("--markdown", default=None, help="also write the table to this file")
    ap.add_argument("--workdir", default=None, help="where the .npy files go (default: a temporary folder)")
    args = ap.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        for n in sizes:
            r = run_one(n, args.n_iter, args.n_jobs, workdir)
            rows.append((n, r))
            print(
                f"n={n:>11,}: total {r['total']:8.2f} s  ({r['epochs']} epochs)  accuracy {r['accuracy']:.4f}  "
                f"peak RSS {r['peak_rss'] / 2**20:,.0f} MiB (codes {r['codes_bytes'] / 2**20:,.0f} MiB)",
                flush=True,
            )
    print()
    print(f"KDSClustering(2, n_atoms=24, lam=5, n_iter={args.n_iter}) on noisy moons read from a .npy memmap")
    print(table(rows))
    slope = loglog_slope([n for n, _ in rows], [r["total"] for _, r in rows]) if len(rows) > 1 else float("nan")
    print(f"\nlog-log slope of total time over n = {sizes[0]:,} .. {sizes[-1]:,}: {slope:.3f}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table(rows) + f"\n\nlog-log slope of total time: {slope:.3f}\n")
    if args.plot:
        plot(rows, slope, args.plot)


if __name__ == "__main__":
    main()

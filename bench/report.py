"""Scaling report: KDSClustering on noisy moons read from a .npy file, over n.

    python bench/report.py                          # n = 1e5, 1e6, 1e7
    python bench/report.py --sizes 1e7,1e8 --results memory,disk
    python bench/report.py --sizes 1e9 --results disk --workdir /big/disk
    python bench/report.py --plot docs/figures/scaling.png --markdown docs/scaling_table.md

For each n the data are generated (in chunks of 10^7 points) and saved to a
.npy file; a fresh interpreter then compiles (or loads) the kernels on a tiny
problem and times ``KDSClustering(2, n_atoms=24, lam=5).fit(path)`` stage by
stage, keeping its results in memory (``--results memory``) or writing them
to a folder (``disk``: ``fit(path, out=folder)``). It reports seconds per
stage, points/s, the interpreter's peak resident memory, split into the
results it holds in memory (labels, embedding, and the codes, held until
embedded) and the rest, the bytes written to disk, and the accuracy; then
the log-log slope of total time in n (1.0 is linear), beside the paper's
own figures for 100,000 points. The PNG needs matplotlib (``fastkds[plot]``).

Disk space: the data take 16 bytes a point (and the true labels 1), the
results on disk about 51 more (codes 31, embedding 16, labels 4): 10^8
points need about 7 GB, 10^9 about 68 GB. The report refuses a size the
work folder has no room for.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

#: The paper's reported timings on 100,000 moons points, on its authors' hardware.
PAPER = {"n": 100_000, "codes_s": 130.0, "cluster_s": 1.5}

#: Bytes a point needs on disk: the data and its true label, and the results of ``--results disk``.
DATA_BYTES, RESULT_BYTES = 17, 51

#: Points generated at once; each chunk has its own seed (the first chunk's is 0).
GENERATE_CHUNK = 10**7

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np
from scipy.optimize import linear_sum_assignment
from fastkds import KDSClustering, make_moons
path, labels_path, n_iter, n_jobs, out = sys.argv[1:6]
n_jobs = None if n_jobs == "all" else int(n_jobs)
params = dict(n_atoms=24, lam=5.0, n_iter=int(n_iter), random_state=0, n_jobs=n_jobs)
warnings.simplefilter("ignore")
Y0, _ = make_moons(2000, random_state=1)
def peak_rss():
    # VmHWM is this process's own high-water mark; ru_maxrss on Linux keeps the
    # parent's across fork and exec (the parent generated the data)
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
KDSClustering(2, **{**params, "max_epochs": 2}).fit(Y0)   # compile / load the kernels
rss_before = peak_rss()
t0 = time.perf_counter()
model = KDSClustering(2, **params).fit(path, out=None if out == "-" else out)
total = time.perf_counter() - t0
peak = peak_rss()
in_memory = 0
if out == "-":  # labels, embedding, and the codes the fit held until embedded
    codes = model.kds_.transform(path)                   # after the peak was read
    in_memory = model.labels_.nbytes + model.embedding_.nbytes + sum(
        a.nbytes for a in (codes.data, codes.indices, codes.indptr))
    del codes
truth = np.load(labels_path, mmap_mode="r")
confusion = np.zeros((2, 2))
for start in range(0, truth.shape[0], 10**7):                # after the peak was read
    stop = start + 10**7
    confusion += np.histogram2d(truth[start:stop], model.labels_[start:stop], bins=2, range=[[0, 2], [0, 2]])[0]
rows, cols = linear_sum_assignment(-confusion)
print(json.dumps(dict(total=total, **model.timings_, peak_rss=peak, rss_before=rss_before, in_memory=in_memory,
                      accuracy=confusion[rows, cols].sum() / truth.shape[0], epochs=int(model.kds_.n_iter_))))
"""


def write_moons(path, labels_path, n):
    """Noisy moons to ``path`` (float64, n x 2) and their labels (int8), chunk by chunk."""
    from fastkds import make_moons
    from fastkds.diskcodes import NpyAppender

    data, labels = NpyAppender(path, np.float64, (2,)), NpyAppender(labels_path, np.int8)
    try:
        for seed, start in enumerate(range(0, n, GENERATE_CHUNK)):
            Y, y = make_moons(min(GENERATE_CHUNK, n - start), random_state=seed)
            data.append(Y)
            labels.append(y)
        for f in (data, labels):
            f.close()
            f.commit()
    except BaseException:
        data.abort()
        labels.abort()
        raise


def folder_bytes(folder):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)


def run_one(n, n_iter, n_jobs, workdir, results):
    path = os.path.join(workdir, f"moons_{n}.npy")
    labels_path = os.path.join(workdir, f"labels_{n}.npy")
    out = os.path.join(workdir, f"results_{n}") if results == "disk" else "-"
    need = n * (DATA_BYTES + (RESULT_BYTES if results == "disk" else 0))
    free = shutil.disk_usage(workdir).free
    if need > free:
        raise SystemExit(f"n={n:,} needs about {need / 1e9:.0f} GB in {workdir}, which has {free / 1e9:.0f} GB free")
    write_moons(path, labels_path, n)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, path, labels_path, str(n_iter), str(n_jobs), out],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"n={n}: the child failed:\n{proc.stderr}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["on_disk"] = folder_bytes(out) if out != "-" else 0
        r["results"] = results
        return r
    finally:
        os.remove(path)
        os.remove(labels_path)
        if out != "-":
            shutil.rmtree(out, ignore_errors=True)


def loglog_slope(ns, seconds):
    """Least-squares slope of log(seconds) against log(n)."""
    return float(np.polyfit(np.log(ns), np.log(seconds), 1)[0])


def table(rows):
    mib = 2.0**20
    head = (
        "| n | results | dictionary s | encode s | embed s | k-means s | total s | points/s "
        "| peak RSS MiB | results in memory MiB | RSS - results MiB | on disk MiB | accuracy |"
    )
    lines = [head, "|" + "---|" * 13]
    for n, r in rows:
        lines.append(
            f"| {n:,} | {r['results']} | {r['dictionary']:.2f} | {r['encode']:.2f} | {r['embed']:.2f} | {r['kmeans']:.2f} "
            f"| {r['total']:.2f} | {n / r['total']:,.0f} | {r['peak_rss'] / mib:,.0f} "
            f"| {r['in_memory'] / mib:,.0f} | {(r['peak_rss'] - r['in_memory']) / mib:,.0f} | {r['on_disk'] / mib:,.0f} "
            f"| {r['accuracy']:.4f} |"
        )
    p = PAPER
    lines.append(
        f"| {p['n']:,} (the paper's reported time, on its hardware) | | | {p['codes_s']:.0f} (codes) | | {p['cluster_s']:.1f} (cluster) "
        f"| {p['codes_s'] + p['cluster_s']:.1f} | {p['n'] / (p['codes_s'] + p['cluster_s']):,.0f} | | | | | |"
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
    ax.set_title(f"KDSClustering on noisy moons from a .npy file\nlog-log slope of total time {slope:.3f}")
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
    ap.add_argument(
        "--results",
        default="memory",
        help="comma-separated: memory (results kept in memory), disk (written with fit(path, out=folder))",
    )
    args = ap.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    modes = args.results.split(",")
    if set(modes) - {"memory", "disk"}:
        ap.error(f"--results takes memory and/or disk, got {args.results!r}")
    rows = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        for n in sizes:
            for results in modes:
                r = run_one(n, args.n_iter, args.n_jobs, workdir, results)
                rows.append((n, r))
                print(
                    f"n={n:>13,} ({results}): total {r['total']:8.2f} s  ({r['epochs']} epochs)  "
                    f"accuracy {r['accuracy']:.4f}  peak RSS {r['peak_rss'] / 2**20:,.0f} MiB "
                    f"(results in memory {r['in_memory'] / 2**20:,.0f} MiB, on disk {r['on_disk'] / 2**20:,.0f} MiB)",
                    flush=True,
                )
    print()
    print(f"KDSClustering(2, n_atoms=24, lam=5, n_iter={args.n_iter}) on noisy moons read from a .npy file")
    print(table(rows))
    slope = float("nan")
    for results in modes:
        mode_rows = [(n, r) for n, r in rows if r["results"] == results]
        if len(mode_rows) > 1:
            slope = loglog_slope([n for n, _ in mode_rows], [r["total"] for _, r in mode_rows])
            print(f"\nlog-log slope of total time ({results}) over n = {sizes[0]:,} .. {sizes[-1]:,}: {slope:.3f}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table(rows) + f"\n\nlog-log slope of total time: {slope:.3f}\n")
    if args.plot:
        plot([(n, r) for n, r in rows if r["results"] == modes[-1]], slope, args.plot)


if __name__ == "__main__":
    main()

"""The GPU issue's figures in one run: the public API against the kernel
path, the whole fit, MNIST-5 at the paper's settings, and the encoder
against a plain PyTorch encoder of the paper's equations.

    PYTHONPATH=. python3 bench/gpu_end_to_end.py [--n 10000000] [--data DIR] [--only api fit mnist5 torch]

Needs an NVIDIA GPU with numba-cuda (docs/gpu.md); the PyTorch rows need
PyTorch with CUDA (they are skipped without it: PyTorch is no dependency of
fastkds). Sections:

- ``api``: ``fastkds.sparse_encode(device="cuda")`` (and with the exact
  codes, ``encoder="active-set"``) and ``KDS(device="cuda").transform`` on
  ``--n`` float32 noisy moons (m=24, T=15, lam=5, the paper's settings),
  against ``gpu.encode_csr_cuda`` with
  buffers allocated beforehand, in the same run; best of ``--repeat``
  calls after a warm-up call (compilation), host arrays in, CSR out.
- ``fit``: ``KDSClustering(2, n_atoms=24, lam=5, n_iter=15,
  device="cuda").fit_predict`` on the same points: seconds, accuracy and
  the fit's ``timings_``, best of ``--repeat`` after a warm-up fit on
  100,000 points.
- ``mnist5``: MNIST-5 (the digits 0-4 of the t10k file in ``--data``) at
  the paper's settings (m=500, T=100, lam=0.5) with ``device="cuda"``, in
  float32 and float64: seconds and accuracy, seed 0, fitted twice: the
  first fit compiles the encoders for its atom counts (once per machine
  where numba's cache is kept), the second is the figure.
- ``torch``: MNIST-like data (for each of ``--mnist-n``, that many
  clustered non-negative unit-norm vectors, d=784, m=500, T=100,
  lam=0.5; fastkds's fixed cost per call, the dictionary's preparation and
  the first transfers, weighs on the smaller), encoded by fastkds's
  warp encoder and by PyTorch (dense tensors, T steps of accelerated
  projected gradient from x = 0 at the paper's step ``1 / sigma_max(W)^2``,
  sort-based projection), with the gradient as the paper writes it,
  ``(z W - Y) W^T + lam dist``, and in its Gram form ``z G - B + lam
  dist``; each with TF32 matrix products allowed and not. Points per
  second (best of ``--repeat``, synchronised, data already on the device
  for PyTorch, host arrays in and CSR out for fastkds) and the mean
  objective of the codes on 2,000 points (float64), so the accuracy of
  each is in the table beside its speed. fastkds is timed at T and at the
  fewest steps of 10, 15, ..., 75 whose codes' mean objective is at most
  that of the paper's T steps on those points (its centred step gets
  further per step), and with its exact codes (``encoder="active-set"``,
  the warp active-set encoder), whose objective is the optimum. Both
  fastkds encoders are timed again with each point's products formed
  inside the encoder instead of by the tiled product kernel first
  (``_config.CUDA_PRODUCTS_MIN_FEATURES`` raised past d), the figures that
  choose that setting.

Prints one line per measurement as it goes.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

from fastkds import KDS, KDSClustering, clustering_accuracy, make_moons, sparse_encode
from fastkds.experiments import PAPER_SETTINGS

MOONS, MNIST5 = PAPER_SETTINGS["moons"], PAPER_SETTINGS["mnist5"]


def best_of(fn, repeat):
    """Best wall time of ``repeat`` calls, and the last result."""
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def api(args, gpu):
    Y, _ = make_moons(args.n, random_state=0)
    Y = np.ascontiguousarray(Y, dtype=np.float32)
    W = Y[np.random.default_rng(1).choice(args.n, MOONS.n_atoms, replace=False)].astype(np.float64)
    kw = dict(lam=MOONS.lam, n_iter=MOONS.n_iter)
    sparse_encode(Y[:100_000], W, device="cuda", **kw)  # compile
    t, C = best_of(lambda: sparse_encode(Y, W, device="cuda", **kw), args.repeat)
    print(f"api: sparse_encode(device='cuda') {args.n:,} float32 moons: {t:.3f} s, {args.n / t / 1e6:.1f} M points/s")
    sparse_encode(Y[:100_000], W, device="cuda", encoder="active-set", **kw)  # compile
    t, _ = best_of(lambda: sparse_encode(Y, W, device="cuda", encoder="active-set", **kw), args.repeat)
    print(f"api: the same, encoder='active-set' (exact codes): {t:.3f} s, {args.n / t / 1e6:.1f} M points/s")
    model = KDS(MOONS.n_atoms, max_epochs=1, device="cuda", random_state=0, **kw).fit(Y[:100_000])
    model.transform(Y[:100_000])
    t, _ = best_of(lambda: model.transform(Y), args.repeat)
    print(f"api: KDS(device='cuda').transform (its own {MOONS.n_atoms} atoms): {t:.3f} s, "
          f"{args.n / t / 1e6:.1f} M points/s")  # fmt: skip
    prepared = gpu.CudaPreparedDictionary(W, MOONS.lam, MOONS.n_iter, np.float32)
    chunk = gpu.default_chunk_size_cuda(2, MOONS.n_atoms, 4)
    buffers = [prepared.allocate(chunk) for _ in range(3)]
    gpu.encode_csr_cuda(Y[:100_000], prepared, chunk, buffers=buffers)
    t, C3 = best_of(lambda: gpu.encode_csr_cuda(Y, prepared, chunk, buffers=buffers), args.repeat)
    print(f"api: kernel path gpu.encode_csr_cuda (buffers given, chunk {chunk:,}): {t:.3f} s, "
          f"{args.n / t / 1e6:.1f} M points/s")  # fmt: skip
    same = abs(C - C3).max() if C.nnz else 0.0
    print(f"api: sparse_encode vs kernel path: max |dX| {same:.1e}")


def fit(args, gpu):
    Y, y = make_moons(args.n, random_state=0)
    Y = np.ascontiguousarray(Y, dtype=np.float32)

    def model():
        return KDSClustering(2, n_atoms=MOONS.n_atoms, lam=MOONS.lam, n_iter=MOONS.n_iter, device="cuda",
                             random_state=0)  # fmt: skip

    model().fit(Y[:100_000])  # compile
    for r in range(args.repeat):
        t0 = time.perf_counter()
        est = model()
        labels = profiled(args, "fit", r, lambda: est.fit_predict(Y))
        sec = time.perf_counter() - t0
        parts = ", ".join(f"{k} {v:.2f}" for k, v in est.timings_.items())
        print(f"fit: KDSClustering(device='cuda').fit_predict {args.n:,} float32 moons: {sec:.2f} s, "
              f"accuracy {clustering_accuracy(y, labels):.4f} ({est.kds_.n_iter_} epochs; {parts})", flush=True)  # fmt: skip


def mnist5(args, gpu):
    from fastkds import load_mnist

    Y, y = load_mnist(os.path.join(args.data, "mnist"))
    for dtype in (np.float32, np.float64):
        Yd = Y.astype(dtype)

        def model(**kw):
            return KDSClustering(5, n_atoms=MNIST5.n_atoms, lam=MNIST5.lam, n_iter=MNIST5.n_iter, device="cuda",
                                 **kw)  # fmt: skip

        # the first fit compiles the encoders of its atom counts (the near
        # atoms' too, where some are far), as a first call does; the second is timed
        for r, what in enumerate(("first (compiles)", "second")):
            t0 = time.perf_counter()
            est = model(random_state=0)
            profiled(args, f"mnist5_{np.dtype(dtype).name}", 1 - r, lambda: est.fit(Yd))
            sec = time.perf_counter() - t0
            parts = ", ".join(f"{k} {v:.2f}" for k, v in est.timings_.items())
            print(f"mnist5: paper settings, device='cuda', {np.dtype(dtype).name}, {what} fit: {sec:.2f} s, "
                  f"accuracy {clustering_accuracy(y, est.labels_):.4f} ({est.kds_.n_iter_} epochs; {parts})",
                  flush=True)  # fmt: skip


def profiled(args, name, repeat, fn):
    """``fn()``; under cProfile, written to ``--profile``/``name``.txt, for
    the first call of a section when ``--profile`` names a folder."""
    if args.profile is None or repeat:
        return fn()
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    out = prof.runcall(fn)
    text = io.StringIO()
    for key in ("cumulative", "tottime"):
        pstats.Stats(prof, stream=text).sort_stats(key).print_stats(40)
    with open(os.path.join(args.profile, f"{name}.txt"), "w") as f:
        f.write(text.getvalue())
    return out


def mnist_like(n, d=784, k=10, seed=0):
    """Clustered non-negative unit-norm vectors, shaped like scaled MNIST rows
    (as bench/gpu_throughput.py makes them)."""
    rng = np.random.default_rng(seed)
    protos = rng.random((k, d)) ** 3
    Y = protos[rng.integers(0, k, n)] + 0.3 * rng.random((n, d)) ** 3
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    return Y


def torch_encode(torch, Y, W, lam, n_iter, alpha, gram):
    """The paper's encoder in plain PyTorch: dense, T accelerated projected
    gradient steps from zero, sort-based projection onto the simplex."""
    m = W.shape[0]
    dist = (Y * Y).sum(1, keepdim=True) - 2 * Y @ W.T + (W * W).sum(1)[None, :]
    ks = torch.arange(1, m + 1, device=Y.device, dtype=Y.dtype)
    x_prev = torch.zeros(Y.shape[0], m, device=Y.device, dtype=Y.dtype)
    z = x_prev
    if gram:
        G, c = W @ W.T, lam * dist - Y @ W.T
    for t in range(n_iter):
        grad = z @ G + c if gram else (z @ W - Y) @ W.T + lam * dist
        v = z - alpha * grad
        u, _ = torch.sort(v, dim=1, descending=True)
        css = torch.cumsum(u, dim=1) - 1
        rho = (u - css / ks > 0).sum(dim=1, keepdim=True)
        tau = css.gather(1, rho - 1) / rho
        x = torch.clamp(v - tau, min=0)
        z = x + (t / (t + 3)) * (x - x_prev)
        x_prev = x
    return x_prev


def f_paper(Y, W, lam, n_iter):
    """Mean objective of the paper's T steps (fastkds._naive, float64)."""
    from fastkds import _naive

    X = _naive.encode(np.asarray(Y, dtype=np.float64), W, lam, n_iter, alpha=_naive.step_size(W, "paper"),
                      step="paper")  # fmt: skip
    return objective(Y, W, X, lam)


def objective(Y, W, X, lam):
    """Mean of 1/2 ||y - x W||^2 + lam sum_j x_j ||y - w_j||^2 (float64)."""
    Y, W, X = (np.asarray(a, dtype=np.float64) for a in (Y, W, X))
    dist = (Y * Y).sum(1)[:, None] - 2 * Y @ W.T + (W * W).sum(1)[None, :]
    return float(np.mean(0.5 * ((Y - X @ W) ** 2).sum(1) + lam * (X * dist).sum(1)))


def torch_rows(args, gpu):
    try:
        import torch
    except ImportError:
        print("torch: PyTorch is not installed here: no baseline")
        return
    if not torch.cuda.is_available():
        print("torch: PyTorch sees no GPU: no baseline")
        return
    for n in args.mnist_n:
        torch_rows_at(n, args, torch)


def torch_rows_at(n, args, torch):
    """The ``torch`` section's rows for ``n`` MNIST-like points."""
    m, T, lam = MNIST5.n_atoms, MNIST5.n_iter, MNIST5.lam
    Y = mnist_like(n).astype(np.float32)
    W = Y[np.random.default_rng(1).choice(Y.shape[0], m, replace=False)].astype(np.float64)
    check = slice(0, 2000)
    sparse_encode(Y[:2000], W, lam=lam, encoder="apg", n_iter=T, device="cuda")  # compile
    t, C = best_of(lambda: sparse_encode(Y, W, lam=lam, encoder="apg", n_iter=T, device="cuda"), args.repeat)
    ours = Y.shape[0] / t
    f_ours = objective(Y[check], W, C[check].toarray(), lam)
    print(f"torch n={n:,}: fastkds sparse_encode(device='cuda') {Y.shape[0]:,} x 784, m={m}, T={T}, float32: "
          f"{ours:,.0f} points/s, mean objective {f_ours:.6f}", flush=True)  # fmt: skip
    # fastkds's step (centred) gets further per step than the paper's: the
    # fewest steps whose codes are as good as the paper's T on these points
    equal_T, ours_equal, target = T, ours, f_paper(Y[check], W, lam, T)
    for steps in (10, 15, 20, 25, 30, 40, 50, 75):
        C_steps = sparse_encode(Y[check], W, lam=lam, encoder="apg", n_iter=steps, device="cuda")
        if objective(Y[check], W, C_steps.toarray(), lam) <= target:
            equal_T = steps
            break
    if equal_T < T:
        t, C = best_of(lambda: sparse_encode(Y, W, lam=lam, encoder="apg", n_iter=equal_T, device="cuda"), args.repeat)
        ours_equal = Y.shape[0] / t
        print(f"torch n={n:,}: fastkds at T={equal_T}, the fewest steps whose mean objective is at most the paper's "
              f"T={T} ({target:.6f}; NumPy, float64): {ours_equal:,.0f} points/s, mean objective "
              f"{objective(Y[check], W, C[check].toarray(), lam):.6f}", flush=True)  # fmt: skip
    sparse_encode(Y[:2000], W, lam=lam, encoder="active-set", device="cuda")  # compile
    t, C = best_of(lambda: sparse_encode(Y, W, lam=lam, encoder="active-set", device="cuda"), args.repeat)
    exact = Y.shape[0] / t
    print(f"torch n={n:,}: fastkds exact codes (encoder='active-set', device='cuda'): {exact:,.0f} points/s, "
          f"mean objective {objective(Y[check], W, C[check].toarray(), lam):.6f}", flush=True)  # fmt: skip
    t_small, _ = best_of(lambda: sparse_encode(Y[check], W, lam=lam, encoder="active-set", device="cuda"), args.repeat)
    print(f"torch n={n:,}: the same on its first 2,000 points: {1e3 * t_small:.1f} ms (mostly the fixed cost of "
          f"a call: validation, the dictionary's preparation, launches)", flush=True)  # fmt: skip
    # the warp encoders with each point's products formed inside them, as
    # before the tiled product kernel (the same codes, bit for bit)
    from fastkds import _config

    tiled = _config.CUDA_PRODUCTS_MIN_FEATURES
    _config.CUDA_PRODUCTS_MIN_FEATURES = Y.shape[1] + 1
    try:
        for encoder, steps, tiled_rate in (("apg", T, ours), ("active-set", None, exact)):
            settings = dict(encoder=encoder, device="cuda") | ({} if steps is None else dict(n_iter=steps))
            sparse_encode(Y[:2000], W, lam=lam, **settings)  # compile
            t, _ = best_of(lambda: sparse_encode(Y, W, lam=lam, **settings), args.repeat)
            print(f"torch n={n:,}: fastkds encoder={encoder!r} with the products inside the encoder: "
                  f"{Y.shape[0] / t:,.0f} points/s; the tiled products first: {tiled_rate:,.0f} "
                  f"({tiled_rate * t / Y.shape[0]:.2f}x)", flush=True)  # fmt: skip
    finally:
        _config.CUDA_PRODUCTS_MIN_FEATURES = tiled
    alpha = 1.0 / np.linalg.norm(W, 2) ** 2  # the paper's step
    dY = torch.tensor(Y, device="cuda")
    dW = torch.tensor(W.astype(np.float32), device="cuda")
    for gram in (False, True):
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32

            def run():
                X = torch_encode(torch, dY, dW, lam, T, alpha, gram)
                torch.cuda.synchronize()
                return X

            run()  # warm-up
            t, X = best_of(run, args.repeat)
            f = objective(Y[check], W, X[check].cpu().numpy(), lam)
            form = "Gram form z G - B" if gram else "paper's form (z W - Y) W^T"
            print(f"torch n={n:,}: PyTorch {torch.__version__}, {form}, TF32 {'on' if tf32 else 'off'}: "
                  f"{Y.shape[0] / t:,.0f} points/s, mean objective {f:.6f}; fastkds / PyTorch: "
                  f"{ours * t / Y.shape[0]:.2f}x at T={T}, {ours_equal * t / Y.shape[0]:.2f}x at "
                  f"T={equal_T}, {exact * t / Y.shape[0]:.2f}x exact", flush=True)  # fmt: skip


SECTIONS = {"api": api, "fit": fit, "mnist5": mnist5, "torch": torch_rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000, help="moons points (api, fit)")
    ap.add_argument(
        "--mnist-n", type=int, nargs="+", default=[20_000, 200_000], help="MNIST-like points (torch), one run each"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--data", default=None, help="the data folder (holding mnist/); default: FASTKDS_DATA or ../shared/data"
    )
    ap.add_argument("--only", nargs="+", choices=sorted(SECTIONS), default=list(SECTIONS))
    ap.add_argument("--profile", default=None, help="a folder for cProfile reports of the first fit of fit, mnist5")
    args = ap.parse_args()
    from fastkds import gpu

    gpu.require_cuda()
    warnings.simplefilter("ignore")  # convergence notes of short warm-up fits
    if args.data is None:
        from fastkds.datasets import find_data_dir

        args.data = find_data_dir()
    status = 0
    for name in args.only:
        if name == "mnist5" and args.data is None:
            print("mnist5: no data folder (give --data): skipped")
            continue
        try:
            SECTIONS[name](args, gpu)
        except Exception as exc:  # one section's failure leaves the others' figures
            print(f"{name}: FAILED: {type(exc).__name__}: {exc}", flush=True)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

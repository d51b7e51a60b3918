"""Every CUDA kernel of :mod:`fastkds._cuda_kernels` compiles to PTX, and the float32
kernels do no float64 arithmetic (a Python float literal would promote it).

Needs NVVM (a CUDA toolkit: ``CUDA_HOME``, conda, or the pip wheel
``nvidia-cuda-nvcc-cu12`` pointed to by ``CUDA_HOME=.../nvidia/cuda_nvcc``),
but no GPU: without one, the compute capability is fixed at 9.0. Skips under
the simulator (it compiles nothing) and where NVVM is missing.
"""

import os
import re

import numpy as np
import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("the CUDA simulator compiles no PTX", allow_module_level=True)

from numba import cuda, types  # noqa: E402

try:
    from numba.cuda.cudadrv import nvvm

    nvvm.NVVM()
except Exception as exc:  # no toolkit here
    pytest.skip(f"NVVM not found ({type(exc).__name__}): no CUDA toolkit to compile with", allow_module_level=True)

from fastkds import _cuda_kernels  # noqa: E402


def signatures(dt):
    A1, A2 = types.Array(dt, 1, "C"), types.Array(dt, 2, "C")
    I1, I2 = types.Array(types.int32, 1, "C"), types.Array(types.int32, 2, "C")
    L1, L2 = types.Array(types.int64, 1, "C"), types.Array(types.int64, 2, "C")
    F2, F3 = types.Array(types.float64, 2, "C"), types.Array(types.float64, 3, "C")
    i64 = types.int64
    scratch = (A2,) * 5 + (I2,) * 3
    warp = (A2, A2, A2, A1, A2, A1, dt, dt, A1, A1, dt, i64, i64, A2, A1, I1, I1)
    f64 = types.float64
    active_set = (A2, A2, A2, A1, A2, A1, f64, f64, A1, i64, i64, A2, A1, I1, I1)
    return {
        "encode_kernel": (A2, A1, A2, A1, dt, dt, A1, A1, i64, A2, A1, I1) + scratch,
        "warp R=1": warp,
        "warp R=16": warp,
        "active_set R=1": active_set,
        "active_set R=16": active_set,
        "warp products R=16": warp,
        "active_set products R=16": active_set,
        "products_kernel": (A2, A2, i64, A1, A2),
        "bt_kernel": (A2, A2, i64, A1, A2),
        "sqnorm_kernel": (A2, i64, A1, A1),
        "fill_kernel": (A2, i64, I1, I1, A1),
        "scan_tiles_kernel": (I1, i64, i64, I1, L1),
        "scan_offsets_kernel": (L1, i64),
        "scan_add_kernel": (I1, i64, i64, L1),
        "stats_partial_kernel": (L1, I1, A1, A2, i64, i64, F3),
        "stats_reduce_kernel": (F3, i64, F2),
        "vote_kernel": (A2, i64, A2, A2, L1, L1, L1, I1, types.boolean, F2, L2, F2, L2, I1),
    }


def kernel(name, dtype):
    """The kernel a row of :func:`signatures` names: "warp [products] R=r",
    "active_set [products] R=r", or a kernel of the module by its name."""
    if " R=" in name:
        make = _cuda_kernels.warp_encode_kernel if name.startswith("warp") else _cuda_kernels.warp_active_set_kernel
        return make(int(name.split("R=")[1]), dtype, "products" in name).py_func
    if name == "products_kernel":
        return _cuda_kernels.products_kernel(dtype).py_func
    return getattr(_cuda_kernels, name).py_func


#: Kernels whose arithmetic is float64 by design (the statistics accumulate in
#: it; the vote measures distances in it, and the active set solves its
#: small systems in it, as the CPU's do).
FLOAT64_BY_DESIGN = {
    "stats_partial_kernel", "stats_reduce_kernel", "vote_kernel", "active_set R=1", "active_set R=16",
    "active_set products R=16",
}  # fmt: skip

#: Kernels with no floating-point arithmetic at all.
INTEGER_ONLY = {"scan_tiles_kernel", "scan_offsets_kernel", "scan_add_kernel"}


@pytest.fixture
def any_device(monkeypatch):
    """Without a GPU, device functions ask the driver for a compute
    capability; answer 9.0 (sm_90, the H100/H200) instead."""
    if not cuda.is_available():
        import numba.cuda.dispatcher as dispatcher

        if not hasattr(dispatcher, "get_current_device"):
            pytest.skip("this numba.cuda needs a device to compile device functions")

        class Device:
            compute_capability = (9, 0)

        monkeypatch.setattr(dispatcher, "get_current_device", lambda: Device())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernels_compile_and_float32_stays_float32(dtype, any_device):
    dt = types.float32 if dtype == np.float32 else types.float64
    for name, sig in signatures(dt).items():
        if name in INTEGER_ONLY and dtype == np.float32:
            continue  # no float in them: once is enough
        ptx, _ = cuda.compile_ptx(kernel(name, dtype), sig, cc=(9, 0))
        assert ".entry" in ptx, name
        if dtype == np.float32 and name not in FLOAT64_BY_DESIGN:
            f64 = re.findall(r"^\s*\S*\.f64\b.*$", ptx, flags=re.M)
            assert not f64, f"{name}: float64 arithmetic in the float32 kernel: {f64[:3]}"

#!/usr/bin/env bash
# One call on a GPU machine: the GPU issue's figures (bench/gpu_end_to_end.py:
# the public API against the kernel path, the whole fit, MNIST-5 at the
# paper's settings in both dtypes, the encoder against plain PyTorch), the
# GPU tests for real, and, where OLD names another checkout's root (holding
# fastkds/), its figures for the API and the fit in the same run. With
# THROUGHPUT=1 also the older throughput benchmark and phase profile. Logs go
# to $OUT (the device tool's output folder) or ./gpu_session_out. Each step
# has its own time limit, so one that hangs leaves time for the others.
#
#   [DATA=dir-holding-mnist] [OLD=old-checkout] [WHEELS=dir] [E2E_ARGS=...] [TESTS=...] \
#     PYTHONPATH=. bash bench/gpu_session.sh
#
# numba-cuda 0.30 and earlier cannot compile kernels under NumPy >= 2.5
# (docs/gpu.md); where the machine has such a pair, WHEELS names a folder of
# wheels (numpy<2.5) installed into /tmp/site first.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=.
OUT=${OUT:-gpu_session_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nproc
  $PY -c "import numpy, numba, scipy, sklearn; print('numpy', numpy.__version__, 'numba', numba.__version__, 'scipy', scipy.__version__, 'scikit-learn', sklearn.__version__)"
  $PY -m pip show numba-cuda torch 2>/dev/null | grep -E '^(Name|Version)'
} 2>&1 | tee "$OUT/device.txt"
if ! $PY -c "import sys; from fastkds import gpu; r = gpu.numpy_incompatibility(); print('numpy clash:', r); sys.exit(1 if r else 0)" 2>&1 | tee -a "$OUT/device.txt"; then
  if [ -n "${WHEELS:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
    export PYTHONPATH=/tmp/site:.
  fi
fi
$PY -c "import numpy; from fastkds import gpu; print('numpy', numpy.__version__, '- CUDA usable:', gpu.cuda_available())" 2>&1 | tee -a "$OUT/device.txt"
DATA_ARGS=()
[ -n "${DATA:-}" ] && DATA_ARGS=(--data "$DATA")
timeout "${E2E_TIMEOUT:-300}" $PY bench/gpu_end_to_end.py "${DATA_ARGS[@]}" ${E2E_ARGS:-} 2>&1 | tee "$OUT/end_to_end.log"
TESTS=${TESTS:-tests/test_gpu.py tests/test_gpu_ptx.py tests/test_gpu_import.py tests/test_gpu_launch.py}
timeout "${TEST_TIMEOUT:-200}" $PY -m pytest -q -p no:cacheprovider -p no:randomly --durations=5 $TESTS 2>&1 \
  | tee "$OUT/tests.log"
if [ -n "${OLD:-}" ]; then
  # the same sections on the other checkout's package (the benchmark file is this one's)
  PYTHONPATH="$OLD:${PYTHONPATH#.:}" timeout "${OLD_TIMEOUT:-150}" $PY bench/gpu_end_to_end.py --only api fit 2>&1 \
    | tee "$OUT/end_to_end_old.log"
fi
if [ -n "${THROUGHPUT:-}" ]; then
  timeout "${BENCH_TIMEOUT:-200}" $PY bench/gpu_throughput.py --n 10000000 --slots 65536 ${BENCH_ARGS:-} 2>&1 \
    | tee "$OUT/bench.log"
  timeout "${PROFILE_TIMEOUT:-60}" $PY bench/gpu_profile.py --n 10000000 --dtype float32 --kernel warp 2>&1 \
    | tee "$OUT/profile.log"
fi

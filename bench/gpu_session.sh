#!/usr/bin/env bash
# One call on a GPU machine: the GPU tests for real, the throughput benchmark
# (1e7 moons and MNIST-like, float32 and float64, warp and thread encoders,
# the CPU path measured on the same machine in the same run), then the
# phase profile. Logs go to $OUT (the device tool's output folder) or
# ./gpu_session_out. Each step has its own time limit, so one that hangs
# leaves time for the others.
#
#   PYTHONPATH=. bash bench/gpu_session.sh
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
  $PY -c "import numpy, numba, scipy; from numba import cuda; print('numpy', numpy.__version__, 'numba', numba.__version__, 'scipy', scipy.__version__, 'numba.cuda', getattr(cuda, 'implementation', '?'))"
  $PY -m pip show numba-cuda 2>/dev/null | head -2
} 2>&1 | tee "$OUT/device.txt"
timeout "${TEST_TIMEOUT:-170}" $PY -m pytest -q -p no:cacheprovider --durations=5 \
  tests/test_gpu.py tests/test_gpu_ptx.py tests/test_gpu_import.py 2>&1 | tee "$OUT/tests.log"
timeout "${BENCH_TIMEOUT:-200}" $PY bench/gpu_throughput.py --n 10000000 --slots 65536 ${BENCH_ARGS:-} 2>&1 \
  | tee "$OUT/bench.log"
timeout "${PROFILE_TIMEOUT:-60}" $PY bench/gpu_profile.py --n 10000000 --dtype float32 --kernel warp 2>&1 \
  | tee "$OUT/profile.log"

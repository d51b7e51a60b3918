"""The CUDA path's host-side copies (fastkds._host_copies) against NumPy:
they run on the CPU, with or without a GPU."""

import numpy as np
import pytest

from fastkds._config import numba_threads
from fastkds._host_copies import COPY_BLOCK, copy_flat, copy_shifted


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d", [(0, 3), (1, 1), (5, 784), (COPY_BLOCK // 2 + 7, 2), (3 * COPY_BLOCK + 1, 1)])
def test_copies_match_numpy(n, d, dtype):
    rng = np.random.default_rng(n + d)
    src = rng.normal(size=(n, d)).astype(dtype)
    shift = rng.normal(size=d).astype(dtype)
    kept = src.copy()
    for n_jobs in (1, 2):
        with numba_threads(n_jobs):
            flat = np.full_like(src, np.nan)
            copy_flat(flat.reshape(-1), src.reshape(-1))
            shifted = np.full_like(src, np.nan)
            copy_shifted(shifted, src, shift)
        np.testing.assert_array_equal(flat, src)
        np.testing.assert_array_equal(shifted, src - shift)  # the same subtraction, bit for bit
    np.testing.assert_array_equal(src, kept)

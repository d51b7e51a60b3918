"""fastkds.warmup prepares the kernels and rejects dtypes the kernels lack."""

import numpy as np
import pytest

import fastkds


def test_warmup_runs_twice():
    assert fastkds.warmup() >= 0.0
    assert fastkds.warmup() >= 0.0  # idempotent


def test_warmup_one_dtype():
    assert fastkds.warmup(dtypes=(np.float32,)) >= 0.0


@pytest.mark.parametrize("dtype", [np.int64, np.float16, np.complex128])
def test_warmup_rejects_other_dtypes(dtype):
    with pytest.raises(ValueError, match="float64 or float32"):
        fastkds.warmup(dtypes=(dtype,))

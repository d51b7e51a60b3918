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



def test_after_warmup_a_workload_compiles_nothing():
    # warmup() promises every CPU kernel: after it, fits, encodings and
    # clusterings of both solvers, both encoders, few and many features and
    # both dtypes compile no new kernel signature. A subprocess, so kernels
    # compiled by other tests do not count.
    import subprocess
    import sys

    code = """
import warnings, numpy as np, fastkds
from numba.core.registry import CPUDispatcher
from fastkds import _kernels, _active_set, _unrolled_kernels, KDS, KDSClustering, sparse_encode
kernels = {m.__name__ + "." + k: f for m in (_kernels, _active_set, _unrolled_kernels)
           for k, f in vars(m).items() if isinstance(f, CPUDispatcher)}
fastkds.warmup()
before = {k: len(f.signatures) for k, f in kernels.items()}
rng = np.random.default_rng(1)
warnings.simplefilter("ignore")
for dtype in (np.float64, np.float32):
    for d in (2, 8):
        Y = rng.normal(size=(300, d)).astype(dtype)
        for encoder in ("apg", "active-set"):
            model = KDSClustering(3, n_atoms=8, n_iter=5, max_epochs=3, encoder=encoder, random_state=0).fit(Y)
            model.predict(Y)
            model.kds_.transform(Y).toarray()
            model.kds_.inverse_transform(model.kds_.transform(Y))
            sparse_encode(Y, Y[:8], n_iter=5, encoder=encoder, step="paper")
        unrolled = KDS(8, n_iter=5, solver="unrolled", max_epochs=1, batch_size=64, random_state=0).fit(Y)
        unrolled.transform(Y)
        unrolled.partial_fit(Y)
        KDS(8, n_iter=5, max_epochs=2, random_state=0).fit(Y).partial_fit(Y)
        fastkds.project_simplex(Y)
new = sorted(k for k, f in kernels.items() if len(f.signatures) != before[k])
print("COMPILED AFTER WARMUP", new)
assert not new, new
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr

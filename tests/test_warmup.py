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
    # clusterings of both solvers, both encoders, few and many features,
    # both dtypes, and writable or read-only data (Numba types the two apart:
    # a memmap opened with mode="r" would compile every kernel it reaches
    # again) compile no new kernel signature, and every kernel it compiled
    # can be cached. A subprocess, so kernels compiled by other tests do not
    # count.
    import subprocess
    import sys

    code = """
import os, tempfile, warnings, joblib, numpy as np, fastkds
from numba.core.registry import CPUDispatcher
from fastkds import _kernels, _active_set, _unrolled_kernels, _vote_kernels, KDS, KDSClustering, sparse_encode
from fastkds.label_vote import LabelVote
kernels = {m.__name__ + "." + k: f for m in (_kernels, _active_set, _unrolled_kernels, _vote_kernels)
           for k, f in vars(m).items() if isinstance(f, CPUDispatcher)}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fastkds.warmup()
# a kernel Numba cannot cache (a ctypes call inside, such as numba.get_num_threads)
# compiles again in every new process
uncached = [str(w.message) for w in caught if "Cannot cache" in str(w.message)]
assert not uncached, uncached
before = {k: len(f.signatures) for k, f in kernels.items()}
rng = np.random.default_rng(1)
warnings.simplefilter("ignore")
for dtype in (np.float64, np.float32):
    for d, writable in ((2, True), (8, True), (2, False), (40, False)):
        Y = rng.normal(size=(300, d)).astype(dtype)
        Y.flags.writeable = writable
        for encoder in ("apg", "active-set"):
            model = KDSClustering(3, n_atoms=8, n_iter=5, max_epochs=3, encoder=encoder, random_state=0).fit(Y)
            model.predict(Y)
            model.kds_.transform(Y).toarray()
            model.kds_.inverse_transform(model.kds_.transform(Y))
            sparse_encode(Y, Y[:8], n_iter=5, encoder=encoder, step="paper")
        # models whose fitted arrays are read-only memmaps, as joblib hands them to
        # workers: a clusterer (an exact search) and a vote that probes its cells
        probed = LabelVote(Y[:16], Y, np.arange(300) % 2, 5, 2, n_probe=2)
        for fitted in (model, probed):
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "model.joblib")
                joblib.dump(fitted, path)
                joblib.load(path, mmap_mode="r").predict(Y)
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


#: The CPU kernels Python code calls, with the working dtypes (that of the
#: first float array argument) warmup() must give each a signature for. Named here, not read from warmup(), so that a kernel
#: warmup forgets fails the test; test_entry_points_are_every_python_call_site
#: keeps the list complete. Helpers called only from other kernels are left
#: out: they compile into their callers (and a cached caller never compiles
#: them on its own).
ENTRY_POINTS = {
    "_kernels.project_simplex_rows": ("float32", "float64"),
    "_kernels.centre_rows": ("float32", "float64"),  # the centred step
    "_kernels.point_products": ("float32", "float64"),  # d <= SMALL_D
    "_kernels.blas_products": ("float32", "float64"),  # d > SMALL_D
    "_kernels.encode_codes_lockstep": ("float32", "float64"),  # d <= LOCKSTEP_MAX_FEATURES
    "_kernels.encode_codes_points": ("float32", "float64"),  # d > LOCKSTEP_MAX_FEATURES
    "_kernels.fill_csr_from_slots": ("float32", "float64"),
    "_kernels.slots_to_dense": ("float32", "float64"),
    "_kernels.count_row_nonzeros": ("float32", "float64"),
    "_kernels.fill_csr": ("float32", "float64"),
    "_kernels.accumulate_statistics": ("float32", "float64"),
    "_kernels.accumulate_statistics_by_atom": ("float32", "float64"),  # many atoms and features
    "_kernels.seeding_distances": ("float32", "float64"),
    "_kernels.seeding_rounds": ("float32", "float64"),
    # the clusterers' embedding of the codes (fastkds.spectral.embedding_rows)
    "_kernels.embed_codes": ("float32", "float64"),
    # with far atoms (fastkds.prepared.far_atoms)
    "_kernels.may_use_far": ("float32", "float64"),
    "_kernels.gather_block": ("float32", "float64"),
    "_kernels.scatter_slots": ("float32", "float64"),
    "_active_set.encode_codes_active_set": ("float32", "float64"),
    "_unrolled_kernels.unrolled_batch": ("float32", "float64"),
    # the Adam state is float64 whatever the data's dtype (UnrolledTrainer.W)
    "_unrolled_kernels.adam_update": ("float64",),
    # the neighbours' vote (fastkds.label_vote); its vote takes integers only
    "_vote_kernels.probe_atoms_direct": ("float32", "float64"),  # d <= FEW_FEATURES
    "_vote_kernels.probe_atoms_screened": ("float32", "float64"),  # d > FEW_FEATURES
    "_vote_kernels.settle": ("integers",),
    "_vote_kernels.search_direct": ("float32", "float64"),  # d <= FEW_FEATURES
    "_vote_kernels.search_shared_reads": ("float32", "float64"),  # small cells
    "_vote_kernels.search_screened": ("float32", "float64"),
    "_vote_kernels.search_alone": ("float32", "float64"),
    "_vote_kernels.search_pruned": ("float32", "float64"),  # an exact search, d <= FEW_FEATURES
    "_vote_kernels.cell_radii": ("float32", "float64"),
    "_vote_kernels.vote": ("integers",),
    # a sample of rows (fastkds.sources.random_rows)
    "_kernels.first_distinct": ("integers",),
    # the re-seed candidates (fastkds.solvers.SufficientStatistics), of the objectives' dtype
    "_kernels.reservoir_top": ("float32", "float64"),
}

_KERNEL_MODULES = ("_kernels", "_active_set", "_unrolled_kernels", "_vote_kernels")


def _python_kernel_calls():
    """``module.name`` of every kernel (a Numba CPU dispatcher) that a plain
    Python function of the package calls, found by reading the sources."""
    import ast
    import importlib
    import pathlib

    from numba.core.registry import CPUDispatcher

    dispatchers = {
        f"{mod}.{name}"
        for mod in _KERNEL_MODULES
        for name, obj in vars(importlib.import_module(f"fastkds.{mod}")).items()
        if isinstance(obj, CPUDispatcher) and obj.__module__ == f"fastkds.{mod}"
    }

    def jitted(fn):
        return any("jit" in ast.unparse(d) for d in fn.decorator_list)

    calls = set()
    for path in pathlib.Path(fastkds.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        module = path.stem
        # local name -> "module.name": kernel modules imported whole, names
        # imported from them, and a kernel module's own top-level names
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                for a in node.names:
                    if node.module is None and a.name in _KERNEL_MODULES:
                        aliases[a.asname or a.name] = a.name
                    elif node.module in _KERNEL_MODULES:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        own = module if module in _KERNEL_MODULES else None
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or jitted(fn):
                continue
            for call in ast.walk(fn):
                if not isinstance(call, ast.Call):
                    continue
                f = call.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in aliases:
                    target = f"{aliases[f.value.id]}.{f.attr}"
                elif isinstance(f, ast.Name):
                    target = aliases.get(f.id, f"{own}.{f.id}" if own else None)
                else:
                    continue
                if target in dispatchers:
                    calls.add(target)
    return calls


def test_entry_points_are_every_python_call_site():
    found = _python_kernel_calls()
    assert found == set(ENTRY_POINTS), (
        f"called from Python but not in ENTRY_POINTS: {sorted(found - set(ENTRY_POINTS))}; "
        f"in ENTRY_POINTS but not called from Python: {sorted(set(ENTRY_POINTS) - found)}"
    )


def test_warmup_compiles_every_entry_point():
    # A fresh process: kernels other tests compiled here would hide a gap.
    import json
    import subprocess
    import sys

    code = f"""
import importlib, json
import fastkds
from numba import types
fastkds.warmup()
out = {{}}
for key in {sorted(ENTRY_POINTS)!r}:
    mod, name = key.split(".")
    kernel = getattr(importlib.import_module("fastkds." + mod), name)
    # the working dtype: that of the first float array argument (later ones,
    # such as the float64 sums of accumulate_statistics, are float64 always)
    out[key] = sorted({{str(next((t.dtype for t in sig if isinstance(t, types.Array)
                                  and isinstance(t.dtype, types.Float)), "integers"))
                       for sig in kernel.signatures}})
print(json.dumps(out))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    compiled = json.loads(res.stdout.strip().splitlines()[-1])
    missing = {
        key: sorted(set(want) - set(compiled[key]))
        for key, want in ENTRY_POINTS.items()
        if not set(want) <= set(compiled[key])
    }
    assert not missing, f"warmup() leaves these kernels without a signature for: {missing}"

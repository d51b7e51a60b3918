"""Rules the kernels' source keeps (fastkds._kernels, module docstring).

Parallel kernels hold no array expressions: Numba turns each into a
parallel loop of its own, compiled apart (the statistics' kernel compiled
in 3.0 s with three ``np.zeros``, in 1.35 s without; docs/scaling.md).
"""

import ast
import pathlib

import fastkds

PACKAGE = pathlib.Path(fastkds.__file__).parent

#: NumPy calls that allocate and fill (np.empty allocates only; np.dot is a
#: BLAS call, and np.sqrt and the like are scalar where the kernels use them).
ARRAY_CALLS = {"zeros", "ones", "full", "arange", "zeros_like", "ones_like", "full_like", "copy"}
#: Array methods that reduce or fill.
ARRAY_METHODS = {"max", "min", "sum", "mean", "fill", "copy"}


def _parallel_functions():
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and any(k.arg == "parallel" for k in d.keywords) for d in node.decorator_list
            ):
                yield f"{path.stem}.{node.name}", node


def _array_expressions(fn):
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "np":
                if node.func.attr in ARRAY_CALLS:
                    yield f"np.{node.func.attr} (line {node.lineno})"
            elif node.func.attr in ARRAY_METHODS:
                yield f".{node.func.attr}() (line {node.lineno})"
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Subscript) and any(isinstance(s, ast.Slice) for s in ast.walk(target.slice)):
                yield f"slice assignment (line {node.lineno})"


def test_the_scan_finds_parallel_kernels():
    names = {name for name, _ in _parallel_functions()}
    assert {"_kernels.accumulate_statistics", "_vote_kernels.vote", "_unrolled_kernels.unrolled_batch"} <= names


def test_the_scan_finds_array_expressions():
    fn = ast.parse("def f(a, m):\n    b = np.zeros(m)\n    a[:] = 0.0\n    t = a.max()\n    c = np.empty(m)\n").body[0]
    assert sorted(e.split(" ")[0] for e in _array_expressions(fn)) == [".max()", "np.zeros", "slice"]


def test_parallel_kernels_hold_no_array_expressions():
    found = {name: list(_array_expressions(fn)) for name, fn in _parallel_functions()}
    assert {name: exprs for name, exprs in found.items() if exprs} == {}

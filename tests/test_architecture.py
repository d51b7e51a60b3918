"""The package's layers: imports run one way, from the CLI and the paper
down to the kernels (docs/architecture.md).

Every import of a fastkds module is counted, at module level and inside
functions alike: a function-level import is a dependency all the same, only
a later one.
"""

import ast
import pathlib

import fastkds

PACKAGE = pathlib.Path(fastkds.__file__).parent

#: Each module's layer; a module imports only from its own layer or lower
#: ones, and never in a cycle. A new module must be placed here.
LAYERS = {
    # foundations: settings, errors, plain data access; no fastkds imports but these
    "_config": 0,
    "exceptions": 0,
    "_progress": 0,
    "metrics": 0,
    "diskcodes": 0,
    "_naive": 0,
    "_validation": 1,
    "datasets": 1,
    # compiled code
    "_shared_kernels": 2,
    "_kernels": 2,
    "_active_set": 2,
    "_unrolled_kernels": 2,
    "_cuda_kernels": 2,
    "_host_copies": 2,
    "_vote_kernels": 2,
    # data read chunk by chunk, and random rows (a kernel draws them)
    "sources": 2,
    # where the kernels run
    "prepared": 3,
    "gpu": 3,
    "_backends": 3,
    # solvers and the spectral step
    "solvers": 4,
    "online": 4,
    "unrolled": 4,
    "warmstart": 4,
    "seeding": 4,
    "spectral": 4,
    "label_vote": 4,
    "encoding": 4,
    "_dask": 4,
    "persistence": 4,
    # estimators
    "estimators": 5,
    "estimators._base": 5,
    "estimators.kds": 5,
    "estimators.clustering": 5,
    "estimators.ensemble": 5,
    "estimators._saved": 5,
    "warmup": 5,
    # the command line and the paper's experiments
    "plotting": 6,
    "experiments": 6,
    "paper_report": 6,
    "cli": 7,
    "__main__": 7,
    "__init__": 7,
}

#: Cycles not yet broken, each a set of modules. The test fails when one
#: appears that is not listed, and when a listed one is gone (remove it here).
KNOWN_CYCLES = []


def _modules():
    """Module name (dotted, below fastkds; a package by its own name) -> file."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if "_build" in parts or "__pycache__" in parts:
            continue
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _package_of(name, path):
    """The package a module's relative imports start from ("" for fastkds)."""
    if path.name == "__init__.py":
        return "" if name == "__init__" else name
    return name.rpartition(".")[0]


def _known(name, modules):
    """``name``, or the longest module it is inside (an imported attribute's module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def imports_of(name, path, modules):
    """The fastkds modules the module ``name`` in ``path`` imports, at any depth of its code."""
    package = _package_of(name, path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                stem = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "fastkds":
                stem = node.module.partition(".")[2]
            else:
                continue
            for alias in node.names:  # "from pkg import mod" names a module; else the names are attributes
                candidate = f"{stem}.{alias.name}" if stem else alias.name
                found.add(_known(candidate, modules) or _known(stem, modules))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "fastkds" and len(parts) > 1:
                    found.add(_known(".".join(parts[1:]), modules))
    return sorted(dep for dep in found if dep and dep != name)


def import_graph():
    modules = _modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def strongly_connected(graph):
    """The cycles of ``graph`` (Tarjan's strongly connected components of more than one node)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_graph_reader_sees_every_form_of_import(tmp_path):
    source = (
        "from . import a, b\n"
        "from .c import x\n"
        "import fastkds.d\n"
        "from fastkds import e\n"
        "from fastkds.f import y\n"
        "def later():\n"
        "    from .g import z\n"
        "from .pkg.sub import w\n"
        "import numpy\n"
    )
    path = tmp_path / "mod.py"
    path.write_text(source)
    modules = dict.fromkeys(["a", "b", "c", "d", "e", "f", "g", "h", "pkg", "pkg.sub", "mod"])
    assert imports_of("mod", path, modules) == ["a", "b", "c", "d", "e", "f", "g", "pkg.sub"]
    # inside a package: "." is the package, ".." the one above
    inner = tmp_path / "inner.py"
    inner.write_text("from .. import a\nfrom . import sub\nfrom ._base import q\n")
    modules.update(dict.fromkeys(["pkg._base", "pkg.inner"]))
    assert imports_of("pkg.inner", inner, modules) == ["a", "pkg._base", "pkg.sub"]


def test_the_cycle_finder_finds_cycles():
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"], "e": ["e2"], "e2": []}
    assert strongly_connected(graph) == [{"a", "b", "c"}]


def test_every_module_has_a_layer():
    missing = sorted(set(_modules()) - set(LAYERS))
    assert not missing, f"place these modules in LAYERS: {missing}"


def test_imports_run_down_the_layers():
    graph = import_graph()
    known = set().union(*KNOWN_CYCLES)
    upward = [
        f"{name} (layer {LAYERS[name]}) imports {dep} (layer {LAYERS[dep]})"
        for name, deps in graph.items()
        for dep in deps
        if LAYERS[dep] > LAYERS[name] and not (name in known and dep in known)
    ]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_no_import_cycles_but_the_known_ones():
    cycles = strongly_connected(import_graph())
    new = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert not new, f"import cycles: {new}"
    assert not gone, f"these cycles are gone: remove them from KNOWN_CYCLES: {gone}"

"""The layers of the package and the backends' contract with the analyses
(backends/protocol.py): no import cycle and no import up the layers (deferred imports
included); the backends import no analysis, set no attribute on an analysis, and every
analysis of the package provides the hooks the node backend calls."""

import ast
import pathlib

import pytest

import mdakit_fastrdf
from mdakit_fastrdf.analysis.declarations import analysis_classes
from mdakit_fastrdf.backends.protocol import FedAnalysis, PlannedAnalysis

BACKENDS = pathlib.Path(mdakit_fastrdf.__file__).parent / "backends"


def _trees():
    for path in sorted(BACKENDS.glob("*.py")):
        yield path.name, ast.parse(path.read_text())


def test_backends_import_no_analysis():
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = ("." * node.level) + (node.module or "")
                ours = node.level > 0 or mod.startswith("mdakit_fastrdf")
                assert not (ours and ("analysis" in mod or "outputs" in mod)), (name, mod)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("mdakit_fastrdf.analysis"), (name, alias.name)


def test_backends_set_no_attribute_on_an_analysis():
    """No assignment in the backends writes an attribute of an object named like the
    analysis (``analysis``, ``obj``, ``func`` or ``_analysis_of(...)``)."""
    for name, tree in _trees():
        for node in ast.walk(tree):
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute):
                        base = sub.value
                        owner = (base.id if isinstance(base, ast.Name) else
                                 getattr(base.func, "id", None) if isinstance(base, ast.Call)
                                 else None)
                        assert owner not in ("analysis", "obj", "func", "_analysis_of"), (
                            name, ast.unparse(t))


def _analysis_classes():
    return sorted(analysis_classes().values(), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _analysis_classes(), ids=lambda c: c.__name__)
def test_every_analysis_provides_the_node_hooks(cls):
    for proto in (PlannedAnalysis, FedAnalysis):
        missing = [m for m in ("_plan_device", "_can_feed", "_feed_rows", "_warm_up",
                               "_prepare_reader", "_read_frame")
                   if m in dir(proto) and not callable(getattr(cls, m, None))]
        assert not missing, (cls.__name__, missing)


# --------------------------------------------------------------------------------------
# the package's import graph: no cycle, and every import goes down the layers
# --------------------------------------------------------------------------------------

PACKAGE = pathlib.Path(mdakit_fastrdf.__file__).parent

#: The layers, lowest first: a module imports only modules of its own layer or below.
#: The command line (cli/, and ``python -m mdakit_fastrdf``) is the layer above the public API.
LAYERS = ("engine", "backends", "analysis", "outputs", "api", "cli")
CLI_MODULES = ("mdakit_fastrdf.__main__",)


def _layer(module):
    """The layer of a module of the package; None for ``_version`` (no import of the
    package: any layer may import it)."""
    if module in CLI_MODULES:
        return "cli"
    if module == "mdakit_fastrdf":  # the public API gathers every layer but the cli's
        return "api"
    part = module.split(".")[1]
    return None if part == "_version" else part


def _modules():
    """``{dotted name: path}`` of every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("mdakit_fastrdf",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


#: the compiled modules (no Python source): importing one imports no module of the package
COMPILED = {"mdakit_fastrdf.engine._fastrdf_cpu", "mdakit_fastrdf.engine._fastrdf_cuda"}


def import_graph():
    """``{module: {imported module of the package: line}}``, deferred (function-level)
    imports included. ``from X import name`` imports module ``X.name`` when there is one,
    else ``X``; the parent packages Python runs first are not counted."""
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = ".".join(base[:len(base) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules
                           or f"{base}.{alias.name}" in COMPILED else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                # a.b.c -> a.b (not ours); a compiled module is a leaf of its own
                while target not in modules and target not in COMPILED and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and target != module:
                    edges.setdefault(target, node.lineno)
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_sees_deferred_imports():
    graph = import_graph()
    # a top-level and a function-level import of the backends' node module
    assert "mdakit_fastrdf.backends.node" in graph["mdakit_fastrdf.backends.mixin"]
    assert "mdakit_fastrdf.backends.node" in graph["mdakit_fastrdf.backends.dask_backend"]
    # (a function-level import of a submodule: the CUDA probe, engine/cuda.py)
    assert "mdakit_fastrdf.engine.cuda" in graph["mdakit_fastrdf.backends.topology"]
    # the command line is a package of its own, the top layer
    assert "mdakit_fastrdf.cli.commands" in graph["mdakit_fastrdf.cli.app"]
    assert {_layer(m) for m in graph if m.startswith("mdakit_fastrdf.cli")} == {"cli"}


def test_no_import_cycle():
    graph = import_graph()
    cycles = _cycles(graph)
    detail = ["  " + " <-> ".join(c) + ": " + "; ".join(
        f"{a.removeprefix('mdakit_fastrdf.')} -> {b.removeprefix('mdakit_fastrdf.')} "
        f"(line {graph[a][b]})" for a in c for b in graph[a] if b in c) for c in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(detail)


def test_layers_import_downward():
    upward = []
    for module, edges in sorted(import_graph().items()):
        own = _layer(module)
        for target, line in sorted(edges.items()):
            theirs = _layer(target)
            if own and theirs and LAYERS.index(theirs) > LAYERS.index(own):
                upward.append(f"  {module} ({own}) line {line} imports {target} ({theirs})")
    assert not upward, "imports up the layers " + " < ".join(LAYERS) + ":\n" + "\n".join(upward)

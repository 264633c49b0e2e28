"""The backends' contract with the analyses (backends/protocol.py): the backends import no
analysis (deferred imports included), set no attribute on an analysis, and every analysis
of the package provides the hooks the node backend calls."""

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

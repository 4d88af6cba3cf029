"""The package's layers point one way: no module imports a higher layer, and no module imports
another of the package's modules inside a function (the way a cycle would be dodged).

Order, lowest first: _backend, reference (the NumPy references, importable from every layer),
datasets and semiring (the semiring objects) -> _validate -> _kernels -> primitives -> convert ->
formats -> transfer -> advisor -> linalg and csgraph -> nx (the NetworkX backend) and
distributed -> bench, demo and the package's __init__ (which re-exports the public API)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "sparsegpu"
LAYERS = [
    {"_backend", "reference", "datasets", "_streamcopy", "semiring"},
    {"_validate"},
    {"_kernels"},
    {"_aot"},
    {"primitives"},
    {"convert"},
    {"formats"},
    {"transfer"},
    {"advisor"},
    {"linalg", "csgraph"},
    {"nx", "distributed"},
    {"bench", "demo", "__init__", "__main__"},
]
RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def room_of(dotted: str) -> str:
    """The top-level room of ``sparsegpu.x.y`` (``x``), or ``__init__`` for the package itself
    (and for a name the package re-exports, ``from sparsegpu import from_scipy``)."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else "__init__"


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported sparsegpu module, line, inside a function) for every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, in_function) for a in child.names if a.name.startswith("sparsegpu"))
            elif isinstance(child, ast.ImportFrom) and child.module and child.module.startswith("sparsegpu"):
                if child.module == "sparsegpu":  # from sparsegpu import x: x is a room
                    found.extend((f"sparsegpu.{a.name}", child.lineno, in_function) for a in child.names)
                else:
                    found.append((child.module, child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def test_every_room_has_a_layer():
    rooms = {room_of(module_name(p)) for p in MODULES}
    assert rooms <= set(RANK), f"rooms without a layer: {sorted(rooms - set(RANK))}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_imports_point_down(path):
    here = room_of(module_name(path))
    for target, line, in_function in imports(path):
        there = room_of(target)
        assert not in_function, f"{path.name}:{line} imports {target} inside a function"
        if there == here:
            continue
        assert RANK[there] <= RANK[here], f"{path.name}:{line}: {here} (layer {RANK[here]}) imports {there} (layer {RANK[there]})"


def test_the_check_catches_an_upward_import(tmp_path):
    """The checker itself: an upward import and a function-level import are both seen."""
    bad = tmp_path / "bad.py"
    bad.write_text("from sparsegpu.linalg import cg\n\ndef f():\n    import sparsegpu.formats\n")
    found = imports(bad)
    assert ("sparsegpu.linalg", 1, False) in found and ("sparsegpu.formats", 4, True) in found

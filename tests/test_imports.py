"""The package's import graph: no circles, and every module imports on its own (without Paddle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "opgen"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The opgen modules ``name`` imports anywhere in its body (functions included), leaving out
    its own ancestor packages: importing ``__version__`` or a base class from the package being
    imported is how packages are meant to be used."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                      for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in MODULES and m != name and m not in ancestors}


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports in ``graph``, or None."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep, path + [dep])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_the_import_graph_has_no_circle():
    """Function-level imports count: a lazy import that closes a circle only hides it."""
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert _circle(graph) is None, " -> ".join(_circle(graph) or [])


def test_the_circle_finder_finds_one():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("name", sorted(set(MODULES) - {"opgen.__main__"}))  # that one runs opgen
def test_each_module_imports_alone_in_a_fresh_interpreter(name):
    code = f"import sys, {name}; assert 'paddle' not in sys.modules, 'imported paddle'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr


def test_no_module_imports_a_private_name_of_another():
    """A module's ``_names`` are its own: what another module needs is made public where it
    belongs (wheel once imported doctor's fat binary reader). A private module (_torch_baseline,
    bench's PyTorch half) is part of the module it serves."""
    private = []
    for name, path in MODULES.items():
        if name.rsplit(".", 1)[-1].startswith("_"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or
                                                     (node.module or "").startswith("opgen")):
                private += [f"{name}: {a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert not private

"""A spec's names never shadow a Python built-in that the generated Python calls where those
names are bound: an input called ``isinstance`` made the wrapper's own type check call the
input (the rowwise fuzzer found it: ``TypeError: 'Tensor' object is not callable``)."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest
from conftest import ROOT

import opgen.kinds  # noqa: F401  registers each kind's spec rules, as opgen.api does
from opgen.names import identifier_problem
from opgen.render import render_op
from opgen.spec import load

BUILTINS = frozenset(dir(builtins))
EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if (p / f"{p.name}.yaml").is_file())


def builtins_read_where_spec_names_are_bound(source: str, spec_names: set[str]
                                             ) -> dict[str, set[str]]:
    """Built-in name -> the functions of ``source`` that read it while a parameter or local of
    theirs is one of ``spec_names`` (so a spec could name that parameter after the built-in)."""
    found: dict[str, set[str]] = {}
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.Lambda)):
            continue
        args = fn.args
        bound = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        bound |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        bound |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Store)}
        if not bound & spec_names:
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                    node.id in BUILTINS and node.id not in bound:
                found.setdefault(node.id, set()).add(getattr(fn, "name", "<lambda>"))
    return found


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_builtins_the_generated_python_calls_are_refused_as_spec_names(example: Path):
    spec = load(example / f"{example.name}.yaml")
    model = spec.model
    spec_names = {*model.inputs, *model.outputs, *(getattr(model, "attrs", None) or {})}
    shadowable = {}
    for path, data in render_op(spec).files.items():
        if path.endswith(".py"):
            for name, where in builtins_read_where_spec_names_are_bound(
                    data.decode(), spec_names).items():
                if identifier_problem(name, what="input") is None:
                    shadowable[name] = sorted(f"{path}:{f}" for f in where)
    assert shadowable == {}


def test_the_scan_finds_a_builtin_read_beside_a_spec_name():
    source = "def f(x):\n    return isinstance(x, int) and len(y)\n\ndef g(y):\n    return abs(y)\n"
    assert builtins_read_where_spec_names_are_bound(source, {"x"}) == \
        {"isinstance": {"f"}, "int": {"f"}, "len": {"f"}}

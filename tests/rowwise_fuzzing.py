"""Differential fuzzing of the rowwise kind (issue 13): random row-wise specs against numpy.

tests/fuzzing.py draws elementwise ops; this module draws ``kind: rowwise`` specs from the same
expression strategies and checks them with the same evaluator:

- inputs in every role (the first per-element, the others per-element, per-column or per-row),
  attrs of every type;
- a forward of one to three steps before its first output: sometimes a per-element intermediate
  (``e: exp(x - 1)``), then one or two reductions (``sum``, ``mean``, ``max``, ``min``) of
  expressions over the inputs, the intermediate and the reductions before (``m: mean(x)``,
  ``v: mean((x - m) ** 2)``), then an output over all of them; in half the ops the first
  reduction is a per-row output too;
- ``backward: auto``, so opgen's derivation through reductions is what the gradients check.

Each op is generated, built (many to a library, as tests/fuzzing.py builds) and checked on the
CPU: its forward kernel against tests/fuzzing.py's evaluator (exact values and a kernel's error
bound, reductions bounded as :func:`fuzzing.summed` bounds a sum), in float64 and float32; and its
own generated tests (forward and backward against the generated numpy reference over every row
shape, views, a row of -inf, and central differences of the forward in float64).
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzzing  # noqa: E402
from fuzzing import NUM, Arith, Node, Scope, Sym, Val, source  # noqa: E402

ROLES = ("element", "column", "row")
REDUCTIONS = ("sum", "mean", "max", "min")
#: The longest row the generated tests run (opgen.testing.ROW_SHAPES): a sum's values reach it.
LONGEST_ROW = 32768
#: Locals of the rowwise templates' Python, beside the spec's names where they are bound (an
#: input named op_shape broke the references: opgen reserves that name now).
TEMPLATE_LOCALS = ("op_shape", "stat", "per_row", "terms", "loss", "direction", "analytic",
                   "numeric", "first", "rows", "role", "roles", "tensors", "arrays", "spec",
                   "variable", "outs", "cast", "size", "tensor", "w_code", "x_code")
#: Row shapes (rows, row length) the forward kernel is checked at against the evaluator.
CHECK_SHAPES = ((3, 7), (4, 128), (2, 1000), (1, 4099), (2, 3, 33), (0, 5))


@dataclass(frozen=True)
class Step:
    """One entry of the forward: ``target: reduce(tree)`` or ``target: tree``."""

    target: str
    tree: Node
    reduce: str | None = None

    @property
    def text(self) -> str:
        return f"{self.reduce}({source(self.tree)})" if self.reduce else source(self.tree)


@dataclass(frozen=True)
class RowOp:
    """One drawn rowwise op: its inputs with their roles, attrs, forward steps and outputs."""

    seed: int
    index: int
    name: str
    inputs: tuple[Sym, ...]
    roles: tuple[str, ...]
    attrs: tuple[Sym, ...]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]
    dtypes: tuple[str, ...] = ("float32", "float64")

    @property
    def spec_name(self) -> str:
        return f"{self.name}.yaml"

    @property
    def stub_backward(self) -> bool:  # what tests/fuzzing.py's helpers ask of an op
        return False

    def yaml(self) -> str:
        """The op's spec, as a user would write it."""
        roles = ", ".join(f"{s.name}: {r}" for s, r in zip(self.inputs, self.roles, strict=True))
        lines = [f"# Drawn by tests/rowwise_fuzzing.py: seed {self.seed}, index {self.index}.",
                 f"name: {self.name}",
                 "kind: rowwise",
                 f"summary: rowwise fuzzed op {self.index} of seed {self.seed}",
                 f"inputs: {{{roles}}}",
                 f"outputs: [{', '.join(self.outputs)}]"]
        if self.attrs:
            lines.append("attrs:")
            lines += [f"  {a.name}: {{type: {a.type}, default: {fuzzing._yaml_value(a.default)}}}"
                      for a in self.attrs]
        lines.append(f"dtypes: [{', '.join(self.dtypes)}]")
        lines.append("domain:")
        lines += [f"  {s.name}: [{s.lo!r}, {s.hi!r}]" for s in self.inputs]
        lines.append("forward:")
        lines += [f"  {step.target}: {json.dumps(step.text)}" for step in self.steps]
        lines.append("backward: auto")
        return "\n".join(lines) + "\n"


def _value(name: str, lo: float, hi: float) -> Sym:
    """A named value of the forward that later steps read, with the interval of its values."""
    return Sym(name, "input", "input", lo, hi)


def _reduced_interval(reduce: str, tree: Node) -> tuple[float, float]:
    if reduce == "sum":  # up to LONGEST_ROW terms, or none
        return min(0.0, LONGEST_ROW * tree.lo), max(0.0, LONGEST_ROW * tree.hi)
    return tree.lo, tree.hi


def _plus(draw: st.DrawFn, tree: Node, value: Sym) -> Node:
    """``tree + value`` or ``tree - value``."""
    leaf = fuzzing.var(value.name, NUM, value.lo, value.hi)
    return fuzzing.make(draw(st.sampled_from(["add", "sub"])), tree, leaf)


def _reads(tree: Node, names: set[str]) -> bool:
    if tree.kind == "var":
        return tree.name in names
    return any(_reads(a, names) for a in tree.args)


@st.composite
def row_ops(draw: st.DrawFn, *, seed: int = 0, index: int = 0,
            dtypes: tuple[str, ...] = ("float32", "float64")) -> RowOp:
    """One random, well-typed rowwise spec (see the module docstring)."""
    draw(st.integers(0, 2**30))  # hypothesis varies the first choice of each example: this one
    taken: set[str] = set()
    inputs = draw(fuzzing.input_syms(taken))
    if draw(st.integers(0, 3)) == 0:  # an input named like a local of the generated Python
        k = draw(st.integers(0, len(inputs) - 1))
        name = draw(st.sampled_from(TEMPLATE_LOCALS))
        if name not in taken and fuzzing._usable(name, "input"):
            taken.add(name)
            inputs = (*inputs[:k], dataclasses.replace(inputs[k], name=name), *inputs[k + 1:])
    roles = ("element", *(draw(st.sampled_from(ROLES)) for _ in inputs[1:]))
    attrs = draw(fuzzing.attr_syms(taken, want_bool=False))
    known = list(inputs)
    per_element = {s.name for s, r in zip(inputs, roles, strict=True) if r != "row"}
    # names whose value is the same all along a row: per-row inputs and statistics, and what
    # reads them
    per_row = {s.name for s, r in zip(inputs, roles, strict=True) if r == "row"}
    steps: list[Step] = []
    if draw(st.integers(0, 2)) == 0:  # a per-element intermediate that later steps read
        tree = draw(fuzzing.num_exprs(Scope(tuple(known), attrs), draw(st.integers(1, 2))))
        name = draw(fuzzing.names("output", taken))
        steps.append(Step(name, tree))
        known.append(_value(name, tree.lo, tree.hi))
        if _reads(tree, per_element):
            per_element.add(name)
        if _reads(tree, per_row):
            per_row.add(name)
    for _ in range(draw(st.integers(1, 2))):
        reduce = draw(st.sampled_from(REDUCTIONS))
        scope = known
        if reduce in ("max", "min"):
            # Every element that ties with a row's max or min gets its gradient (Paddle's rule,
            # docs/spec.md), so the max of a value that is the same along the row (or a row's
            # value beside a per-element one, max(where(x < 0, x, r))) has C times the gradient
            # central differences see: such a tie is what the rule is, not a bug. The reduced
            # value reads per-element ones only.
            scope = [k for k in known if k.name in per_element and k.name not in per_row]
        tree = draw(fuzzing.num_exprs(Scope(tuple(scope), attrs), draw(st.integers(1, 3))))
        if reduce in ("max", "min") and not _reads(tree, per_element):
            tree = _plus(draw, tree, inputs[0])
        name = draw(fuzzing.names("output", taken))
        steps.append(Step(name, tree, reduce))
        known.append(_value(name, *_reduced_interval(reduce, tree)))
        per_row.add(name)
    out_tree = draw(fuzzing.num_exprs(Scope(tuple(known), attrs), draw(st.integers(1, 3))))
    outputs = [draw(fuzzing.names("output", taken, fuzzing.OUTPUT_NAMES))]
    first_stat = next(s.target for s in steps if s.reduce)
    if draw(st.booleans()):  # a per-row statistic saved as an output too
        outputs.append(first_stat)
    # Every intermediate is read (opgen refuses one that is not), and the main output is
    # per-element: what the drawn tree leaves out is added to it.
    values = {v.name: v for v in known}
    for i, step in enumerate(steps):
        later = [t.tree for t in steps[i + 1:]] + [out_tree]
        if step.target not in outputs and not any(_reads(t, {step.target}) for t in later):
            out_tree = _plus(draw, out_tree, values[step.target])
    if not _reads(out_tree, per_element):
        out_tree = _plus(draw, out_tree, inputs[0])
    steps.append(Step(outputs[0], out_tree))
    return RowOp(seed=seed, index=index, name=f"rz{seed}_{index}", inputs=inputs, roles=roles,
                 attrs=attrs, steps=tuple(steps), outputs=tuple(outputs), dtypes=dtypes)


def draw_op(seed: int, index: int, dtypes: tuple[str, ...] = ("float32", "float64")) -> RowOp:
    """Op ``index`` of the campaign ``seed``, built for ``dtypes``: the same (seed, index) always
    draws the same op (the second example of a hypothesis run, as tests/fuzzing.py draws)."""
    fuzzing.warm_hypothesis()
    drawn: list[RowOp] = []

    @settings(max_examples=2, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed * 1_000_003 + index + 7_777)
    @given(row_ops(seed=seed, index=index, dtypes=dtypes))
    def collect(op: RowOp) -> None:
        drawn.append(op)

    collect()
    return drawn[-1]


def handwritten(name: str, inputs: dict[str, tuple[str, float, float]],
                steps: Sequence[tuple[str, str]], outputs: Sequence[str]) -> RowOp:
    """A rowwise op written out: ``inputs`` name -> (role, lo, hi), ``steps`` (target, text) in
    order, a reduction written as the whole text (``sum(e)``)."""
    syms = tuple(Sym(n, "input", "input", lo, hi) for n, (_, lo, hi) in inputs.items())
    types = {n: NUM for n in inputs} | {t: NUM for t, _ in steps}
    parsed = []
    for target, text in steps:
        call = ast.parse(text, mode="eval").body
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
                call.func.id in REDUCTIONS and len(call.args) == 1:
            parsed.append(Step(target, fuzzing.parse(ast.unparse(call.args[0]), types),
                               call.func.id))
        else:
            parsed.append(Step(target, fuzzing.parse(text, types)))
    return RowOp(seed=0, index=0, name=name, inputs=syms,
                 roles=tuple(r for r, _, _ in inputs.values()), attrs=(), steps=tuple(parsed),
                 outputs=tuple(outputs))


# ---- the reference -------------------------------------------------------------------------------

def sample(op: RowOp, rng: np.random.Generator, shape: tuple[int, ...]
           ) -> dict[str, np.ndarray]:
    """Each input's values in its domain (tests/fuzzing.py's sampling), in its role's shape
    (opgen.testing.role_shape, as the generated tests make them)."""
    from opgen.testing import role_shape

    return {s.name: fuzzing.sample_inputs(rng, s, role_shape(shape, r))
            for s, r in zip(op.inputs, op.roles, strict=True)}


def _full(data: np.ndarray, role: str, shape: tuple[int, ...]) -> np.ndarray:
    """An input's values at every element of the op's shape."""
    return np.broadcast_to(data[..., None] if role == "row" else data, shape)


def _reduce(reduce: str, val: Val, shape: tuple[int, ...], ar: Arith) -> Val:
    """``reduce`` over the last axis of ``val``, with the error bound of a kernel that
    accumulates in its math type; broadcast back to ``shape``."""
    row = (*shape[:-1], 1)
    n = shape[-1]
    with np.errstate(all="ignore"):
        if reduce in ("sum", "mean"):
            total = fuzzing.summed(val, row, shape, ar)
            if reduce == "sum":
                out = total
            else:
                v = total.v / n if n else np.full(row, np.nan)
                e = total.e / n + ar.u * np.abs(v) if n else np.full(row, np.inf)
                out = Val(v, e, total.amb | ~np.isfinite(e))
        else:
            fn = np.max if reduce == "max" else np.min
            if n:
                v = fn(val.v, axis=-1, keepdims=True)
                e = np.max(val.e, axis=-1, keepdims=True)  # a max of values each within e_i
                amb = np.any(val.amb, axis=-1, keepdims=True)
            else:
                v = np.full(row, -np.inf if reduce == "max" else np.inf)
                e, amb = np.zeros(row), np.zeros(row, bool)
            out = Val(v, e, amb)
    return Val(*(np.broadcast_to(a, shape) for a in (out.v, out.e, out.amb)))


def evaluate_forward(op: RowOp, inputs: dict[str, np.ndarray], attrs: dict[str, Any],
                     ar: Arith, shape: tuple[int, ...]) -> dict[str, Val]:
    """Every step of the forward at every element of ``shape``, exactly (float64) and with a
    ``ar`` kernel's error bound: no code shared with opgen's emitters."""
    full = {s.name: _full(inputs[s.name], r, shape)
            for s, r in zip(op.inputs, op.roles, strict=True)}
    env = fuzzing._env_for(_AttrsOnly(op.attrs), full, attrs, ar, shape)
    values: dict[str, Val] = {}
    for step in op.steps:
        val = fuzzing.evaluate(step.tree, env, ar, shape)
        assert isinstance(val, Val)
        if step.reduce:
            val = _reduce(step.reduce, val, shape, ar)
        env[step.target] = values[step.target] = val
    return values


@dataclass(frozen=True)
class _AttrsOnly:
    """What fuzzing._env_for reads of an op: its attrs."""

    attrs: tuple[Sym, ...]


def reference_module(op: RowOp, folder: Path) -> ModuleType:
    """The op's generated test module (its numpy reference), rendered into ``folder`` and
    imported without the op's library: its wrapper is a stand-in that no reference calls."""
    from opgen.render import render_op
    from opgen.spec import loads

    spec = loads(op.yaml(), str(folder / op.spec_name))
    folder.mkdir(parents=True, exist_ok=True)
    test_file = folder / f"test_{op.name}.py"
    test_file.write_bytes(render_op(spec).files[test_file.name])
    stand_in = ModuleType(op.name)
    setattr(stand_in, op.name, None)
    saved = sys.modules.get(op.name)
    sys.modules[op.name] = stand_in
    try:
        return fuzzing._import(f"opgen_rowfuzz_test_{op.name}", test_file)
    finally:
        if saved is None:
            sys.modules.pop(op.name, None)
        else:
            sys.modules[op.name] = saved


def per_row(op: RowOp, output: str) -> bool:
    """Whether an output is per-row: a reduction, or a value of per-row values only."""
    step = next(s for s in op.steps if s.target == output)
    if step.reduce:
        return True
    varying = {s.name for s, r in zip(op.inputs, op.roles, strict=True) if r != "row"}
    for s in op.steps:
        if not s.reduce and _reads(s.tree, varying):
            varying.add(s.target)
    return output not in varying


def mismatches(op: RowOp, got: Sequence[np.ndarray], want: dict[str, Val], ar: Arith,
               what: str) -> list[str]:
    """One line per output of ``got`` (in the op's shapes) that differs from the evaluation."""
    problems = []
    for name, out in zip(op.outputs, got, strict=True):
        value = want[name]
        if per_row(op, name):  # [*]: one value per row
            value = Val(*(a[..., 0] for a in (value.v, value.e, value.amb)))
        got_np = np.asarray(out, np.float64)
        if got_np.shape != value.v.shape:
            problems.append(f"{what}: {name} has shape {got_np.shape}, expected "
                            f"{value.v.shape}")
            continue
        bad, tol = fuzzing.compare(got_np, value, ar)
        if bad.any():
            i = tuple(int(k[0]) for k in np.nonzero(bad))
            problems.append(f"{what}: {name}: {int(bad.sum())} of {bad.size} differ; at {i} "
                            f"got {got_np[i]!r}, want {value.v[i]!r} +- {tol[i]:.3g}")
    return problems


# ---- checking a built op -------------------------------------------------------------------------

def check_forward(op: RowOp, wrapper: ModuleType, dtypes: Sequence[str], seed: int = 0,
                  device: str = "cpu") -> list[str]:
    """The forward kernel on ``device`` against :func:`evaluate_forward` at CHECK_SHAPES, at the
    default attrs and at the other values; one line per mismatching output."""
    from opgen import testing as ot

    fn = getattr(wrapper, op.name)
    rng = np.random.default_rng(seed)
    problems = []
    attr_sets = [{}, {a.name: a.other for a in op.attrs if a.type != "str"}]
    for dtype, shape, attrs in itertools.product(dtypes, CHECK_SHAPES, attr_sets):
        inputs = sample(op, rng, shape)
        # the kernel's inputs are the values rounded to the dtype (by Paddle on the host:
        # numpy has no bfloat16): the reference takes those
        rounded = {n: ot.to_numpy(ot.to_paddle(a, dtype, "cpu")).astype(np.float64)
                   for n, a in inputs.items()}
        tensors = [ot.to_paddle(rounded[s.name], dtype, device) for s in op.inputs]
        full_attrs = {a.name: attrs.get(a.name, a.default) for a in op.attrs}
        want = evaluate_forward(op, rounded, full_attrs, Arith(dtype), shape)
        what = f"forward kernel ({dtype}, shape {shape}, attrs {attrs})"
        try:
            got = [ot.to_numpy(t) for t in ot.as_tuple(fn(*tensors, **attrs))]
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{what}: the call raised {type(exc).__name__}: {exc}")
            continue
        problems += mismatches(op, got, want, Arith(dtype), what)
    return problems


def run_generated_tests(tests: ModuleType, dtypes: Sequence[str], device: str = "cpu"
                        ) -> list[str]:
    """Call every test of the op's generated test module (test_<name>.py) on ``device`` in
    ``dtypes``, over its own parametrizations, except the deploy tests (fresh processes) and
    tests that take fixtures; one line per failing call."""
    failures = []
    for name in sorted(n for n in dir(tests) if n.startswith("test_")):
        fn: Callable[..., Any] = getattr(tests, name)
        marks = getattr(fn, "pytestmark", [])
        if any(m.name == "deploy" for m in marks):
            continue
        grid: dict[str, list[Any]] = {}
        for mark in marks:
            if mark.name == "parametrize":
                grid[mark.args[0]] = [v.values[0] if hasattr(v, "values") else v
                                      for v in mark.args[1]]
        grid["device"] = [device] if "device" in grid else []
        if "dtype" in grid:
            grid["dtype"] = [d for d in grid["dtype"] if d in dtypes]
        params = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
        if set(params) - set(grid):
            continue  # a fixture (tmp_path): not called here
        for values in itertools.product(*(grid[p] for p in params)):
            line = fuzzing.call_test(tests, name, dict(zip(params, values, strict=True)))
            if line:
                failures.append(line)
    return failures


@dataclass
class Report:
    ops: list[RowOp] = dataclasses.field(default_factory=list)
    problems: list[tuple[RowOp, str]] = dataclasses.field(default_factory=list)
    builds: int = 0

    def summary(self) -> str:
        bad = {op.name for op, _ in self.problems}
        return (f"{len(self.ops)} rowwise ops, {self.builds} libraries, "
                f"{len(bad)} with problems")

    def text(self) -> str:
        return "\n\n".join(f"{op.name}: {what}\n{op.yaml()}" for op, what in self.problems)


def run(ops: Sequence[RowOp], workdir: Path, *, batch: int = 10, jobs: int = 1,
        generated_tests: Sequence[str] = ("float64",),
        dtypes: Sequence[str] = ("float64", "float32"), device: str = "cpu",
        compile_only: bool = False, log: Callable[[str], None] = print) -> Report:
    """Generate, build (``batch`` ops a library, ``jobs`` libraries at a time; with the CUDA
    sources unless ``device`` is the CPU) and check ``ops`` on ``device``, each library as soon
    as it and those before it are built; with ``compile_only``, build them and check nothing (a
    machine without a GPU proving the CUDA sources of random ops compile, with
    paddlepaddle-gpu)."""
    report = Report(ops=list(ops))
    workdir = workdir.resolve()  # the build runs in a folder of its own
    batches = [list(ops[start:start + batch]) for start in range(0, len(ops), batch)]
    specs_of = [[fuzzing.generate(op, workdir / "ops") for op in members] for members in batches]
    cpu_only = device == "cpu" and not compile_only
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        libraries = [pool.submit(fuzzing.build_library, specs, workdir / f"lib{k}",
                                 cpu_only=cpu_only) for k, specs in enumerate(specs_of)]
        for members, specs, future in zip(batches, specs_of, libraries, strict=True):
            report.builds += 1
            _check_library(report, members, specs, future.result(), generated_tests, dtypes,
                           device, compile_only, log)
    return report


def _check_library(report: Report, members: list[RowOp], specs: list[Any], library: Path,
                   generated_tests: Sequence[str], dtypes: Sequence[str], device: str,
                   compile_only: bool, log: Callable[[str], None]) -> None:
    """The checks of :func:`run` for one built library's ops."""
    if compile_only:
        log(f"{', '.join(op.name for op in members)}: built")
        return
    loaded = fuzzing.load_library(library)
    for op, spec in zip(members, specs, strict=True):
        wrapper, tests = fuzzing.load_op(spec, loaded)
        found = check_forward(op, wrapper, dtypes, device=device) + \
            run_generated_tests(tests, generated_tests, device)
        report.problems += [(op, what) for what in found]
        log(f"{op.name}: {'ok' if not found else f'{len(found)} problems'}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python tests/rowwise_fuzzing.py [--count N] [--seed S] [--only I ...] [--workdir D]
    [--batch B] [--jobs J] [--device gpu] [--compile-only]``: a campaign by hand; prints each
    problem with its op's spec."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, nargs="*", help="these indices of the seed only")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=1, help="libraries built at a time")
    parser.add_argument("--generated-tests", default="float64",
                        help="the dtypes the ops' own generated tests run in, comma-separated")
    parser.add_argument("--dtypes", default="float64,float32",
                        help="the dtypes the forward kernels are checked in, comma-separated")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--compile-only", action="store_true",
                        help="build the CPU and CUDA sources and check nothing")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rowfuzz"))
    indices = args.only if args.only else range(args.count)
    checked, generated = args.dtypes.split(","), args.generated_tests.split(",")
    built = tuple(d for d in ("float32", "float64", "float16", "bfloat16")
                  if d in {"float32", "float64", *checked, *generated})
    result = run([draw_op(args.seed, i, built) for i in indices], work, batch=args.batch,
                 jobs=args.jobs, generated_tests=generated, dtypes=checked, device=args.device,
                 compile_only=args.compile_only)
    print(result.text())
    print(result.summary())
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())

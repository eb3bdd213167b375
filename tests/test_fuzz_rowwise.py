"""Differential fuzzing of the rowwise kind (tests/rowwise_fuzzing.py) under pytest.

Without a compiler: drawn rowwise specs load and render, and their generated numpy reference
agrees with tests/fuzzing.py's evaluator, reductions included. With one (``-m build``): a sample
of OPGEN_ROWFUZZ_COUNT ops (default 10) of OPGEN_ROWFUZZ_SEED (default 0), built to one library,
passes the checks of :func:`rowwise_fuzzing.run`; and mutants of a correct op are caught.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzzing  # noqa: E402
import rowwise_fuzzing as rf  # noqa: E402

from opgen import testing as ot  # noqa: E402

FAST = settings(max_examples=int(os.environ.get("OPGEN_FUZZ_EXAMPLES", "150")) // 3,
                deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large,
                                                      HealthCheck.function_scoped_fixture])


# ---- without a compiler ------------------------------------------------------------------------

@FAST
@given(rf.row_ops(), st.integers(0, 2**32 - 1))
def test_the_generated_reference_matches_the_evaluator(tmp_path, op, seed):
    """opgen's numpy reference of a drawn rowwise op (the generated tests' reference_forward)
    against tests/fuzzing.py's own evaluation of the drawn trees, in float64."""
    note(op.yaml())
    tests = rf.reference_module(op, tmp_path / f"{op.name}_{seed}")
    rng = np.random.default_rng(seed)
    for shape in ((3, 7), (2, 3, 33), (0, 4)):
        inputs = rf.sample(op, rng, shape)
        attrs = {a.name: a.default for a in op.attrs}
        want = rf.evaluate_forward(op, inputs, attrs, fuzzing.Arith("float64"), shape)
        got = ot.as_tuple(tests.reference_forward(*(inputs[s.name] for s in op.inputs)))
        problems = rf.mismatches(op, got, want, fuzzing.Arith("float64"),
                                 f"reference_forward at {shape}")
        assert not problems, "\n".join(problems)


def test_the_draws_cover_every_role_and_reduction():
    """The CI sample below draws what the strategy can draw: every input role, every reduction,
    per-element intermediates, chained reductions and per-row outputs."""
    ops = [rf.draw_op(0, i) for i in range(_count())]
    roles = {r for op in ops for r in op.roles}
    reductions = {s.reduce for op in ops for s in op.steps if s.reduce}
    assert roles == set(rf.ROLES) and reductions == set(rf.REDUCTIONS)
    assert any(not s.reduce for op in ops for s in op.steps[:-1])  # an intermediate
    assert any(sum(1 for s in op.steps if s.reduce) == 2 for op in ops)
    assert any(len(op.outputs) == 2 for op in ops)


def test_a_drawn_op_is_the_same_each_time():
    assert rf.draw_op(3, 5).yaml() == rf.draw_op(3, 5).yaml()
    assert rf.draw_op(3, 5).yaml() != rf.draw_op(3, 6).yaml()


# ---- built -------------------------------------------------------------------------------------

def _count() -> int:
    return int(os.environ.get("OPGEN_ROWFUZZ_COUNT", "10"))


@pytest.mark.build
def test_fuzzed_rowwise_ops_match_numpy(tmp_path):
    seed = int(os.environ.get("OPGEN_ROWFUZZ_SEED", "0"))
    ops = [rf.draw_op(seed, i) for i in range(_count())]
    report = rf.run(ops, tmp_path, batch=10, log=lambda line: None)
    assert not report.problems, report.text() + "\n" + report.summary()
    assert report.builds == (len(ops) + 9) // 10


#: A softmax with a per-column scale and a saved row max, and the edits that break it.
_SOFTMAX = rf.handwritten(
    "rowmut", {"x": ("element", -3.0, 3.0), "w": ("column", 0.5, 2.0)},
    [("m", "max(x)"), ("e", "exp(x - m)"), ("s", "sum(e)"), ("out", "w * e / s")], ["out", "m"])
_MUTANTS = {
    # generated header text -> the edit; the first occurrence is edited
    "max for min": ("row.max(", "row.min("),
    "a sum's terms scaled": ("MT e) { return e; }, e);", "MT e) { return e * MT(0.999); }, e);"),
    "the saved max moved": ("row.put_rows(m);", "row.put_rows(m + MT(1));"),
    "the column gradient unscaled": ("return grad_out * e * (MT(1) / s);",
                                     "return grad_out * e;"),
}


@pytest.mark.build
def test_the_checks_catch_broken_rowwise_kernels(tmp_path):
    """Edits of a correct generated rowwise op: each must be reported, by the evaluator's check
    of the forward kernel or by the op's generated tests; the unedited op passes."""
    names = ["rowmut_ok", *(f"rowmut_{i}" for i in range(len(_MUTANTS)))]
    ops = [dataclasses.replace(_SOFTMAX, name=name) for name in names]
    specs = [fuzzing.generate(op, tmp_path / "ops") for op in ops]
    for spec, (before, after) in zip(specs[1:], _MUTANTS.values(), strict=True):
        header = Path(spec.path).parent / "csrc" / f"{spec.name}.h"
        text = header.read_text()
        assert before in text, (before, text)
        header.write_text(text.replace(before, after, 1))
    library = fuzzing.load_library(
        fuzzing.build_library(specs, tmp_path / "lib", cpu_only=True))
    found = {}
    for op, spec in zip(ops, specs, strict=True):
        wrapper, tests = fuzzing.load_op(spec, library)
        found[op.name] = rf.check_forward(op, wrapper, ("float64", "float32")) + \
            rf.run_generated_tests(tests, ("float64",))
    assert found["rowmut_ok"] == []
    caught = {what for (what, _), name in zip(_MUTANTS.items(), names[1:], strict=True)
              if found[name]}
    assert caught == set(_MUTANTS), {n: f[:2] for n, f in found.items()}


@dataclasses.dataclass(frozen=True)
class _Written:
    """A spec as its YAML, for tests/fuzzing.py's generate and build helpers."""

    name: str
    text: str

    @property
    def spec_name(self) -> str:
        return f"{self.name}.yaml"

    def yaml(self) -> str:
        return self.text


#: What the rowwise fuzzing found, each a spec whose generated tests failed on a correct op.
_FOUND = {
    # ot.row_max(-alpha) of a Python float was float32 in the float64 reference
    "found_attr_max": """\
name: found_attr_max
kind: rowwise
inputs: {x: element}
outputs: [out, u]
attrs:
  alpha: {type: float, default: 2.35}
dtypes: [float32, float64]
forward:
  u: max(-alpha)
  out: x * alpha + u
backward: auto
""",
    # a small derivative of a loss of large terms: central differences know it to ~1e-12 of
    # them, which the fixed atol of 1e-8 did not allow
    "found_fd_scale": """\
name: found_fd_scale
kind: rowwise
inputs: {x: element, e: row, q: row}
outputs: [res]
attrs:
  gamma: {type: int, default: -3}
dtypes: [float32, float64]
domain:
  x: [-3.0, 3.0]
  e: [-10.0, 10.0]
  q: [-10.0, 10.0]
forward:
  bias: sum(min(x * gamma, e))
  res: -tanh(q) - bias - x
backward: auto
""",
    # the row's min changes hands within the finite-difference step along one of the random
    # directions: the difference crossed a kink (-21.2 against 0.79)
    "found_kink": """\
name: found_kink
kind: rowwise
inputs: {p: element, b: element, first: element}
outputs: [z]
attrs:
  q: {type: int64, default: 1}
dtypes: [float32, float64]
domain:
  p: [-2.0, 6.0]
  b: [0.0, 1.0]
  first: [-10.0, 10.0]
forward:
  v: b
  i: min((where(v == 0., q, first) / pow(abs(b) + 0.25, 0.25) + 14.5) ** 0.5)
  u: min(pow(-2., 3) + p)
  z: u + u - i - p
backward: auto
""",
    # a saved row min of pow(...): the reference compared numpy's pow with the kernel's min,
    # one ulp apart, so no element tied and its gradient was lost
    "found_tie": """\
name: found_tie
kind: rowwise
inputs: {p: element}
outputs: [path, hi]
dtypes: [float32, float64]
domain:
  p: [0.5, 4.0]
forward:
  hi: min(pow(p + 10.25, 0.25))
  path: max(hi, p) / -2. - p
backward: auto
""",
}


@pytest.mark.build
def test_what_the_rowwise_fuzzing_found_stays_fixed(tmp_path):
    ops = [_Written(name, text) for name, text in _FOUND.items()]
    specs = [fuzzing.generate(op, tmp_path / "ops") for op in ops]
    library = fuzzing.load_library(
        fuzzing.build_library(specs, tmp_path / "lib", cpu_only=True))
    failures = {}
    for spec in specs:
        _, tests = fuzzing.load_op(spec, library)
        failures[spec.name] = rf.run_generated_tests(tests, ("float64", "float32"))
    assert failures == {name: [] for name in _FOUND}

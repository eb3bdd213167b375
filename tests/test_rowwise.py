"""The rowwise kind without a compiler: its spec (roles, reductions over the row, per-row
values, output roles), the functors opgen/kinds/rowwise.py writes from it, and the numpy
helpers its generated tests use."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROWWISE_EXAMPLES, run_opgen

from opgen import testing as ot
from opgen.errors import SpecError
from opgen.expr import ExprError, compile_expr
from opgen.kinds.rowwise import build_context
from opgen.spec import load, loads

RMS_NORM = """\
name: rms_norm
kind: rowwise
inputs: {x: element, weight: column}
outputs: [out]
attrs:
  eps: {type: float, default: 1.0e-6}
forward:
  rstd: rsqrt(mean(x * x) + eps)
  out: x * rstd * weight
backward:
  dxw: grad_out * weight
  x: rstd * (dxw - x * rstd * rstd * mean(dxw * x))
  weight: grad_out * x * rstd
"""


def spec_of(text: str = RMS_NORM, **replace: str):
    for old, new in replace.items():
        text = text.replace(old.replace("_", " "), new)
    return loads(text, "rms_norm.yaml", check_builtins=False)


# -- expressions --------------------------------------------------------------------------------

def test_a_reduction_is_one_value_per_row_and_leaves_a_placeholder_for_its_lambda():
    e = compile_expr("rsqrt(mean(x * x) + eps)", {"x": "num", "eps": "num"},
                     varying=frozenset({"x"}))
    assert not e.varies
    assert e.cpp == "opgen::rsqrt(@0@ + eps)"
    assert [(r.op, r.inner.cpp, r.inner.varies) for r in e.reductions] == [("mean", "x * x", True)]
    assert e.numpy == "(1.0 / np.sqrt(ot.row_mean(x * x, shape) + eps))"


@pytest.mark.parametrize("source, varies", [
    ("x * rstd", True), ("rstd * 2", False), ("max(x, 0)", True), ("max(x)", False),
    ("where(x > 0, 1, 0)", True), ("sum(x) - x", True), ("min(x) + max(x)", False),
])
def test_values_vary_along_the_row_where_they_read_a_per_element_value(source, varies):
    e = compile_expr(source, {"x": "num", "rstd": "num"}, varying=frozenset({"x"}))
    assert e.varies is varies


@pytest.mark.parametrize("source, cpp", [
    ("x / s", "x * (MT(1) / s)"),                  # per-element over per-row: the reciprocal
    ("exp(x) / sum(exp(x))", "opgen::exp<T>(x) * (MT(1) / @0@)"),
    ("x / (s + 1)", "x * (MT(1) / (s + MT(1)))"),
    ("(x + 1) / 3", "(x + MT(1)) * (MT(1) / MT(3))"),
    ("s / x", "s / x"), ("x / x", "x / x"), ("s / sum(x)", "s / @0@"),  # the rest divide
])
def test_a_per_element_value_over_a_per_row_one_multiplies_by_its_reciprocal(source, cpp):
    e = compile_expr(source, {"x": "num", "s": "num"}, varying=frozenset({"x"}))
    assert e.cpp == cpp
    assert "MT(1) /" not in e.numpy  # the reference divides
    assert compile_expr(source.replace("sum(x)", "x").replace("sum(exp(x))", "x"),
                        {"x": "num", "s": "num"}).cpp.count("MT(1) /") == 0  # elementwise


@pytest.mark.parametrize("source, message", [
    ("sum(x - mean(x))", "mean() inside sum(): a reduction over the row cannot be nested"),
    ("mean(x, x)", "mean() takes 1 argument, got 2"),
    ("sum(x, axis=0)", "sum() takes no keyword arguments, got axis="),  # was "1 argument, got 1"
    ("sum(x > 0)", "the argument of sum() needs a number, got a condition"),
    # max() of none or three is neither the row's max nor max(a, b): both forms are offered
    ("max()", "max() takes 1 or 2 arguments, got 0"),
    ("min(x, x, x)", "min() takes 1 or 2 arguments, got 3"),
])
def test_reductions_are_checked(source, message):
    with pytest.raises(ExprError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_expr(source, {"x": "num"}, varying=frozenset({"x"}))


def test_an_elementwise_expression_has_no_reductions():
    with pytest.raises(ExprError, match="are for kind: rowwise"):
        compile_expr("sum(x)", {"x": "num"})
    with pytest.raises(ExprError, match=r"max\(\) takes 2 arguments, got 1"):
        compile_expr("max(x)", {"x": "num"})


# -- the spec -----------------------------------------------------------------------------------

def test_roles_and_output_roles():
    spec = spec_of(RMS_NORM.replace("outputs: [out]", "outputs: [out, rstd]").replace(
        "  rstd: rsqrt", "  rstd: rsqrt"))
    assert spec.input_roles == {"x": "element", "weight": "column"}
    assert spec.output_roles == {"out": "element", "rstd": "row"}


@pytest.mark.parametrize(("old", "new", "message"), [
    ("inputs: {x: element, weight: column}", "inputs: x",
     "inputs: expected a list of input names or a mapping of each to its role"),
    ("outputs: [out]", "outputs: out",
     "outputs: expected a list of output names or a mapping of each to its role"),
])
def test_a_section_of_names_written_as_one_name_is_offered_both_forms(old, new, message):
    with pytest.raises(SpecError, match=message):
        spec_of(RMS_NORM.replace(old, new))


def test_a_list_of_inputs_makes_them_all_per_element():
    spec = loads("name: sm\nkind: rowwise\ninputs: [x, y]\noutputs: [out]\nforward:\n"
                 "  out: exp(x - max(x)) * y\n", "sm.yaml", check_builtins=False)
    assert spec.input_roles == {"x": "element", "y": "element"}


def test_forward_reads_an_output_computed_above_it():
    spec = spec_of(RMS_NORM.replace("outputs: [out]", "outputs: [h, out]").replace(
        "forward:\n  rstd: rsqrt(mean(x * x) + eps)\n  out: x * rstd * weight",
        "forward:\n  h: x * 2\n  rstd: rsqrt(mean(h * h) + eps)\n  out: h * rstd * weight"
    ).replace("backward:\n  dxw: grad_out * weight\n  x: rstd * (dxw - x * rstd * rstd * "
              "mean(dxw * x))\n  weight: grad_out * x * rstd\n", ""))
    assert spec.output_roles == {"h": "element", "out": "element"}


def test_an_output_read_by_a_later_output_keeps_its_role():
    # softmax that also returns its exponentials: out reads e, a per-element output above it
    spec = loads("name: sm\nkind: rowwise\ninputs: [x]\noutputs: [e, out]\nforward:\n"
                 "  e: exp(x - max(x))\n  out: e / sum(e)\n", "sm.yaml", check_builtins=False)
    assert spec.output_roles == {"e": "element", "out": "element"}
    assert spec.forward["out"].varies
    body = build_context(spec).forward.body
    assert not any("row.max" in line and "return e" in line for line in body)
    assert any(line.startswith("const MT sum_e = row.sum(") for line in body)


def test_a_per_element_value_declared_per_row_is_an_error_at_its_line():
    text = RMS_NORM.replace("outputs: [out]", "outputs: {out: row}")
    with pytest.raises(SpecError) as info:
        loads(text, "rms_norm.yaml", check_builtins=False)
    assert info.value.line == 9
    assert "forward.out: a per-element value (it changes along the row), but outputs " \
           "declares 'out' per-row [*]; reduce it over the row" in str(info.value)



@pytest.mark.parametrize(("old", "new", "line"), [
    ("eps", "row", 6),  # an attr (its C++ member shadowed the functor's parameter)
    ("rstd", "row", 8),  # a per-row intermediate
    ("dxw", "row", 11),  # an intermediate of the backward
])
def test_the_functors_row_is_a_reserved_name(old, new, line):
    with pytest.raises(SpecError) as info:
        loads(RMS_NORM.replace(old, new), "rms_norm.yaml", check_builtins=False)
    assert info.value.line == line, str(info.value)
    assert "'row' is reserved in a rowwise op" in str(info.value)


# -- the functor ---------------------------------------------------------------------------------

def test_rms_norm_functor_is_straight_line_code_with_named_per_row_values():
    context = build_context(spec_of())
    assert context.forward.body == [
        "const MT mean_x = row.mean([&](MT x, MT /*weight*/) { return x * x; });",
        "const MT rstd = opgen::rsqrt(mean_x + eps);",
        "row.put([&](MT x, MT weight) { return x * rstd * weight; });",
    ]
    backward = context.backward
    assert backward is not None
    assert [t.name for t in backward.tensors] == ["x", "weight", "grad_out"]
    assert backward.targets == [("grad_x", "element"), ("grad_weight", "column")]
    assert "row.put_column_sums([&](MT x, MT /*weight*/, MT grad_out) { " \
           "return grad_out * x * rstd; });" in backward.body
    # the backward's reduction is hoisted out of the per-element lambda that reads it, and made
    # with rstd's, which it does not read, in one call
    put = backward.body.index("row.put([&](MT x, MT weight, MT grad_out) {")
    assert backward.body.index("const MT mean_dxw_x = means[1];") < put
    assert backward.body[0].startswith("const opgen::Array<MT, 2> means = row.mean(")
    assert backward.reduce_width == 2


SOFTMAX = """\
name: sm
kind: rowwise
inputs: [x]
outputs: [out]
forward:
  m: max(x)
  e: exp(x - m)
  out: e / sum(e)
"""


def forward_of(forward: str):
    """The forward functor of a one-input rowwise op with these forward lines."""
    text = SOFTMAX[:SOFTMAX.index("forward:")] + "forward:\n" + forward
    return build_context(loads(text, "sm.yaml", check_builtins=False)).forward


def test_a_costly_value_that_two_lambdas_read_is_kept_and_passed_to_them():
    body = build_context(loads(SOFTMAX, "sm.yaml", check_builtins=False)).forward.body
    assert body == [
        "const MT m = row.max([&](MT x) { return x; });",
        "const auto e = row.keep([&](MT x) { return opgen::exp<T>(x - m); });",
        "const MT sum_e = row.sum([&](MT /*x*/, MT e) { return e; }, e);",
        "row.put([&](MT /*x*/, MT e) { return e * (MT(1) / sum_e); }, e);",
    ]


@pytest.mark.parametrize("forward", [
    "  m: max(x)\n  out: exp(x - m)\n",              # costly, but one lambda reads it
    "  m: max(x)\n  e: x - m\n  out: e / sum(e)\n",  # two read it, but it is cheap
])
def test_a_value_is_computed_in_each_lambda_unless_it_is_costly_and_read_twice(forward):
    body = forward_of(forward).body
    assert not any("row.keep" in line for line in body), body


def test_independent_reductions_of_one_kind_are_made_in_one_call():
    forward = forward_of("  a: mean(x)\n  b: mean(x * x)\n  out: (x - a) * b\n")
    assert forward.reduce_width == 2
    assert forward.body == [
        "const opgen::Array<MT, 2> means = row.mean([&](MT x) -> opgen::Array<MT, 2> {",
        "  return {x, x * x};",
        "});",
        "const MT a = means[0];",
        "const MT b = means[1];",
        "row.put([&](MT x) { return (x - a) * b; });",
    ]


@pytest.mark.parametrize(("op", "values"), [("sum", "sums"), ("max", "maxima"),
                                             ("min", "minima")])
def test_each_kind_of_reduction_is_grouped_under_its_plural(op, values):
    body = forward_of(f"  a: {op}(x)\n  b: {op}(-x)\n  out: x * a * b\n").body
    assert body[0].startswith(f"const opgen::Array<MT, 2> {values} = row.{op}("), body
    assert body[-3:-1] == [f"const MT a = {values}[0];", f"const MT b = {values}[1];"]


@pytest.mark.parametrize("forward", [
    "  a: mean(x)\n  b: mean((x - a) ** 2)\n  out: x * b\n",   # the second reads the first
    "  a: mean(x)\n  d: x - a\n  b: mean(d * d)\n  out: x * b\n",  # through a per-element value
    "  a: mean(x)\n  b: sum(x * x)\n  out: x * a * b\n",       # two kinds
    "  a: max(x)\n  c: a * 2\n  b: max(x * c)\n  out: x * b\n",  # through a per-row value
])
def test_reductions_that_depend_or_differ_are_made_one_by_one(forward):
    functor = forward_of(forward)
    assert not any("opgen::Array<MT, 2>" in line for line in functor.body), functor.body
    assert functor.reduce_width == 1


def test_a_per_row_value_between_waits_for_a_later_reduction_that_does_not_read_it():
    # rms_norm's backward: rstd from the first mean; the second mean does not read it
    body = forward_of("  a: mean(x * x)\n  r: rsqrt(a + 1)\n  b: mean(x * 2)\n"
                      "  out: x * r * b\n").body
    assert body == [
        "const opgen::Array<MT, 2> means = row.mean([&](MT x) -> opgen::Array<MT, 2> {",
        "  return {x * x, x * MT(2)};",
        "});",
        "const MT a = means[0];",
        "const MT b = means[1];",
        "const MT r = opgen::rsqrt(a + MT(1));",
        "row.put([&](MT x) { return x * r * b; });",
    ]


def test_a_kept_value_that_reads_a_pending_reduction_comes_after_it():
    # e reads m, and sum(e) and out both take e: m is made before e is kept, e once
    body = forward_of("  m: max(x)\n  e: exp(x - m)\n  s: sum(e)\n  out: e / s\n").body
    keeps = [k for k, line in enumerate(body) if "row.keep" in line]
    assert len(keeps) == 1, body
    assert body.index("const MT m = row.max([&](MT x) { return x; });") < keeps[0]


def test_every_line_of_the_examples_sources_fits_100_columns():
    for name, folder in ROWWISE_EXAMPLES.items():
        for suffix in (".h", ".cc", ".cu"):
            for line in (folder / "csrc" / f"{name}{suffix}").read_text().splitlines():
                assert len(line) <= 100, f"{name}{suffix}: {line}"


@pytest.mark.parametrize(("name", "kept", "call"), [
    ("softmax", '"out", paddle::Grad("out")', "{paddle::Tensor(), out, grad_out}"),
    ("add_rms_norm", '"weight", "h", paddle::Grad("out"), paddle::Grad("h")',
     "{paddle::Tensor(), paddle::Tensor(), weight, h, grad_out, grad_h}"),
    ("layer_norm", '"x", "weight", "mean", "rstd", paddle::Grad("out")',
     "{x, weight, paddle::Tensor(), mean, rstd, grad_out}"),
])
def test_the_gradient_op_keeps_only_what_its_kernel_reads(name, kept, call):
    """Paddle holds what a gradient op lists until the backward runs: softmax's x, add_rms_norm's
    x and residual and layer_norm's bias are not read there, so not kept; the gradients' shapes
    and dtypes come from the op's own inference, as Paddle's default needs the inputs."""
    cc = " ".join((ROWWISE_EXAMPLES[name] / "csrc" / f"{name}.cc").read_text().split())
    grad_op = cc[cc.index("PD_BUILD_GRAD_OP"):]
    assert f".Inputs({{{kept}}})" in grad_op
    assert "GradInferShape))" in grad_op and "GradInferDtype));" in grad_op
    assert call in cc
    # rms_norm's backward reads every input: its gradient op is as before, Paddle's inference
    assert build_context(load(ROWWISE_EXAMPLES["rms_norm"] / "rms_norm.yaml")).grad_infer is None


@pytest.mark.parametrize("name", sorted(ROWWISE_EXAMPLES))
def test_the_examples_are_generated_with_no_drift(name):
    folder = ROWWISE_EXAMPLES[name]
    result = run_opgen("generate", "--check", str(folder / f"{name}.yaml"))
    assert result.returncode == 0, result.stderr


def test_the_examples_load():
    for name, folder in ROWWISE_EXAMPLES.items():
        spec = load(folder / f"{name}.yaml")
        assert spec.model.kind == "rowwise" and spec.backward is not None


# -- the references' helpers -------------------------------------------------------------------

def test_row_reductions_follow_the_runtime_on_empty_rows_and_nan():
    shape = (2, 0)
    empty = np.zeros(shape)
    assert ot.row_sum(empty, shape).tolist() == [[0.0], [0.0]]
    assert np.isnan(ot.row_mean(empty, shape)).all()
    assert ot.row_max(empty, shape).tolist() == [[-np.inf], [-np.inf]]
    assert ot.row_min(empty, shape).tolist() == [[np.inf], [np.inf]]
    with_nan = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]])
    assert np.isnan(ot.row_max(with_nan, (2, 3))[0, 0])
    assert ot.row_max(with_nan, (2, 3))[1, 0] == 3.0


@pytest.mark.parametrize("reduce", [ot.row_sum, ot.row_mean, ot.row_max, ot.row_min])
def test_row_reductions_of_a_python_number_stay_float64(reduce):
    """A reduction of an attr-only expression (``max(-alpha)``) gets a Python float: the float64
    reference keeps it exact (the rowwise fuzzer found it rounded to float32: -2.35 became
    -2.3499999046), and only a float32 array stays float32 (the reference's float32 runs)."""
    got = reduce(-2.35, (2, 4))
    assert got.dtype == np.float64 and got.shape == (2, 1)
    assert np.all(got == (-2.35 * 4 if reduce is ot.row_sum else -2.35))
    assert reduce(np.float32(-2.35), (2, 4)).dtype == np.float32
    assert reduce(np.full((2, 4), -2.35, np.float32), (2, 4)).dtype == np.float32


def test_assert_close_takes_the_dtypes_infinity_beyond_its_largest_value():
    """A float16 result beyond 65504 is +-inf in the op (the rowwise fuzzer's row sums of 32768
    elements); the float64 reference says the finite value. Within the range, or of the other
    sign, an infinity still fails."""
    ot.assert_close(np.array([np.inf, -np.inf]), np.array([117481.9, -184021.2]), "float16", "o")
    ot.assert_close(np.array([np.inf]), np.array([65480.0]), "float16", "o", np.array([10.0]))
    for got, want in ((np.inf, 60000.0), (-np.inf, 117481.9), (np.inf, 1e30)):
        dtype = "float32" if want == 1e30 else "float16"
        with pytest.raises(AssertionError, match="1 of 1 elements differ"):
            ot.assert_close(np.array([got]), np.array([want]), dtype, "o")


def test_from_rows_sums_per_column_gradients_over_rows():
    grad = np.arange(6.0).reshape(2, 3)
    assert ot.from_rows(grad, "column", (2, 3)).tolist() == [3.0, 5.0, 7.0]
    assert ot.from_rows(np.ones((2, 1)), "row", (2, 3)).tolist() == [1.0, 1.0]
    assert ot.from_rows(grad, "row", (2, 3), summed=True).tolist() == [3.0, 12.0]
    assert ot.from_rows(np.zeros((0, 3)), "column", (0, 3)).tolist() == [0.0, 0.0, 0.0]


# -- backward: auto -------------------------------------------------------------------------------

def test_backward_auto_sums_per_row_gradients_over_the_row():
    spec = spec_of(RMS_NORM.split("backward:")[0] + "backward: auto\n")
    assert spec.backward_source == {
        "rstd": "rsqrt(mean(x * x) + eps)",
        "row_length": "sum(1)",
        "mean_rstd": "mean(x * x)",
        "grad_rstd": "sum(grad_out * x * weight)",
        "grad_mean_rstd": "-0.5 * grad_rstd * rsqrt(mean_rstd + eps) / (mean_rstd + eps)",
        "x": "grad_out * rstd * weight + grad_mean_rstd * (x + x) / row_length",
        "weight": "grad_out * x * rstd",
    }
    # the two reductions of x * x are one in the functor
    body = build_context(spec).backward.body
    assert sum("row.mean(" in line for line in body) == 1


@pytest.mark.parametrize("where", ["intermediate", "output", "attr", "input"])
def test_backward_auto_names_the_row_length_apart_from_the_specs_row_length(where):
    """The derived mean's row length was a local `row_length` whatever the spec named so: an
    intermediate or attr of that name was silently replaced by the row length in the backward
    (an output's lambda parameter shadowed it the other way), and an input so named failed."""
    text = RMS_NORM.split("backward:")[0] + "backward: auto\n"
    if where in ("intermediate", "output"):
        text = text.replace("  rstd: rsqrt(mean(x * x) + eps)",
                            "  row_length: mean(x * x)\n  rstd: rsqrt(row_length + eps)")
    if where == "output":
        text = text.replace("outputs: [out]", "outputs: [out, row_length]")
    if where == "attr":
        text = text.replace("  eps: {type: float, default: 1.0e-6}",
                            "  eps: {type: float, default: 1.0e-6}\n"
                            "  row_length: {type: float, default: 2.0}")
        text = text.replace("  out: x * rstd * weight", "  out: x * rstd * weight * row_length")
    if where == "input":
        text = text.replace("{x: element, weight: column}",
                            "{row_length: element, weight: column}")
        text = text.replace("mean(x * x)", "mean(row_length * row_length)")
        text = text.replace("out: x * rstd", "out: row_length * rstd")
    backward = spec_of(text).backward_source
    assert backward["row_length1"] == "sum(1)"
    assert backward.get("row_length") != "sum(1)"
    gradient = backward["row_length" if where == "input" else "x"]
    assert gradient.endswith("/ row_length1"), gradient


def test_a_functor_whose_lambdas_would_recompute_a_long_chain_is_a_spec_error():
    """Each reduction's lambda computes the per-element values it reads: 1500 intermediates,
    each reducing the one before, wrote a 351 MB header in 6 minutes."""
    chain = "".join(f"  a{i}: a{i - 1} * a{i - 1} + max(a{i - 1})\n" for i in range(1, 130))
    text = ("name: chain\nkind: rowwise\ninputs: [x]\noutputs: [out]\nforward:\n  a0: x\n"
            f"{chain}  out: a129\n")
    spec = loads(text, "chain.yaml", check_builtins=False)
    with pytest.raises(SpecError) as info:
        build_context(spec)
    assert info.value.line == 5
    assert info.value.message.startswith("forward: its functor's lambdas would compute more "
                                         "than 5,000 per-element values")
    short = text.replace("a129", "a40").split("  a41:")[0] + "  out: a40\n"
    assert build_context(loads(short, "chain.yaml", check_builtins=False)).forward.body


@pytest.mark.parametrize(("key", "what"), [("out", "an output"), ("eps", "an attr")])
def test_a_backward_intermediate_named_like_an_output_or_attr_says_what_the_name_is(key, what):
    text = RMS_NORM.replace("  dxw: grad_out * weight", f"  {key}: grad_out * weight")
    text = text.replace("(dxw - x", f"({key} - x").replace("mean(dxw * x)", f"mean({key} * x)")
    with pytest.raises(SpecError, match=f"backward: '{key}' is {what}, not an input "
                                        r"\(inputs: x, weight\); an intermediate takes a name "
                                        "of its own"):
        spec_of(text)


def test_backward_auto_flows_through_an_output_that_later_expressions_read():
    text = (ROWWISE_EXAMPLES["add_rms_norm"] / "add_rms_norm.yaml").read_text()
    spec = loads(text.split("\nbackward:")[0] + "\nbackward: auto\n", "add_rms_norm.yaml",
                 check_builtins=False)
    assert spec.backward_source["grad_h_total"].startswith("grad_h + grad_out * rstd * weight")
    assert spec.backward_source["x"] == spec.backward_source["residual"] == "grad_h_total"


def test_backward_auto_of_max_gives_the_gradient_to_the_maxima():
    spec = loads("name: top\nkind: rowwise\ninputs: [x]\noutputs: [out]\nforward:\n"
                 "  out: max(x) * 2\nbackward: auto\n", "top.yaml", check_builtins=False)
    assert spec.output_roles == {"out": "row"}
    assert spec.backward_source["grad_max_out"] == "2 * grad_out"
    assert spec.backward_source["x"] == "where(x == max_out, grad_max_out, 0)"

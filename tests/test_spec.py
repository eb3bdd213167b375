"""Valid specs: defaults, attr types, several inputs and outputs, lines, and the name rules."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from opgen import spec as spec_module
from opgen.errors import SpecError
from opgen.kinds.elementwise import build_context
from opgen.names import derived_name_problem, free_op_name, identifier_problem, paddle_builtin_ops
from opgen.probe import paddle_version
from opgen.render import render_op
from opgen.spec import DTYPES, AttrSpec, OpSpec, Spec, load, loads

RELU6 = """\
name: relu6                 # snake_case identifier: Python function and module name
op_name: custom_relu6       # registered Paddle op; default "custom_<name>"
kind: elementwise
summary: ReLU6, min(max(x, 0), threshold)
inputs: [x]
outputs: [out]
attrs:
  threshold: {type: float, default: 6.0}   # types: bool, int, int64, float, str
dtypes: [float32, float64, float16, bfloat16]
forward:
  out: min(max(x, 0), threshold)
backward:
  x: where((x > 0) & (x < threshold), grad_out, 0)
"""

MINIMAL = """\
name: twice
kind: elementwise
inputs: [x]
outputs: [out]
forward:
  out: 2 * x
"""


def spec_of(text: str, **kwargs: bool) -> Spec:
    return loads(textwrap.dedent(text), "op.yaml", **kwargs)


def test_relu6_example() -> None:
    spec = spec_of(RELU6)
    assert (spec.name, spec.op_name) == ("relu6", "custom_relu6")
    assert spec.model.attrs == {"threshold": AttrSpec(type="float", default=6.0)}
    assert spec.model.dtypes == ["float32", "float64", "float16", "bfloat16"]
    assert spec.forward["out"].cpp == "opgen::min_uniform(opgen::max_uniform(x, MT(0)), threshold)"
    assert spec.backward is not None
    assert spec.backward["x"].names == {"x", "threshold", "grad_out"}
    assert spec.path == Path("op.yaml")


def test_defaults() -> None:
    spec = spec_of(MINIMAL)
    model = spec.model
    assert spec.op_name == "custom_twice"
    assert model.op_name is None
    assert model.dtypes == list(DTYPES) == ["float32", "float64", "float16", "bfloat16"]
    assert (model.version, model.summary, model.attrs, model.domain) == (1, "", {}, {})
    assert model.backward is None and spec.backward is None
    assert model.baseline is None


def test_load_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text(MINIMAL)
    spec = load(path)
    assert spec.path == path
    assert spec.name == "twice"


def test_load_of_a_missing_file() -> None:
    with pytest.raises(SpecError) as info:
        load("no/such/spec.yaml")
    assert str(info.value) == "no/such/spec.yaml: no such spec file"


def test_a_spec_named_from_its_op_folders_parent_is_pointed_at(tmp_path) -> None:
    (tmp_path / "twice").mkdir()
    (tmp_path / "twice" / "twice.yaml").write_text("name: twice\n")  # where `opgen new` puts it
    with pytest.raises(SpecError) as info:
        load(tmp_path / "twice.yaml")
    assert str(info.value) == (f"{tmp_path / 'twice.yaml'}: no such spec file (did you mean "
                               f"{tmp_path / 'twice' / 'twice.yaml'}?)")


def test_load_of_a_pipe_does_not_wait_for_a_writer(tmp_path) -> None:
    pipe = tmp_path / "op.yaml"
    os.mkfifo(pipe)
    with pytest.raises(SpecError) as info:
        load(pipe)  # opening it would block until something wrote to it
    assert str(info.value) == f"{pipe}: a pipe or socket, not a spec file"


def test_load_of_a_link_to_nothing(tmp_path) -> None:
    link = tmp_path / "op.yaml"
    link.symlink_to(tmp_path / "moved" / "op.yaml")
    with pytest.raises(SpecError) as info:
        load(link)
    assert str(info.value) == f"{link}: a link to {tmp_path / 'moved' / 'op.yaml'}, which does " \
        "not exist"


@pytest.mark.parametrize(("written", "value"), [("6", 6.0), ("-2", -2.0), ("0", 0.0)])
def test_int_default_of_a_float_attr_becomes_a_float(written: str, value: float) -> None:
    spec = spec_of(RELU6.replace("default: 6.0", f"default: {written}"))
    default = spec.model.attrs["threshold"].default
    assert isinstance(default, float) and default == value


@pytest.mark.parametrize(("written", "value"), [("1e-3", 1e-3), ("1.5E4", 1.5e4),
                                                ("-2e+2", -200.0), ("1.0e5", 1e5)])
def test_exponents_without_a_dot_are_floats(written: str, value: float) -> None:
    """YAML 1.1 would read these as strings; the spec reads them as YAML 1.2 does."""
    spec = spec_of(RELU6.replace("default: 6.0", f"default: {written}") +
                   f"domain:\n  x: [{written}, 1e9]\n")
    assert spec.model.attrs["threshold"].default == value
    assert spec.model.domain["x"] == (value, 1e9)


def test_attr_types() -> None:
    spec = spec_of("""\
        name: scaled
        kind: elementwise
        inputs: [x]
        outputs: [out]
        attrs:
          enabled: {type: bool, default: true}
          times: {type: int, default: -3}
          offset: {type: int64, default: 9000000000}
          scale: {type: float, default: 2}
          mode: {type: str, default: fast}
        forward:
          out: where(enabled, x * times + offset * scale, x)
        """)
    attrs = spec.model.attrs
    assert [(n, a.type, a.default) for n, a in attrs.items()] == [
        ("enabled", "bool", True), ("times", "int", -3), ("offset", "int64", 9000000000),
        ("scale", "float", 2.0), ("mode", "str", "fast")]
    assert type(attrs["times"].default) is int and type(attrs["enabled"].default) is bool
    assert spec.forward["out"].names == {"enabled", "x", "times", "offset", "scale"}


@pytest.mark.parametrize(("attr", "default"), [
    ("{type: int, default: 2147483647}", 2147483647),
    ("{type: int, default: -2147483648}", -2147483648),
    ("{type: int64, default: 9223372036854775807}", 9223372036854775807),
    ("{type: float, default: 3.0e+38}", 3.0e38),
    ("{type: str, default: ''}", ""),
    ("{type: bool, default: false}", False),
])
def test_attr_defaults_at_their_limits(attr: str, default: object) -> None:
    spec = spec_of(MINIMAL + f"attrs:\n  a: {attr}\n")
    assert spec.model.attrs["a"].default == default


def test_several_inputs_and_outputs() -> None:
    spec = spec_of("""\
        name: split_sign
        kind: elementwise
        inputs: [a, b]
        outputs: [pos, neg]
        dtypes: [float32, float64]
        domain:
          b: [0.5, 2]
        forward:
          pos: max(a * b, 0)
          neg: min(a * b, 0)
        backward:
          a: grad_pos * where(pos > 0, b, 0) + grad_neg * where(neg < 0, b, 0)
          b: grad_pos * where(pos > 0, a, 0) + grad_neg * where(neg < 0, a, 0)
        """)
    assert list(spec.forward) == ["pos", "neg"]
    assert spec.backward is not None and list(spec.backward) == ["a", "b"]
    assert spec.backward["a"].names == {"grad_pos", "pos", "b", "grad_neg", "neg"}
    assert spec.model.dtypes == ["float32", "float64"]
    assert spec.model.domain == {"b": (0.5, 2.0)}
    assert spec.line("forward", "neg") == 10
    assert spec.line("backward", "b") == 13
    assert spec.line("domain", "b") == 7


def test_sections_may_list_targets_in_any_order() -> None:
    spec = spec_of("""\
        name: pair
        kind: elementwise
        inputs: [a, b]
        outputs: [s, d]
        forward:
          d: a - b
          s: a + b
        """)
    assert list(spec.forward) == ["d", "s"]  # computed in the order written
    params = build_context(spec).forward.params
    assert params == ["MT a", "MT b", "MT& s", "MT& d"]  # in the order of outputs
    assert spec.forward["d"].cpp == "a - b"


def test_expressions_that_are_numbers_or_span_lines() -> None:
    spec = spec_of("""\
        name: shifted
        kind: elementwise
        inputs: [x]
        outputs: [out]
        forward:
          out: >
            x * 2 +
            1
        backward:
          x: 2
        """)
    assert spec.forward["out"].cpp == "x * MT(2) + MT(1)"
    assert spec.backward is not None and spec.backward["x"].cpp == "MT(2)"


def test_keys_are_names_as_written() -> None:
    """YAML reads `on:` as true and `1:` as 1; a spec key is the name as written."""
    spec = spec_of(MINIMAL + "attrs:\n  on: {type: bool, default: false}\n")
    assert list(spec.model.attrs) == ["on"]


def test_anchors_aliases_and_merge_keys() -> None:
    spec = spec_of(MINIMAL + """\
attrs:
  low: &bound {type: float, default: -1}
  high:
    <<: *bound
    default: 1
""")
    assert {n: a.default for n, a in spec.model.attrs.items()} == {"low": -1.0, "high": 1.0}


def test_backward_may_read_outputs() -> None:
    spec = spec_of("""\
        name: my_exp
        kind: elementwise
        inputs: [x]
        outputs: [out]
        forward:
          out: exp(x)
        backward:
          x: grad_out * out
        """)
    assert spec.backward is not None and spec.backward["x"].names == {"grad_out", "out"}


def test_line_points_at_keys_and_falls_back_to_the_parent() -> None:
    spec = spec_of(RELU6)
    assert spec.line("name") == 1
    assert spec.line("attrs", "threshold") == 8
    assert spec.line("attrs", "threshold", "default") == 8
    assert spec.line("dtypes", 2) == 9
    assert spec.line("forward", "out") == 11
    assert spec.line("backward", "x") == 13
    assert spec.line("forward", "nothing", "here") == 10
    assert spec.line() == 1


def test_model_round_trip() -> None:
    model = OpSpec.model_validate({"name": "a", "kind": "elementwise", "inputs": ["x"],
                                   "outputs": ["y"], "forward": {"y": 1}})
    assert model.forward == {"y": "1"}


# -- op names and Paddle's built-in ops -----------------------------------------------------------

def test_op_name_of_a_builtin_is_refused_with_a_free_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spec_module, "paddle_builtin_ops",
                        lambda: frozenset({"relu6", "relu6_grad", "custom_relu6"}))
    with pytest.raises(SpecError) as info:
        spec_of(RELU6.replace("op_name: custom_relu6", "op_name: relu6"))
    assert info.value.line == 2
    assert info.value.message == ("op_name 'relu6' is a Paddle built-in op, and registering it "
                                  "would replace Paddle's own; use 'custom_relu6_2'")


def test_default_op_name_that_clashes_points_at_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spec_module, "paddle_builtin_ops", lambda: frozenset({"custom_twice"}))
    with pytest.raises(SpecError) as info:
        spec_of(MINIMAL)
    assert info.value.line == 1
    assert "op_name 'custom_twice' is a Paddle built-in op" in info.value.message


def test_gradient_op_name_may_not_clash(monkeypatch: pytest.MonkeyPatch) -> None:
    """PD_BUILD_GRAD_OP registers '<op_name>_grad' too."""
    monkeypatch.setattr(spec_module, "paddle_builtin_ops", lambda: frozenset({"odd_grad"}))
    with pytest.raises(SpecError) as info:
        spec_of(MINIMAL.replace("name: twice", "name: twice\nop_name: odd"))
    assert info.value.message.startswith("the gradient op 'odd_grad' of op_name 'odd' is a "
                                         "Paddle built-in op")
    assert info.value.message.endswith("use 'custom_odd'")


def test_builtin_check_can_be_skipped() -> None:
    spec = spec_of(RELU6.replace("op_name: custom_relu6", "op_name: relu6"), check_builtins=False)
    assert spec.op_name == "relu6"


@pytest.mark.skipif(paddle_version() is None, reason="Paddle is not installed")
def test_builtins_come_from_the_installed_paddle() -> None:
    ops = paddle_builtin_ops()
    assert {"relu6", "clip", "exp"} <= ops
    assert not any(op.startswith("custom_") for op in ops)


def test_free_op_name() -> None:
    assert free_op_name("relu6", frozenset({"relu6"})) == "custom_relu6"
    assert free_op_name("relu6", frozenset({"custom_relu6"})) == "custom_relu6_2"
    assert free_op_name("relu6", frozenset({"custom_relu6_grad", "custom_relu6_2"})) == \
        "custom_relu6_3"


@pytest.mark.parametrize(("name", "problem"), [
    ("x", None),
    ("x2_out", None),
    ("grad_scale", "input name 'grad_scale' is reserved: 'grad_<output>' names the output "
                   "gradients"),
    ("MyRelu", "input name 'MyRelu' must be snake_case, without capitals, e.g. 'my_relu'"),
    ("ReLU", "input name 'ReLU' must be snake_case, without capitals"),
    ("2x", "input name '2x' must start with a lower-case letter"),
    ("_x", "input name '_x' must start with a lower-case letter"),
    ("a.b", "input name 'a.b' contains '.': use only a-z, 0-9 and _"),
    ("ünï", "input name 'ünï' must start with a lower-case letter"),
    ("", "input name is empty"),
    ("def", "input name 'def' is a Python keyword"),
    ("match", "input name 'match' is a Python keyword"),
    ("int", "input name 'int' is a C++ keyword"),
    ("sqrt", "input name 'sqrt' is a function of the expression language"),
    ("paddle", "input name 'paddle' is reserved: the generated code uses it"),
    ("x_", "input name 'x_' must not end with '_'"),
])
def test_identifier_problem(name: str, problem: str | None) -> None:
    assert identifier_problem(name, what="input") == problem


@pytest.mark.parametrize(("name", "problem"), [
    ("x_shape", "input name 'x_shape' is reserved: the generated C++ names x's shape 'x_shape'"),
    ("out_dtype", "input name 'out_dtype' is reserved: the generated C++ names out's dtype "
                  "'out_dtype'"),
    ("alpha_bits", "input name 'alpha_bits' is reserved: the generated C++ passes float attr "
                   "'alpha' as its bits in 'alpha_bits'"),
    ("y_shape", None),  # no tensor y
    ("n_bits", None),  # n is not a float attr
    ("x_size", None),
])
def test_derived_name_problem(name: str, problem: str | None) -> None:
    assert derived_name_problem(name, "input", ["x", "out"], ["alpha"]) == problem


def test_a_name_the_cpp_derives_is_refused_at_its_line() -> None:
    """An input `x_shape` beside `x` shadowed InferShape's parameter of x's shape (g++: 'declaration
    shadows a parameter'); now the spec is refused where it names it."""
    text = "name: pair\nkind: elementwise\ninputs: [x, x_shape]\noutputs: [out]\n" \
        "forward:\n  out: x + x_shape\n"
    with pytest.raises(SpecError) as info:
        loads(text, "pair.yaml", check_builtins=False)
    assert info.value.line == 3
    assert "input name 'x_shape' is reserved: the generated C++ names x's shape" in str(info.value)


def test_op_names_may_start_with_grad() -> None:
    assert identifier_problem("grad_clip", what="op") is None


# -- intermediates --------------------------------------------------------------------------------

MISH_WITH_INTERMEDIATES = """\
    name: mish
    kind: elementwise
    inputs: [x]
    outputs: [out]
    forward:
      sp: softplus(x)
      inside: (x > -20) & (x < 20)
      out: where(inside, x * tanh(sp), 0)
    backward:
      t: tanh(sp)
      x: grad_out * (t + x * (1 - t ** 2) * sigmoid(x))
    """


def test_names_that_are_not_targets_are_intermediates_computed_once() -> None:
    spec = spec_of(MISH_WITH_INTERMEDIATES)
    assert list(spec.forward) == ["sp", "inside", "out"]
    assert spec.forward["inside"].type == "bool"
    # The backward computes the forward intermediates it reads again, first.
    assert list(spec.backward or {}) == ["sp", "t", "x"]
    assert spec.backward_source["sp"] == "softplus(x)"
    context = build_context(spec)
    assert context.forward.body == [
        "const MT sp = opgen::softplus(x);",
        "const bool inside = x > MT(-20) && x < MT(20);",
        "out = opgen::where(inside, x * opgen::tanh<T>(sp), MT(0));",
    ]
    assert context.forward.params == ["MT x", "MT& out"]
    assert context.backward.functor is not None
    assert context.backward.functor.body == [
        "const MT sp = opgen::softplus(x);",
        "const MT t = opgen::tanh<T>(sp);",
        "grad_x = grad_out * (t + x * (MT(1) - t * t) * opgen::sigmoid<T>(x));",
    ]
    assert context.backward.inputs == ["x", "grad_out"]
    assert context.backward.functor.numpy_lines[0] == "sp = np.logaddexp(0.0, x)"


def test_intermediates_appear_in_the_generated_header_and_reference() -> None:
    from opgen.render import render_op

    files = render_op(spec_of(MISH_WITH_INTERMEDIATES)).files
    header = files["csrc/mish.h"].decode()
    assert "// sp = softplus(x)\n" in header
    assert "    const MT sp = opgen::softplus(x);\n" in header
    tests = files["test_mish.py"].decode()
    assert "    sp = np.logaddexp(0.0, x)\n" in tests


def test_amp_defaults_to_follow_and_names_its_choices() -> None:
    assert spec_of(MINIMAL).model.amp == "follow"
    assert spec_of(MINIMAL + "amp: float32\n").model.amp == "float32"
    with pytest.raises(SpecError, match=r"op.yaml:7: amp: unknown value 'fp16'; expected one "
                                        r"of 'follow', 'autocast', 'float32'"):
        spec_of(MINIMAL + "amp: fp16\n")


@pytest.mark.parametrize(("dtypes", "amp", "message"), [
    ("[float32, float64]", "autocast", "amp: autocast runs the op in float16 or bfloat16"),
    ("[float64, bfloat16]", "float32", "amp: float32 runs the op in float32, which dtypes"),
])
def test_amp_needs_its_dtype(dtypes: str, amp: str, message: str) -> None:
    with pytest.raises(SpecError, match=f"op.yaml:8: {message}"):
        spec_of(MINIMAL + f"dtypes: {dtypes}\namp: {amp}\n")


def test_inplace_names_an_input_and_its_output() -> None:
    spec = spec_of(MINIMAL + "inplace: {x: out}\n")
    context = build_context(spec)
    assert spec.model.inplace == {"x": "out"}
    assert context.inplace is not None
    assert (context.inplace.op_name, context.inplace.py_name) == ("custom_twice_inplace", "twice_")
    assert context.inplace.differentiable is False  # no backward at all
    assert build_context(spec_of(MINIMAL)).inplace is None


def test_inplace_is_differentiable_when_the_backward_reads_no_overwritten_value() -> None:
    from_out = spec_of(RELU6.replace("where((x > 0) & (x < threshold)",
                                     "where((out > 0) & (out < threshold)") +
                       "inplace: {x: out}\n")
    inplace = build_context(from_out).inplace
    assert inplace is not None and inplace.differentiable
    from_x = build_context(spec_of(RELU6 + "inplace: {x: out}\n")).inplace
    assert from_x is not None and not from_x.differentiable
    assert "the backward of relu6 reads x" in "".join(from_x.no_gradient)


@pytest.mark.parametrize(("inplace", "message"), [
    ("{y: out}", "inplace: 'y' is not an input"),
    ("{x: y}", "inplace: 'y' is not an output"),
    ("{b: out}", "inplace: 'b' may broadcast to a larger output; only the first input"),
    ("{x: out, b: out}", "inplace: one input may be overwritten by one output; found 2"),
])
def test_inplace_errors(inplace: str, message: str) -> None:
    two_inputs = MINIMAL.replace("inputs: [x]", "inputs: [x, b]").replace("2 * x", "x + b")
    with pytest.raises(SpecError, match=f"op.yaml:7: {re.escape(message)}"):
        spec_of(two_inputs + f"inplace: {inplace}\n")


def test_inplace_of_an_op_with_several_outputs_writes_one_and_returns_all() -> None:
    """x is written over the output it names, whichever it is; the variant's kernel allocates and
    returns the others, as Paddle takes them from an in-place kernel, and NAME_ returns them all."""
    pair = MINIMAL.replace("outputs: [out]", "outputs: [out, other]").replace(
        "  out: 2 * x\n", "  out: 2 * x\n  other: 3 * x\n")
    for output, index, kept in (("out", 0, ["other"]), ("other", 1, ["out"])):
        spec = spec_of(pair + f"inplace: {{x: {output}}}\n")
        inplace = build_context(spec).inplace
        assert inplace is not None
        assert (inplace.output, inplace.index, inplace.kept) == (output, index, kept)
        assert inplace.signature == \
            "std::vector<paddle::Tensor> TwiceForwardInPlace(paddle::Tensor& x)"
        assert inplace.py_def == \
            "def twice_(x: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:"
        files = render_op(spec).files
        cc = files["csrc/twice.cc"].decode()
        assert ('PD_BUILD_OP(custom_twice_inplace)\n    .Inputs({"x"})\n'
                '    .Outputs({"out", "other"})\n'
                f'    .SetInplaceMap({{{{"x", "{output}"}}}})\n'
                "    .SetKernelFn(PD_KERNEL(TwiceForwardInPlace))\n"
                "    .SetInferShapeFn(PD_INFER_SHAPE(TwiceInPlaceInferShape))\n"
                "    .SetInferDtypeFn(PD_INFER_DTYPE(TwiceInPlaceInferDtype));") in cc
        assert (f"return opgen::cpu::ElementwiseInPlace<twice::Dtypes, twice::Forward, 2, "
                f"/*kOver=*/{index}>(") in cc
        assert (f"return opgen::cuda::ElementwiseInPlace<twice::Dtypes, twice::Forward, 2, "
                f"/*kOver=*/{index}>(") in files["csrc/twice.cu"].decode()
        empty = "x, _empty_like(x)" if index == 0 else "_empty_like(x), x"
        assert f"    if 0 in x.shape:  # nothing to write\n        return {empty}\n" in \
            files["twice.py"].decode()
    single = build_context(spec_of(MINIMAL + "inplace: {x: out}\n")).inplace
    assert single is not None and single.kept == []
    assert single.signature == "void TwiceForwardInPlace(paddle::Tensor& x)"


# -- bad input: one error line at the spec's line ------------------------------------------------

ROWWISE = """\
name: scaled
kind: rowwise
inputs: {x: element, weight: column}
outputs: [out]
attrs:
  eps: {type: float, default: 1.0e-6}
forward:
  out: x * rsqrt(mean(x * x) + eps) * weight
baseline: layer_norm(x, weight)
"""

CUSTOM = """\
name: twin
kind: custom
inputs:
  x: {dtype: float types}
outputs:
  out: {dtype: same as x, shape: "[*x.shape]"}
"""


def test_a_baseline_call_of_the_wrong_arity_is_one_error_at_its_line(tmp_path: Path,
                                                                     opgen_cli) -> None:
    """layer_norm(x, weight) crashed `opgen generate` with an IndexError traceback (exit 1)."""
    with pytest.raises(SpecError) as info:
        spec_of(ROWWISE, check_builtins=False)
    assert str(info.value) == ("op.yaml:9: baseline: layer_norm() takes 4 arguments, got 2 in "
                               "'layer_norm(x, weight)'; call it as layer_norm(x, w, b, eps)")
    spec = tmp_path / "scaled.yaml"
    spec.write_text(ROWWISE)
    run = opgen_cli("generate", str(spec), "--out", str(tmp_path / "out"))
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"error: {spec}:9: baseline: layer_norm() takes 4 arguments, got 2 in "
        "'layer_norm(x, weight)'; call it as layer_norm(x, w, b, eps)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("kind", "name", "other"), [
    ("elementwise", "setup", "the setup.py opgen generates"),
    ("rowwise", "setup", "the setup.py opgen generates"),
    ("custom", "setup", "the setup.py opgen generates"),
    ("elementwise", "conftest", "pytest's conftest.py"),
    ("custom", "conftest", "pytest's conftest.py"),
    ("custom", "reference", "the reference.py opgen generates"),
])
def test_an_op_name_whose_module_would_clash_with_a_file_beside_it_is_reserved(
        kind: str, name: str, other: str, tmp_path: Path) -> None:
    """`opgen new setup` failed with an internal template error (exit 1, no line): the op's
    module setup.py is the file that builds it."""
    from opgen import api
    from opgen.errors import UsageError

    message = f"name: '{name}' is reserved: the file {name}.py named after the op would clash " \
        f"with {other}; use '{name}_op'"
    with pytest.raises(UsageError) as info:
        api.new(name, kind=kind, directory=tmp_path)
    assert str(info.value) == f"opgen new {name}: {message}"
    assert not (tmp_path / name).exists()
    text = {"elementwise": MINIMAL, "rowwise": ROWWISE.replace("baseline: layer_norm(x, weight)\n",
                                                               ""), "custom": CUSTOM}[kind]
    with pytest.raises(SpecError) as spec_info:
        spec_of(text.replace(text.split("\n", 1)[0], f"name: {name}"), check_builtins=False)
    assert str(spec_info.value) == f"op.yaml:1: {message}"


def test_reference_is_reserved_only_where_the_kind_writes_reference_py() -> None:
    assert spec_of(MINIMAL.replace("name: twice", "name: reference"),
                   check_builtins=False).name == "reference"


@pytest.mark.parametrize(("text", "line", "message"), [
    (MINIMAL.replace("twice", "a" * 65), 1, f"op name '{'a' * 24}...' has 65 characters, more "
                                            "than 64"),
    (MINIMAL.replace("twice", "a" * 300), 1, f"op name '{'a' * 24}...' has 300 characters, more "
                                             "than 64"),
    (MINIMAL.replace("[x]", f"[{'x' * 65}]").replace("2 * x", "x" * 65), 3,
     f"input name '{'x' * 24}...' has 65 characters, more than 64"),
    (MINIMAL.replace("[out]", f"[{'o' * 65}]").replace("  out:", f"  {'o' * 65}:"), 4,
     f"output name '{'o' * 24}...' has 65 characters, more than 64"),
    (MINIMAL.replace("forward:", f"attrs: {{{'k' * 65}: {{type: int, default: 1}}}}\nforward:"),
     5, f"attr name '{'k' * 24}...' has 65 characters, more than 64"),
    (MINIMAL.replace("  out: 2 * x", f"  {'t' * 65}: 2 * x\n  out: {'t' * 65}"), 6,
     f"forward: intermediate name '{'t' * 24}...' has 65 characters, more than 64"),
])
def test_names_longer_than_the_limit_are_refused_at_their_line(text: str, line: int,
                                                              message: str) -> None:
    """A name of 300 characters failed writing files ("File name too long"), one of 190 in the
    summary `opgen new` writes, neither at a line of the spec."""
    with pytest.raises(SpecError) as info:
        spec_of(text, check_builtins=False)
    assert str(info.value) == f"op.yaml:{line}: {message}"


@pytest.mark.parametrize("kind", ["elementwise", "rowwise", "custom"])
def test_an_op_name_at_the_limit_gets_a_starting_spec_that_loads(kind: str,
                                                                 tmp_path: Path) -> None:
    from opgen import api
    from opgen.names import MAX_NAME

    name = "a" * MAX_NAME
    result = api.new(name, kind=kind, directory=tmp_path, pretend=True)
    assert result.dest == tmp_path / name
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(("forward", "message"), [
    ("{alpha: x * 2, out: alpha}", "forward: 'alpha' is already an attr; name this intermediate "
                                   "differently"),
    ("{x: x * 2, out: x}", "forward: 'x' is already an input; name this intermediate "
                           "differently"),
    ("{twice: x * 2, out: twice}", "forward: 'twice' is already the op's name; name this "
                                   "intermediate differently"),
])
def test_a_forward_intermediate_named_like_an_attr_input_or_the_op_says_so(
        forward: str, message: str) -> None:
    """It said "'alpha' is not an output (outputs: out)", of a name the spec gives an attr."""
    text = MINIMAL.replace("forward:\n  out: 2 * x\n",
                           f"attrs: {{alpha: {{type: float, default: 1.0}}}}\nforward: {forward}\n")
    with pytest.raises(SpecError) as info:
        spec_of(text, check_builtins=False)
    assert str(info.value) == f"op.yaml:6: {message}"


@pytest.mark.parametrize(("line", "message"), [
    ("summary: 2024-01-01", "summary: expected one line of text, got a date (quote it)"),
    ("summary: 2024-01-01 10:00:00", "summary: expected one line of text, got a date and time "
                                     "(quote it)"),
    ("summary: 42", "summary: expected one line of text, got 42 (quote it)"),
    ("attrs: {s: {type: str, default: 2024-01-01}}", "attrs.s.default: a date is not a str "
                                                     "(quote it)"),
    ("attrs: {s: {type: float, default: !!binary aGVsbG8=}}", "attrs.s.default: binary data is "
                                                              "not a float"),
    ("attrs: {s: {type: str, default: !!set {a}}}", "attrs.s.default: a set is not a str"),
    ("name: 2024-01-01", "name: expected a name, got a date"),
])
def test_values_yaml_reads_as_dates_sets_or_bytes_are_named_not_shown_as_python(
        line: str, message: str) -> None:
    """`summary: 2024-01-01` said "got datetime.date(2024, 1, 1)"."""
    key = line.split(":", 1)[0]
    text = MINIMAL.replace("name: twice\n", "") if key == "name" else MINIMAL
    with pytest.raises(SpecError) as info:
        spec_of(f"{text}{line}\n", check_builtins=False)
    assert str(info.value).split(": ", 1)[1] == message
    assert "datetime" not in str(info.value)


def test_a_float_default_beyond_float32_says_what_float32_is_for() -> None:
    """Float attrs travel as doubles (docs/spec.md, "Attrs"); what overflows is the float32
    that float32 and 16-bit kernels compute with, which the message now says."""
    text = MINIMAL.replace("forward:", "attrs: {alpha: {type: float, default: 1e+308}}\nforward:")
    with pytest.raises(SpecError) as info:
        spec_of(text, check_builtins=False)
    assert str(info.value) == ("op.yaml:5: attrs.alpha.default: 1e+308 overflows float32, the "
                               "dtype the math runs in for float32 and 16-bit inputs")


# -- a key indented under another one ----------------------------------------------------------

def test_a_required_key_indented_under_another_is_pointed_at() -> None:
    text = MINIMAL.replace("forward:\n  out: 2 * x\n",
                           "domain:\n  x: [-1.0, 1.0]\n  forward:\n    out: 2 * x\n")
    with pytest.raises(SpecError) as info:
        spec_of(text)
    assert str(info.value) == ("op.yaml:7: missing required key 'forward': the one here is "
                               "inside domain; is it indented by mistake?")


def test_a_spec_key_indented_under_backward_is_named() -> None:
    text = RELU6 + "  baseline: clip(maximum(x, 0), 0, threshold)\n"  # under backward:
    with pytest.raises(SpecError) as info:
        spec_of(text)
    message = str(info.value)
    assert message.startswith("op.yaml:14: backward.baseline: unknown function 'clip'")
    assert message.endswith("('baseline' is a key of the spec itself: is it indented under "
                            "backward: by mistake?)")


def test_paddle_is_asked_about_module_names_only_when_builtins_are_checked(monkeypatch) -> None:
    """A spec loaded to build or bench an op already generated (check_builtins=False) asks
    Paddle nothing, the modules it loads included; generate's load does."""
    asked = []
    monkeypatch.setattr(spec_module, "modules_paddle_loads",
                        lambda: asked.append(1) or frozenset({"twice"}))
    assert spec_of(MINIMAL, check_builtins=False).name == "twice"
    assert asked == []
    with pytest.raises(SpecError, match="would shadow the Python module 'twice', which importing "
                                         "Paddle loads"):
        spec_of(MINIMAL)
    assert asked == [1]

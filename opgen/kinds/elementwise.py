"""The elementwise kind: same-shape elementwise ops, rendered from ``templates/elementwise/``.

Everything its templates print is computed here from a :class:`~opgen.spec.Spec`. Templates stay
plain Jinja: loops and ``{{ }}`` over the values built here. All naming (C++ identifiers, Paddle
input names, Python signatures) and all code emission (functor bodies, numpy references, attr
literals) happens in this module and in the shared :mod:`opgen.codegen`, so a naming rule is
changed once.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..autodiff import AutodiffError, backward_of, inline_locals, share_calls, share_terms
from ..codegen import (
    CPP_DTYPES,
    Attr,
    BackwardStubText,
    OpText,
    attr,
    backward_stub_text,
    comment_lines,
    comment_text,
    cpp_comment,
    cpp_if_return,
    deploy_model,
    doc_entry,
    double_backward_stub,
    dtype_checks,
    nobreak,
    op_list,
    op_text,
    param_name,
    py_assignment,
    py_def,
    py_docstring,
    py_if,
    py_return,
    py_returns,
    py_string_call,
    static_variables,
    string_lines,
    with_comment,
    wrap_call,
    wrap_code,
    wrap_expression,
    wrap_hanging,
)
from ..errors import SpecError
from ..expr import Emitted, Type
from ..names import camel_case
from ..spec import (
    Compiled,
    OpSpec,
    Section,
    Spec,
    compile_section,
    guess,
    symbols_of,
)
from . import Kind

#: Makes the error a spec check raises: fail(key path in the YAML, message).
Fail = Callable[..., SpecError]


@dataclass(frozen=True)
class Functor:
    """One functor: the C++ struct holding an op's math, and how it is called."""

    struct: str                  # Forward or Backward, inside the op's namespace
    attrs: list[Attr]            # attrs the math reads, in spec order: members and ctor args
    constructor: str             # the explicit constructor taking those attrs
    params: list[str]            # operator() parameters, inputs by value then outputs by ref
    names: str                   # `static constexpr ... kInputs[] = {...};`: errors name them
    signature: str               # `OPGEN_HD void operator()(params) const {`, wrapped
    call_args: list[str]         # the launcher call's arguments after its op and functor names:
                                 #   {inputs}, attrs...
    lines: list[tuple[str, str, str]]  # (name, C++ expression, spec source) per entry, in order
    comments: list[str]          # `// name = source` above the struct, wrapped
    body: list[str]              # the C++ statements: an intermediate is a local computed once
    numpy_lines: list[str]       # the numpy reference's statements (`target = expression`)


@dataclass(frozen=True)
class GradOp:
    inputs: list[str]            # names the grad kernel takes, in order
    paddle_inputs: str           # as PD_BUILD_GRAD_OP's .Inputs({...}) lists them
    params: list[str]            # C++ parameters of the CUDA entry point
    functor: Functor | None      # None: the backward stub
    reads_outputs: bool          # the backward expressions use forward outputs
    reads_forward: bool          #   or forward inputs (else its own gradient is zero)
    output_grads: list[str]      # outputs whose gradients the grad kernel takes
    derived: bool = False        # `backward: auto`: derived from the forward by opgen
    broadcast: bool = False      # the inputs broadcast: gradients are summed to their shapes
    infers_shape: bool = False   # it takes no forward input: its InferShape/InferDtype are given


@dataclass(frozen=True)
class DoubleGradOp:
    """The backward's own backward (``PD_BUILD_DOUBLE_GRAD_OP``), derived from it by opgen."""

    inputs: list[str]            # the tensors its kernel takes, in order
    paddle_inputs: str           # as PD_BUILD_DOUBLE_GRAD_OP's .Inputs({...}) lists them
    paddle_outputs: str          # the gradients it gives, as .Outputs({...}) lists them
    targets: list[str]           # whose gradients those are: an input, or grad_<output>
    zero: list[str]              # the backward's other inputs, whose gradients it gives as 0
    functor: Functor
    signature: str
    signature_cuda: str
    broadcast: bool              # the inputs broadcast: each result is summed to its target's shape
    infer_shape: str             # the signatures of its InferShape and InferDtype (a static graph
    infer_dtype: str             #   needs them: Paddle's default takes one input and one output)
    shapes: list[str]            # the input whose shape each gradient has


@dataclass(frozen=True)
class InPlace:
    """The in-place variant of the spec's ``inplace: {input: output}``: ``NAME_`` in Python,
    registered as its own op whose output ``output`` is written over ``input``
    (``SetInplaceMap``); its other outputs, if any, are new tensors, as ``NAME``'s are."""

    input: str
    output: str
    index: int                   # the output's position among the op's outputs
    kept: list[str]              # the other outputs: its kernels allocate and return them
    op_name: str                 # <op_name>_inplace
    py_name: str                 # <name>_
    py_def: str                  # its def line, wrapped
    signature: str               # its C++ forward kernel's head (void when it has one output: the
    signature_cuda: str          #   result is the input; else it returns the kept outputs)
    infer_shape: str             # the heads of its InferShape and InferDtype, which give the kept
    infer_dtype: str             #   outputs' (Paddle gives the one written over the input its own)
    differentiable: bool         # the backward reads no value the variant overwrites
    doc: list[str]               # the body of NAME_'s docstring, wrapped
    no_gradient: list[str]       # why not, where it is not: Python string literals, wrapped
    not_honoured: list[str]      # Paddle 2.6's refusal, likewise


@dataclass(frozen=True)
class Signatures:
    forward: str
    forward_cuda: str
    backward: str
    backward_cuda: str
    double_backward: str
    infer_shape: str
    infer_dtype: str


@dataclass(frozen=True)
class Context(OpText, BackwardStubText):
    """The template context of one op."""

    inputs: list[str]
    outputs: list[str]
    grad_inputs: list[str]       # grad_<input>: what the backward computes
    grad_outputs: list[str]      # grad_<output>: what the backward receives
    attrs: list[Attr]
    dtypes: list[str]
    cpp_dtypes: list[str]
    forward: Functor
    backward: GradOp
    signatures: Signatures       # the C++ functions' heads, wrapped to 100 columns
    registered: dict[str, str]   # PD_BUILD_*_OP's lists: inputs, outputs, attrs, grad_outputs,
                                 #   stub_inputs, stub_outputs (the double-backward stub's)
    py_params: str               # the Python wrapper's parameters
    py_def: str                  # its def line, wrapped
    numpy_helpers: list[str]     # helper definitions the numpy reference needs (e.g. erf)
    library: str                 # the compiled extension module: <name>_lib
    test_imports: list[str]      # the test's imports of opgen and of the op, in isort order
    baseline: str | None
    cuda_launcher: str           # Elementwise; NaiveElementwise in the benchmark's comparison copy
    amp: str                     # the spec's amp: follow, autocast or float32
    double_backward: DoubleGradOp | None
    inplace: InPlace | None
    reference_returns: dict[str, str]  # the numpy references' return statements, wrapped:
                                       #   forward, backward, double_backward
    backward_references: dict[str, str]  # the gradient tests' `expected, spread = ...` calls:
                                         #   with_attrs, default_attrs, one_output
    cpp: dict[str, str]          # the .cc's and .cu's statements and comments that name the op's
                                 #   tensors, wrapped where the templates put them (_cpp_text)
    dtype_checks: dict[str, Any]  # templates/partials/wrapper_check_dtypes.py.jinja's text
    static_variables: dict[str, Any]  # templates/partials/wrapper_static_variables.py.jinja's
    py: dict[str, str]           # the wrapper's statements that name the op or its tensors,
                                 #   wrapped likewise (_wrapper_text)
    arg_docs: dict[str, str]     # each input's entry under the docstring's Args:, wrapped
    test: dict[str, str]         # the test's statements that name the op or its tensors, wrapped
                                 #   likewise (_test_text)
    test_samples: dict[str, list[str]]  # the test's sampling statements, one per tensor
    deploy_model: dict[str, str]  # templates/partials/deploy_model.py.jinja's text


def _reference_returns(inputs: list[str], outputs: list[str],
                       double_targets: list[str]) -> dict[str, str]:
    """The return statements of the generated test's numpy references: each result in float64
    with the op's broadcast shape (``shape``), except a gradient of an op whose inputs broadcast,
    which is summed to its target's shape."""
    def results(names: list[str], summed: bool) -> list[str]:
        if summed and len(inputs) > 1:
            return [f"ot.sum_to(grad_{n}, np.shape({n}), shape)" for n in names]
        return [f"np.broadcast_to({n if not summed else 'grad_' + n}, shape).astype(np.float64)"
                for n in names]
    return {"forward": py_return(results(outputs, False)),
            "backward": py_return(results(inputs, True)),
            "double_backward": py_return(results(double_targets, True))}


def _backward_references(inputs: list[str], outputs: list[str],
                         reads_outputs: bool) -> dict[str, str]:
    """The gradient tests' calls of the numpy reference (``ot.reference``), wrapped: with the
    test's attrs, with the defaults, and with one output's gradient (the others zero); a backward
    that reads the forward's outputs also gets the op's own."""
    def call(grads: list[str], extra: str) -> str:
        arrays = "[" + ", ".join([f"{i}_np" for i in inputs] + grads) + "]"
        return wrap_code(f"expected, spread = ot.reference(reference_backward, {arrays}, {extra}, "
                         "dtype)", indent=4)
    grads = [f"grad_{o}_np" for o in outputs]
    return {"with_attrs": call(grads, "kwargs" if reads_outputs else "attrs"),
            "default_attrs": call(grads, "kwargs" if reads_outputs else "{}"),
            "one_output": call([f'grads_out_np["{o}"]' for o in outputs],
                               '{"outputs": [ot.to_numpy(o) for o in outputs.values()]}'
                               if reads_outputs else "{}")}


def _test_text(spec: Spec, attrs: list[Attr], backward: GradOp,
               double_backward: DoubleGradOp | None,
               inplace: InPlace | None) -> tuple[dict[str, str], dict[str, list[str]]]:
    """What :attr:`Context.test` and :attr:`Context.test_samples` hold: the generated test's
    statements, docstrings and comments that name the op or its tensors, each wrapped from the
    column the template puts it at; and, for each way a test samples its inputs (and the output
    gradients, ``grads``), one statement per tensor."""
    m = spec.model
    name, inputs, outputs, first = m.name, list(m.inputs), list(m.outputs), m.inputs[0]
    listed = ", ".join(inputs)
    grad_inputs = [f"grad_{i}" for i in inputs]
    grad_outputs = [f"grad_{o}" for o in outputs]
    defaults = "".join(f", {a.name}={a.py_default}" for a in attrs)

    def code(statement: str, indent: int = 4) -> str:
        return wrap_code(statement, indent=indent)

    def names(items: list[str]) -> str:
        return "[" + ", ".join(f'"{n}"' for n in items) + "]"

    def zipped(head: str, items: list[str], rest: str, indent: int = 4) -> str:
        return code(f"for {head} in zip({names(items)}, {rest}, strict=True):", indent)

    def sample(target: str, shape: str, dtype: str, domain: str, extra: str = "") -> str:
        return code(f"{target} = ot.sample(rng, {shape}, {dtype}, device, {domain}{extra})")

    def arrays(suffix: str = "") -> str:
        return "[" + ", ".join(f"{i}_np{suffix}" for i in inputs) + "]"

    deploy = (f"Deploy: the op inside a static graph, saved, and loaded by a fresh process as a "
              f"server would (docs/deploy.md). CPU, float32; `opgen test {name} -- -m \"not "
              "deploy\"` skips these.")
    test = {
        "domain": code("DOMAIN = {" + ", ".join(f'"{i}": {domain}' for i, domain in
                                                zip(inputs, _domains(m), strict=True)) + "}", 0),
        "other_attrs": code("pytest.param({" + ", ".join(f'"{a.name}": {a.py_other}'
                                                        for a in attrs) + '}, id="other-attrs"),'),
        "reference_forward_def": code(f"def reference_forward({listed}{defaults}):", 0),
        "broadcast_shape": code("shape = np.broadcast_shapes(" + ", ".join(
            f"np.shape({i})" for i in inputs) + ")"),
        "reference_backward_def": code(
            f"def reference_backward({', '.join(inputs + grad_outputs)}{defaults}" +
            (", outputs=None" if backward.reads_outputs else "") + "):", 0),
        "reference_outputs": code("outputs = ot.as_tuple(reference_forward(" + listed + "".join(
            f", {a.name}={a.name}" for a in attrs) + "))", 8),
        "call_with_attrs": code(f"outputs = ot.as_tuple({name}({listed}, **attrs))"),
        "call": code(f"outputs = ot.as_tuple({name}({listed}))"),
        "forward_reference": code(
            f"expected, spread = ot.reference(reference_forward, {arrays()}, attrs, dtype)"),
        "zip_outputs": zipped("name, got, want, err", outputs, "outputs, expected, spread"),
        "zip_periodic": zipped("name, got, want", outputs, "outputs, expected"),
        "views_call": code(f"outputs = ot.as_tuple({name}(" + ", ".join(
            f"{i}_base[cut]" for i in inputs) + "))"),
        "views_reference": code(
            f"expected, spread = ot.reference(reference_forward, {arrays('[cut]')}, {{}}, dtype)"),
        "broadcast_reference": code(
            f"expected, spread = ot.reference(reference_forward, {arrays()}, {{}}, dtype)"),
        "backward_grad": with_comment(code(
            f"grads = paddle.grad(list(outputs), [{listed}], grad_outputs=[" +
            ", ".join(grad_outputs) + "], allow_unused=True)"),
            "a missing gradient fails below, unless empty", indent=4),
        "broadcast_grad": code(f"grads = paddle.grad(list(outputs), [{listed}], grad_outputs=[" +
                               ", ".join(grad_outputs) + "], allow_unused=True)"),
        "zip_grads": zipped("name, got, want, err", grad_inputs, "grads, expected, spread"),
        "broadcast_results": code(f"results = zip({names(grad_inputs)}, grads, expected, spread, "
                                  "strict=True)"),
        "one_output_outputs": code(f"outputs = dict(zip({names(outputs)}, "
                                   f"ot.as_tuple({name}({listed})), strict=True))"),
        "one_output_grad": code(f"grads = paddle.grad([outputs[output]], [{listed}], "
                                "grad_outputs=[grad], allow_unused=True)"),
        "stub_grad": code(f"grads = paddle.grad(list(outputs), [{listed}], "
                          "grad_outputs=grads_out, create_graph=True)"),
        "stub_grad_grad": code(f"paddle.grad(list(grads), [{listed}], grad_outputs=ones, "
                               "allow_unused=True)", 8),
        "no_backward_grad": code(f"paddle.grad(list(outputs), [{listed}], "
                                 "grad_outputs=grads_out)", 8),
        "deploy_comment": comment_text(deploy, prefix="# "),
        "deploy_shapes": code("DEPLOY_SHAPES = {" + ", ".join(
            f'"{i}": {"(4, 67)" if i == first else "(67,)"}' for i in inputs) + "}", 0),
        "static_matches": code(f"ot.assert_static_matches_eager(lambda: Model({name}, attrs), "
                               "inputs, specs, " +
                               (str(list(range(len(outputs)))) if backward.functor else "None") +
                               ")"),
        "static_wrong_dtype": py_string_call("with pytest.raises(TypeError, match=",
                                             f"{name}: {first} is int32", "):", indent=12),
        "saved_model": code(f"ot.assert_saved_model_serves(lambda: Model({name}, attrs), inputs, "
                            f"specs, way, HERE, tmp_path, {names(outputs)})"),
        "amp_zip": zipped("name, got, ref, err", outputs, "outputs, expected, spread", 8),
    }
    if double_backward:
        dg = double_backward
        grad_grads = [f"grad_grad_{i}" for i in inputs]
        several = len(inputs) > 1
        test |= {
            "reference_double_backward_def": code(
                f"def reference_double_backward({', '.join(inputs + grad_outputs + grad_grads)}"
                f"{defaults}):", 0),
            "reference_double_backward_doc": py_docstring(
                "The backward's own backward in numpy float64, as opgen derived it: the "
                f"gradients of {', '.join(dg.targets)} from {', '.join(grad_grads)}, the "
                f"gradient{'s' if several else ''} reaching {', '.join(grad_inputs)}" +
                (" (each shaped like its input)." if several else ".")),
            "double_forward": code(f"{', '.join(outputs)}{',' if len(outputs) == 1 else ''} = "
                                   f"ot.as_tuple(reference_forward({listed}" + "".join(
                                       f", {a.name}={a.name}" for a in attrs) + "))"),
            "double_targets": with_comment(code(f"DOUBLE_TARGETS = {names(dg.targets)}", 0),
                                           "the rest have no second-order gradient (zero)",
                                           indent=0),
            "double_shapes": code("DOUBLE_SHAPES = {" + ", ".join(
                f'"{i}": {"(3, 67)" if k % 2 == 0 else "(67,)"}'
                for k, i in enumerate(inputs)) + "}", 0),
            "second_order_zip": code("return dict(zip([*DOMAIN, " + ", ".join(
                f'"{g}"' for g in grad_outputs) + "], second, strict=True))"),
            "double_index": code(f'@pytest.mark.parametrize("index", range({len(inputs)}), '
                                 f"ids={names(grad_inputs)})", 0),
            "double_one_grads": code(f"grads = paddle.grad(list(ot.as_tuple({name}(*inputs))), "
                                     "inputs, grad_outputs=grads_out, create_graph=True)"),
            "double_one_zip": code("for name, grad in zip([*DOMAIN, " + ", ".join(
                f'"{g}"' for g in grad_outputs) + "], second, strict=True):"),
            "static_names": code("names = [*DOMAIN, " + "".join(
                f'"{g}", ' for g in grad_outputs) + '*(f"grad_grad_{n}" for n in DOMAIN)]', 16),
            "static_grads_out": code("grads_out = [" + ", ".join(
                f'data["{g}"]' for g in grad_outputs) + "]", 16),
        }
    if inplace:
        out = inplace.py_name
        kept = ""
        if inplace.kept:
            verb = "is" if len(inplace.kept) == 1 else "are"
            kept = f"; {', '.join(inplace.kept)} {verb} new"
        results = "results are" if inplace.kept else "result is"
        test |= {
            "inplace_comment": comment_text(
                f"In place: {out} writes {inplace.output} over {inplace.input} (the spec's "
                f"`inplace:`){kept}.", prefix="# "),
            "inplace_writes_doc": py_docstring(
                f"{out}'s {results} {name}'s, " +
                (f"{inplace.output} " if inplace.kept else "") + f"in {inplace.input}'s memory."),
            "inplace_zip_results": zipped("name, got, want", outputs, "results, expected"),
            "inplace_zip_got": zipped("name, g, want", outputs, "got, expected"),
            "inplace_leaf_raises": py_string_call(
                "with pytest.raises(ValueError, match=",
                f"{out}: {inplace.input} is a leaf tensor that requires a gradient", "):",
                indent=4),
            "inplace_want": code(f"want = paddle.grad(list({name}(*moved)), [*inputs, scale], "
                                 "grad_outputs=grads_out)"),
            "inplace_got": code(f"got = paddle.grad(list({out}(*moved)), [*inputs, scale], "
                                "grad_outputs=grads_out)"),
            "inplace_want_one": code(f"want = paddle.grad([{name}(*moved)], [*inputs, scale], "
                                     "grad_outputs=[grad_out])"),
            "inplace_got_one": code(f"got = paddle.grad([{out}(*moved)], [*inputs, scale], "
                                    "grad_outputs=[grad_out])"),
            "inplace_backward_raises": py_string_call(
                "with pytest.raises(RuntimeError, match=",
                f"the backward of {name} reads {inplace.input}", "):", indent=4),
            "inplace_static_doc": py_docstring(
                f"In a static program {out} is an op whose output {inplace.output} is written "
                f"over {inplace.input}."),
            "inplace_static_expected": code("expected = [ot.to_numpy(o) for o in "
                                            f"ot.as_tuple({name}(*(t for t, _ in pairs)))]"),
            "inplace_saved_doc": py_docstring(
                f"A model that calls {out}, saved, then loaded by a new process: {name}'s "
                "outputs."),
            "inplace_saved_expected": code("expected = [ot.to_numpy(o) for o in "
                                           f"ot.as_tuple({name}(*inputs.values()))]"),
        }
    domain = '*DOMAIN["{}"]'
    samples = {
        "forward": [sample(f"{i}, {i}_np", "shape", "dtype", domain.format(i)) for i in inputs],
        "views": [sample(f"{i}_base, {i}_np", "shape", "dtype", domain.format(i))
                  for i in inputs],
        "broadcast": [sample(f"{i}, {i}_np", f"shapes[{k}]", "dtype", domain.format(i))
                      for k, i in enumerate(inputs)],
        "backward": [sample(f"{i}, {i}_np", "shape", "dtype", domain.format(i),
                            ", stop_gradient=False") for i in inputs],
        "backward_broadcast": [sample(f"{i}, {i}_np", f"shapes[{k}]", "dtype", domain.format(i),
                                      ", stop_gradient=False") for k, i in enumerate(inputs)],
        "grads": [sample(f"{g}, {g}_np", "shape", "dtype", "-1.0, 1.0", ", special=False")
                  for g in grad_outputs],
        "stub64": [sample(f"{i}, _", "(3,)", '"float64"', domain.format(i),
                          ", stop_gradient=False") for i in inputs],
        "stub32": [sample(f"{i}, _", "(3,)", '"float32"', domain.format(i),
                          ", stop_gradient=False") for i in inputs],
    }
    return test, samples


def _domains(m: OpSpec) -> list[str]:
    """Each input's ``domain:`` as the test's Python literal."""
    return [str(tuple(m.domain.get(n, (-3.0, 3.0)))) for n in m.inputs]


def _cpp_text(spec: Spec, camel: str, attrs: list[Attr], forward: Functor, backward: GradOp,
              double_backward: DoubleGradOp | None, inplace: InPlace | None,
              cuda_launcher: str) -> dict[str, str]:
    """What :attr:`Context.cpp` holds: the files' header comments (``cc_header``, ``cu_header``,
    ``h_header``), the launcher calls (``cpu_forward``,
    ``cuda_forward``, ... for forward, inplace, backward and double_backward), the CPU entry
    points' handing over to the CUDA ones (``forward_gpu``, ``inplace_gpu``, ``backward_gpu_if``
    and ``backward_gpu``, the same for double_backward), the broadcast InferShape calls
    (``infer_broadcast``, ``inplace_infer_broadcast``), the double backward's InferShape and
    InferDtype results and comment, the in-place variant's comments and the backward's own
    InferShape/InferDtype (``grad_infer_comment``, ``grad_infer_dtype``)."""
    m = spec.model
    name, inputs, outputs = m.name, list(m.inputs), list(m.outputs)
    attr_args = [a.name for a in attrs]

    functors = {"Forward": forward, "Backward": backward.functor,
                "DoubleBackward": double_backward.functor if double_backward else None}

    def launch(device: str, launcher: str, struct: str, *extra: object,
               returns: bool = True) -> str:
        """``return opgen::<device>::<launcher><...>(`` and the arguments, from column 2."""
        head = f"{'return ' if returns else ''}opgen::{device}::{launcher}"
        op_name = f"{name}::{'kInPlaceOpName' if launcher == 'ElementwiseInPlace' else 'kOpName'}"
        functor = functors[struct]
        assert functor is not None
        args = ", ".join([op_name, f'"{name}::{struct}"', *functor.call_args])
        return (wrap_call(head, [f"{name}::Dtypes", f"{name}::{struct}", *map(str, extra)], "(",
                          indent=2, brackets="<>") +
                "\n      " + wrap_hanging(args + ");", indent=6))

    def gpu_if(tensors: list[str], several: bool) -> str:
        if several:
            return wrap_code(f"if (opgen::FirstPresent({name}::kOpName, "
                             f"{{{', '.join(tensors)}}}).is_gpu()) {{", indent=2)
        return f"if ({tensors[0]}.is_gpu()) {{"

    spec_file = nobreak(cpp_comment(Path(spec.path).name))
    text = {
        "cc_header": comment_text("CPU kernels and the op's registration with Paddle. Generated "
                                  f"by opgen from {spec_file}."),
        "cu_header": comment_text("CUDA kernels: the shared launcher in opgen/elementwise.cuh "
                                  f"runs the functors of {name}.h on the inputs' device and "
                                  f"stream. Generated by opgen from {spec_file}."),
        "h_header": comment_text("The op's math, shared by its CPU and CUDA kernels. Generated "
                                 f"by opgen from {spec_file}."),
    }
    for device in ("cpu", "cuda"):
        plain = "Elementwise" if device == "cpu" else cuda_launcher
        text[f"{device}_forward"] = launch(device, plain, "Forward", len(outputs))
        if inplace:
            text[f"{device}_inplace"] = launch(device, "ElementwiseInPlace", "Forward",
                                               len(outputs), f"/*kOver=*/{inplace.index}",
                                               returns=bool(inplace.kept))
        if backward.functor:
            text[f"{device}_backward"] = (
                launch(device, "ElementwiseGrad", "Backward") if backward.broadcast else
                launch(device, plain, "Backward", len(inputs)))
        if double_backward:
            text[f"{device}_double_backward"] = (
                launch(device, "ElementwiseGrad", "DoubleBackward") if double_backward.broadcast
                else launch(device, plain, "DoubleBackward",
                            len(double_backward.targets + double_backward.zero)))
    text["forward_gpu"] = cpp_if_return(f"{inputs[0]}.is_gpu()", f"{camel}ForwardCUDA("
                                        f"{', '.join(inputs + attr_args)})")
    if inplace:
        text["inplace_gpu"] = cpp_if_return(f"{inputs[0]}.is_gpu()",
                                            f"{camel}ForwardInPlaceCUDA("
                                            f"{', '.join(inputs + attr_args)})")
        kept = (f"; it returns {', '.join(inplace.kept)}, which it allocates"
                if inplace.kept else "")
        text["inplace_comment"] = comment_text(
            f"{inplace.op_name}: {inplace.output} is written over {inplace.input} (the spec's "
            f"`inplace:`){kept}.")
        text["inplace_infer_comment"] = comment_text(
            f"{inplace.op_name} infers the outputs it allocates; Paddle gives {inplace.output} "
            f"{inplace.input}'s shape and dtype.")
    if backward.functor:
        text["backward_gpu_if"] = gpu_if(backward.inputs, len(backward.output_grads) > 1
                                         and not backward.broadcast)
        text["backward_gpu"] = wrap_code(f"return {camel}BackwardCUDA("
                                         f"{', '.join(backward.inputs + attr_args)});", indent=4)
    if backward.infers_shape:
        first = backward.inputs[0]
        text["grad_infer_comment"] = comment_text(
            f"The gradient of {inputs[0]} takes the shape and dtype of {first}: the backward "
            f"reads it, and it has {inputs[0]}'s.")
        text["grad_infer_dtype"] = _signature(
            f"std::vector<paddle::DataType> {camel}GradInferDtype",
            [f"const paddle::DataType& {first}_dtype"])
    shapes = ", ".join(f"{i}_shape" for i in inputs)
    text["infer_broadcast"] = wrap_code(
        f"const std::vector<int64_t> shape = opgen::BroadcastShapeOrUnknown({{{shapes}}});",
        indent=2)
    if double_backward:
        dg = double_backward
        text["double_backward_gpu_if"] = gpu_if(dg.inputs, dg.broadcast)
        text["double_backward_gpu"] = wrap_code(f"return {camel}DoubleBackwardCUDA("
                                                f"{', '.join(dg.inputs + attr_args)});", indent=4)
        text["double_backward_infer_shape"] = wrap_code(
            f"return {{{', '.join(f'{n}_shape' for n in dg.shapes)}}};", indent=2)
        text["double_backward_infer_dtype"] = wrap_code(
            f"return {{{', '.join(f'{dg.inputs[0]}_dtype' for _ in dg.shapes)}}};", indent=2)
        if dg.broadcast:
            reaching = (f"{', '.join(f'grad_grad_{i}' for i in inputs)}, the gradients that "
                        f"reach {', '.join(f'grad_{i}' for i in inputs)} (each shaped like its "
                        "input; a missing one counts as zeros)")
        else:
            reaching = f"grad_grad_{inputs[0]}, the gradient that reaches grad_{inputs[0]}"
        zero = (f" {' and '.join(dg.zero)} {'gets' if len(dg.zero) == 1 else 'get'} 0: "
                "Paddle needs a gradient for each input of the backward, or it loses those "
                "around the op." if dg.zero else "")
        text["double_backward_comment"] = comment_text(
            f"The gradient of the backward, derived from it by opgen: {', '.join(dg.targets)}'s "
            f"gradients from {reaching}.{zero}")
    return text


def _wrapper_text(spec: Spec, attrs: list[Attr],
                  inplace: InPlace | None) -> tuple[dict[str, str], dict[str, str]]:
    """What :attr:`Context.py` and :attr:`Context.arg_docs` hold: the wrapper's ``def`` lines,
    calls, conditions and errors that name the op or its inputs, each wrapped from the column the
    template puts it at."""
    m = spec.model
    name, inputs, first = m.name, list(m.inputs), m.inputs[0]
    listed = ", ".join(inputs)
    tensors = [f"{i}: paddle.Tensor" for i in inputs]
    op_args = ", ".join(inputs + [a.py_arg for a in attrs])
    several = len(m.outputs) > 1

    def op_call(op: str, *, indent: int, tail: str = "") -> str:
        call = f"_ops().{op}({op_args})"
        return wrap_code(f"return {f'tuple({call})' if several else call}{tail}", indent=indent)

    py = {
        "check_inputs_def": py_def("_check_inputs", tensors, "None"),
        "result_shape_def": py_def("_result_shape", tensors, "list[int]"),
        "result_shape_if": py_if(" or ".join(f"{i}.shape != shape" for i in inputs[1:]),
                                 indent=4),
        "result_shape": wrap_code("shape = _broadcast_shape(" + ", ".join(
            f'("{i}", {i}.shape)' for i in inputs) + ")", indent=8),
        "check_static_inputs_def": py_def("_check_static_inputs", inputs, "None"),
        "no_broadcast": py_string_call(
            "raise ValueError(", f"{name}: the inputs' shapes do not broadcast: {{listed}}; "
            "aligned at their last dims, sizes must match or be 1", indent=20),
        "static_named": wrap_code("named = (" + ", ".join(
            f'("{i}", list({i}.shape))' for i in inputs) + ")", indent=4),
        "static_no_broadcast": py_string_call(
            "raise ValueError(", f"{name}: the inputs' shapes do not broadcast: {{listed}} (-1: "
            "known at run time); aligned at their last dims, sizes must match or be 1",
            ") from None", indent=8),
        "amp_call": wrap_code(f"return {name}(*cast" + "".join(
            f", {a.name}={a.name}" for a in attrs) + ")", indent=16),
        "static_call": op_call(spec.op_name, indent=8),
        "empty_if": wrap_code("if not _KERNEL_MAKES_EMPTY_OUTPUTS and (" + " or ".join(
            f"0 in {i}.shape" for i in inputs) + "):", indent=4),
        "empty_return": wrap_code(
            f"return _empty_result(shape, {listed})" if not several else
            f"return tuple(_empty_result(shape, {listed}) for _ in range({len(m.outputs)}))",
            indent=8),
        "run": wrap_code(f'outs = (_run or _load_run())("{spec.op_name}", {op_args})', indent=8),
    }
    if inplace:
        out = inplace.py_name
        run = f'(_run or _load_run())("{inplace.op_name}", {op_args})'
        kept = [inplace.input if o == inplace.output else
                f"_empty_like({first})" if len(inputs) == 1 else f"_empty_result(shape, {listed})"
                for o in m.outputs]
        py |= {
            "inplace_static_call": op_call(inplace.op_name, indent=8),
            "inplace_shape": py_string_call(
                "raise ValueError(", f"{out}: {first} has shape {{{first}.shape}} but the "
                f"result's is {{shape}}; in place, the other inputs must broadcast to {first}'s "
                "shape", indent=8),
            "inplace_not_dense": py_string_call(
                "raise ValueError(", f"{out}: {inplace.input} is a view that is not dense in "
                f"memory; in place, the op writes its memory: call .contiguous() first, or "
                f"{name}()", indent=8),
            "inplace_leaf": py_string_call(
                "raise ValueError(", f"{out}: {inplace.input} is a leaf tensor that requires a "
                "gradient (stop_gradient=False); Paddle does not let an in-place op overwrite "
                f"it: call {name}() instead", indent=8),
            "inplace_recording_if": wrap_code("if recording and (" + " or ".join(
                f"not {i}.stop_gradient" for i in inputs) + "):", indent=4),
            "inplace_empty_return": wrap_code("return " + ", ".join(kept), indent=8),
            "inplace_run": wrap_code(f"return {run}[0]" if not several else
                                     f"return tuple({run})", indent=4),
        }
    arg_docs = {i: doc_entry(f"{i}: a {', '.join(m.dtypes)} tensor on CPU or GPU" +
                             (f", broadcasting with {first}." if i != first else "."))
                for i in inputs}
    return py, arg_docs


def _functor(op: str, struct: str, emitted: dict[str, Emitted], sources: dict[str, str],
             args: list[str], out_names: dict[str, str], attrs: list[Attr]) -> Functor:
    """The functor computing ``emitted`` in order: each target (a key of ``out_names``) into its
    output parameter, every other entry (an intermediate) into a local computed once. An
    argument it does not read keeps its place, unnamed (the launcher reads nothing for it)."""
    used = set().union(*(e.names for e in emitted.values()))
    members = [a for a in attrs if a.name in used]
    inits = [f"{a.name}(static_cast<MT>({a.name}))" if a.member_type == "MT" else
             f"{a.name}({a.name})" for a in members]
    constructor = wrap_call(struct, [a.cpp_param for a in members], indent=11)
    constructor += "\n      : " + ", ".join(inits) + " {}"
    local_type = {"num": "const MT", "bool": "const bool"}
    params = ([f"MT {param_name(a, a in used)}" for a in args] +
              [f"MT& {n}" for n in out_names.values()])
    return Functor(
        struct=struct,
        attrs=members,
        constructor=constructor,
        call_args=["{" + ", ".join(args) + "}"] + [a.name for a in members],
        params=params,
        names=with_comment(wrap_code("static constexpr const char* kInputs[] = {" +
                                     ", ".join(f'"{a}"' for a in args) + "};", indent=2),
                           "as errors name them", indent=2, prefix="  // "),
        signature=wrap_call("OPGEN_HD void operator()", params, " const {", indent=2),
        lines=[(out_names.get(t, t), e.cpp, sources[t]) for t, e in emitted.items()],
        comments=[line for t in emitted
                  for line in comment_lines(f"{out_names.get(t, t)} = {sources[t]}")],
        body=[wrap_expression(f"{out_names[t]} = {e.cpp};" if t in out_names else
                              f"{local_type[e.type]} {t} = {e.cpp};", indent=4)
              for t, e in emitted.items()],
        numpy_lines=[py_assignment(out_names.get(t, t), e.numpy) for t, e in emitted.items()],
    )


def build_context(spec: Spec, *, naive: bool = False) -> Context:
    """Compute every name and code fragment the op's templates need."""
    m = spec.model
    camel = camel_case(m.name)
    attrs = [attr(n, a) for n, a in m.attrs.items()]
    forward = _functor(m.name, "Forward", spec.forward, spec.forward_source, m.inputs,
                       {o: o for o in m.outputs}, attrs)

    # Inputs of more than one input broadcast; the backward then takes every forward input (each
    # gradient has its input's shape) and reads only those its expressions use.
    broadcast = len(m.inputs) > 1
    reads: list[str] = []
    if spec.backward is not None:
        used = set().union(*(e.names for e in spec.backward.values()))
        reads = [n for n in m.inputs if n in used]
        rest = [n for n in m.outputs if n in used]
        rest += [f"grad_{n}" for n in m.outputs if f"grad_{n}" in used]
        if not rest and (broadcast or not reads):  # a tensor of the output's shape is needed
            rest = [f"grad_{m.outputs[0]}"]
        grad_inputs = (list(m.inputs) if broadcast else reads) + rest
        functor: Functor | None = _functor(
            m.name, "Backward", spec.backward, spec.backward_source, grad_inputs,
            {i: f"grad_{i}" for i in m.inputs}, attrs)
        if broadcast:
            flags = ", ".join("true" if n in used else "false" for n in m.inputs)
            functor = dataclasses.replace(functor, call_args=[
                "{" + ", ".join(m.inputs) + "}", f"/*reads=*/{{{flags}}}",
                "{" + ", ".join(rest) + "}"] + [a.name for a in functor.attrs])
    else:
        grad_inputs = [f"grad_{n}" for n in m.outputs]
        functor = None
    backward = GradOp(
        inputs=grad_inputs,
        paddle_inputs=op_list("Inputs", [
            f'paddle::Grad("{n[5:]}")' if n.startswith("grad_") and n[5:] in m.outputs
            else f'"{n}"' for n in grad_inputs]),
        params=[f"const paddle::Tensor& {n}" for n in grad_inputs] + [a.cpp_param for a in attrs],
        functor=functor,
        reads_outputs=any(n in m.outputs for n in grad_inputs),
        reads_forward=bool(reads) or any(n in m.outputs for n in grad_inputs),
        output_grads=[n[5:] for n in grad_inputs if n.startswith("grad_") and n[5:] in m.outputs],
        derived=m.backward == "auto",
        broadcast=broadcast,
        # Paddle infers a grad op's shapes from the forward inputs it takes; one that reads only
        # output-shaped tensors (a single input's backward from out) says them itself.
        infers_shape=functor is not None and not any(n in m.inputs for n in grad_inputs),
    )
    functions = set().union(*(e.functions for e in spec.forward.values()))
    if spec.backward:
        functions |= set().union(*(e.functions for e in spec.backward.values()))
    helpers = []
    if "erf" in functions:
        helpers.append("_erf = np.vectorize(math.erf, otypes=[np.float64])")

    py_params = [f"{n}: paddle.Tensor" for n in m.inputs] + \
        [f"{a.name}: {a.py_type} = {a.py_default}" for a in attrs]
    registered = {
        "inputs": op_list("Inputs", [f'"{i}"' for i in m.inputs]),
        "outputs": op_list("Outputs", [f'"{o}"' for o in m.outputs]),
        "attrs": op_list("Attrs", [f'"{a.paddle_decl}"' for a in attrs]),
        "grad_outputs": op_list("Outputs", [f'paddle::Grad("{i}")' for i in m.inputs]),
        **double_backward_stub(camel, backward.output_grads, list(m.inputs), []),
    }
    double_backward = _double_backward(spec, camel, attrs, backward)
    inplace = _inplace(spec, camel, attrs, backward)
    py_text, arg_docs = _wrapper_text(spec, attrs, inplace)
    test_text, test_samples = _test_text(spec, attrs, backward, double_backward, inplace)
    cuda_launcher = "NaiveElementwise" if naive else "Elementwise"
    return Context(
        **op_text(spec),
        **backward_stub_text(spec),
        registered=registered,
        inputs=list(m.inputs),
        outputs=list(m.outputs),
        grad_inputs=[f"grad_{n}" for n in m.inputs],
        grad_outputs=[f"grad_{n}" for n in m.outputs],
        attrs=attrs,
        dtypes=list(m.dtypes),
        cpp_dtypes=[CPP_DTYPES[d] for d in m.dtypes],
        forward=forward,
        backward=backward,
        signatures=_signatures(camel, m.inputs, attrs, backward),
        py_def=py_def(m.name, py_params, py_returns(len(m.outputs))),
        py_params=", ".join(py_params),
        numpy_helpers=helpers,
        library=f"{m.name}_lib",
        test_imports=sorted([f"from {m.name} import {m.name}" +
                             (f", {m.name}_" if m.inplace else ""),
                             "from opgen import testing as ot"],
                            key=lambda line: line.split()[1]),
        baseline=m.baseline,
        cuda_launcher=cuda_launcher,
        amp=m.amp,
        double_backward=double_backward,
        inplace=inplace,
        reference_returns=_reference_returns(
            list(m.inputs), list(m.outputs), double_backward.targets if double_backward else []),
        backward_references=_backward_references(list(m.inputs), list(m.outputs),
                                                 backward.reads_outputs),
        cpp=_cpp_text(spec, camel, attrs, forward, backward, double_backward, inplace,
                      cuda_launcher),
        py=py_text,
        test=test_text,
        test_samples=test_samples,
        deploy_model=deploy_model(list(m.inputs), m.inputs[0]),
        dtype_checks=dtype_checks(m.name, list(m.inputs), m.inputs[0], list(m.dtypes)),
        static_variables=static_variables(m.name, list(m.inputs), list(m.dtypes), m.inputs[0]),
        arg_docs=arg_docs,
    )


def _double_backward(spec: Spec, camel: str, attrs: list[Attr],
                     backward: GradOp) -> DoubleGradOp | None:
    """The derived double backward, where :mod:`opgen.spec` derived one. It gives a gradient for
    every input of the backward, 0 for those the derivation has none for (a forward output it
    reads, an input it reads for a shape or in a condition): where Paddle gets no gradient for
    one of them it loses the gradients around the op, and a second derivative through
    ``relu6(x) * x`` came out as none at all (Paddle 3.3.1 and 2.6.2, eager)."""
    m = spec.model
    if not spec.double_backward:
        return None
    used = set().union(*(e.names for e in spec.double_backward.values()))
    grads = [f"grad_{o}" for o in m.outputs]
    grad_grads = [f"grad_grad_{i}" for i in m.inputs]
    targets = [k for k in [*m.inputs, *grads] if k in spec.double_backward]
    zero = [n for n in backward.inputs if n not in targets]
    gives = targets + zero
    broadcast = len(m.inputs) > 1
    if broadcast:
        # A target's gradient has its shape, so the kernel takes every target (those it does not
        # read for their shapes only) and gives their gradients first, as the backward's do.
        inputs = [n for n in [*m.inputs, *m.outputs, *grads] if n in used or n in gives]
        args = gives + [n for n in [*inputs, *grad_grads] if n in used and n not in gives]
    else:
        inputs = [n for n in [*m.inputs, *m.outputs, *grads] if n in used]
        args = inputs + grad_grads
    inputs += grad_grads

    def paddle_name(name: str) -> str:
        if name.startswith("grad_grad_"):
            return f'paddle::Grad(paddle::Grad("{name[10:]}"))'
        if name in grads:
            return f'paddle::Grad("{name[5:]}")'
        return f'"{name}"'

    out_names = {t: f"grad_{t}" for t in targets}
    for z in zero:  # a forward output's is not grad_out, the output gradient's name
        out_names[z] = f"grad_of_{z}" if z in m.outputs else f"grad_{z}"
    emitted = {**spec.double_backward, **{z: Emitted("num", "MT(0)", "0") for z in zero}}
    functor = _functor(m.name, "DoubleBackward", emitted,
                       {**spec.double_backward_source, **dict.fromkeys(zero, "0")},
                       args, out_names, attrs)
    # the numpy reference gives the targets' gradients only (the tests expect none or zeros
    # for the rest)
    functor = dataclasses.replace(functor, numpy_lines=[
        line for line, name in zip(functor.numpy_lines, emitted, strict=True) if name not in zero])
    if broadcast:
        flags = ", ".join("true" if t in used else "false" for t in gives)
        rest = [n for n in args if n not in gives]
        functor = dataclasses.replace(functor, call_args=[
            "{" + ", ".join(gives) + "}", f"/*reads=*/{{{flags}}}",
            "{" + ", ".join(rest) + "}"] + [a.name for a in functor.attrs])
    tensors = [f"const paddle::Tensor& {n}" for n in inputs]
    vec = "std::vector<paddle::Tensor>"
    shapes = gives if broadcast else [inputs[0]] * len(gives)
    return DoubleGradOp(
        inputs=inputs,
        paddle_inputs=op_list("Inputs", [paddle_name(n) for n in inputs]),
        paddle_outputs=op_list("Outputs", [f'paddle::Grad({paddle_name(t)})' if t in grads
                                               else f'paddle::Grad("{t}")' for t in gives]),
        targets=targets,
        zero=zero,
        functor=functor,
        signature=_signature(f"{vec} {camel}DoubleBackward",
                            tensors + [a.kernel_param for a in attrs]),
        signature_cuda=_signature(f"{vec} {camel}DoubleBackwardCUDA",
                                 tensors + [a.cpp_param for a in attrs]),
        broadcast=broadcast,
        infer_shape=_signature(
            f"std::vector<std::vector<int64_t>> {camel}DoubleGradInferShape",
            [f"const std::vector<int64_t>& {param_name(f'{n}_shape', n in shapes)}"
             for n in inputs]),
        infer_dtype=_signature(
            f"std::vector<paddle::DataType> {camel}DoubleGradInferDtype",
            [f"const paddle::DataType& {param_name(f'{n}_dtype', n == inputs[0])}"
             for n in inputs]),
        # with several inputs each target is one of its inputs; with one, all share a shape
        shapes=shapes,
    )


def _inplace(spec: Spec, camel: str, attrs: list[Attr], backward: GradOp) -> InPlace | None:
    """The in-place variant, where the spec asks for one."""
    m = spec.model
    if not m.inplace:
        return None
    (name, output), = m.inplace.items()
    kept = [o for o in m.outputs if o != output]
    # The variant's backward gets the tensors the op's does; the overwritten input holds the
    # output by then, so a backward that reads its values would compute from the wrong ones (a
    # broadcast backward also takes it for its shape, which stays).
    reads = any(name in e.names for e in (spec.backward or {}).values())
    no_gradient = (f"{m.name}_: the backward of {m.name} reads {name}, which {m.name}_ "
                   f"overwrites with {output}; call {m.name}({name}, ...) where a gradient is "
                   f"needed, or write the spec's backward from {output}")
    not_honoured = (f"{m.name}_: Paddle 2.6's custom-op entry writes an in-place op's result to "
                    f"new memory, leaving {name} as it was; use {m.name}() (or Paddle 3)")
    differentiable = backward.functor is not None and not reads
    returns = (f"Returns ``{output}``, a tensor that shares that memory: use it" if not kept else
               f"Returns what {m.name} returns ({', '.join(m.outputs)}): ``{output}`` shares "
               f"that memory, the others are new tensors; use ``{output}``")
    doc = [
        f"{m.name} in place: ``{output}`` is written over ``{name}``'s memory (Paddle's "
        f"convention for in-place ops: a trailing underscore). {returns}, not {name}, in what "
        "follows, as Paddle attaches the op's gradient to it.",
        f"{name} keeps its dtype under ``paddle.amp.auto_cast`` (a cast would be a copy)" +
        ("; the other inputs broadcast to its shape" if len(m.inputs) > 1 else "") +
        f". As with Paddle's own in-place ops, {name} may not be a leaf tensor that requires a "
        "gradient" + ("." if differentiable else f", and no input may require one: {m.name}'s "
                      f"backward reads {name}'s value, which this overwrites."),
    ]
    tensors = [f"paddle::Tensor& {name}"] + [f"const paddle::Tensor& {i}" for i in m.inputs[1:]]
    returned = "std::vector<paddle::Tensor>" if kept else "void"
    return InPlace(
        input=name,
        output=output,
        index=m.outputs.index(output),
        kept=kept,
        op_name=f"{spec.op_name}_inplace",
        py_name=f"{m.name}_",
        py_def=py_def(f"{m.name}_", [f"{n}: paddle.Tensor" for n in m.inputs] +
                      [f"{a.name}: {a.py_type} = {a.py_default}" for a in attrs],
                      py_returns(len(m.outputs))),
        signature=_signature(f"{returned} {camel}ForwardInPlace",
                            tensors + [a.kernel_param for a in attrs]),
        signature_cuda=_signature(f"{returned} {camel}ForwardInPlaceCUDA",
                                 tensors + [a.cpp_param for a in attrs]),
        infer_shape=_signature(f"std::vector<std::vector<int64_t>> {camel}InPlaceInferShape",
                              [f"const std::vector<int64_t>& {n}_shape" for n in m.inputs]),
        infer_dtype=_signature(
            f"std::vector<paddle::DataType> {camel}InPlaceInferDtype",
            [f"const paddle::DataType& {param_name(f'{n}_dtype', n == m.inputs[0])}"
             for n in m.inputs]),
        differentiable=differentiable,
        # 96 columns after the 4 of indentation; the first line also after the opening quotes
        doc=[line.strip() for paragraph in doc
             for line in [*textwrap.wrap(paragraph, 96, initial_indent="   ",
                                           break_on_hyphens=False), ""]][:-1],
        no_gradient=string_lines(no_gradient, 66),
        not_honoured=string_lines(not_honoured, 63),
    )



#: Where a signature wraps: the templates end it with " {" or ";".
_SIGNATURE_WIDTH = 98


def _signature(head: str, params: list[str]) -> str:
    return wrap_call(head, params, width=_SIGNATURE_WIDTH)


def _signatures(camel: str, inputs: list[str], attrs: list[Attr], backward: GradOp) -> Signatures:
    vec = "std::vector<paddle::Tensor>"
    tensors = [f"const paddle::Tensor& {n}" for n in inputs]
    kernel_attrs = [a.kernel_param for a in attrs]
    grad_tensors = [f"const paddle::Tensor& {n}" for n in backward.inputs]
    return Signatures(
        forward=_signature(f"{vec} {camel}Forward", tensors + kernel_attrs),
        forward_cuda=_signature(f"{vec} {camel}ForwardCUDA",
                                tensors + [a.cpp_param for a in attrs]),
        backward=_signature(f"{vec} {camel}Backward", grad_tensors + kernel_attrs),
        backward_cuda=_signature(f"{vec} {camel}BackwardCUDA", backward.params),
        double_backward=double_backward_stub(camel, backward.output_grads, inputs,
                                             kernel_attrs)["stub_signature"],
        infer_shape=_signature(f"std::vector<std::vector<int64_t>> {camel}InferShape",
                              [f"const std::vector<int64_t>& {n}_shape" for n in inputs]),
        infer_dtype=_signature(
            f"std::vector<paddle::DataType> {camel}InferDtype",
            [f"const paddle::DataType& {param_name(f'{n}_dtype', n == inputs[0])}"
             for n in inputs]),
    )


# -- the kind's own spec rules (opgen.spec.KIND_CHECKS) and derivation (KIND_DERIVATIONS) --------

def check(model: OpSpec, fail: Fail) -> None:
    """The elementwise kind's rules for ``amp:`` and ``inplace:``, which its wrapper and kernels
    make (docs/spec.md)."""
    _check_amp(model, fail)
    _check_inplace(model, fail)


def _check_amp(model: OpSpec, fail: Fail) -> None:
    """``amp: autocast`` needs a 16-bit dtype, ``amp: float32`` float32, among ``dtypes``."""
    if model.amp == "autocast" and not {"float16", "bfloat16"} & set(model.dtypes):
        raise fail(("amp",), "amp: autocast runs the op in float16 or bfloat16, and dtypes lists "
                   "neither; add one to dtypes, or use amp: follow")
    if model.amp == "float32" and "float32" not in model.dtypes:
        raise fail(("amp",), "amp: float32 runs the op in float32, which dtypes does not list; "
                   "add it to dtypes, or use amp: follow")


def _check_inplace(model: OpSpec, fail: Fail) -> None:
    """``inplace: {input: output}``: one pair, an input whose shape is the outputs' (the first
    input; the others broadcast to it) and one of the outputs (the others, if any, are new
    tensors)."""
    if not model.inplace:
        return
    if len(model.inplace) > 1:
        second = list(model.inplace)[1]
        raise fail(("inplace", second), "inplace: one input may be overwritten by one output; "
                   f"found {len(model.inplace)} pairs")
    (name, output), = model.inplace.items()
    if name not in model.inputs:
        raise fail(("inplace", name), f"inplace: '{name}' is not an input (inputs: "
                   f"{', '.join(model.inputs)}){guess(name, model.inputs)}")
    if name != model.inputs[0]:
        raise fail(("inplace", name), f"inplace: '{name}' may broadcast to a larger output; only "
                   f"the first input ('{model.inputs[0]}') has the output's shape and can be "
                   "overwritten by it")
    if output not in model.outputs:
        raise fail(("inplace", name), f"inplace: '{output}' is not an output (outputs: "
                   f"{', '.join(model.outputs)}){guess(output, model.outputs)}")


def with_double_backward(spec: Spec) -> Spec:
    """``spec`` with its double backward, where one is derived (see
    :func:`_derived_double_backward`)."""
    try:
        double = _derived_double_backward(spec)
    except RecursionError:  # a backward nested too deep to differentiate again: the stub stays
        return spec
    if double is None:
        return spec
    return dataclasses.replace(spec, double_backward=double.emitted,
                               double_backward_source=double.sources)


def _derived_double_backward(spec: Spec) -> Compiled | None:
    """The backward differentiated in turn (``PD_BUILD_DOUBLE_GRAD_OP``): given ``grad_grad_<i>``,
    the gradient flowing into each input gradient ``grad_<i>``, the gradient of each backward input
    it depends on: the op's inputs and the output gradients. Derived where the backward is
    differentiable in the language and its result does not depend on the forward's outputs (their
    gradient would flow into the forward's backward again); None otherwise: the double-backward
    stub's clear error stays. Where inputs broadcast, the derivation is elementwise too: a
    broadcast input's gradient is a sum of elementwise terms, so the gradient reaching it reaches
    each term (broadcast back), and the double backward's results are summed to their tensors'
    shapes as the backward's are."""
    model = spec.model
    if spec.backward is None:
        return None
    entries = {f"grad_{k}" if k in model.inputs else k: text
               for k, text in spec.backward_source.items()}
    if model.backward == "auto":  # the backward as derived: its shared calls written out again
        entries = inline_locals(entries, [k for k in entries if k not in spec.forward_source
                                          and not k.startswith("grad_")])
    targets = [f"grad_{i}" for i in model.inputs]
    grads = [f"grad_{o}" for o in model.outputs]
    try:
        derived = backward_of(entries, [*model.inputs, *model.outputs, *grads], targets,
                              local_prefix="d2_")
    except AutodiffError:
        return None
    if any(derived[o] != "0" for o in model.outputs):
        return None
    section = {k: v for k, v in derived.items()
               if k not in model.outputs and not (k in [*model.inputs, *grads] and v == "0")}
    if not any(k in [*model.inputs, *grads] for k in section):
        return None
    reserved = [*symbols_of(model, backward=True), *spec.backward,
                *(f"grad_grad_{i}" for i in model.inputs)]
    section = share_calls(section, reserved, {k: v for k, v in spec.backward_source.items()
                                              if k not in model.inputs})
    section = share_terms(section, [*reserved, *spec.backward_source])
    # the backward's entries (the forward intermediates it recomputes, its own intermediates)
    # are read as they are, recomputed first
    intermediates = frozenset(k for k in spec.backward if k not in model.inputs)
    outer = Compiled(spec.backward, spec.backward_source,
                     {k: e.type for k, e in spec.backward.items()}, intermediates)
    dg_targets = [k for k in [*model.inputs, *grads] if k in section]
    dg_symbols: dict[str, Type] = {**symbols_of(model, backward=True),
                                   **{f"grad_grad_{i}": "num" for i in model.inputs}}
    try:
        return compile_section(
            Section(section, "backward", dg_targets, "input", derived=True), dg_symbols, {},
            {}, spec.path, spec.lines, outer=outer)
    except SpecError:  # a name the derivation made clashes: no double backward, not an error
        return None


def variables(spec: Spec, naive: bool) -> dict[str, object]:
    """The templates' variables: the fields of :func:`build_context`'s :class:`Context`."""
    context = build_context(spec, naive=naive)
    return {f.name: getattr(context, f.name) for f in dataclasses.fields(context)}


KIND = Kind(name="elementwise", templates="elementwise", context=variables, check=check,
            derive=with_double_backward)

"""Everything the templates print, computed from a :class:`~opgen.spec.Spec` in one place.

Templates stay plain Jinja: loops and ``{{ }}`` over the values built here. All naming (C++
identifiers, Paddle input names, Python signatures) and all code emission (functor bodies, numpy
references, attr literals) happens in this module, so a naming rule is changed once.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from . import __version__
from .expr import Emitted
from .spec import AttrSpec, Spec

CPP_DTYPES = {
    "float32": "float",
    "float64": "double",
    "float16": "paddle::float16",
    "bfloat16": "paddle::bfloat16",
}
_CPP_ATTR_TYPES = {"bool": "bool", "int": "int", "int64": "int64_t", "float": "double",
                   "str": "std::string"}
_PY_ATTR_TYPES = {"bool": "bool", "int": "int", "int64": "int", "float": "float", "str": "str"}


@dataclass(frozen=True)
class Attr:
    name: str
    type: str                # spec type: bool, int, int64, float, str
    cpp_type: str            # C++ type the CUDA entry points and functor constructors take
    cpp_param: str           # e.g. "double threshold" or "const std::string& mode"
    kernel_param: str        # the registered kernel functions' parameter: "int64_t threshold_bits"
    kernel_decode: str       # the kernel's statement turning that into cpp_param ("" if none)
    paddle_decl: str         # e.g. "threshold: int64_t", for PD_BUILD_OP(...).Attrs
    py_type: str
    py_arg: str              # what the wrapper passes the op: "_float_bits(threshold)"
    py_default: str          # Python literal of the default
    py_other: str            # Python literal of a non-default value the tests also run
    member_type: str         # the functor member's type: MT for numbers, bool for bools
    doc_default: str         # py_default inside a docstring
    md_default: str          # py_default inside the README's fenced Python block
    md_signature: str        # "name: type = default" as a code span in a README table cell


@dataclass(frozen=True)
class Functor:
    """One functor: the C++ struct holding an op's math, and how it is called."""

    struct: str                  # Forward or Backward, inside the op's namespace
    attrs: list[Attr]            # attrs the math reads, in spec order: members and ctor args
    constructor: str             # the explicit constructor taking those attrs
    params: list[str]            # operator() parameters, inputs by value then outputs by ref
    call_args: str               # arguments of the launcher call: {inputs}, attrs...
    lines: list[tuple[str, str, str]]  # (name, C++ expression, spec source) per entry, in order
    body: list[str]              # the C++ statements: an intermediate is a local computed once
    numpy_lines: list[tuple[str, str]]  # (target, numpy expression)


@dataclass(frozen=True)
class GradOp:
    inputs: list[str]            # names the grad kernel takes, in order
    paddle_inputs: list[str]     # as PD_BUILD_GRAD_OP writes them
    params: list[str]            # C++ parameters of the CUDA entry point
    functor: Functor | None      # None: the backward stub
    reads_outputs: bool          # the backward expressions use forward outputs
    derived: bool = False        # `backward: auto`: derived from the forward by opgen


@dataclass(frozen=True)
class Signatures:
    forward: str
    forward_cuda: str
    backward: str
    backward_cuda: str
    infer_shape: str
    infer_dtype: str


@dataclass(frozen=True)
class Context:
    """The template context of one op."""

    opgen_version: str
    spec_file_comment: str       # the spec's file name in a C++ or Python comment
    spec_file_doc: str           #   in a Python docstring
    spec_file_md_link: str       #   as a README link to the file
    spec_file_md_command: str    #   in the README's `opgen generate FILE` code span
    name: str
    op_name: str
    camel: str                   # CamelCase of name, prefix of every C++ symbol
    summary_comment: str         # the spec's summary in a C++ comment
    summary_doc: str             #   in a Python docstring
    summary_md: str              #   as README text
    no_backward_cpp: str         # the error of the backward stub, as a C++ string literal
    no_backward_match: str       #   as a Python string literal of the regex that matches it
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
    py_params: str               # the Python wrapper's parameters
    attr_args: list[str]         # attr names, to forward them to the CUDA entry point
    domain: dict[str, tuple[float, float]]
    numpy_helpers: list[str]     # helper definitions the numpy reference needs (e.g. erf)
    library: str                 # the compiled extension module: <name>_lib
    test_imports: list[str]      # the test's imports of opgen and of the op, in isort order
    baseline: str | None
    cuda_launcher: str           # Elementwise; NaiveElementwise in the benchmark's comparison copy



def camel_case(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part) or "Op"


def _py_literal(value: object) -> str:
    return repr(value)


def _other_value(attr: AttrSpec) -> object:
    """A value different from the default that exercises the attr in the generated tests."""
    value = attr.default
    if attr.type == "bool":
        return not value
    if attr.type in ("int", "int64"):
        return int(value) + 1  # type: ignore[call-overload]
    if attr.type == "float":
        return float(value) / 2 if value else 0.5  # type: ignore[arg-type]
    return value


def _attr(name: str, spec: AttrSpec) -> Attr:
    cpp_type = _CPP_ATTR_TYPES[spec.type]
    cpp_param = f"const {cpp_type}& {name}" if spec.type == "str" else f"{cpp_type} {name}"
    py_default = _py_literal(spec.default)
    py_type = _PY_ATTR_TYPES[spec.type]
    # Paddle's float attrs are 32-bit and its double attrs work in eager mode only, so a float
    # attr's 64 bits travel in an int64 attr: float64 kernels use the value exactly.
    bits = spec.type == "float"
    return Attr(
        name=name,
        type=spec.type,
        cpp_type=cpp_type,
        cpp_param=cpp_param,
        kernel_param=f"int64_t {name}_bits" if bits else cpp_param,
        kernel_decode=f"const double {name} = opgen::DoubleFromBits({name}_bits);" if bits else "",
        paddle_decl=f"{name}: {'int64_t' if bits else cpp_type}",
        py_type=py_type,
        py_arg=f"_float_bits({name})" if bits else f"{py_type}({name})",
        py_default=py_default,
        py_other=_py_literal(_other_value(spec)),
        member_type="bool" if spec.type == "bool" else "MT",
        doc_default=docstring_text(py_default),
        md_default=py_default.replace("`", "\\x60"),  # the same str, with no fence in it
        md_signature=markdown_code(f"{name}: {spec.type} = {py_default}", table=True),
    )


# -- spec text in the languages it lands in ------------------------------------------------------
# The summary, the spec's file name and str attr defaults are the user's text. Each is written
# through one of these, for the place it goes: a C++ comment, a C++ string literal, a Python
# docstring or string literal, README text. Expressions need none: the checker lets through only
# names, numbers, operators and parentheses (no strings, comments or backslashes).

def _escape(char: str) -> str:
    """A backslash escape of ``char`` that C++ comments, Python and README text all show."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else \
        f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` on one line: each unprintable character (line breaks, tabs, bidi controls) as a
    backslash escape."""
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def cpp_comment(text: str) -> str:
    """``text`` inside a ``//`` comment: one line, which a backslash at its end would splice
    with the next."""
    shown = visible(text)
    return shown + "." if shown.endswith("\\") else shown


def cpp_string(text: str) -> str:
    """``text`` as a C++ string literal of exactly its UTF-8 bytes, in printable ASCII."""
    out = []
    for byte in text.encode("utf-8", "surrogateescape"):
        char = chr(byte)
        if char in "\\\"":
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F and char != "?":  # no ?? trigraphs, whatever the -std
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def docstring_text(text: str) -> str:
    """``text`` inside a ``\"\"\"`` docstring, reading back as ``text``: backslashes doubled,
    unprintable characters escaped, and quotes escaped where they could end the docstring
    (next to another quote, or at either end)."""
    out = []
    for i, char in enumerate(text):
        near_quote = '"' in (text[i - 1:i] or '"') + (text[i + 1:i + 2] or '"')
        if char == "\\":
            out.append("\\\\")
        elif char == '"' and near_quote:
            out.append('\\"')
        elif not char.isprintable():
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


_MARKDOWN_INLINE = re.compile(r"([\\`*_\[\]<>&~|])")
_MARKDOWN_BLOCK_START = re.compile(r"^(#|>|[-+=]|\d+[.)])")


def markdown_text(text: str) -> str:
    """``text`` as one line of README text, shown as written: no emphasis, links, HTML or
    heading made of it."""
    escaped = _MARKDOWN_INLINE.sub(r"\\\1", visible(text))
    return _MARKDOWN_BLOCK_START.sub(r"\\\1", escaped)


def markdown_code(text: str, *, table: bool = False) -> str:
    """``text`` as a code span (in a table cell, with its pipes escaped, as GFM wants)."""
    shown = visible(text)
    ticks = "`" * (max((len(run) for run in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    span = f"{ticks}{pad}{shown}{pad}{ticks}"
    return span.replace("|", "\\|") if table else span


def wrap_call(head: str, args: list[str], tail: str = "", *, indent: int = 0,
              width: int = 100) -> str:
    """``head(arg, ...)tail`` within ``width`` columns, continuation lines aligned after the
    parenthesis (or, when even that overflows, indented four spaces), as clang-format would."""
    one_line = f"{head}({', '.join(args)}){tail}"
    if indent + len(one_line) <= width or not args:
        return one_line
    lines, current = [], f"{head}("
    align = indent + len(current)
    if align + max(len(a) for a in args) + 2 > width:
        align = indent + 4
        lines.append(current)
        current = " " * 4
    for i, arg in enumerate(args):
        piece = arg + (", " if i < len(args) - 1 else f"){tail}")
        if current.strip() and len(current.rstrip()) + len(piece.rstrip()) + indent > width:
            lines.append(current.rstrip())
            current = " " * (align - indent)
        current += piece
    lines.append(current)
    return "\n".join(lines)


def _functor(struct: str, emitted: dict[str, Emitted], sources: dict[str, str],
             args: list[str], out_names: dict[str, str], attrs: list[Attr]) -> Functor:
    """The functor computing ``emitted`` in order: each target (a key of ``out_names``) into its
    output parameter, every other entry (an intermediate) into a local computed once."""
    used = set().union(*(e.names for e in emitted.values()))
    members = [a for a in attrs if a.name in used]
    inits = [f"{a.name}(static_cast<MT>({a.name}))" if a.member_type == "MT" else
             f"{a.name}({a.name})" for a in members]
    constructor = wrap_call(struct, [a.cpp_param for a in members], indent=11)
    constructor += "\n      : " + ", ".join(inits) + " {}"
    local_type = {"num": "const MT", "bool": "const bool"}
    return Functor(
        struct=struct,
        attrs=members,
        constructor=constructor,
        call_args=", ".join(["{" + ", ".join(args) + "}"] + [a.name for a in members]),
        params=[f"MT {a}" for a in args] + [f"MT& {n}" for n in out_names.values()],
        lines=[(out_names.get(t, t), e.cpp, sources[t]) for t, e in emitted.items()],
        body=[f"{out_names[t]} = {e.cpp};" if t in out_names else
              f"{local_type[e.type]} {t} = {e.cpp};" for t, e in emitted.items()],
        numpy_lines=[(out_names.get(t, t), e.numpy) for t, e in emitted.items()],
    )


def build_context(spec: Spec, *, naive: bool = False) -> Context:
    """Compute every name and code fragment the op's templates need."""
    m = spec.model
    camel = camel_case(m.name)
    attrs = [_attr(n, a) for n, a in m.attrs.items()]
    forward = _functor("Forward", spec.forward, spec.forward_source, m.inputs,
                       {o: o for o in m.outputs}, attrs)

    if spec.backward is not None:
        used = set().union(*(e.names for e in spec.backward.values()))
        grad_inputs = [n for n in m.inputs if n in used] + [n for n in m.outputs if n in used]
        grad_inputs += [f"grad_{n}" for n in m.outputs if f"grad_{n}" in used]
        if not grad_inputs:  # constant gradients still need a tensor to take the shape from
            grad_inputs = [f"grad_{m.outputs[0]}"]
        functor: Functor | None = _functor(
            "Backward", spec.backward, spec.backward_source, grad_inputs,
            {i: f"grad_{i}" for i in m.inputs}, attrs)
    else:
        grad_inputs = [f"grad_{n}" for n in m.outputs]
        functor = None
    backward = GradOp(
        inputs=grad_inputs,
        paddle_inputs=[f'paddle::Grad("{n[5:]}")' if n.startswith("grad_") and n[5:] in m.outputs
                       else f'"{n}"' for n in grad_inputs],
        params=[f"const paddle::Tensor& {n}" for n in grad_inputs] + [a.cpp_param for a in attrs],
        functor=functor,
        reads_outputs=any(n in m.outputs for n in grad_inputs),
        derived=m.backward == "auto",
    )
    functions = set().union(*(e.functions for e in spec.forward.values()))
    if spec.backward:
        functions |= set().union(*(e.functions for e in spec.backward.values()))
    helpers = []
    if "erf" in functions:
        helpers.append("_erf = np.vectorize(math.erf, otypes=[np.float64])")

    spec_file = Path(spec.path).name
    summary = m.summary.strip() or f"The {m.name} custom op."
    no_backward = f"no backward defined for {spec.op_name}: add a `backward:` section to " \
        f"{spec_file}"
    return Context(
        opgen_version=__version__,
        spec_file_comment=cpp_comment(spec_file),
        spec_file_doc=docstring_text(spec_file),
        spec_file_md_link=f"[{markdown_code(spec_file)}]({quote(spec_file, safe='')})",
        spec_file_md_command=markdown_code(f"opgen generate {shlex.quote(spec_file)}"),
        name=m.name,
        op_name=spec.op_name,
        camel=camel,
        summary_comment=cpp_comment(summary),
        summary_doc=docstring_text(summary),
        summary_md=markdown_text(summary),
        no_backward_cpp=cpp_string(no_backward),
        no_backward_match=repr(re.escape(no_backward)),
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
        py_params=", ".join([f"{n}: paddle.Tensor" for n in m.inputs] +
                            [f"{a.name}: {a.py_type} = {a.py_default}" for a in attrs]),
        attr_args=[a.name for a in attrs],
        domain={n: tuple(m.domain.get(n, (-3.0, 3.0))) for n in m.inputs},  # type: ignore[misc]
        numpy_helpers=helpers,
        library=f"{m.name}_lib",
        test_imports=sorted([f"from {m.name} import {m.name}", "from opgen import testing as ot"],
                            key=lambda line: line.split()[1]),
        baseline=m.baseline,
        cuda_launcher="NaiveElementwise" if naive else "Elementwise",
    )


def _signatures(camel: str, inputs: list[str], attrs: list[Attr], backward: GradOp) -> Signatures:
    vec = "std::vector<paddle::Tensor>"
    tensors = [f"const paddle::Tensor& {n}" for n in inputs]
    kernel_attrs = [a.kernel_param for a in attrs]
    grad_tensors = [f"const paddle::Tensor& {n}" for n in backward.inputs]
    return Signatures(
        forward=wrap_call(f"{vec} {camel}Forward", tensors + kernel_attrs),
        forward_cuda=wrap_call(f"{vec} {camel}ForwardCUDA", tensors + [a.cpp_param for a in attrs]),
        backward=wrap_call(f"{vec} {camel}Backward", grad_tensors + kernel_attrs),
        backward_cuda=wrap_call(f"{vec} {camel}BackwardCUDA", backward.params),
        infer_shape=wrap_call(f"std::vector<std::vector<int64_t>> {camel}InferShape",
                              [f"const std::vector<int64_t>& {n}_shape" for n in inputs]),
        infer_dtype=wrap_call(f"std::vector<paddle::DataType> {camel}InferDtype",
                              [f"const paddle::DataType& {n}_dtype" for n in inputs]),
    )

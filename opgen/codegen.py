"""What every kind's template context is made of: spec text escaped for each language it lands
in, C++ calls wrapped to 100 columns, and attrs in C++, Paddle and Python.

A kind (:mod:`opgen.kinds`) builds its context from these; none of them knows any kind.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import __version__
from .names import camel_case
from .spec import AttrSpec

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
class OpText:
    """What every kind's templates print of the op itself, each escaped for where it lands: a
    kind's template context extends it, and :func:`op_text` fills it."""

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


def op_text(spec: Any) -> dict[str, str]:
    """:class:`OpText`'s fields for a checked spec of any kind, as a context's keyword
    arguments."""
    m = spec.model
    spec_file = Path(spec.path).name
    summary = m.summary.strip() or f"The {m.name} custom op."
    return {
        "opgen_version": __version__,
        "spec_file_comment": cpp_comment(spec_file),
        "spec_file_doc": docstring_text(spec_file),
        "spec_file_md_link": f"[{markdown_code(spec_file)}]({quote(spec_file, safe='')})",
        "spec_file_md_command": markdown_code(f"opgen generate {shlex.quote(spec_file)}"),
        "name": m.name,
        "op_name": spec.op_name,
        "camel": camel_case(m.name),
        "summary_comment": cpp_comment(summary),
        "summary_doc": docstring_text(summary),
        "summary_md": markdown_text(summary),
    }


@dataclass(frozen=True)
class BackwardStubText:
    """The errors an op's backward stub (no ``backward:``) and double-backward stub raise, in
    the contexts of the kinds that have such stubs; :func:`backward_stub_text` fills it."""

    no_backward_cpp: str         # the error of the backward stub, as a C++ string literal
    no_backward_match: str       #   as a Python string literal of the regex that matches it
    no_double_backward_cpp: str  # the error of the double-backward stub, as a C++ string literal
    no_double_backward_match: str  #   as a Python string literal of the regex that matches it


def backward_stub_text(spec: Any) -> dict[str, str]:
    """:class:`BackwardStubText`'s fields for a checked spec, as a context's keyword arguments."""
    no_backward = (f"no backward defined for {spec.op_name}: add a `backward:` section to "
                   f"{Path(spec.path).name}")
    no_double_backward = (f"{spec.op_name} has no double backward (a gradient of its "
                          "gradient): opgen ops are differentiable once")
    return {
        "no_backward_cpp": cpp_string(no_backward),
        "no_backward_match": repr(re.escape(no_backward)),
        "no_double_backward_cpp": cpp_string(no_double_backward),
        "no_double_backward_match": repr(f"{spec.op_name} has no double backward"),
    }


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



def _py_literal(value: object) -> str:
    return repr(value)


def other_value(attr: AttrSpec) -> object:
    """A value different from the default that exercises the attr in the generated tests."""
    value = attr.default
    if attr.type == "bool":
        return not value
    if attr.type in ("int", "int64"):
        return int(value) + 1  # type: ignore[call-overload]
    if attr.type == "float":
        return float(value) / 2 if value else 0.5  # type: ignore[arg-type]
    return value


def attr(name: str, spec: AttrSpec) -> Attr:
    """The attr ``name`` of a spec, in every language the generated files use."""
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
        py_other=_py_literal(other_value(spec)),
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


def param_name(name: str, used: bool) -> str:
    """A C++ parameter's name, or the name in a comment where the function does not read it
    (no unused-parameter warning, and the signature still says what is passed there)."""
    return name if used else f"/*{name}*/"


def wrap_items(items: list[str], *, column: int, indent: int, after: int = 0,
               width: int = 100) -> str:
    """``items`` joined by ", " as the template places them: from ``column`` on, followed by
    ``after`` columns of its own (``);``), broken into lines that start at ``indent`` so that
    none passes ``width``."""
    lines, current, start = [], "", column
    for i, item in enumerate(items):
        last = i == len(items) - 1
        piece = item if last else item + ", "
        need = len(piece) + (after if last else -1)  # a line may end in the comma, not the space
        if current and start + len(current) + need > width:
            lines.append(current.rstrip())
            current, start = " " * indent, 0
        current += piece
    lines.append(current)
    return "\n".join(lines)


def wrap_call(head: str, args: list[str], tail: str = "", *, indent: int = 0,
              width: int = 100) -> str:
    """``head(arg, ...)tail`` within ``width`` columns, continuation lines aligned after the
    parenthesis (or, when even that overflows, indented four spaces), as clang-format would.
    ``indent`` is the column the first line starts at (the template puts it there); continuation
    lines carry their whole indentation."""
    one_line = f"{head}({', '.join(args)}){tail}"
    if indent + len(one_line) <= width or not args:
        return one_line
    lines, current = [], f"{head}("
    align = indent + len(current)
    if align + max(len(a) for a in args) + 2 > width:
        align = indent + 4
        lines.append(current)
        current = " " * align
    for i, arg in enumerate(args):
        piece = arg + (", " if i < len(args) - 1 else f"){tail}")
        start = 0 if lines else indent  # the first line's indentation is the template's
        if current.strip() and start + len(current) + len(piece.rstrip()) > width:
            lines.append(current.rstrip())
            current = " " * align
        current += piece
    lines.append(current)
    return "\n".join(lines)


#: Where a long expression may be broken: after a binary operator or a comma (the expression
#: compiler puts one space on each side of every binary operator; unary minus has none).
_BREAKS_AFTER = (" && ", " || ", " == ", " != ", " <= ", " >= ", " < ", " > ", " + ", " - ",
                 " * ", " / ", " ? ", " : ", ", ")


def wrap_expression(statement: str, *, indent: int, width: int = 100,
                    python: bool = False) -> str:
    """``statement`` (``target = expression;``, from column ``indent``, where the template puts
    it) broken after binary operators and commas into lines within ``width`` columns, as a
    careful hand breaks a long formula: each line ends at the shallowest parenthesis depth that
    keeps it at least half full, and continuation lines (which carry their whole indentation)
    are indented four more. Nothing inside a string literal is a break. ``python``: only breaks
    inside parentheses (see :func:`py_assignment`). A piece no break shortens stays long."""
    if indent + len(statement) <= width:
        return statement
    breaks: list[tuple[int, int]] = []  # (where the next line starts, the depth there)
    depth, i, quote = 0, 0, ""
    while i < len(statement):
        c = statement[i]
        if quote:
            i += 2 if c == "\\" else 1
            quote = "" if c == quote else quote
            continue
        if c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        else:
            op = next((o for o in _BREAKS_AFTER if statement.startswith(o, i)), None)
            if op is not None:
                i += len(op)
                if depth > 0 or not python:
                    breaks.append((i, depth))
                continue
        i += 1
    lines, start, column = [], 0, indent
    while column + len(statement) - start > width:
        room = width - column
        fits = [(d, b) for b, d in breaks if start < b and b - 1 - start <= room]
        if not fits:
            break
        full = [(d, b) for d, b in fits if b - start >= room // 2] or fits
        shallowest = min(d for d, _ in full)
        end = max(b for d, b in full if d == shallowest)
        lines.append(statement[start:end].rstrip())
        start, column = end, indent + 4
    lines.append(statement[start:])
    return ("\n" + " " * (indent + 4)).join(lines)


def py_assignment(target: str, expression: str, *, indent: int = 4) -> str:
    """``target = expression`` in Python from column ``indent``, wrapped as
    :func:`wrap_expression` does; an expression that must break outside its own parentheses is
    put in a pair first (``out = (a * b + c)``, broken inside them)."""
    statement = f"{target} = {expression}"
    if indent + len(statement) > 100 and not _enclosed(expression):
        statement = f"{target} = ({expression})"
    return wrap_expression(statement, indent=indent, python=True)


def py_return(values: list[str], *, indent: int = 4) -> str:
    """``return value, ...`` in Python from column ``indent``, wrapped as :func:`py_assignment`
    wraps (several values in a pair of parentheses when they must break)."""
    statement = "return " + ", ".join(values)
    if indent + len(statement) > 100 and len(values) > 1:
        statement = f"return ({', '.join(values)})"
    return wrap_expression(statement, indent=indent, python=True)


def _enclosed(expression: str) -> bool:
    """Whether ``expression`` is one call or parenthesized group, from its first parenthesis to
    its end (``np.where(...)``), so that Python may break anywhere inside it."""
    head = expression.find("(")
    if head < 0 or not re.fullmatch(r"[\w.]*", expression[:head]):
        return False
    depth = 0
    for k, c in enumerate(expression[head:], head):
        depth += (c == "(") - (c == ")")
        if depth == 0:
            return k == len(expression) - 1
    return False


def comment_lines(text: str, *, width: int = 100) -> list[str]:
    """``text`` (a formula) as ``//`` comment lines from column 0 within ``width``, broken as
    :func:`wrap_expression` breaks code, continuation lines indented four more."""
    first, *rest = wrap_expression(cpp_comment(text), indent=3, width=width).split("\n")
    return ["// " + first, *("//     " + line.strip() for line in rest)]


def py_def(name: str, params: list[str], returns: str) -> str:
    """A wrapper's ``def name(params) -> returns:`` line, wrapped within 100 columns."""
    return wrap_call(f"def {name}", params, f" -> {returns}:")


def py_returns(outputs: int) -> str:
    """The return annotation of a wrapper with ``outputs`` outputs."""
    return "paddle.Tensor" if outputs == 1 else f"tuple[{', '.join(['paddle.Tensor'] * outputs)}]"


def string_lines(text: str, width: int) -> list[str]:
    """``text`` as Python string literals of at most ``width`` characters, to concatenate."""
    lines = textwrap.wrap(text, width, drop_whitespace=False)
    return ['"' + line.replace("\\", "\\\\").replace('"', '\\"') + '"' for line in lines]

"""What every kind's template context is made of: spec text escaped for each language it lands
in, C++ calls wrapped to 100 columns, and attrs in C++, Paddle and Python.

A kind (:mod:`opgen.kinds`) builds its context from these; none of them knows any kind.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from collections.abc import Callable, Iterator
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
# The wrapper's function that checks an attr's value and gives it as the op takes it
# (templates/partials/wrapper_library.py.jinja).
_ATTR_CHECKS = {"bool": "_bool_attr", "int": "_int_attr", "int64": "_int64_attr",
                "float": "_float_bits", "str": "_str_attr"}


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
                                 #   (both one line, whatever their length: tests read them so)
    no_double_backward_fail: str  # the double-backward stub's `opgen::Fail(...);`, from column 2
    no_double_backward_raises: str  #   the test's `with pytest.raises(...):` matching it, from 4


def backward_stub_text(spec: Any) -> dict[str, str]:
    """:class:`BackwardStubText`'s fields for a checked spec, as a context's keyword arguments."""
    no_backward = (f"no backward defined for {spec.op_name}: add a `backward:` section to "
                   f"{Path(spec.path).name}")
    no_double_backward = (f"{spec.op_name} has no double backward (a gradient of its "
                          "gradient): docs/deploy.md, \"Double backward\", says which ops "
                          "get one")

    def raises(pattern: str) -> str:
        source = pattern.replace("\\", "\\\\").replace('"', '\\"')
        return py_string_call("with pytest.raises(Exception, match=", source, "):", indent=4,
                              fields=False)
    return {
        "no_backward_cpp": cpp_string(no_backward),
        "no_backward_match": repr(re.escape(no_backward)),
        "no_double_backward_fail": cpp_string_call("opgen::Fail(", no_double_backward, indent=2),
        "no_double_backward_raises": raises(f"{spec.op_name} has no double backward"),
    }


def op_list(method: str, names: list[str]) -> str:
    """The items of a PD_BUILD_*_OP's ``    .<method>({<here>})``, wrapped after the brace."""
    column = len(f"    .{method}({{")
    return wrap_items(names, column=column, indent=column, after=2)


def double_backward_stub(camel: str, output_grads: list[str], inputs: list[str],
                         kernel_attrs: list[str]) -> dict[str, str]:
    """The double backward registered where an op has a backward but none of its own, which
    fails with ``no_double_backward_fail``: its ``.Inputs`` (the output gradients the backward
    takes, the gradients reaching its input gradients), ``.Outputs`` and kernel head (" {" after
    it). Without one, Paddle takes the backward's results for constants in a second derivative:
    d2(op(x) * x)/dx2 of an identity op came out as 1, where 2 is right (Paddle 3.3.1)."""
    params = ([f"const paddle::Tensor& /*grad_{o}*/" for o in output_grads] +
              [f"const paddle::Tensor& /*grad_grad_{i}*/" for i in inputs] +
              [_unnamed(p) for p in kernel_attrs])
    return {
        "stub_inputs": op_list("Inputs", [
            *(f'paddle::Grad("{o}")' for o in output_grads),
            *(f'paddle::Grad(paddle::Grad("{i}"))' for i in inputs)]),
        "stub_outputs": op_list("Outputs", [f'paddle::Grad(paddle::Grad("{o}"))'
                                               for o in output_grads]),
        "stub_signature": wrap_call(f"std::vector<paddle::Tensor> {camel}DoubleBackward", params,
                                    " {"),
    }


def _unnamed(param: str) -> str:
    """A C++ parameter with its name in a comment: ``double /*eps*/`` (the stub reads none)."""
    head, _, name = param.rpartition(" ")
    return f"{head} /*{name}*/"


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
    py_arg: str              # what the wrapper passes the op: '_float_bits(threshold, "threshold")'
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
        py_arg=f'{_ATTR_CHECKS[spec.type]}({name}, "{name}")',
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
              width: int = 100, brackets: str = "()") -> str:
    """``head(arg, ...)tail`` within ``width`` columns, continuation lines aligned after the
    parenthesis (or, when even that overflows, indented four spaces), as clang-format would.
    ``indent`` is the column the first line starts at (the template puts it there); continuation
    lines carry their whole indentation. ``brackets``: ``"<>"`` for template arguments."""
    opening, closing = brackets
    one_line = f"{head}{opening}{', '.join(args)}{closing}{tail}"
    if indent + len(one_line) <= width or not args:
        return one_line
    lines, current = [], f"{head}{opening}"
    align = indent + len(current)
    if align + max(len(a) for a in args) + 2 > width:
        align = indent + 4
        lines.append(current)
        current = " " * align
    for i, arg in enumerate(args):
        piece = arg + (", " if i < len(args) - 1 else f"{closing}{tail}")
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


def _code_positions(statement: str) -> Iterator[int]:
    """The indices of ``statement``'s characters outside its string literals (a quote and what
    it encloses, escapes included, are skipped): where the wrappers below may find a break."""
    i, quote = 0, ""
    while i < len(statement):
        c = statement[i]
        if quote:
            i += 2 if c == "\\" else 1
            quote = "" if c == quote else quote
            continue
        if c in "\"'":
            quote = c
        else:
            yield i
        i += 1


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
    depth, resume = 0, 0
    for i in _code_positions(statement):
        if i < resume:  # inside an operator just taken
            continue
        c = statement[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        else:
            op = next((o for o in _BREAKS_AFTER if statement.startswith(o, i)), None)
            if op is not None:
                resume = i + len(op)
                if depth > 0 or not python:
                    breaks.append((resume, depth))
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


def wrap_code(statement: str, *, indent: int = 0, width: int = 100) -> str:
    """``statement`` (one line of Python or C++, from column ``indent``, where the template puts
    it) within ``width`` columns, broken as a careful hand breaks a long call, list or condition:
    inside brackets only, after a comma or before a Python ``and``, ``or`` or a comprehension's
    ``for`` and ``if``, each continuation line aligned after the bracket it continues (or, where
    that is past two thirds of the width, four columns in after a bracket that ends its line);
    each line ends at the shallowest depth that keeps it at least a quarter full. Continuation
    lines carry their whole indentation. Nothing inside a string literal is a break; a piece no
    break shortens stays long."""
    if indent + len(statement) <= width:
        return statement
    breaks: list[tuple[int, int, int, int]] = []  # (line end, next start, depth, its bracket)
    opens: list[int] = []  # open brackets, each where it opens a line's rest (a hanging indent)
    stack: list[int] = []
    for i in _code_positions(statement):
        c = statement[i]
        if c in "([{":
            stack.append(i)
            opens.append(i)
        elif c in ")]}":
            if stack:  # else it closes a bracket the statement continues (py_if's)
                stack.pop()
        elif stack and statement.startswith(", ", i):
            breaks.append((i + 1, i + 2, len(stack), stack[-1]))
        elif stack and statement.startswith((" and ", " or ", " for ", " if "), i):
            breaks.append((i, i + 1, len(stack), stack[-1]))
    lines, start, column = [], 0, indent
    starts = [(0, indent)]  # where each line starts: (index in statement, column)
    aligned: dict[int, int] = {}  # a bracket's continuation column, where it hangs

    def column_of(k: int) -> int:
        index, col = max((s for s in starts if s[0] <= k), key=lambda s: s[0])
        return col + k - index

    def after(bracket: int) -> int:
        return aligned.get(bracket, column_of(bracket) + 1)

    while column + len(statement) - start > width:
        room = width - column
        fits = [(d, end, nxt, b) for end, nxt, d, b in breaks
                if start < end and end - start <= room and after(b) <= width * 2 // 3]
        if fits:
            full = [f for f in fits if f[1] - start >= room // 4] or fits
            shallowest = min(f[0] for f in full)
            _, end, nxt, bracket = max(f for f in full if f[0] == shallowest)
            column_next = after(bracket)
        else:  # break after the last bracket that fits on this line, the rest four columns in
            hang = max((b for b in opens if start <= b and b + 1 - start <= room), default=None)
            if hang is None:
                break
            end = nxt = hang + 1
            column_next = aligned[hang] = starts[-1][1] + 4 if start else indent + 4
        lines.append(statement[start:end].rstrip())
        start, column = nxt, column_next
        starts.append((start, column))
    lines.append(statement[start:])
    return lines[0] + "".join("\n" + " " * col + line
                              for (_, col), line in zip(starts[1:], lines[1:], strict=True))


def wrap_hanging(text: str, *, indent: int, width: int = 100) -> str:
    """``text``, the rest of a call whose opening parenthesis ends the line above, from column
    ``indent`` within ``width`` columns: broken as :func:`wrap_code` breaks, its own arguments'
    continuation lines at ``indent`` too."""
    return wrap_code("(" + text, indent=indent - 1, width=width)[1:]


def cpp_if_return(condition: str, value: str, *, indent: int = 2) -> str:
    """``if (condition) return value;`` from column ``indent``, or, where that does not fit one
    line, the ``return`` in braces on its own line (wrapped as :func:`wrap_code` wraps)."""
    line = f"if ({condition}) return {value};"
    if indent + len(line) <= 100:
        return line
    pad = " " * indent
    return (f"if ({condition}) {{\n{pad}  " + wrap_code(f"return {value};", indent=indent + 2) +
            f"\n{pad}}}")


def py_if(condition: str, *, indent: int = 8) -> str:
    """``if condition:`` from column ``indent``, within 100 columns: where it is longer, in
    parentheses, broken before its top-level ``and`` and ``or``, the continuation lines eight
    columns in (the wrappers' other conditions are written so); a part still too long breaks
    inside its own parentheses, as :func:`wrap_code` breaks."""
    line = f"if {condition}:"
    if indent + len(line) <= 100:
        return line
    pieces, depth, start = [], 0, 0
    for k, c in enumerate(condition):
        depth += (c in "([{") - (c in ")]}")
        for word in (" and ", " or "):
            if depth == 0 and condition.startswith(word, k):
                pieces.append(condition[start:k])
                start = k + 1
    pieces.append(condition[start:])
    # a piece too long for its line breaks inside its own parentheses (the last before "):")
    pieces = [wrap_code(piece + ("):" if k == len(pieces) - 1 else ""),
                        indent=indent + (4 if k == 0 else 8))
              for k, piece in enumerate(pieces)]
    return "if (" + ("\n" + " " * (indent + 8)).join(pieces)


def _words(text: str, fields: bool = True) -> list[str]:
    """``text`` split after its spaces, each piece keeping its space; never inside ``[...]`` (a
    shape: ``[..., D]``) nor, with ``fields``, inside a ``{...}`` field of an f-string (``{{`` is
    a brace, not a field)."""
    pieces, start, depth, square, k = [], 0, 0, 0, 0
    while k < len(text):
        if fields and depth == 0 and text.startswith(("{{", "}}"), k):
            k += 2
            continue
        if fields:
            depth += (text[k] == "{") - (text[k] == "}")
        if depth == 0:
            square = max(0, square + (text[k] == "[") - (text[k] == "]"))
        if depth == 0 and square == 0 and text[k] == " " and text[k + 1:k + 2] not in ("", " "):
            pieces.append(text[start:k + 1])
            start = k + 1
        k += 1
    pieces.append(text[start:])
    return pieces


def _fill(words: list[str], room: int, cost: Callable[[str], int], last_room: int) -> list[str]:
    """``words`` (each with its trailing space) joined into lines whose ``cost`` is at most
    ``room`` (``last_room`` for the last line), as a careful hand fills them: a line that must
    break goes back to the end of its last clause (``;``, ``:`` or ``.``, outside parentheses)
    where that keeps it at least half full. A word longer than a line has one of its own."""
    lines: list[str] = []
    current: list[str] = []
    pending = list(words)
    while pending:
        word = pending.pop(0)
        if current and cost("".join(current) + word) > room:
            cut = len(current)
            for k in range(len(current), 0, -1):
                line = "".join(current[:k])
                if cost(line) < room // 2:
                    break
                if line.rstrip().endswith((";", ":", ".")) and line.count("(") == line.count(")"):
                    cut = k
                    break
            lines.append("".join(current[:cut]))
            pending[:0] = [*current[cut:], word]
            current = []
            continue
        current.append(word)
    while len(current) > 1 and cost("".join(current)) > last_room:  # the tail does not fit
        pending.insert(0, current.pop())
    lines.append("".join(current))
    if pending:
        lines.append("".join(pending))
    return lines


def py_string_call(head: str, text: str, tail: str = ")", *, indent: int, width: int = 100,
                   fields: bool = True) -> str:
    """``head`` (``raise ValueError(``), the Python string ``text`` and ``tail`` from column
    ``indent``, within ``width`` columns: ``text`` is the literal's source between its double
    quotes, ``{...}`` its f-string fields (``fields=False``: a plain string). Where it is too
    long it is split after spaces (never in a field; at the end of a clause where that keeps a
    line well filled) into literals Python concatenates, each on its line aligned under the
    first, the ``f`` prefix only on those that hold a field."""
    column = indent + len(head)

    def literal(line: str) -> str:
        return ("f" if fields and ("{" in line or "}" in line) else "") + f'"{line}"'

    lines = _fill(_words(text, fields), width - column, lambda line: len(literal(line)),
                  width - column - len(tail))
    return head + ("\n" + " " * column).join(literal(line) for line in lines) + tail


def cpp_string_call(head: str, text: str, tail: str = ");", *, indent: int,
                    width: int = 100) -> str:
    """``head`` (``opgen::Fail(``), ``text`` as C++ string literals (:func:`cpp_string`) and
    ``tail``, from column ``indent`` within ``width`` columns: split as :func:`py_string_call`
    splits, into adjacent literals, which C++ joins, aligned under the first."""
    column = indent + len(head)
    lines = _fill(_words(text, fields=False), width - column, lambda line: len(cpp_string(line)),
                  width - column - len(tail))
    return head + ("\n" + " " * column).join(cpp_string(line) for line in lines) + tail


_CODE_SPAN = re.compile(r"`[^`]+`")


def nobreak(text: str) -> str:
    """``text`` (a file name, say) that :func:`comment_text`, :func:`py_docstring` and
    :func:`doc_entry` keep on one line."""
    return text.replace(" ", "\0")


def _prose_lines(text: str, width: int, **options: Any) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` columns (``options`` as
    :func:`textwrap.wrap` takes them), never inside a `code span` or :func:`nobreak` text, nor
    after a backslash (which would splice a C++ comment's next line into it)."""
    kept = _CODE_SPAN.sub(lambda m: m.group().replace(" ", "\0"), text).replace("\\ ", "\\\0")
    lines = textwrap.wrap(kept, width, break_long_words=False, break_on_hyphens=False,
                          **options)
    return [line.replace("\0", " ") for line in lines]


def comment_text(text: str, *, indent: int = 0, width: int = 100, prefix: str = "// ") -> str:
    """Prose ``text`` as comment lines (``prefix``: ``// `` or ``# ``) from column ``indent``
    within ``width`` columns, broken at spaces (not in a `code span`); continuation lines carry
    their indentation."""
    lines = _prose_lines(text, width - indent - len(prefix))
    return ("\n" + " " * indent).join(prefix + line for line in lines)


def with_comment(statement: str, comment: str, *, indent: int, width: int = 100,
                 prefix: str = "  # ") -> str:
    """``statement`` (from column ``indent``, continuation lines carrying their indentation) with
    ``comment`` at the end of its last line where it fits there, else on the line above
    (``# Comment.``, capitalized unless it starts with a name like ``x_``)."""
    last = statement.rsplit("\n", 1)[-1]
    if (indent if last == statement else 0) + len(last) + len(prefix) + len(comment) <= width:
        return statement + prefix + comment
    first = comment.split(" ", 1)[0]
    above = prefix.strip() + " " + (comment[:1].upper() + comment[1:] if first.isalpha()
                                    else comment)
    return above + ("" if above.endswith(".") else ".") + "\n" + " " * indent + statement


def py_docstring(text: str, *, indent: int = 4, width: int = 100) -> str:
    """``text`` (docstring source) as a one-paragraph ``\"\"\"docstring\"\"\"`` from column
    ``indent``, wrapped at spaces within ``width`` columns; continuation lines carry their
    indentation."""
    lines = _prose_lines(text, width - indent, initial_indent='"""')
    if indent + len(lines[-1]) + 3 > width:
        lines += ['"""']
    else:
        lines[-1] += '"""'
    return ("\n" + " " * indent).join(lines)


def doc_entry(text: str, *, indent: int = 8, width: int = 100) -> str:
    """An entry of a docstring's ``Args:`` or ``Returns:`` (``name: what``) from column
    ``indent``, wrapped within ``width`` columns, its continuation lines four columns in."""
    lines = _prose_lines(text, width - indent, subsequent_indent="    ")
    return ("\n" + " " * indent).join(lines)


def deploy_model(inputs: list[str], scaled: str | None) -> dict[str, str]:
    """What ``templates/partials/deploy_model.py.jinja`` prints that names the inputs, wrapped:
    the model's ``forward`` line (``forward_def``) and its call of the op (``op_call``), which
    multiplies ``scaled``, where given, by the model's parameter."""
    args = [f"{i} * self.scale" if i == scaled else i for i in inputs]
    return {
        "forward_def": wrap_code(f"def forward(self, {', '.join(inputs)}):", indent=4),
        "op_call": wrap_code(f"return self.op({', '.join(args)}, **self.attrs)", indent=8),
    }


def comment_lines(text: str, *, width: int = 100) -> list[str]:
    """``text`` (a formula) as ``//`` comment lines from column 0 within ``width``, broken as
    :func:`wrap_expression` breaks code, continuation lines indented four more."""
    first, *rest = wrap_expression(cpp_comment(text), indent=3, width=width).split("\n")
    return ["// " + first, *("//     " + line.strip() for line in rest)]


def py_def(name: str, params: list[str], returns: str) -> str:
    """A wrapper's ``def name(params) -> returns:`` line, wrapped within 100 columns: the
    parameters aligned after the parenthesis, or, where the return annotation leaves them no room
    there, four columns in on lines of their own, the annotation after the closing parenthesis."""
    text = wrap_call(f"def {name}", params, f" -> {returns}:")
    if all(len(line) <= 100 for line in text.split("\n")):
        return text
    return f"def {name}(\n    " + wrap_hanging(", ".join(params) + ",", indent=4) + \
        f"\n) -> {returns}:"


def static_variables(op: str, inputs: list[str], dtypes: list[str] | None = None,
                     first: str | None = None, optional: list[str] | None = None
                     ) -> dict[str, Any]:
    """What ``templates/partials/wrapper_static_variables.py.jinja`` prints that names the op or
    its inputs, wrapped: the loop over the inputs (``loop``), its refusal of an eager tensor
    (``eager``) and of anything else that is not a variable (``not_variable``), with the
    ``optional`` inputs' None let through (``skip_none``); with ``dtypes``,
    the loop's refusal of a dtype (``unsupported``, from column 12) and, by input, the refusal of
    one that is not ``first``'s (``dtype_differs``, from 8)."""
    pairs = ", ".join(f'("{i}", {i})' for i in inputs) + ("," if len(inputs) == 1 else "")
    text: dict[str, Any] = {
        "loop": wrap_code(f"for name, variable in ({pairs}):", indent=4),
        "eager": py_string_call(
            "raise TypeError(", f"{op}: {{name}} is an eager paddle.Tensor, but Paddle is in "
            "static mode (paddle.enable_static()): pass a static variable", indent=12),
        "not_variable": py_string_call(
            "raise TypeError(", f"{op}: {{name}} is {{variable.__class__.__name__}}, not a "
            "static variable; in static mode (paddle.enable_static()) pass one "
            "(paddle.static.data, an op's output)", indent=12),
    }
    text["skip_none"] = ""
    if optional:
        which = f'== "{optional[0]}"' if len(optional) == 1 else \
            "in (" + ", ".join(f'"{n}"' for n in optional) + ")"
        text["skip_none"] = wrap_code(f"if variable is None and name {which}:", indent=8)
    if dtypes:
        text["unsupported"] = py_string_call(
            "raise TypeError(", f"{op}: {{name}} is {{_dtype_name(variable)}}; {op} supports "
            f"{', '.join(dtypes)}", indent=12)
        text["dtype_differs"] = {i: py_string_call(
            "raise TypeError(", f"{op}: {i} is {{_dtype_name({i})}} but {first} is "
            f"{{_dtype_name({first})}}; the inputs must share one dtype", indent=8)
            for i in inputs if i != first}
    return text


def dtype_checks(op: str, inputs: list[str], first: str, dtypes: list[str]) -> dict[str, Any]:
    """What ``templates/partials/wrapper_check_dtypes.py.jinja`` prints that names the op or its
    inputs, wrapped: its functions' ``def`` lines (``check_def``, ``explain_def``) and, by input,
    its errors (``unsupported``; ``dtype_differs`` and ``place_differs`` for those compared with
    ``first``)."""
    tensors = [f"{i}: paddle.Tensor" for i in inputs]
    return {
        "check_def": py_def("_check_dtypes", tensors, "None"),
        "explain_def": py_def("_explain_failure", tensors, "None"),
        "unsupported": {i: py_string_call(
            "raise TypeError(", f"{op}: {i} is {{_dtype_name({i})}}; {op} supports "
            f"{', '.join(dtypes)}", indent=8) for i in inputs},
        "dtype_differs": {i: py_string_call(
            "raise TypeError(", f"{op}: {i} is {{_dtype_name({i})}} but {first} is "
            f"{{_dtype_name({first})}}; the inputs must share one dtype", indent=8)
            for i in inputs},
        "place_differs": {i: py_string_call(
            "raise ValueError(", f"{op}: {i} is on {{{i}.place}} but {first} is on "
            f"{{{first}.place}}; the inputs must be on one device", indent=8) for i in inputs},
    }


def py_returns(outputs: int) -> str:
    """The return annotation of a wrapper with ``outputs`` outputs."""
    return "paddle.Tensor" if outputs == 1 else f"tuple[{', '.join(['paddle.Tensor'] * outputs)}]"


def string_lines(text: str, width: int) -> list[str]:
    """``text`` as Python string literals of at most ``width`` characters, to concatenate."""
    lines = textwrap.wrap(text, width, drop_whitespace=False)
    return ['"' + line.replace("\\", "\\\\").replace('"', '\\"') + '"' for line in lines]

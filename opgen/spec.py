"""The op spec: YAML in, a validated :class:`Spec` out, or one :class:`SpecError` with file:line.

Loading happens in three steps, each of which may fail with the line it points at:

1. YAML is composed into nodes (syntax errors and duplicate keys carry PyYAML's marks);
2. the data is validated by the pydantic model :class:`OpSpec` (unknown keys are rejected);
3. names and expressions are checked together: identifiers, duplicates, the forward and backward
   sections against inputs and outputs, every expression through :mod:`opgen.expr`, and the
   registered op name against the installed Paddle's own ops.
"""

from __future__ import annotations

import ast
import datetime
import difflib
import functools
import importlib
import math
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import ErrorDetails

from .errors import SpecError
from .expr import Emitted, ExprError, Type, check_baseline, compile_expr
from .names import (
    derived_name_problem,
    free_op_name,
    identifier_problem,
    modules_paddle_loads,
    op_name_problem,
    paddle_builtin_ops,
)
from .template_files import COMMON, TEMPLATE_SUFFIX, template_sources

Dtype = Literal["float32", "float64", "float16", "bfloat16"]
DTYPES: tuple[Dtype, ...] = ("float32", "float64", "float16", "bfloat16")
DEFAULT_DOMAIN: tuple[float, float] = (-3.0, 3.0)
INT32_RANGE = (-(2**31), 2**31 - 1)
INT64_RANGE = (-(2**63), 2**63 - 1)
#: float attrs reach the kernels as doubles, which float32, float16 and bfloat16 kernels round to
#: float (docs/spec.md, "Attrs")
FLOAT32_MAX = 3.4028234663852886e38

Path_ = tuple[str | int, ...]
#: The largest spec file read: a spec is a page of YAML, and its text is copied into every
#: generated file.
MAX_SPEC_BYTES = 256 * 1024
#: The longest summary, in characters.
MAX_SUMMARY = 200
#: How deeply YAML lists and mappings may nest; a spec needs four levels (attrs.x.default).
MAX_YAML_DEPTH = 20


def _expression_text(value: Any) -> Any:
    """Let a bare number stand for an expression (``out: 0``); everything else is checked later."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    return value


def _interval(value: Any) -> Any:
    """A domain is written as a two-item list ``[low, high]``."""
    if not isinstance(value, list):
        raise ValueError(f"expected [low, high], got {_shown(value)}")
    if len(value) != 2:
        raise ValueError(f"expected [low, high], got {len(value)} item{'s' * (len(value) != 1)}")
    return value


def _summary(text: str) -> str:
    """A summary is one line of printable text (surrounding whitespace dropped): it heads the
    generated files' comments and docstrings."""
    text = text.strip()
    bad = next((c for c in text if not c.isprintable()), None)
    if bad is not None:
        what = "a line break" if bad in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029" else \
            f"the unprintable character {bad!r}"
        raise ValueError(f"must be one line of printable text; it has {what}")
    if len(text) > MAX_SUMMARY:
        raise ValueError(f"{len(text)} characters, more than {MAX_SUMMARY}: a summary is one "
                         "line (say more in a comment of the spec)")
    return text


def _backward(value: Any) -> Any:
    """``backward:`` is ``auto`` or a mapping; anything else is refused here, in those words,
    where pydantic would report each member of the union in its own."""
    if value is None or value == "auto" or isinstance(value, dict):
        return value
    raise ValueError(f"expected auto or a mapping of each input's gradient (x: grad_out * 2), "
                     f"got {_shown(value)}")


def op_name_of(model: Any) -> str:
    """The op a spec model registers: its ``op_name:`` as written (even an empty one, which the
    checks refuse), else ``custom_<name>``."""
    return model.op_name if model.op_name is not None else f"custom_{model.name}"


def _as_written(value: object) -> object:
    """A spec version as YAML wrote it: ``true`` and ``1.0`` equal 1 in Python, not in a spec."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else value


Expression = Annotated[StrictStr, BeforeValidator(_expression_text)]
#: ``version: 1``, the only version there is.
SpecVersion = Annotated[Literal[1], BeforeValidator(_as_written)]
Interval = Annotated[tuple[StrictFloat, StrictFloat], BeforeValidator(_interval)]


class AttrSpec(BaseModel):
    """One attribute: a compile-time-constant argument of the op, with its default."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["bool", "int", "int64", "float", "str"]
    default: bool | int | float | str

    @field_validator("default", mode="plain")
    @classmethod
    def _default_matches_type(cls, value: Any, info: ValidationInfo) -> bool | int | float | str:
        kind = info.data.get("type")
        if kind is None:  # the type itself is wrong; that is the error to report
            return value
        return _attr_default(value, kind, float32_use=", the dtype the math runs in for float32 "
                             "and 16-bit inputs")


def _attr_default(value: Any, kind: str, *, float32_use: str = "") -> bool | int | float | str:
    """``value`` as the default of an attr of type ``kind``, or ValueError saying why it is not
    (``float32_use``: what a float default beyond float32's range says float32 is used for)."""
    if value is None:
        raise ValueError(f"no value given; expected a {kind}")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind in ("int", "int64") and number and isinstance(value, int):
        low, high = INT32_RANGE if kind == "int" else INT64_RANGE
        if not low <= value <= high:
            fits_int64 = INT64_RANGE[0] <= value <= INT64_RANGE[1]
            advice = "; use type int64" if kind == "int" and fits_int64 else ""
            raise ValueError(f"{value} does not fit in {kind} "
                             f"({32 if kind == 'int' else 64}-bit){advice}")
        return value
    if kind == "float" and number:
        try:
            as_float = float(value)
        except OverflowError:  # an int with hundreds of digits
            as_float = math.inf
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{_shown(value)} is not finite")
        if abs(as_float) > FLOAT32_MAX:
            raise ValueError(f"{_shown(value)} overflows float32{float32_use}")
        return as_float
    if kind == "str" and isinstance(value, str):
        if "\0" in value:  # Paddle's attr is a C string at the C++ end of the call
            raise ValueError("a str attr cannot hold a NUL character ('\\0')")
        lone = next((c for c in value if "\ud800" <= c <= "\udfff"), None)
        if lone is not None:
            raise ValueError(f"{ascii(lone)[1:-1]} is half of a UTF-16 pair, not a character: "
                             "a str attr reaches C++ as UTF-8")
        return value
    hint = ""
    if kind != "str" and isinstance(value, str) and _reads_as(value, kind):
        hint = " (remove the quotes)"
    elif kind == "bool" and number:
        hint = " (write true or false)"
    elif kind == "str" and isinstance(value, (int, float, datetime.date)):  # bool is an int
        hint = " (quote it)"
    article = "an" if kind in ("int", "int64") else "a"
    raise ValueError(f"{_shown(value)} is not {article} {kind}{hint}")


def _reads_as(text: str, kind: str) -> bool:
    """Whether ``text`` unquoted would be a YAML value of attr type ``kind``."""
    try:
        loaded = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return False
    if isinstance(loaded, bool):
        return kind == "bool"
    if isinstance(loaded, int):
        return kind in ("int", "int64", "float")
    return isinstance(loaded, float) and kind == "float"


class OpSpec(BaseModel):
    """Version 1 of the spec format, exactly as written in YAML."""

    model_config = ConfigDict(extra="forbid")

    version: SpecVersion = 1
    name: StrictStr
    op_name: StrictStr | None = None
    kind: Literal["elementwise", "rowwise"]
    summary: Annotated[StrictStr, AfterValidator(_summary)] = ""
    inputs: list[StrictStr] = Field(min_length=1)
    outputs: list[StrictStr] = Field(min_length=1)
    attrs: dict[StrictStr, AttrSpec] = Field(default_factory=dict)
    dtypes: list[Dtype] = Field(default_factory=lambda: list(DTYPES), min_length=1)
    domain: dict[StrictStr, Interval] = Field(default_factory=dict)
    forward: dict[StrictStr, Expression] = Field(min_length=1)
    backward: Annotated[dict[StrictStr, Expression] | Literal["auto"] | None,
                        BeforeValidator(_backward)] = None
    #: under paddle.amp.auto_cast: compute in the inputs' dtype (promoted to float32 where they
    #: differ), in the autocast dtype, or in float32 (docs/deploy.md, "AMP")
    amp: Literal["follow", "autocast", "float32"] = "follow"
    #: input -> output: an in-place variant NAME_ whose output is written over that input
    inplace: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    baseline: StrictStr | None = None


@dataclass(frozen=True)
class Spec:
    """A loaded, fully checked spec, with its expressions compiled.

    ``forward`` holds every entry of the forward in the order it is computed: the intermediates
    (names that are not outputs) and the outputs. ``backward`` likewise ends with each input's
    gradient (keyed by the input's name); before them come the forward intermediates that the
    backward reads (recomputed there) and the backward's own intermediates. With ``backward:
    auto`` those are the derived ones. ``forward_source`` and ``backward_source`` are the
    expressions' text, on one line, in the same order.
    """

    path: Path
    model: OpSpec
    forward: dict[str, Emitted]
    backward: dict[str, Emitted] | None
    lines: dict[Path_, int]
    baseline: ast.Expression | None = None   # the checked tree that `opgen bench` evaluates
    forward_source: dict[str, str] = field(default_factory=dict)
    backward_source: dict[str, str] = field(default_factory=dict)
    #: what a kind with its own schema found checking the spec (kind: custom), for its templates
    kind_data: Any = None
    #: The backward's own derivative (the elementwise kind derives it): the intermediates it
    #: recomputes, then the gradient of each backward input it has one for, keyed by that input's
    #: name (an op input, or ``grad_<output>``); None where it is not derived.
    double_backward: dict[str, Emitted] | None = None
    double_backward_source: dict[str, str] = field(default_factory=dict)
    #: rowwise: each input's role (element, column or row) and each output's (element or row)
    input_roles: dict[str, str] = field(default_factory=dict)
    output_roles: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def op_name(self) -> str:
        return op_name_of(self.model)

    def line(self, *path: str | int) -> int:
        """The 1-based line of the YAML entry at ``path`` (or of its closest parent)."""
        return _line_of(self.lines, path)


#: The loaders of kinds whose specs have a schema of their own, by kind name: (YAML data, its
#: lines, path, check_builtins=...) -> the checked Spec. opgen.kinds fills it when imported (the
#: first load imports it); other kinds' specs are checked here.
SCHEMAS: dict[str, Callable[..., Spec]] = {}
#: Each kind's own rules for the fields of the schema here that not every kind honours (``amp:``,
#: ``inplace:``), by kind name: (model, fail) -> None, raising ``fail(key path, message)``. They
#: run once names and domains are checked, before the expressions compile. opgen.kinds fills it
#: with every kind whose spec is checked here.
KIND_CHECKS: dict[str, Callable[[OpSpec, Callable[..., SpecError]], None]] = {}
#: What a kind derives from its checked spec, by kind name: Spec -> Spec (the elementwise kind's
#: double backward). opgen.kinds fills it.
KIND_DERIVATIONS: dict[str, Callable[[Spec], Spec]] = {}


def load(path: Path | str, *, check_builtins: bool = True) -> Spec:
    """Read, validate and compile the spec at ``path``; raise :class:`SpecError` if it is wrong."""
    path = Path(path)
    try:
        info = path.stat()
        if stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode):  # open() would wait
            raise SpecError(path, None, "a pipe or socket, not a spec file")
        _check_size(info.st_size, path)
        with path.open("rb") as file:
            raw = file.read(MAX_SPEC_BYTES + 1)  # not a regular file: its size said nothing
    except FileNotFoundError:
        if path.is_symlink():
            raise SpecError(path, None, f"a link to {os.readlink(path)}, which does not "
                            "exist") from None
        inside = path.parent / path.stem / path.name  # `opgen new` puts it in the op's folder
        hint = f" (did you mean {inside}?)" if path.suffix and inside.is_file() else ""
        raise SpecError(path, None, f"no such spec file{hint}") from None
    except OSError as exc:
        raise SpecError(path, None, f"cannot read spec: {exc.strerror or exc}") from None
    _check_size(len(raw), path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = _newlines(raw[:exc.start].decode("utf-8"))
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1  # in characters, as editors count
        raise SpecError(path, line, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at column "
                        f"{column}") from None
    return loads(_newlines(text), path, check_builtins=check_builtins)


def _newlines(text: str) -> str:
    """Line ends as text mode reads them: \r\n and \r as \n."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _check_size(size: int, path: Path) -> None:
    """Refuse a spec of more than :data:`MAX_SPEC_BYTES`, before anything reads it all."""
    if size > MAX_SPEC_BYTES:
        raise SpecError(path, None, f"the spec file is larger than {MAX_SPEC_BYTES // 1024} KiB, "
                        "the limit for a spec")


def loads(text: str, path: Path | str = "<spec>", *, check_builtins: bool = True) -> Spec:
    """Like :func:`load`, for spec text that claims to come from ``path``."""
    path = Path(path)
    _register_kinds()
    _check_size(len(text.encode("utf-8", "surrogatepass")), path)
    data, lines = _parse_yaml(text, path)
    if not isinstance(data, dict):
        raise SpecError(path, lines.get((), 1),
                        "a spec is a YAML mapping (name: ..., inputs: ..., forward: ...)")
    kind = data.get("kind")
    own = SCHEMAS.get(kind) if isinstance(kind, str) else None
    if own is not None:  # a kind with its own schema (kind: custom) checks its spec itself
        spec = own(data, lines, path, check_builtins=check_builtins)
        problem = _file_name_problem(spec.name, spec.model.kind, check_builtins)
        if problem:
            raise SpecError(path, spec.line("name"), problem)
        return spec
    _check_kind(data, path, lines)  # before the sections, which other kinds write otherwise
    roles = {section: _roles(data, section, path, lines) for section in ROLES}
    try:
        model = OpSpec.model_validate(data)
    except ValidationError as exc:
        raise _first_validation_error(exc, path, lines) from None
    return _check(model, path, lines, check_builtins=check_builtins, roles=roles)


#: The roles a rowwise op's inputs and outputs may declare (``inputs: {x: element, w: column}``),
#: with what each means.
ROLES: dict[str, dict[str, str]] = {
    "inputs": {"element": "per-element [*, C]", "column": "per-column [C]",
               "row": "per-row [*] or [*, 1]"},
    "outputs": {"element": "per-element [*, C]", "row": "per-row [*]"},
}


def _check_kind(data: dict[str, Any], path: Path, lines: dict[Path_, int]) -> None:
    """An unknown, missing or misspelt ``kind:`` is the spec's first error: a custom op's spec
    misread as another kind's would fail on sections that kind writes otherwise."""
    names = list(importlib.import_module("opgen.kinds").KINDS)
    kind = data.get("kind")
    if isinstance(kind, str) and kind in names:
        return
    choices = ", ".join(f"'{name}'" for name in names)
    line = _line_of(lines, ("kind",))
    if "kind" not in data:
        message = f"missing required key 'kind'; expected one of {choices}"
    elif kind is None:
        message = f"kind: no kind given; expected one of {choices}"
    elif isinstance(kind, str):
        message = f"kind: unknown kind '{kind}'; expected one of {choices}{_guess(kind, names)}"
    else:
        message = f"kind: expected one kind of {choices}, got {_shown(kind)}"
    raise SpecError(path, line, message)


def _roles(data: dict[str, Any], section: str, path: Path,
           lines: dict[Path_, int]) -> dict[str, str] | None:
    """The roles declared by ``section`` written as a mapping (name: role), which becomes the
    list of its names (their lines moved to the list's indices); None for a list. A role that is
    not one of :data:`ROLES` (a list, a mapping: anything) is refused here: in a rowwise op as a
    wrong role, in an elementwise one as roles it cannot have, which :func:`_check` says of valid
    roles there too, once the schema is checked."""
    value = data.get(section)
    if data.get("kind") == "rowwise" and value is not None and \
            not isinstance(value, (list, dict)):  # the schema would offer the list alone
        example = "[x, weight] or {x: element, weight: column}" if section == "inputs" else \
            "[out] or {out: element, rstd: row}"
        raise SpecError(path, _line_of(lines, (section,)), f"{section}: expected a list of "
                        f"{section[:-1]} names or a mapping of each to its role, e.g. "
                        f"{example}; got {_shown(value)}")
    if not isinstance(value, dict):
        return None
    allowed = ROLES[section]
    choices = ", ".join(f"{r} ({what})" for r, what in allowed.items())
    for name, role in value.items():
        if isinstance(role, str) and role in allowed:
            continue
        if data.get("kind") != "rowwise":
            raise SpecError(path, _line_of(lines, (section,)), _roles_elsewhere(section))
        where = f"{section}.{name}"
        if role is None:
            message = f"{where}: no role given; expected one of {choices}"
        elif isinstance(role, str):
            message = f"{where}: unknown role '{role}'; expected one of {choices}"
        else:  # a list or a mapping (which `in` cannot even look up), a number
            message = f"{where}: expected one role of {choices}, got {_shown(role)}"
        raise SpecError(path, _line_of(lines, (section, name)), message)
    for i, name in enumerate(value):
        lines[(section, i)] = _line_of(lines, (section, name))
    data[section] = list(value)
    return dict(value)


def _roles_elsewhere(section: str) -> str:
    """What an elementwise op's ``section`` written as roles (a mapping) is told."""
    return (f"{section}: roles ({', '.join(ROLES[section])}) are for kind: rowwise; an "
            f"elementwise op lists its {section}: [a, b]")


# -- step 1: YAML with line numbers -------------------------------------------------------------

class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e-3`` and ``1.0e5`` as floats the way YAML 1.2 does.

    YAML 1.1 wants a dot and a signed exponent (``1.0e-3``); a float attr's default written
    ``1e-3`` would otherwise be the string '1e-3'.
    """


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _parse_yaml(text: str, path: Path) -> tuple[Any, dict[Path_, int]]:
    _check_nesting(text, path)
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # raised on an unprintable character, before parsing
        line = text[:exc.position].count("\n") + 1
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise SpecError(path, line, f"invalid YAML: character {char!r} is not "
                        "allowed") from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError(path, 1, "the spec is empty")
        lines: dict[Path_, int] = {}
        _record_lines(node, (), lines, path)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        line, message = _yaml_problem(exc)
        raise SpecError(path, line, f"invalid YAML: {message}") from None
    except yaml.YAMLError as exc:
        raise SpecError(path, 1, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, lines


def _check_nesting(text: str, path: Path) -> None:
    """Refuse lists and mappings nested deeper than :data:`MAX_YAML_DEPTH`, on the line where
    they go too deep: PyYAML composes and constructs nodes recursively, and would fail with
    Python's RecursionError. PyYAML's parser, which makes the events read here, does not recurse;
    a YAML error is left to :func:`_parse_yaml` to report."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark is not None else 1
                    raise SpecError(path, line, "invalid YAML: lists and "
                                    f"mappings nested more than {MAX_YAML_DEPTH} deep")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return


# PyYAML problems, reworded for someone who writes YAML rather than parses it.
_YAML_PROBLEMS: dict[str, str] = {
    "expected <block end>": "bad indentation: this line does not line up with the lines above",
    "mapping values are not allowed here": "unexpected ':' (quote a value that contains ': ', "
                                           "or check the indentation)",
    "sequence entries are not allowed here": "unexpected '- ' (quote a value that starts with "
                                             "'-', or check the indentation)",
    "found character '\\t' that cannot start any token": "a tab character: indent with spaces",
    "but found another document": "a spec is one YAML document; found a second one",
}

# PyYAML's tokens as a spec's writer sees them.
_YAML_TOKENS = {"'<alias>'": "'*' (YAML's alias mark: quote a value that holds it)",
                "'<anchor>'": "'&' (YAML's anchor mark: quote a value that holds it)",
                "'<tag>'": "'!' (YAML's tag mark: quote a value that holds it)"}

# Errors whose cause is where something was opened, not where PyYAML gave up looking for its end.
_OPENED = {
    "while parsing a flow sequence": "'['",
    "while parsing a flow mapping": "'{'",
    "while scanning a quoted scalar": "quote",
}


def _yaml_problem(exc: yaml.MarkedYAMLError) -> tuple[int, str]:
    """The 1-based line a YAML error points at, and what to tell the user."""
    problem = exc.problem or exc.context or "invalid YAML"
    problem_line = exc.problem_mark.line + 1 if exc.problem_mark is not None else 1
    context_line = exc.context_mark.line + 1 if exc.context_mark is not None else problem_line
    opened = _OPENED.get(exc.context or "")
    if opened and context_line != problem_line:
        # "[x, y" without its "]" is noticed only at the next line (or the end of the file).
        found = "" if "end of stream" in problem else f" ({problem} on line {problem_line})"
        return context_line, f"{opened} is never closed{found}"
    if exc.context == "while scanning a simple key":  # a line without its ':'
        return context_line, "expected 'key: value', found no ':'"
    if problem.startswith("found character '\\t'") and _after_text(exc.problem_mark):
        return problem_line, "a tab character after text: YAML separates with spaces (or quote " \
            "the value)"
    for start, message in _YAML_PROBLEMS.items():
        if problem.startswith(start):
            return problem_line, message
    for token, mark in _YAML_TOKENS.items():  # PyYAML's names of its tokens
        problem = problem.replace(token, mark)
    return problem_line, problem


def _after_text(mark: yaml.Mark | None) -> bool:
    """Whether ``mark`` has more than whitespace before it on its line."""
    if mark is None or not isinstance(mark.buffer, str):
        return False
    start = mark.buffer.rfind("\n", 0, mark.pointer) + 1
    return bool(mark.buffer[start:mark.pointer].strip())


def _record_lines(node: yaml.Node, where: Path_, lines: dict[Path_, int], path: Path,
                  visited: set[int] | None = None) -> None:
    """Map each path of keys and indices to its line; check keys are unique plain names.

    Keys are taken as the text they are written with, so an attr named ``on`` or an output named
    ``1`` reaches the name checks as a string instead of as YAML's ``True`` or ``1``. A node
    reached again through an alias is not walked twice (aliases may nest, or even recurse).
    """
    lines[where] = node.start_mark.line + 1
    visited = set() if visited is None else visited
    if id(node) in visited:
        return
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            inside = f" in {_dotted(where)}" if where else ""
            if not isinstance(key_node, yaml.ScalarNode):
                form = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
                raise SpecError(path, line, f"a key{inside} must be a name, not a {form}")
            if key_node.tag != "tag:yaml.org,2002:merge":  # keep `<<: *anchor` working
                key_node.tag = "tag:yaml.org,2002:str"
            key = key_node.value
            if key in seen:
                raise SpecError(path, line, f"duplicate key '{key}'{inside}")
            seen.add(key)
            _record_lines(value_node, (*where, key), lines, path, visited)
            lines[(*where, key)] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record_lines(item, (*where, i), lines, path, visited)
    elif isinstance(node, yaml.ScalarNode) and node.style is None:
        _refuse_yaml11_numbers(node, where, path)


# Numbers YAML 1.1 (PyYAML) reads in a way YAML 1.2, Python and most readers do not.
_OCTAL = re.compile(r"[-+]?0[0-9_]+")
_BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")


def _refuse_yaml11_numbers(node: yaml.ScalarNode, where: Path_, path: Path) -> None:
    """Refuse ``010`` (octal 8 to YAML 1.1) and ``1:30`` (base 60: 90), which a spec's reader
    would take for ten and for text: the spec says which it means."""
    if node.tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
        return
    text = node.value
    field = f"{_dotted(where)}: " if where else ""
    if _BASE_60.fullmatch(text):
        raise SpecError(path, node.start_mark.line + 1, f"{field}YAML reads {text} as a base-60 "
                        "number; quote it if it is text, or write the number")
    if node.tag == "tag:yaml.org,2002:int" and _OCTAL.fullmatch(text):
        decimal = text.lstrip("+-").lstrip("0_") or "0"
        sign = "-" if text.startswith("-") else ""
        raise SpecError(path, node.start_mark.line + 1, f"{field}YAML reads {text} as an octal "
                        f"number; write {sign}{decimal} for the decimal one")


def _line_of(lines: dict[Path_, int], where: tuple[str | int, ...]) -> int:
    where = tuple(where)
    while where:
        if where in lines:
            return lines[where]
        where = where[:-1]
    return lines.get((), 1)


def _dotted(where: tuple[Any, ...]) -> str:
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _shown(value: Any) -> str:
    """A value as the user wrote it in YAML, for messages."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (set, frozenset)):  # !!set
        return "a set"
    if isinstance(value, datetime.datetime):  # YAML reads 2024-01-01 10:00:00 as one
        return "a date and time"
    if isinstance(value, datetime.date):
        return "a date"
    if isinstance(value, bytes):  # !!binary
        return "binary data"
    if isinstance(value, int) and abs(value) >= 10 ** 60:  # digits beyond a message's width
        return f"a number of {len(str(abs(value)))} digits"
    return _shortened(repr(value))


# -- step 2: the schema -------------------------------------------------------------------------

# What a mapping or list of the spec holds, for "expected ..., got ..." messages.
_FORMS: dict[Path_, str] = {
    ("inputs",): "a list of input names, e.g. [x, y]",
    ("outputs",): "a list of output names, e.g. [out]",
    ("dtypes",): "a list of dtypes, e.g. [float32, float64]",
    ("attrs",): "a mapping of attr name to {type: ..., default: ...}",
    ("attrs", "*"): "a mapping such as {type: float, default: 1.0}",
    ("domain",): "a mapping of input name to [low, high]",
    ("forward",): "a mapping of each output to its expression",
    ("backward",): "a mapping of each input to the expression of its gradient",
    ("name",): "a name",
    ("op_name",): "a name",
    ("summary",): "one line of text",
    ("inputs", "*"): "a name",
    ("outputs", "*"): "a name",
    ("forward", "*"): "an expression",
    ("backward", "*"): "an expression",
    ("domain", "*", "*"): "a number",
}
# The same, from the type the value should have had.
_BASIC_FORMS = {
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "float_type": "a number",
}
# The noun of a field whose value must be one of a few words.
_CHOICES: dict[str, str] = {"kind": "kind", "dtypes": "dtype", "type": "attr type",
                            "version": "spec version"}


def _first_validation_error(exc: ValidationError, path: Path, lines: dict[Path_, int]) -> SpecError:
    """The error of ``exc`` that comes first in the file, as a :class:`SpecError`.

    Every key of the spec is a string (see :func:`_record_lines`) and no field is validated as a
    union (an attr's default has its own validator), so each error's ``loc`` is exactly the path
    of keys and indices to the value at fault. An unknown key comes before everything else: a
    misspelt ``fwd:`` is the cause of the "missing required key 'forward'" that comes with it.
    """
    errors = sorted(exc.errors(), key=lambda e: (e["type"] != "extra_forbidden",
                                                 _line_of(lines, e["loc"])))
    err = errors[0]
    loc = tuple(err["loc"])
    if err["type"] == "missing" and len(loc) == 1:  # written, but indented under another key?
        nested = sorted((line, where) for where, line in lines.items()
                        if len(where) > 1 and where[-1] == loc[0])
        if nested:
            line, where = nested[0]
            return SpecError(path, line, f"missing required key '{loc[0]}': the one here is "
                             f"inside {_dotted(where[:-1])}; is it indented by mistake?")
    return SpecError(path, _line_of(lines, loc), _schema_message(err, loc))


def _schema_message(err: ErrorDetails, loc: Path_) -> str:
    kind, got = err["type"], err.get("input")
    ctx = err.get("ctx") or {}
    field = _dotted(loc)
    prefix = f"{field}: " if field else ""
    if kind == "extra_forbidden":
        parent = _dotted(loc[:-1])
        allowed = _allowed_keys(loc[:-1])
        return f"unknown key '{loc[-1]}'" + (f" in {parent}" if parent else "") + \
            _suggestion(str(loc[-1]), allowed)
    if kind == "missing":
        parent = _dotted(loc[:-1])
        return (f"{parent}: " if parent else "") + f"missing required key '{loc[-1]}'"
    if kind == "literal_error":
        noun = next((_CHOICES[p] for p in reversed(loc) if isinstance(p, str) and p in _CHOICES),
                    "value")
        choices = str(ctx.get("expected", "")).replace(" or ", ", ")
        if got is None:
            return f"{prefix}no {noun} given; expected one of {choices}"
        return f"{prefix}unknown {noun} {_shown(got)}; expected one of {choices}"
    if kind == "int_parsing_size" or (kind == "float_type" and isinstance(got, int)
                                       and not isinstance(got, bool)):
        if loc == ("version",):
            return f"{prefix}unknown spec version (a number past 64 bits); expected 1"
        return f"{prefix}{_shown(got)} is too large"  # past 4300 digits, or past a double
    if kind == "too_short" and ctx.get("min_length") == 1:
        return f"{prefix}must not be empty"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return f"{prefix}{ctx['error']}"
    if kind.endswith("_type"):
        form = _form(loc) or _BASIC_FORMS.get(kind, kind[:-len("_type")].replace("_", " "))
        # text that YAML read as a number, a date or true: quoted, it is the text
        hint = " (quote it)" if loc == ("summary",) and \
            isinstance(got, (int, float, datetime.date)) else ""
        return f"{prefix}expected {form}, got {_shown(got)}{hint}"
    return f"{prefix}{err['msg']}"


def _form(loc: Path_) -> str | None:
    """What the value at ``loc`` should look like, where the spec format says more than its type."""
    for pattern, form in _FORMS.items():
        if len(pattern) == len(loc) and all(p in ("*", q) for p, q in zip(pattern, loc,
                                                                          strict=True)):
            return form
    return None


def _allowed_keys(where: tuple[Any, ...]) -> list[str]:
    """The keys the mapping at ``where`` may hold, where the schema fixes them."""
    if not where:
        return list(OpSpec.model_fields)
    if len(where) == 2 and where[0] == "attrs":
        return list(AttrSpec.model_fields)
    return []


def closest(word: str, choices: list[str]) -> str | None:
    """The choice ``word`` most likely misspells, or None: a close spelling (``fowrard``,
    ``input``), else an abbreviation whose letters the choice has in order (``fwd``, ``bwd``)."""
    lowered = word.lower().replace("-", "_")
    close = difflib.get_close_matches(lowered, choices, n=1, cutoff=0.6)
    if close:
        return close[0]
    abbreviated = [c for c in choices if lowered and c.startswith(lowered[0])
                   and _is_subsequence(lowered, c)]
    return abbreviated[0] if len(abbreviated) == 1 else None


def _is_subsequence(short: str, long: str) -> bool:
    rest = iter(long)
    return all(char in rest for char in short)


def _guess(word: str, choices: list[str]) -> str:
    """``; did you mean 'x'?`` for a likely misspelling of a choice, else nothing."""
    guess = closest(word, choices)
    return f"; did you mean '{guess}'?" if guess else ""


def _suggestion(word: str, choices: list[str]) -> str:
    """``; did you mean 'x'?`` for a likely misspelling of a choice, else the list of them."""
    if not choices:
        return ""
    guess = closest(word, choices)
    return f"; did you mean '{guess}'?" if guess else f"; allowed: {', '.join(choices)}"


# -- step 3: names and expressions --------------------------------------------------------------

_SINGULAR = {"inputs": "input", "outputs": "output", "attrs": "attr"}
_ARTICLE = {"input": "an input", "output": "an output", "attr": "an attr"}


def _check(model: OpSpec, path: Path, lines: dict[Path_, int], *, check_builtins: bool,
           roles: dict[str, dict[str, str] | None] | None = None) -> Spec:
    def fail(where: tuple[str | int, ...], message: str) -> SpecError:
        return SpecError(path, _line_of(lines, where), message)

    roles = roles or {}
    rowwise = model.kind == "rowwise"
    for section, declared in roles.items():
        if declared is not None and not rowwise:
            raise fail((section,), _roles_elsewhere(section))
    input_roles = roles.get("inputs") or {n: "element" for n in model.inputs}

    problem = identifier_problem(model.name, what="op")
    if problem:
        raise fail(("name",), problem)
    problem = _file_name_problem(model.name, model.kind, check_builtins)
    if problem:
        raise fail(("name",), problem)
    op_name = op_name_of(model)
    problem = op_name_problem(op_name)
    if problem:  # a default op_name comes from `name:`, so the problem is there
        raise fail(("op_name",) if model.op_name is not None else ("name",), problem)

    seen: dict[str, str] = {}
    for section, names in (("inputs", model.inputs), ("outputs", model.outputs),
                           ("attrs", list(model.attrs))):
        what = _SINGULAR[section]
        for i, name in enumerate(names):
            where: tuple[str | int, ...] = (section, i) if section != "attrs" else (section, name)
            problem = identifier_problem(name, what=what)
            if problem:
                raise fail(where, problem)
            if name == model.name:
                raise fail(where, f"{what} name '{name}' is the op's own name")
            if name in seen:
                raise fail(where, f"duplicate name '{name}': already {_ARTICLE[seen[name]]}")
            seen[name] = what
    float_attrs = [n for n, a in model.attrs.items() if a.type == "float"]
    for section, names in (("inputs", model.inputs), ("outputs", model.outputs),
                           ("attrs", list(model.attrs))):
        for i, name in enumerate(names):
            problem = derived_name_problem(name, _SINGULAR[section],
                                           [*model.inputs, *model.outputs], float_attrs)
            if problem:
                raise fail((section, i) if section != "attrs" else (section, name), problem)

    if len(set(model.dtypes)) != len(model.dtypes):
        second = next(i for i, d in enumerate(model.dtypes) if d in model.dtypes[:i])
        raise fail(("dtypes", second), f"duplicate dtype '{model.dtypes[second]}'")

    for name, (low, high) in model.domain.items():
        if name not in model.inputs:
            raise fail(("domain", name), f"domain: '{name}' is not an input "
                       f"(inputs: {', '.join(model.inputs)}){_guess(name, model.inputs)}")
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise fail(("domain", name), f"domain.{name}: need finite low < high, "
                       f"got [{low:g}, {high:g}]")
        if not math.isfinite(high - low):  # numpy's uniform() cannot draw from it
            raise fail(("domain", name), f"domain.{name}: [{low:g}, {high:g}] is wider than a "
                       "double holds (high - low overflows)")

    _kind_check(model.kind)(model, fail)  # amp:, inplace: each kind's own rules

    fwd_symbols = symbols_of(model)
    grads = {f"grad_{n}": "num" for n in model.outputs}
    fwd_unavailable = {
        **{n: "outputs can be read only in backward" for n in model.outputs},
        **{g: "output gradients can be read only in backward" for g in grads},
    }
    taken = {model.name: "the op's name", **{n: _ARTICLE[w] for n, w in seen.items()}}
    varying = frozenset(n for n, r in input_roles.items() if r != "row") if rowwise else None
    if rowwise and "element" not in input_roles.values():
        raise fail(("inputs",), "inputs: a rowwise op needs a per-element input [*, C]: its "
                   "last axis is the row")
    forward = _compile_section(
        _Section(model.forward, "forward", model.outputs, "output", reads_targets=rowwise),
        fwd_symbols, fwd_unavailable, taken, path, lines, varying=varying,
        uniform=frozenset(model.attrs))
    output_roles: dict[str, str] = {}
    if rowwise:
        output_roles = _output_roles(model, forward, roles.get("outputs"), fail)
    backward: _Compiled | None = None
    if model.backward is not None:
        bwd_symbols = symbols_of(model, backward=True)
        grad_names = ", ".join(grads)
        bwd_unavailable = {f"grad_{n}": f"backward computes grad_{n} from {grad_names}"
                           for n in model.inputs}
        derived = model.backward == "auto"
        section = model.backward if isinstance(model.backward, dict) else \
            _derived_backward(model, forward, path, lines,
                              [n for n, r in input_roles.items() if r == "row"] if rowwise
                              else None)
        bwd_varying = None if varying is None else varying | frozenset(
            [o for o, r in output_roles.items() if r == "element"] +
            [f"grad_{o}" for o, r in output_roles.items() if r == "element"])
        backward = _compile_section(
            _Section(section, "backward", model.inputs, "input", derived=derived),
            bwd_symbols, bwd_unavailable, taken, path, lines, outer=forward,
            varying=bwd_varying, uniform=frozenset(model.attrs))

    baseline = None
    if model.baseline is not None:
        baseline = _compile_baseline(model.baseline, fwd_symbols, path, lines)

    if check_builtins:
        builtins = paddle_builtin_ops()
        clash = next((n for n in (op_name, f"{op_name}_grad") if n in builtins), None)
        if clash is not None:
            where = ("op_name",) if model.op_name is not None else ("name",)
            what = f"op_name '{op_name}'" if clash == op_name else \
                f"the gradient op '{clash}' of op_name '{op_name}'"
            raise fail(where, f"{what} is a Paddle built-in op, and registering it would "
                       f"replace Paddle's own; use '{free_op_name(op_name, builtins)}'")

    spec = Spec(path=path, model=model, forward=forward.emitted,
                backward=None if backward is None else backward.emitted, lines=lines,
                baseline=baseline, forward_source=forward.sources,
                backward_source={} if backward is None else backward.sources,
                input_roles=input_roles if rowwise else {}, output_roles=output_roles)
    derive = KIND_DERIVATIONS.get(model.kind)
    return spec if derive is None else derive(spec)


def _register_kinds() -> None:
    """Imports opgen.kinds, which fills SCHEMAS, KIND_CHECKS and KIND_DERIVATIONS: here, at the
    first load, as opgen.kinds imports this module (a module-level import would be a circle)."""
    if not KIND_CHECKS:
        importlib.import_module("opgen.kinds")


#: Modules besides the standard library's that an op's files import, and so that its
#: ``<name>.py`` must not shadow; those that importing the installed Paddle loads come on top
#: (:func:`opgen.names.modules_paddle_loads`).
IMPORTED_MODULES = ("numpy", "paddle", "pytest", "torch", "opgen", "setuptools")


def _file_name_problem(name: str, kind: str, check_paddle: bool) -> str | None:
    """Why the op ``name`` of ``kind`` cannot be generated, or None: its ``<name>.py`` would
    shadow a module its files import (the standard library's too; with ``check_paddle``, also one
    that importing the installed Paddle loads, as the built-in op names are checked), or a file
    its templates name after it (``{{name}}.py``) would be one they name otherwise
    (``setup.py``; ``reference.py`` for kind: custom), or pytest's ``conftest.py``."""
    if name in sys.stdlib_module_names or name in IMPORTED_MODULES:
        return f"op name '{name}' would shadow the Python module '{name}'"
    if check_paddle and name in modules_paddle_loads():
        return f"op name '{name}' would shadow the Python module '{name}', which importing " \
            "Paddle loads"
    named, fixed = _op_files(kind)
    for pattern in named:
        file = pattern.replace("{{name}}", name)
        if file in fixed:
            return f"name: '{name}' is reserved: the file {file} named after the op would " \
                f"clash with {fixed[file]}; use '{name}_op'"
    return None


@functools.cache
def _op_files(kind: str) -> tuple[list[str], dict[str, str]]:
    """The files of an op of ``kind`` that its templates name after it, and the fixed ones with
    what each is, for :func:`_file_name_problem`."""
    named: list[str] = []
    fixed = {"conftest.py": "pytest's conftest.py"}
    for folder in (COMMON, importlib.import_module("opgen.kinds").KINDS[kind].templates):
        for rel in template_sources(folder):
            file = rel.removesuffix(TEMPLATE_SUFFIX)
            if "{{name}}" in file:
                named.append(file)
            elif "{{" not in file:
                fixed[file] = f"the {file} opgen generates"
    return named, fixed


def _kind_check(kind: str) -> Callable[[OpSpec, Callable[..., SpecError]], None]:
    """The rules of ``kind`` (:data:`KIND_CHECKS`); a clear error for a kind that registered
    none (a kind module that forgot to)."""
    check = KIND_CHECKS.get(kind)
    if check is None:
        raise RuntimeError(f"opgen.spec: kind: {kind} registered no rules in opgen.kinds")
    return check


def symbols_of(model: OpSpec, *, backward: bool = False) -> dict[str, Type]:
    """The names the forward's expressions read, with their types: the inputs, and the attrs
    (numbers, conditions; a str attr is typed "str", which no expression may use); with
    ``backward``, those the backward's read too: the outputs and their gradients."""
    symbols: dict[str, Type] = {n: "num" for n in model.inputs}
    symbols.update({n: ("num" if a.type in ("int", "int64", "float")
                        else a.type) for n, a in model.attrs.items()})  # type: ignore[misc]
    if backward:
        symbols.update({n: "num" for n in [*model.outputs, *(f"grad_{o}" for o in model.outputs)]})
    return symbols


def _output_roles(model: OpSpec, forward: _Compiled, declared: dict[str, str] | None,
                  fail: Callable[[tuple[str | int, ...], str], SpecError]) -> dict[str, str]:
    """A rowwise op's output roles: per-element where the expression changes along the row,
    else per-row; where the spec declares them, they must agree."""
    roles: dict[str, str] = {}
    for name in model.outputs:
        found = "element" if forward.emitted[name].varies else "row"
        want = (declared or {}).get(name, found)
        if want != found:
            what = "a per-element value (it changes along the row)" if found == "element" else \
                "a per-row value (reductions over the row, attrs and per-row values only)"
            hint = "; reduce it over the row: sum(...), mean(...), max(...), min(...)" \
                if found == "element" else ""
            raise fail(("forward", name), f"forward.{name}: {what}, but outputs declares "
                       f"'{name}' {ROLES['outputs'][want]}{hint}")
        roles[name] = found
    return roles


@dataclass(frozen=True)
class _Section:
    """A forward or backward section as written (or derived): its entries in order, and which of
    their names are its targets (the outputs, or the inputs whose gradients it gives)."""

    entries: dict[str, str]
    title: str                   # forward or backward
    targets: list[str]
    what: str                    # output or input
    derived: bool = False        # written by opgen (backward: auto), not by the user
    reads_targets: bool = False  # later entries may read the targets computed before them


@dataclass(frozen=True)
class _Compiled:
    emitted: dict[str, Emitted]  # every entry to compute, in order
    sources: dict[str, str]      # the expression of each, on one line
    types: dict[str, Type]       # the type of each
    intermediates: frozenset[str]  # the section's own entries that are not targets


def _compile_section(section: _Section, symbols: dict[str, Type], unavailable: dict[str, str],
                     taken: dict[str, str], path: Path, lines: dict[Path_, int], *,
                     outer: _Compiled | None = None,
                     varying: frozenset[str] | None = None,
                     uniform: frozenset[str] = frozenset()) -> _Compiled:
    """Compile a section's entries in order: a target is an output (or input gradient), any other
    name an intermediate that later entries of the section read. A backward may also read the
    forward's intermediates (``outer``): they are computed again there, first."""
    title, targets, what = section.title, section.targets, section.what

    def line(key: str | None = None) -> int:
        return _line_of(lines, (title,) if key is None or section.derived else (title, key))

    def not_a_target(key: str, why: str = "") -> SpecError:
        return SpecError(path, line(key), f"{title}: '{key}' is not {_ARTICLE[what]} "
                         f"({what}s: {', '.join(targets)}){why}{_guess(key, targets)}")

    known = dict(symbols)
    if outer is not None:
        known.update({n: outer.types[n] for n in outer.intermediates})
    vary: set[str] | None = None if varying is None else set(varying)
    if vary is not None and outer is not None:
        vary |= {n for n in outer.intermediates if outer.emitted[n].varies}
    keys = list(section.entries)
    for key in keys:
        if key in targets or section.derived:
            continue
        if key in taken and what == "output":  # a forward's other keys are intermediates
            raise SpecError(path, line(key), f"{title}: '{key}' is already {taken[key]}; name "
                            "this intermediate differently")
        if key in taken and what == "input":  # meant as an intermediate, or an output's
            # gradient
            raise SpecError(path, line(key), f"{title}: '{key}' is {taken[key]}, not an input "
                            f"(inputs: {', '.join(targets)}); an intermediate takes a name of "
                            "its own")
        if key in taken or key in symbols or key in unavailable:
            raise not_a_target(key)
        if outer is not None and key in outer.sources:
            raise SpecError(path, line(key), f"{title}: '{key}' is already a forward "
                            "intermediate; the backward reads it as it is: name this one "
                            "differently")
        problem = identifier_problem(key, what="intermediate")
        if problem:
            raise SpecError(path, line(key), f"{title}: {problem}")

    compiled: dict[str, Emitted] = {}
    types: dict[str, Type] = {}
    is_target = set(targets)  # (a list: thousands of outputs made this loop cubic)
    below = {k: f"'{k}' is defined below, on line {line(k)}: define an intermediate before the "
             "expressions that read it" if k not in is_target else
             f"'{k}' is computed below, on line {line(k)}: an expression reads only what is "
             "computed above it" for k in keys}
    for index, key in enumerate(keys):
        source = section.entries[key]
        where = f"{title}.{key}"
        later = {k: below[k] for k in keys[index:] if k not in is_target}
        scope = {**known, **{k: t for k, t in types.items()
                             if k not in is_target or section.reads_targets}}
        hidden = {k: v for k, v in unavailable.items() if k not in scope}
        if section.reads_targets:
            hidden.update({k: below[k] for k in keys[index:] if k in is_target})
        try:
            emitted = compile_expr(source, scope, unavailable={**hidden, **later},
                                   varying=None if vary is None else frozenset(vary),
                                   uniform=uniform)
        except ExprError as exc:
            error = _expression_error(exc, where, source, path, line(key))
            if key in OpSpec.model_fields:  # `baseline:` under `backward:`, say
                error = SpecError(path, error.line, f"{error.message} ('{key}' is a key of the "
                                  f"spec itself: is it indented under {title}: by mistake?)")
            raise error from None
        if key not in targets and not emitted.reductions and emitted.names <= uniform:
            uniform |= {key}  # an intermediate of attrs alone: the same for every element
        if vary is not None and emitted.varies and \
                (key not in targets or section.reads_targets):
            vary.add(key)  # a later entry reading it varies too (an output, in a forward)
        if key in targets and emitted.type != "num":
            raise SpecError(path, line(key), f"{where}: {_shown_source(source)} is a "
                            "condition, not a number; use where(cond, a, b) to choose between "
                            "numbers")
        compiled[key] = emitted
        types[key] = emitted.type

    read = set().union(*(e.names for e in compiled.values()))
    for key in keys:
        if key not in targets and key not in read:
            raise not_a_target(key, ", and no later expression reads it as an intermediate")
    for target in targets:
        if target not in section.entries:
            raise SpecError(path, line(), f"{title}: no expression for {what} '{target}'")

    emitted_all: dict[str, Emitted] = {}
    sources: dict[str, str] = {}
    if outer is not None:  # the forward intermediates the backward reads, first, in their order
        needed = _needed(read, outer)
        for name, value in outer.emitted.items():
            if name in needed:
                emitted_all[name] = value
                sources[name] = outer.sources[name]
    for key in keys:
        emitted_all[key] = compiled[key]
        sources[key] = " ".join(section.entries[key].split())
    return _Compiled(emitted_all, sources, types,
                     frozenset(k for k in keys if k not in targets))


def _needed(read: set[str], outer: _Compiled) -> set[str]:
    """The intermediates of ``outer`` that ``read`` names, with those they read in turn."""
    intermediates = outer.intermediates
    needed: set[str] = set()
    stack = [n for n in read if n in intermediates]
    while stack:
        name = stack.pop()
        if name not in needed:
            needed.add(name)
            stack += [n for n in outer.emitted[name].names if n in intermediates]
    return needed


def _derived_backward(model: OpSpec, forward: _Compiled, path: Path, lines: dict[Path_, int],
                      per_row_inputs: list[str] | None = None) -> dict[str, str]:
    """``backward: auto``: each input's gradient, derived from the forward (a rowwise one's
    with ``per_row_inputs``)."""
    from .autodiff import AutodiffError, backward_of, rowwise_backward_of, share_calls, share_terms

    reserved = [model.name, *symbols_of(model, backward=True), *forward.sources]
    try:
        if per_row_inputs is not None:
            return rowwise_backward_of(forward.sources, model.inputs, model.outputs,
                                       per_row_inputs, reserved=reserved)
        known = {k: v for k, v in forward.sources.items() if k in forward.intermediates}
        shared = share_calls(backward_of(forward.sources, model.inputs, model.outputs,
                                         reserved=reserved), reserved, known)
        return share_terms(shared, reserved)
    except AutodiffError as exc:
        raise SpecError(path, _line_of(lines, ("backward",)), f"backward: {exc}") from None
    except RecursionError:  # intermediates that read each other hundreds deep
        raise SpecError(path, _line_of(lines, ("backward",)), "backward: auto: the forward "
                        "nests too deep to derive (a chain of hundreds of intermediates, each "
                        "reading the last); write backward: by hand, or shorten the chain") \
            from None


def _compile_baseline(source: str, symbols: dict[str, Type], path: Path,
                      lines: dict[Path_, int]) -> ast.Expression:
    """The checked tree of ``baseline:`` (see :func:`opgen.expr.check_baseline`)."""
    try:
        return check_baseline(source, symbols)
    except ExprError as exc:
        raise _expression_error(exc, "baseline", source, path,
                                _line_of(lines, ("baseline",))) from None


def _expression_error(exc: ExprError, where: str, source: str, path: Path,
                      line: int) -> SpecError:
    """``where: what is wrong in 'source'; hint`` at ``line``."""
    text = f"{where}: {exc.message}" + (f" in {_shown_source(source)}" if source.strip() else "")
    return SpecError(path, line, text + (f"; {exc.hint}" if exc.hint else ""))


def _shown_source(source: str) -> str:
    """An expression as messages quote it: on one line, shortened where it is long."""
    return _quoted(_shortened(" ".join(source.split())))


def _shortened(text: str, width: int = 60) -> str:
    """``text``, or its start and end around '...' where it is longer than ``width``."""
    if len(text) <= width:
        return text
    half = (width - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def _quoted(text: str) -> str:
    """``text`` in quotes that it does not itself contain, where possible."""
    return f'"{text}"' if "'" in text and '"' not in text else f"'{text}'"


# -- for kinds whose specs have a schema of their own (opgen.kinds.custom) -----------------------
# The same YAML lines, messages and attr rules as the elementwise schema's.
line_of = _line_of
schema_message = _schema_message
shown = _shown
attr_default = _attr_default
summary_text = _summary

# -- for kinds' own rules and derivations (KIND_CHECKS, KIND_DERIVATIONS) ------------------------
guess = _guess
Section = _Section
Compiled = _Compiled
compile_section = _compile_section

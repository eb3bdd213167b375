"""The custom kind: free-form ops whose kernels the user writes (``templates/custom/``).

opgen generates everything around the kernels: registration with shape and dtype inference, the
dispatch over the declared dtypes, the launch context (the inputs' device and stream, the launch
check), the Python wrapper with its input checks, setup.py, the README and a test harness that
compares the op with ``reference.py``. The kernel bodies (``csrc/<name>_cpu.h``,
``csrc/<name>_cuda.cuh``) and ``reference.py`` are the user's: generated once as a working
skeleton, then only merged (:mod:`opgen.merge`) with what a spec change alters around them.

The spec (``kind: custom``) is checked here, not in :mod:`opgen.spec`, which routes it here:

    inputs:
      ids:   {dtype: [int32, int64]}                 # any shape
      table: {dtype: float types, shape: [V, D]}     # rank 2; V and D name its dims
    outputs:
      out:   {dtype: same as table, shape: "[*ids.shape, D]"}
      # hits: {dtype: int64, shape: "[-1]"}          # -1: a size only the kernel knows
    attrs:
      padding_idx: {type: int64, default: -1}
    backward: [table]                                # inputs that get a gradient
    sizes: {V: 50, D: 8}                             # the dims the generated tests use
    # inplace: {x: out}    # optional: NAME_(...) writes output out over input x (same dtype, shape)
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import keyword
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from ..codegen import (
    Attr,
    BackwardStubText,
    OpText,
    attr,
    backward_stub_text,
    comment_text,
    cpp_comment,
    cpp_string,
    deploy_model,
    doc_entry,
    docstring_text,
    double_backward_stub,
    markdown_code,
    nobreak,
    op_list,
    op_text,
    py_def,
    py_docstring,
    py_if,
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
from ..expr import MAX_DEPTH, too_deep
from ..names import (
    CPP_KEYWORDS,
    camel_case,
    derived_name_problem,
    free_op_name,
    identifier_problem,
    op_name_problem,
    paddle_builtin_ops,
)
from ..spec import (
    INT64_RANGE,
    AttrSpec,
    Spec,
    SpecVersion,
    attr_default,
    line_of,
    op_name_of,
    schema_message,
    shown,
    summary_text,
)
from . import Kind

# -- dtypes ----------------------------------------------------------------------------------------

#: dtype -> (C++ type, paddle::DataType enumerator, numpy dtype)
DTYPE_TYPES: dict[str, tuple[str, str, str]] = {
    "bool": ("bool", "BOOL", "bool"),
    "int8": ("int8_t", "INT8", "int8"),
    "uint8": ("uint8_t", "UINT8", "uint8"),
    "int16": ("int16_t", "INT16", "int16"),
    "int32": ("int32_t", "INT32", "int32"),
    "int64": ("int64_t", "INT64", "int64"),
    "float16": ("paddle::float16", "FLOAT16", "float16"),
    "bfloat16": ("paddle::bfloat16", "BFLOAT16", "float32"),
    "float32": ("float", "FLOAT32", "float32"),
    "float64": ("double", "FLOAT64", "float64"),
}
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
#: The most combinations of the inputs' dtypes an op may take: each is a kernel the .cu and .cc
#: instantiate and a case of every generated test (six inputs of every dtype made 500 MB of
#: sources).
MAX_DTYPE_COMBINATIONS = 256
#: The values each integer dtype holds, for an input's ``range:`` (int64's: INT64_RANGE).
_INT_LIMITS = {"bool": (0, 1), "int8": (-2**7, 2**7 - 1), "uint8": (0, 2**8 - 1),
               "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1)}
#: Words a dtype rule may use for a group of dtypes.
DTYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "float types": FLOAT_DTYPES,
    "int types": ("int32", "int64"),
}
_DIM_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: The largest size, index or bound a spec may write: dims are int64 in Paddle and in C++.
INT64_MAX = INT64_RANGE[1]
#: The longest output shape, in characters: a shape is a short list of dims, and its text is
#: parsed by Python (whose parser gives up on a few thousand nested operators) and copied into
#: the generated C++ and Python.
MAX_SHAPE_TEXT = 1000
_SAME_AS = re.compile(r"^same as ([a-z][a-z0-9_]*)$")

# -- the spec, as written --------------------------------------------------------------------------

ScalarAttrType = Literal["bool", "int", "int64", "float", "str"]
VectorAttrType = Literal["int[]", "int64[]", "float[]"]


class CustomAttr(BaseModel):
    """An attr: the elementwise kind's scalar types, plus Paddle's vector attrs."""

    model_config = ConfigDict(extra="forbid")

    type: ScalarAttrType | VectorAttrType
    default: Any

    @field_validator("default", mode="plain")
    @classmethod
    def _default_matches_type(cls, value: Any, info: ValidationInfo) -> Any:
        kind = info.data.get("type")
        if kind is None:
            return value
        if not kind.endswith("[]"):
            return attr_default(value, kind)
        if not isinstance(value, list):
            raise ValueError(f"expected a list such as [1, 2] for a {kind} attr")
        item = kind[:-2]
        try:
            return [attr_default(v, item) for v in value]
        except ValueError as exc:
            raise ValueError(f"an item of the list: {exc}") from None


class TensorSpec(BaseModel):
    """One input or output: its dtype rule and its shape (a constraint for an input, the
    expression that computes it for an output)."""

    model_config = ConfigDict(extra="forbid")

    dtype: StrictStr | list[StrictStr]
    shape: StrictStr | list[StrictStr | StrictInt] | None = None
    range: list[StrictStr | StrictInt] | None = None  # int inputs: where the tests sample
    optional: StrictBool = False  # inputs: may be None (paddle::optional)
    doc: StrictStr = ""


class CustomOpSpec(BaseModel):
    """A ``kind: custom`` spec, exactly as written in YAML."""

    model_config = ConfigDict(extra="forbid")

    version: SpecVersion = 1
    name: StrictStr
    op_name: StrictStr | None = None
    kind: Literal["custom"]
    summary: Annotated[StrictStr, AfterValidator(summary_text)] = ""
    inputs: dict[StrictStr, TensorSpec] = Field(min_length=1)
    outputs: dict[StrictStr, TensorSpec] = Field(min_length=1)
    attrs: dict[StrictStr, CustomAttr] = Field(default_factory=dict)
    backward: list[StrictStr] | None = None
    sizes: dict[StrictStr, StrictInt] = Field(default_factory=dict)
    inplace: dict[StrictStr, StrictStr] = Field(default_factory=dict)  # input -> output

    @property
    def dtypes(self) -> list[str]:
        """Every dtype the op's tensors may have (what the rest of opgen lists)."""
        seen: list[str] = []
        for rule in (t.dtype for t in self.inputs.values()):
            for d in [rule] if isinstance(rule, str) else rule:
                for x in DTYPE_GROUPS.get(d, (d,)):
                    if x in DTYPE_TYPES and x not in seen:
                        seen.append(x)
        return seen


# -- the checked spec ------------------------------------------------------------------------------

@dataclass(frozen=True)
class DtypeRule:
    """A tensor's dtype: one of ``choices``, or that of the input ``same_as``."""

    choices: tuple[str, ...] = ()
    same_as: str | None = None

    @property
    def text(self) -> str:
        if self.same_as is not None:
            return f"same as {self.same_as}"
        return " or ".join(self.choices) if len(self.choices) <= 2 else \
            ", ".join(self.choices[:-1]) + " or " + self.choices[-1]


@dataclass(frozen=True)
class Dim:
    """One dim of an input's shape constraint: a size, a name shared across inputs, or ``...``."""

    size: int | None = None
    name: str | None = None
    ellipsis: bool = False


def _written(dims: tuple[Dim, ...]) -> str:
    """A declared shape as the spec writes it and the errors quote it: ``[..., V, D]``."""
    return "[" + ", ".join("..." if d.ellipsis else str(d.size if d.size is not None else d.name)
                           for d in dims) + "]"


@dataclass(frozen=True)
class Custom:
    """What the checks established about a custom spec, beyond the model."""

    dtypes: dict[str, DtypeRule]            # every input and output
    shapes: dict[str, tuple[Dim, ...] | None]  # input -> constraint; None: any shape
    dims: dict[str, tuple[str, int]]        # dim name -> (input, index; negative from the end)
    out_shapes: dict[str, ast.List]         # output -> its checked expression
    ranges: dict[str, tuple[str, str]]      # int input -> (low, high) as Python expressions


def load_spec(data: dict[str, Any], lines: dict[Any, int], path: Path, *,
              check_builtins: bool) -> Any:
    """A checked :class:`~opgen.spec.Spec` of a ``kind: custom`` spec, or :class:`SpecError`."""
    try:
        model = CustomOpSpec.model_validate(data)
    except ValidationError as exc:
        err, loc = _first_error(exc, lines)
        if err["type"] == "extra_forbidden":
            where = ".".join(str(p) for p in loc[:-1])
            if loc[:1] in (("inputs",), ("outputs",)) and len(loc) == 3:
                allowed = list(TensorSpec.model_fields)
            elif loc[:1] == ("attrs",) and len(loc) == 3:
                allowed = list(CustomAttr.model_fields)
            else:
                allowed = list(CustomOpSpec.model_fields)
            inside = f" in {where}" if where else ""
            raise SpecError(path, line_of(lines, loc), f"unknown key '{loc[-1]}'{inside}; "
                            f"allowed: {', '.join(allowed)}") from None
        raise SpecError(path, line_of(lines, loc), _schema_error(err, loc)) from None

    def fail(where: tuple[Any, ...], message: str) -> SpecError:
        return SpecError(path, line_of(lines, where), message)

    custom = _check(model, fail, check_builtins=check_builtins)
    return Spec(path=path, model=model, forward={}, backward=None,  # type: ignore[arg-type]
                lines=lines, kind_data=custom)


# -- the schema's errors, in the spec's words ------------------------------------------------------

#: The paths (``*`` a name, ``#`` an index) of the schema's unions: pydantic's error locations
#: there name the member it tried next (``inputs.x.dtype.str``), which the spec never writes.
_UNIONS: tuple[tuple[str, ...], ...] = (
    *((section, "*", key) for section in ("inputs", "outputs") for key in ("dtype", "shape")),
    *((section, "*", key, "#") for section in ("inputs", "outputs") for key in ("shape", "range")),
    ("attrs", "*", "type"),
)
_DTYPE_FORM = (f"a dtype ({', '.join(DTYPE_TYPES)}), a list of them, 'float types', 'int types' "
               "or 'same as <input>'")
#: What the value at each path should look like, where it has the wrong type: the spec's own
#: terms, not the schema's (``a dim: a size, a name such as D, or '...'``, not ``a string``).
_FORMS: dict[tuple[str, ...], str] = {
    ("inputs",): "a mapping of each input's name to {dtype: ..., shape: ...}, "
                 "e.g. {x: {dtype: float32, shape: [N]}}",
    ("outputs",): "a mapping of each output's name to {dtype: ..., shape: \"[...]\"}, "
                  "e.g. {out: {dtype: same as x, shape: \"[*x.shape]\"}}",
    ("inputs", "*"): "a mapping such as {dtype: float32, shape: [N, D]}",
    ("outputs", "*"): "a mapping such as {dtype: same as x, shape: \"[*x.shape]\"}",
    ("inputs", "*", "shape"): "a list of dims such as [V, D] or [..., D], or 'any'",
    ("inputs", "*", "shape", "#"): "a dim: a size, a name such as D, or '...'",
    ("outputs", "*", "shape"): "a list of dims in quotes, e.g. \"[*ids.shape, D]\"",
    ("outputs", "*", "shape", "#"): "a dim: a size or a dim name",
    **{(section, "*", "dtype"): _DTYPE_FORM for section in ("inputs", "outputs")},
    **{(section, "*", "dtype", "#"): "a dtype such as float32" for section in ("inputs",
                                                                              "outputs")},
    **{(section, "*", "range"): "[low, high] (high excluded), each a number or a dim name"
       for section in ("inputs", "outputs")},
    **{(section, "*", "range", "#"): "a number or a dim name" for section in ("inputs",
                                                                             "outputs")},
    **{(section, "*", "optional"): "true or false" for section in ("inputs", "outputs")},
    **{(section, "*", "doc"): "a string" for section in ("inputs", "outputs")},
    ("backward",): "a list of the inputs that get a gradient, e.g. [x]",
    ("backward", "#"): "an input name",
    ("sizes",): "a mapping of dim name to its size in the tests, e.g. {N: 8}",
    ("sizes", "*"): "a size (an integer)",
    ("inplace",): "a mapping of input to the output written over it, e.g. {x: out}",
    ("inplace", "*"): "an output name",
}


def _matches(pattern: tuple[str, ...], loc: tuple[Any, ...]) -> bool:
    """Whether ``loc`` is the path ``pattern`` (``*`` any name, ``#`` any index) describes."""
    return len(pattern) == len(loc) and all(
        p == q or (p == "*" and isinstance(q, str)) or (p == "#" and isinstance(q, int))
        for p, q in zip(pattern, loc, strict=True))


def _spec_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """An error's location as a path of the spec's keys and indices, without the union members
    pydantic names (see :data:`_UNIONS`)."""
    out: list[Any] = []
    items = iter(loc)
    for part in items:
        out.append(part)
        if any(_matches(pattern, tuple(out)) for pattern in _UNIONS):
            next(items, None)  # the member's name
    return tuple(out)


def _first_error(exc: ValidationError, lines: dict[Any, int]) -> tuple[Any, tuple[Any, ...]]:
    """The error to report, with its location in the spec (:func:`_spec_loc`): an unknown key
    first, then the first in the file. Of a union's members, the one that got furthest speaks: a
    shape ``[N, null]`` is a list with a wrong dim, not a string that is not one. A literal's
    choices are those of every member (the attr types, scalar and vector)."""
    errors = [(err, _spec_loc(tuple(err["loc"]))) for err in exc.errors()]
    deeper = [loc for _, loc in errors]
    errors = [(err, loc) for err, loc in errors
              if not (err["type"].endswith("_type")
                      and any(len(other) > len(loc) and other[:len(loc)] == loc
                              for other in deeper))]
    err, loc = min(errors, key=lambda e: (e[0]["type"] != "extra_forbidden",
                                          line_of(lines, e[1]), -len(e[1])))
    if err["type"] == "literal_error":
        expected = [str((e.get("ctx") or {}).get("expected", "")) for e, other in errors
                    if other == loc and e["type"] == "literal_error"]
        err = {**err, "ctx": {"expected": ", ".join(expected).replace(" or ", ", ")}}
    return err, loc


def _schema_error(err: Any, loc: tuple[Any, ...]) -> str:
    """The message of a schema error at ``loc`` (:func:`_first_error`): what the value should be,
    in the spec's words (:data:`_FORMS`), else as the elementwise schema words it."""
    form = next((f for pattern, f in _FORMS.items() if _matches(pattern, loc)), None)
    if err["type"].endswith("_type") and form is not None:
        field = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc)
        return f"{field.replace('.[', '[')}: expected {form}, got {shown(err.get('input'))}"
    return schema_message(err, loc)


def _check(model: CustomOpSpec, fail: Any, *, check_builtins: bool) -> Custom:
    problem = identifier_problem(model.name, what="op")
    if problem:
        raise fail(("name",), problem)
    op_name = op_name_of(model)
    problem = op_name_problem(op_name)
    if problem:
        raise fail(("op_name",) if model.op_name is not None else ("name",), problem)

    seen: dict[str, str] = {}
    for section, names in (("inputs", list(model.inputs)), ("outputs", list(model.outputs)),
                           ("attrs", list(model.attrs))):
        what = section[:-1]
        for name in names:
            problem = identifier_problem(name, what=what)
            if problem:
                raise fail((section, name), problem)
            if name == model.name:
                raise fail((section, name), f"{what} name '{name}' is the op's own name")
            if name in seen:
                raise fail((section, name), f"duplicate name '{name}': already an {seen[name]}")
            seen[name] = what
    float_attrs = [n for n, a in model.attrs.items() if a.type == "float"]
    for section in ("inputs", "outputs", "attrs"):
        for name in getattr(model, section):
            problem = derived_name_problem(name, section[:-1], [*model.inputs, *model.outputs],
                                           float_attrs)
            if problem:
                raise fail((section, name), problem)
    grads = {f"grad_{n}" for n in [*model.inputs, *model.outputs]}
    clash = next((n for n in seen if n in grads), None)
    if clash is not None:
        raise fail((f"{seen[clash]}s", clash), f"'{clash}' is the name of a gradient in the "
                   "generated code; name it differently")

    dtypes: dict[str, DtypeRule] = {}
    for section in ("inputs", "outputs"):
        tensors: dict[str, TensorSpec] = getattr(model, section)
        for name, tensor in tensors.items():
            dtypes[name] = _dtype_rule(tensor.dtype, name, section, model, fail)

    _check_optional(model, dtypes, fail)
    combinations = 1
    for name in model.inputs:
        if dtypes[name].same_as is None:
            combinations *= len(_choices(dtypes, name))
            if combinations > MAX_DTYPE_COMBINATIONS:
                raise fail(("inputs", name, "dtype"), f"inputs.{name}.dtype: the inputs' dtypes "
                           f"combine {combinations} ways up to here, more than the "
                           f"{MAX_DTYPE_COMBINATIONS} kernels and test cases opgen writes at "
                           "most; give an input 'same as' another, or fewer dtypes")
    shapes: dict[str, tuple[Dim, ...] | None] = {}
    dims: dict[str, tuple[str, int]] = {}
    for name, tensor in model.inputs.items():
        known = dict(dims)
        shapes[name] = _shape_constraint(tensor.shape, name, dims, model, fail)
        new = [d for d in dims if d not in known]
        if tensor.optional and new:
            raise fail(("inputs", name, "shape"), f"inputs.{name}.shape: dim '{new[0]}' is "
                       "named first by an optional input; name it in a required input's shape")
    for name in model.sizes:
        if name not in dims:
            raise fail(("sizes", name), f"sizes: '{name}' names no dim of an input's shape"
                       + (f" (dims: {', '.join(dims)})" if dims else ""))
        if model.sizes[name] < 1:
            raise fail(("sizes", name), f"sizes.{name}: a test size is at least 1")

    int_attrs = {n for n, a in model.attrs.items() if a.type in ("int", "int64")}
    out_shapes: dict[str, ast.List] = {}
    for name, tensor in model.outputs.items():
        if tensor.range is not None:
            raise fail(("outputs", name, "range"), f"outputs.{name}.range: a range is where the "
                       "tests sample an input; an output has none")
        out_shapes[name] = _output_shape(tensor.shape, name, model, dims, shapes, int_attrs,
                                         fail)

    _check_inplace(model, dtypes, shapes, out_shapes, fail)

    ranges: dict[str, tuple[str, str]] = {}
    for name, tensor in model.inputs.items():
        is_int = not any(d in FLOAT_DTYPES for d in _choices(dtypes, name))
        if tensor.range is None:
            if is_int:
                ranges[name] = ("0", "10")
            continue
        if not is_int:
            raise fail(("inputs", name, "range"), f"inputs.{name}.range: only integer inputs "
                       "take a range (float inputs are sampled in [-1, 1])")
        if len(tensor.range) != 2:
            raise fail(("inputs", name, "range"), f"inputs.{name}.range: expected [low, high], "
                       "high excluded; each a number or a dim name")
        bounds = []
        for item in tensor.range:
            if isinstance(item, str) and item not in dims:
                raise fail(("inputs", name, "range"), f"inputs.{name}.range: '{item}' is not a "
                           f"number or a dim name" + (f" (dims: {', '.join(dims)})"
                                                      if dims else ""))
            if isinstance(item, int) and not INT64_RANGE[0] <= item <= INT64_MAX:
                raise fail(("inputs", name, "range"), f"inputs.{name}.range: {item} does not "
                           "fit in int64")
            bounds.append(str(item))
        low, high = tensor.range
        if low == high or (isinstance(low, int) and isinstance(high, int) and low > high):
            # the tests draw from [low, high): nothing to draw
            raise fail(("inputs", name, "range"), f"inputs.{name}.range: [{low}, {high}] is "
                       "empty; expected [low, high] with low < high (high excluded)")
        # a dim bound at the size the tests give it (sizes:, else 7)
        at = {b: b if isinstance(b, int) else model.sizes.get(b, 7) for b in (low, high)}
        sized = ", ".join(f"{b} = {at[b]}" for b in (low, high) if isinstance(b, str))
        if at[low] >= at[high]:
            raise fail(("inputs", name, "range"), f"inputs.{name}.range: [{low}, {high}] is "
                       f"empty at the tests' sizes ({sized}; sizes: sets them, 7 where it does "
                       "not); expected low < high (high excluded)")
        for dtype in _choices(dtypes, name):
            smallest, largest = _INT_LIMITS.get(dtype, INT64_RANGE)
            outside = next((v for v in (at[low], at[high] - 1)
                            if not smallest <= v <= largest), None)
            if outside is not None:
                raise fail(("inputs", name, "range"), f"inputs.{name}.range: [{low}, {high}] "
                           f"holds {outside}" + (f" at the tests' sizes ({sized})" if sized
                                                 else "") +
                           f", which {dtype} does not ({dtype} holds {smallest} to {largest})")
        ranges[name] = (bounds[0], bounds[1])

    for i, name in enumerate(model.backward or []):
        if name not in model.inputs:
            raise fail(("backward", i), f"backward: '{name}' is not an input (inputs: "
                       f"{', '.join(model.inputs)})")
        if not any(d in FLOAT_DTYPES for d in _choices(dtypes, name)):
            raise fail(("backward", i), f"backward: '{name}' has no float dtype, so no gradient")
        if name in (model.backward or [])[:i]:
            raise fail(("backward", i), f"backward: '{name}' is listed twice")
    if model.backward == []:
        raise fail(("backward",), "backward: an empty list; list the inputs that get a "
                   "gradient, or delete the key")

    if check_builtins:
        builtins = paddle_builtin_ops()
        clash = next((n for n in (op_name, f"{op_name}_grad") if n in builtins), None)
        if clash is not None:
            raise fail(("op_name",) if model.op_name is not None else ("name",),
                       f"op_name '{op_name}' is a Paddle built-in op, and registering it would "
                       f"replace Paddle's own; use '{free_op_name(op_name, builtins)}'")
    return Custom(dtypes, shapes, dims, out_shapes, ranges)


def _check_optional(model: CustomOpSpec, dtypes: dict[str, DtypeRule], fail: Any) -> None:
    """Optional inputs come after the required ones (the first input gives the op its device),
    have a dtype fixed by the spec or by a required input, and no gradient (yet)."""
    names = list(model.inputs)
    optional = [n for n, t in model.inputs.items() if t.optional]
    for section in ("outputs",):
        for name, tensor in model.outputs.items():
            if tensor.optional:
                raise fail((section, name, "optional"), f"outputs.{name}.optional: only inputs "
                           "are optional")
    for name in optional:
        where = ("inputs", name, "optional")
        if name == names[0]:
            raise fail(where, f"inputs.{name}: the first input is required (the op runs on its "
                       "device)")
        later = [n for n in names[names.index(name):] if not model.inputs[n].optional]
        if later:
            raise fail(where, f"inputs.{name}: optional inputs come after the required ones "
                       f"('{later[0]}' is required)")
        rule = dtypes[name]
        if rule.same_as is None and len(rule.choices) > 1:
            raise fail(("inputs", name, "dtype"), f"inputs.{name}.dtype: an optional input has "
                       "one dtype or 'same as <required input>'")
        if rule.same_as in optional:
            raise fail(("inputs", name, "dtype"), f"inputs.{name}.dtype: 'same as "
                       f"{rule.same_as}', an optional input; name a required one")
        if name in (model.backward or []):
            raise fail(("backward",), f"backward: '{name}' is optional; optional inputs get "
                       "no gradient")
    for name, rule in dtypes.items():
        if name in model.outputs and rule.same_as in optional:
            raise fail(("outputs", name, "dtype"), f"outputs.{name}.dtype: 'same as "
                       f"{rule.same_as}', an optional input; name a required one")


def _check_inplace(model: CustomOpSpec, dtypes: dict[str, DtypeRule],
                   shapes: dict[str, tuple[Dim, ...] | None], out_shapes: dict[str, ast.List],
                   fail: Any) -> None:
    """``inplace: {input: output}``: each output written over a required input of its dtype and
    shape, one output per input."""
    if "inplace" in model.model_fields_set and not model.inplace:
        raise fail(("inplace",), "inplace: an empty map; map an input to the output written over "
                   "it, such as {x: out}, or delete the key")
    taken: dict[str, str] = {}
    for name, output in model.inplace.items():
        where = ("inplace", name)
        if name not in model.inputs:
            raise fail(where, f"inplace: '{name}' is not an input (inputs: "
                       f"{', '.join(model.inputs)})")
        if output not in model.outputs:
            raise fail(where, f"inplace: '{output}' is not an output (outputs: "
                       f"{', '.join(model.outputs)})")
        if model.inputs[name].optional:
            raise fail(where, f"inplace: '{name}' is optional; only a required input can be "
                       "written over")
        if output in taken:
            raise fail(where, f"inplace: '{output}' is already written over '{taken[output]}'; "
                       "one output per input")
        taken[output] = name
        if not _same_dtype(dtypes, name, output):
            raise fail(where, f"inplace: {output} is {dtypes[output].text} but {name} is "
                       f"{dtypes[name].text}; an output written over {name} has its dtype "
                       f"('same as {name}')")
        if any(_data_dependent(item) for item in out_shapes[output].elts):
            raise fail(where, f"inplace: {output}'s shape {ast.unparse(out_shapes[output])} "
                       "has a size only the data gives (-1); an output written over "
                       f"{name} has {name}'s shape, known before the kernel runs")
        if not _same_shape(out_shapes[output], name, shapes[name]):
            raise fail(where, f"inplace: {output}'s shape "
                       f"{ast.unparse(out_shapes[output])} is not {name}'s; an output written "
                       f"over {name} has its shape (\"[*{name}.shape]\")")


def _same_dtype(dtypes: dict[str, DtypeRule], name: str, output: str) -> bool:
    """The output's dtype is always the input's: one source, or one fixed dtype."""
    def source(n: str) -> str:
        return dtypes[n].same_as or n

    return source(output) == source(name) or \
        len(_choices(dtypes, name)) == 1 and _choices(dtypes, name) == _choices(dtypes, output)


def _same_shape(tree: ast.List, name: str, dims: tuple[Dim, ...] | None) -> bool:
    """The output's shape expression is the input's shape: ``[*x.shape]``, or x's dims one by
    one (its names, sizes or ``x.shape[i]``) where x's shape has a fixed rank."""
    items = tree.elts
    if len(items) == 1 and isinstance(items[0], ast.Starred):
        return ast.unparse(items[0].value) == f"{name}.shape"
    if dims is None or any(d.ellipsis for d in dims) or len(dims) != len(items):
        return False
    for i, (item, dim) in enumerate(zip(items, dims, strict=True)):
        text = ast.unparse(item)
        if text not in (dim.name, str(dim.size), f"{name}.shape[{i}]",
                        f"{name}.shape[{i - len(dims)}]"):
            return False
    return True


def _choices(dtypes: dict[str, DtypeRule], name: str) -> tuple[str, ...]:
    rule = dtypes[name]
    while rule.same_as is not None:
        rule = dtypes[rule.same_as]
    return rule.choices


def _dtype_rule(value: str | list[str], name: str, section: str, model: CustomOpSpec,
                fail: Any) -> DtypeRule:
    where = (section, name, "dtype")
    field = f"{section}.{name}.dtype"
    if isinstance(value, str):
        same = _SAME_AS.match(value.strip())
        if same:
            other = same.group(1)
            if other not in model.inputs:
                raise fail(where, f"{field}: 'same as {other}': '{other}' is not an input "
                           f"(inputs: {', '.join(model.inputs)})")
            if other == name:
                raise fail(where, f"{field}: an input cannot have the dtype of itself")
            target = model.inputs[other].dtype
            if isinstance(target, str) and _SAME_AS.match(target.strip()):
                raise fail(where, f"{field}: '{other}' itself is 'same as' another input; "
                           "name that one")
            return DtypeRule(same_as=other)
        items = [value]
    else:
        items = value
    if not items:
        raise fail(where, f"{field}: an empty list")
    choices: list[str] = []
    for item in items:
        group = DTYPE_GROUPS.get(item.strip())
        if group is None and item not in DTYPE_TYPES:
            raise fail(where, f"{field}: unknown dtype '{item}'; expected one of "
                       f"{', '.join(DTYPE_TYPES)}, a list of them, 'float types', 'int types' "
                       "or 'same as <input>'")
        for d in group or (item,):
            if d in choices:
                raise fail(where, f"{field}: '{d}' is listed twice")
            choices.append(d)
    if section == "outputs" and len(choices) > 1:
        raise fail(where, f"{field}: an output has one dtype, or 'same as <input>' (a dtype "
                   "the caller chooses is an input's)")
    return DtypeRule(choices=tuple(choices))


def _shape_constraint(value: Any, name: str, dims: dict[str, tuple[str, int]],
                      model: CustomOpSpec, fail: Any) -> tuple[Dim, ...] | None:
    where = ("inputs", name, "shape")
    field = f"inputs.{name}.shape"
    if value is None or value == "any":
        return None
    if isinstance(value, str):
        raise fail(where, f"{field}: expected a list of dims such as [V, D] or [..., D], or "
                   f"'any'; got '{value}'")
    if not value:  # the generated checks and tests describe an input by its first dim
        raise fail(where, f"{field}: [] (a 0-D tensor) cannot be declared; write 'any' (a "
                   "shape the wrapper does not check) or list the dims, such as [1]")
    out: list[Dim] = []
    for i, item in enumerate(value):
        if item == "...":
            if i != 0:
                raise fail(where, f"{field}: '...' (any leading dims) comes first")
            out.append(Dim(ellipsis=True))
        elif isinstance(item, int):
            if item == -1:
                raise fail(where, f"{field}: -1 (a size known only from the data) is for "
                           "outputs; an input's free dim is a name such as N, or '...'")
            if item < 0:
                raise fail(where, f"{field}: a dim size is at least 0, got {item}")
            if item > INT64_MAX:
                raise fail(where, f"{field}: {item} does not fit in int64, the type of a dim")
            out.append(Dim(size=item))
        else:
            if not _DIM_NAME.match(item):
                raise fail(where, f"{field}: '{item}' is not a dim: a size, a name such as D "
                           "or n_heads, or '...' (any leading dims)")
            if keyword.iskeyword(item) or item in CPP_KEYWORDS:  # the tests' and the C++'s
                raise fail(where, f"{field}: dim name '{item}' is a "
                           f"{'Python' if keyword.iskeyword(item) else 'C++'} keyword")
            if item in model.inputs or item in model.outputs or item in model.attrs:
                raise fail(where, f"{field}: dim name '{item}' is already an input, output "
                           "or attr")
            index = i - len(value) if out and out[0].ellipsis else i
            dims.setdefault(item, (name, index))
            out.append(Dim(name=item))
    return tuple(out)


_SHAPE_HELP = ("an output's shape is a list of dims in quotes, e.g. \"[*ids.shape, D]\": each "
               "item an int, a dim name, an int attr, x.shape[i], *x.shape, or + - * // of them; "
               "-1 for a size only the data gives")


def _output_shape(value: Any, name: str, model: CustomOpSpec, dims: dict[str, tuple[str, int]],
                  shapes: dict[str, tuple[Dim, ...] | None], int_attrs: set[str],
                  fail: Any) -> ast.List:
    where = ("outputs", name, "shape")
    field = f"outputs.{name}.shape"
    if value is None:
        raise fail(("outputs", name), f"outputs.{name}: no shape; {_SHAPE_HELP}")
    text = value if isinstance(value, str) else "[" + ", ".join(str(v) for v in value) + "]"
    if len(text) > MAX_SHAPE_TEXT:
        raise fail(where, f"{field}: {len(text)} characters, more than {MAX_SHAPE_TEXT}: an "
                   "output's shape is a short list of dims")
    deep = f"{field}: shape too deep; nest at most {MAX_DEPTH} operations and parentheses"
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):  # ValueError: a null character
        raise fail(where, f"{field}: '{text}' is not a list of dims; {_SHAPE_HELP}") from None
    except (RecursionError, MemoryError):  # Python's parser gives up on thousands of levels
        raise fail(where, deep) from None
    if too_deep(tree) is not None:  # the checks and the code generation below recurse
        raise fail(where, deep)
    if not isinstance(tree, ast.List):
        raise fail(where, f"{field}: '{text}' is not a list of dims; {_SHAPE_HELP}")

    def shape_of(node: ast.AST) -> str | None:
        if (isinstance(node, ast.Attribute) and node.attr == "shape"
                and isinstance(node.value, ast.Name)):
            if node.value.id not in model.inputs:
                raise fail(where, f"{field}: '{node.value.id}' is not an input (inputs: "
                           f"{', '.join(model.inputs)})")
            if model.inputs[node.value.id].optional:
                raise fail(where, f"{field}: '{node.value.id}' is optional; an output's shape "
                           "reads required inputs")
            return node.value.id
        return None

    def check(node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) \
                and not isinstance(node.value, bool):
            if node.value > INT64_MAX:
                raise fail(where, f"{field}: {node.value} does not fit in int64, the type of a "
                           "dim")
            return
        if isinstance(node, ast.Name):
            if node.id in dims or node.id in int_attrs:
                return
            known = [*dims, *sorted(int_attrs)]
            raise fail(where, f"{field}: '{node.id}' is not a dim name or an int attr"
                       + (f" (known: {', '.join(known)})" if known else ""))
        source = shape_of(node.value) if isinstance(node, ast.Subscript) else None
        if isinstance(node, ast.Subscript) and source is not None:
            index = node.slice
            sign = 1
            if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
                index, sign = index.operand, -1
            if isinstance(index, ast.Constant) and type(index.value) is int:
                _check_index(sign * index.value, source, shapes[source], ast.unparse(node),
                             field, where, fail)
                return
            raise fail(where, f"{field}: x.shape[i] takes a number i")
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult,
                                                                ast.FloorDiv)):
            check(node.left)
            check(node.right)
            if isinstance(node.op, ast.FloorDiv) and _constant(node.right) == 0:
                raise fail(where, f"{field}: '{ast.unparse(node)}' divides by 0")
            value = _constant(node)
            if value is not None and not INT64_RANGE[0] <= value <= INT64_MAX:
                raise fail(where, f"{field}: '{ast.unparse(node)}' is {value}, which does not "
                           "fit in int64, the type of a dim")
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            check(node.operand)
            return
        raise fail(where, f"{field}: '{ast.unparse(node)}' is not allowed; {_SHAPE_HELP}")

    for item in tree.elts:
        if isinstance(item, ast.Starred):
            if shape_of(item.value) is None:
                raise fail(where, f"{field}: '*' goes before x.shape of an input x")
        elif _data_dependent(item):
            continue
        elif isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub) \
                and isinstance(item.operand, ast.Constant) and type(item.operand.value) is int:
            raise fail(where, f"{field}: a dim is at least 0, or -1 for a size only the data "
                       f"gives; got {ast.unparse(item)}")
        else:
            check(item)
    return tree


def _check_index(index: int, source: str, dims: tuple[Dim, ...] | None, text: str, field: str,
                 where: tuple[str, ...], fail: Any) -> None:
    """``source.shape[index]`` (written ``text``) reads a dim the input is sure to have, as the
    generated code reads it unchecked: where its declared shape fixes its rank, an index within
    that rank; after a leading ``...``, within the dims it declares; else (``any``) its first or
    last dim, which the wrapper and the C++ check it has at each call (:func:`_any_reads`): the
    generated tests' inputs of any shape have one dim or more."""
    if dims is not None and not dims[0].ellipsis:
        if not -len(dims) <= index < len(dims):
            raise fail(where, f"{field}: {text} is out of range: {source} has {len(dims)} "
                       f"dim{'s' if len(dims) != 1 else ''} {_written(dims)} (indices "
                       f"{-len(dims)} to {len(dims) - 1})")
    elif dims is not None:  # [..., D]: the dims after the `...` are all it is sure to have
        fixed = len(dims) - 1
        if not -fixed <= index < fixed:
            raise fail(where, f"{field}: {text} may not exist: {source}'s shape {_written(dims)} "
                       f"has at least {fixed} dim{'s' if fixed != 1 else ''} (indices {-fixed} "
                       f"to {fixed - 1}); declare the dims it reads")
    elif index not in (0, -1):
        raise fail(where, f"{field}: {text} may not exist: {source}'s shape is any, so an output's "
                   f"shape reads its first or last dim at most ({source}.shape[0] or "
                   f"{source}.shape[-1]); declare the dims it reads, as [..., A, B]")


def _constant(node: ast.AST) -> int | None:
    """The value of a checked shape expression made of integers alone (``2 - 2``), else None."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        value = _constant(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.BinOp):
        left, right = _constant(node.left), _constant(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.FloorDiv):
            return None if right == 0 else left // right
        return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}[
            type(node.op)]
    return None


def _data_dependent(item: ast.AST) -> bool:
    """An output shape's item ``-1``: a dim whose size only the kernel knows, from the data."""
    return (isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub)
            and isinstance(item.operand, ast.Constant) and type(item.operand.value) is int
            and item.operand.value == 1)


# -- the deploy tests' free dims -------------------------------------------------------------------

#: :class:`FreeDims`' name for the leading dims of the inputs of ``shape: any`` or ``[..., ...]``.
LEAD = "leading dims"


@dataclass(frozen=True)
class FreeDims:
    """The dims the deploy tests' InputSpecs give as ``None`` (:func:`free_dims`)."""

    lead: bool                  # the leading dims (`any`, `...`): all of them, or none
    names: tuple[str, ...]      # the named dims that are free
    fixed: dict[str, str]       # every other candidate (LEAD or a dim name) -> why it is not


def _ranged_by(dim: str, custom: Custom) -> str | None:
    """The first integer input whose ``range:`` uses ``dim`` as a bound, or None."""
    return next((n for n, r in custom.ranges.items() if dim in r), None)


def free_dims(model: CustomOpSpec, custom: Custom) -> FreeDims:
    """The dims of the inputs whose size the caller may pick per call, which a saved model
    therefore takes as ``None``; a dim the spec fixes, or one whose size means something to the
    rest of the spec, keeps its test size.

    Candidates are the leading dims (inputs of ``shape: any`` or ``[..., D]``, all of them
    together, as the tests share them) and the named dims (``N``). A candidate is fixed when:

    - (a named dim) an input has it other than first (``[V, D]``'s ``D``; ``[N, N]``): only a
      leading, batch-like dim is free;
    - (a named dim) a ``range:`` uses it: it bounds an integer input's values (a vocabulary);
    - an output's shape computes with it (``N + 1``, ``x.shape[0] * k``, where ``x.shape[0]`` is
      it): InferShape sees -1 for a ``None`` dim, which an item ``N``, ``x.shape[0]`` or
      ``*x.shape`` passes on as unknown but arithmetic turns into a wrong size.

    Sizes (``3``) are never free.
    """
    computed: dict[str, str] = {}  # candidate -> the first output shape computing with it
    for output, tree in custom.out_shapes.items():
        for item in tree.elts:
            if isinstance(item, (ast.Starred, ast.Name, ast.Subscript)) or _data_dependent(item):
                continue  # passed on as it is
            for node in ast.walk(item):
                dim = node.id if isinstance(node, ast.Name) and node.id in custom.dims else \
                    _indexed_dim(node, custom) if isinstance(node, ast.Subscript) else None
                if dim is not None:
                    computed.setdefault(dim, f"{output} {ast.unparse(tree)}")
    fixed: dict[str, str] = {}
    has_lead = any(d is None or d[0].ellipsis for d in custom.shapes.values())
    if has_lead and LEAD in computed:
        fixed[LEAD] = f"an output's shape computes with one: {computed[LEAD]}"
    names: list[str] = []
    for name in custom.dims:
        later = next(((f"{n} has it after '...', not first" if dims[0].ellipsis else
                       f"{n} has it as dim {k}, not first")
                      for n, dims in custom.shapes.items() if dims is not None
                      for k, d in enumerate(dims) if d.name == name and k != 0), None)
        ranged = _ranged_by(name, custom)
        if later is not None:
            fixed[name] = later
        elif ranged is not None:
            fixed[name] = f"it bounds the values of {ranged}: its range"
        elif name in computed:
            fixed[name] = f"an output's shape computes with it: {computed[name]}"
        else:
            names.append(name)
    return FreeDims(lead=has_lead and LEAD not in fixed, names=tuple(names), fixed=fixed)


def _indexed_dim(node: ast.Subscript, custom: Custom) -> str | None:
    """The dim ``x.shape[i]`` is: a dim name, :data:`LEAD` (one of the leading dims), or None (a
    size). A non-negative index into ``[..., D]`` counts as a leading dim."""
    source = node.value.value.id  # type: ignore[attr-defined]
    index = ast.literal_eval(node.slice)
    dims = custom.shapes[source]
    if dims is None:
        return LEAD
    if dims[0].ellipsis:
        fixed = dims[1:]
        if index >= 0 or -index > len(fixed):
            return LEAD
        return fixed[index].name
    return dims[index].name if -len(dims) <= index < len(dims) else None


# -- code generation -------------------------------------------------------------------------------

def _cpp_item(node: ast.AST, dims: dict[str, tuple[str, int]], suffix: str, where: str,
              prefix: str = "", *, infer: bool = False) -> str:
    """An item of an output's shape in C++ (see :func:`_cpp_dim`): one that computes (``D - 1``)
    or reads an attr goes through ``opgen::ComputedDim``, which raises where it is negative for
    the inputs. ``infer``: for InferShape, where a dim Paddle does not know yet is -1 (a static
    graph's free dim): an item that reads one is -1 too."""
    text = _cpp_dim(node, dims, suffix, where, prefix)
    if not _checked(node, dims):
        return text
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.FloorDiv):
        text = text[1:-1]  # (a + b): the call's parentheses serve
    checked = f"opgen::ComputedDim({text}, {where})"
    read = _dims_read(node, dims, suffix, prefix)
    if infer and read:
        return f"opgen::AnyUnknown({{{', '.join(read)}}}) ? int64_t{{-1}} : {checked}"
    return checked


def _checked(item: ast.AST, dims: dict[str, tuple[str, int]]) -> bool:
    """An item of an output's shape that may come out negative: arithmetic (``D - 1``) or an
    attr, not a dim, an int or -1."""
    return (isinstance(item, (ast.BinOp, ast.UnaryOp)) and not _data_dependent(item)) or \
        (isinstance(item, ast.Name) and item.id not in dims)


def _dims_read(node: ast.AST, dims: dict[str, tuple[str, int]], suffix: str,
               prefix: str = "") -> list[str]:
    """The input dims an item of an output's shape reads, in C++ (as :func:`_cpp_dim` writes
    them), each once."""
    read = [_cpp_dim(n, dims, suffix, "", prefix) for n in ast.walk(node)
            if (isinstance(n, ast.Name) and n.id in dims) or isinstance(n, ast.Subscript)]
    return list(dict.fromkeys(read))


def _cpp_dim(node: ast.AST, dims: dict[str, tuple[str, int]], suffix: str, where: str,
             prefix: str = "") -> str:
    """An int expression of an output's shape in C++, over ``<prefix><input><suffix>`` shape
    vectors (and ``<prefix><attr>``); ``where`` (a C++ string literal naming the op, the output
    and its shape) is what an error of the arithmetic says."""
    if _data_dependent(node):
        return "int64_t{-1}"
    if isinstance(node, ast.Constant):
        return f"int64_t{{{node.value!r}}}"
    if isinstance(node, ast.Name):
        if node.id in dims:
            source, index = dims[node.id]
            return f"{prefix}{source}{suffix}.end()[{index}]" if index < 0 else \
                f"{prefix}{source}{suffix}[{index}]"
        return f"int64_t{{{prefix}{node.id}}}"
    if isinstance(node, ast.Subscript):  # x.shape[i]
        source = node.value.value.id  # type: ignore[attr-defined]
        index = ast.literal_eval(node.slice)
        return f"{prefix}{source}{suffix}.end()[{index}]" if index < 0 else \
            f"{prefix}{source}{suffix}[{index}]"
    if isinstance(node, ast.UnaryOp):
        return f"-({_cpp_dim(node.operand, dims, suffix, where, prefix)})"
    assert isinstance(node, ast.BinOp)
    left = _cpp_dim(node.left, dims, suffix, where, prefix)
    right = _cpp_dim(node.right, dims, suffix, where, prefix)
    if isinstance(node.op, ast.FloorDiv):  # Python's //, rounded down; C++'s / truncates
        return f"opgen::FloorDiv({left}, {right}, {where})"
    op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(node.op)]
    return f"({left} {op} {right})"


def _py_dim(node: ast.AST, dims: dict[str, tuple[str, int]]) -> str:
    """The same expression in Python, over the inputs' ``.shape``."""
    if isinstance(node, ast.Name) and node.id in dims:
        source, index = dims[node.id]
        return f"{source}.shape[{index}]"
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        node = _Replace(dims).visit(ast.parse(ast.unparse(node), mode="eval")).body
    return ast.unparse(node)


class _Replace(ast.NodeTransformer):
    def __init__(self, dims: dict[str, tuple[str, int]]) -> None:
        self.dims = dims

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.dims:
            source, index = self.dims[node.id]
            return ast.parse(f"{source}.shape[{index}]", mode="eval").body
        return node


def _py_empty(tree: ast.List, dims: dict[str, tuple[str, int]]) -> str:
    """A Python condition, over the inputs' ``.shape`` and the attrs, that holds where the output
    of shape ``tree`` has no elements: cheaper than building the shape (the wrapper's test of an
    empty result, made on every call)."""
    conditions = []
    for item in tree.elts:
        if isinstance(item, ast.Starred):
            conditions.append(f"0 in {item.value.value.id}.shape")  # type: ignore[attr-defined]
        elif isinstance(item, ast.Constant):
            if item.value == 0:
                return "True"
        else:
            py = _py_dim(item, dims)
            simple = isinstance(item, (ast.Name, ast.Subscript))
            conditions.append(f"{py} == 0" if simple else f"({py}) == 0")
    return " or ".join(conditions) or "False"


def _infer_throws(custom: Custom) -> bool:
    """Whether InferShape may refuse the inputs (a declared shape, or an output dim that may come
    out negative or divide by 0): then its body runs in opgen::InferShapesOrUnknown."""
    return any(dims is not None for dims in custom.shapes.values()) or any(
        _checked(item, custom.dims) for tree in custom.out_shapes.values() for item in tree.elts)


def _parenthesized(condition: str) -> str:
    """``condition`` as an operand of ``and``: in parentheses where it holds an ``or``."""
    return f"({condition})" if " or " in condition else condition


def _all_empty(conditions: list[str]) -> str:
    """The conditions of :func:`_py_empty`, one per output, joined: every output is empty."""
    if "False" in conditions:
        return "False"
    conditions = [c for c in conditions if c != "True"]
    if not conditions:
        return "True"
    if len(conditions) == 1:
        return conditions[0]
    return " and ".join(_parenthesized(c) for c in conditions)


def _skeleton_allocation(tree: ast.List, name: str, allocate: str,
                         dims: dict[str, tuple[str, int]], sizes: dict[int, str],
                         where: str) -> list[str]:
    """The skeleton kernels' statements allocating a data-dependent output: the spec's shape over
    ``args``, each -1 dim (item k) replaced by ``sizes[k]``."""
    items = [sizes[k] if k in sizes else
             f"args.{item.value.value.id}.shape()"  # type: ignore[attr-defined]
             if isinstance(item, ast.Starred) else
             _cpp_item(item, dims, ".shape()", where, "args.")
             for k, item in enumerate(tree.elts)]
    if not any(isinstance(item, ast.Starred) for item in tree.elts):
        return [f"args.{allocate}({{{', '.join(items)}}});"]
    lines = [f"std::vector<int64_t> {name}_shape;"]
    for item, text in zip(tree.elts, items, strict=True):
        if isinstance(item, ast.Starred):
            lines.append(f"for (const int64_t d : {text}) {name}_shape.push_back(d);")
        else:
            lines.append(f"{name}_shape.push_back({text});")
    return [*lines, f"args.{allocate}({name}_shape);"]


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype_text: str              # the rule, in words
    shape_text: str              # the constraint or expression, as written
    cpp_type: str                # the C++ type name in kernels: a template parameter or a type
    param: str | None            # its template parameter, when it has several dtypes
    dtypes: list[str]            # the dtypes it may have
    paddle_dtypes: list[str]     # paddle.<dtype> spellings
    same_as: str | None
    is_float: bool
    cpp_dtype_expr: str          # the output's dtype at run time, in C++
    infer_dtype_expr: str        #   in InferDtype, from the inputs' dtypes
    optional: bool               # an input that may be absent: paddle::optional, None in Python
    doc: str


@dataclass(frozen=True)
class OutShape:
    name: str
    cpp: list[str]               # statements building `<name>_shape` from `<input>_shape`s
    infer_cpp: list[str]         #   and the same for InferShape, where a dim may be -1 (unknown)
    py: str                      # a Python list expression over the inputs' .shape
    py_empty: str                #   and a condition that holds where it has no elements
    attrs: list[str]             # int attrs it reads
    data_dependent: bool         # a dim is -1: the kernels allocate the output (`allocate`)
    text: str                    # the shape as written (normalized), for messages
    text_cpp: str                #   as a C++ string literal
    allocate: str                # ForwardArgs' member that allocates it: AllocateOut
    inputs: list[str]            # the inputs whose shapes `cpp` reads
    cpu_skeleton: list[str]      # the skeleton kernels' allocation: -1 dims are 0 on the CPU,
    cuda_skeleton: list[str]     #   sizes[k] (read back from the device) on the GPU
    reference_zeros: str         # the skeleton reference: a Python shape, -1 dims 0
    allocate_call: str           # the statement of `allocate` that checks and allocates it
                                 #   (indented 4)


@dataclass(frozen=True)
class Check:
    """A check of the wrapper on an input's shape: a Python condition that fails and its message
    (an f-string body); ``static_condition`` is the condition for a static graph's variables,
    whose dims not known yet are -1."""

    condition: str
    message: str
    static_condition: str

    @property
    def if_line(self) -> str:
        """``if condition:``, from column 4, wrapped."""
        return py_if(self.condition, indent=4)

    @property
    def static_if_line(self) -> str:
        """``if static_condition:``, likewise."""
        return py_if(self.static_condition, indent=4)

    @property
    def raised(self) -> str:
        """``raise ValueError(f"message")``, from column 8, wrapped."""
        return py_string_call("raise ValueError(", self.message, indent=8)


@dataclass(frozen=True)
class Combo:
    """One combination of the dtypes of the inputs with several: what the tests run."""

    id: str
    dtypes: dict[str, str]       # every input -> its dtype in this combination
    out_dtypes: dict[str, str]   # every output -> its dtype
    float64: bool                # every float input is float64: finite differences run here


def _alternatives(items: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _cpp_type_names(names: list[str], taken: set[str]) -> dict[str, str]:
    """Each input's template parameter (``ids`` -> ``IdsT``), distinct where two inputs
    camel-case alike (``a1`` and ``a_1``: ``A1T`` and ``A1T2``) or one is a name in ``taken``."""
    params: dict[str, str] = {}
    used = set(taken)
    for name in names:
        param, k = camel_case(name) + "T", 2
        while param in used:
            param, k = f"{camel_case(name)}T{k}", k + 1
        used.add(param)
        params[name] = param
    return params


def _tensor(name: str, spec: TensorSpec, rule: DtypeRule, custom: Custom,
            params: dict[str, str], output: bool) -> Tensor:
    source = rule.same_as or name
    choices = _choices(custom.dtypes, name)
    cpp_type = params[source] if source in params else DTYPE_TYPES[choices[0]][0]
    shape = spec.shape
    shape_text = "any shape" if shape in (None, "any") else (
        shape if isinstance(shape, str) else "[" + ", ".join(str(s) for s in shape) + "]")
    dtype_expr = f"{rule.same_as}.dtype()" if rule.same_as else \
        f"paddle::DataType::{DTYPE_TYPES[choices[0]][1]}"
    return Tensor(
        name=name,
        dtype_text=rule.text if rule.same_as else
        (" or ".join(choices) if len(choices) <= 2 else ", ".join(choices[:-1]) + " or " +
         choices[-1]),
        shape_text=shape_text,
        cpp_type=cpp_type,
        param=params.get(name),
        dtypes=list(choices),
        paddle_dtypes=[f"paddle.{d}" for d in choices],
        same_as=rule.same_as,
        is_float=any(d in FLOAT_DTYPES for d in choices),
        cpp_dtype_expr=dtype_expr if output else "",
        infer_dtype_expr=(f"{rule.same_as}_dtype" if rule.same_as else dtype_expr)
        if output else "",
        optional=spec.optional,
        doc=spec.doc,
    )


def _vector_attr(name: str, spec: CustomAttr) -> Attr:
    item = spec.type[:-2]
    cpp_item = {"int": "int", "int64": "int64_t", "float": "float"}[item]
    py_item = "float" if item == "float" else "int"
    cpp_type = f"std::vector<{cpp_item}>"
    default = list(spec.default)
    other = [*default, 1] if item != "float" else [*default, 0.5]
    return Attr(
        name=name, type=spec.type, cpp_type=cpp_type, cpp_param=f"const {cpp_type}& {name}",
        kernel_param=f"const {cpp_type}& {name}", kernel_decode="",
        paddle_decl=f"{name}: {cpp_type}", py_type=f"list[{py_item}]",
        py_arg=(f'_float_list_attr({name}, "{name}")' if item == "float" else
                f'_int_list_attr({name}, "{name}", ' +
                ('_INT32, "32-bit")' if item == "int" else '_INT64, "64-bit")')),
        py_default=repr(tuple(default)),
        py_other=repr(other), member_type="", doc_default=docstring_text(repr(tuple(default))),
        md_default=repr(tuple(default)),
        md_signature=markdown_code(f"{name}: {spec.type} = {default!r}", table=True))


def _attr(name: str, spec: CustomAttr) -> Attr:
    if spec.type.endswith("[]"):
        return _vector_attr(name, spec)
    return attr(name, AttrSpec.model_construct(type=spec.type, default=spec.default))


@dataclass(frozen=True)
class _ShapeRule:
    """One rule of an input's declared shape, as the wrapper's Python checks and the .cc's C++
    checks both state it: its rank, a fixed size, or a dim named like an earlier one."""

    input: str
    written: str                          # the input's shape as the spec writes it: "[V, D]"
    rank: int | None = None               # a rank rule: the count of its fixed dims,
    at_least: bool = False                #   at least that many after a leading `...`
    index: int = 0                        # a dim rule: the dim (negative after a `...`),
    size: int | None = None               #   its fixed size,
    dim: str | None = None                #   or its name, which an earlier dim has:
    other: tuple[str, int] | None = None  #   that one (input, index)


def _any_reads(custom: Custom) -> dict[str, str]:
    """For each input of any shape whose first or last dim an output's shape reads, the first
    such read in words (``picked's shape reads ids.shape[0]``): the input needs a dim."""
    reads: dict[str, str] = {}
    for output, tree in custom.out_shapes.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
                source = node.value.value.id  # type: ignore[attr-defined]
                if custom.shapes[source] is None:
                    reads.setdefault(source, f"{output}'s shape reads {ast.unparse(node)}")
    return reads


def _shape_rules(custom: Custom) -> list[_ShapeRule]:
    """The rules of the inputs' declared shapes, input by input, each rank before its dims; an
    input of any shape whose dim an output's shape reads must have one (:func:`_any_reads`)."""
    rules: list[_ShapeRule] = []
    first: dict[str, tuple[str, int]] = {}  # dim name -> where it first comes
    any_reads = _any_reads(custom)
    for name, dims in custom.shapes.items():
        if dims is None:
            if name in any_reads:
                rules.append(_ShapeRule(name, f"({any_reads[name]})", rank=1, at_least=True))
            continue
        written = _written(dims)
        fixed = [d for d in dims if not d.ellipsis]
        rules.append(_ShapeRule(name, written, rank=len(fixed), at_least=dims[0].ellipsis))
        for k, d in enumerate(fixed):
            index = k - len(fixed) if dims[0].ellipsis else k
            if d.size is not None:
                rules.append(_ShapeRule(name, written, index=index, size=d.size))
            elif d.name in first and first[d.name] != (name, index):
                rules.append(_ShapeRule(name, written, index=index, dim=d.name,
                                        other=first[d.name]))
            else:
                first.setdefault(d.name, (name, index))  # type: ignore[arg-type]
    return rules


def _shape_checks(op: str, custom: Custom, optional: set[str]) -> list[Check]:
    """The wrapper's checks of the declared shapes (:func:`_shape_rules`), in Python."""
    checks: list[Check] = []
    for r in _shape_rules(custom):
        shape, expr = f"{r.input}.shape", f"{r.input}.shape[{r.index}]"
        if r.rank is not None:
            condition = f"len({shape}) {'<' if r.at_least else '!='} {r.rank}"
            count = f"at least {r.rank}" if r.at_least else str(r.rank)
            noun = "dim" if r.rank == 1 else "dims"
            check = Check(condition, f"{op}: {r.input} must have {count} {noun} {r.written}, "
                          f"got shape {{list({shape})}}", condition)
        elif r.size is not None:
            check = Check(f"{expr} != {r.size}",
                          f"{op}: {expr} must be {r.size} {r.written}, got {{{expr}}}",
                          f"{expr} not in ({r.size}, -1)")
        else:
            assert r.other is not None
            other = f"{r.other[0]}.shape[{r.other[1]}]"
            check = Check(f"{expr} != {other}",
                          f"{op}: {expr} ({r.dim}) is {{{expr}}} but {other} ({r.dim}) is "
                          f"{{{other}}}", f"-1 not in ({expr}, {other}) and {expr} != {other}")
        if r.input in optional:  # checked when given
            check = Check(f"{r.input} is not None and ({check.condition})", check.message,
                          f"{r.input} is not None and ({check.static_condition})")
        checks.append(check)
    return checks


@dataclass(frozen=True)
class InputChecks:
    """The generated .cc's checks of the inputs, in C++ (opgen/paddle.h's checks): what the
    wrapper checks in Python, for every way into the op (the raw API, a static graph, a saved
    model), before a kernel or InferShape reads a dim."""

    shapes_signature: str | None  # CheckShapes(<input>_shape, ...): the declared shapes
    shapes: list[str]             #   its body
    infer_call: str               #   its call from InferShape (over the shapes it receives,
                                  #   inside opgen::InferShapesOrUnknown: indented 4)
    inputs_signature: str | None  # CheckInputs(<inputs>): shapes, fixed dtypes, one device
    inputs: list[str]             #   its body
    comment: list[str]            #   the comment above it: what it checks, in words


def _input_checks(op: str, custom: Custom, tensors: dict[str, Tensor],
                  params: dict[str, str], entry_params: list[str]) -> InputChecks:
    """The C++ form of :func:`_shape_checks` (the same :func:`_shape_rules`), plus the dtypes
    the dispatch does not see (a fixed dtype, ``same as``) and the inputs' device. ``op`` is the
    op's name as a C++ literal. Each body line is a statement as the template writes it, indented
    2; an optional input's checks are inside an ``if`` on it."""

    def guarded(name: str, given: str, calls: list[tuple[str, list[str]]]) -> list[str]:
        """The calls, inside ``if (given) {...}`` where input ``name`` is optional."""
        if not tensors[name].optional:
            return [wrap_call(fn, args, ";", indent=2) for fn, args in calls]
        return [f"if ({given}) {{", *("  " + wrap_call(fn, args, ";", indent=4)
                                      for fn, args in calls), "}"]

    def dim(name: str, index: int) -> str:
        """Dim ``index`` of input ``name`` in C++, from its ``<name>_shape``."""
        shape = f"{name}_shape"
        if index < 0:
            return f"{shape}{'->' if tensors[name].optional else '.'}end()[{index}]"
        return f"(*{shape})[{index}]" if tensors[name].optional else f"{shape}[{index}]"

    rules = _shape_rules(custom)
    shaped = list(dict.fromkeys(r.input for r in rules))
    shapes: list[str] = []
    for name, group in itertools.groupby(rules, key=lambda r: r.input):
        calls = []
        for r in group:
            text = cpp_string(f"{name}.shape[{r.index}]")
            if r.rank is not None:
                shape = f"*{name}_shape" if tensors[name].optional else f"{name}_shape"
                calls.append(("opgen::CheckRank", [op, cpp_string(name), shape, str(r.rank),
                                                   "true" if r.at_least else "false",
                                                   cpp_string(r.written)]))
            elif r.size is not None:
                calls.append(("opgen::CheckDim", [op, text, dim(name, r.index), str(r.size),
                                                  cpp_string(r.written)]))
            else:
                assert r.other is not None and r.dim is not None
                calls.append(("opgen::CheckSameDim", [
                    op, cpp_string(r.dim), text, dim(name, r.index),
                    cpp_string(f"{r.other[0]}.shape[{r.other[1]}]"), dim(*r.other)]))
        shapes += guarded(name, f"{name}_shape", calls)
    shape_params = [f"const paddle::optional<std::vector<int64_t>>& {n}_shape"
                    if tensors[n].optional else f"const std::vector<int64_t>& {n}_shape"
                    for n in shaped]

    inputs: list[str] = []
    if shaped:
        inputs.append(wrap_call("CheckShapes", [f"opgen::ShapeOf({n})" if tensors[n].optional
                                                else f"{n}.shape()" for n in shaped], ";",
                                indent=2))
    names = list(tensors)
    for name, tensor in tensors.items():
        value = f"{name}->dtype()" if tensor.optional else f"{name}.dtype()"
        calls = []
        if name in params:
            pass  # Dispatch refuses a dtype the spec does not list
        elif tensor.same_as is not None:
            calls.append(("opgen::CheckSameDtype", [op, cpp_string(name), value,
                                                    cpp_string(tensor.same_as),
                                                    f"{tensor.same_as}.dtype()"]))
        else:
            calls.append(("opgen::CheckDtype", [op, cpp_string(name), value, "paddle::DataType::"
                                                + DTYPE_TYPES[tensor.dtypes[0]][1]]))
        if name != names[0]:
            calls.append(("opgen::CheckSamePlace", [op, cpp_string(name), f"*{name}"
                                                    if tensor.optional else name,
                                                    cpp_string(names[0]), names[0]]))
        if calls:
            inputs += guarded(name, name, calls)
    checked = [what for what, present in (
        ("the shapes the spec declares", shaped),
        ("the dtypes it fixes", any(n not in params for n in tensors)),
        ("one device", len(tensors) > 1)) if present]
    return InputChecks(
        shapes_signature=wrap_call("void CheckShapes", shape_params, " {") if shaped else None,
        shapes=shapes,
        infer_call=wrap_call("CheckShapes", [f"{n}_shape" for n in shaped], ";", indent=4),
        inputs_signature=wrap_call("void CheckInputs", entry_params, " {") if inputs else None,
        inputs=inputs,
        comment=["// " + line for line in textwrap.wrap(
            "What the kernels take for granted of their inputs, beyond the dtypes Dispatch "
            "checks: " + _alternatives(checked).replace(" or ", " and ") +
            ". The Python wrapper names the same causes in its own words.", 97)] if checked else [])


def _dispatch(params: dict[str, str], tensors: dict[str, Tensor]) -> list[str]:
    """The body of the generated Dispatch: nested switches over the dtypes of the inputs with
    several, each case calling ``f`` with a tag per parameter."""
    names = list(params)
    lines: list[str] = []

    def level(depth: int, chosen: list[str], indent: str) -> None:
        if depth == len(names):
            tags = ", ".join(f"Tag<{DTYPE_TYPES[d][0]}>{{}}" for d in chosen)
            lines.append(f"{indent}return f({tags});")
            return
        name = names[depth]
        lines.append(f"{indent}switch ({name}) {{")
        for d in tensors[name].dtypes:
            lines.append(f"{indent}  case paddle::DataType::{DTYPE_TYPES[d][1]}:")
            level(depth + 1, [*chosen, d], indent + "    ")
        lines.append(f"{indent}  default:")
        lines.append(f"{indent}    break;")
        lines.append(f"{indent}}}")
        if depth > 0:
            lines.append(f"{indent}break;")

    if names:
        level(0, [], "  ")
    else:
        lines.append("  return f();")
        return lines
    return lines


def _trivial(outputs: dict[str, Tensor], inputs: dict[str, Tensor], spec: CustomOpSpec,
             custom: Custom) -> dict[str, str | None]:
    """For each output, the input it is a copy of in the skeleton (same shape and dtype), if any."""
    copies: dict[str, str | None] = {}
    for name, out in outputs.items():
        tree = custom.out_shapes[name]
        source = None
        if len(tree.elts) == 1 and isinstance(tree.elts[0], ast.Starred):
            candidate = tree.elts[0].value.value.id  # type: ignore[attr-defined]
            if out.same_as == candidate:
                source = candidate
        copies[name] = source
    return copies


@dataclass(frozen=True)
class Kernel:
    """One user-owned kernel function (forward or backward, CPU or CUDA)."""

    function: str                # Forward or Backward: ForwardCPU and ForwardCUDA are its kernels
    args: str                    # ForwardArgs or BackwardArgs
    template: str                # "template <typename IdsT, typename TableT>", or "inline"
    cpu_call: str                # the generated code's dispatched call of <function>CPU
    cuda_call: str               #   and of <function>CUDA
    fields: list[tuple[str, str]]  # (args.member, what it is) for the comment above it
    copies: list[tuple[str, str, str, bool]]  # (output, input, C++ type, whether NAME_ makes
                                              # them one tensor): the skeleton copies
    zeros: list[tuple[str, str]]        # (output, C++ type): the skeleton zero-fills
    allocated: list[OutShape]           # data-dependent outputs: the skeleton allocates them
    sizes: int                          #   their -1 dims, which the CUDA skeleton reads back

    @property
    def comment(self) -> list[str]:
        """The comment lines listing ``fields`` under ``// <function>, on ... tensors:``, each
        field's text wrapped, its continuation lines four columns in."""
        return [line for field, what in self.fields
                for line in _comment_entry(f"{field}: {what}")]

    def fills(self, op: str, device: str) -> list[str]:
        """The skeleton's copies and zero-fills on ``device`` (cpu or cuda), statements and
        comments from column 2, wrapped."""
        lines: list[str] = []
        for out, source, type_, aliased in self.copies:
            src, dst = f"args.{source}.data<{type_}>()", f"args.{out}.data<{type_}>()"
            if device == "cpu":
                copy = wrap_code(f"std::copy_n({src}, args.{source}.numel(), {dst});",
                                 indent=4 if aliased else 2)
                if aliased:
                    head = f"if ({dst} != {src}) {{  // {op}_(): the same tensor"
                    lines += [head if 2 + len(head) <= 100 else
                              f"// In {op}_(), {out} is {source}: nothing to copy.\n  " +
                              wrap_code(f"if ({dst} != {src}) {{", indent=2),
                              "  " + copy, "}"]
                else:
                    lines.append(copy)
                continue
            launch = ("  CopyKernel<<<opgen::cuda::GridFor(n, kThreads, gpu.id), kThreads, 0, "
                      "gpu.stream>>>(\n        " + wrap_hanging(f"{src}, {dst}, n);", indent=8))
            if aliased:
                lines += [f"// In {op}_(), {out} is {source}: nothing to copy.",
                          f"if (const int64_t n = args.{out}.numel();",
                          "    " + wrap_code(f"n > 0 && {dst} != {src}) {{", indent=6)]
            else:
                lines.append(f"if (const int64_t n = args.{out}.numel(); n > 0) {{")
            lines += [launch, "}"]
        for out, type_ in self.zeros:
            data = f"args.{out}.data<{type_}>()"
            if device == "cpu":
                lines.append(wrap_code(f"std::fill_n({data}, args.{out}.numel(), {type_}(0));",
                                       indent=2))
                continue
            memset = f"cudaMemsetAsync({data}, 0, args.{out}.numel() * sizeof({type_}),"
            lines.append(memset + "\n" + " " * 18 + "gpu.stream);" if 2 + len(memset) <= 100 else
                         wrap_code(memset + " gpu.stream);", indent=2))
        return lines


@dataclass(frozen=True)
class InPlace:
    """The in-place variant of the spec's ``inplace: {input: output}``: ``NAME_`` in Python,
    registered as its own op whose outputs are written over their inputs (``SetInplaceMap``); its
    kernels are the op's, given the input as the output."""

    pairs: dict[str, str]        # input -> the output written over it
    op_name: str                 # <op_name>_inplace
    py_name: str                 # <name>_
    kept: list[str]              # the outputs it allocates (not written over an input)
    signature: str               # its forward's head; void when every output is in place
    infer_shape: str             # the heads of its inference functions: the kept outputs only
    infer_dtype: str
    shape_inputs: list[str]      # inputs whose shapes the kept outputs' shapes read
    forward_args: str            # ForwardArgs, each in-place output bound to its input
    paddle_map: str              # SetInplaceMap's argument
    differentiable: bool         # False: the backward reads the inputs this overwrites
    grad_input: str | None       # an input written over that may be float: the autograd test's
    py_def: str
    doc: list[str]               # NAME_'s docstring body, wrapped
    no_gradient: list[str]       # why not: Python string literals, wrapped
    not_honoured: list[str]      # Paddle 2.6's refusal, likewise


def _inplace(spec: Any, camel: str, attrs: list[Attr], out_shapes: list[OutShape],
             signatures: dict[str, str]) -> InPlace | None:
    """The in-place variant, where the spec asks for one."""
    m: CustomOpSpec = spec.model
    if not m.inplace:
        return None
    pairs = dict(m.inplace)
    over = {o: i for i, o in pairs.items()}
    kept = [o for o in m.outputs if o not in over]
    vec = "std::vector<paddle::Tensor>"
    tensors = [f"paddle::Tensor& {n}" if n in pairs else
               f"const paddle::optional<paddle::Tensor>& {n}" if t.optional else
               f"const paddle::Tensor& {n}" for n, t in m.inputs.items()]
    head = f"{vec} {camel}ForwardInPlace" if kept else f"void {camel}ForwardInPlace"
    pair_text = ", ".join(f"{o} over {i}" for i, o in pairs.items())
    inputs_text = ", ".join(pairs)
    differentiable = not m.backward
    doc = [
        f"{m.name} in place: {pair_text} (Paddle's convention for in-place ops: a trailing "
        f"underscore). Returns what {m.name} returns; the outputs written over an input share "
        f"its memory: use them, not {inputs_text}, in what follows.",
        f"As with Paddle's own in-place ops, {inputs_text} may not be a leaf tensor that "
        "requires a gradient" + ("." if differentiable else
                                 f", and no input may require one: {m.name}'s backward reads "
                                 f"the inputs, and this overwrites {inputs_text}."),
    ]
    no_gradient = (f"{m.name}_: the backward of {m.name} reads its inputs, and {m.name}_ "
                   f"overwrites {inputs_text}; call {m.name}() where a gradient is needed")
    not_honoured = (f"{m.name}_: Paddle 2.6's custom-op entry writes an in-place op's result to "
                    f"new memory, leaving {inputs_text} as it was; use {m.name}() (or Paddle 3)")
    used = {n for s in out_shapes if s.name in kept and not s.data_dependent for n in s.inputs}
    return InPlace(
        pairs=pairs,
        op_name=f"{spec.op_name}_inplace",
        py_name=f"{m.name}_",
        kept=kept,
        signature=wrap_call(head, tensors + [a.kernel_param for a in attrs], " {"),
        infer_shape=signatures["inplace_infer_shape"],
        infer_dtype=signatures["inplace_infer_dtype"],
        shape_inputs=[n for n in m.inputs if n in used],
        forward_args=wrap_call(f"const {m.name}::ForwardArgs args",
                               [*m.inputs, *(over.get(o, o) for o in m.outputs)] +
                               [a.name for a in attrs], ";", indent=2)
        .replace("(", "{", 1).replace(");", "};"),
        paddle_map="{" + ", ".join(f"{{{cpp_string(i)}, {cpp_string(o)}}}"
                                   for i, o in pairs.items()) + "}",
        differentiable=differentiable,
        grad_input=next((n for n in pairs if any(d in FLOAT_DTYPES for d in
                                                 _choices(spec.kind_data.dtypes, n))), None),
        py_def=py_def(f"{m.name}_", [f"{n}: paddle.Tensor | None = None" if t.optional
                                     else f"{n}: paddle.Tensor" for n, t in m.inputs.items()] +
                      [f"{a.name}: {a.py_type} = {a.py_default}" for a in attrs],
                      py_returns(len(m.outputs))),
        doc=[line.strip() for paragraph in doc
             for line in [*textwrap.wrap(paragraph, 96, initial_indent="   "), ""]][:-1],
        no_gradient=string_lines(no_gradient, 66),
        not_honoured=string_lines(not_honoured, 63),
    )



@dataclass(frozen=True)
class Context(OpText, BackwardStubText):
    """The template context of one custom op."""

    library: str
    inputs: list[Tensor]
    outputs: list[Tensor]
    attrs: list[Attr]
    params: list[str]                    # template parameters of the kernels
    param_inputs: list[str]              # the inputs whose dtypes they are
    dispatch: list[str]                  # the body of Dispatch
    out_shapes: list[OutShape]
    paddle_h_for: str                    # what the kernels' header takes from opgen/paddle.h
                                         #   ("" where nothing: it is not included)
    shapes_checked: bool                 # an output's shape may come out negative
    shapes_divide: bool                  # an output's shape has `//`, which may divide by 0
    empty_outputs: str | None            # the wrapper's `if` where every output has no elements
                                         #   on Paddle 2.6 (on Paddle 3 the entry points return
                                         #   them); None: never, or the kernels size them
    empty_checks: dict[str, str] | None  # the same in the entry points (C++ statements)
    infer_throws: bool                   # InferShape may refuse the inputs: it runs its body in
                                         #   opgen::InferShapesOrUnknown
    shape_attrs: list[Attr]              # int attrs InferShape takes
    shape_inputs: list[str]              # inputs whose shapes the entry reads (fixed outputs)
    data_dependent: list[OutShape]       # outputs with -1 dims: the kernels allocate them
    spec_shape_params: str               # the tests' spec_shapes(): inputs, then shape attrs
    checks: list[Check]
    input_checks: InputChecks            # the same in C++, with dtypes and devices
    backward: list[str]                  # inputs that get gradients
    grad_outputs: list[str]              # grad_<output>
    grad_checks: list[str]               # the backward's checks of its grad_<output>s
    poisoned: dict[str, str]             # forward, inplace, backward: their Poison call
                                         #   ("" where they allocate nothing)
    grad_shape_checked: str | None       # a float output whose gradient's shape they check
    forward_kernel: Kernel
    backward_kernel: Kernel | None
    signatures: dict[str, str]
    py_params: str
    op_name_cpp: str                     # op_name as a C++ string literal
    optional_inputs: list[str]           # inputs that may be None
    py_def: str                          # the wrapper's `def` line(s)
    py_attrs: str                        # `attrs = (...)`: the attrs as the op takes them
    allocations: list[str]               # the forward's output allocations, C++ statements
    forward_args: str                    # the forward's ForwardArgs initialization
    backward_allocations: list[str]      # the backward's gradient allocations
    backward_args: str                   #   and its BackwardArgs initialization
    dims: dict[str, str]                 # dim name -> its test size
    ranges: dict[str, tuple[str, str]]
    combos: list[Combo]
    test_imports: list[str]
    dtype_names: dict[str, str]              # tensor -> "int32 or int64" for messages
    test_shapes: dict[str, str]              # input -> its test shape, over `lead` and `dims`
    free_lead: bool                          # the deploy tests' InputSpecs: the leading dims
    free_dims: list[str]                     #   and these named dims are None (free_dims())
    free_comment: list[str]                  # which are free and why the others are not: lines
    test_ranges: dict[str, str]              # integer input -> (low, high) over DIMS
    wrong_dtype: tuple[str, str] | None      # an input, and a dtype it refuses (None: every
                                             #   input takes every dtype)
    wrong_rank: tuple[str, str] | None       # a required input of a fixed rank, and the error
                                             #   (a regular expression) for a dim more
    inplace: InPlace | None                  # the in-place variant, where the spec asks
    deploy_scaled: str | None                # the deploy tests' model scales this input by its
                                             #   parameter: the first with a gradient, else the
                                             #   first float one (None: no float input)
    static_variables: dict[str, Any]         # partials/wrapper_static_variables.py.jinja's text
    deploy_model: dict[str, str]             # partials/deploy_model.py.jinja's
    cpp: dict[str, Any]                      # the C++ files' text that names the op or its
                                             #   tensors, wrapped where the templates put it
    py: dict[str, Any]                       #   the wrapper's (_wrapper_text)
    test: dict[str, Any]                     #   the test's (_test_text)
    reference: dict[str, dict[str, str]]     #   reference.py's, by function (_reference_text)


def _string_constant(name: str, literal: str, indent: int) -> str:
    """``const char* const name = literal;`` from column ``indent``, the literal on a line of its
    own where the statement does not fit one."""
    line = f"const char* const {name} = {literal};"
    if indent + len(line) <= 100:
        return line
    return f"const char* const {name} =\n{' ' * (indent + 4)}{literal};"


def _comment_entry(text: str) -> list[str]:
    """``//   text`` (an entry of a kernel's comment) wrapped within 100 columns, its continuation
    lines four columns further in."""
    lines = textwrap.wrap(text, 95, subsequent_indent="    ", break_long_words=False,
                          break_on_hyphens=False)
    return ["//   " + line for line in lines]


def _cpp_text(spec: Any, custom: Custom, inputs: dict[str, Tensor], outputs: dict[str, Tensor],
              attrs: list[Attr], dynamic: dict[str, OutShape], params: dict[str, str],
              paddle_h_for: str) -> dict[str, Any]:
    """The C++ files' text that names the op or its tensors, wrapped where the templates put it:
    the files' header comments (``cc_header``, ``cu_header``, ``h_header``; ``cuda_called``, the
    end of the CUDA kernels' file's), comments naming the op or its spec (``shapes_comment``,
    ``inplace_comment``, ``inplace_infer_comment``), PD_BUILD_OP's lists (``inputs``,
    ``outputs``, ``attrs``, ``grad_inputs``, ``grad_outputs``), the .h's ``paddle_h`` include and
    Dispatch's error (``no_kernel``), the CUDA skeleton's ``counted`` tensor, the in-place op's
    ``inplace_kernel_fn`` (from column 4), and by
    data-dependent output its ``check_allocated`` call."""
    m: CustomOpSpec = spec.model
    spec_file = nobreak(cpp_comment(Path(spec.path).name))
    generated = f"Generated by opgen from {spec_file}; `opgen generate` rewrites it."
    op = cpp_string(spec.op_name)
    no_kernel = ", ".join([op, '": "', "kernel"] + [
        f'"{": no kernel for " if k == 0 else ", "}{p} ", {p}' for k, p in enumerate(params)])
    paddle_inputs = [f"paddle::Optional({cpp_string(n)})" if t.optional else cpp_string(n)
                     for n, t in inputs.items()]
    first = next(iter(m.inputs))
    text: dict[str, Any] = {
        "cc_header": comment_text(
            "The op's registration with Paddle, its shape and dtype inference, and the CPU entry "
            f"points that allocate the outputs and dispatch to the kernels of {m.name}_cpu.h over "
            "the dtypes.") + "\n" + comment_text(generated),
        "cu_header": comment_text(
            f"The CUDA entry points: the kernels of {m.name}_cuda.cuh run on the inputs' device "
            "and stream, dispatched over the dtypes, and a failed launch is an error naming the "
            "kernel.") + "\n" + comment_text(generated),
        "h_header": comment_text(
            f"What the kernels of {m.name}_cpu.h and {m.name}_cuda.cuh receive, and the dispatch "
            f"over the dtypes the spec lists. {generated}"),
        # 97 columns, as the rest of that file's first comment (and as it was written before)
        "cuda_called": comment_text(
            f"{m.name}.cu calls these with the inputs' device current; launch on gpu.stream, and "
            "it checks the launch.", width=97),
        "shapes_comment": comment_text(
            f"The inputs' shapes as {spec_file} declares them, checked before a dim is read: by "
            "the entry points and by InferShape, which sees a static graph's dims not known yet "
            "as -1."),
        "inputs": op_list("Inputs", paddle_inputs),
        "outputs": op_list("Outputs", [cpp_string(o) for o in outputs]),
        "attrs": op_list("Attrs", [cpp_string(a.paddle_decl) for a in attrs]),
        "grad_inputs": op_list("Inputs", paddle_inputs + [
            f"paddle::Grad({cpp_string(o)})" for o in outputs]),
        "grad_outputs": op_list("Outputs", [f"paddle::Grad({cpp_string(n)})"
                                                for n in m.backward or []]),
        "paddle_h": with_comment('#include "opgen/paddle.h"', paddle_h_for, indent=0,
                                 prefix="  // ") if paddle_h_for else "",
        "no_kernel": wrap_code(f"opgen::Fail({no_kernel});", indent=2),
        "counted": wrap_code("paddle::Tensor counted = paddle::empty({kSizes}, "
                             f"paddle::DataType::INT64, args.{first}.place());",
                             indent=2),
        # A library built without CUDA (--cpu-only) hands GPU tensors to the CPU kernels otherwise.
        "cpu_only": {k: f"if (!{first}.is_cpu()) {{\n    " + wrap_code(
            f"opgen::Fail({cpp_string(f'{spec.op_name}: {k} expected CPU tensors, got ')}, "
            f"{first}.place());", indent=4) + "\n  }" for k in ("ForwardCPU", "BackwardCPU")},
        "check_allocated": {n: wrap_code(
            f'opgen::CheckAllocated({op}, kernel, args.{n}, "{n}", {s.text_cpp}, '
            f'"{s.allocate}");', indent=2) for n, s in dynamic.items()},
    }
    if m.inplace:
        op_inplace = f"{spec.op_name}_inplace"
        pairs = ", ".join(f"{i} as {o} too" for i, o in m.inplace.items())
        text["inplace_comment"] = comment_text(
            f"{op_inplace} (the spec's `inplace:`): the kernels get {pairs}.")
        text["inplace_kernel_fn"] = with_comment(
            f".SetKernelFn(PD_KERNEL({camel_case(m.name)}ForwardInPlace));",
            "its outputs are its inputs: no inference", indent=4, prefix="  // ")
        text["inplace_infer_comment"] = comment_text(
            f"{op_inplace} infers the outputs it allocates; Paddle gives the others their "
            "inputs'.")
    return text


def _poison(tensors: list[str]) -> str:
    """The entry point's call that fills its new outputs ``tensors`` with 0xFF bytes where the
    generated tests ask (``opgen::PoisonOutputs``); "" where it allocates none."""
    if not tensors:
        return ""
    return wrap_code(f"if (opgen::PoisonOutputs()) Poison({{{', '.join(tensors)}}});", indent=2)


def _grad_checks(op_name: str, inputs: list[str], outputs: dict[str, Tensor],
                 out_shapes: list[OutShape]) -> list[str]:
    """The backward's statements that check the gradient of each float output against it
    (``opgen::CheckGrad``): the output's shape, computed as the forward computes it, where the
    inputs give it; its dtype; the first input's device. (paddle.grad takes gradients for float
    outputs only; what an integer output's holds is Paddle's, and no kernel reads it.)"""
    shapes = {s.name: s for s in out_shapes}
    checked = [n for n, t in outputs.items() if t.is_float]
    computed = [s for s in out_shapes if s.name in checked and not s.data_dependent]
    lines = [f"const std::vector<int64_t> {n}_shape = {n}.shape();" for n in inputs
             if any(n in s.inputs for s in computed)]
    for s in computed:
        lines += s.cpp
    first = inputs[0]
    for name in checked:
        shape = "nullptr" if shapes[name].data_dependent else f"&{name}_shape"
        lines.append(wrap_call("opgen::CheckGrad", [
            cpp_string(op_name), cpp_string(f"grad_{name}"), f"grad_{name}", cpp_string(name),
            shape, outputs[name].cpp_dtype_expr, cpp_string(first), first], ";", indent=2))
    return lines


def _static_call(op_name: str, listed: str, outputs: int, backward: bool) -> str:
    """The wrapper's call in a static graph: the op's outputs; a forward-only op's marked
    stop_gradient, as eager marks them (a to_static program that trains otherwise fails to build:
    Paddle finds no gradient op for it)."""
    if backward:
        return wrap_code(f"return _ops().{op_name}({listed}, *attrs)", indent=8)
    one = outputs == 1
    lines = [wrap_code(f"{'out' if one else 'outs'} = _ops().{op_name}({listed}, *attrs)",
                     indent=8),
             "# forward-only: no gradient flows back through the op, as in eager mode"]
    lines += ["out.stop_gradient = True", "return out"] if one else \
        ["for out in outs:", "    out.stop_gradient = True", "return outs"]
    return ("\n" + " " * 8).join(lines)


def _wrapper_text(spec: Any, inputs: dict[str, Tensor], outputs: dict[str, Tensor],
                  attrs: list[Attr], shape_attrs: list[Attr], out_shapes: list[OutShape],
                  dynamic: dict[str, OutShape]) -> dict[str, Any]:
    """The wrapper's text that names the op or its tensors, wrapped where the template puts it:
    its functions' ``def`` lines, loops over the inputs, calls and errors; by input, its dtype
    error (``dtype_errors``), its contiguity check (``contiguous``) and its entry under Args:
    (``arg_docs``); by output, its entry under Returns: (``return_docs``)."""
    m: CustomOpSpec = spec.model
    name, first = m.name, next(iter(m.inputs))
    names = list(m.inputs)
    listed = ", ".join(names)
    shape_args = ", ".join(names + [a.name for a in shape_attrs])
    optional = any(t.optional for t in inputs.values())

    def pairs(items: list[str]) -> str:
        return ", ".join(f'("{n}", {n})' for n in items) + ("," if len(items) == 1 else "")

    def run(op: str, indent: int) -> str:
        return wrap_code(f'outs = (_run or _load_run())("{op}", {listed}, *attrs)', indent=indent)

    def empties(written_over: dict[str, str], indent: int) -> str:
        items = [written_over[o] if o in written_over else
                 f"paddle.empty(shapes[{k}], " +
                 (f"{t.same_as}.dtype)" if t.same_as else f"paddle.{t.dtypes[0]})")
                 for k, (o, t) in enumerate(outputs.items())]
        return wrap_code("outs = [" + ", ".join(items) + "]", indent=indent)

    def dtype_error(t: Tensor) -> str:
        if t.optional:
            rule = (f"{{_dtype_name({t.same_as})}}, the dtype of {t.same_as}" if t.same_as else
                    t.dtypes[0])
            text = f"{name}: {t.name} is {{_dtype_name({t.name})}}; it must be {rule}"
        elif t.same_as:
            text = (f"{name}: {t.name} is {{_dtype_name({t.name})}}; it must have the dtype of "
                    f"{t.same_as} ({{_dtype_name({t.same_as})}})")
        else:
            text = f"{name}: {t.name} is {{_dtype_name({t.name})}}; {name} takes {t.dtype_text}"
        return py_string_call("raise TypeError(", text, indent=8)

    def contiguous(t: Tensor, comment: bool) -> str:
        check = py_if(f"{t.name + ' is not None and ' if t.optional else ''}"
                      f"not {t.name}.is_contiguous()", indent=4)
        return with_comment(check, "the kernels read dense memory", indent=4) if comment \
            else check

    shapes = "[" + ", ".join(s.py for s in out_shapes) + "]"
    py: dict[str, Any] = {
        "check_types_def": py_def("_check_types", names, "None"),
        "check_types_loop": wrap_code(f"for name, tensor in ({pairs(names)}):", indent=4),
        "check_dtypes_def": py_def("_check_dtypes", names, "None"),
        "check_inputs_def": py_def("_check_inputs", names, "None"),
        "place_loop": wrap_code(f"for name, tensor in ({pairs(names[1:])}):", indent=4),
        "place_error": py_string_call(
            "raise ValueError(", f"{name}: {{name}} is on {{tensor.place}}, {first} on "
            f"{{{first}.place}}: the inputs must be on one device", indent=12),
        "explain_failure_def": py_def(
            "_explain_failure", names + ([a.name for a in shape_attrs] if not dynamic else []),
            "None"),
        "check_static_inputs_def": py_def("_check_static_inputs", names, "None"),
        "output_shapes_def": wrap_code(f"def _output_shapes({shape_args}):"),
        "output_shapes_doc": py_docstring(
            f"The outputs' shapes, as {nobreak(docstring_text(Path(spec.path).name))} computes "
            "them" +
            ("; a ValueError names a shape these inputs make impossible."
             if any(_checked(item, spec.kind_data.dims)
                    for tree in spec.kind_data.out_shapes.values() for item in tree.elts)
             else ".")),
        "shapes_try": wrap_code(f"shapes = {shapes}", indent=8),
        "shapes": wrap_code(f"shapes = {shapes}", indent=4),
        "shapes_return": wrap_code(f"return {shapes}", indent=4),
        "divide_by_zero": py_string_call(
            "raise ValueError(", f"{name}: an output's shape divides a dim by 0 for these "
            "inputs ({shown})", ") from None", indent=8),
        "negative": py_string_call(
            "raise ValueError(", f"{name}: {{output}}'s shape {{spec_shape}}: a dim is "
            "{negative} for these inputs; a size is at least 0", indent=12),
        "static_call": _static_call(spec.op_name, listed, len(m.outputs), bool(m.backward)),
        "not_eager_comment": comment_text(
            "Only what is not an eager tensor (a parameter" + (", None" if optional else "") +
            " or not a tensor at all) is checked here.", indent=4, prefix="# "),
        "run": run(spec.op_name, 8),
        "run_else": run(spec.op_name, 12),
        "check_inputs_12": wrap_code(f"_check_inputs({listed})", indent=12),
        "output_shapes_12": wrap_code(f"shapes = _output_shapes({shape_args})", indent=12),
        "empties": empties({}, 16),
        "explain_failure": wrap_code(
            f"_explain_failure({shape_args if not dynamic else listed})", indent=8),
        "dtype_errors": {t.name: dtype_error(t) for t in inputs.values()},
        "contiguous": {t.name: contiguous(t, True) for t in inputs.values()},
        "arg_docs": {t.name: doc_entry(f"{t.name}: {t.dtype_text}, {t.shape_text}" +
                                       (f"; {docstring_text(t.doc)}" if t.doc else "") + ".")
                     for t in inputs.values()},
        "return_docs": {t.name: doc_entry(
            f"{t.name}: {t.dtype_text}, {t.shape_text}" +
            (" (-1: a size the data gives)" if t.name in dynamic else "") +
            (f"; {docstring_text(t.doc)}" if t.doc else "") + ".") for t in outputs.values()},
    }
    if m.inplace:
        out = f"{name}_"
        op_inplace = f"{spec.op_name}_inplace"
        over = {o: i for i, o in m.inplace.items()}
        py |= {
            "inplace_static_call": wrap_code(f"return _ops().{op_inplace}({listed}, *attrs)",
                                             indent=8),
            "inplace_not_dense": {i: py_string_call(
                "raise ValueError(", f"{out}: {i} is a view that is not dense in memory; in "
                f"place, the op writes its memory: call .contiguous() first, or {name}()",
                indent=8) for i in m.inplace},
            "inplace_leaf_loop": wrap_code(
                f"for name, tensor in ({pairs(list(m.inplace))}):", indent=8),
            "inplace_leaf": py_string_call(
                "raise ValueError(", f"{out}: {{name}} is a leaf tensor that requires a gradient "
                "(stop_gradient=False); Paddle does not let an in-place op overwrite it: call "
                f"{name}() instead", indent=16),
            "inplace_any_gradient": wrap_code(
                "if any(t is not None and not t.stop_gradient for t in (" + listed +
                ("," if len(names) == 1 else "") + ")):", indent=8),
            "inplace_contiguous": {t.name: contiguous(t, False) for t in inputs.values()},
            "inplace_run": run(op_inplace, 4),
            "inplace_run_else": run(op_inplace, 8),
            "inplace_shapes": wrap_code(f"shapes = _output_shapes({shape_args})", indent=4),
            "inplace_empties": empties(over, 12),
        }
    return py


def _test_text(spec: Any, inputs: dict[str, Tensor], attrs: list[Attr],
               out_shapes: list[OutShape], combos: list[Combo], dims: dict[str, str],
               test_ranges: dict[str, str], wrong_dtype: tuple[str, str] | None,
               free: bool, varied: list[str]) -> dict[str, Any]:
    """The generated test's text that names the op or its tensors, wrapped where the template
    puts it (``combos``: one entry of COMBOS per combination; ``varied``: the named dims the
    forward and backward tests also try at :data:`_OTHER_SIZES`)."""
    m: CustomOpSpec = spec.model
    name, names = m.name, list(m.inputs)
    listed = ", ".join(names)
    test: dict[str, Any] = {
        "combos": [wrap_code(f'"{c.id}": ({c.dtypes}, {c.out_dtypes}),', indent=4)
                   for c in combos],
        "float64_combos": wrap_code("FLOAT64_COMBOS = [" + ", ".join(
            f'"{c.id}"' for c in combos if c.float64) + "]"),
        "dims": wrap_code("DIMS = {" + ", ".join(f'"{d}": {v}' for d, v in dims.items()) + "}"),
        "other_sizes": [
            wrap_code(f'"{case}-{d}={size}": (CASES["{case}"], {{**DIMS, "{d}": {size}}}),',
                      indent=4)
            for d in varied for case, size in _OTHER_SIZES],
        "ranges": wrap_code("RANGES = {" + ", ".join(
            f'"{n}": {r}' for n, r in test_ranges.items()) + "}"),
        "outputs": wrap_code(f"OUTPUTS = {list(m.outputs)}"),
        "backward": wrap_code(f"BACKWARD = {list(m.backward or [])}"),
        "optional": wrap_code(f"OPTIONAL = {[n for n, t in inputs.items() if t.optional]}"),
        "other_attrs": wrap_code("pytest.param({" + ", ".join(
            f'"{a.name}": {a.py_other}' for a in attrs) + '}, id="other-attrs"),', indent=4),
        "deploy_comment": comment_text(
            "Deploy: the op inside a static graph, saved, and loaded by a fresh process as a "
            "server would (docs/deploy.md). CPU, the first dtype combination at the typical "
            f"case's sizes; `opgen test {name} -- -m \"not deploy\"` skips these.", prefix="# "),
        "spec_shapes_return": wrap_code("return [" + ", ".join(s.py for s in out_shapes) + "]",
                                        indent=4),
        "shapes_model_forward_def": wrap_code(f"def forward(self, {listed}):", indent=4),
        "shapes_model_call": wrap_code(f"outputs = ot.as_tuple({name}({listed}))", indent=8),
        "static_matches": wrap_code(f"ot.assert_static_matches_eager(lambda: Model({name}, "
                                    "attrs), inputs, specs, grad_outputs, BACKWARD)", indent=4),
        "saved_model": wrap_code(
            f"ot.assert_saved_model_serves(lambda: Model({name}, attrs), inputs, specs, way, "
            "HERE, tmp_path, OUTPUTS" + (", other=deploy_inputs(other=True)[0]" if free else "") +
            ")", indent=4),
    }
    if wrong_dtype is not None:
        tensor, dtype = wrong_dtype
        test |= {
            "wrong_dtype_input": wrap_code(
                f'tensors["{tensor}"] = ot.to_paddle(np.zeros(tensors["{tensor}"].shape), '
                f'"{dtype}", device)', indent=4),
            "wrong_dtype_raises": py_string_call(
                "with pytest.raises(TypeError, match=", f"{name}: {tensor} is {dtype}", "):",
                indent=4),
        }
    if m.inplace:
        out = f"{name}_"
        test |= {
            "inplace": wrap_code(f"INPLACE = {dict(m.inplace)}"),
            "inplace_writes_doc": py_docstring(
                f"{out}'s outputs are {name}'s, each written over its input's memory."),
            "inplace_leaf_raises": py_string_call(
                "with pytest.raises(ValueError, match=",
                f"{out}: {{name}} is a leaf tensor that requires a gradient", "):", indent=4),
            "inplace_backward_raises": py_string_call(
                "with pytest.raises(RuntimeError, match=",
                f"the backward of {name} reads its inputs", "):", indent=4),
            "inplace_static_doc": py_docstring(
                f"In a static program {out} is the in-place op, computing {name}'s outputs."),
            "inplace_autograd_doc": py_docstring(
                "Paddle's rule: no in-place write over a leaf that requires a gradient. " +
                (f"{name} has no gradient, so through a non-leaf it runs." if not m.backward
                 else f"No gradient at all: the backward of {name} reads the inputs {out} "
                      "overwrites.")),
        }
    return test


def _reference_text(spec: Any, inputs: dict[str, Tensor], outputs: dict[str, Tensor],
                    attrs: list[Attr], dynamic: dict[str, OutShape],
                    copies: dict[str, str | None], grad_copies: dict[str, str | None],
                    whole: bool) -> dict[str, dict[str, str]]:
    """reference.py's text that names the op or its tensors, wrapped: per output and per gradient
    (``grad_<input>``), its ``def`` line, docstring and body."""
    m: CustomOpSpec = spec.model
    name = m.name
    optional = [n for n, t in inputs.items() if t.optional]
    required = [n for n in m.inputs if n not in optional]
    defaults = [f"{n}=None" for n in optional] + [f"{a.name}={a.py_default}" for a in attrs]
    def missing(function: str) -> str:
        return py_string_call("raise NotImplementedError(",
                              f"reference.py: write {function}() for {name}'s tests", indent=4)

    functions: dict[str, dict[str, str]] = {}
    for o, t in outputs.items():
        if o in dynamic:
            body = with_comment(f"return np.zeros({dynamic[o].reference_zeros})",
                                "the skeleton's kernels make its -1 sizes 0", indent=4)
        elif copies[o]:
            body = with_comment(f"return np.array({copies[o]}, dtype=np.float64)",
                                f"the skeleton's kernels copy {copies[o]}", indent=4)
        else:
            body = missing(o)
        functions[o] = {
            "def": wrap_code(f"def {o}({', '.join(required + defaults)}):"),
            "doc": py_docstring(f"{o}: {t.dtype_text}, {t.shape_text}" +
                                (" (-1: the size the data gives)" if o in dynamic else "") +
                                "."),
            "body": body,
        }
    for n in m.backward or []:
        if grad_copies[n]:
            body = with_comment(f"return np.array(grad_{grad_copies[n]}, dtype=np.float64)",
                                f"the skeleton's backward copies grad_{grad_copies[n]}", indent=4)
        elif whole:
            body = with_comment(f"return np.zeros({n}.shape)",
                                f"no output of the skeleton's forward depends on {n}", indent=4)
        else:
            body = missing(f"grad_{n}")
        functions[f"grad_{n}"] = {
            "def": wrap_code(f"def grad_{n}(" + ", ".join(
                required + [f"grad_{o}" for o in m.outputs] + defaults) + "):"),
            "doc": py_docstring(f"The gradient of {n}, given the gradients of the outputs; "
                                f"shaped like {n}."),
            "body": body,
        }
    return functions


def build_context(spec: Any) -> Context:
    """Compute every name and code fragment the custom op's templates need."""
    m: CustomOpSpec = spec.model
    custom: Custom = spec.kind_data
    camel = camel_case(m.name)
    params = _cpp_type_names([n for n in m.inputs if custom.dtypes[n].same_as is None
                              and len(custom.dtypes[n].choices) > 1], set(custom.dims))
    inputs = {n: _tensor(n, t, custom.dtypes[n], custom, params, False)
              for n, t in m.inputs.items()}
    outputs = {n: _tensor(n, t, custom.dtypes[n], custom, params, True)
               for n, t in m.outputs.items()}
    attrs = [_attr(n, a) for n, a in m.attrs.items()]

    out_shapes = []
    counted = 0  # the data-dependent dims before this output's: the CUDA skeleton's sizes[k]
    # InferShape's statements are indented 4 where they run in opgen::InferShapesOrUnknown
    infer_indent = 4 if _infer_throws(custom) else 2
    for name, tree in custom.out_shapes.items():
        used_attrs = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                             and n.id in m.attrs})
        cpp: list[str] = [f"std::vector<int64_t> {name}_shape;"]
        infer_cpp: list[str] = [f"std::vector<int64_t> {name}_shape;"]
        where = cpp_string(f"{spec.op_name}: {name}'s shape {ast.unparse(tree)}")
        spec_var = f"k{camel_case(name)}Shape"  # no input's or attr's name (snake_case)
        # the .h prints a data-dependent output's statements at 4 columns, the .cc others at 2
        indent = 4 if any(_data_dependent(item) for item in tree.elts) else 2
        if any(_checked(item, custom.dims) for item in tree.elts):  # what their errors say
            cpp.insert(0, _string_constant(spec_var, where, indent))
            infer_cpp.insert(0, _string_constant(spec_var, where, infer_indent))
        py_items = []
        for k, item in enumerate(tree.elts):
            if isinstance(item, ast.Starred):
                source = item.value.value.id  # type: ignore[attr-defined]
                if k == 0:  # the shape starts as a copy of the input's
                    for lines in (cpp, infer_cpp):
                        lines[-1] = f"std::vector<int64_t> {name}_shape = {source}_shape;"
                else:
                    line = (f"{name}_shape.insert({name}_shape.end(), {source}_shape.begin(), "
                            f"{source}_shape.end());")
                    cpp.append(line)
                    infer_cpp.append(line)
                py_items.append(f"*{source}.shape")
            else:
                for lines, infer, column in ((cpp, False, indent),
                                             (infer_cpp, True, infer_indent)):
                    dim = _cpp_item(item, custom.dims, "_shape", spec_var, infer=infer)
                    lines.append(wrap_expression(f"{name}_shape.push_back({dim});",
                                                 indent=column))
                py_items.append(_py_dim(item, custom.dims))
        data_dependent = [k for k, item in enumerate(tree.elts) if _data_dependent(item)]
        allocate = "Allocate" + camel_case(name)
        sizes = {k: f"sizes[{counted + j}]" for j, k in enumerate(data_dependent)}
        counted += len(data_dependent)
        out_shapes.append(OutShape(
            name, cpp, infer_cpp, "[" + ", ".join(py_items) + "]", _py_empty(tree, custom.dims),
            used_attrs,
            data_dependent=bool(data_dependent), text=ast.unparse(tree),
            text_cpp=cpp_string(ast.unparse(tree)), allocate=allocate,
            inputs=[n for n in m.inputs if any(re.search(rf"\b{n}_shape\b", line)
                                               for line in cpp)],
            cpu_skeleton=_skeleton_allocation(tree, name, allocate, custom.dims,
                                              dict.fromkeys(data_dependent, "0"), where),
            cuda_skeleton=_skeleton_allocation(tree, name, allocate, custom.dims, sizes, where),
            reference_zeros="[" + ", ".join("0" if k in data_dependent else py
                                            for k, py in enumerate(py_items)) + "]",
            allocate_call=wrap_call(f"    {name} = opgen::AllocateDataDependent",
                                    [cpp_string(spec.op_name), cpp_string(name),
                                     cpp_string(ast.unparse(tree)), f"{name}_shape", "shape",
                                     outputs[name].cpp_dtype_expr,
                                     f"{next(iter(m.inputs))}.place()"], ";")))
    shape_attr_names = sorted({a for s in out_shapes for a in s.attrs})
    shape_attrs = [a for a in attrs if a.name in shape_attr_names]

    template = ("template <" + ", ".join(f"typename {p}" for p in params.values()) + ">") \
        if params else "inline"

    def call(function: str, device: bool) -> str:
        """The dispatched call of a kernel, as the .cc and .cu write it (indented 2)."""
        dtypes = ", ".join([f'"{function}"'] + [f"args.{n}.dtype()" for n in params])
        tags = ", ".join(f"auto {n}_type" for n in params)
        lines = [f"{m.name}::Dispatch("]
        if 6 + len(f"{dtypes}, [&]({tags}) {{") <= 100:
            lines.append(f"    {dtypes}, [&]({tags}) {{")
        else:  # the lambda on a line of its own
            lines += ["    " + wrap_hanging(dtypes + ",", indent=6).replace("\n  ", "\n"),
                      f"    [&]({tags}) {{"]
        lines += [f"      using {t} = typename decltype({n}_type)::type;"
                  for n, t in params.items()]
        targs = f"<{', '.join(params.values())}>" if params else ""
        lines += [f"      {m.name}::{function}{targs}(args{', gpu' if device else ''});",
                  "    });"]
        return "\n  ".join(lines)

    copies = _trivial(outputs, inputs, m, custom)
    dynamic = {s.name: s for s in out_shapes if s.data_dependent}
    shapes_checked = any(_checked(item, custom.dims) for tree in custom.out_shapes.values()
                         for item in tree.elts)  # a shape may come out negative
    # The skeleton's forward is whole when each output copies an input or is data-dependent (its
    # -1 dims 0): then an input no output copies has a zero gradient, which its reference says.
    whole = all(copies[n] is not None or n in dynamic for n in m.outputs)
    def described(t: Tensor) -> str:
        text = f"{t.cpp_type}, {t.shape_text}"
        return f"optional: {text}, in *args.{t.name} when args.{t.name} is set" \
            if t.optional else text

    type_fields = [(p, _alternatives([DTYPE_TYPES[d][0] for d in inputs[n].dtypes]))
                   for n, p in params.items()]
    fwd_fields = type_fields + [(f"args.{n}", described(t)) for n, t in inputs.items()]
    written_over = {o: i for i, o in m.inplace.items()}
    fwd_fields += [(f"args.{n}", f"{t.cpp_type}, {t.shape_text}; " +
                    (f"allocate it (args.{dynamic[n].allocate}(shape)), then fill it"
                     if n in dynamic else "fill every element")
                    + (f"; in {m.name}_() it is args.{written_over[n]} (one tensor)"
                       if n in written_over else "")) for n, t in outputs.items()]
    fwd_fields += [(f"args.{a.name}", f"{a.type} attr") for a in attrs]
    forward_kernel = Kernel(
        function="Forward", args="ForwardArgs", template=template,
        cpu_call=call("ForwardCPU", False), cuda_call=call("ForwardCUDA", True),
        fields=fwd_fields,
        copies=[(o, s, outputs[o].cpp_type, m.inplace.get(s) == o) for o, s in copies.items()
                if s is not None],
        zeros=[(o, outputs[o].cpp_type) for o, s in copies.items()
               if s is None and o not in dynamic],
        allocated=list(dynamic.values()), sizes=counted)

    backward = list(m.backward or [])
    grad_copies: dict[str, str | None] = {}
    backward_kernel = None
    if backward:
        for name in backward:
            grad_copies[name] = next((o for o, s in copies.items() if s == name), None)
        bwd_fields = type_fields + [(f"args.{n}", described(t)) for n, t in inputs.items()]
        bwd_fields += [(f"args.grad_{n}", f"{t.cpp_type}, shaped like {n}")
                       for n, t in outputs.items()]
        bwd_fields += [(f"args.grad_{n}", f"{inputs[n].cpp_type}, shaped like {n}; fill every "
                        "element") for n in backward]
        bwd_fields += [(f"args.{a.name}", f"{a.type} attr") for a in attrs]
        backward_kernel = Kernel(
            function="Backward", args="BackwardArgs", template=template,
            cpu_call=call("BackwardCPU", False), cuda_call=call("BackwardCUDA", True),
            fields=bwd_fields,
            copies=[(f"grad_{n}", f"grad_{o}", inputs[n].cpp_type, False)
                    for n, o in grad_copies.items() if o is not None],
            zeros=[(f"grad_{n}", inputs[n].cpp_type) for n, o in grad_copies.items()
                   if o is None],
            allocated=[], sizes=0)

    # Outputs are allocated as Paddle 2.6 takes them when empty (opgen/paddle.h): an op with
    # data-dependent outputs runs its kernels for empty inputs too (only they know the sizes), and
    # the others return empty outputs without a kernel.
    allocate = "opgen::AllocateOutput"
    # Where no output has an element, the entry points return without a kernel: the forward its
    # empty outputs (on Paddle 2.6 the wrapper makes them first), the backward zero gradients.
    all_empty = _all_empty([s.py_empty for s in out_shapes])
    skip_empty = not dynamic and all_empty != "False"
    zeros = [f"opgen::ZerosLike({n})" for n in m.backward or []]
    empty_checks = {
        "forward_if": wrap_call("if (opgen::NoElements", list(m.outputs), ") {", indent=2),
        "dtypes": wrap_call(f"{m.name}::Dispatch", [cpp_string("Forward")] +
                            [f"args.{n}.dtype()" for n in params] + ["[](auto...) {}"], ";",
                            indent=4),
        "backward_if": wrap_call("if (opgen::NoElements", [f"grad_{n}" for n in m.outputs],
                                 ") {", indent=2),
        "zeros": wrap_call("return ", zeros, ";", indent=4).replace("(", "{", 1)
        .replace(");", "};"),
    } if skip_empty else None
    vec = "std::vector<paddle::Tensor>"
    tensors = [f"const paddle::optional<paddle::Tensor>& {n}" if t.optional else
               f"const paddle::Tensor& {n}" for n, t in m.inputs.items()]
    kernel_attrs = [a.kernel_param for a in attrs]
    grad_in = tensors + [f"const paddle::Tensor& grad_{n}" for n in m.outputs]
    shape_fn, dtype_fn = "std::vector<std::vector<int64_t>>", "std::vector<paddle::DataType>"
    shape_params = [f"const paddle::optional<std::vector<int64_t>>& {n}_shape" if t.optional
                    else f"const std::vector<int64_t>& {n}_shape" for n, t in m.inputs.items()]
    shape_params += [a.kernel_param for a in shape_attrs]
    dtype_params = [f"const paddle::optional<paddle::DataType>& {n}_dtype" if t.optional else
                    f"const paddle::DataType& {n}_dtype" for n, t in m.inputs.items()]
    signatures = {
        "forward": wrap_call(f"{vec} {camel}Forward", tensors + kernel_attrs, " {"),
        "backward": wrap_call(f"{vec} {camel}Backward", grad_in + kernel_attrs, " {"),
        "infer_shape": wrap_call(f"{shape_fn} {camel}InferShape", shape_params, " {"),
        "infer_dtype": wrap_call(f"{dtype_fn} {camel}InferDtype", dtype_params, " {"),
        "inplace_infer_shape": wrap_call(f"{shape_fn} {camel}InPlaceInferShape", shape_params,
                                         " {"),
        "inplace_infer_dtype": wrap_call(f"{dtype_fn} {camel}InPlaceInferDtype", dtype_params,
                                         " {"),
        "forward_cuda": wrap_call(f"void {camel}ForwardCUDA",
                                  [f"const {m.name}::ForwardArgs& args"]),
        "backward_cuda": wrap_call(f"void {camel}BackwardCUDA",
                                   [f"const {m.name}::BackwardArgs& args"]),
        "dispatch": wrap_call("void Dispatch", ["const char* kernel"] +
                              [f"paddle::DataType {n}" for n in params] + ["F&& f"], " {"),
    }

    combos = []
    choice_lists = [inputs[n].dtypes for n in params]
    for chosen in itertools.product(*choice_lists) if params else [()]:
        picked = dict(zip(params, chosen, strict=True))

        def dtype_of(name: str, picked: dict[str, str] = picked) -> str:
            rule = custom.dtypes[name]
            source = rule.same_as or name
            return picked.get(source) or _choices(custom.dtypes, source)[0]

        dtypes = {n: dtype_of(n) for n in m.inputs}
        out_dtypes = {n: dtype_of(n) for n in m.outputs}
        floats = [d for n, d in dtypes.items() if d in FLOAT_DTYPES]
        combos.append(Combo(id="-".join(chosen) or "default", dtypes=dtypes,
                            out_dtypes=out_dtypes,
                            float64=bool(floats) and all(d == "float64" for d in floats)))
    first = next(iter(m.inputs))
    free = free_dims(m, custom)
    checks = _input_checks(cpp_string(spec.op_name), custom, inputs, params, tensors)
    deploy_scaled = backward[0] if backward else next(
        (n for n, d in combos[0].dtypes.items() if d in FLOAT_DTYPES), None)
    paddle_h_for = "; ".join((["AllocateDataDependent"] if dynamic else []) +
                             (["ComputedDim and FloorDiv for output shapes"]
                              if shapes_checked else []) +
                             (["the input checks"] if checks.inputs_signature else []))
    dims = {d: str(m.sizes.get(d, 7)) for d in custom.dims}
    test_ranges = {n: "(" + ", ".join(_test_bound(b, custom) for b in r) + ")"
                   for n, r in custom.ranges.items()}
    wrong_dtype = _wrong_dtype(inputs)
    return Context(
        **op_text(spec),
        **backward_stub_text(spec),
        library=f"{m.name}_lib",
        inputs=list(inputs.values()),
        outputs=list(outputs.values()),
        attrs=attrs,
        params=list(params.values()),
        param_inputs=list(params),
        dispatch=_dispatch(params, inputs),
        out_shapes=out_shapes,
        paddle_h_for=paddle_h_for,
        shapes_checked=shapes_checked,
        shapes_divide=any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv)
                          for tree in custom.out_shapes.values() for n in ast.walk(tree)),
        empty_outputs=py_if("_EMPTY_OUTPUTS_MADE_HERE and " + _parenthesized(all_empty))
        if skip_empty else None,
        empty_checks=empty_checks,
        infer_throws=_infer_throws(custom),
        shape_attrs=shape_attrs,
        shape_inputs=[n for n in m.inputs if any(n in o.inputs for o in out_shapes
                                                 if not o.data_dependent)],
        data_dependent=list(dynamic.values()),
        spec_shape_params=", ".join([n for n, t in m.inputs.items() if not t.optional] +
                                    [f"{n}=None" for n, t in m.inputs.items() if t.optional] +
                                    [f"{a.name}={a.py_default}" for a in shape_attrs]),
        checks=_shape_checks(m.name, custom, {n for n, t in m.inputs.items() if t.optional}),
        input_checks=checks,
        backward=backward,
        grad_outputs=[f"grad_{n}" for n in m.outputs],
        grad_checks=_grad_checks(spec.op_name, list(m.inputs), outputs, out_shapes)
        if backward else [],
        poisoned={"forward": _poison([n for n in m.outputs if n not in dynamic]),
                  "inplace": _poison([n for n in (m.outputs if m.inplace else [])
                                      if n not in dynamic and n not in m.inplace.values()]),
                  "backward": _poison([f"grad_{n}" for n in backward])},
        grad_shape_checked=next((n for n, t in outputs.items() if t.is_float and n not in dynamic),
                                None) if backward else None,
        forward_kernel=forward_kernel,
        backward_kernel=backward_kernel,
        signatures=signatures,
        py_params=", ".join([f"{n}: paddle.Tensor" for n in m.inputs] +
                            [f"{a.name}: {a.py_type} = {a.py_default}" for a in attrs]),
        op_name_cpp=cpp_string(spec.op_name),
        optional_inputs=[n for n, t in m.inputs.items() if t.optional],
        py_def=py_def(m.name, [f"{n}: paddle.Tensor | None = None" if t.optional
                               else f"{n}: paddle.Tensor" for n, t in m.inputs.items()] +
                      [f"{a.name}: {a.py_type} = {a.py_default}" for a in attrs],
                      py_returns(len(m.outputs))),
        py_attrs=wrap_code("attrs = (" + ", ".join(a.py_arg for a in attrs) +
                           ("," if len(attrs) == 1 else "") + ")", indent=4),
        allocations=[f"paddle::Tensor {t.name};  // {dynamic[t.name].text}: the kernels' "
                     f"args.{dynamic[t.name].allocate}" if t.name in dynamic else
                     wrap_call(f"paddle::Tensor {t.name} = {allocate}",
                               [f"{t.name}_shape", t.cpp_dtype_expr, f"{first}.place()"], ";",
                               indent=2) for t in outputs.values()],
        forward_args=wrap_call(f"const {m.name}::ForwardArgs args", [*m.inputs, *m.outputs] +
                               [a.name for a in attrs], ";", indent=2).replace("(", "{", 1)
        .replace(");", "};"),
        backward_allocations=[wrap_call(f"paddle::Tensor grad_{n} = {allocate}",
                                        [f"{n}.shape()", f"{n}.dtype()", f"{n}.place()"], ";",
                                        indent=2) for n in backward],
        backward_args=wrap_call(f"const {m.name}::BackwardArgs args",
                                [*m.inputs, *(f"grad_{o}" for o in m.outputs),
                                 *(f"grad_{n}" for n in backward)] + [a.name for a in attrs],
                                ";", indent=2).replace("(", "{", 1).replace(");", "};"),
        dims=dims,
        ranges=custom.ranges,
        combos=combos,
        test_imports=sorted([f"from {m.name} import {m.name}" +
                             (f", {m.name}_" if m.inplace else ""),
                             "from opgen import testing as ot"],
                            key=lambda line: line.split()[1]),
        dtype_names={t.name: t.dtype_text for t in [*inputs.values(), *outputs.values()]},
        test_shapes={n: _test_shape(custom.shapes[n]) for n in m.inputs},
        free_lead=free.lead,
        free_dims=list(free.names),
        free_comment=_free_comment(free, custom),
        test_ranges=test_ranges,
        wrong_dtype=wrong_dtype,
        wrong_rank=_wrong_rank(m.name, custom, inputs),
        inplace=_inplace(spec, camel, attrs, out_shapes, signatures),
        deploy_scaled=deploy_scaled,
        static_variables=static_variables(m.name, list(m.inputs), optional=[
            n for n, t in m.inputs.items() if t.optional]),
        deploy_model=deploy_model(list(m.inputs), deploy_scaled),
        cpp=_cpp_text(spec, custom, inputs, outputs, attrs, dynamic, params, paddle_h_for) | (
            double_backward_stub(camel, list(outputs), list(m.backward or []),
                                 [a.kernel_param for a in attrs]) if m.backward else {}),
        py=_wrapper_text(spec, inputs, outputs, attrs, shape_attrs, out_shapes, dynamic),
        test=_test_text(spec, inputs, attrs, out_shapes, combos, dims, test_ranges, wrong_dtype,
                        free.lead or bool(free.names),
                        [d for d in dims if _ranged_by(d, custom) is None]),
        reference=_reference_text(spec, inputs, outputs, attrs, dynamic, copies, grad_copies,
                                  whole),
    )


#: Where the forward and backward tests also try each named dim that no ``range:`` uses (a range
#: bounds an integer input's values by it, which the tests draw once): (case, size). A size of 1,
#: and 64, where a row of float32 is 256 bytes and of 16-bit types 128: the widest vector paths
#: of a kernel (the spec's `sizes:` are small and often odd, to reach the others).
_OTHER_SIZES = (("typical", 1), ("large", 64))


def _test_shape(dims: tuple[Dim, ...] | None) -> str:
    """An input's shape in the generated tests: the case's leading dims where the spec allows any
    (``lead``), the spec's named dims at their test sizes (``dims``)."""
    if dims is None:
        return "lead"
    items = ["*lead" if d.ellipsis else str(d.size) if d.size is not None else
             f'dims["{d.name}"]' for d in dims]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _free_comment(free: FreeDims, custom: Custom) -> list[str]:
    """The generated deploy tests' comment: which dims their InputSpecs give as None, and why
    each other candidate keeps its test size."""
    lead_inputs = [n for n, d in custom.shapes.items() if d is None or d[0].ellipsis]
    free_text = ([f"the leading dims ({', '.join(lead_inputs)})"] if free.lead else []) + \
        list(free.names)
    if free_text:
        text = ("The dims the spec leaves free are None in the InputSpecs (docs/deploy.md, "
                "section 6), and the saved model also serves inputs with each of them 2 larger: "
                f"{', '.join(free_text)}.")
    else:
        text = ("The spec leaves no dim free (docs/deploy.md, section 6): the InputSpecs have "
                "the typical case's shapes, and the saved model serves those alone.")
    if free.fixed:
        text += " Not free: " + "; ".join(f"{'the ' if n == LEAD else ''}{n} ({why})"
                                          for n, why in free.fixed.items()) + "."
    return textwrap.wrap(text, 98, initial_indent="# ", subsequent_indent="# ",
                         break_on_hyphens=False)


def _test_bound(bound: str, custom: Custom) -> str:
    return f'DIMS["{bound}"]' if bound in custom.dims else bound


#: The dtypes the generated tests try on an input that refuses them, first to last.
_WRONG_DTYPES = ("int16", "float64", "int32", "float32", "int8", "uint8", "int64", "float16",
                 "bool", "bfloat16")


def _wrong_dtype(inputs: dict[str, Tensor]) -> tuple[str, str] | None:
    """An input of a dtype rule of its own and the first of :data:`_WRONG_DTYPES` it refuses;
    None where every such input takes every dtype (nothing to refuse)."""
    for tensor in inputs.values():
        if tensor.same_as is not None:
            continue
        for dtype in _WRONG_DTYPES:
            if dtype not in tensor.dtypes:
                return tensor.name, dtype
    return None


def _wrong_rank(op: str, custom: Custom, inputs: dict[str, Tensor]) -> tuple[str, str] | None:
    for name, dims in custom.shapes.items():
        if dims and not dims[0].ellipsis and not inputs[name].optional:
            noun = "dim" if len(dims) == 1 else "dims"
            message = f"{op}: {name} must have {len(dims)} {noun} {_written(dims)}"
            return name, "".join("\\" + c if c in "[]().*+?{}|^$\\" else c for c in message)
    return None


def variables(spec: Any, naive: bool) -> dict[str, object]:
    """The templates' variables: the fields of :func:`build_context`'s :class:`Context`."""
    del naive  # the user writes the kernels: there is no naive copy to compare with
    context = build_context(spec)
    return {f.name: getattr(context, f.name) for f in dataclasses.fields(context)}


KIND = Kind(name="custom", templates="custom", context=variables, load=load_spec,
            user_files=("csrc/{name}_cpu.h", "csrc/{name}_cuda.cuh", "reference.py"))

"""The rowwise kind: ops over the last axis with reductions (softmax, norms), from
``templates/rowwise/``.

A rowwise op sees its per-element inputs as ``[rows, cols]``; per-column inputs are ``[cols]``
and per-row inputs ``[rows]``. Its forward (and backward) is one functor called once per row by
the runtime (``csrc/opgen/rowwise.h`` on the CPU, ``rowwise.cuh`` on the GPU) with a ``Row``
whose reductions (``row.sum(f)``, ``row.mean``, ``row.max``, ``row.min``) and stores
(``row.put``, ``row.put_rows``, ``row.put_column_sums``) take lambdas over one column's values.

Everything the templates print is computed here, as for the elementwise kind: the functor is
straight-line C++ in which a per-row value is a local (``const MT rstd = ...;``) and a per-element
value is computed inside the lambdas that read it; one that calls a costly function (``exp``) and
that two or more lambdas read is computed once, by ``row.keep``, and passed to them after their
inputs (softmax's ``exp(z - m)``, which its sum and its output read).
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    py_return,
    py_returns,
    py_string_call,
    static_variables,
    wrap_call,
    wrap_code,
    wrap_expression,
    wrap_hanging,
)
from ..errors import OpgenError, SpecError
from ..expr import Emitted
from ..names import camel_case
from ..spec import ROLES, OpSpec, Spec
from . import Kind

#: The runtime's tag of each input role (opgen/rowwise.h).
ROLE_TAGS = {"element": "Elem", "column": "Col", "row": "RowIn", "stat": "RowStat"}
#: The output roles of opgen/rowwise_op.h: per-element, per-row, sum over rows (per-column).
OUT_ROLES = {"element": "kElem", "row": "kRow", "column": "kColSum"}
_PLACEHOLDER = re.compile(r"@(\d+)@")
#: The local holding the values of one call that makes several reductions of a kind.
_PLURALS = {"sum": "sums", "mean": "means", "max": "maxima", "min": "minima"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The functions that cost more than reading a value again (opgen/math.h): a per-element value
#: calling one, read by several lambdas, is kept (row.keep) rather than computed in each. Cheap
#: values are recomputed: keeping them too (layer_norm's xhat and dxhat) saved instructions but
#: no time, and cost registers (the 16-bit norms' backwards at 4096 x 4096 fell by up to 0.12 of a
#: copy; docs/benchmarks.md, round 36).
_COSTLY = re.compile(r"\bopgen::(exp|expm1|exp2|log|log1p|log2|tanh|sigmoid|erf|pow|sin|cos|tan|"
                     r"atan|softplus)\b")

#: The most per-element statements a functor's lambdas may hold in all: each lambda computes the
#: per-element values it reads, so a long chain of intermediates between many reductions grows
#: the functor as the square of its length (1500 made a 351 MB header in 6 minutes).
MAX_LAMBDA_STATEMENTS = 5000


class _TooLarge(Exception):
    """A functor past :data:`MAX_LAMBDA_STATEMENTS`; said as a spec error by build_context."""


@dataclass(frozen=True)
class Tensor:
    """A tensor a functor reads: its name and role (element, column, row, stat)."""

    name: str
    role: str

    @property
    def tag(self) -> str:
        return ROLE_TAGS[self.role]


@dataclass(frozen=True)
class Functor:
    """One direction's functor: the C++ struct, and how the host code launches it."""

    struct: str                  # Forward or Backward, inside the op's namespace
    attrs: list[Attr]            # attrs the math reads: members and constructor arguments
    constructor: str
    tensors: list[Tensor]        # what its lambdas take, in order
    reads: list[bool]            # per tensor: whether the functor reads it (else passed as null)
    targets: list[tuple[str, str]]  # (what it computes, its output role), in output order
    lines: list[tuple[str, str]]    # (name, spec source) per entry, for the wrapper's docstring
    comments: list[str]          # `// name = source` above the struct, wrapped
    body: list[str]              # the operator()'s statements, indented within it
    reduce_width: int            # the most values one of its reductions makes at once
    numpy_lines: list[str]       # the numpy reference's statements (`name = expression`)
    returns: str                 # the numpy reference's return statement (op's shapes)
    io: list[str]                # the members of its <Struct>Io, wrapped within 100 columns


@dataclass(frozen=True)
class Context(OpText, BackwardStubText):
    """The template context of one rowwise op."""

    inputs: list[str]
    input_roles: dict[str, str]
    role_text: dict[str, str]     # each input's and output's role in words: per-column [C]
    element_inputs: list[str]
    first: str                    # the first per-element input: the shape of the op
    outputs: list[str]
    output_roles: dict[str, str]
    grad_inputs: list[str]
    grad_outputs: list[str]
    attrs: list[Attr]
    attr_args: list[str]
    dtypes: list[str]
    cpp_dtypes: list[str]
    forward: Functor
    backward: Functor | None
    runtime_names: list[str]      # what the op's header takes from opgen::rowwise, sorted
    backward_output_grads: list[str]   # outputs whose gradients the backward takes
    backward_call: list[str]           # the backward's tensors as its launch takes them: those
                                       #   the gradient op keeps, paddle::Tensor() for the others
    backward_device: str               # a tensor the gradient op keeps, whose device it runs on
    grad_infer: dict[str, str] | None  # where it keeps not every input (unread ones cost memory
                                       #   until the backward runs): the heads of its inference
                                       #   functions ("shape", "dtype") and their returns
                                       #   ("shape_return", "dtype_return")
    extremum_outputs: list[str]   # outputs that are a row's max or min (m: max(x))
    signatures: dict[str, str]
    launches: dict[str, str]      # "cpu_Forward": the call that runs Forward, from column 2
    cpp: dict[str, str]           # the .cc's and .cu's text that names the op's tensors, wrapped
                                  #   where the templates put it (_cpp_text)
    py_params: str
    py_def: str
    numpy_helpers: list[str]
    library: str
    test_imports: list[str]
    baseline: str | None
    dtype_checks: dict[str, Any]   # templates/partials/wrapper_check_dtypes.py.jinja's text
    static_variables: dict[str, Any]  # templates/partials/wrapper_static_variables.py.jinja's
    deploy_model: dict[str, str]   # templates/partials/deploy_model.py.jinja's
    py: dict[str, Any]             # the wrapper's text that names the op or its tensors, wrapped
                                   #   where the template puts it (_wrapper_text)
    test: dict[str, str]           # the test's, likewise (_test_text)


# -- the functor ---------------------------------------------------------------------------------

@dataclass
class _Emitter:
    """Turns a section's entries into a functor body: per-row values as locals in order, each
    reduction as a local (``row.sum([&](...) { ... })``), per-element values inside the lambdas.
    Consecutive reductions of one kind that do not read each other are made in one call whose
    lambda returns all their values (layer_norm's backward: ``mean(dxhat)`` and
    ``mean(dxhat * xhat)``), so the GPU reduces them in one round. A per-row value defined
    between them waits until after that call, unless a later reduction reads it (rms_norm's
    backward: ``rstd`` from ``mean(x * x)``, then ``mean(dxw * x)``, which does not read it)."""

    entries: dict[str, Emitted]
    tensors: list[Tensor]
    attrs: set[str]
    statements: list[str] = dataclasses.field(default_factory=list)
    outer: set[str] = dataclasses.field(default_factory=set)       # locals outside lambdas
    inner: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> lambda statement
    inner_reads: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    taken: set[str] = dataclasses.field(default_factory=set)
    reduced: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)  # op, inner
    keep: set[str] = dataclasses.field(default_factory=set)   # per-element values to row.keep
    kept: list[str] = dataclasses.field(default_factory=list)  # those kept so far, in order
    readers: dict[str, int] = dataclasses.field(default_factory=dict)  # name -> lambdas reading it
    pending: list[tuple[str, str, Emitted]] = dataclasses.field(default_factory=list)  # to reduce
    deferred: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # after pending
    reduce_width: int = 1        # the most values one call reduces
    statements_in_lambdas: int = 0  # per-element statements written into lambdas so far

    def __post_init__(self) -> None:
        self.taken = set(self.entries) | {t.name for t in self.tensors} | self.attrs

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}{k}", k + 1
        self.taken.add(name)
        return name

    def substitute(self, owner: str, e: Emitted) -> tuple[str, set[str]]:
        """``e``'s C++ with each reduction hoisted into a local (named ``owner`` where the whole
        expression is one reduction), and the names the result reads."""
        cpp = e.cpp
        names: dict[int, str] = {}
        for k, reduction in enumerate(e.reductions):
            key = (reduction.op, reduction.inner.cpp)
            if key in self.reduced:  # the same reduction computed above: read it again
                names[k] = self.reduced[key]
                continue
            whole = e.cpp == "@0@" and owner not in self.outer
            local = owner if whole else self.fresh(self.reduction_name(reduction.op,
                                                                       reduction.inner, owner))
            if whole:
                self.taken.add(owner)
            self.reduce(local, reduction.op, reduction.inner)
            self.outer.add(local)
            self.reduced[key] = local
            names[k] = local
        cpp = _PLACEHOLDER.sub(lambda m: names[int(m.group(1))], cpp)
        return cpp, self.reads_of(cpp)

    def append(self, statement: str) -> None:
        """Adds ``statement`` after the reductions still pending."""
        self.flush()
        self.statements.append(statement)

    def define(self, name: str, statement: str) -> None:
        """Adds per-row local ``name`` (``statement``, which only computes it): after the pending
        reductions, leaving them open to more that do not read it."""
        if self.pending:
            self.deferred.append((name, statement))
        else:
            self.statements.append(statement)

    def reduce(self, local: str, op: str, inner: Emitted) -> None:
        """``const MT local = row.op(inner)``, made with the pending reductions when it is of their
        kind and reads none of them nor the per-row values waiting for them (through the
        per-element values it takes, too)."""
        waiting = {name for name, _, _ in self.pending} | {name for name, _ in self.deferred}
        if self.pending and (self.pending[0][1] != op or self.reads_through(inner.cpp) & waiting):
            self.flush()
        self.pending.append((local, op, inner))

    def reduction_name(self, op: str, inner: Emitted, owner: str) -> str:
        """A reduction's local, named after what it reduces, as a careful hand names it:
        ``sum_e`` (sum(e)), ``mean_dxhat_xhat`` (mean(dxhat * xhat)): the op and the first two
        names its argument reads; ``<op>_<owner>`` where it reads none (sum(1))."""
        read = self.reads_of(inner.cpp)
        names = [n for n in dict.fromkeys(_IDENTIFIER.findall(inner.cpp)) if n in read][:2]
        return "_".join([op, *names]) if names else f"{op}_{owner}"

    def reads_of(self, cpp: str) -> set[str]:
        """The names ``cpp`` reads."""
        return {n for n in _IDENTIFIER.findall(cpp) if n in self.taken}

    def reads_through(self, cpp: str) -> set[str]:
        """The names ``cpp`` reads, and those the per-element values it reads read, in turn."""
        reads = self.reads_of(cpp)
        stack = [n for n in reads if n in self.inner]
        while stack:
            for n in self.inner_reads[stack.pop()]:
                if n not in reads:
                    reads.add(n)
                    stack += [n] if n in self.inner else []
        return reads

    def flush(self) -> None:
        """The pending reductions' statements: one call for one, or a call whose lambda returns
        them all, then a local for each, then the per-row values that waited for them."""
        group, self.pending = self.pending, []
        deferred, self.deferred = self.deferred, []
        if len(group) == 1:
            local, op, inner = group[0]
            self.statements.append(self.lambda_call(f"const MT {local} = ", f"row.{op}", inner))
        elif group:
            op, width = group[0][1], len(group)
            self.reduce_width = max(self.reduce_width, width)
            cpp = ", ".join(inner.cpp for _, _, inner in group)
            lines, used, kept = self.lambda_body(self.reads_of(cpp))
            values = self.fresh(_PLURALS[op])
            self.statements.append(self._lambda(
                f"const opgen::Array<MT, {width}> {values} = row.{op}", used,
                f" -> opgen::Array<MT, {width}>", lines, "{" + cpp + "}", ";", kept))
            self.statements += [f"const MT {local} = {values}[{k}];"
                                for k, (local, _, _) in enumerate(group)]
        self.statements += [statement for _, statement in deferred]

    def is_inner(self, reads: set[str]) -> bool:
        tensors = {t.name for t in self.tensors}
        return bool(reads & (tensors | set(self.inner)))

    def costly(self, name: str) -> bool:
        """Whether per-element value ``name`` calls a costly function (and is a number)."""
        statement = self.inner[name]
        return statement.startswith("const MT ") and bool(_COSTLY.search(statement))

    def lambda_body(self, reads: set[str]) -> tuple[list[str], set[str], list[str]]:
        """The statements computing the per-element values ``reads`` needs, in order, the tensors
        they and ``reads`` read, and the kept values they take (each kept by now)."""
        needed: set[str] = set()
        kept: set[str] = set()
        stack = [n for n in reads if n in self.inner]
        while stack:
            name = stack.pop()
            if name in self.keep:
                kept.add(name)
            elif name not in needed:
                needed.add(name)
                stack += [n for n in self.inner_reads[name] if n in self.inner]
        self.statements_in_lambdas += len(needed)
        if self.statements_in_lambdas > MAX_LAMBDA_STATEMENTS:
            raise _TooLarge
        for name in needed | kept:
            self.readers[name] = self.readers.get(name, 0) + 1
        for name in sorted(kept - set(self.kept), key=list(self.inner).index):
            self.keep_value(name)
        tensors = {t.name for t in self.tensors}
        used = (reads | set().union(*(self.inner_reads[n] for n in needed))) & tensors
        return ([self.inner[n] for n in self.inner if n in needed], used,
                [n for n in self.kept if n in kept])

    def keep_value(self, name: str) -> None:
        """``const auto name = row.keep(...);``: per-element value ``name`` computed once."""
        self.flush()  # it may read a pending reduction, whose lambda may keep it first
        if name in self.kept:
            return
        lines, used, kept = self.lambda_body(self.inner_reads[name])
        cpp = self.inner[name].split(" = ", 1)[1][:-1]
        self.statements.append(self._lambda(f"const auto {name} = row.keep", used, "", lines,
                                            cpp, ";", kept))
        self.kept.append(name)

    def lambda_call(self, prefix: str, call: str, inner: Emitted) -> str:
        """``prefix`` (``const MT m = ``) and ``call`` of a lambda returning ``inner``."""
        lines, used, kept = self.lambda_body(self.reads_of(inner.cpp))
        return self._lambda(f"{prefix}{call}", used, "", lines, inner.cpp, ";", kept)

    def put(self, call: str, values: list[tuple[str, str, set[str]]]) -> str:
        """``call`` with a lambda returning ``values`` ((name, C++, reads) each) at a column."""
        reads = set().union(*(r for _, _, r in values))
        for name, _, _ in values:  # an output that a lambda above read too
            if name in self.inner and name not in reads:
                self.readers[name] = self.readers.get(name, 0) + 1
        lines, used, kept = self.lambda_body(reads)
        if len(values) == 1:
            returned, result = values[0][1], ""
        else:
            lines += [f"const MT {name} = {cpp};" for name, cpp, _ in values
                      if f"const MT {name} = {cpp};" not in lines and name != cpp]
            returned = "{" + ", ".join(name for name, _, _ in values) + "}"
            result = f" -> opgen::Array<MT, {len(values)}>"
        return self._lambda(call, used, result, lines, returned, ";", kept)

    def _lambda(self, call: str, used: set[str], result: str, lines: list[str], returned: str,
                end: str, kept: list[str]) -> str:
        """``call([&](params)result { lines; return returned; }, kept)end``, its head wrapped
        within the functor body's 96 columns; a last local that is only returned is returned as
        is. The lambda takes the tensors, then the ``kept`` values, passed after it."""
        if lines and lines[-1].endswith(";") and returned in self.inner and \
                lines[-1] == self.inner[returned]:
            returned = lines.pop().split(" = ", 1)[1][:-1]
        params = [f"MT {param_name(t.name, t.name in used)}" for t in self.tensors]
        params += [f"MT {name}" for name in kept]
        close = "".join(f", {name}" for name in kept) + ")" + end
        # the template indents the lambda by the functor body's 4 columns: 96 are left here
        head = wrap_call(f"{call}([&]", params, f"{result} {{", width=96)
        one_line = f"{head} return {returned}; }}{close}"
        if not lines and "\n" not in head and 4 + len(one_line) <= 100:
            return one_line
        # the lambda's statements are two columns in: 94 are left for them
        body = "".join(f"\n  {part}" for line in [*lines, f"return {returned};"]
                       for part in _wrapped(line, 94))
        return f"{head}{body}\n}}{close}"


def _wrapped(statement: str, width: int) -> list[str]:
    """A C++ statement's lines within ``width`` columns from where it starts (its continuation
    lines four columns in), as :func:`~opgen.codegen.wrap_expression` breaks it."""
    return wrap_expression(statement, indent=0, width=width).split("\n")


def _functor(struct: str, emitted: dict[str, Emitted], sources: dict[str, str],
             tensors: list[Tensor], targets: list[tuple[str, str]], names: dict[str, str],
             attrs: list[Attr], *, likes: list[int] | None = None) -> Functor:
    """The functor computing ``emitted`` in order; ``targets`` are (entry, output role) in output
    order, and ``names`` the C++ name of each target (grad_x for the backward's x)."""
    used = set().union(*(e.names for e in emitted.values()))
    members = [a for a in attrs if a.name in used]
    renamed = {k: names.get(k, k) for k in emitted}
    # Emitted once to count the lambdas that read each per-element value, then again keeping
    # the costly ones that several read.
    first = _body(emitted, tensors, attrs, targets, renamed, set())
    keep = {n for n, count in first.readers.items() if count >= 2 and first.costly(n)}
    emitter = _body(emitted, tensors, attrs, targets, renamed, keep) if keep else first
    read = set().union(*(e.names for e in emitted.values()))
    inits = [f"{a.name}(static_cast<MT>({a.name}))" if a.member_type == "MT" else
             f"{a.name}({a.name})" for a in members]
    constructor = wrap_call(struct, [a.cpp_param for a in members], indent=11)
    constructor += "\n      : " + ", ".join(inits) + " {}"
    return Functor(
        struct=struct,
        attrs=members,
        constructor=constructor,
        tensors=tensors,
        reads=[t.name in read for t in tensors],
        targets=[(renamed[k], r) for k, r in targets],
        lines=[(renamed[k], sources[k]) for k in emitted],
        comments=[line for k in emitted
                  for line in comment_lines(f"{renamed[k]} = {sources[k]}")],
        body=[line for statement in emitter.statements
              for line in (statement.split("\n") if "\n" in statement else
                           _wrapped(statement, 96))],
        reduce_width=emitter.reduce_width,
        numpy_lines=[py_assignment(renamed[k], e.numpy) for k, e in emitted.items()],
        returns=py_return([_numpy_return(renamed[k], r, emitted[k].varies,
                                         likes is not None and k) for k, r in targets]),
        io=_io(tensors, [t.name in read for t in tensors], targets, likes),
    )


def _body(emitted: dict[str, Emitted], tensors: list[Tensor], attrs: list[Attr],
          targets: list[tuple[str, str]], renamed: dict[str, str], keep: set[str]) -> _Emitter:
    """An emitter whose statements are the functor's body, keeping the per-element values
    ``keep`` (row.keep)."""
    emitter = _Emitter(emitted, tensors, {a.name for a in attrs}, keep=keep)
    emitter.taken |= set(renamed.values())
    role_of = dict(targets)
    locals_: dict[str, tuple[str, set[str]]] = {}
    for key, e in emitted.items():
        name = renamed[key]
        cpp, reads = emitter.substitute(name, e)
        locals_[key] = (cpp, reads)
        whole = e.cpp == "@0@" and name in emitter.outer
        role = role_of.get(key)
        if whole:
            continue                     # the reduction's local is the value
        if not emitter.is_inner(reads):
            if role in ("element", "column"):
                continue                 # returned by its lambda
            local = "bool" if e.type == "bool" else "MT"
            emitter.define(name, f"const {local} {name} = {cpp};")
            emitter.outer.add(name)
        elif role == "row":
            # A per-row result computed where the lambdas are. Of per-element values (the
            # gradient of a per-row input, which every element of its row read): their sum over
            # the row. Of per-row inputs, which only the lambdas see: the same value at every
            # column, so the row's max of it (an empty row's is -inf; the runtime has no
            # accessor for a per-row input outside a lambda yet).
            total = "row.sum" if e.varies else "row.max"
            emitter.append(emitter.lambda_call(
                f"const MT {name} = ", total, dataclasses.replace(e, cpp=cpp, reductions=())))
            emitter.outer.add(name)
        else:
            local = "bool" if e.type == "bool" else "MT"
            emitter.inner[name] = f"const {local} {name} = {cpp};"
            emitter.inner_reads[name] = reads
    by_role: dict[str, list[str]] = {"element": [], "row": [], "column": []}
    for key, role in targets:
        by_role[role].append(key)
    if by_role["row"]:
        emitter.append(
            "row.put_rows(" + ", ".join(renamed[k] for k in by_role["row"]) + ");")
    for role, call in (("element", "row.put"), ("column", "row.put_column_sums")):
        if by_role[role]:
            values = []
            for key in by_role[role]:
                name = renamed[key]
                if name in emitter.outer or name in emitter.keep:
                    values.append((name, name, {name}))
                else:
                    cpp, reads = locals_[key]
                    values.append((name, cpp, reads))
            emitter.append(emitter.put(call, values))
    emitter.flush()
    return emitter


def _io(tensors: list[Tensor], reads: list[bool], targets: list[tuple[str, str]],
        likes: list[int] | None) -> list[str]:
    """The lines of a functor's Io struct (see {{name}}.h.jinja)."""
    outs = [f"{{OutRole::{OUT_ROLES[r]}, {like}}}"
            for (_, r), like in zip(targets, likes or [-1] * len(targets), strict=True)]
    roles = [r for _, r in targets]
    return [
        _listed("using Roles = RoleList<", [t.tag for t in tensors], ">;"),
        _listed("static constexpr const char* kNames[] = {", [f'"{t.name}"' for t in tensors],
                "};"),
        _listed("static constexpr bool kReads[] = {", ["true" if r else "false" for r in reads],
                "};"),
        _listed("static constexpr Out kOuts[] = {", outs, "};"),
        f"static constexpr int kOut = {roles.count('element')}, kRowOut = {roles.count('row')}, "
        f"kColSum = {roles.count('column')};",
    ]


def _listed(head: str, items: list[str], tail: str, indent: int = 2) -> str:
    """``head`` items ``tail`` on one line within 100 columns, else with the items wrapped and
    aligned after ``head``."""
    one_line = head + ", ".join(items) + tail
    if indent + len(one_line) <= 100:
        return one_line
    lines, current = [], head
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else tail)
        if current.strip() and indent + len(current) + len(piece.rstrip()) > 100:
            lines.append(current.rstrip())
            current = " " * len(head)
        current += piece
    lines.append(current)
    return "\n".join(lines)


def _numpy_return(name: str, role: str, varies: bool, gradient_of: str | bool) -> str:
    """The numpy reference's result ``name`` in the op's shapes (see opgen.testing.from_rows)."""
    if role == "row" and gradient_of:
        summed = ", summed=True" if varies else ""
        return f'ot.from_rows({name}, "row", op_shape{summed}).reshape(row_shapes["{gradient_of}"])'
    return f'ot.from_rows({name}, "{role}", op_shape)'


# -- the context -------------------------------------------------------------------------------

def _row_extremum(emitted: Emitted) -> bool:
    """Whether an expression is a row's max or min and nothing else (``m: max(x)``)."""
    return emitted.cpp == "@0@" and len(emitted.reductions) == 1 and \
        emitted.reductions[0].op in ("max", "min")


def build_context(spec: Spec) -> Context:
    """Compute every name and code fragment the op's templates need."""
    m = spec.model
    camel = camel_case(m.name)
    attrs = [attr(n, a) for n, a in m.attrs.items()]
    in_roles, out_roles = spec.input_roles, spec.output_roles
    section = "forward"
    try:
        forward = _functor("Forward", spec.forward, spec.forward_source,
                           [Tensor(n, in_roles[n]) for n in m.inputs],
                           [(o, out_roles[o]) for o in m.outputs], {}, attrs)
        section = "backward"
        backward_parts = _backward(spec, camel, attrs) if spec.backward is not None else None
    except _TooLarge:
        raise SpecError(spec.path, spec.line(section), (
            f"{section}: its functor's lambdas would compute more than {MAX_LAMBDA_STATEMENTS:,} "
            "per-element values (each reduction's lambda computes the per-element values it "
            "reads, and they read a long chain of intermediates): use fewer reductions or "
            "intermediates")) from None
    backward, output_grads, paddle_inputs, kept, call, device, grad_infer = \
        backward_parts or (None, [], [], [], [], "", None)
    functions = set().union(*(e.functions for e in spec.forward.values()))
    if spec.backward:
        functions |= set().union(*(e.functions for e in spec.backward.values()))
    helpers = ["_erf = np.vectorize(math.erf, otypes=[np.float64])"] if "erf" in functions else []

    element_inputs = [n for n in m.inputs if in_roles[n] == "element"]
    role_text = {**{n: ROLES["inputs"][r] for n, r in in_roles.items()},
                 **{n: ROLES["outputs"][r] for n, r in out_roles.items()}}
    py_params = [f"{n}: paddle.Tensor" for n in m.inputs] + \
        [f"{a.name}: {a.py_type} = {a.py_default}" for a in attrs]
    return Context(
        **op_text(spec),
        **backward_stub_text(spec),
        inputs=list(m.inputs),
        input_roles=dict(in_roles),
        role_text=role_text,
        element_inputs=element_inputs,
        first=element_inputs[0],
        outputs=list(m.outputs),
        output_roles=dict(out_roles),
        grad_inputs=[f"grad_{n}" for n in m.inputs],
        grad_outputs=[f"grad_{n}" for n in m.outputs],
        attrs=attrs,
        attr_args=[a.name for a in attrs],
        dtypes=list(m.dtypes),
        cpp_dtypes=[CPP_DTYPES[d] for d in m.dtypes],
        forward=forward,
        backward=backward,
        runtime_names=sorted({"Out", "OutRole", "RoleList"} | {
            t.tag for f in (forward, backward) if f is not None for t in f.tensors}),
        backward_output_grads=output_grads,
        backward_call=call,
        backward_device=device,
        grad_infer=grad_infer,
        extremum_outputs=[o for o in m.outputs if _row_extremum(spec.forward[o])],
        signatures=_signatures(camel, m.inputs, element_inputs[0], attrs, forward, backward,
                               kept if backward else []),
        launches={f"{where}_{f.struct}": launch(m.name, where, f,
                                                list(m.inputs) if f is forward else call)
                  for f in (forward, backward) if f is not None for where in ("cpu", "cuda")},
        cpp=_cpp_text(spec, camel, forward, backward, element_inputs[0], kept, paddle_inputs,
                      dict(out_roles), attrs) | (double_backward_stub(
                          camel, output_grads, list(m.inputs), [a.kernel_param for a in attrs])
                          if backward else {}),
        py_def=py_def(m.name, py_params, py_returns(len(m.outputs))),
        py_params=", ".join(py_params),
        numpy_helpers=helpers,
        library=f"{m.name}_lib",
        test_imports=sorted([f"from {m.name} import {m.name}", "from opgen import testing as ot"],
                            key=lambda line: line.split()[1]),
        baseline=m.baseline,
        dtype_checks=dtype_checks(m.name, list(m.inputs), element_inputs[0], list(m.dtypes)),
        static_variables=static_variables(m.name, list(m.inputs), list(m.dtypes),
                                          element_inputs[0]),
        test=_test_text(spec, attrs, element_inputs[0], dict(in_roles), dict(out_roles),
                        output_grads if backward else None,
                        [o for o in m.outputs if _row_extremum(spec.forward[o])]),
        py=_wrapper_text(spec, attrs, element_inputs[0], dict(in_roles), dict(out_roles),
                         role_text, output_grads if backward else None),
        deploy_model=deploy_model(list(m.inputs), element_inputs[0]),
    )


#: Columns for a function's head before the " {" or ";" that follows it (wrap_call counts a line
#: without the space it breaks after).
_HEAD_WIDTH = 97


def _backward(spec: Spec, camel: str, attrs: list[Attr]) -> tuple[
        Functor, list[str], list[str], list[str], list[str], str, dict[str, str] | None]:
    """The backward functor, the outputs whose gradients it reads, the gradient op's Paddle
    inputs, and what :func:`_gradient_op` makes of it (kept inputs, call, device, InferShape)."""
    m, in_roles, out_roles = spec.model, spec.input_roles, spec.output_roles
    used = set().union(*(e.names for e in spec.backward.values()))
    outs = [o for o in m.outputs if o in used]
    output_grads = [o for o in m.outputs if f"grad_{o}" in used] or [m.outputs[0]]
    stat = {"element": "element", "row": "stat"}
    tensors = [Tensor(n, in_roles[n]) for n in m.inputs]
    tensors += [Tensor(o, stat[out_roles[o]]) for o in outs]
    tensors += [Tensor(f"grad_{o}", stat[out_roles[o]]) for o in output_grads]
    grad_role = {"element": "element", "column": "column", "row": "row"}
    backward = _functor("Backward", spec.backward, spec.backward_source, tensors,
                        [(n, grad_role[in_roles[n]]) for n in m.inputs],
                        {n: f"grad_{n}" for n in m.inputs}, attrs,
                        likes=list(range(len(m.inputs))))
    kept, call, device, grad_infer = _gradient_op(camel, backward, list(m.inputs))
    paddle_inputs = [f'"{n}"' for n in m.inputs + outs if n in kept] + \
        [f'paddle::Grad("{o}")' for o in output_grads]
    return backward, output_grads, paddle_inputs, kept, call, device, grad_infer


def _gradient_op(camel: str, backward: Functor,
                 inputs: list[str]) -> tuple[list[str], list[str], str, dict[str, str] | None]:
    """What the gradient op keeps of the forward: the tensors its functor reads, a per-row input
    (its gradient takes that input's shape, [*] or [*, 1]) and an element-shaped tensor for the
    view; Paddle holds every tensor a gradient op lists until the backward runs, so an input it
    does not read (softmax's x, add_rms_norm's x and residual) is left out. Returns the kept
    names, the launch's tensors (``paddle::Tensor()`` for those left out), the one whose device
    the backward runs on, and, where an input is left out, the gradient op's own inference
    (Paddle's default gives each gradient its input's shape, which needs the input)."""
    tensors = backward.tensors
    keep = [read or t.role == "row" for t, read in zip(tensors, backward.reads, strict=True)]
    elements = [k for k, t in enumerate(tensors) if t.role == "element"]
    if not any(keep[k] for k in elements):
        keep[elements[0]] = True
    kept = [t.name for t, k in zip(tensors, keep, strict=True) if k]
    call = [t.name if k else "paddle::Tensor()" for t, k in zip(tensors, keep, strict=True)]
    view = next(tensors[k].name for k in elements if keep[k])
    if all(n in kept for n in inputs):
        return kept, call, view, None
    roles = {t.name: t.role for t in tensors}
    shapes = [f"{n}_shape" if n in kept else
              f"{view}_shape" if roles[n] == "element" else
              f"opgen::rowwise::ColumnShape({view}_shape)" for n in inputs]
    used = {view, *(n for n in inputs if n in kept)}
    head = f"{camel}GradInfer"
    return kept, call, view, {
        "shape": wrap_call(f"std::vector<std::vector<int64_t>> {head}Shape",
                           [f"const std::vector<int64_t>& {param_name(f'{n}_shape', n in used)}"
                            for n in kept], width=_HEAD_WIDTH),
        "shape_return": wrap_code("return {" + ", ".join(shapes) + "};", indent=2),
        "dtype": wrap_call(f"std::vector<paddle::DataType> {head}Dtype",
                           [f"const paddle::DataType& {param_name(f'{n}_dtype', n == view)}"
                            for n in kept], width=_HEAD_WIDTH),
        "dtype_return": wrap_code("return {" + ", ".join(f"{view}_dtype" for _ in inputs) + "};",
                                  indent=2),
        "comment": "\n".join("// " + line for line in textwrap.wrap(
            f"The gradient op keeps only the tensors its kernel reads ({', '.join(kept)}), so "
            "each gradient's shape is its input's where it keeps the input, else what the "
            f"input's role gives for {view}'s shape: that shape per element, its last dim per "
            "column.", 97)),
    }


def _wrapper_text(spec: Spec, attrs: list[Attr], first: str, in_roles: dict[str, str],
                  out_roles: dict[str, str], role_text: dict[str, str],
                  output_grads: list[str] | None) -> dict[str, Any]:
    """What :attr:`Context.py` holds: the wrapper's ``def`` lines, calls and errors that name the
    op or its inputs, each wrapped from the column the template puts it at; by input, its shape
    error (``shape_errors``), its static check's condition where it is per-row (``row_ifs``)
    and its entry under Args: (``arg_docs``); by output, its entry under Returns:
    (``return_docs``)."""
    m = spec.model
    name, inputs = m.name, list(m.inputs)
    tensors = [f"{i}: paddle.Tensor" for i in inputs]
    op_args = ", ".join(inputs + [a.py_arg for a in attrs])
    call = f"_ops().{spec.op_name}({op_args})"
    several = len(m.outputs) > 1
    rules = {
        "element": f"per-element input it must be {first}'s shape {{shape}}",
        "column": f"per-column input it must be [{{shape[-1]}}] (the last dim of {first} "
                  "{shape})",
        "row": "per-row input it must be {shape[:-1]} or {[*shape[:-1], 1]} (one value per row "
               f"of {first} {{shape}})",
    }
    returns = {"element": f"shaped like {first}, in its dtype",
               "row": f"one value per row: {first}'s shape without its last dim, float32 (float64 "
                      "for float64)"}
    empty = [f"{first} * 0" if out_roles[o] == "element" else "paddle.zeros(shape[:-1], stat)"
             for o in m.outputs]
    # Outputs whose gradients the backward does not read are stop_gradient, so a loss through
    # them alone is paddle.grad's error rather than a silent zero gradient.
    no_grads = [k for k, o in enumerate(m.outputs)
                if output_grads is not None and o not in output_grads]
    finish = "_without_gradients" if no_grads else ("tuple" if several else "")
    returned = f"{finish}({call})" if finish else call
    return {
        "no_grad_outputs": [(k, m.outputs[k]) for k in no_grads],
        "return_outs": f"return {finish}(outs)" if finish else "return outs[0]",
        "check_inputs_def": py_def("_check_inputs", tensors, "None"),
        "check_shapes_def": py_def("_check_shapes", tensors, "None"),
        "check_static_inputs_def": py_def("_check_static_inputs", inputs, "None"),
        "zero_d": py_string_call("raise ValueError(", f"{name}: {first} is 0-D; it needs at "
                                 "least one dim, the row", indent=8),
        "empty_outputs_def": py_def("_empty_outputs", [f"{first}: paddle.Tensor"],
                                    py_returns(len(m.outputs))),
        "empty_rows": py_string_call("raise ValueError(", f"{name}: rows of length 0 give "
                                     "per-row outputs that Paddle 2.6 cannot return from a "
                                     "custom op; Paddle 3 computes them", indent=8),
        "empty_return": wrap_code("return " + (f"({', '.join(empty)})" if several else empty[0]),
                                  indent=8),
        "static_call": wrap_code(f"return {returned}", indent=8),
        "run": wrap_code(f'outs = (_run or _load_run())("{spec.op_name}", {op_args})', indent=8),
        "shape_errors": {i: py_string_call(
            "raise ValueError(", f"{name}: {i} has shape {{list({i}.shape)}}, but as a "
            f"{rules[in_roles[i]]}", indent=8) for i in inputs if i != first},
        "row_ifs": {i: wrap_code(f"if not (_dims_agree({i}.shape, shape[:-1]) or "
                                 f"_dims_agree({i}.shape, [*shape[:-1], 1])):", indent=4)
                    for i in inputs if in_roles[i] == "row"},
        "arg_docs": {i: doc_entry(f"{i}: {role_text[i]}, a {', '.join(m.dtypes)} tensor on CPU "
                                  "or GPU.") for i in inputs},
        "return_docs": {o: doc_entry(f"{o}: {returns[out_roles[o]]}.") for o in m.outputs},
    }


def _alternatives_raises(pattern: str, *, indent: int) -> str:
    """``with pytest.raises(ValueError, match=f"pattern"):`` from column ``indent``, the f-string
    ``pattern`` split after its ``|`` where it does not fit one line (at spaces where even that
    does not fit)."""
    head = "with pytest.raises(ValueError, match="
    one_line = f'{head}f"{pattern}"):'
    if indent + len(one_line) <= 100:
        return one_line
    first, second = pattern.split("|", 1)
    column = indent + len(head)
    if column + len(first) + 4 <= 100 and column + len(second) + 5 <= 100:
        return f'{head}f"{first}|"\n{" " * column}f"{second}"):'
    return py_string_call(head, pattern, "):", indent=indent)


def _test_text(spec: Spec, attrs: list[Attr], first: str, in_roles: dict[str, str],
               out_roles: dict[str, str], output_grads: list[str] | None,
               extremum_outputs: list[str]) -> dict[str, str]:
    """What :attr:`Context.test` holds: the generated test's statements and comments that name
    the op or its tensors, each wrapped from the column the template puts it at."""
    m = spec.model
    name, inputs, outputs = m.name, list(m.inputs), list(m.outputs)
    listed = ", ".join(inputs)
    defaults = "".join(f", {a.name}={a.py_default}" for a in attrs)
    passed = "".join(f", {a.name}={a.name}" for a in attrs)
    domains = [str(tuple(m.domain.get(n, (-3.0, 3.0)))) for n in inputs]
    unpacked = ", ".join(o if o in extremum_outputs else "_" for o in outputs)
    wrong_shape = (f"{name}: {{name}} has shape \\\\[5\\\\]|"
                   f"{name}: {{name}} has shape \\\\[4, 5\\\\]")
    return {
        "roles": wrap_code("ROLES = {" + ", ".join(f'"{i}": "{in_roles[i]}"' for i in inputs) +
                           "}"),
        "domain": wrap_code("DOMAIN = {" + ", ".join(f'"{i}": {d}' for i, d in
                                                     zip(inputs, domains, strict=True)) + "}"),
        "output_roles": wrap_code("OUTPUT_ROLES = {" + ", ".join(
            f'"{o}": "{out_roles[o]}"' for o in outputs) + "}"),
        "other_attrs": wrap_code("pytest.param({" + ", ".join(
            f'"{a.name}": {a.py_other}' for a in attrs) + '}, id="other-attrs"),', indent=4),
        "reference_forward_def": wrap_code(f"def reference_forward({listed}{defaults}):"),
        "reference_backward_def": wrap_code(
            f"def reference_backward({listed}" + "".join(
                f", grad_{o}" for o in output_grads or []) + f"{defaults}, outputs=None):"),
        "reference_outputs": wrap_code(
            f"outputs = ot.as_tuple(reference_forward({listed}{passed}))", indent=8),
        "reference_extrema": wrap_code(
            f"{unpacked}{',' if len(outputs) == 1 else ''} = ot.as_tuple(reference_forward("
            f"{listed}{passed}))", indent=4),
        "row_shapes": wrap_code("row_shapes = {" + ", ".join(
            f'"{i}": np.shape({i})' for i in inputs if in_roles[i] == "row") + "}", indent=4),
        "wrong_shape_raises": _alternatives_raises(wrong_shape, indent=8),
        "outputs_by_role": wrap_code(f"outputs = dict(zip(OUTPUT_ROLES, ot.as_tuple({name}("
                                     "*inputs, **attrs)), strict=True))", indent=4),
        "deploy_comment": comment_text(
            "Deploy: the op inside a static graph, saved, and loaded by a fresh process as a "
            f"server would (docs/deploy.md). CPU, float32; `opgen test {name} -- -m \"not "
            "deploy\"` skips these.", prefix="# "),
        "static_matches": wrap_code(f"ot.assert_static_matches_eager(lambda: Model({name}, "
                                    "attrs), inputs, specs, grad_outputs)", indent=4),
        "static_wrong_dtype": py_string_call("with pytest.raises(TypeError, match=",
                                             f"{name}: {inputs[0]} is int32", "):", indent=12),
        "static_wrong_shape": py_string_call("with pytest.raises(ValueError, match=",
                                             f"{name}: {{name}} has shape", "):", indent=16),
        "saved_model": wrap_code(
            f"ot.assert_saved_model_serves(lambda: Model({name}, attrs), inputs, specs, way, "
            "HERE, tmp_path, [" + ", ".join(f'"{o}"' for o in outputs) + "])", indent=4),
    }


def _cpp_text(spec: Spec, camel: str, forward: Functor, backward: Functor | None, first: str,
              kept: list[str], paddle_inputs: list[str], out_roles: dict[str, str],
              attrs: list[Attr]) -> dict[str, str]:
    """What :attr:`Context.cpp` holds: the files' header comments (``cc_header``, ``cu_header``,
    ``h_header``), the CPU entry points' handing over to the CUDA ones (``forward_gpu``,
    ``backward_gpu``), the InferShape comment (``infer_shape_comment``) and the registration's
    tensor lists (``inputs``, ``outputs``, ``attrs``, ``grad_inputs``, ``grad_outputs``)."""
    m = spec.model
    spec_file = nobreak(cpp_comment(Path(spec.path).name))

    text = {
        "cc_header": comment_text("CPU kernels and the op's registration with Paddle. Generated "
                                  f"by opgen from {spec_file}."),
        "cu_header": comment_text("CUDA kernels: the row-wise launcher in opgen/rowwise.cuh runs "
                                  f"the functors of {m.name}.h on the inputs' device and stream. "
                                  f"Generated by opgen from {spec_file}."),
        "h_header": comment_text("The op's math, shared by its CPU and CUDA kernels: one functor "
                                 "per direction, called once per row (opgen/rowwise.h). Generated "
                                 f"by opgen from {spec_file}."),
        "forward_gpu": cpp_if_return(f"{first}.is_gpu()", f"{camel}ForwardCUDA(" + ", ".join(
            [*m.inputs, *(a.name for a in forward.attrs)]) + ")"),
        "infer_shape_comment": comment_text(f"Per-element outputs are shaped like {first}, "
                                            f"per-row ones like {first} without its last dim."),
        "inputs": op_list("Inputs", [f'"{i}"' for i in m.inputs]),
        "outputs": op_list("Outputs", [f'"{o}"' for o in m.outputs]),
        "attrs": op_list("Attrs", [f'"{a.paddle_decl}"' for a in attrs]),
        "grad_inputs": op_list("Inputs", paddle_inputs if backward else
                                  [f'"{i}"' for i in m.inputs]),
        "grad_outputs": op_list("Outputs", [f'paddle::Grad("{i}")' for i in m.inputs]),
    }
    if backward:
        text["backward_gpu"] = wrap_code(f"return {camel}BackwardCUDA(" + ", ".join(
            [*kept, *(a.name for a in backward.attrs)]) + ");", indent=4)
    return text


def _signatures(camel: str, inputs: list[str], first: str, attrs: list[Attr], forward: Functor,
                backward: Functor | None, kept: list[str]) -> dict[str, str]:
    """The C++ functions' heads, wrapped to 100 columns. A registered kernel takes every attr
    (Paddle passes them all) and names those its functor reads; its CUDA entry takes only
    those."""
    vec = "std::vector<paddle::Tensor>"
    tensors = [f"const paddle::Tensor& {n}" for n in inputs]
    grads = [f"const paddle::Tensor& {n}" for n in kept] if backward else \
        [f"const paddle::Tensor& {n}" for n in inputs]

    def kernel_attrs(f: Functor | None) -> list[str]:
        read = {a.name for a in f.attrs} if f else set()
        return [a.kernel_param if a.name in read else
                " ".join(a.kernel_param.split()[:-1]) + f" /*{a.kernel_param.split()[-1]}*/"
                for a in attrs]

    return {
        "forward": wrap_call(f"{vec} {camel}Forward", tensors + kernel_attrs(forward),
                             width=_HEAD_WIDTH),
        "forward_cuda": wrap_call(f"{vec} {camel}ForwardCUDA",
                                  tensors + [a.cpp_param for a in forward.attrs],
                                  width=_HEAD_WIDTH),
        "backward": wrap_call(f"{vec} {camel}Backward", grads + kernel_attrs(backward),
                              width=_HEAD_WIDTH),
        "backward_cuda": wrap_call(f"{vec} {camel}BackwardCUDA",
                                   grads + [a.cpp_param for a in backward.attrs] if backward
                                   else grads, width=_HEAD_WIDTH),
        # the outputs take the first per-element input's shape and dtype; the kernels check the
        # other inputs against it
        "infer_shape": wrap_call(f"std::vector<std::vector<int64_t>> {camel}InferShape",
                                 [f"const std::vector<int64_t>& "
                                  f"{param_name(f'{n}_shape', n == first)}" for n in inputs],
                                 width=_HEAD_WIDTH),
        "infer_dtype": wrap_call(f"std::vector<paddle::DataType> {camel}InferDtype",
                                 [f"const paddle::DataType& {param_name(f'{n}_dtype', n == first)}"
                                  for n in inputs],
                                 width=_HEAD_WIDTH),
    }


def launch(namespace: str, where: str, f: Functor, tensors: list[str]) -> str:
    """``return opgen::rowwise::<where>::Rowwise<...>(`` and its arguments (the op's name, the
    functor's, ``tensors`` and the attrs the functor reads), from column 2, within 100 columns."""
    head = f"return opgen::rowwise::{where}::Rowwise"
    args = [f"{namespace}::Dtypes", f"{namespace}::{f.struct}", f"{namespace}::{f.struct}Io"]
    call = ", ".join([f'{namespace}::kOpName, "{namespace}::{f.struct}"',
                      "{" + ", ".join(tensors) + "}", *(a.name for a in f.attrs)])
    return (wrap_call(head, args, "(", indent=2, brackets="<>") +
            "\n      " + wrap_hanging(call + ");", indent=6))


def variables(spec: Spec, naive: bool) -> dict[str, object]:
    """The templates' variables: the fields of :func:`build_context`'s :class:`Context`."""
    if naive:
        raise OpgenError("opgen bench has no naive comparison copy of a rowwise op")
    context = build_context(spec)
    return {f.name: getattr(context, f.name) for f in dataclasses.fields(context)}




def check(model: OpSpec, fail: Callable[..., SpecError]) -> None:
    """The rowwise kind's rules for the spec's fields it does not honour (``amp:`` and
    ``inplace:`` are made by the elementwise kind's wrapper and kernels only) and for the name
    its functors take."""
    sections: list[tuple[str, list[str]]] = [
        ("inputs", model.inputs), ("outputs", model.outputs), ("attrs", list(model.attrs)),
        ("forward", list(model.forward)),
        ("backward", list(model.backward) if isinstance(model.backward, dict) else [])]
    for section, names in sections:
        for i, name in enumerate(names):
            if name == "row":  # the functors' parameter, operator()(Row& row)
                where = (section, i) if section in ("inputs", "outputs") else (section, name)
                raise fail(where, "'row' is reserved in a rowwise op: the generated functors "
                           "name the row they compute so; name it differently")
    if model.inplace:
        raise fail(("inplace",), f"inplace: a kind: {model.kind} op has no in-place variant "
                   "(elementwise and custom ops have them); remove it")
    if model.amp != "follow":
        raise fail(("amp",), f"amp: {model.amp} is for elementwise ops so far; a kind: "
                   f"{model.kind} op takes the default (amp: follow)")


KIND = Kind(name="rowwise", templates="rowwise", context=variables, check=check)

"""Symbolic derivatives of the spec's expressions: what ``backward: auto`` writes.

The forward's entries (intermediates and outputs, in order) are differentiated in reverse: each
output's gradient ``grad_<output>`` flows back through the entries, and every input gets the sum,
over the entries that read it, of the incoming gradient times the entry's partial derivative.
An intermediate that receives a gradient gets one of its own, ``grad_<intermediate>``, a local of
the backward; the backward reads the forward's intermediates as they are (the generated backward
computes them again), and never the outputs, so it reads no more tensors than the forward does.

The partial derivatives are simplified as they are built (constants folded, ``x * 1``, ``x * 0``,
``x + 0``, ``--x``, ``a * b / b``, ``a * (b / c)`` as ``a * b / c``, a multiplication moved into a
``where`` whose other branch is 0) and printed with the fewest parentheses, so the result reads
like a hand-written ``backward:`` and goes through the same checks and emitters.

Kinks follow Paddle's own kernels (Paddle 3.3.1, ``paddle/phi/kernels/funcs/elementwise_functor.h``
``MaxGradXFunctor``/``MinGradXFunctor``, ``paddle/phi/kernels/funcs/complex_functors.h``
``AbsGradFunctor``, ``paddle/phi/kernels/impl/clip_grad_kernel_impl.h`` ``ClipGradFunctor``):
``min``/``max`` give the whole gradient to the argument that wins and half to each at a tie;
``abs`` has gradient 0 at 0 (``sign``); ``clamp(x, lo, hi)`` passes the gradient to ``x`` on
the closed interval ``lo <= x <= hi``; ``floor``, ``ceil``, ``sign`` and comparisons have
gradient 0; ``where`` passes it to the branch it takes. docs/spec.md lists them.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .expr import FUNCTIONS, ExprError, parse_expr


class AutodiffError(Exception):
    """The forward cannot be differentiated (an expression outside the language)."""


@dataclass(frozen=True, eq=False)
class Expr:
    """A node: ``op`` is num, name, bool, neg, not, add, sub, mul, div, pow, cmp, and, or or
    call; ``name`` is the variable, the function or the comparison operator.

    Equal trees are equal nodes. Each node keeps its hash and its ``size`` (its nodes, as
    :func:`source` writes them out): a derivative repeats subtrees of the forward, and hashing
    or measuring them again at every level made large derivations quadratic or worse."""

    op: str
    args: tuple[Expr, ...] = ()
    name: str = ""
    value: float = 0.0
    size: int = field(init=False, repr=False)
    _hash: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", 1 + sum(a.size for a in self.args))
        object.__setattr__(self, "_hash", hash((self.op, self.args, self.name, self.value)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Expr) or self._hash != other._hash:
            return False
        return (self.op, self.name, self.value, self.args) == \
            (other.op, other.name, other.value, other.args)


def num(value: float) -> Expr:
    return Expr("num", value=float(value))


def var(name: str) -> Expr:
    return Expr("name", name=name)


ZERO, ONE, HALF = num(0), num(1), num(0.5)
_LN2 = math.log(2.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _is(e: Expr, value: float) -> bool:
    return e.op == "num" and e.value == value


# -- from Python's ast ----------------------------------------------------------------------------

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
           ast.BitAnd: "and", ast.BitOr: "or"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!="}


def parse(source: str) -> Expr:
    """A checked expression of the language as a tree (comparison chains become ``&``).

    :class:`AutodiffError` where ``source`` is outside the language's limits (too deep): the
    texts parsed here are the forward, already checked, and sections derived from it, which
    :func:`backward_of` keeps within those limits; a caller that writes out a derived section's
    locals again (:func:`inline_locals`) may exceed them, and learns it as a forward that cannot
    be differentiated, not as a crash."""
    try:
        tree = parse_expr(source)
    except ExprError as exc:
        raise AutodiffError(f"the derived gradient is outside the expression language: "
                            f"{exc}") from None
    return _from_ast(tree.body)


def _from_ast(node: ast.AST) -> Expr:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            return Expr("bool", value=float(node.value))
        return num(node.value)
    if isinstance(node, ast.Name):
        return var(node.id)
    if isinstance(node, ast.UnaryOp):
        operand = _from_ast(node.operand)
        if isinstance(node.op, ast.USub):
            return neg(operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        return Expr("not", (operand,))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return Expr(_BINOPS[type(node.op)], (_from_ast(node.left), _from_ast(node.right)))
    if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
        operands = [_from_ast(o) for o in [node.left, *node.comparators]]
        parts = [Expr("cmp", (a, b), name=_CMPOPS[type(o)])
                 for o, a, b in zip(node.ops, operands, operands[1:], strict=False)]
        result = parts[0]
        for part in parts[1:]:
            result = Expr("and", (result, part))
        return result
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = tuple(_from_ast(a) for a in node.args)
        if node.func.id == "pow":
            return Expr("pow", args)
        return call(node.func.id, *args)
    raise AutodiffError(f"cannot differentiate {ast.unparse(node)!r}")


# -- printing: Python syntax with the fewest parentheses ------------------------------------------

_CMP, _BOR, _BAND, _ADD, _MUL, _UNARY, _POW, _ATOM = 3, 4, 5, 6, 7, 8, 9, 10
_PREC = {"or": _BOR, "and": _BAND, "cmp": _CMP, "add": _ADD, "sub": _ADD, "mul": _MUL,
         "div": _MUL, "neg": _UNARY, "not": _UNARY, "pow": _POW}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&", "or": "|"}


def _prec(e: Expr) -> int:
    if e.op == "num":
        return _UNARY if e.value < 0 or (e.value == 0 and math.copysign(1, e.value) < 0) \
            else _ATOM
    return _PREC.get(e.op, _ATOM)


def _number(value: float) -> str:
    if value.is_integer() and abs(value) < 2**31:
        return str(int(value))
    return repr(value)


def source(e: Expr) -> str:
    """``e`` as expression text."""
    def operand(child: Expr, needed: int) -> str:
        text = source(child)
        return text if _prec(child) >= needed else f"({text})"

    op = e.op
    if op == "num":
        return _number(e.value)
    if op == "name":
        return e.name
    if op == "bool":
        return "True" if e.value else "False"
    if op == "neg":
        return "-" + operand(e.args[0], _UNARY)
    if op == "not":
        return "~" + operand(e.args[0], _UNARY)
    if op == "pow":
        return f"{operand(e.args[0], _POW + 1)} ** {operand(e.args[1], _UNARY)}"
    if op == "cmp":
        return f"{operand(e.args[0], _BOR)} {e.name} {operand(e.args[1], _BOR)}"
    if op in _SYMBOL:
        prec = _PREC[op]
        return f"{operand(e.args[0], prec)} {_SYMBOL[op]} {operand(e.args[1], prec + 1)}"
    return f"{e.name}({', '.join(source(a) for a in e.args)})"


# -- building with simplification ----------------------------------------------------------------

def neg(a: Expr) -> Expr:
    if a.op == "num":
        return num(-a.value) if a.value else ZERO
    if a.op == "neg":
        return a.args[0]
    if a.op == "sub":
        return sub(a.args[1], a.args[0])
    if a.op in ("mul", "div") and _lead(a).op in ("num", "name", "neg"):  # -(2 * x): -2 * x
        return Expr(a.op, (neg(a.args[0]), a.args[1]))
    return Expr("neg", (a,))


def _lead(e: Expr) -> Expr:
    """The first factor of a product or quotient (``e`` itself otherwise)."""
    while e.op in ("mul", "div"):
        e = e.args[0]
    return e


def add(a: Expr, b: Expr) -> Expr:
    if _is(a, 0):
        return b
    if _is(b, 0):
        return a
    if a.op == "num" and b.op == "num":
        return _folded("add", a, b, a.value + b.value)
    if b.op == "neg":
        return sub(a, b.args[0])
    if a.op == "neg":
        return sub(b, a.args[0])
    if _negative(b):
        return sub(a, neg(b))
    if _negative(a):  # -0.5 + x as x - 0.5
        return sub(b, neg(a))
    return Expr("add", (a, b))


def _negative(e: Expr) -> bool:
    """A negation, a negative number, or a product or quotient led by one (-0.5 * x)."""
    lead = _lead(e)
    return lead.op == "neg" or (lead.op == "num" and lead.value < 0)


def sub(a: Expr, b: Expr) -> Expr:
    if _is(b, 0):
        return a
    if _is(a, 0):
        return neg(b)
    if a.op == "num" and b.op == "num":
        return _folded("sub", a, b, a.value - b.value)
    if b.op == "neg":
        return add(a, b.args[0])
    return Expr("sub", (a, b))


def _cheap(e: Expr) -> bool:
    """A name or number: copying it into both branches of a where costs nothing."""
    return e.op in ("name", "num")


def mul(a: Expr, b: Expr) -> Expr:
    if _is(a, 0) or _is(b, 0):
        return ZERO
    if _is(a, 1):
        return b
    if _is(b, 1):
        return a
    if a.op == "num" and b.op == "num":
        return _folded("mul", a, b, a.value * b.value)
    if _is(a, -1):
        return neg(b)
    if _is(b, -1):
        return neg(a)
    if a.op == "neg":
        return neg(mul(a.args[0], b))
    if b.op == "neg":
        return neg(mul(a, b.args[0]))
    if b.op == "num":  # constants first: 2 * x
        return mul(b, a)
    if _is_where(b) and (_cheap(a) or _is(b.args[1], 0) or _is(b.args[2], 0)):
        return where(b.args[0], mul(a, b.args[1]), mul(a, b.args[2]))
    if _is_where(a) and (_cheap(b) or _is(a.args[1], 0) or _is(a.args[2], 0)):
        return where(a.args[0], mul(a.args[1], b), mul(a.args[2], b))
    if a.op == "num" and b.op in ("mul", "div") and b.args[0].op == "num" \
            and math.isfinite(a.value * b.args[0].value):
        return Expr(b.op, (num(a.value * b.args[0].value), b.args[1]))
    if b.op == "mul":  # a * (p * q) as a * p * q
        return mul(mul(a, b.args[0]), b.args[1])
    if b.op == "div":  # a * (p / q) as a * p / q
        return div(mul(a, b.args[0]), b.args[1])
    if a.op == "div" and _is(a.args[0], 1):  # 1 / q * b as b / q
        return div(b, a.args[1])
    return Expr("mul", (a, b))


def div(a: Expr, b: Expr) -> Expr:
    if _is(a, 0):
        return ZERO
    if _is(b, 1):
        return a
    if a.op == "num" and b.op == "num" and b.value:
        return _folded("div", a, b, a.value / b.value)
    if a.op == "neg":
        return neg(div(a.args[0], b))
    factors = _factors(a)
    if b.op != "num" and b in factors:  # a * b / b as a
        factors.remove(b)
        result = ONE
        for factor in factors:
            result = mul(result, factor)
        return result
    if _is_where(a) and (_is(a.args[1], 0) or _is(a.args[2], 0)):
        return where(a.args[0], div(a.args[1], b), div(a.args[2], b))
    return Expr("div", (a, b))


def _factors(e: Expr) -> list[Expr]:
    """The factors of a product ``p * q * ...`` (``[e]`` for anything else)."""
    if e.op == "mul":
        return _factors(e.args[0]) + _factors(e.args[1])
    return [e]


def power(a: Expr, b: Expr) -> Expr:
    if _is(b, 1):
        return a
    if _is(b, 0):
        return ONE
    if a.op == "num" and b.op == "num":
        folded = _fold(lambda: math.pow(a.value, b.value))
        if folded is not None:
            return folded
    return Expr("pow", (a, b))


def _is_where(e: Expr) -> bool:
    return e.op == "call" and e.name == "where"


def where(cond: Expr, a: Expr, b: Expr) -> Expr:
    if cond.op == "bool":
        return a if cond.value else b
    if a == b:
        return a
    if _is_where(a) and a.args[2] == b:  # where(c, where(k, p, z), z) = where(c & k, p, z)
        return where(Expr("and", (cond, a.args[0])), a.args[1], b)
    return Expr("call", (cond, a, b), name="where")


def call(name: str, *args: Expr) -> Expr:
    if all(a.op == "num" for a in args) and name in _MATH:
        folded = _fold(lambda: _MATH[name](*(a.value for a in args)))
        if folded is not None:
            return folded
    return Expr("call", args, name=name)


def cmp(a: Expr, op: str, b: Expr) -> Expr:
    return Expr("cmp", (a, b), name=op)


def both(a: Expr, b: Expr) -> Expr:
    return Expr("and", (a, b))


def _folded(op: str, a: Expr, b: Expr, value: float) -> Expr:
    """``a op b`` of two numbers: the number, where it is finite; else the operation as written
    (1e200 * 1e200 overflows where the kernel computes it, not here: inf is no expression)."""
    return num(value) if math.isfinite(value) else Expr(op, (a, b))


def _fold(compute: Callable[[], float]) -> Expr | None:
    """A constant computed now, where it is finite."""
    try:
        value = compute()
    except (ArithmeticError, ValueError):
        return None
    return num(value) if math.isfinite(value) else None


_MATH: dict[str, Callable[..., float]] = {
    "exp": math.exp, "log": math.log, "log1p": math.log1p, "expm1": math.expm1,
    "sqrt": math.sqrt, "tanh": math.tanh, "erf": math.erf, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "atan": math.atan, "log2": math.log2, "exp2": lambda x: 2.0 ** x,
    "abs": abs, "square": lambda x: x * x,
}


# -- partial derivatives --------------------------------------------------------------------------

#: The most nodes (``Expr.size``) the derived gradients of one section may have: a forward of
#: hundreds of nested operations (``max(max(...(x, y)...))``, 99 deep) has gradients of tens of
#: thousands, which take minutes to simplify, share and compile, for kernels no one would run.
#: Ordinary forwards' gradients have tens to hundreds; the double backward of a large one,
#: derived only where it can be, is left out past this size.
MAX_SIZE = 20_000
TOO_LARGE = (f"the forward is too large to differentiate (its gradients would have more than "
             f"{MAX_SIZE} operations); compute parts of it as intermediates of forward, which "
             "the gradients read by name, or write the backward")


def partial(e: Expr, wrt: str) -> Expr:
    """d e / d wrt, simplified (:data:`ZERO` where it is identically zero); :class:`AutodiffError`
    past :data:`MAX_SIZE` nodes, as soon as a part of it is that large."""
    result = _partial(e, wrt)
    if result.size > MAX_SIZE:
        raise AutodiffError(TOO_LARGE)
    return result


def _partial(e: Expr, wrt: str) -> Expr:
    op, args = e.op, e.args

    def d(child: Expr) -> Expr:
        return partial(child, wrt)

    if op == "name":
        return ONE if e.name == wrt else ZERO
    if op in ("num", "bool", "cmp", "and", "or", "not"):
        return ZERO
    if op == "neg":
        return neg(d(args[0]))
    if op == "add":
        return add(d(args[0]), d(args[1]))
    if op == "sub":
        return sub(d(args[0]), d(args[1]))
    if op == "mul":
        a, b = args
        return add(mul(d(a), b), mul(a, d(b)))
    if op == "div":
        a, b = args
        da, db = d(a), d(b)
        return sub(div(da, b), div(mul(a, db), power(b, num(2))))
    if op == "pow":
        return _partial_pow(e, d)
    if op != "call":
        raise AutodiffError(f"cannot differentiate {source(e)!r}")
    if e.name == "where":
        return where(args[0], d(args[1]), d(args[2]))
    if e.name in ("min", "max"):
        return _partial_min_max(e.name, args[0], args[1], d(args[0]), d(args[1]))
    if e.name == "clamp":
        return _partial_clamp(*args, *(d(a) for a in args))
    u = args[0]
    du = d(u)
    if _is(du, 0) or e.name in ("floor", "ceil", "sign"):
        return ZERO
    return mul(_DERIVATIVES[e.name](u, e), du)


def _partial_pow(e: Expr, d: Callable[[Expr], Expr]) -> Expr:
    a, b = e.args
    da, db = d(a), d(b)
    result = ZERO
    if not _is(da, 0):  # b * a ** (b - 1)
        result = mul(mul(b, power(a, sub(b, ONE))), da)
    if not _is(db, 0):  # a ** b * log(a)
        result = add(result, mul(mul(e, call("log", a)), db))
    return result


#: The largest derivative of a min or max argument (in nodes: ``Expr.size``) written twice, in
#: both branches of the selection (a tie's half), as a hand-written backward would: ``max(x, y)``,
#: ``min(max(x, 0), t)``. A larger one is written once (:func:`_selected`): written twice at each
#: of n nested selections, it would be 2 ** n copies, which ``min(min(min(...)))`` of depth 14
#: took minutes to derive and print.
_TWICE_SIZE = 40


def _partial_min_max(name: str, a: Expr, b: Expr, da: Expr, db: Expr) -> Expr:
    """Paddle's MinGrad/MaxGrad functors: the argument that wins gets the gradient, half each at
    a tie, none where either is NaN."""
    wins = "<" if name == "min" else ">"
    loses = ">" if name == "min" else "<"
    if max(da.size, db.size) > _TWICE_SIZE:
        return add(_selected(a, wins, b, da), _selected(a, loses, b, db))
    tie = cmp(a, "==", b)
    if _is(db, 0):
        return where(cmp(a, wins, b), da, where(tie, mul(HALF, da), ZERO))
    if _is(da, 0):
        return where(cmp(a, loses, b), db, where(tie, mul(HALF, db), ZERO))
    return where(cmp(a, wins, b), da,
                 where(cmp(a, loses, b), db, where(tie, mul(HALF, add(da, db)), ZERO)))


def _selected(a: Expr, wins: str, b: Expr, da: Expr) -> Expr:
    """``da`` where ``a wins b`` (``<`` or ``>``), half of it at a tie, else 0 (NaN included),
    with ``da`` written once: ``where(a <= b, da * where(a < b, 1, 0.5), 0)``, the values of the
    two-branch form (``da * 1`` is ``da``, ``da * 0.5`` is ``0.5 * da``). Where both arguments
    have a derivative, the two selections are added: a tie's ``0.5 * da + 0.5 * db`` is
    ``0.5 * (da + db)`` but for rounding, and a factor outside them (``g * (s + t)``, where the
    two-branch form had ``g * s`` in a branch) may round otherwise in the last bit."""
    if _is(da, 0):
        return ZERO
    share = where(cmp(a, wins, b), ONE, HALF)
    return where(cmp(a, wins + "=", b), mul(da, share), ZERO)


def _partial_clamp(x: Expr, lo: Expr, hi: Expr, dx: Expr, dlo: Expr, dhi: Expr) -> Expr:
    """Paddle's ClipGradFunctor for x (the closed interval); the bound that is the result gets the
    rest (hi where lo > hi, as numpy's clip returns hi there)."""
    result = where(both(cmp(x, ">=", lo), cmp(x, "<=", hi)), dx, ZERO)
    if not _is(dlo, 0):
        result = add(result, where(both(cmp(x, "<", lo), cmp(lo, "<=", hi)), dlo, ZERO))
    if not _is(dhi, 0):
        above = Expr("or", (both(cmp(x, ">", hi), cmp(lo, "<=", hi)), cmp(lo, ">", hi)))
        result = add(result, where(above, dhi, ZERO))
    return result


#: f'(u) of each function of one argument, from u and f(u) itself.
_DERIVATIVES: dict[str, Callable[[Expr, Expr], Expr]] = {
    "abs": lambda u, f: call("sign", u),
    "exp": lambda u, f: f,
    "log": lambda u, f: div(ONE, u),
    "log1p": lambda u, f: div(ONE, add(ONE, u)),
    "expm1": lambda u, f: call("exp", u),
    "sqrt": lambda u, f: div(HALF, f),
    "rsqrt": lambda u, f: div(mul(num(-0.5), f), u),
    "tanh": lambda u, f: sub(ONE, power(f, num(2))),
    "sigmoid": lambda u, f: mul(f, sub(ONE, f)),
    "erf": lambda u, f: mul(num(_TWO_OVER_SQRT_PI), call("exp", neg(power(u, num(2))))),
    "sin": lambda u, f: call("cos", u),
    "cos": lambda u, f: neg(call("sin", u)),
    "softplus": lambda u, f: call("sigmoid", u),
    "square": lambda u, f: mul(num(2), u),
    "tan": lambda u, f: add(ONE, power(f, num(2))),
    "atan": lambda u, f: div(ONE, add(ONE, power(u, num(2)))),
    "log2": lambda u, f: div(num(1.0 / _LN2), u),
    "exp2": lambda u, f: mul(f, num(_LN2)),
}


def names(e: Expr) -> list[str]:
    """The names ``e`` reads, in the order they first appear."""
    found: dict[str, None] = {}
    stack = [e]
    while stack:
        node = stack.pop()
        if node.op == "name":
            found.setdefault(node.name)
        stack.extend(reversed(node.args))
    return list(found)


# -- the backward of a forward --------------------------------------------------------------------

def backward_of(forward: Mapping[str, str], inputs: Sequence[str], outputs: Sequence[str],
                *, local_prefix: str = "grad_", reserved: Iterable[str] = ()) -> dict[str, str]:
    """The backward section of a checked ``forward`` (its entries in order: intermediates and
    outputs): ``grad_<intermediate>`` locals, then each input's gradient, as expression text.

    The gradient of input i is the sum over outputs o of ``grad_o * d o / d i``, through the
    intermediates; an input the outputs do not depend on gets ``0``. An intermediate's gradient
    is the local ``<local_prefix><intermediate>``: the double backward, which differentiates a
    backward that has ``grad_`` locals of its own, names them otherwise. A gradient that would
    nest deeper than :data:`MAX_HEIGHT` has its deepest parts computed in locals of their own
    (``grad_x_part1``: see :func:`_shallow`), never one of ``reserved``.
    """
    entries = {name: parse(text) for name, text in forward.items()}
    intermediates = [n for n in entries if n not in outputs]
    differentiable = set(inputs) | set(intermediates)
    incoming: dict[str, list[Expr]] = {n: [] for n in [*inputs, *intermediates]}
    for o in outputs:
        incoming[o] = [var(f"grad_{o}")]
    section: dict[str, Expr] = {}
    size = 0
    for name in reversed(list(entries)):
        gradient = _sum(incoming[name])
        if _is(gradient, 0):
            continue
        if name in intermediates and gradient.op != "name":
            section[f"{local_prefix}{name}"] = gradient
            gradient = var(f"{local_prefix}{name}")
        expr = entries[name]
        for read in names(expr):
            if read in differentiable:
                term = mul(gradient, partial(expr, read))
                size = _counted(size, term)
                if not _is(term, 0):
                    incoming[read].append(term)
    for i in inputs:
        section[i] = _sum(incoming[i])
    taken = _taken(entries.values(), [*entries, *inputs, *outputs], reserved)
    taken.update(f"{local_prefix}{name}" for name in entries)
    return _read_only(_shallow(section, inputs, local_prefix, taken), inputs)


def _counted(size: int, term: Expr) -> int:
    """``size`` nodes derived so far, and ``term``'s; :class:`AutodiffError` past
    :data:`MAX_SIZE`."""
    size += term.size
    if size > MAX_SIZE:
        raise AutodiffError(TOO_LARGE)
    return size


def _taken(trees: Iterable[Expr], defined: Iterable[str], reserved: Iterable[str]) -> set[str]:
    """The names a derived local must not take: those ``trees`` read, those ``defined`` and
    their gradients' (``grad_<name>``), and ``reserved``."""
    taken = set(reserved)
    for name in defined:
        taken.update((name, f"grad_{name}"))
    for tree in trees:
        taken.update(names(tree))
    return taken


# -- nesting within the language's limits ---------------------------------------------------------

#: How deep a derived expression may nest, counted in parentheses of its emitted code (see
#: :func:`_weight`), before its deepest parts are computed in locals of their own: well below the
#: language's limits (``opgen.expr.MAX_DEPTH``, ``MAX_EMITTED_NESTING``), which the derived section
#: meets when it is checked as a written one is. A derivative nests deeper than its forward (the
#: product rule puts ``d(a)`` inside ``d(a) * b + a * d(b)``), so a forward the language accepts
#: could otherwise have a backward it refuses.
MAX_HEIGHT = 60


def _shallow(section: Mapping[str, Expr], targets: Sequence[str], local_prefix: str,
             taken: set[str]) -> dict[str, str]:
    """``section`` as text, each entry nested at most :data:`MAX_HEIGHT` deep: a deeper one has its
    deepest parts computed first, in locals named after it (``grad_x_part1`` for the gradient of
    input x, ``grad_s_part1`` for the local ``grad_s``), none of ``taken``. The parts are named
    like gradients (``<local_prefix>...``, which the double backward's
    :func:`inline_locals` leaves as they are): the double backward differentiates through them."""
    out: dict[str, str] = {}
    for key, tree in section.items():
        base = f"{local_prefix}{key}" if key in targets else key
        parts: dict[str, Expr] = {}

        def hoist(part: Expr, base: str = base, parts: dict[str, Expr] = parts) -> Expr:
            k = 1
            while f"{base}_part{k}" in taken:
                k += 1
            name = f"{base}_part{k}"
            taken.add(name)
            parts[name] = part
            return var(name)

        lowered, _ = _lowered(tree, hoist)
        out.update({name: source(part) for name, part in parts.items()})
        out[key] = source(lowered)
    return out


def _lowered(e: Expr, hoist: Callable[[Expr], Expr]) -> tuple[Expr, int]:
    """``e`` with its deepest parts replaced by ``hoist(part)`` (a local's name) until it nests at
    most :data:`MAX_HEIGHT` deep, and how deep it then nests. Innermost parts are hoisted first,
    so a part never reads a later one."""
    if not e.args:
        return e, _weight(e)
    lowered = [_lowered(a, hoist) for a in e.args]
    weight = _weight(e)
    while weight + max(height for _, height in lowered) > MAX_HEIGHT:
        deepest = max(range(len(lowered)), key=lambda i: lowered[i][1])
        lowered[deepest] = (hoist(lowered[deepest][0]), 1)
    args = tuple(a for a, _ in lowered)
    if any(a is not b for a, b in zip(args, e.args, strict=True)):
        e = Expr(e.op, args, e.name, e.value)
    return e, weight + max(height for _, height in lowered)


def _weight(e: Expr) -> int:
    """How many parentheses ``e``'s own node may nest in the emitted C++ or numpy (and levels of
    Python's ``ast``): one for an operator or a call (its own, or those around an operand),
    more for a function emitted as several (numpy's sigmoid is ``(1.0 / (1.0 + np.exp(-(u))))``),
    two for a negative number (``-(2)`` reads as a negation of 2)."""
    if e.op == "num":
        return 2 if math.copysign(1, e.value) < 0 else 1
    if e.op == "call":
        fn = FUNCTIONS.get(e.name)
        return 2 if fn is None else max(1, fn.cpp.count("("), fn.numpy.count("("))
    return 1


def _sum(terms: list[Expr]) -> Expr:
    total = ZERO
    for term in terms:
        total = add(total, term)
    return total


# -- calls made once ------------------------------------------------------------------------------

#: Functions that cost no more than reading a local, where their arguments are names or numbers:
#: a repeated call of one of them on such arguments stays where it is.
_INLINE = frozenset({"square", "abs", "sign", "floor", "ceil", "clamp"})


def share_calls(section: Mapping[str, str], reserved: Iterable[str],
                known: Mapping[str, str] | None = None) -> dict[str, str]:
    """``section`` (a backward, in order) with each function call it makes more than once, on the
    same arguments, computed once in a local of its own (``tanh_u: tanh(...)``) defined just above
    the first entry that reads it, as a careful hand-written backward would: derivatives repeat
    the forward's calls (``tanh(z)`` and ``1 - tanh(z) ** 2``). Innermost calls first, so a call
    of a shared call reads its local. The same operations on the same values: the same results.
    A local is named by :func:`_local_name`, never one of ``reserved`` or of the section's own
    names. ``where``, ``min``, ``max`` (selections) and reductions, calls of numbers alone
    (``rsqrt(2)``) and cheap functions of names or numbers (``abs(x)``) stay inline. ``known``:
    values computed before the section (the intermediates it may read), each read by name
    wherever the section spells out its expression."""
    trees = {name: parse(text) for name, text in section.items()}
    for value, text in (known or {}).items():
        tree = parse(text)
        if tree.args:
            trees = {name: _replace(e, tree, var(value)) for name, e in trees.items()}
    taken = set(reserved) | set(trees)
    for tree in trees.values():
        taken.update(names(tree))
    leaves: dict[str, list[str]] = {}  # each local's name: the names it reads, locals expanded
    while True:
        counts: dict[Expr, int] = {}
        for tree in trees.values():
            _count_calls(tree, counts)
        shared = [e for e, n in counts.items() if n > 1 and _worth_a_local(e)]
        if not shared:
            return {name: source(tree) for name, tree in trees.items()}
        call_ = min(shared, key=lambda e: e.size)  # innermost first; among equals, the first met
        read = [leaf for n in names(call_) for leaf in leaves.get(n, [n])]
        local = _local_name(call_, list(dict.fromkeys(read)), taken)
        leaves[local] = read
        taken.add(local)
        trees = _hoisted(trees, call_, local)


def _hoisted(trees: dict[str, Expr], part: Expr, local: str) -> dict[str, Expr]:
    """``trees`` (a section, in order) reading ``part`` as the new entry ``local``, defined just
    above the first entry that reads it (which reads every name ``part`` reads, so they are all
    defined above it)."""
    first = next(n for n, tree in trees.items() if _contains(tree, part))
    hoisted: dict[str, Expr] = {}
    for name, tree in trees.items():
        if name == first:
            hoisted[local] = part
        hoisted[name] = _replace(tree, part, var(local))
    return hoisted


def _count_calls(e: Expr, counts: dict[Expr, int]) -> None:
    if e.op == "call":
        counts[e] = counts.get(e, 0) + 1
    for a in e.args:
        _count_calls(a, counts)


def _worth_a_local(e: Expr) -> bool:
    # selections (where; min and max, which REDUCTIONS holds) and reductions; rsqrt(2)
    if e.name == "where" or e.name in REDUCTIONS or not names(e):
        return False
    return not (e.name in _INLINE and all(a.op in ("name", "num") for a in e.args))


def _contains(e: Expr, part: Expr) -> bool:
    if e.size < part.size:  # too small to hold it: not walked
        return False
    return e == part or any(_contains(a, part) for a in e.args)


def _replace(e: Expr, part: Expr, by: Expr) -> Expr:
    if e.size < part.size or not e.args:
        return by if e == part else e
    if e == part:
        return by
    args = tuple(_replace(a, part, by) for a in e.args)
    if all(a is b for a, b in zip(args, e.args, strict=True)):
        return e  # nothing replaced: the same node, not a copy
    return Expr(e.op, args, e.name, e.value)


def _local_name(e: Expr, read: list[str], taken: set[str]) -> str:
    """``<function>_<its argument>`` where that is one name (``tanh_sp``, ``exp_tanh_x``), else
    ``<function>_<the first two names it reads>``, through other locals the names those read
    (``tanh(exp_x * y)`` is ``tanh_x_y``); numbered where taken."""
    only = e.args[0].name if len(e.args) == 1 and e.args[0].op == "name" else None
    base = "_".join([e.name, only] if only else [e.name, *read[:2]])
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


# -- arithmetic computed once ----------------------------------------------------------------------

#: The fewest nodes of a repeated arithmetic subexpression that gets a local of its own
#: (``1 - tanh_u ** 2`` has 5); smaller ones read as easily as a name.
_TERM_SIZE = 5
_TERM_OPS = frozenset({"neg", "add", "sub", "mul", "div", "pow"})


def share_terms(section: Mapping[str, str], reserved: Iterable[str]) -> dict[str, str]:
    """``section`` (a derived backward, in order, its calls shared by :func:`share_calls`) with
    each arithmetic subexpression of the forward's values (no gradient in it) of at least
    :data:`_TERM_SIZE` nodes that it computes more than once in a local of its own, defined just
    above the first entry that reads it: the chain rule repeats a function's derivative
    (``1 - tanh_u ** 2`` five times in bias_gelu's double backward), which a careful hand names
    once. The largest first, so a shared term holds its shared parts. The same operations on the
    same values: the same results. A local is named by :func:`_term_name`, never one of
    ``reserved`` or of the section's own names."""
    trees = {name: parse(text) for name, text in section.items()}
    taken = set(reserved) | set(trees)
    for tree in trees.values():
        taken.update(names(tree))
    made: set[str] = set()

    def of_values(e: Expr) -> bool:  # of the forward's values: no gradient, no shared term
        read = names(e)
        return bool(read) and not any(n.startswith(("grad_", "d2_")) or n in made for n in read)

    while True:
        counts: dict[Expr, int] = {}
        for tree in trees.values():
            _count_terms(tree, counts)
        shared = [e for e, n in counts.items() if n > 1 and of_values(e)]
        if not shared:
            return {name: source(tree) for name, tree in _small_inlined(trees, made).items()}
        term = max(shared, key=lambda e: e.size)  # the largest; among equals, the first met
        local = _term_name(term, taken)
        taken.add(local)
        made.add(local)
        trees = _hoisted(trees, term, local)


def _small_inlined(trees: dict[str, Expr], made: set[str]) -> dict[str, Expr]:
    """``trees`` with each shared term whose definition shrank below :data:`_TERM_SIZE` (its own
    shared parts hoisted out of it: ``one_minus_t_sq * y``) written out where it is read again."""
    while small := next((n for n in trees if n in made and trees[n].size < _TERM_SIZE), None):
        value = trees.pop(small)
        trees = {name: _replace(e, var(small), value) for name, e in trees.items()}
    return trees


def _count_terms(e: Expr, counts: dict[Expr, int]) -> None:
    if e.size < _TERM_SIZE:
        return
    if e.op in _TERM_OPS:
        counts[e] = counts.get(e, 0) + 1
    for a in e.args:
        _count_terms(a, counts)


_TERM_WORDS = {"add": "plus", "sub": "minus", "div": "over"}


def _term_words(e: Expr) -> str | None:
    """``e`` in words where they say exactly what it computes (``1 - tanh_u ** 2`` is
    ``one_minus_tanh_u_sq``), else None: a number other than 1, 2 and 1/2, a power other than a
    square or a cube, or an operand its source puts in parentheses (``(1 - t) ** 2`` would read
    as ``1 - t ** 2``)."""
    if e.op == "name":
        return e.name
    if e.op == "num":
        return {1.0: "one", 2.0: "two", 0.5: "half"}.get(e.value)
    if e.op == "pow":
        power = {2.0: "sq", 3.0: "cube"}.get(e.args[1].value) if e.args[1].op == "num" else None
        base = _term_words(e.args[0]) if _prec(e.args[0]) > _POW else None
        return None if power is None or base is None else f"{base}_{power}"
    if e.op == "neg":
        operand = _term_words(e.args[0]) if _prec(e.args[0]) >= _UNARY else None
        return None if operand is None else f"minus_{operand}"
    joiner = {"add": "plus", "sub": "minus", "mul": "times", "div": "over"}.get(e.op)
    if joiner is None:
        return None
    prec = _PREC[e.op]
    left, right = e.args
    if _prec(left) < prec or _prec(right) < prec + 1:  # parenthesized in the source
        return None
    words = [_term_words(left), _term_words(right)]
    return None if None in words else f"{words[0]}_{joiner}_{words[1]}"


def _term_name(e: Expr, taken: set[str]) -> str:
    """A shared term's local: ``e`` in words (:func:`_term_words`) where they are short, else
    ``<the first names it reads>_term`` (``u_term``), the names of other shared terms left out
    and one name where two would be long; numbered where taken. It reads no gradient, so it is
    never named ``grad_...``, as a double backward's :func:`inline_locals` requires of the
    backward's locals it writes out."""
    words = _term_words(e)
    if words is not None and len(words) <= 24:
        base = words
    else:
        read = [n for n in names(e) if not n.endswith("_term")] or names(e)
        base = "_".join(read[:2]) if len("_".join(read[:2])) <= 16 else read[0]
        base = f"{base}_term"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


def inline_locals(section: Mapping[str, str], locals_: Iterable[str]) -> dict[str, str]:
    """``section`` without the entries ``locals_``, each written out where it is read: a shared
    section as it was derived (what a double backward differentiates, so that the chain rule
    stays inside the ``where`` that guards a call)."""
    trees = {name: parse(text) for name, text in section.items()}
    for local in locals_:
        value = trees.pop(local)
        trees = {name: _replace(e, var(local), value) for name, e in trees.items()}
    return {name: source(e) for name, e in trees.items()}


# -- row-wise ops: reductions over the row ------------------------------------------------------

#: The reductions over the row of a rowwise forward (one argument).
REDUCTIONS = ("sum", "mean", "max", "min")
#: The backward's local holding the row length, for the gradient of a mean (another name where
#: the spec uses this one).
ROW_LENGTH = "row_length"


def _is_reduction(e: Expr) -> bool:
    return e.op == "call" and e.name in REDUCTIONS and len(e.args) == 1


def rowwise_backward_of(forward: Mapping[str, str], inputs: Sequence[str],
                        outputs: Sequence[str], per_row_inputs: Sequence[str], *,
                        reserved: Iterable[str] = ()) -> dict[str, str]:
    """:func:`backward_of` for a rowwise forward, whose expressions may reduce over the row and
    read the outputs computed above them.

    Each reduction is first made an entry of its own (``sum_out: sum(e)``). Reverse mode then
    runs over per-element and per-row values alike; where a per-element value (or a reduction's
    argument, evaluated at each element) reads a per-row one, the per-row value's gradient is the
    row's sum of those contributions. The gradient of ``sum(u)`` with respect to what ``u``
    reads is ``u``'s, of ``mean(u)`` that over the row length, of ``max(u)`` and ``min(u)``
    that where ``u`` equals the result (every tie gets it).
    """
    parsed = {name: parse(text) for name, text in forward.items()}
    taken = set(parsed) | set(inputs) | {f"grad_{n}" for n in [*inputs, *outputs]} | \
        set(reserved)
    entries: dict[str, Expr] = {}
    synthetic: dict[str, Expr] = {}

    def fresh(base: str) -> str:
        name, k = base, 1
        while name in taken:
            name, k = f"{base}{k}", k + 1
        taken.add(name)
        return name

    length = fresh(ROW_LENGTH)  # row_length1 where the spec has a row_length of its own

    def hoist(e: Expr, owner: str) -> Expr:
        if _is_reduction(e):
            name = fresh(f"{e.name}_{owner}")
            entries[name] = synthetic[name] = e
            return var(name)
        if not e.args:
            return e
        return Expr(e.op, tuple(hoist(a, owner) for a in e.args), e.name, e.value)

    for name, e in parsed.items():
        entries[name] = e if _is_reduction(e) else hoist(e, name)
    per_row = set(per_row_inputs)
    for name, e in entries.items():
        if _is_reduction(e) or all(n in per_row or n not in [*inputs, *entries]
                                   for n in names(e)):
            per_row.add(name)

    differentiable = set(inputs) | set(entries)
    incoming: dict[str, list[Expr]] = {n: [] for n in [*inputs, *entries]}
    for o in outputs:
        incoming[o] = [var(f"grad_{o}")]
    section: dict[str, Expr] = {}
    uses_length = False
    size = 0
    for name in reversed(list(entries)):
        gradient = _sum(incoming[name])
        if _is(gradient, 0):
            continue
        if gradient.op != "name":
            local = fresh(f"grad_{name}" if name not in outputs else f"grad_{name}_total")
            section[local] = gradient
            gradient = var(local)
        e = entries[name]
        if _is_reduction(e):
            u, each_element = e.args[0], True
        else:
            u, each_element = e, name not in per_row
        for read in names(u):
            if read not in differentiable:
                continue
            p = partial(u, read)
            if _is(p, 0):
                continue
            if e is not u and e.name == "mean":
                p, uses_length = div(p, var(length)), True
            elif e is not u and e.name in ("max", "min"):
                p = where(cmp(u, "==", var(name)), p, ZERO)
            term = mul(gradient, p)
            size = _counted(size, term)
            if _is(term, 0):
                continue
            if read in per_row and each_element:
                term = call("sum", term)
            incoming[read].append(term)
    for i in inputs:
        section[i] = _sum(incoming[i])
    head = dict(synthetic)
    if uses_length:
        head = {length: call("sum", ONE), **head}
    result = {**head, **{k: section[k] for k in section if k not in inputs},
              **{i: section[i] for i in inputs}}
    taken.update(names_read for e in result.values() for names_read in names(e))
    return _read_only(_shallow(result, inputs, "grad_", taken), inputs)


def _read_only(section: dict[str, str], targets: Sequence[str]) -> dict[str, str]:
    """``section`` without the locals nothing reads (a hoisted reduction only the forward
    needed)."""
    while True:
        read = set().union(*(names(parse(text)) for text in section.values()))
        unread = [k for k in section if k not in targets and k not in read]
        if not unread:
            return section
        section = {k: v for k, v in section.items() if k not in unread}

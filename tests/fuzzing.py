"""Differential fuzzing of opgen: random well-typed op specs, generated, built several to a library,
and checked against an independent numpy evaluation and against finite differences.

How it is built, and why:

* Specs are drawn by hypothesis as expression *trees* (:class:`Node`), not as text. The tree is
  printed with the fewest parentheses Python needs (so opgen's precedence handling is exercised),
  and evaluated here by :func:`evaluate`, an evaluator that shares no code with opgen's emitters.
* The backward is derived symbolically from the drawn forward by opgen's own ``backward: auto``
  (:mod:`opgen.autodiff`, through :func:`gradient`), so it is the true
  gradient: the op's backward kernel can be checked both against the derived expression and
  against central differences of the op's own forward kernel. (Drawing a backward independently
  would only allow the first check, and finite differences would then be meaningless.)
* Domain-restricted functions get arguments from their domain by construction: every number node
  carries an interval of the values it can take over the inputs' ``domain:`` and the attrs' test
  values, and an argument outside a function's domain is shifted into it (``log(e + 1.5)``).
* Tolerances come from a running error bound rather than fixed rtol/atol: :func:`evaluate`
  returns, per element, the value in float64, a first-order bound on how far a kernel
  computing in the op's math type (float or double) may be from it, and a mask of elements whose
  result is not determined at that precision (a comparison closer than its operands' error, a
  floor at an integer). A cancellation then widens the tolerance where it happens and nowhere else.
* Ops with several inputs also run inputs of different shapes that broadcast
  (:func:`broadcast_shapes`): the trees are evaluated at the broadcast shape, and the gradient of
  a stretched input is their evaluation summed to its shape, with the bound of a sum of n terms
  accumulated in the kernel's math type (:func:`summed`).
* Several ops share one compiled library: their generated ``.cc`` (and ``.cu``) files are compiled
  as one translation unit, so Paddle's headers are parsed once per library instead of once per
  op (about 13 s each on a 2-core machine). :func:`opgen.names.check_one_build` refuses ops that
  cannot share a library before anything is compiled.

Run a long campaign with ``python tests/fuzzing.py --count 300 --seed 1`` (see docs/fuzzing.md);
``tests/test_fuzz.py`` runs a small sample of the same under pytest.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import json
import math
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from opgen.expr import FUNCTIONS  # noqa: E402
from opgen.names import identifier_problem  # noqa: E402

NUM, BOOL = "num", "bool"
#: Largest magnitude a drawn number node may reach over its inputs' domains: keeps float32 and
#: float16 results finite and cancellations bounded.
CAP = 1e4
#: How far from a function's domain boundary a shifted argument stays.
MARGIN = 0.25
#: Safety factor on the running error bound.
K = 3.0
#: Errors of the math library, in ulps of the result (CUDA's single-precision functions are
#: documented within 2 ulps, powf within 4; glibc and numpy within 1 to 4).
ULPS = {"pow": 8.0, "sigmoid": 6.0, "rsqrt": 4.0}
DEFAULT_ULPS = 4.0
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11,
                 "bfloat16": 2.0**-8}



# ---- expression trees --------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    """One node of an expression tree.

    ``kind`` is one of: ``var`` (an input, attr, output or output gradient: ``name``), ``lit`` (a
    number: ``value``, written as ``text``), ``bool`` (True/False: ``value``), ``neg``, ``pos``,
    ``not`` (unary -, +, ~), ``add``, ``sub``, ``mul``, ``div``, ``pow`` (the ``**`` operator),
    ``call`` (function ``name``), ``cmp`` (comparison operators ``name``, comma-separated for a
    chain ``a < b <= c``), ``and``, ``or``. ``lo``/``hi`` bound the values of a number node over the
    test inputs (generation only); ``paren`` asks for redundant parentheses when printed.
    """

    kind: str
    args: tuple[Node, ...] = ()
    name: str = ""
    value: float = 0.0
    text: str = ""
    type: str = NUM
    lo: float = -math.inf
    hi: float = math.inf
    paren: bool = False
    integral: bool = False       # an int or int64 attr: a Python int in the numpy reference

    def structure(self) -> tuple[Any, ...]:
        """The tree without generation-only fields, to compare a printed and re-parsed tree."""
        value = self.value if self.kind in ("lit", "bool") else 0.0
        return (self.kind, self.name, value, tuple(a.structure() for a in self.args))


def _finite_interval(lo: float, hi: float) -> tuple[float, float]:
    lo = -math.inf if math.isnan(lo) else lo
    hi = math.inf if math.isnan(hi) else hi
    return lo, hi


def _corners(fn: Callable[[float, float], float], a: Node, b: Node) -> tuple[float, float]:
    values = []
    for x in (a.lo, a.hi):
        for y in (b.lo, b.hi):
            try:
                values.append(fn(x, y))
            except (OverflowError, ValueError, ZeroDivisionError):
                values.append(math.nan)
    if any(math.isnan(v) for v in values):
        return -math.inf, math.inf
    return min(values), max(values)


def _safe(fn: Callable[[float], float], x: float) -> float:
    try:
        return fn(x)
    except (OverflowError, ValueError, ZeroDivisionError):
        return math.inf if x > 0 else -math.inf


_MONOTONE = {
    "exp": math.exp, "log": math.log, "log1p": math.log1p, "expm1": math.expm1, "sqrt": math.sqrt,
    "tanh": math.tanh, "erf": math.erf, "floor": math.floor, "ceil": math.ceil,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0,
    "softplus": lambda x: max(x, 0.0) + math.log1p(math.exp(-abs(x))),
    "sign": lambda x: float((x > 0) - (x < 0)), "atan": math.atan, "log2": math.log2,
    "exp2": lambda x: 2.0 ** x, "tan": math.tan,  # tan's argument stays within (-1.25, 1.25)
}


def _interval(kind: str, name: str, args: tuple[Node, ...]) -> tuple[float, float]:
    """Bounds of a number node's values from its arguments' bounds (conservative)."""
    if kind in ("neg",):
        return -args[0].hi, -args[0].lo
    if kind == "pos":
        return args[0].lo, args[0].hi
    if kind in ("add", "sub", "mul", "div", "pow") or (kind == "call" and name == "pow"):
        a, b = args[0], args[-1]
        if kind == "add":
            return a.lo + b.lo, a.hi + b.hi
        if kind == "sub":
            return a.lo - b.hi, a.hi - b.lo
        if kind == "mul":
            if a is b:  # a square
                low = 0.0 if a.lo <= 0 <= a.hi else min(a.lo * a.lo, a.hi * a.hi)
                return low, max(a.lo * a.lo, a.hi * a.hi)
            return _corners(lambda x, y: x * y, a, b)
        if kind == "div":
            if b.lo <= 0 <= b.hi:
                return -math.inf, math.inf
            return _corners(lambda x, y: x / y, a, b)
        if a.lo > 0:
            return _corners(lambda x, y: math.exp(y * math.log(x)), a, b)
        if b.kind == "lit" and float(b.value).is_integer():  # an integer power of any base
            m = max(abs(a.lo), abs(a.hi)) ** b.value
            return (-m if b.value % 2 else 0.0), m
        return -math.inf, math.inf
    if kind == "call":
        if name in _MONOTONE:
            fn = _MONOTONE[name]
            return _safe(fn, args[0].lo), _safe(fn, args[0].hi)
        if name == "rsqrt":
            a = args[0]
            return (_safe(lambda x: x**-0.5, a.hi), _safe(lambda x: x**-0.5, a.lo)) \
                if a.lo > 0 else (-math.inf, math.inf)
        if name in ("abs", "square"):
            a = args[0]
            low = 0.0 if a.lo <= 0 <= a.hi else min(abs(a.lo), abs(a.hi))
            high = max(abs(a.lo), abs(a.hi))
            return (low, high) if name == "abs" else (low * low, high * high)
        if name == "clamp":  # non-decreasing in each argument
            x, lo, hi = args
            return min(max(x.lo, lo.lo), hi.lo), min(max(x.hi, lo.hi), hi.hi)
        if name in ("sin", "cos"):
            return -1.0, 1.0
        if name in ("min", "max"):
            pick = min if name == "min" else max
            return pick(args[0].lo, args[1].lo), pick(args[0].hi, args[1].hi)
        if name == "where":
            return min(args[1].lo, args[2].lo), max(args[1].hi, args[2].hi)
    raise AssertionError(f"no interval rule for {kind} {name}")


def make(kind: str, *args: Node, name: str = "") -> Node:
    """A node over ``args``, typed, with the interval of its values where it is a number."""
    if kind in ("cmp", "and", "or", "not"):
        return Node(kind, args, name=name, type=BOOL)
    if kind == "neg" and args[0].kind == "lit":  # -2 is read as a literal, as Python writes it
        text = args[0].text
        return lit(-args[0].value, text[1:] if text.startswith("-") else "-" + text)
    lo, hi = _finite_interval(*_interval(kind, name, args))
    return Node(kind, args, name=name, type=NUM, lo=lo, hi=hi)


def lit(value: float, text: str | None = None) -> Node:
    value = float(value) if not float(value).is_integer() or abs(value) > 2**31 else value
    shown = text if text is not None else (str(int(value)) if float(value).is_integer()
                                           and abs(value) < 2**31 else repr(float(value)))
    return Node("lit", value=float(value), text=shown, lo=float(value), hi=float(value))


def var(name: str, type_: str = NUM, lo: float = -math.inf, hi: float = math.inf) -> Node:
    return Node("var", name=name, type=type_, lo=lo, hi=hi)




# ---- printing: Python syntax with the fewest parentheses ----------------------------------------

_CMP, _BOR, _BAND, _ADD, _MUL, _UNARY, _POW, _ATOM = 3, 4, 5, 6, 7, 8, 9, 10
_PREC = {"or": _BOR, "and": _BAND, "cmp": _CMP, "add": _ADD, "sub": _ADD, "mul": _MUL,
         "div": _MUL, "neg": _UNARY, "pos": _UNARY, "not": _UNARY, "pow": _POW}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "and": "&", "or": "|",
           "neg": "-", "pos": "+", "not": "~"}


def _prec(node: Node) -> int:
    if node.paren:
        return _ATOM
    if node.kind == "lit":
        return _UNARY if node.text.startswith("-") else _ATOM
    return _PREC.get(node.kind, _ATOM)


def source(node: Node) -> str:
    """``node`` as spec expression text (Python syntax)."""
    text = _source(node)
    return f"({text})" if node.paren else text


def _operand(node: Node, needed: int) -> str:
    text = source(node)
    return text if _prec(node) >= needed else f"({text})"


def _source(node: Node) -> str:
    kind = node.kind
    if kind == "var":
        return node.name
    if kind == "lit":
        return node.text
    if kind == "bool":
        return "True" if node.value else "False"
    if kind in ("neg", "pos", "not"):
        return _SYMBOL[kind] + _operand(node.args[0], _UNARY)
    if kind == "pow":  # right-associative, and its exponent may be a unary minus: 2 ** -x
        return f"{_operand(node.args[0], _POW + 1)} ** {_operand(node.args[1], _UNARY)}"
    if kind in _SYMBOL:
        prec = _PREC[kind]
        return f"{_operand(node.args[0], prec)} {_SYMBOL[kind]} {_operand(node.args[1], prec + 1)}"
    if kind == "cmp":
        parts = [_operand(node.args[0], _BOR)]
        for op, arg in zip(node.name.split(","), node.args[1:], strict=True):
            parts.append(f"{op} {_operand(arg, _BOR)}")
        return " ".join(parts)
    if kind == "call":
        return f"{node.name}({', '.join(source(a) for a in node.args)})"
    raise AssertionError(kind)


_AST_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
               ast.BitAnd: "and", ast.BitOr: "or"}
_AST_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
               ast.NotEq: "!="}


def parse(text: str, types: dict[str, str]) -> Node:
    """A spec expression as a tree, the way Python reads it (``types``: name -> num or bool).

    Used to check that :func:`source` prints what was drawn, and to evaluate a spec that exists
    only as YAML (``python tests/fuzzing.py check SPEC``).
    """
    def visit(n: ast.AST) -> Node:
        if isinstance(n, ast.Constant):
            if isinstance(n.value, bool):
                return Node("bool", value=float(n.value), type=BOOL)
            return lit(n.value, repr(n.value))
        if isinstance(n, ast.Name):
            return var(n.id, types[n.id])
        if isinstance(n, ast.UnaryOp):
            operand = visit(n.operand)
            if isinstance(n.op, ast.USub) and operand.kind == "lit" and \
                    not operand.text.startswith("-"):
                return lit(-operand.value, "-" + operand.text)
            kind = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "not"}[type(n.op)]
            return make(kind, operand)
        if isinstance(n, ast.BinOp):
            return make(_AST_BINOPS[type(n.op)], visit(n.left), visit(n.right))
        if isinstance(n, ast.Compare):
            ops = ",".join(_AST_CMPOPS[type(o)] for o in n.ops)
            return make("cmp", visit(n.left), *(visit(c) for c in n.comparators), name=ops)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            args = tuple(visit(a) for a in n.args)
            if n.func.id == "where":
                return make("call", *args, name="where")
            return make("call", *args, name=n.func.id)
        raise ValueError(f"not in the expression language: {ast.dump(n)}")

    return visit(ast.parse(" ".join(text.split()), mode="eval").body)


# ---- symbolic derivatives ------------------------------------------------------------------------

def gradient(forward: dict[str, Node], wrt: str, *, read_outputs: bool) -> Node:
    """The backward expression of input ``wrt``: what opgen's ``backward: auto`` derives (sum over
    outputs o of grad_o * d o / d wrt, with Paddle's conventions at kinks), as a tree.

    With ``read_outputs``, every subtree that is a whole output's forward expression is read as
    that output instead, as a hand-written backward may (``1 - out * out`` for tanh).
    """
    from opgen.autodiff import backward_of

    types = {f"grad_{o}": NUM for o in forward}
    for tree in forward.values():
        _collect_types(tree, types)
    texts = {o: source(tree) for o, tree in forward.items()}
    derived = parse(backward_of(texts, [wrt], list(forward))[wrt], types)
    if not read_outputs:
        return derived
    outputs = {tree.structure(): name for name, tree in forward.items()
               if tree.kind not in ("var", "lit")}
    return _reading_outputs(derived, outputs)


def _collect_types(node: Node, types: dict[str, str]) -> None:
    if node.kind == "var":
        types[node.name] = node.type
    for a in node.args:
        _collect_types(a, types)


def _reading_outputs(node: Node, outputs: dict[tuple[Any, ...], str]) -> Node:
    name = outputs.get(node.structure())
    if name is not None:
        return var(name, NUM, node.lo, node.hi)
    if not node.args:
        return node
    args = tuple(_reading_outputs(a, outputs) for a in node.args)
    return dataclasses.replace(node, args=args)


# ---- evaluation with a running error bound -------------------------------------------------------

@dataclass
class Val:
    """A number per element: exact value ``v``, error bound ``e`` of a kernel, undecided mask."""

    v: np.ndarray
    e: np.ndarray
    amb: np.ndarray


@dataclass
class Cond:
    """A condition per element, and where a kernel may decide it the other way."""

    b: np.ndarray
    amb: np.ndarray


@dataclass(frozen=True)
class Arith:
    """The arithmetic of a kernel: the op's dtype and its math type (float, or double)."""

    dtype: str

    @property
    def mt(self) -> type[np.floating[Any]]:
        return np.float64 if self.dtype == "float64" else np.float32

    @property
    def u(self) -> float:
        return UNIT_ROUNDOFF["float64" if self.dtype == "float64" else "float32"]

    @property
    def u_out(self) -> float:
        return UNIT_ROUNDOFF[self.dtype]

    @property
    def tiny(self) -> float:
        """Absolute error an operation may add near underflow (flushed or gradual)."""
        return float(np.finfo(self.mt).tiny)

    @property
    def tiny_out(self) -> float:
        """Spacing of the dtype's subnormals: the rounding of a result near zero."""
        return 2.0**-133 if self.dtype == "bfloat16" else \
            float(np.finfo(np.dtype(self.dtype)).smallest_subnormal)

    def rounding(self, value: float) -> float:
        """How far ``value`` moves when the kernel holds it in its math type."""
        return abs(float(self.mt(value)) - value)


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x: np.ndarray) -> np.ndarray:
    return _ERF(x) if x.size else np.zeros_like(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# name -> (function, derivative)
_FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray],
                            Callable[[np.ndarray], np.ndarray]]] = {
    "abs": (np.abs, lambda a: np.ones_like(a)),
    "exp": (np.exp, np.exp),
    "log": (np.log, lambda a: 1.0 / a),
    "log1p": (np.log1p, lambda a: 1.0 / (1.0 + a)),
    "expm1": (np.expm1, np.exp),
    "sqrt": (np.sqrt, lambda a: 0.5 / np.sqrt(a)),
    "rsqrt": (lambda a: 1.0 / np.sqrt(a), lambda a: 0.5 * np.abs(a) ** -1.5),
    "tanh": (np.tanh, lambda a: 1.0 - np.tanh(a) ** 2),
    "sigmoid": (_sigmoid, lambda a: _sigmoid(a) * (1.0 - _sigmoid(a))),
    "erf": (_erf, lambda a: 2.0 / math.sqrt(math.pi) * np.exp(-a * a)),
    "sin": (np.sin, lambda a: np.ones_like(a)),
    "cos": (np.cos, lambda a: np.ones_like(a)),
    "floor": (np.floor, np.zeros_like),
    "ceil": (np.ceil, np.zeros_like),
    "sign": (np.sign, np.zeros_like),
    "softplus": (lambda a: np.logaddexp(0.0, a), _sigmoid),
    "square": (np.square, lambda a: 2.0 * np.abs(a)),
    "tan": (np.tan, lambda a: 1.0 + np.tan(a) ** 2),
    "atan": (np.arctan, lambda a: 1.0 / (1.0 + a * a)),
    "log2": (np.log2, lambda a: 1.0 / (a * math.log(2.0))),
    "exp2": (np.exp2, lambda a: np.exp2(a) * math.log(2.0)),
}
_EXACT = {"abs", "floor", "ceil", "sign"}
#: Functions whose value jumps: undecided where the argument's error reaches a jump.
_STEPS = {"floor", "ceil", "sign"}
# Where a function's argument must stay for the function to be defined (exclusive lower bound).
_DOMAIN_LOW = {"log": 0.0, "sqrt": 0.0, "rsqrt": 0.0, "log1p": -1.0, "log2": 0.0}


def evaluate(node: Node, env: dict[str, Val | Cond], ar: Arith, shape: tuple[int, ...]
             ) -> Val | Cond:
    """``node`` over the values of ``env``: exactly (float64) and with the error bound of a kernel
    computing in ``ar``'s math type. See the module docstring."""
    with np.errstate(all="ignore"):
        return _evaluate(node, env, ar, shape)


def _evaluate(node: Node, env: dict[str, Val | Cond], ar: Arith, shape: tuple[int, ...]
              ) -> Val | Cond:
    kind, name = node.kind, node.name
    if kind == "var":
        return env[name]
    if kind == "lit":
        return Val(np.full(shape, node.value), np.full(shape, ar.rounding(node.value)),
                   np.zeros(shape, bool))
    if kind == "bool":
        return Cond(np.full(shape, bool(node.value)), np.zeros(shape, bool))
    args = [_evaluate(a, env, ar, shape) for a in node.args]
    if kind in ("and", "or", "not"):
        conds = [a for a in args if isinstance(a, Cond)]
        amb = np.logical_or.reduce([c.amb for c in conds])
        if kind == "not":
            return Cond(~conds[0].b, amb)
        fn = np.logical_and if kind == "and" else np.logical_or
        return Cond(fn(conds[0].b, conds[1].b), amb)
    if kind == "cmp":
        nums = [a for a in args if isinstance(a, Val)]
        b = np.ones(shape, bool)
        amb = np.logical_or.reduce([n.amb for n in nums])
        for op, lhs, rhs in zip(name.split(","), nums, nums[1:], strict=False):
            b &= _COMPARE[op](lhs.v, rhs.v)
            slack = lhs.e + rhs.e
            amb |= (np.abs(lhs.v - rhs.v) <= K * slack) & (slack > 0)
        return Cond(b, amb)
    if kind == "call" and name == "where":
        c, x, y = args
        assert isinstance(c, Cond) and isinstance(x, Val) and isinstance(y, Val)
        return Val(np.where(c.b, x.v, y.v), np.where(c.b, x.e, y.e),
                   c.amb | np.where(c.b, x.amb, y.amb))
    nums = [a for a in args if isinstance(a, Val)]
    amb = np.logical_or.reduce([n.amb for n in nums])
    u = ar.u
    if kind in ("neg", "pos"):
        a = nums[0]
        return Val(-a.v if kind == "neg" else a.v, a.e, amb)
    if kind in ("add", "sub", "mul", "div"):
        a, b = nums
        if kind == "add":
            v, e = a.v + b.v, a.e + b.e
        elif kind == "sub":
            v, e = a.v - b.v, a.e + b.e
        elif kind == "mul":
            v, e = a.v * b.v, np.abs(a.v) * b.e + np.abs(b.v) * a.e + a.e * b.e
        else:
            v = a.v / b.v
            room = np.abs(b.v) - b.e
            amb = amb | (room <= 0.5 * np.abs(b.v))
            e = (a.e + np.abs(v) * b.e) / np.maximum(room, 1e-300)
        return _finish(v, e + u * np.abs(v), amb, ar.tiny)
    if kind == "pow" or name == "pow":
        a, b = nums
        v = np.power(a.v, b.v)
        de_da = np.abs(b.v * np.power(np.abs(a.v) + a.e, b.v - 1)) + \
            np.abs(b.v * np.power(np.abs(a.v), b.v - 1))
        de_db = np.where(b.e > 0, np.abs(v * np.log(np.abs(a.v))), 0.0) * 2
        e = de_da * a.e + de_db * b.e * np.exp(np.abs(np.log(np.abs(a.v))) * b.e)
        return _finish(v, e + ULPS["pow"] * 2 * u * np.abs(v), amb, ar.tiny)
    if name in ("min", "max"):
        a, b = nums
        v = np.minimum(a.v, b.v) if name == "min" else np.maximum(a.v, b.v)
        return _finish(v, np.maximum(a.e, b.e), amb, ar.tiny)
    if name == "clamp":
        x, lo, hi = nums
        return _finish(np.clip(x.v, lo.v, hi.v), np.maximum.reduce([x.e, lo.e, hi.e]), amb,
                       ar.tiny)
    fn, deriv = _FUNCTIONS[name]
    a = nums[0]
    if name in _DOMAIN_LOW:
        amb = amb | (a.v - a.e <= _DOMAIN_LOW[name])
    v = fn(a.v)
    if name in _STEPS:
        amb = amb | ((fn(a.v - a.e) != fn(a.v + a.e)) & (a.e > 0))
        return _finish(v, np.zeros(shape), amb, ar.tiny)
    slope = np.maximum.reduce([np.abs(deriv(a.v - a.e)), np.abs(deriv(a.v)),
                               np.abs(deriv(a.v + a.e))])
    e = slope * a.e
    if name not in _EXACT:
        e = e + ULPS.get(name, DEFAULT_ULPS) * 2 * u * np.abs(v)
    return _finish(v, e, amb, ar.tiny)


def _finish(v: np.ndarray, e: np.ndarray, amb: np.ndarray, tiny: float) -> Val:
    bad = ~np.isfinite(v) | ~np.isfinite(e)
    return Val(v, np.where(bad, np.inf, e + tiny), amb | bad)


_COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal,
}


# ---- the drawn op --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sym:
    """An input or attr of a drawn op, with the values the tests give it."""

    name: str
    role: str                    # "input" or "attr"
    type: str                    # inputs: "input"; attrs: bool, int, int64, float, str
    lo: float = -math.inf        # inputs: the domain; attrs: hull of default and other
    hi: float = math.inf
    default: Any = None
    other: Any = None
    explicit_domain: bool = True

    @property
    def expr_type(self) -> str:
        return BOOL if self.type == "bool" else NUM

    def kernel_value(self, value: Any, dtype: str) -> float:
        """What a ``dtype`` kernel's math sees for attr value ``value``: float attrs are exact in
        float64 kernels and rounded to float in the others (int attrs: see Arith.rounding)."""
        if self.type == "float" and dtype != "float64":
            return float(np.float32(value))
        return float(value)


@dataclass(frozen=True)
class FuzzOp:
    """One drawn op: its symbols, forward trees, derived backward trees and how it is written."""

    seed: int
    index: int
    name: str
    op_name: str | None
    inputs: tuple[Sym, ...]
    attrs: tuple[Sym, ...]
    outputs: tuple[str, ...]
    forward: tuple[Node, ...]
    backward: tuple[Node, ...]
    dtypes: tuple[str, ...]
    styles: tuple[str, ...]      # YAML style of each expression: forward then backward
    focus: str
    summary: str = ""            # the spec's summary: often with quotes, backslashes, `*/`, ...
    spec_file: str = ""          # the spec's file name (default <name>.yaml): the same
    stub_backward: bool = False  # the spec has no `backward:`: the op gets the backward stub
    auto_backward: bool = False  # the spec says `backward: auto` (what opgen derives from it)

    @property
    def spec_name(self) -> str:
        return self.spec_file or f"{self.name}.yaml"

    @property
    def types(self) -> dict[str, str]:
        """name -> num or bool, of every name a backward expression may read."""
        types = {s.name: s.expr_type for s in self.inputs + self.attrs}
        types.update({o: NUM for o in self.outputs})
        types.update({f"grad_{o}": NUM for o in self.outputs})
        return types

    @property
    def forward_text(self) -> dict[str, str]:
        return {o: source(t) for o, t in zip(self.outputs, self.forward, strict=True)}

    @property
    def backward_text(self) -> dict[str, str]:
        return {s.name: source(t) for s, t in zip(self.inputs, self.backward, strict=True)}

    def yaml(self) -> str:
        """The op's spec, as a user would write it."""
        written = f"; written to {self.spec_file!r}" if self.spec_file else ""
        lines = [f"# Drawn by tests/fuzzing.py: seed {self.seed}, index {self.index}, "
                 f"focus {self.focus}{written}.",
                 f"name: {self.name}"]
        if self.op_name is not None:
            lines.append(f"op_name: {self.op_name}")
        summary = self.summary or f"fuzzed op {self.index} of seed {self.seed}"
        lines += ["kind: elementwise",
                  f"summary: {json.dumps(summary, ensure_ascii=False)}",
                  f"inputs: [{', '.join(s.name for s in self.inputs)}]",
                  f"outputs: [{', '.join(self.outputs)}]"]
        if self.attrs:
            lines.append("attrs:")
            for a in self.attrs:
                lines.append(f"  {a.name}: {{type: {a.type}, default: {_yaml_value(a.default)}}}")
        lines.append(f"dtypes: [{', '.join(self.dtypes)}]")
        explicit = [s for s in self.inputs if s.explicit_domain]
        if explicit:
            lines.append("domain:")
            lines += [f"  {s.name}: [{s.lo!r}, {s.hi!r}]" for s in explicit]
        styles = iter(self.styles)
        for section, texts in (("forward", self.forward_text), ("backward", self.backward_text)):
            if section == "backward" and self.stub_backward:
                break
            if section == "backward" and self.auto_backward:
                lines.append("backward: auto")
                break
            lines.append(f"{section}:")
            for target, text in texts.items():
                lines += _yaml_entry(target, text, next(styles))
        return "\n".join(lines) + "\n"


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _yaml_entry(key: str, text: str, style: str) -> list[str]:
    """``key: text`` in one of YAML's scalar styles; a plain scalar only where it reads back."""
    import yaml

    if style == "plain":
        try:
            if yaml.safe_load(f"{key}: {text}") == {key: text}:
                return [f"  {key}: {text}"]
        except yaml.YAMLError:
            pass
        style = "double"
    if style == "single":
        return [f"  {key}: '{text}'"]
    if style in ("folded", "literal"):
        wrapped = textwrap.wrap(text, width=40, break_long_words=False, break_on_hyphens=False)
        return [f"  {key}: {'>-' if style == 'folded' else '|-'}"] + [f"    {w}" for w in wrapped]
    return [f"  {key}: {json.dumps(text)}"]


# ---- strategies ----------------------------------------------------------------------------------

UNARY = ("abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin",
         "cos", "floor", "ceil", "softplus", "square", "sign", "tan", "atan", "log2", "exp2")
#: What each drawn op is built around, in turn, so that any len(FOCUS) consecutive ops cover the
#: language.
FOCUS: tuple[str, ...] = tuple(sorted(FUNCTIONS)) + (
    "**", "/", "-", "+", "*", "neg", "cmp", "chain", "&", "|", "~")
assert set(UNARY) | {"min", "max", "where", "pow", "clamp"} == set(FUNCTIONS), \
    "a function is not drawn"

PLAIN_NAMES = ("x", "y", "z", "a", "b", "c", "t", "u", "v", "w", "p", "q", "alpha", "beta",
               "scale", "bias", "gamma", "eps", "lo", "hi", "k", "n", "m")
#: Names that mean something to the generated code's languages or to its tests' locals: the
#: generated C++ and Python must keep working with them (if opgen accepts them at all).
TRICKY_NAMES = (
    "x_np", "x_base", "out_np", "grad", "grads", "inputs", "outputs_np", "want", "name", "index",
    "smooth", "numeric", "view", "cut", "blocks", "arrays", "value", "data", "result", "args",
    "kernel", "op", "in0", "out0", "results", "f", "g", "o", "i", "zip", "list", "tuple", "str",
    "isinstance", "enumerate", "type", "id", "object", "errno", "major", "minor", "offsetof",
    "st_atime", "unix", "linux", "signal", "abort", "exit", "forward", "backward", "apply",
    "launch", "loop", "functor", "kin", "kout", "typename", "dtypes", "elementwise", "cuda", "cpu",
    "importlib", "annotations", "path",
)
OUTPUT_NAMES = ("out", "y", "out2", "res", "mean", "grad_in", "result", "o2", "z")


def _usable(name: str, what: str) -> bool:
    return identifier_problem(name, what=what) is None


@st.composite
def names(draw: st.DrawFn, what: str, taken: set[str], pool: Sequence[str] = PLAIN_NAMES) -> str:
    """A fresh name for an input, output or attr: usually plain, sometimes tricky."""
    for _ in range(20):
        source_pool = draw(st.sampled_from([pool, pool, pool, TRICKY_NAMES]))
        name = draw(st.sampled_from(source_pool))
        if draw(st.integers(0, 9)) == 0:
            name = draw(st.from_regex(r"[a-z][a-z0-9_]{0,5}[a-z0-9]", fullmatch=True))
        if name not in taken and _usable(name, what):
            taken.add(name)
            return name
    # fall back to a plain, numbered name
    i = 0
    while f"{what[0]}{i}" in taken:
        i += 1
    taken.add(f"{what[0]}{i}")
    return f"{what[0]}{i}"


_DOMAINS = ((-3.0, 3.0), (-1.0, 1.0), (0.5, 4.0), (-10.0, 10.0), (-0.5, 2.5), (1.0, 2.0),
            (-5.0, -1.0), (0.0, 1.0), (-2.0, 6.0))


@st.composite
def input_syms(draw: st.DrawFn, taken: set[str]) -> tuple[Sym, ...]:
    count = draw(st.integers(1, 3))
    syms = []
    for _ in range(count):
        name = draw(names("input", taken))
        lo, hi = draw(st.sampled_from(_DOMAINS))
        explicit = (lo, hi) != (-3.0, 3.0) or draw(st.booleans())
        syms.append(Sym(name, "input", "input", lo, hi, explicit_domain=explicit))
        if draw(st.integers(0, 5)) == 0:  # a pair such as x and x_np: the tests' locals
            suffixed = f"{name}_{draw(st.sampled_from(['np', 'base']))}"
            if count + len(syms) <= 4 and suffixed not in taken and _usable(suffixed, "input"):
                taken.add(suffixed)
                syms.append(Sym(suffixed, "input", "input", lo, hi))
    return tuple(syms[:3])


@st.composite
def float_attr_values(draw: st.DrawFn) -> float:
    """A float attr value: a multiple of 1/8 (exact in float32) or a short decimal (not)."""
    if draw(st.booleans()):
        return round(draw(st.floats(-4, 4)), 2)
    return draw(st.integers(-32, 32)) / 8


@st.composite
def attr_syms(draw: st.DrawFn, taken: set[str], want_bool: bool) -> tuple[Sym, ...]:
    """0 to 2 attrs of each of bool, int, int64 and float, and sometimes an (unused) str attr."""
    syms: list[Sym] = []
    for type_ in ("bool", "int", "int64", "float"):
        count = draw(st.sampled_from([0, 0, 1, 1, 2]))
        if type_ == "bool" and want_bool:
            count = max(count, 1)
        for _ in range(count):
            name = draw(names("attr", taken))
            if type_ == "bool":
                default, other = draw(st.booleans()), draw(st.booleans())
            elif type_ == "int":
                default, other = draw(st.integers(-3, 6)), draw(st.integers(-3, 6))
            elif type_ == "int64":
                big = draw(st.sampled_from([0, 0, 0, 2**31 + 7, -(2**33) - 1]))
                default, other = draw(st.integers(-3, 6)) + big, draw(st.integers(-3, 6))
            else:
                default, other = draw(float_attr_values()), draw(float_attr_values())
            # The op must be defined at every value a test runs: ours and the generated tests'.
            values = [float(default), float(other), float(_generated_other(type_, default))]
            syms.append(Sym(name, "attr", type_, min(values), max(values), default, other))
    if draw(st.integers(0, 4)) == 0:
        name = draw(names("attr", taken))
        syms.append(Sym(name, "attr", "str", default="mode a", other="mode: 'b' \"c\""))
    return tuple(syms)


def _generated_other(type_: str, default: Any) -> Any:
    """The attr value the generated tests run besides the default (opgen.codegen decides)."""
    from opgen.codegen import other_value
    from opgen.spec import AttrSpec

    return other_value(AttrSpec(type=type_, default=default))


@dataclass(frozen=True)
class Scope:
    inputs: tuple[Sym, ...]
    attrs: tuple[Sym, ...]

    @property
    def num_attrs(self) -> list[Sym]:
        return [a for a in self.attrs if a.type in ("int", "int64", "float")]

    @property
    def bool_attrs(self) -> list[Sym]:
        return [a for a in self.attrs if a.type == "bool"]


def _within(node: Node) -> bool:
    return node.lo >= -CAP and node.hi <= CAP


@st.composite
def literals(draw: st.DrawFn, near: tuple[float, float] | None = None) -> Node:
    """A number literal in one of Python's spellings; ``near``: inside that interval."""
    if near is not None and math.isfinite(near[0]) and math.isfinite(near[1]) and \
            near[0] < near[1]:
        value = round(draw(st.floats(near[0], near[1])), draw(st.sampled_from([0, 1, 2])))
        if draw(st.integers(0, 3)) == 0 and near[0] <= round(value) <= near[1]:
            value = float(round(value))
    else:
        value = draw(st.sampled_from([0, 1, 2, 3, 0.5, 0.25, 1.5, 2.5, 0.1, 0.37, 1e-3, 10,
                                      -1, -2, -0.5, 4, 7]))
    value = float(value)
    if value.is_integer() and abs(value) < 1e6:
        forms = [str(int(value)), f"{value:.1f}", f"{int(value)}."]
    else:
        forms = [repr(value), f"{value:e}", f"{value:E}"]
        if 0 < abs(value) < 1 and repr(value).startswith(("0.", "-0.")):
            forms.append(repr(value).replace("0.", ".", 1))
    text = draw(st.sampled_from(forms))
    if float(text) != value:
        text = repr(value)
    return lit(value, text)


@st.composite
def num_leaves(draw: st.DrawFn, scope: Scope) -> Node:
    choices = ["input"] * 4 + ["attr"] * (2 if scope.num_attrs else 0) + ["lit"]
    choice = draw(st.sampled_from(choices))
    if choice == "input":
        s = draw(st.sampled_from(scope.inputs))
    elif choice == "attr":
        s = draw(st.sampled_from(scope.num_attrs))
    else:
        return draw(literals())
    return dataclasses.replace(var(s.name, NUM, s.lo, s.hi), integral=s.type in ("int", "int64"))


def _nice_at_least(x: float) -> float:
    """The smallest multiple of 1/4 (of 1 past 1000) that is at least ``x``: exact in float."""
    step = 0.25 if x < 1000 else 1.0
    return math.ceil(x / step) * step


@st.composite
def above(draw: st.DrawFn, node: Node, bound: float) -> Node:
    """``node`` moved above ``bound`` (by at least MARGIN) where its interval reaches below."""
    if node.lo >= bound + MARGIN and draw(st.integers(0, 2)) > 0:
        return node
    style = draw(st.sampled_from(["shift", "abs", "square", "exp"]))
    if style == "exp" and node.lo >= -5 and node.hi <= 5 and bound <= 0:
        base = make("call", node, name="exp")  # > 0.0067: log, sqrt and 1/x stay moderate
        if base.lo >= bound + 0.005:
            return base
    if style == "abs":
        base = make("call", node, name="abs")
    elif style == "square" and max(abs(node.lo), abs(node.hi)) <= 50:
        base = make("mul", node, node)
    else:
        base = node
    shift = _nice_at_least(bound + MARGIN - base.lo)
    if shift <= 0:
        return base
    return make("add", base, lit(shift))


@st.composite
def away_from_zero(draw: st.DrawFn, node: Node) -> Node:
    positive = draw(above(node, 0.0))
    return make("neg", positive) if draw(st.booleans()) else positive


@st.composite
def bounded(draw: st.DrawFn, node: Node, lo: float, hi: float) -> Node:
    """``node`` squashed into [lo, hi] (for exp's argument) where it may leave it."""
    if lo <= node.lo and node.hi <= hi:
        return node
    squash = draw(st.sampled_from(["tanh", "sin", "cos", "sigmoid"]))
    return make("call", node, name=squash)


_NUM_KINDS = ("neg", "add", "sub", "mul", "div", "pow", "**", "ipow", "unary", "min", "max",
              "where", "pos", "clamp")


@st.composite
def num_exprs(draw: st.DrawFn, scope: Scope, depth: int, focus: str | None = None) -> Node:
    """A number expression tree at most ``depth`` deep whose values stay within +-CAP."""
    if focus is None and (depth <= 0 or draw(st.integers(0, 4)) == 0):
        return draw(num_leaves(scope))
    for _ in range(4):
        node = draw(_num_node(scope, max(depth, 1), focus))
        if _within(node):
            return _maybe_paren(draw, node)
    return draw(num_leaves(scope))


def _maybe_paren(draw: st.DrawFn, node: Node) -> Node:
    if node.kind not in ("var", "lit") and draw(st.integers(0, 9)) == 0:
        return dataclasses.replace(node, paren=True)
    return node


@st.composite
def _num_node(draw: st.DrawFn, scope: Scope, depth: int, focus: str | None) -> Node:
    kinds = {"**": "**", "/": "div", "-": "sub", "+": "add", "*": "mul", "neg": "neg",
             "pow": "pow", "min": "min", "max": "max", "where": "where", "clamp": "clamp",
             "cmp": "where", "chain": "where", "&": "where", "|": "where", "~": "where"}
    if focus in UNARY:
        kind, fn = "unary", focus
    elif focus is not None:
        kind, fn = kinds[focus], ""
    else:
        kind = draw(st.sampled_from(_NUM_KINDS))
        fn = draw(st.sampled_from(UNARY))

    def sub() -> Node:
        return draw(num_exprs(scope, depth - 1))

    if kind in ("neg", "pos"):
        return make(kind, sub())
    if kind in ("add", "sub", "mul", "min", "max"):
        a = sub()
        b = draw(literals(near=(a.lo, a.hi))) if kind in ("min", "max") and \
            draw(st.booleans()) else sub()
        if kind in ("min", "max"):
            return make("call", a, b, name=kind)
        return make(kind, a, b)
    if kind == "div":
        return make("div", sub(), draw(away_from_zero(sub())))
    if kind == "clamp":  # bounds near the argument's values, usually in order, sometimes not
        a = sub()
        bounds = [draw(literals(near=(a.lo, a.hi))) if draw(st.integers(0, 2)) else sub()
                  for _ in range(2)]
        if draw(st.integers(0, 4)) and bounds[0].lo > bounds[1].hi:
            bounds.reverse()
        return make("call", a, *bounds, name="clamp")
    if kind in ("pow", "**"):
        base = draw(above(sub(), 0.0))
        exponent = sub() if draw(st.booleans()) else draw(literals())
        reach = max(abs(exponent.lo), abs(exponent.hi)) * \
            max(abs(math.log(base.lo)), abs(math.log(max(base.hi, base.lo))))
        if not reach <= 8:
            exponent = lit(draw(st.sampled_from([0.5, 2, 1.5, -1, 3, -0.5])))
            reach = abs(exponent.value) * max(abs(math.log(base.lo)), abs(math.log(base.hi)))
            if not reach <= 8:
                exponent = lit(1)
        return make("pow", base, exponent) if kind == "**" else \
            make("call", base, exponent, name="pow")
    if kind == "ipow":
        base = sub()
        exponent = lit(draw(st.sampled_from([2, 3])))
        return make("pow", base, exponent) if draw(st.booleans()) else \
            make("call", base, exponent, name="pow")
    if kind == "where":
        bool_focus = focus if focus in ("cmp", "chain", "&", "|", "~") else None
        cond = draw(bool_exprs(scope, depth - 1, focus=bool_focus))
        return make("call", cond, sub(), sub(), name="where")
    # a unary function, its argument inside the function's domain
    arg = sub()
    if fn in ("log", "sqrt", "rsqrt", "log2"):
        arg = draw(above(arg, 0.0))
    elif fn == "log1p":
        arg = draw(above(arg, -1.0))
    elif fn in ("exp", "expm1", "exp2"):
        arg = draw(bounded(arg, -20.0, 8.0))
    elif fn == "tan":  # away from its poles at +-pi/2
        arg = draw(bounded(arg, -1.25, 1.25))
    return make("call", arg, name=fn)


@st.composite
def bool_exprs(draw: st.DrawFn, scope: Scope, depth: int, focus: str | None = None) -> Node:
    """A condition: comparisons (sometimes chained), bool attrs, True/False, & | ~ of those."""
    if focus is None:
        options = ["cmp"] * 5 + ["attr"] * (2 if scope.bool_attrs else 0) + ["literal"]
        if depth > 0:
            options += ["&", "|", "~"]
        choice = draw(st.sampled_from(options))
    else:
        choice = focus
    if choice == "attr":
        s = draw(st.sampled_from(scope.bool_attrs))
        return var(s.name, BOOL)
    if choice == "literal":
        return Node("bool", value=float(draw(st.booleans())), type=BOOL)
    if choice in ("&", "|"):
        a = draw(bool_exprs(scope, depth - 1))
        b = draw(bool_exprs(scope, depth - 1))
        return _maybe_paren(draw, make("and" if choice == "&" else "or", a, b))
    if choice == "~":
        return make("not", draw(bool_exprs(scope, depth - 1)))
    operands = [draw(num_exprs(scope, depth - 1))]
    count = 3 if choice == "chain" or draw(st.integers(0, 7)) == 0 else 2
    for _ in range(count - 1):
        if draw(st.integers(0, 2)) > 0:
            last = operands[-1]
            operands.append(draw(literals(near=(last.lo, last.hi))))
        else:
            operands.append(draw(num_exprs(scope, depth - 1)))
    ops = [draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!=", "<", ">"]))
           for _ in range(count - 1)]
    return make("cmp", *operands, name=",".join(ops))


_STYLES = ("plain", "plain", "plain", "double", "single", "folded", "literal")
#: Text that has broken generated files: quotes and triple quotes, backslashes and Python's
#: escapes, C comment ends, Jinja's delimiters, markdown, and unicode.
TRICKY_TEXT = ('"', "'", '"""', "'" * 3, "\\", "\\u", "\\N{", "\\x", "*/", "/*", "//", "{{", "}}",
               "{%", "%}", "{#", "#", "`", "```", "|", "[", "](", "<!--", "<b>", "&amp;", "*",
               "_", "~", "??=", "%s", "$(", ";", "é", "✓", "🙂", " ")


def _printable_text(max_size: int, extra: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """Printable unicode, mixed with the fragments of :data:`TRICKY_TEXT` (and ``extra``)."""
    pieces = st.one_of(st.sampled_from(TRICKY_TEXT + extra),
                       st.text(st.characters(codec="utf-8", categories=("L", "M", "N", "P", "S")),
                               min_size=1, max_size=8))
    return st.lists(pieces, max_size=12).map("".join).map(lambda t: t[:max_size])


@st.composite
def summaries(draw: st.DrawFn) -> str:
    """A summary opgen accepts: one printable line of up to 200 characters, sometimes ending in
    a backslash or a quote."""
    text = draw(_printable_text(190)).strip() + draw(st.sampled_from(["", "", "\\", '"']))
    assert text.isprintable() and len(text) <= 200, text
    return text


@st.composite
def spec_files(draw: st.DrawFn) -> str:
    """A spec file name as a filesystem allows it: anything but '/' and NUL, line breaks and
    tabs included, ending in .yaml; at most about 200 bytes in UTF-8."""
    stem = draw(_printable_text(40, extra=("\n", "\t"))).replace("/", "_")
    return stem.strip(".") + ".yaml"



@st.composite
def fuzz_ops(draw: st.DrawFn, *, seed: int = 0, index: int = 0, focus: str | None = None,
             dtypes: tuple[str, ...] = ("float32", "float64")) -> FuzzOp:
    """One random, well-typed op spec: 1 to 3 inputs, attrs of every type, 1 or 2 outputs,
    forward trees over the whole language and their derived backward."""
    # Hypothesis makes each example of a run differ from the ones before at its first choice,
    # which would bias whatever is drawn first; this draw takes that role.
    draw(st.integers(0, 2**30))
    focus = focus if focus is not None else draw(st.sampled_from(FOCUS))
    taken: set[str] = set()
    inputs = draw(input_syms(taken))
    attrs = draw(attr_syms(taken, want_bool=focus in ("where", "~")))
    outputs = [draw(names("output", taken, OUTPUT_NAMES))
               for _ in range(draw(st.sampled_from([1, 1, 1, 2])))]
    if len(outputs) == 1 and draw(st.integers(0, 5)) == 0:  # out and out_np: the tests' locals
        suffixed = f"{outputs[0]}_np"
        if suffixed not in taken and _usable(suffixed, "output"):
            outputs.append(suffixed)
    scope = Scope(inputs, attrs)
    forward = [draw(num_exprs(scope, draw(st.integers(2, 4)), focus=focus if i == 0 else None))
               for i in range(len(outputs))]
    read_outputs = draw(st.booleans())
    by_output = dict(zip(outputs, forward, strict=True))
    backward = [gradient(by_output, s.name, read_outputs=read_outputs) for s in inputs]
    styles = tuple(draw(st.sampled_from(_STYLES)) for _ in range(len(forward) + len(backward)))
    name = f"fz{seed}_{index}"
    op_name = draw(st.sampled_from([None, f"custom_{name}", f"fuzz_{name}_op"]))
    summary = draw(summaries()) if draw(st.integers(0, 2)) else ""
    spec_file = draw(spec_files()) if draw(st.integers(0, 2)) else ""
    stub_backward = draw(st.integers(0, 5)) == 0
    auto_backward = not read_outputs and not stub_backward and draw(st.integers(0, 2)) == 0
    return FuzzOp(seed=seed, index=index, name=name, op_name=op_name, inputs=inputs, attrs=attrs,
                  outputs=tuple(outputs), forward=tuple(forward), backward=tuple(backward),
                  dtypes=dtypes, styles=styles, focus=focus, summary=summary,
                  spec_file=spec_file, stub_backward=stub_backward,
                  auto_backward=auto_backward)


_WARM = False


def warm_hypothesis() -> None:
    """Run one throwaway seeded draw, once per process. Hypothesis's first seeded run in a
    process can draw another second example than every later run with the same seed (seen:
    ``draw_op(4, 2)`` drawn first in a process, then again), so without this an op drawn first
    (``--only 17``) was not the op that a campaign drew at that index."""
    global _WARM
    if not _WARM:
        _WARM = True
        draw_op(0, 0)


def draw_op(seed: int, index: int, *, dtypes: tuple[str, ...] = ("float32", "float64")
            ) -> FuzzOp:
    """Op ``index`` of the campaign ``seed``, drawn by hypothesis: the same (seed, index) always
    draws the same op, whatever else is drawn.

    The op is built around ``FOCUS[index % len(FOCUS)]``, so any ``len(FOCUS)`` consecutive ops
    cover every function and operator of the language. Hypothesis runs two examples and the
    second is kept (the first of a run is its simplest example: a lone input).
    """
    warm_hypothesis()
    drawn: list[FuzzOp] = []

    @settings(max_examples=2, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed * 1_000_003 + index)
    @given(fuzz_ops(seed=seed, index=index, focus=FOCUS[index % len(FOCUS)], dtypes=dtypes))
    def collect(op: FuzzOp) -> None:
        drawn.append(op)

    collect()
    return drawn[-1]


def draw_ops(count: int, seed: int, *, dtypes: tuple[str, ...] = ("float32", "float64")
             ) -> list[FuzzOp]:
    """Ops 0 to ``count - 1`` of the campaign ``seed`` (see :func:`draw_op`)."""
    return [draw_op(seed, i, dtypes=dtypes) for i in range(count)]


def op_from_spec(path: Path | str, *, seed: int = 0, index: int = 0) -> FuzzOp:
    """A spec written by hand (or printed by a failed run) as a :class:`FuzzOp`, so that the same
    checks run on it: its trees are parsed from the expressions; a missing backward is derived.
    Attrs are tested at their default and at the value the generated tests use besides it."""
    import opgen.kinds  # noqa: F401  (registers each kind's spec rules)
    from opgen.codegen import other_value
    from opgen.spec import load

    spec = load(path)
    m = spec.model
    inputs = tuple(Sym(n, "input", "input", *m.domain.get(n, (-3.0, 3.0)),
                       explicit_domain=n in m.domain) for n in m.inputs)
    attrs = tuple(Sym(n, "attr", a.type, min(float(a.default), float(other_value(a)))
                      if a.type != "str" else 0.0,
                      max(float(a.default), float(other_value(a))) if a.type != "str" else 0.0,
                      a.default, other_value(a)) for n, a in m.attrs.items())
    op = FuzzOp(seed=seed, index=index, name=m.name, op_name=m.op_name, inputs=inputs,
                attrs=attrs, outputs=tuple(m.outputs), forward=(), backward=(),
                dtypes=tuple(m.dtypes), styles=(), focus="spec")
    types = op.types
    forward = tuple(parse(m.forward[o], types) for o in m.outputs)
    if m.backward is not None:
        backward = tuple(parse(m.backward[i], types) for i in m.inputs)
    else:
        by_output = dict(zip(m.outputs, forward, strict=True))
        backward = tuple(gradient(by_output, i, read_outputs=False) for i in m.inputs)
    styles = ("double",) * (len(forward) + len(backward))
    return dataclasses.replace(op, forward=forward, backward=backward, styles=styles)


# ---- checking one op against numpy ---------------------------------------------------------------

@dataclass
class Problem:
    """One disagreement, with everything needed to reproduce it."""

    op: FuzzOp
    what: str

    def report(self) -> str:
        return (f"--- fuzzed op {self.op.name} (seed {self.op.seed}, index {self.op.index}): "
                f"{self.what}\n"
                f"reproduce: python tests/fuzzing.py --seed {self.op.seed} --only "
                f"{self.op.index}\n--- spec:\n{self.op.yaml()}")


def sample_inputs(rng: np.random.Generator, sym: Sym, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform in the input's domain, with about one element in six on a special point: the
    domain's ends, 0, integers and halves (where comparisons tie and floor jumps)."""
    data = rng.uniform(sym.lo, sym.hi, size=shape)
    specials = [sym.lo, sym.hi] + [v / 2 for v in range(int(sym.lo * 2), int(sym.hi * 2) + 1)]
    pick = rng.random(size=shape) < 1 / 6
    data[pick] = rng.choice(np.array(specials), size=int(pick.sum())) if pick.any() else 0
    return data


def random_shapes(rng: np.random.Generator, large: bool = False) -> list[tuple[int, ...]]:
    """Empty, 0-D, odd 1-D tails and a few random 2-D/3-D shapes."""
    odd = [1, 3, 7, 31, 33, 127, 129, 1025, 4099]
    shapes: list[tuple[int, ...]] = [(0,), (), (int(rng.choice(odd)),),
                                     (int(rng.integers(1, 9)), 0, 3)]
    shapes.append(tuple(int(rng.integers(1, 40)) for _ in range(int(rng.integers(2, 4)))))
    shapes.append((int(rng.choice([257, 1000, 2049, 4097])),))
    if large:
        shapes.append((1000003,))
    return shapes


#: The fraction of the checks of an op with 2 or 3 inputs that run broadcasting input shapes.
BROADCAST_SHARE = 0.5


def broadcast_shapes(rng: np.random.Generator, shape: tuple[int, ...], count: int
                     ) -> tuple[tuple[int, ...], ...] | None:
    """Shapes of ``count`` inputs that broadcast (numpy's rules) and are not all the same, derived
    from ``shape``: sometimes with one of its dims set to 1 first; then each input keeps it, drops
    leading dims, has some dims set to 1, both, or is 0-D. None where ``shape`` is 0-D.

    The output of the call has the inputs' broadcast shape, which may be smaller than ``shape``
    (no input kept a dim). Empty dims come from ``shape`` (``(0,)``, ``(k, 0, 3)``): inputs of size
    1 there broadcast to an empty output, whose gradients are zeros.
    """
    if count < 2 or not shape:
        return None
    base = list(shape)
    if len(base) > 1 and rng.integers(0, 3) == 0:  # a size-1 dim of the output itself
        base[int(rng.integers(0, len(base)))] = 1
    for _ in range(20):
        shapes = []
        for _ in range(count):
            style = int(rng.integers(0, 6))
            dims = list(base)
            if style in (1, 3):  # leading dims dropped (of a 1-D shape: a 0-D input)
                dims = dims[int(rng.integers(1, max(len(dims), 2))):]
            if style in (2, 3) and dims:  # some dims set to 1
                ones = rng.random(len(dims)) < 0.5
                ones[int(rng.integers(0, len(dims)))] = True
                dims = [1 if one else d for one, d in zip(ones, dims, strict=True)]
            if style == 4:
                dims = []
            shapes.append(tuple(int(d) for d in dims))  # style 0 and 5: the whole shape
        if len(set(shapes)) > 1:
            return tuple(shapes)
    return None


def _env_for(op: FuzzOp, inputs: dict[str, np.ndarray], attrs: dict[str, Any], ar: Arith,
             shape: tuple[int, ...]) -> dict[str, Val | Cond]:
    env: dict[str, Val | Cond] = {}
    zeros = np.zeros(shape)
    no = np.zeros(shape, bool)
    for name, data in inputs.items():
        env[name] = Val(data, zeros, no)
    for a in op.attrs:
        if a.type == "str":
            continue
        if a.type == "bool":
            env[a.name] = Cond(np.full(shape, bool(attrs[a.name])), no)
        else:
            value = a.kernel_value(attrs[a.name], ar.dtype)
            env[a.name] = Val(np.full(shape, value), np.full(shape, ar.rounding(value)), no)
    return env


def compare(got: np.ndarray, want: Val, ar: Arith) -> tuple[np.ndarray, np.ndarray]:
    """(mismatch mask, tolerance) of a kernel's result against the bounded reference."""
    tol = K * (want.e + ar.u_out * np.abs(want.v)) + ar.tiny_out
    skip = want.amb
    if ar.dtype == "float16":  # beyond float16's range the result is inf: not compared
        skip = skip | (np.abs(want.v) + want.e > 6e4)
    with np.errstate(invalid="ignore"):
        ok = np.abs(got - want.v) <= tol
    return ~ok & ~skip, tol


def summed(want: Val, shape: tuple[int, ...], out_shape: tuple[int, ...], ar: Arith) -> Val:
    """The gradient of an input of ``shape`` broadcast to ``out_shape``: ``want`` (its elementwise
    gradient at ``out_shape``, with the bound of a kernel computing each term) summed over the
    dims the input was stretched along, with the bound of a kernel that accumulates those terms in
    its math type (float; double for float64) in any order.

    A sum of n terms r_i, each within e_i of its exact value v_i, computed in any order with unit
    roundoff u, is within sum e_i + gamma_(n-1) * sum |r_i| of sum v_i, gamma_k = k u / (1 - k u)
    (Higham, Accuracy and Stability of Numerical Algorithms, 4.2); here with n for n - 1 and
    |v_i| + e_i for |r_i|, plus n * tiny for additions near underflow. The final rounding to the
    dtype is :func:`compare`'s, as for any result. An undecided term makes its sum undecided.
    """
    from opgen.testing import sum_to

    numel = math.prod(out_shape)
    n = numel // math.prod(shape) if numel else 0
    with np.errstate(all="ignore"):
        v = sum_to(want.v, shape, out_shape)
        terms = sum_to(want.e, shape, out_shape)
        size = sum_to(np.abs(want.v) + want.e, shape, out_shape)
        amb = sum_to(want.amb.astype(np.float64), shape, out_shape) > 0
        gamma = n * ar.u / (1 - n * ar.u) if n * ar.u < 0.5 else math.inf
        e = terms + gamma * size + n * ar.tiny
        bad = ~np.isfinite(v) | ~np.isfinite(e)
    return Val(v, np.where(bad, np.inf, e), amb | bad)


def _shapes_label(shapes: tuple[tuple[int, ...], ...]) -> str:
    if len(set(shapes)) <= 1:
        return f"shape={shapes[0] if shapes else ()}"
    out = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    return f"shapes={', '.join(str(sh) for sh in shapes)} -> {out}"


def _describe(mismatch: np.ndarray, got: np.ndarray, want: Val, tol: np.ndarray,
              inputs: dict[str, np.ndarray]) -> str:
    where = np.argwhere(mismatch)[:3]
    lines = [f"{int(mismatch.sum())} of {mismatch.size} elements differ"]
    for idx in where:
        at = tuple(int(i) for i in idx)
        values = ", ".join(f"{k}={v[at]!r}" for k, v in inputs.items())
        lines.append(f"  at {at}: got {got[at]!r}, want {want.v[at]!r} +- {tol[at]:.3g} "
                     f"({values})")
    return "\n".join(lines)


class OpRunner:
    """Runs one built op through its generated Python wrapper and checks it."""

    def __init__(self, op: FuzzOp, wrapper: ModuleType, reference: ModuleType | None,
                 device: str) -> None:
        self.op = op
        self.fn = getattr(wrapper, op.name)
        self.reference = reference
        self.device = device
        #: Checks run, by kind: "same shape" and "broadcast" (inputs of different shapes).
        self.stats: Counter[str] = Counter()

    def attr_settings(self) -> list[dict[str, Any]]:
        """The attrs to run with: the defaults (passed by leaving them out, so the wrapper's own
        defaults are tested too) and other values."""
        default = {a.name: a.default for a in self.op.attrs}
        other = {a.name: a.other for a in self.op.attrs}
        return [default, other] if other != default else [default]

    def call(self, tensors: Sequence[Any], attrs: dict[str, Any]) -> tuple[Any, ...]:
        """The op through its generated wrapper; defaults left to the wrapper."""
        defaults = {a.name: a.default for a in self.op.attrs}
        outs = self.fn(*tensors) if attrs == defaults else self.fn(*tensors, **attrs)
        return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)

    def check(self, rng: np.random.Generator, dtypes: Sequence[str], *, large: bool = False,
              finite_differences: bool = True) -> list[str]:
        problems: list[str] = []
        for dtype in dtypes:
            for attrs in self.attr_settings():
                for shape in random_shapes(rng, large=large):
                    shapes = self.input_shapes(rng, shape)
                    try:
                        problems += self.check_once(rng, dtype, shapes, attrs)
                    except Exception as exc:  # noqa: BLE001 - report, then go on
                        problems.append(f"{dtype} {_shapes_label(shapes)} attrs={attrs}: raised "
                                        f"{type(exc).__name__}: {exc}".strip()[:2000])
                    if problems:
                        return problems
        if finite_differences and "float64" in dtypes and not self.op.stub_backward:
            for attrs in self.attr_settings():
                problems += self.check_finite_differences(rng, attrs)
        return problems

    def input_shapes(self, rng: np.random.Generator, shape: tuple[int, ...]
                     ) -> tuple[tuple[int, ...], ...]:
        """The inputs' shapes for one check drawn at ``shape``: for an op with 2 or 3 inputs, in
        BROADCAST_SHARE of the checks shapes that broadcast (:func:`broadcast_shapes`), else
        ``shape`` for every input. (An op with one input draws nothing here.)"""
        count = len(self.op.inputs)
        if count > 1 and rng.random() < BROADCAST_SHARE:
            drawn = broadcast_shapes(rng, shape, count)
            if drawn is not None:
                return drawn
        return (shape,) * count

    def _tensor(self, data: np.ndarray, dtype: str, *, grad: bool, view: bool) -> Any:
        from opgen import testing as ot

        if view and data.ndim == 1:  # an offset view: misaligned for the vectorized GPU path
            tensor = ot.to_paddle(np.concatenate([[0.0], data]), dtype, self.device)[1:]
        elif data.ndim == 0 and dtype != "bfloat16":  # ot.to_paddle makes 0-D arrays 1-D
            import paddle

            tensor = paddle.to_tensor(np.asarray(data, dtype=dtype), place=ot.place(self.device))
        else:
            tensor = ot.to_paddle(data, dtype, self.device)
            if data.ndim == 0:
                tensor = tensor.reshape([])
        tensor.stop_gradient = not grad
        return tensor

    def check_once(self, rng: np.random.Generator, dtype: str,
                   shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> list[str]:
        """One call of the op, forward and backward, on inputs of ``shapes`` (one per input; they
        broadcast to the output's shape, at which the trees are evaluated)."""
        from opgen import testing as ot

        op, ar = self.op, Arith(dtype)
        shape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
        self.stats["broadcast" if len(set(shapes)) > 1 else "same shape"] += 1
        view = bool(rng.integers(0, 3) == 0)
        tensors, inputs = [], {}
        for s, in_shape in zip(op.inputs, shapes, strict=True):
            t = self._tensor(sample_inputs(rng, s, in_shape), dtype, grad=True, view=view)
            tensors.append(t)
            # evaluated at the output's shape: each input as it broadcasts
            inputs[s.name] = np.broadcast_to(ot.to_numpy(t), shape)
        label = f"{dtype} {_shapes_label(shapes)} attrs={attrs}" + \
            (" (offset views)" if view else "")
        outs = self.call(tensors, attrs)
        env = _env_for(op, inputs, attrs, ar, shape)
        problems = []
        for name, tree, out in zip(op.outputs, op.forward, outs, strict=True):
            if tuple(out.shape) != shape or str(out.dtype).split(".")[-1] != dtype:
                problems.append(f"{label}: output {name} is {out.dtype} {list(out.shape)}")
                continue
            want = evaluate(tree, env, ar, shape)
            assert isinstance(want, Val)
            got = ot.to_numpy(out)
            bad, tol = compare(got, want, ar)
            if bad.any():
                problems.append(f"{label}: forward {name} = {source(tree)}: "
                                f"{_describe(bad, got, want, tol, inputs)}")
            # the output as the backward kernel reads it: rounded to the dtype (subnormals too)
            env[name] = Val(want.v, want.e + ar.u_out * np.abs(want.v) + ar.tiny_out, want.amb)
        if problems:
            return problems
        if not op.stub_backward:
            problems += self.check_backward(rng, dtype, shapes, label, tensors, outs, env,
                                            inputs)
        if dtype == "float64" and self.reference is not None and not problems:
            problems += self.check_reference(env, inputs, attrs, shape)
        return problems

    def check_backward(self, rng: np.random.Generator, dtype: str,
                       shapes: tuple[tuple[int, ...], ...], label: str, tensors: list[Any],
                       outs: tuple[Any, ...], env: dict[str, Val | Cond],
                       inputs: dict[str, np.ndarray]) -> list[str]:
        """The backward kernel, through paddle.grad, against the derived backward's trees: at the
        output's shape, and for a broadcast input summed to its shape (:func:`summed`)."""
        import paddle

        from opgen import testing as ot

        op, ar = self.op, Arith(dtype)
        shape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
        problems: list[str] = []
        grads_out = []
        for name in op.outputs:
            g = self._tensor(rng.uniform(-1, 1, size=shape), dtype, grad=False, view=False)
            grads_out.append(g)
            env[f"grad_{name}"] = Val(ot.to_numpy(g), np.zeros(shape), np.zeros(shape, bool))
        grads = paddle.grad(list(outs), tensors, grad_outputs=grads_out, allow_unused=True)
        for s, tree, grad, in_shape in zip(op.inputs, op.backward, grads, shapes, strict=True):
            if grad is None:
                if math.prod(in_shape) == 0:
                    continue
                problems.append(f"{label}: no gradient for {s.name}")
                continue
            want = evaluate(tree, env, ar, shape)
            assert isinstance(want, Val)
            got = ot.to_numpy(grad)
            if got.shape != in_shape:
                problems.append(f"{label}: grad_{s.name} has shape {got.shape}")
                continue
            if in_shape == shape:
                bad, tol = compare(got, want, ar)
                if bad.any():
                    problems.append(f"{label}: backward grad_{s.name} = {source(tree)}: "
                                    f"{_describe(bad, got, want, tol, inputs)}")
                continue
            total = summed(want, in_shape, shape, ar)
            bad, tol = compare(got, total, ar)
            if bad.any():
                terms = math.prod(shape) // max(math.prod(in_shape), 1)
                problems.append(f"{label}: backward grad_{s.name} = {source(tree)}, summed "
                                f"from {list(shape)} to {list(in_shape)} ({terms} terms each): "
                                f"{_describe(bad, got, total, tol, {})}")
        return problems

    def check_reference(self, env: dict[str, Val | Cond], inputs: dict[str, np.ndarray],
                        attrs: dict[str, Any], shape: tuple[int, ...]) -> list[str]:
        """The generated tests' numpy reference (expr.py's numpy emission, in the test template)
        against this evaluator, in float64."""
        from opgen import testing as ot

        op, ar = self.op, Arith("float64")
        ref = self.reference
        assert ref is not None
        py_attrs = {a.name: attrs[a.name] for a in op.attrs}
        problems = []
        expected = ot.as_tuple(ref.reference_forward(*inputs.values(), **py_attrs))
        for name, tree, got in zip(op.outputs, op.forward, expected, strict=True):
            want = evaluate(tree, env, ar, shape)
            assert isinstance(want, Val)
            bad, tol = compare(np.asarray(got, dtype=np.float64), want, ar)
            if bad.any():
                problems.append(f"float64 attrs={attrs}: generated reference_forward {name}: "
                                f"{_describe(bad, np.asarray(got), want, tol, inputs)}")
        if op.stub_backward:  # the generated tests have no reference_backward
            return problems
        grads = [env[f"grad_{o}"] for o in op.outputs]
        expected = ot.as_tuple(ref.reference_backward(
            *inputs.values(), *(g.v for g in grads if isinstance(g, Val)), **py_attrs))
        for s, tree, got in zip(op.inputs, op.backward, expected, strict=True):
            want = evaluate(tree, env, ar, shape)
            assert isinstance(want, Val)
            bad, tol = compare(np.asarray(got, dtype=np.float64), want, ar)
            if bad.any():
                problems.append(f"float64 attrs={attrs}: generated reference_backward "
                                f"{s.name}: {_describe(bad, np.asarray(got), want, tol, inputs)}")
        return problems

    def _noise_and_kinks(self, inputs: dict[str, np.ndarray], weights: list[np.ndarray],
                         attrs: dict[str, Any], h: float) -> tuple[np.ndarray, np.ndarray]:
        """The error bound of the weighted forward sum, and where the forward or backward has a
        kink or jump within ``h`` of the inputs: there, differences say nothing.

        Kinks are found by evaluating with an error of 2h on every input: a comparison, floor
        or branch the perturbation can flip is then marked undecided. (Comparing differences at
        h and h/2 misses symmetric kinks: abs(x) at x = 0 has central differences 0 at any h.)
        """
        op, ar = self.op, Arith("float64")
        shape = next(iter(inputs.values())).shape
        exact = _env_for(op, inputs, attrs, ar, shape)
        nudged = dict(exact)
        for name, data in inputs.items():
            nudged[name] = Val(data, np.full(shape, 2 * h), np.zeros(shape, bool))
        noise, kinks = np.zeros(shape), np.zeros(shape, bool)
        for w, name, tree in zip(weights, op.outputs, op.forward, strict=True):
            val, moved = evaluate(tree, exact, ar, shape), evaluate(tree, nudged, ar, shape)
            assert isinstance(val, Val) and isinstance(moved, Val)
            noise += np.abs(w) * (val.e + ar.u * np.abs(val.v))
            kinks |= val.amb | moved.amb
            nudged[name] = moved
        for name, w in zip(op.outputs, weights, strict=True):
            nudged[f"grad_{name}"] = Val(w, np.zeros(shape), np.zeros(shape, bool))
        for tree in op.backward:
            moved = evaluate(tree, nudged, ar, shape)
            assert isinstance(moved, Val)
            kinks |= moved.amb
        return noise, kinks

    def check_finite_differences(self, rng: np.random.Generator, attrs: dict[str, Any]
                                 ) -> list[str]:
        """The backward kernel against central differences of the forward kernel, float64."""
        import paddle

        from opgen import testing as ot

        op, shape, h = self.op, (3, 101), 1e-5
        arrays = [sample_inputs(rng, s, shape) for s in op.inputs]
        weights = [rng.uniform(-1, 1, size=shape) for _ in op.outputs]

        def weighted(*xs: np.ndarray) -> np.ndarray:
            outs = self.call([ot.to_paddle(x, "float64", self.device) for x in xs], attrs)
            return sum((w * ot.to_numpy(o) for w, o in zip(weights, outs, strict=True)),
                       np.zeros(shape))

        tensors = [ot.to_paddle(x, "float64", self.device, stop_gradient=False) for x in arrays]
        outs = self.call(tensors, attrs)
        grads = paddle.grad(list(outs), tensors,
                            grad_outputs=[ot.to_paddle(w, "float64", self.device)
                                          for w in weights])
        inputs = dict(zip([s.name for s in op.inputs], arrays, strict=True))
        noise, undecided = self._noise_and_kinks(inputs, weights, attrs, h)
        problems = []
        for index, (s, grad) in enumerate(zip(op.inputs, grads, strict=True)):
            coarse = ot.central_difference(weighted, arrays, index, h)
            fine = ot.central_difference(weighted, arrays, index, h / 2)
            smooth = np.isfinite(coarse) & np.isclose(coarse, fine, rtol=1e-4, atol=1e-6)
            smooth &= ~undecided
            numeric = (4 * fine - coarse) / 3  # Richardson: O(h^4)
            got = ot.to_numpy(grad)
            tol = 1e-5 * np.abs(got) + 1e-7 + 8 * noise / h
            bad = smooth & ~(np.abs(got - numeric) <= tol)
            if bad.any():
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                problems.append(
                    f"float64 attrs={attrs}: grad_{s.name} against central differences of the "
                    f"forward: {int(bad.sum())} of {int(smooth.sum())} smooth points differ; at "
                    f"{idx}: backward {got[idx]!r}, differences {numeric[idx]!r}, inputs "
                    + ", ".join(f"{t.name}={a[idx]!r}" for t, a in zip(op.inputs, arrays,
                                                                       strict=True)))
        return problems


#: Shapes the generated tests run with here: theirs, less the million-element one (slow in
#: numpy, and the CPU kernel has no tail handling to test).
GENERATED_TEST_SHAPES = [(0,), (), (1,), (4099,), (3, 5, 7), (2, 0, 3)]


def run_generated_tests(op: FuzzOp, tests: ModuleType, device: str, dtypes: Sequence[str]
                        ) -> list[str]:
    """Call the op's own generated tests (test_<name>.py) in this process, where its wrapper is
    bound to the fuzz library; return one line per failing call."""
    calls: list[tuple[str, dict[str, Any]]] = []
    attr_sets = [param.values[0] for param in tests.ATTRS]
    directions = ("test_forward",) if op.stub_backward else ("test_forward", "test_backward")
    for dtype in [d for d in tests.DTYPES if d in dtypes]:
        for attrs in attr_sets:
            for shape in GENERATED_TEST_SHAPES:
                for test in directions:
                    calls.append((test, {"device": device, "dtype": dtype, "shape": shape,
                                         "attrs": attrs}))
        for view in ("offset", "strided"):
            calls.append(("test_forward_on_views", {"device": device, "dtype": dtype,
                                                    "view": view}))
    if op.stub_backward:  # its message names the spec file, through a C++ string literal
        calls.append(("test_backward_is_a_clear_error", {"device": device}))
    for attrs in attr_sets if not op.stub_backward else ():
        calls.append(("test_backward_matches_finite_differences",
                      {"device": device, "attrs": attrs}))
    return [line for test, kwargs in calls if (line := call_test(tests, test, kwargs))]


def call_test(tests: ModuleType, test: str, kwargs: dict[str, Any]) -> str | None:
    """Call one test of a generated test module; the line reporting its failure, or None where
    it passed or skipped."""
    import pytest

    fn = getattr(tests, test, None)
    if fn is None:
        return f"generated tests have no {test}"
    try:
        fn(**kwargs)
    except pytest.skip.Exception:
        return None
    except Exception as exc:  # noqa: BLE001
        first = "\n".join(str(exc).strip().splitlines()[:8])
        return f"generated {test}({kwargs}) failed: {type(exc).__name__}: {first}"
    return None


# ---- generating and building batches -------------------------------------------------------------

UNITY_SOURCE = "_fuzz_unity"


def generate(op: FuzzOp, folder: Path) -> Any:
    """Write the op's spec under ``folder/<name>/`` and generate the op there; return its Spec."""
    from opgen import api
    from opgen.spec import load

    op_dir = folder / op.name
    op_dir.mkdir(parents=True, exist_ok=True)
    spec_path = op_dir / op.spec_name
    spec_path.write_text(op.yaml())
    api.generate(spec_path)
    return load(spec_path)


def write_library(specs: Sequence[Any], lib_dir: Path, *, cuda: bool) -> list[Path]:
    """Gather the generated sources of ``specs`` into ``lib_dir/csrc`` and write the one
    translation unit per language that includes them all; return the sources to compile.

    Each op's names (``kOpName``, its functors) are in the op's own namespace, so they do not
    clash in one translation unit.
    """
    csrc = lib_dir / "csrc"
    if csrc.exists():
        shutil.rmtree(csrc)
    csrc.mkdir(parents=True)
    first = Path(specs[0].path).parent / "csrc"
    shutil.copytree(first / "opgen", csrc / "opgen")
    sources = []
    for suffix in (".cc", ".cu") if cuda else (".cc",):
        lines = [f"// {len(specs)} fuzzed ops in one translation unit (tests/fuzzing.py)."]
        for spec in specs:
            op_csrc = Path(spec.path).parent / "csrc"
            for ext in (".h", suffix):
                shutil.copy(op_csrc / f"{spec.name}{ext}", csrc / f"{spec.name}{ext}")
            lines.append(f'#include "{spec.name}{suffix}"')
        unity = csrc / f"{UNITY_SOURCE}{suffix}"
        unity.write_text("\n".join(lines) + "\n")
        sources.append(unity)
    return sources


def build_library(specs: Sequence[Any], lib_dir: Path, *, cpu_only: bool,
                  verbose: bool = False) -> Path:
    """Compile ``specs`` into one library with the flags opgen itself would use; return it."""
    from opgen import build
    from opgen.names import check_one_build

    check_one_build(specs)
    config = build.configure(Path(specs[0].path).parent, cpu_only=cpu_only)
    sources = write_library(specs, lib_dir, cuda=config.cuda)
    config = dataclasses.replace(
        config, name=lib_dir.name, op_dir=lib_dir.resolve(), sources=tuple(sources),
        include_dirs=(lib_dir.resolve() / "csrc", *config.include_dirs[1:]))
    return build.compile_library(config, verbose=verbose)


def load_library(library: Path) -> ModuleType:
    from paddle.utils.cpp_extension.extension_utils import _import_module_from_library

    from opgen import testing as ot

    ot.poison_outputs()  # outputs start as NaN: an element a kernel skips is caught
    return _import_module_from_library(library.stem, str(library.parent), False)


def load_op(spec: Any, library: ModuleType) -> tuple[ModuleType, ModuleType]:
    """The op's generated wrapper, bound to ``library``, and its generated test module."""
    op_dir = Path(spec.path).parent
    wrapper = _import(f"opgen_fuzz_{spec.name}", op_dir / f"{spec.name}.py")
    wrapper._library = library
    saved = sys.modules.get(spec.name)
    sys.modules[spec.name] = wrapper  # the test module does `from <name> import <name>`
    try:
        tests = _import(f"opgen_fuzz_test_{spec.name}", op_dir / f"test_{spec.name}.py")
    finally:
        if saved is None:
            sys.modules.pop(spec.name, None)
        else:
            sys.modules[spec.name] = saved
    return wrapper, tests


def _import(module_name: str, path: Path) -> ModuleType:
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    module_spec.loader.exec_module(module)
    return module


# ---- a campaign ----------------------------------------------------------------------------------

@dataclass
class Report:
    count: int = 0
    built: int = 0
    checked: int = 0
    builds: int = 0
    seconds: float = 0.0
    build_seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    coverage: Counter[str] = field(default_factory=Counter)
    #: Calls checked against numpy, by their inputs' shapes: "same shape" or "broadcast".
    shapes: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        covered = ", ".join(f"{k} {v}" for k, v in sorted(self.coverage.items()))
        missing = sorted(set(FUNCTIONS) - set(self.coverage))
        calls = ", ".join(f"{v} {k}" for k, v in sorted(self.shapes.items()))
        return (f"{self.count} fuzzed ops, {self.checked} checked, {self.builds} builds "
                f"({self.build_seconds:.0f} s waiting on the compiler), "
                f"{len(self.problems)} problems, {self.seconds:.0f} s\n"
                f"calls checked: {calls or 'none'}\ncoverage: {covered}"
                + (f"\nnot covered: {', '.join(missing)}" if missing else ""))


def coverage(op: FuzzOp) -> set[str]:
    """The functions, operators and spec features an op exercises."""
    seen: set[str] = set()

    def walk(n: Node) -> None:
        if n.kind == "call":
            seen.add(n.name)
        elif n.kind == "pow":
            seen.add("**")
        elif n.kind in ("div", "neg", "pos", "and", "or", "not"):
            seen.add({"div": "/", "neg": "unary -", "pos": "unary +", "and": "&", "or": "|",
                      "not": "~"}[n.kind])
        elif n.kind == "cmp":
            seen.update(f"'{o}'" for o in n.name.split(","))
            if "," in n.name:
                seen.add("chain")
        elif n.kind == "var" and n.type == BOOL:
            seen.add("bool attr")
        elif n.kind == "bool":
            seen.add("True/False")
        for a in n.args:
            walk(a)

    for tree in op.forward + (() if op.stub_backward else op.backward):
        walk(tree)
    if op.stub_backward:
        seen.add("backward stub")
    if op.auto_backward:
        seen.add("backward: auto")
    if op.spec_file:
        seen.add("odd spec file name")
    if op.summary:
        seen.add("odd summary")
    seen.add(f"{len(op.inputs)} inputs")
    seen.add(f"{len(op.outputs)} outputs")
    seen.update(f"{a.type} attr" for a in op.attrs)
    return seen


def run(count: int, seed: int, *, workdir: Path, batch: int = 15, jobs: int = 2,
        device: str = "cpu", dtypes: tuple[str, ...] = ("float64", "float32"),
        only: Sequence[int] = (), specs: Sequence[Path] = (), large: bool = False,
        generated_tests: Sequence[str] = (),
        log: Callable[[str], None] = print) -> Report:
    """Draw ``count`` ops from ``seed`` (or take the ops of ``specs``), build them ``batch`` to a
    library (``jobs`` builds at a time) and check each against numpy, and the generated tests of
    each in the ``generated_tests`` dtypes; every disagreement becomes a :class:`Problem`."""
    start = time.perf_counter()
    report = Report()
    spec_dtypes = tuple(sorted(set(dtypes) | {"float64"}, key=list(UNIT_ROUNDOFF).index))
    if specs:
        ops = [op_from_spec(path, seed=seed, index=i) for i, path in enumerate(specs)]
    else:
        indices = list(only) if only else list(range(count))
        ops = [draw_op(seed, i, dtypes=spec_dtypes) for i in indices]
    report.count = len(ops)
    for op in ops:
        report.coverage.update(coverage(op))
    workdir.mkdir(parents=True, exist_ok=True)
    generated: list[tuple[FuzzOp, Any]] = []
    for op in ops:
        try:
            generated.append((op, generate(op, workdir / "ops")))
        except Exception as exc:  # noqa: BLE001
            report.problems.append(Problem(op, f"generate failed: {type(exc).__name__}: {exc}"))
    batches = [generated[i:i + batch] for i in range(0, len(generated), batch)]
    log(f"fuzz: {len(ops)} ops drawn from seed {seed}, {len(batches)} libraries to build")

    def build_batch(k: int, members: list[tuple[FuzzOp, Any]]) -> Built:
        return _build_isolating(members, workdir / f"lib_s{seed}_{k}_{len(members)}",
                                cpu_only=device == "cpu")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(build_batch, k, members) for k, members in enumerate(batches)]
        for future in futures:
            t0 = time.perf_counter()
            built = future.result()
            report.build_seconds += time.perf_counter() - t0
            report.builds += built.builds
            report.problems += built.problems
            for members, library in built.libraries:
                report.built += len(members)
                report.problems += check_batch(members, library, device=device, dtypes=dtypes,
                                               large=large, log=log,
                                               generated_tests=generated_tests,
                                               shapes=report.shapes)
                report.checked += len(members)
    report.seconds = time.perf_counter() - start
    return report


@dataclass
class Built:
    """The outcome of building one batch: libraries with the ops they hold, and failures."""

    libraries: list[tuple[list[tuple[FuzzOp, Any]], Path]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    builds: int = 0


def _build_isolating(members: list[tuple[FuzzOp, Any]], lib_dir: Path, *, cpu_only: bool
                     ) -> Built:
    """Build ``members`` into one library. When that fails, the op whose file the first compiler
    error names is reported and the others are built again; an error that names no op's file
    splits the batch in halves until the ops that break the build are alone."""
    from opgen.errors import OpgenError

    outcome = Built()
    while members:
        outcome.builds += 1
        try:
            library = build_library([s for _, s in members], lib_dir, cpu_only=cpu_only)
        except OpgenError as exc:
            error = str(exc)
        else:
            outcome.libraries.append((members, library))
            return outcome
        culprit = next((m for m in members
                        if re.search(rf"csrc/{re.escape(m[1].name)}\.(h|cc|cu):", error)), None)
        if culprit is None and len(members) == 1:
            culprit = members[0]
        if culprit is not None:
            outcome.problems.append(Problem(culprit[0], f"build failed: {error}"))
            members = [m for m in members if m is not culprit]
            continue
        half = len(members) // 2
        before = len(outcome.problems)
        for k, part in enumerate((members[:half], members[half:])):
            sub = _build_isolating(part, lib_dir.with_name(f"{lib_dir.name}_{k}"),
                                   cpu_only=cpu_only)
            outcome.libraries += sub.libraries
            outcome.problems += sub.problems
            outcome.builds += sub.builds
        if len(outcome.problems) == before:  # each half builds: the two together do not
            outcome.problems.append(Problem(members[0][0], f"the {len(members)} ops of a "
                                            f"library fail to build together: {error}"))
        return outcome
    return outcome


def check_batch(members: list[tuple[FuzzOp, Any]], library: Path, *, device: str,
                dtypes: Sequence[str], large: bool, log: Callable[[str], None],
                generated_tests: Sequence[str] = (), shapes: Counter[str] | None = None
                ) -> list[Problem]:
    """Load ``library`` and check each of its ops; count the calls checked, by their inputs'
    shapes, into ``shapes``."""
    module = load_library(library)
    problems = []
    for op, spec in members:
        if not hasattr(module, spec.op_name):
            problems.append(Problem(op, f"{spec.op_name} is missing from the built library"))
            continue
        try:
            wrapper, tests = load_op(spec, module)
            runner = OpRunner(op, wrapper, tests, device)
            rng = np.random.default_rng([op.seed, op.index])
            try:
                found = runner.check(rng, dtypes, large=large)
            finally:
                if shapes is not None:
                    shapes.update(runner.stats)
            if generated_tests:
                found += run_generated_tests(op, tests, device, generated_tests)
        except Exception:  # noqa: BLE001
            found = [f"checking raised:\n{traceback.format_exc()}"]
        problems += [Problem(op, what) for what in found]
        log(f"  {op.name} ({op.focus}): " + ("ok" if not found else f"{len(found)} PROBLEMS"))
    return problems


# ---- command line --------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=30, help="ops to draw (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    parser.add_argument("--batch", type=int, default=15, help="ops per built library")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="libraries compiled at once (default: the CPU count)")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--dtypes", default="float64,float32",
                        help="dtypes to check, comma-separated (float64 is always built)")
    parser.add_argument("--only", default="", help="check only these indices, e.g. 3,17")
    parser.add_argument("--spec", type=Path, action="append", default=[],
                        help="check this spec instead of drawn ones (repeatable)")
    parser.add_argument("--large", action="store_true",
                        help="also run 1000003-element inputs (for the GPU's vectorized tails)")
    parser.add_argument("--generated-tests", default="float64", metavar="DTYPES",
                        help="also call each op's own generated tests (test_<name>.py) in these "
                        "dtypes (default float64; 'none' for none)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where ops and builds go (kept; default: a temporary folder)")
    parser.add_argument("--print-specs", action="store_true", help="print the drawn specs only")
    parser.add_argument("--json", type=Path, default=None, help="write the report as JSON")
    args = parser.parse_args(argv)
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    only = [int(i) for i in args.only.split(",") if i.strip()]
    if args.print_specs:
        for i in only or range(args.count):
            print(draw_op(args.seed, i).yaml())
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="opgen-fuzz-"))
    report = run(args.count, args.seed, workdir=workdir, batch=args.batch, jobs=args.jobs,
                 device=args.device, dtypes=dtypes, only=only, specs=args.spec, large=args.large,
                 generated_tests=tuple(d for d in args.generated_tests.split(",")
                                       if d.strip() not in ("", "none")))
    for problem in report.problems:
        print(problem.report())
    print(report.summary())
    print(f"ops and builds in {workdir}")
    if args.json:
        args.json.write_text(json.dumps({
            "seed": args.seed, "count": report.count, "checked": report.checked,
            "builds": report.builds, "seconds": round(report.seconds, 1),
            "build_seconds": round(report.build_seconds, 1), "device": args.device,
            "dtypes": list(dtypes),
            "problems": [{"index": p.op.index, "what": p.what} for p in report.problems],
            "coverage": dict(report.coverage), "calls": dict(report.shapes)}, indent=2) + "\n")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())


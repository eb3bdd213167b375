"""The spec's expression language: Python syntax, checked with ``ast``, emitted as C++ and numpy.

An expression is elementwise math over named values. Every value has one of two types: ``num``
(computed in the op's math type: float for float32/float16/bfloat16, double for float64) or
``bool`` (a comparison, a bool attr, or ``&``, ``|``, ``~`` of those). The checker rejects anything
outside the language with a message naming the offending construct and its column.

The same tree is emitted twice: as C++ for the functors shared by the CPU and CUDA kernels, and as
numpy for the float64 reference that the generated tests compare against.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Type = Literal["num", "bool", "str"]


class ExprError(Exception):
    """An expression is not in the language.

    ``message`` says what is wrong, ``hint`` (possibly empty) what to write instead or which names
    exist, and ``col`` is the 0-based column of the culprit. ``str(err)`` joins message and hint.
    """

    def __init__(self, message: str, col: int = 0, hint: str = "") -> None:
        super().__init__(f"{message}; {hint}" if hint else message)
        self.message = message
        self.col = col
        self.hint = hint


@dataclass(frozen=True)
class Function:
    """One function of the language: its arity, argument types and both emissions."""

    args: tuple[Type, ...]
    cpp: str
    numpy: str
    result: Type = "num"


def _unary(cpp: str, numpy: str) -> Function:
    return Function(("num",), f"opgen::{cpp}({{0}})", numpy)


FUNCTIONS: dict[str, Function] = {
    "abs": _unary("abs", "np.abs({0})"),
    "min": Function(("num", "num"), "opgen::min({0}, {1})", "np.minimum({0}, {1})"),
    "max": Function(("num", "num"), "opgen::max({0}, {1})", "np.maximum({0}, {1})"),
    "where": Function(("bool", "num", "num"), "opgen::where({0}, {1}, {2})",
                      "np.where({0}, {1}, {2})"),
    # exp, tanh and sigmoid take the stored dtype T: fast forms for float16 and bfloat16 on the GPU.
    "exp": Function(("num",), "opgen::exp<T>({0})", "np.exp({0})"),
    "log": _unary("log", "np.log({0})"),
    "log1p": _unary("log1p", "np.log1p({0})"),
    "expm1": _unary("expm1", "np.expm1({0})"),
    "sqrt": _unary("sqrt", "np.sqrt({0})"),
    "rsqrt": _unary("rsqrt", "(1.0 / np.sqrt({0}))"),
    "tanh": Function(("num",), "opgen::tanh<T>({0})", "np.tanh({0})"),
    "sigmoid": Function(("num",), "opgen::sigmoid<T>({0})", "(1.0 / (1.0 + np.exp(-({0}))))"),
    "erf": _unary("erf", "_erf({0})"),
    "sin": _unary("sin", "np.sin({0})"),
    "cos": _unary("cos", "np.cos({0})"),
    "pow": Function(("num", "num"), "opgen::pow({0}, {1})", "np.power({0}, {1})"),
    "floor": _unary("floor", "np.floor({0})"),
    "ceil": _unary("ceil", "np.ceil({0})"),
    "softplus": _unary("softplus", "np.logaddexp(0.0, {0})"),
    "square": _unary("square", "np.square({0})"),
    "clamp": Function(("num", "num", "num"), "opgen::clamp({0}, {1}, {2})",
                      "np.clip({0}, {1}, {2})"),
    "sign": _unary("sign", "np.sign({0})"),
    "tan": _unary("tan", "np.tan({0})"),
    "atan": _unary("atan", "np.arctan({0})"),
    "log2": _unary("log2", "np.log2({0})"),
    "exp2": _unary("exp2", "np.exp2({0})"),
}
#: The functions that have opgen/math.h forms for arguments after the first that are the same
#: for every element (``opgen::max_uniform``): see :func:`compile_expr`'s ``uniform``.
_UNIFORM_FORMS = frozenset({"min", "max", "clamp"})
#: What each argument of a function is called in messages (``call it as clamp(x, lo, hi)``);
#: the baseline's norms as docs/spec.md writes them.
_PARAMETERS = {"clamp": ("x", "lo", "hi"), "layer_norm": ("x", "w", "b", "eps"),
               "rms_norm": ("x", "w", "eps")}

# Precedence of the emitted C++ (and of Python for the numpy text, which agrees on these levels).
_OR, _AND, _CMP, _ADD, _MUL, _UNARY, _ATOM = 1, 2, 4, 5, 6, 7, 9

_BINOPS: dict[type[ast.operator], tuple[str, int]] = {
    ast.Add: ("+", _ADD),
    ast.Sub: ("-", _ADD),
    ast.Mult: ("*", _MUL),
    ast.Div: ("/", _MUL),
}
_CMPOPS: dict[type[ast.cmpop], str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
}
# Python constructs outside the language: (what is not allowed, what to write instead).
_FORBIDDEN: dict[type[ast.AST], tuple[str, str]] = {
    ast.Attribute: ("attribute access is not allowed", ""),
    ast.Subscript: ("subscripts are not allowed", "expressions work elementwise on whole tensors"),
    ast.Lambda: ("lambdas are not allowed", ""),
    ast.BoolOp: ("'and' and 'or' are not allowed", "combine conditions with & and |, "
                 "as in (a > 0) & (a < b)"),
    ast.IfExp: ("'a if cond else b' is not allowed", "use where(cond, a, b)"),
    ast.NamedExpr: ("assignments (:=) are not allowed", ""),
    ast.ListComp: ("comprehensions are not allowed", ""),
    ast.GeneratorExp: ("comprehensions are not allowed", ""),
    ast.SetComp: ("comprehensions are not allowed", ""),
    ast.DictComp: ("comprehensions are not allowed", ""),
    ast.List: ("lists are not allowed", ""),
    ast.Tuple: ("tuples are not allowed", "an expression computes one value"),
    ast.Dict: ("dicts are not allowed", ""),
    ast.Set: ("sets are not allowed", ""),
    ast.Starred: ("starred arguments are not allowed", ""),
    ast.JoinedStr: ("strings are not allowed", "expressions compute numbers"),
    ast.Await: ("'await' is not allowed", ""),
    ast.Yield: ("'yield' is not allowed", ""),
    ast.YieldFrom: ("'yield' is not allowed", ""),
}


@dataclass(frozen=True)
class Reduction:
    """A reduction over the row in a row-wise expression: ``op(inner)``, op one of
    :data:`REDUCTIONS`. Its C++ is left to the kind (a lambda over the row's elements): the
    enclosing expression's C++ holds ``@k@`` where the k-th reduction goes."""

    op: str
    inner: Emitted


@dataclass(frozen=True)
class Emitted:
    """One checked expression: its type, both emissions, and the names it reads.

    For row-wise expressions (compiled with ``varying``), ``varies`` says whether the value
    changes along the row (it reads a per-element value outside any reduction), and
    ``reductions`` holds the reductions over the row it contains, in the order of their ``@k@``
    placeholders in ``cpp``."""

    type: Type
    cpp: str
    numpy: str
    names: frozenset[str] = field(default_factory=frozenset)
    functions: frozenset[str] = field(default_factory=frozenset)
    varies: bool = False
    reductions: tuple[Reduction, ...] = ()


#: The reductions over the row a row-wise expression may call, with one argument (``max`` and
#: ``min`` with two are the elementwise functions). numpy's emission is a call of the generated
#: tests' helper in :mod:`opgen.testing`, over ``shape`` (rows, cols), a local of the reference.
REDUCTIONS: dict[str, str] = {
    "sum": "ot.row_sum({0}, shape)",
    "mean": "ot.row_mean({0}, shape)",
    "max": "ot.row_max({0}, shape)",
    "min": "ot.row_min({0}, shape)",
}


@dataclass(frozen=True)
class _Node:
    type: Type
    cpp: str
    cpp_prec: int
    numpy: str
    numpy_prec: int
    varies: bool = False        # row-wise: changes along the row


def compile_expr(source: str, symbols: Mapping[str, Type], *,
                 unavailable: Mapping[str, str] | None = None,
                 varying: frozenset[str] | None = None,
                 uniform: frozenset[str] = frozenset()) -> Emitted:
    """Check ``source`` against ``symbols`` (name -> type) and emit it as C++ and numpy.

    ``unavailable`` maps names that exist elsewhere in the spec but not here (a gradient in the
    forward, say) to a hint saying why, for a better message than "unknown name". An expression may
    span lines (a YAML block scalar): line breaks count as spaces.

    ``varying`` makes it a row-wise expression: the names whose values change along the row
    (per-element and per-column values); every other name is one value per row. Such an
    expression may call the reductions over the row (:data:`REDUCTIONS`), not nested.

    ``uniform`` names the symbols that are the same for every element (the attrs): ``min`` and
    ``max`` whose second argument reads only those and literals (``max(x, 0)``, ``min(x,
    threshold)``; ``clamp`` with both bounds so) call opgen/math.h's ``*_uniform`` forms, which the
    CPU loops run as one instruction instead of several.

    Raises :class:`ExprError` for a syntax error, a construct outside the language, an unknown
    name or function, a wrong arity or a type mismatch.
    """
    tree = parse_expr(source)
    compiler = _Compiler(symbols, unavailable or {}, varying=varying, uniform=uniform)
    node = compiler.visit(tree.body)
    if max(_nesting(node.cpp), _nesting(node.numpy)) > MAX_EMITTED_NESTING:
        # a chain a < b < ... < z, or nested sigmoids, nest deeper in numpy than in the spec
        raise ExprError(TOO_DEEP, 0, f"the generated code would nest more than "
                        f"{MAX_EMITTED_NESTING} parentheses")
    return Emitted(node.type, node.cpp, node.numpy, frozenset(compiler.names),
                   frozenset(compiler.functions), varies=node.varies,
                   reductions=tuple(compiler.reductions))


def parse_expr(source: str) -> ast.Expression:
    """The ``ast`` of ``source``, nested at most :data:`MAX_DEPTH` deep (line breaks count as
    spaces); :class:`ExprError` for a syntax error or a deeper expression."""
    if not isinstance(source, str) or not source.strip():
        raise ExprError("empty expression")
    text = " ".join(source.split())
    if "#" in text:  # no string can hold one: it starts a comment, which ast.parse would drop
        raise ExprError("comments are not allowed", text.index("#"),
                        "a YAML comment goes after the closing quote of the expression")
    wide = next((i for i, c in enumerate(text) if not c.isascii()), None)
    if wide is not None:  # Python would read a fullwidth 'ｘ' as 'x', and docs would show 'ｘ'
        raise ExprError(f"'{text[wide]}' is not ASCII", wide,
                        "names, numbers and operators in expressions are ASCII")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        col = max((exc.offset or 1) - 1, 0)
        detail = "" if exc.msg == "invalid syntax" else f": {exc.msg}"
        if exc.msg.startswith("too many nested parentheses"):
            raise ExprError(TOO_DEEP, col, _DEPTH_HINT) from None
        if exc.msg.startswith("Exceeds the limit"):  # Python's int-to-str limit, as a syntax error
            raise ExprError(f"a number literal longer than {sys.get_int_max_str_digits()} "
                            "digits", col) from None
        raise ExprError(f"invalid syntax{detail}", col) from None
    except (RecursionError, MemoryError):  # Python's own parser gives up on thousands of levels
        raise ExprError(TOO_DEEP, 0, _DEPTH_HINT) from None
    deep = too_deep(tree.body)
    if deep is not None:
        raise ExprError(TOO_DEEP, _col(deep), _DEPTH_HINT)
    return tree


#: How deeply operators, calls and parentheses may nest in one expression: far more than anyone
#: writes, and far below Python's recursion limit, which the checker, the emitters and Python's
#: own parser (in the generated tests) would otherwise reach.
MAX_DEPTH = 100
TOO_DEEP = "expression too deep"
_DEPTH_HINT = f"nest at most {MAX_DEPTH} operations, calls and parentheses"
#: How deeply the emitted C++ and numpy may nest parentheses: Python's parser refuses 200 levels
#: in the generated tests.
MAX_EMITTED_NESTING = 150


def _nesting(text: str) -> int:
    """The deepest nesting of parentheses in ``text``."""
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


def too_deep(root: ast.AST) -> ast.AST | None:
    """The first node nested deeper than :data:`MAX_DEPTH` expressions, found without recursion
    (the custom kind's output shapes are held to the same limit)."""
    stack: list[tuple[ast.AST, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return node
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node)
                     if isinstance(child, ast.expr))
    return None


class _Compiler:
    def __init__(self, symbols: Mapping[str, Type], unavailable: Mapping[str, str],
                 functions: Mapping[str, Function] = FUNCTIONS, *,
                 varying: frozenset[str] | None = None,
                 uniform: frozenset[str] = frozenset()) -> None:
        self.symbols = symbols
        self.unavailable = unavailable
        self.functions_table = functions
        self.varying = varying
        self.uniform = uniform
        self.names: set[str] = set()
        self.functions: set[str] = set()
        self.reductions: list[Reduction] = []
        self.reducing: str | None = None   # the reduction whose argument is being compiled

    def visit(self, node: ast.AST) -> _Node:
        method = getattr(self, f"_visit_{type(node).__name__}", None)
        if method is None:
            message, hint = _FORBIDDEN.get(
                type(node), (f"'{type(node).__name__}' expressions are not allowed", ""))
            raise ExprError(message, _col(node), hint)
        result: _Node = method(node)
        if self.varying is not None and isinstance(node, ast.expr) and self._varies(node):
            return dataclasses.replace(result, varies=True)
        return result

    def _varies(self, node: ast.expr) -> bool:
        """Whether ``node`` (already checked) changes along the row."""
        if isinstance(node, ast.Name):
            return self.varying is not None and node.id in self.varying
        if isinstance(node, ast.Call) and self._is_reduction(node):
            return False
        return any(isinstance(c, ast.expr) and self._varies(c)
                   for c in ast.iter_child_nodes(node)
                   if not (isinstance(node, ast.Call) and c is node.func))

    def _is_reduction(self, node: ast.Call) -> bool:
        """A call of a reduction over the row: sum or mean, or max or min of one argument."""
        return self.varying is not None and isinstance(node.func, ast.Name) and \
            node.func.id in REDUCTIONS and len(node.args) == 1 and not node.keywords and \
            (node.func.id in ("sum", "mean") or node.func.id not in self.symbols)

    def _reduction(self, node: ast.Call) -> _Node:
        name = node.func.id  # type: ignore[attr-defined]
        if self.reducing is not None:
            raise ExprError(f"{name}() inside {self.reducing}(): a reduction over the row cannot "
                            "be nested in another", _col(node),
                            "compute the inner one first as a named per-row value, "
                            "as in m: mean(x), then var: mean((x - m) ** 2)")
        if isinstance(node.args[0], ast.Starred):
            raise ExprError("starred arguments are not allowed", _col(node.args[0]))
        inner_compiler = _Compiler(self.symbols, self.unavailable, self.functions_table,
                                   varying=self.varying, uniform=self.uniform)
        inner_compiler.reducing = name
        inner = inner_compiler.visit(node.args[0])
        self._expect(inner, "num", node.args[0], f"the argument of {name}()")
        self.names |= inner_compiler.names
        self.functions |= inner_compiler.functions
        self.functions.add(name)
        index = len(self.reductions)
        self.reductions.append(Reduction(name, Emitted(
            inner.type, inner.cpp, inner.numpy, frozenset(inner_compiler.names),
            frozenset(inner_compiler.functions), varies=inner.varies)))
        return _Node("num", f"@{index}@", _ATOM, REDUCTIONS[name].format(inner.numpy), _ATOM)

    # -- leaves -------------------------------------------------------------------------------
    def _visit_Constant(self, node: ast.Constant) -> _Node:
        value = node.value
        if isinstance(value, bool):
            text = "true" if value else "false"
            return _Node("bool", text, _ATOM, repr(value), _ATOM)
        if isinstance(value, (int, float)):
            return _number(value, node)
        if isinstance(value, str):
            raise ExprError(f"string literal {value!r} is not allowed", _col(node),
                            "expressions compute numbers")
        raise ExprError(f"literal {value!r} is not allowed", _col(node),
                        "only real numbers and True/False are")

    def _visit_Name(self, node: ast.Name) -> _Node:
        name = node.id
        if name not in self.symbols:
            if name in self.unavailable:
                hint = self.unavailable[name]
            elif name in self.functions_table:
                hint = f"{name} is a function: call it, as in {name}(...)"
            else:
                usable = sorted(n for n, t in self.symbols.items() if t != "str")
                hint = "known names: " + (", ".join(usable) or "none")
            raise ExprError(f"unknown name '{name}'", _col(node), hint)
        kind = self.symbols[name]
        if kind == "str":
            raise ExprError(f"str attr '{name}' cannot be used", _col(node),
                            "only bool and numeric attrs can appear in expressions")
        self.names.add(name)
        return _Node(kind, name, _ATOM, name, _ATOM)

    # -- operators ----------------------------------------------------------------------------
    def _visit_UnaryOp(self, node: ast.UnaryOp) -> _Node:
        if isinstance(node.op, ast.Not):
            raise ExprError("'not' is not allowed", _col(node), "negate a condition with ~")
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            self._expect(operand, "num", node.operand, "unary '-'")
            literal = node.operand.value if isinstance(node.operand, ast.Constant) else None
            if isinstance(literal, (int, float)):  # a negative literal, not a negation
                return _number(-literal, node)
            # Parentheses also keep "- -x" from reading as C++'s decrement operator.
            needed = _ATOM if operand.cpp.startswith("-") else _UNARY
            return _Node("num", f"-{_wrap(operand.cpp, operand.cpp_prec, needed)}", _UNARY,
                         f"-{_wrap(operand.numpy, operand.numpy_prec, needed)}", _UNARY)
        if isinstance(node.op, ast.UAdd):
            self._expect(operand, "num", node.operand, "unary '+'")
            return operand
        self._expect(operand, "bool", node.operand, "'~'")
        return _Node("bool", f"!{_wrap(operand.cpp, operand.cpp_prec, _UNARY)}", _UNARY,
                     f"np.logical_not({operand.numpy})", _ATOM)

    def _visit_BinOp(self, node: ast.BinOp) -> _Node:
        op = type(node.op)
        if op not in _BINOPS and op not in (ast.BitAnd, ast.BitOr, ast.Pow):
            sym = _OPERATOR_NAMES.get(op, op.__name__)
            raise ExprError(f"operator {sym} is not allowed", _col(node),
                            _OPERATOR_HINTS.get(op, ""))
        left, right = self.visit(node.left), self.visit(node.right)
        if op in (ast.BitAnd, ast.BitOr):
            sym = "&" if op is ast.BitAnd else "|"
            self._expect(left, "bool", node.left, f"'{sym}'")
            self._expect(right, "bool", node.right, f"'{sym}'")
            cpp_op, prec = ("&&", _AND) if op is ast.BitAnd else ("||", _OR)
            np_fn = "np.logical_and" if op is ast.BitAnd else "np.logical_or"
            cpp = f"{_wrap_logical(left, prec, prec)} {cpp_op} " \
                  f"{_wrap_logical(right, prec, prec + 1)}"
            return _Node("bool", cpp, prec, f"{np_fn}({left.numpy}, {right.numpy})", _ATOM)
        if op is ast.Pow:
            self._expect(left, "num", node.left, "'**'")
            self._expect(right, "num", node.right, "'**'")
            self.functions.add("pow")
            return _power(left, right, node.right)
        sym, prec = _BINOPS[op]
        self._expect(left, "num", node.left, f"'{sym}'")
        self._expect(right, "num", node.right, f"'{sym}'")
        # The right operand keeps its own parentheses at equal precedence: a - (b - c), and
        # a + (b + c) stays as written, since float addition is not associative.
        cpp = f"{_wrap(left.cpp, left.cpp_prec, prec)} {sym} " \
              f"{_wrap(right.cpp, right.cpp_prec, prec + 1)}"
        if op is ast.Div and left.varies and not right.varies:
            # Row-wise, a per-element value over a per-row one (softmax's e / sum(e)): times the
            # reciprocal, which the compiler computes once per row, not one IEEE division per
            # element (a third of a 16-bit softmax's instructions on the GPU); within 1.5 ulp.
            cpp = f"{_wrap(left.cpp, left.cpp_prec, prec)} * " \
                  f"(MT(1) / {_wrap(right.cpp, right.cpp_prec, prec + 1)})"
        numpy = f"{_wrap(left.numpy, left.numpy_prec, prec)} {sym} " \
                f"{_wrap(right.numpy, right.numpy_prec, prec + 1)}"
        return _Node("num", cpp, prec, numpy, prec)

    def _visit_Compare(self, node: ast.Compare) -> _Node:
        for op in node.ops:
            if type(op) not in _CMPOPS:
                sym, hint = _COMPARISON_NAMES[type(op)]
                raise ExprError(f"'{sym}' is not allowed", _col(node), hint)
        operands = [node.left, *node.comparators]
        values = [self.visit(o) for o in operands]
        parts_cpp, parts_np = [], []
        for i, op in enumerate(node.ops):
            sym = _CMPOPS[type(op)]
            lhs, rhs = values[i], values[i + 1]
            self._expect(lhs, "num", operands[i], f"'{sym}'")
            self._expect(rhs, "num", operands[i + 1], f"'{sym}'")
            parts_cpp.append(f"{_wrap(lhs.cpp, lhs.cpp_prec, _CMP + 1)} {sym} "
                             f"{_wrap(rhs.cpp, rhs.cpp_prec, _CMP + 1)}")
            parts_np.append(f"{_wrap(lhs.numpy, lhs.numpy_prec, _CMP + 1)} {sym} "
                            f"{_wrap(rhs.numpy, rhs.numpy_prec, _CMP + 1)}")
        if len(parts_cpp) == 1:
            return _Node("bool", parts_cpp[0], _CMP, parts_np[0], _CMP)
        # A chain a < b < c means (a < b) & (b < c), as in Python.
        cpp = " && ".join(f"({p})" for p in parts_cpp)
        # Folded pairwise: a pair without an input is a plain bool, which reduce() cannot mix.
        numpy = parts_np[0]
        for part in parts_np[1:]:
            numpy = f"np.logical_and({numpy}, {part})"
        return _Node("bool", cpp, _AND, numpy, _ATOM)

    def _visit_Call(self, node: ast.Call) -> _Node:
        if self._is_reduction(node):
            return self._reduction(node)
        self._call = node
        name = self._function_name(node.func)
        if node.keywords:
            raise ExprError(f"{name}() takes no keyword arguments", _col(node.keywords[0].value),
                            "pass arguments by position")
        for arg_node in node.args:
            if isinstance(arg_node, ast.Starred):
                raise ExprError("starred arguments are not allowed", _col(arg_node))
        fn = self.functions_table[name]
        if len(node.args) != len(fn.args):
            want = len(fn.args)
            if self.varying is not None and name in REDUCTIONS:  # max(x) reduces the row
                raise ExprError(f"{name}() takes 1 or 2 arguments, got {len(node.args)}",
                                _col(node), f"call it as {name}(x), the row's "
                                f"{'maximum' if name == 'max' else 'minimum'}, or "
                                f"{name}({_signature_of(name, fn)}) of two values")
            raise ExprError(f"{name}() takes {want} argument{'s' if want != 1 else ''}, "
                            f"got {len(node.args)}", _col(node),
                            f"call it as {name}({_signature_of(name, fn)})")
        args = [self.visit(a) for a in node.args]
        for i, (arg, want_type, arg_node) in enumerate(zip(args, fn.args, node.args, strict=True)):
            self._expect(arg, want_type, arg_node, f"argument {i + 1} of {name}()")
        self.functions.add(name)
        if name == "pow":
            return _power(args[0], args[1], node.args[1])
        cpp = fn.cpp.format(*(a.cpp for a in args))
        if name in _UNIFORM_FORMS and all(self._is_uniform(a) for a in node.args[1:]):
            cpp = cpp.replace(f"opgen::{name}(", f"opgen::{name}_uniform(", 1)
        numpy = fn.numpy.format(*(a.numpy for a in args))
        return _Node(fn.result, cpp, _ATOM, numpy, _ATOM)

    def _is_uniform(self, node: ast.expr) -> bool:
        """Whether ``node`` is the same for every element: it reads only literals and
        :attr:`uniform` names (the attrs), and reduces nothing."""
        calls = [sub for sub in ast.walk(node) if isinstance(sub, ast.Call)]
        if any(self._is_reduction(call) for call in calls):
            return False
        functions = {id(call.func) for call in calls}
        return all(sub.id in self.uniform for sub in ast.walk(node)
                   if isinstance(sub, ast.Name) and id(sub) not in functions)

    def _function_name(self, func: ast.expr) -> str:
        """The called function's name, or the reason this call is outside the language."""
        table = self.functions_table
        functions = "functions: " + ", ".join(sorted(table))
        if isinstance(func, ast.Name):
            if func.id in table:
                return func.id
            if self.varying is None and func.id in ("sum", "mean") and table is FUNCTIONS:
                raise ExprError(f"unknown function '{func.id}'", _col(func),
                                "reductions over the row (sum, mean, and max or min of one "
                                "argument) are for kind: rowwise")
            if self.varying is not None and func.id in REDUCTIONS:
                given = (f"no keyword arguments, got {self._call.keywords[0].arg}="
                         if self._call.keywords else
                         f"1 argument, got {len(self._call.args)}")
                raise ExprError(f"{func.id}() takes {given}", _col(func),
                                f"call it as {func.id}(x): a reduction over the row")
            if func.id in self.symbols or func.id in self.unavailable:
                raise ExprError(f"'{func.id}' is not a function", _col(func), functions)
            raise ExprError(f"unknown function '{func.id}'", _col(func), functions)
        if isinstance(func, ast.Attribute):
            hint = f"call {func.attr}(...) directly" if func.attr in table else functions
            raise ExprError("attribute access is not allowed", _col(func), hint)
        if type(func) in _FORBIDDEN:
            message, hint = _FORBIDDEN[type(func)]
            raise ExprError(message, _col(func), hint)
        raise ExprError("only the functions of the language can be called", _col(func), functions)

    def _expect(self, value: _Node, want: Type, node: ast.AST, where: str) -> None:
        if value.type == want:
            return
        if want == "num":
            raise ExprError(f"{where} needs a number, got a condition", _col(node),
                            "use where(cond, a, b) to turn a condition into a number")
        hint = ""
        if where in ("'&'", "'|'"):
            # x > 0 & x < 1 parses as x > (0 & x) < 1: & and | bind tighter than comparisons.
            hint = "& and | bind tighter than comparisons: write (a > 0) & (a < b)"
        raise ExprError(f"{where} needs a condition (a comparison or a bool attr), got a number",
                        _col(node), hint)


_OPERATOR_NAMES = {
    ast.Mod: "'%'", ast.FloorDiv: "'//'", ast.LShift: "'<<'", ast.RShift: "'>>'",
    ast.BitXor: "'^'", ast.MatMult: "'@'",
}
_OPERATOR_HINTS = {
    ast.FloorDiv: "use floor(a / b)",
    ast.Mod: "use a - b * floor(a / b)",
    ast.BitXor: "use ** for powers",
}
_COMPARISON_NAMES: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Is: ("is", "compare numbers with =="),
    ast.IsNot: ("is not", "compare numbers with !="),
    ast.In: ("in", ""),
    ast.NotIn: ("not in", ""),
}


def _power(base: _Node, exponent: _Node, exponent_node: ast.expr) -> _Node:
    """``base ** exponent``: a square or cube as multiplications (exact to the last bit, and
    faster than ``pow``), other powers through ``opgen::pow``; numpy's ``np.power`` either way.
    A literal exponent of 0.5 is a square root on both sides: numpy's ``np.power`` computes it
    with ``sqrt`` (so ``(-inf) ** 0.5`` is NaN and ``(-0) ** 0.5`` is -0, where C's ``pow`` gives
    inf and +0), and the kernel does the same."""
    numpy = f"np.power({base.numpy}, {exponent.numpy})"
    literal = exponent_node.value if isinstance(exponent_node, ast.Constant) else None
    if literal == 0.5 and not isinstance(literal, bool):
        return _Node("num", f"opgen::sqrt({base.cpp})", _ATOM, f"np.sqrt({base.numpy})", _ATOM)
    times = int(literal) if isinstance(literal, (int, float)) and not isinstance(literal, bool) \
        and literal in (2, 3) else 0
    if not times:
        return _Node("num", f"opgen::pow({base.cpp}, {exponent.cpp})", _ATOM, numpy, _ATOM)
    if base.cpp.isidentifier():  # a name: x * x reads as written
        return _Node("num", " * ".join([base.cpp] * times), _MUL, numpy, _ATOM)
    # anything else is computed once
    helper = "square" if times == 2 else "cube"
    return _Node("num", f"opgen::{helper}({base.cpp})", _ATOM, numpy, _ATOM)


def _signature(fn: Function) -> str:
    """``x`` for one argument, else ``a, b, ...`` (``cond`` for a condition), whatever the arity."""
    names = iter(["x"] if len(fn.args) == 1 else "abcdefghijklmnopqrstuvwxyz")
    return ", ".join("cond" if t == "bool" else next(names) for t in fn.args)


def _signature_of(name: str, fn: Function) -> str:
    return ", ".join(_PARAMETERS[name]) if name in _PARAMETERS else _signature(fn)


def _number(value: int | float, node: ast.AST) -> _Node:
    """A numeric literal: an int stays exact in C++ where it fits an int, else it is a double."""
    try:
        as_float = float(value)
    except OverflowError:
        as_float = math.inf
    if not math.isfinite(as_float):
        raise ExprError("a number literal overflows to inf", _col(node))
    if isinstance(value, int) and _INT32_MIN <= value <= _INT32_MAX:
        cpp = str(value)
    else:
        cpp = repr(as_float)
    return _Node("num", f"MT({cpp})", _ATOM, repr(as_float), _ATOM)


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _wrap(text: str, prec: int, needed: int) -> str:
    return f"({text})" if prec < needed else text


def _wrap_logical(operand: _Node, prec: int, needed: int) -> str:
    """An operand of && or ||; an && inside || gets the parentheses -Wparentheses asks for."""
    if prec == _OR and operand.cpp_prec == _AND:
        return f"({operand.cpp})"
    return _wrap(operand.cpp, operand.cpp_prec, needed)


def _col(node: ast.AST) -> int:
    return getattr(node, "col_offset", 0)


# -- baselines ----------------------------------------------------------------------------------

def _framework(name: str, *args: Type) -> Function:
    """A framework function of a baseline, emitted as the same call (only its types matter)."""
    call = name + "(" + ", ".join(f"{{{i}}}" for i in range(len(args))) + ")"
    return Function(args, call, call)


#: The functions a spec's ``baseline:`` may call: framework ops that a model would chain without
#: the custom op, with one name in Paddle and PyTorch (see :func:`opgen.bench.framework_namespace`).
BASELINE_FUNCTIONS: dict[str, Function] = {
    "clip": _framework("clip", "num", "num", "num"),
    "maximum": _framework("maximum", "num", "num"),
    "minimum": _framework("minimum", "num", "num"),
    "where": _framework("where", "bool", "num", "num"),
    "pow": _framework("pow", "num", "num"),
    **{name: _framework(name, "num") for name in (
        "abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin",
        "cos", "floor", "ceil", "square", "sign", "tan", "atan", "log2", "softplus",
        "gelu", "gelu_tanh")},
    # row-wise over the last axis, for rowwise ops' baselines
    "softmax": _framework("softmax", "num"),
    "layer_norm": _framework("layer_norm", "num", "num", "num", "num"),
    "rms_norm": _framework("rms_norm", "num", "num", "num"),
}


def check_baseline(source: str, symbols: Mapping[str, Type]) -> ast.Expression:
    """Check a spec's ``baseline:`` and return the tree that ``opgen bench`` evaluates.

    The baseline is an expression of the same language, over the same names (``symbols``: the
    inputs and attrs), calling :data:`BASELINE_FUNCTIONS` instead of the language's functions;
    anything else (attributes, subscripts, lambdas, strings, other calls) is an
    :class:`ExprError`, as is a condition where a number is due. Numbers in the returned tree are
    floats, so that evaluating it never computes with Python's unbounded ints (``10 ** 10 ** 10``
    overflows at once instead of running for hours).
    """
    tree = parse_expr(source)
    node = _Compiler(symbols, {}, BASELINE_FUNCTIONS).visit(tree.body)
    if node.type != "num":
        raise ExprError("the result is a condition, not a number", 0,
                        "use where(cond, a, b) to choose between numbers")
    return ast.fix_missing_locations(_FloatLiterals().visit(tree))


class _FloatLiterals(ast.NodeTransformer):
    """Turns int literals into floats."""

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return ast.copy_location(ast.Constant(float(node.value)), node)
        return node

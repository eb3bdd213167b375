"""The expression compiler: what it accepts, what it emits as C++ and numpy, and what it refuses."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from opgen.expr import (
    BASELINE_FUNCTIONS,
    FUNCTIONS,
    Emitted,
    ExprError,
    Type,
    check_baseline,
    compile_expr,
)

SYMBOLS: dict[str, Type] = {"x": "num", "y": "num", "z": "num", "t": "num", "flag": "bool",
                            "mode": "str"}
NUMPY_GLOBALS = {"np": np, "_erf": np.vectorize(math.erf, otypes=[np.float64])}


def emit(source: str) -> Emitted:
    return compile_expr(source, SYMBOLS)


def evaluate(source: str, **values: object) -> np.ndarray:
    """The numpy emission of ``source``, run on ``values``."""
    return np.asarray(eval(emit(source).numpy, dict(NUMPY_GLOBALS), dict(values)))  # noqa: S307


# -- emission -----------------------------------------------------------------------------------

def test_relu6_emits_cpp_and_numpy() -> None:
    out = compile_expr("min(max(x, 0), t)", SYMBOLS)
    assert out.type == "num"
    assert out.cpp == "opgen::min(opgen::max_uniform(x, MT(0)), t)"
    assert out.numpy == "np.minimum(np.maximum(x, 0.0), t)"
    assert out.names == {"x", "t"}
    assert out.functions == {"min", "max"}


@pytest.mark.parametrize("source, cpp", [
    ("min(max(x, 0), t)", "opgen::min_uniform(opgen::max_uniform(x, MT(0)), t)"),
    ("clamp(x, -t, 2 * t)", "opgen::clamp_uniform(x, -t, MT(2) * t)"),
    ("max(x, exp(t) - 1.5)", "opgen::max_uniform(x, opgen::exp<T>(t) - MT(1.5))"),
    ("max(t, x)", "opgen::max(t, x)"),        # numpy's tie rule is b's: only b may be uniform
    ("min(x, y)", "opgen::min(x, y)"), ("clamp(x, 0, y)", "opgen::clamp(x, MT(0), y)"),
    ("min(x, t + y)", "opgen::min(x, t + y)"),
])
def test_min_and_max_of_a_uniform_second_argument_take_the_uniform_forms(source, cpp) -> None:
    assert compile_expr(source, SYMBOLS, uniform=frozenset({"t"})).cpp == cpp


def test_relu6_backward_emits_cpp_and_numpy() -> None:
    out = compile_expr("where((x > 0) & (x < t), y, 0)", SYMBOLS)
    assert out.cpp == "opgen::where(x > MT(0) && x < t, y, MT(0))"
    assert out.numpy == "np.where(np.logical_and(x > 0.0, x < t), y, 0.0)"


@pytest.mark.parametrize(("source", "cpp"), [
    ("x + y + z", "x + y + z"),
    ("x + (y + z)", "x + (y + z)"),            # float addition is not associative: keep it
    ("x - (y - z)", "x - (y - z)"),
    ("(x - y) - z", "x - y - z"),
    ("x * (y + z)", "x * (y + z)"),
    ("(x + y) * z", "(x + y) * z"),
    ("x * y + z", "x * y + z"),
    ("x / (y * z)", "x / (y * z)"),
    ("x / y * z", "x / y * z"),
    ("-(x + y)", "-(x + y)"),
    ("-x * y", "-x * y"),
    ("-(x * y)", "-(x * y)"),
    ("- -x", "-(-x)"),                         # not C++'s decrement operator
    ("x - -y", "x - -y"),
    ("+x", "x"),
    ("x ** 2", "x * x"),                       # squares and cubes: multiplications
    ("-x ** 2", "-(x * x)"),                   # Python: -(x ** 2)
    ("y / x ** 3", "y / (x * x * x)"),
    ("pow(x, 2.0)", "x * x"),
    ("(-x) ** 2", "opgen::square(-x)"),        # computed once
    ("(x + y) ** 3", "opgen::cube(x + y)"),
    ("x ** 4", "opgen::pow(x, MT(4))"),
    ("x ** -2", "opgen::pow(x, MT(-2))"),
    ("x ** y ** z", "opgen::pow(x, opgen::pow(y, z))"),
    ("x + y > z", "x + y > z"),
])
def test_cpp_precedence_and_parentheses(source: str, cpp: str) -> None:
    assert emit(source).cpp == cpp


@pytest.mark.parametrize(("source", "cpp", "numpy"), [
    ("(x > 0) | (y > 0) & (z > 0)", "x > MT(0) || (y > MT(0) && z > MT(0))",
     "np.logical_or(x > 0.0, np.logical_and(y > 0.0, z > 0.0))"),
    ("((x > 0) | (y > 0)) & (z > 0)", "(x > MT(0) || y > MT(0)) && z > MT(0)",
     "np.logical_and(np.logical_or(x > 0.0, y > 0.0), z > 0.0)"),
    ("~(x > 0)", "!(x > MT(0))", "np.logical_not(x > 0.0)"),
    ("~flag & (x != y)", "!flag && x != y", "np.logical_and(np.logical_not(flag), x != y)"),
    ("flag & (x > 0) | (y > 0)", "(flag && x > MT(0)) || y > MT(0)",
     "np.logical_or(np.logical_and(flag, x > 0.0), y > 0.0)"),
    ("flag | (x > 0) | (y > 0)", "flag || x > MT(0) || y > MT(0)",
     "np.logical_or(np.logical_or(flag, x > 0.0), y > 0.0)"),
    ("flag & ((x > 0) & (y > 0))", "flag && (x > MT(0) && y > MT(0))",
     "np.logical_and(flag, np.logical_and(x > 0.0, y > 0.0))"),
    ("(0 < x < 1) | flag", "((MT(0) < x) && (x < MT(1))) || flag",
     "np.logical_or(np.logical_and(0.0 < x, x < 1.0), flag)"),
    ("flag", "flag", "flag"),
    ("True", "true", "True"),
])
def test_conditions(source: str, cpp: str, numpy: str) -> None:
    out = emit(source)
    assert out.type == "bool"
    assert (out.cpp, out.numpy) == (cpp, numpy)


def test_chained_comparison_means_both() -> None:
    out = emit("0 < x <= t")
    assert out.type == "bool"
    assert out.cpp == "(MT(0) < x) && (x <= t)"
    assert out.numpy == "np.logical_and(0.0 < x, x <= t)"
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    assert evaluate("where(0 < x <= t, 1, 0)", x=x, t=1.0).tolist() == [0, 0, 1, 1, 0]


@pytest.mark.parametrize(("source", "cpp", "numpy"), [
    ("-1", "MT(-1)", "-1.0"),
    ("-2.5 * x", "MT(-2.5) * x", "-2.5 * x"),
    ("x * -2", "x * MT(-2)", "x * -2.0"),
    ("x - -1", "x - MT(-1)", "x - -1.0"),
    ("-(-1)", "-MT(-1)", "--1.0"),
    ("1e-05 * x", "MT(1e-05) * x", "1e-05 * x"),
    ("0.5", "MT(0.5)", "0.5"),
    ("100000000000000000000 * x", "MT(1e+20) * x", "1e+20 * x"),  # too big for a C++ int
    ("2147483647", "MT(2147483647)", "2147483647.0"),
])
def test_number_literals(source: str, cpp: str, numpy: str) -> None:
    out = emit(source)
    assert (out.cpp, out.numpy) == (cpp, numpy)
    values = {"x": 3.0}
    assert float(eval(out.numpy, {}, values)) == float(eval(source, {}, values))  # noqa: S307


def test_a_literal_that_overflows_is_refused() -> None:
    with pytest.raises(ExprError, match="overflows"):
        emit("1e999 * x")
    with pytest.raises(ExprError, match="overflows"):
        emit("1" + "0" * 400)
    # past Python's int-to-str limit: opgen's words, not Python's hint to raise the limit
    with pytest.raises(ExprError, match=r"^a number literal longer than \d+ digits$"):
        emit("x * " + "9" * 5000)


def test_expression_may_span_lines() -> None:
    assert emit("min(x,\n    t) +\n  1").cpp == "opgen::min(x, t) + MT(1)"


def test_pow_operator_records_the_function() -> None:
    assert emit("x ** 2").functions == {"pow"}


# -- every function ------------------------------------------------------------------------------

def _args(types: tuple[Type, ...]) -> list[str]:
    return ["x > 0" if t == "bool" else "x" for t in types]


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_with_its_arity(name: str) -> None:
    fn = FUNCTIONS[name]
    out = emit(f"{name}({', '.join(_args(fn.args))})")
    assert out.functions == {name}
    assert out.type == fn.result


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("delta", [-1, 1])
def test_every_function_refuses_a_wrong_arity(name: str, delta: int) -> None:
    fn = FUNCTIONS[name]
    count = len(fn.args) + delta
    args = ", ".join(["x"] * count)
    want = len(fn.args)
    with pytest.raises(ExprError) as info:
        emit(f"{name}({args})")
    assert info.value.message == (f"{name}() takes {want} argument{'s' * (want != 1)}, "
                                  f"got {count}")


def test_function_list_is_the_spec_format() -> None:
    assert set(FUNCTIONS) == {"abs", "min", "max", "where", "exp", "log", "log1p", "expm1",
                              "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos", "pow",
                              "floor", "ceil", "softplus", "square", "clamp", "sign", "tan",
                              "atan", "log2", "exp2"}


# -- numpy emission against hand-computed values -------------------------------------------------

X = np.array([-2.0, -0.5, 0.0, 0.5, 2.0, 7.0])


@pytest.mark.parametrize(("source", "expected"), [
    ("min(max(x, 0), 6)", [0.0, 0.0, 0.0, 0.5, 2.0, 6.0]),
    ("where((x > 0) & (x < 6), 1, 0)", [0, 0, 0, 1, 1, 0]),
    ("where((x < 0) | (x > 6), x, 0)", [-2.0, -0.5, 0, 0, 0, 7.0]),
    ("where(~(x > 0), 1, 2)", [1, 1, 1, 2, 2, 2]),
    ("abs(x)", [2.0, 0.5, 0.0, 0.5, 2.0, 7.0]),
    ("floor(x)", [-2.0, -1.0, 0.0, 0.0, 2.0, 7.0]),
    ("ceil(x)", [-2.0, 0.0, 0.0, 1.0, 2.0, 7.0]),
    ("x - 1 - 1", [-4.0, -2.5, -2.0, -1.5, 0.0, 5.0]),
    ("x - (1 - 1)", [-2.0, -0.5, 0.0, 0.5, 2.0, 7.0]),
    ("2 * x + 1", [-3.0, 0.0, 1.0, 2.0, 5.0, 15.0]),
    ("2 * (x + 1)", [-2.0, 1.0, 2.0, 3.0, 6.0, 16.0]),
    ("x / 2 / 2", [-0.5, -0.125, 0.0, 0.125, 0.5, 1.75]),
    ("x / (2 / 2)", [-2.0, -0.5, 0.0, 0.5, 2.0, 7.0]),
    ("-x ** 2", [-4.0, -0.25, 0.0, -0.25, -4.0, -49.0]),
    ("(-x) ** 2", [4.0, 0.25, 0.0, 0.25, 4.0, 49.0]),
    ("pow(x, 2)", [4.0, 0.25, 0.0, 0.25, 4.0, 49.0]),
    ("- -x", [-2.0, -0.5, 0.0, 0.5, 2.0, 7.0]),
    ("where(-1 < x < 1, x, 9)", [9.0, -0.5, 0.0, 0.5, 9.0, 9.0]),
    ("where(x == 0, 1, 0) + where(x != 0, 10, 0)", [10, 10, 1, 10, 10, 10]),
    ("where(x >= 2, 1, 0) + where(x <= -2, -1, 0)", [-1, 0, 0, 0, 1, 1]),
])
def test_numpy_emission_computes_the_hand_values(source: str, expected: list[float]) -> None:
    np.testing.assert_allclose(evaluate(source, x=X), expected, rtol=0, atol=0)


@pytest.mark.parametrize(("source", "point", "value"), [
    ("exp(x)", 1.0, math.e),
    ("log(x)", math.e, 1.0),
    ("log1p(x)", math.e - 1, 1.0),
    ("expm1(x)", math.log(3.0), 2.0),
    ("sqrt(x)", 2.25, 1.5),
    ("rsqrt(x)", 4.0, 0.5),
    ("tanh(x)", 0.0, 0.0),
    ("sigmoid(x)", 0.0, 0.5),
    ("sigmoid(x)", math.log(3.0), 0.75),
    ("erf(x)", 0.0, 0.0),
    ("erf(x)", 0.5, 0.5204998778130465),
    ("sin(x)", math.pi / 2, 1.0),
    ("cos(x)", math.pi, -1.0),
    ("min(x, 1)", 3.0, 1.0),
    ("max(x, 1)", 3.0, 3.0),
    ("pow(x, 0.5)", 9.0, 3.0),
    ("x ** -1", 4.0, 0.25),
])
def test_numpy_emission_of_each_function(source: str, point: float, value: float) -> None:
    got = evaluate(source, x=np.array([point, point]))
    np.testing.assert_allclose(got, [value, value], rtol=1e-15, atol=1e-15)


def test_bool_attr_in_numpy() -> None:
    source = "where(flag & (x > 0), x, 0)"
    assert evaluate(source, x=X, flag=True).tolist() == [0, 0, 0, 0.5, 2.0, 7.0]
    assert evaluate(source, x=X, flag=False).tolist() == [0] * 6


# -- the C++ emission, compiled and run -----------------------------------------------------------

_CPP_PRELUDE = """
#include <cmath>
#include <cstdio>
namespace opgen {
using std::abs; using std::exp; using std::log; using std::log1p; using std::expm1;
using std::sqrt; using std::tanh; using std::erf; using std::sin; using std::cos;
using std::floor; using std::ceil; using std::pow;
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline double min_uniform(double a, double b) { return std::fmin(a, b); }
inline double max_uniform(double a, double b) { return std::fmax(a, b); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
template <typename T> double tanh(double x) { return std::tanh(x); }
template <typename T> double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
template <typename MT> MT where(bool c, MT a, MT b) { return c ? a : b; }
template <typename MT> MT square(MT x) { return x * x; }
template <typename MT> MT cube(MT x) { return x * x * x; }
}  // namespace opgen
using T = double;
using MT = double;
"""

CPP_CASES = [
    "x - (y - z)", "x - y - z", "x / y / z", "x / (y / z)", "x * (y + z)", "-(x - y) * z",
    "- -x", "x - -y", "-x ** 2", "(-x) ** 2", "abs(x) ** abs(y) ** 0.5", "where(0 < x <= y, z, -1)",
    "where((x > 0) | (y > 0) & (z > 0), 1, 0)", "where(~(x > y) & (y != z), x, y)",
    "min(max(x, 0), 6) * sigmoid(y) + rsqrt(z)", "where(x < y < z, 2.5, -2.5)",
    "erf(x) + tanh(y) - expm1(z) / log1p(abs(x))", "floor(x * 2) + ceil(y / 3)",
    "x ** 2 - y ** 3 + (x - y) ** 2 / (z + x) ** 3", "pow(x, 3.0) * -y ** 2",
]
CPP_POINTS = [(0.5, 1.5, 2.0), (-1.25, 0.75, 3.0), (2.0, -0.5, 0.25), (1.0, 2.0, 3.0)]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
def test_cpp_emission_computes_what_numpy_emission_computes(tmp_path: Path) -> None:
    """The C++ text is compiled in double and run on sample points; numpy must agree."""
    body = []
    for source in CPP_CASES:
        cpp = emit(source).cpp
        body.append(f"  std::printf(\"%.17g\\n\", static_cast<double>({cpp}));")
    program = _CPP_PRELUDE + "int main() {\n  double x, y, z;\n"
    for point in CPP_POINTS:
        program += f"  x = {point[0]!r}; y = {point[1]!r}; z = {point[2]!r};\n"
        program += "\n".join(body) + "\n"
    program += "  return 0;\n}\n"
    (tmp_path / "exprs.cc").write_text(program)
    subprocess.run(["g++", "-std=c++17", "-O0", "-Wall", "-Werror", "exprs.cc", "-o", "exprs"],
                   cwd=tmp_path, check=True, capture_output=True, text=True)
    printed = subprocess.run([str(tmp_path / "exprs")], check=True, capture_output=True,
                             text=True).stdout.split()
    got = iter(float(v) for v in printed)
    for x, y, z in CPP_POINTS:
        for source in CPP_CASES:
            want = float(evaluate(source, x=np.float64(x), y=np.float64(y), z=np.float64(z)))
            assert next(got) == pytest.approx(want, rel=1e-12, abs=1e-12), (source, (x, y, z))


# -- refusals -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("source", "message"), [
    ("x +", "invalid syntax"),
    ("min(x, y", "invalid syntax: '(' was never closed"),
    ("w + 1", "unknown name 'w'"),
    ("clip(x, 0, 1)", "unknown function 'clip'"),
    ("x(1)", "'x' is not a function"),
    ("exp", "unknown name 'exp'"),
    ("x.real", "attribute access is not allowed"),
    ("np.exp(x)", "attribute access is not allowed"),
    ("x[0]", "subscripts are not allowed"),
    ("(lambda v: v)(x)", "lambdas are not allowed"),
    ("x if flag else y", "'a if cond else b' is not allowed"),
    ("where(x > 0 and y > 0, x, y)", "'and' and 'or' are not allowed"),
    ("where(not flag, x, y)", "'not' is not allowed"),
    ("x % 2", "operator '%' is not allowed"),
    ("x // 2", "operator '//' is not allowed"),
    ("x ^ 2", "operator '^' is not allowed"),
    ("x @ y", "operator '@' is not allowed"),
    ("x << 1", "operator '<<' is not allowed"),
    ("where(x is y, x, y)", "'is' is not allowed"),
    ("where(x in y, x, y)", "'in' is not allowed"),
    ("'a'", "string literal 'a' is not allowed"),
    ("f'{x}'", "strings are not allowed"),
    ("None", "literal None is not allowed"),
    ("1j", "literal 1j is not allowed"),
    ("x, y", "tuples are not allowed"),
    ("[x]", "lists are not allowed"),
    ("{x: 1}", "dicts are not allowed"),
    ("(w := x)", "assignments (:=) are not allowed"),
    ("min(*x)", "starred arguments are not allowed"),
    ("min(x, b=y)", "min() takes no keyword arguments"),
    ("mode", "str attr 'mode' cannot be used"),
    ("x + mode", "str attr 'mode' cannot be used"),
    ("(x > 0) * y", "'*' needs a number, got a condition"),
    ("-flag", "unary '-' needs a number, got a condition"),
    ("where(x, y, z)", "argument 1 of where() needs a condition"),
    ("exp(x > 0)", "argument 1 of exp() needs a number, got a condition"),
    ("~x", "'~' needs a condition"),
    ("x > 0 & y < 1", "'&' needs a condition"),
    ("(x > 0) < 1", "'<' needs a number, got a condition"),
    ("", "empty expression"),
    ("   ", "empty expression"),
    ("\uff58 + 1", "'\uff58' is not ASCII"),  # a fullwidth x, which Python would read as x
    ("x \u2212 y", "'\u2212' is not ASCII"),  # a minus sign
])
def test_refused(source: str, message: str) -> None:
    with pytest.raises(ExprError) as info:
        emit(source)
    assert info.value.message.startswith(message)
    assert "\n" not in str(info.value)


def test_forbidden_construct_messages_are_sentences() -> None:
    with pytest.raises(ExprError) as info:
        emit("x.real")
    assert str(info.value) == "attribute access is not allowed"


@pytest.mark.parametrize(("source", "hint"), [
    ("w + 1", "known names: flag, t, x, y, z"),
    ("exp", "exp is a function: call it, as in exp(...)"),
    ("np.exp(x)", "call exp(...) directly"),
    ("x > 0 & y < 1", "& and | bind tighter than comparisons: write (a > 0) & (a < b)"),
    ("x // 2", "use floor(a / b)"),
    ("min(x)", "call it as min(a, b)"),
    ("where(x > 0, x)", "call it as where(cond, a, b)"),
    ("\uff58 * 2", "names, numbers and operators in expressions are ASCII"),
])
def test_hints(source: str, hint: str) -> None:
    with pytest.raises(ExprError) as info:
        emit(source)
    assert info.value.hint == hint
    assert str(info.value) == f"{info.value.message}; {hint}"


def test_unavailable_names_get_their_own_hint() -> None:
    with pytest.raises(ExprError) as info:
        compile_expr("grad_out * x", SYMBOLS, unavailable={"grad_out": "only in backward"})
    assert (info.value.message, info.value.hint) == ("unknown name 'grad_out'", "only in backward")


def test_error_column_points_at_the_culprit() -> None:
    with pytest.raises(ExprError) as info:
        emit("x + min(y, w)")
    assert info.value.col == len("x + min(y, ")


# -- the functions of the runtime's math.h against numpy ------------------------------------------

MATH_H = Path(__file__).resolve().parents[1] / "templates/common/csrc/opgen/math.h"
#: The functions added with autodiff, over points that include NaN, infinities, zeros and ties.
MATH_CASES = ["softplus(x)", "square(x)", "sign(x)", "tan(x)", "atan(x)", "log2(x)", "exp2(x)",
              "clamp(x, y, z)", "(x + y) ** 3", "x ** 2"]
MATH_POINTS = [(0.5, -1.0, 2.0), (-3.0, -1.0, 2.0), (7.0, -1.0, 2.0), (2.0, 2.0, 2.0),
               (0.0, 3.0, 1.0), (-0.0, -1.0, 1.0), (800.0, 0.0, 1.0), (-800.0, 0.0, 1.0),
               (math.nan, 0.0, 1.0), (0.5, math.nan, 1.0), (0.5, 0.0, math.nan),
               (math.inf, 0.0, 1.0), (-math.inf, -math.inf, math.inf), (-2.0, 0.5, 4.0)]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
@pytest.mark.parametrize("mt", ["double", "float"])
def test_math_h_functions_agree_with_numpy_nan_included(tmp_path: Path, mt: str) -> None:
    """The runtime header's own functions, compiled, against the numpy emission: values, and NaN
    wherever numpy gives NaN."""
    program = [f'#include "{MATH_H}"', "#include <cstdio>", "#include <limits>",
               f"using MT = {mt};", "int main() {", "  MT x, y, z;"]
    for point in MATH_POINTS:
        values = ", ".join(f"MT({v!r})" if math.isfinite(v) else
                           ("std::numeric_limits<MT>::quiet_NaN()" if math.isnan(v) else
                            f"{'-' if v < 0 else ''}std::numeric_limits<MT>::infinity()")
                           for v in point)
        program.append(f"  {{ MT v[] = {{{values}}}; x = v[0]; y = v[1]; z = v[2]; }}")
        for source in MATH_CASES:
            program.append(f'  std::printf("%.17g\\n", static_cast<double>({emit(source).cpp}));')
    program += ["  return 0;", "}"]
    (tmp_path / "math.cc").write_text("\n".join(program) + "\n")
    subprocess.run(["g++", "-std=c++17", "-O2", "-Wall", "-Werror", "math.cc", "-o", "math"],
                   cwd=tmp_path, check=True, capture_output=True, text=True)
    printed = subprocess.run([str(tmp_path / "math")], check=True, capture_output=True,
                             text=True).stdout.split()
    got = iter(float(v) for v in printed)
    dtype = np.float64 if mt == "double" else np.float32
    rel = 1e-13 if mt == "double" else 1e-6
    with np.errstate(all="ignore"):
        for point in MATH_POINTS:
            x, y, z = (dtype(v) for v in point)
            for source in MATH_CASES:
                want = float(dtype(evaluate(source, x=x, y=y, z=z)))
                value = next(got)
                if math.isnan(want):
                    assert math.isnan(value), (source, point, value)
                else:
                    assert value == pytest.approx(want, rel=rel, abs=1e-300), (source, point)


def test_a_literal_half_power_is_a_square_root_on_both_sides() -> None:
    """numpy's np.power takes sqrt for an exponent of 0.5 ((-inf) ** 0.5 is NaN there, inf in C's
    pow): the kernel must agree with the reference at the generated tests' -inf inputs."""
    for source in ("(w + 2.25) ** 0.5", "pow(w + 2.25, 0.5)"):
        emitted = compile_expr(source, {"w": "num"})
        assert emitted.cpp == "opgen::sqrt(w + MT(2.25))"
        assert emitted.numpy == "np.sqrt(w + 2.25)"
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.power(np.array([-np.inf]), 0.5)).all()  # the rule followed


@pytest.mark.parametrize("name", sorted(BASELINE_FUNCTIONS))
@pytest.mark.parametrize("delta", [-1, 1])
def test_every_baseline_function_refuses_a_wrong_arity(name: str, delta: int) -> None:
    """layer_norm, the one function of four arguments, crashed naming its parameters
    (IndexError) instead of saying how to call it."""
    fn = BASELINE_FUNCTIONS[name]
    count = len(fn.args) + delta
    want = len(fn.args)
    with pytest.raises(ExprError) as info:
        check_baseline(f"{name}({', '.join(['x'] * count)})", {"x": "num"})
    assert info.value.message == (f"{name}() takes {want} argument{'s' * (want != 1)}, "
                                  f"got {count}")
    called = info.value.hint.removeprefix(f"call it as {name}(").removesuffix(")")
    assert len(called.split(", ")) == want


def test_the_norms_name_their_parameters_as_the_spec_format_does() -> None:
    with pytest.raises(ExprError) as info:
        check_baseline("layer_norm(x, w)", {"x": "num", "w": "num"})
    assert str(info.value) == ("layer_norm() takes 4 arguments, got 2; "
                               "call it as layer_norm(x, w, b, eps)")
    with pytest.raises(ExprError) as info:
        check_baseline("rms_norm(x)", {"x": "num"})
    assert info.value.hint == "call it as rms_norm(x, w, eps)"

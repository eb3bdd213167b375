"""A spec's ``baseline:`` (issue 10 §6): checked with the expression language's allowlist when the
spec loads (malformed ones are in specs/malformed/baseline_*.yaml), and ``opgen bench`` evaluates
only the checked tree, with no builtins.
"""

from __future__ import annotations

import ast
import textwrap
import time
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import RELU6

from opgen import bench
from opgen.errors import BenchError
from opgen.expr import BASELINE_FUNCTIONS, ExprError, check_baseline
from opgen.spec import load, loads


def _spec_with(attrs: str, baseline: str):
    return loads(textwrap.dedent(f"""\
        name: limited
        kind: elementwise
        inputs: [x, y]
        outputs: [out]
        attrs:
        {textwrap.indent(attrs, "  ")}
        forward:
          out: x + y
        baseline: {baseline}
        """), "/specs/limited/limited.yaml")


def test_the_examples_baselines_still_load():
    relu6 = load(RELU6 / "relu6.yaml")
    assert isinstance(relu6.baseline, ast.Expression)
    assert ast.unparse(relu6.baseline) == "clip(maximum(x, 0.0), 0.0, threshold)"
    quickstart = _spec_with("limit: {type: float, default: 1.0}", "clip(x, -limit, limit)")
    assert ast.unparse(quickstart.baseline) == "clip(x, -limit, limit)"


def test_a_spec_without_a_baseline_has_none():
    assert _spec_with("k: {type: int, default: 1}", "null").baseline is None


def test_baselines_use_every_function_operators_and_bool_attrs():
    symbols = {"x": "num", "y": "num", "flag": "bool"}
    check_baseline("maximum(x ** 2 - y / 3, -1) + abs(+y) * where((x > 0) & ~(y < x) | flag, "
                   "x, 0)", symbols)
    for name, fn in BASELINE_FUNCTIONS.items():
        args = ", ".join("flag" if t == "bool" else "x" for t in fn.args)
        check_baseline(f"{name}({args})", symbols)


def test_numbers_in_the_checked_tree_are_floats():
    """So 10 ** 10 ** 10 overflows at once instead of computing a huge Python int."""
    tree = check_baseline("x ** 10 ** 10 + 1", {"x": "num"})
    numbers = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert sorted(numbers) == [1.0, 10.0, 10.0] and all(type(v) is float for v in numbers)
    with pytest.raises(OverflowError):
        bench.evaluate_baseline(bench.compile_baseline(check_baseline("10 ** 10 ** 10", {})),
                                {}, {}, {})


@pytest.mark.parametrize("source", ["str(x)", "x.real", "getattr(x, 'real')", "x[0]",
                                    "(lambda: x)()", "[x][0]", "{x}", "open('f')", "x if x else y"])
def test_anything_outside_the_allowlist_is_refused(source):
    with pytest.raises(ExprError):
        check_baseline(source, {"x": "num", "y": "num"})


def test_a_compiled_baseline_sees_no_builtins():
    tree = ast.Expression(ast.Call(ast.Name("len", ast.Load()), [ast.Constant("ab")], []))
    with pytest.raises(NameError, match="'len'"):
        bench.evaluate_baseline(bench.compile_baseline(ast.fix_missing_locations(tree)),
                                {}, {}, {})


def test_a_function_in_c_that_imports_as_it_runs_works_in_a_baseline():
    """PyTorch's C functions import modules lazily on some machines; CPython takes __import__
    from the calling frame's builtins, the baseline's (round 33 on an H100: relu6's bench lost
    its PyTorch rows to ``KeyError: '__import__'``). time.strptime imports _strptime the same
    way, from C, on every call."""
    tree = ast.Expression(ast.Call(ast.Name("f", ast.Load()),
                                   [ast.Name("s", ast.Load()), ast.Constant("%Y")], []))
    got = bench.evaluate_baseline(bench.compile_baseline(ast.fix_missing_locations(tree)),
                                  {"f": time.strptime}, {}, {"s": "2020"})
    assert got.tm_year == 2020
    with pytest.raises(ExprError):
        check_baseline("__import__('os')", {})


def test_the_framework_namespace_has_exactly_the_baseline_functions():
    paddle = pytest.importorskip("paddle")
    like = paddle.zeros([3], "float32")
    assert set(bench.framework_namespace(paddle, like, "paddle")) == set(BASELINE_FUNCTIONS)


def test_a_function_a_framework_keeps_elsewhere_or_lacks_is_found_or_named_when_called():
    # Paddle 2.6 has sigmoid only as paddle.nn.functional.sigmoid (measured with 2.6.2)
    def sigmoid(u):
        return 1 / (1 + np.exp(-u))
    fw = SimpleNamespace(__name__="fakefw", __version__="0.1", nn=SimpleNamespace(
        functional=SimpleNamespace(sigmoid=sigmoid, softplus=None, gelu=None)),
        clip=None, maximum=None, minimum=None, where=None, pow=None, exp=np.exp)
    functions = bench.framework_namespace(fw, np.zeros(3), "paddle")
    assert set(functions) == set(BASELINE_FUNCTIONS)
    assert functions["sigmoid"] is sigmoid and functions["exp"] is np.exp
    tree = check_baseline("sigmoid(x) * exp(x)", {"x": "num"})
    got = bench.evaluate_baseline(bench.compile_baseline(tree), functions, {}, {"x": np.ones(2)})
    np.testing.assert_allclose(got, np.full(2, np.e / (1 + np.exp(-1))))
    tree = check_baseline("erf(x)", {"x": "num"})
    with pytest.raises(BenchError, match=r"calls erf\(\), which fakefw 0.1 has neither"):
        bench.evaluate_baseline(bench.compile_baseline(tree), functions, {}, {"x": np.ones(2)})


def test_bench_evaluates_the_checked_tree_with_paddle():
    paddle = pytest.importorskip("paddle")
    spec = load(RELU6 / "relu6.yaml")
    x = np.linspace(-3, 9, 13, dtype=np.float32)
    like = paddle.to_tensor(x)
    got = bench.evaluate_baseline(bench.compile_baseline(spec.baseline),
                                  bench.framework_namespace(paddle, like, "paddle"),
                                  {"threshold": 6.0}, {"x": like})
    np.testing.assert_array_equal(got.numpy(), np.clip(x, 0, 6))
    row = bench.bench_paddle_baseline(spec.baseline, ["x"], {"threshold": 6.0}, 1, [(-2, 8)],
                                      "float32", 1024, repeats=1)
    assert row.kernel == "baseline" and row.ms > 0


def test_the_torch_subprocess_is_given_the_symbols_to_check_again():
    spec = load(RELU6 / "relu6.yaml")
    assert bench.baseline_symbols(spec) == {"x": "num", "threshold": "num"}


def test_the_baseline_functions_added_with_autodiff_run_in_paddle():
    paddle = pytest.importorskip("paddle")
    x = np.linspace(-1.2, 1.2, 9)
    like = paddle.to_tensor(x)
    source = "softplus(x) + square(x) + sign(x) * tan(x) + atan(x) + log2(abs(x) + 1)"
    got = bench.evaluate_baseline(bench.compile_baseline(check_baseline(source, {"x": "num"})),
                                  bench.framework_namespace(paddle, like, "paddle"), {},
                                  {"x": like})
    want = np.logaddexp(0, x) + x * x + np.sign(x) * np.tan(x) + np.arctan(x) + \
        np.log2(np.abs(x) + 1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)

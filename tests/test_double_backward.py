"""Double backward derived by opgen (``PD_BUILD_DOUBLE_GRAD_OP``): a one-input op, and one of
three broadcasting inputs, whose backwards are differentiable in the language, built once each on
the CPU; their second-order gradients through ``paddle.grad(create_graph=True)`` equal those of
the same functions written with Paddle's own ops (each in its tensor's shape where the inputs
broadcast), and their generated tests (numpy reference, finite differences of the first
gradient) pass."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, run_opgen

from opgen.spec import loads

pytestmark = pytest.mark.build

SPEC = """\
name: gelu_twice
op_name: custom_gelu_twice
kind: elementwise
summary: GELU (tanh approximation), differentiable twice
inputs: [x]
outputs: [out]
dtypes: [float32, float64]
domain:
  x: [-4.0, 4.0]
forward:
  u: 0.7978845608028654 * (x + 0.044715 * x ** 3)
  out: 0.5 * x * (1 + tanh(u))
backward: auto
"""


@pytest.fixture(scope="module")
def op_dir(tmp_path_factory):
    import opgen

    folder = tmp_path_factory.mktemp("ops") / "gelu_twice"
    folder.mkdir()
    (folder / "gelu_twice.yaml").write_text(SPEC)
    opgen.generate(folder / "gelu_twice.yaml")
    return folder


def test_second_order_gradients_match_paddles_own_ops(op_dir):
    import paddle

    import opgen

    module = opgen.load(op_dir, cpu_only=True)
    rng = np.random.default_rng(0)
    x_np = rng.uniform(-4, 4, size=(5, 203))
    dy_np, ddx_np = rng.uniform(-1, 1, size=(2, 5, 203))
    results = []
    def composed(t):  # Paddle's F.gelu has no double grad; its ops composed do
        return 0.5 * t * (1 + paddle.tanh(0.7978845608028654 * (t + 0.044715 * t ** 3)))

    for op in (module.gelu_twice, composed):
        x = paddle.to_tensor(x_np, stop_gradient=False)
        dy = paddle.to_tensor(dy_np, stop_gradient=False)
        (dx,) = paddle.grad([op(x)], [x], grad_outputs=[dy], create_graph=True)
        second = paddle.grad([dx], [x, dy], grad_outputs=[paddle.to_tensor(ddx_np)])
        results.append([dx.numpy(), *(g.numpy() for g in second)])
    for name, ours, theirs in zip(["grad_x", "d grad_x / dx", "d grad_x / d grad_out"],
                                  *results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12, err_msg=name)


def test_the_generated_double_backward_tests_pass(op_dir):
    result = run_opgen("test", str(op_dir), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                       "-k", "double_backward", "-x")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 passed" in result.stdout, result.stdout[-1000:]  # 2 dtypes, and finite differences


# Three inputs that broadcast: x [N, C], y [C], b [N, 1]. The double backward gives x's, y's and
# grad_out's gradients (b's is zero), reads neither x nor y where it gives their own gradients
# (d/dx = grad_grad_y * grad_out), and reads grad_grad_b of b's shape.
BROADCAST_SPEC = """\
name: mul_add
op_name: custom_mul_add
kind: elementwise
summary: x * y + b, differentiable twice
inputs: [x, y, b]
outputs: [out]
dtypes: [float32, float64]
forward:
  out: x * y + b
backward: auto
"""


@pytest.fixture(scope="module")
def broadcast_op_dir(tmp_path_factory):
    import opgen

    folder = tmp_path_factory.mktemp("ops") / "mul_add"
    folder.mkdir()
    (folder / "mul_add.yaml").write_text(BROADCAST_SPEC)
    opgen.generate(folder / "mul_add.yaml")
    return folder


@pytest.mark.parametrize("gradients", ["all", "grad_x", "grad_b"])
def test_broadcast_second_order_gradients_match_paddles_own_ops(broadcast_op_dir, gradients):
    """Every input's and grad_out's second-order gradient, each in its tensor's shape, from the
    gradients reaching every input gradient, or one of them only (the others missing)."""
    import paddle

    import opgen

    module = opgen.load(broadcast_op_dir, cpu_only=True)
    rng = np.random.default_rng(1)
    shapes = {"x": (5, 203), "y": (203,), "b": (5, 1)}
    arrays = {n: rng.uniform(-2, 2, size=s) for n, s in shapes.items()}
    dy_np = rng.uniform(-1, 1, size=(5, 203))
    ddx = {f"grad_{n}": rng.uniform(-1, 1, size=s) for n, s in shapes.items()}
    chosen = list(ddx) if gradients == "all" else [gradients]
    results = []
    for op in (module.mul_add, lambda x, y, b: x * y + b):
        inputs = [paddle.to_tensor(a, stop_gradient=False) for a in arrays.values()]
        dy = paddle.to_tensor(dy_np, stop_gradient=False)
        grads = dict(zip(ddx, paddle.grad([op(*inputs)], inputs, grad_outputs=[dy],
                                          create_graph=True), strict=True))
        second = paddle.grad([grads[n] for n in chosen], [*inputs, dy], allow_unused=True,
                             grad_outputs=[paddle.to_tensor(ddx[n]) for n in chosen])
        results.append([None if g is None or not np.any(g.numpy()) else g.numpy()
                        for g in second])
    for name, ours, theirs in zip([*shapes, "grad_out"], *results, strict=True):
        if theirs is None:  # Paddle's ops give none, or zeros
            assert ours is None, name
            continue
        assert ours is not None and ours.shape == theirs.shape, (name, ours)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, err_msg=name)


def test_the_generated_broadcast_double_backward_tests_pass(broadcast_op_dir):
    result = run_opgen("test", str(broadcast_op_dir), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings", "-k", "double_backward", "-x")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    # 2 dtypes, one gradient at a time for each of 3, and finite differences
    assert "6 passed" in result.stdout, result.stdout[-1000:]


def test_what_cannot_be_derived_keeps_the_clear_error():
    """A backward whose result depends on the forward's outputs: no double backward, the stub's
    error. Several inputs have one."""
    from_out = loads(SPEC.replace("backward: auto", "backward:\n  x: grad_out * out"), "g.yaml")
    assert from_out.double_backward is None
    derived = loads(SPEC, "g.yaml")
    assert derived.double_backward is not None
    assert set(derived.double_backward_source) >= {"x", "grad_out"}
    two = loads(SPEC.replace("inputs: [x]", "inputs: [x, b]").replace(
        "0.5 * x * (1 + tanh(u))", "0.5 * x * (1 + tanh(u)) + b"), "g.yaml")
    assert two.double_backward is not None
    assert set(two.double_backward_source) >= {"x", "grad_out"}
    assert "b" not in two.double_backward_source  # its gradient is zero
    two_from_out = loads(BROADCAST_SPEC.replace("backward: auto", "backward:\n  x: grad_out * y"
                                                "\n  y: grad_out * out\n  b: grad_out"), "g.yaml")
    assert two_from_out.double_backward is None


def test_a_backward_from_the_outputs_refuses_a_second_derivative(tmp_path):
    """Built and run: asking for the second derivative of an op without one is the stub's clear
    error, not a number (its generated test)."""
    import opgen

    folder = tmp_path / "exp_once"
    folder.mkdir()
    (folder / "exp_once.yaml").write_text(SPEC.replace("gelu_twice", "exp_once").replace(
        "  u: 0.7978845608028654 * (x + 0.044715 * x ** 3)\n  out: 0.5 * x * (1 + tanh(u))",
        "  out: exp(x)").replace("backward: auto", "backward:\n  x: grad_out * out"))
    opgen.generate(folder / "exp_once.yaml")
    result = run_opgen("test", str(folder), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                       "-k", "double_backward", "-x")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout, result.stdout[-1000:]


@pytest.mark.parametrize("which", ["relu6", "mul_add"])
def test_second_order_gradients_through_the_op_inside_a_larger_function(which, broadcast_op_dir):
    """d/dx of a weighted sum of d/dx sum(f(x) * x), where f is the op, equals the same written
    with Paddle's own ops. The double backward gives a gradient for every input of the backward
    (relu6's out, which its backward reads; mul_add's b, read for its shape): before, it gave
    none for those, and Paddle lost every gradient around the op (no path to x at all)."""
    import paddle

    import opgen

    rng = np.random.default_rng(2)
    if which == "relu6":
        op = opgen.load(ROOT / "examples" / "relu6", cpu_only=True).relu6
        arrays = {"x": rng.uniform(-2, 8, size=(5, 203))}
        ops = (op, lambda t: paddle.nn.functional.relu(t) - paddle.nn.functional.relu(t - 6))
    else:
        op = opgen.load(broadcast_op_dir, cpu_only=True).mul_add
        arrays = {n: rng.uniform(-2, 2, size=s)
                  for n, s in {"x": (5, 203), "y": (203,), "b": (5, 1)}.items()}
        ops = (op, lambda x, y, b: x * y + b)
    weights = rng.uniform(-1, 1, size=(5, 203))
    results = []
    for f in ops:
        inputs = [paddle.to_tensor(a, stop_gradient=False) for a in arrays.values()]
        (g,) = paddle.grad([(f(*inputs) * inputs[0]).sum()], [inputs[0]], create_graph=True)
        second = paddle.grad([(g * paddle.to_tensor(weights)).sum()], inputs, allow_unused=True)
        results.append([None if s is None else s.numpy() for s in second])
    for name, ours, theirs in zip(arrays, *results, strict=True):
        assert ours is not None and theirs is not None, name
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("example", ["softmax", "embedding"])
def test_a_second_derivative_through_a_kind_without_one_is_a_clear_error(example):
    """Row-wise and custom ops register a double backward that refuses, as elementwise ops whose
    backward cannot be differentiated do: before, Paddle took their backward's results for
    constants in a second derivative (an identity custom op's d2(op(x) * x)/dx2 came out as 1,
    where 2 is right) or failed with no word of the op."""
    import paddle

    import opgen

    module = opgen.load(ROOT / "examples" / example, cpu_only=True)
    rng = np.random.default_rng(3)
    if example == "softmax":
        x = paddle.to_tensor(rng.uniform(-1, 1, size=(4, 7)), stop_gradient=False)
        loss = (module.softmax(x) * x).sum()
    else:
        x = paddle.to_tensor(rng.uniform(-1, 1, size=(5, 3)), stop_gradient=False)
        out = module.embedding(paddle.to_tensor(np.array([0, 2, 2, 4])), x)
        loss = (out * out).sum()
    (g,) = paddle.grad([loss], [x], create_graph=True)
    with pytest.raises(Exception, match=f"custom_{example} has no double backward"):
        paddle.grad([g.sum()], [x])

"""Double backward derived by opgen (``PD_BUILD_DOUBLE_GRAD_OP``): a one-input op whose backward
is differentiable in the language, built once on the CPU; its second-order gradients through
``paddle.grad(create_graph=True)`` equal those of the same function written with Paddle's own
ops, and its generated tests (numpy reference, finite differences of the first gradient) pass."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_opgen

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


def test_what_cannot_be_derived_keeps_the_clear_error():
    """Two inputs (tensors of different shapes), or a backward whose result depends on the
    forward's outputs: no double backward, the stub's error."""
    two = loads(SPEC.replace("inputs: [x]", "inputs: [x, b]").replace(
        "0.5 * x * (1 + tanh(u))", "0.5 * x * (1 + tanh(u)) + b"), "g.yaml")
    assert two.backward is not None and two.double_backward is None
    from_out = loads(SPEC.replace("backward: auto", "backward:\n  x: grad_out * out"), "g.yaml")
    assert from_out.double_backward is None
    derived = loads(SPEC, "g.yaml")
    assert derived.double_backward is not None
    assert set(derived.double_backward_source) >= {"x", "grad_out"}

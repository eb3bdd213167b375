"""More specs in the v1 format, generated, built (several ops, one build each) and compared with
Paddle's own ops on the CPU, forward and gradient."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.build

SPECS = {
    "my_sigmoid": ("""
        inputs: [x]
        outputs: [out]
        forward:
          out: sigmoid(x)
        backward:
          x: grad_out * out * (1 - out)
        """, lambda F, x: F.sigmoid(x)),
    "my_gelu": ("""
        inputs: [x]
        outputs: [out]
        forward:
          out: 0.5 * x * (1 + erf(x * 0.7071067811865476))
        backward:
          x: >-
            grad_out * (0.5 * (1 + erf(x * 0.7071067811865476))
                        + x * exp(-0.5 * x * x) * 0.3989422804014327)
        """, lambda F, x: F.gelu(x)),
    "my_leaky": ("""
        inputs: [x]
        outputs: [out]
        attrs:
          slope: {type: float, default: 0.01}
        forward:
          out: where(x > 0, x, slope * x)
        backward:
          x: where(x > 0, grad_out, slope * grad_out)
        """, lambda F, x: F.leaky_relu(x, 0.01)),
    "my_swish_mul": ("""
        inputs: [x, y]
        outputs: [out]
        forward:
          out: x * sigmoid(x) * y
        backward:
          x: grad_out * y * (sigmoid(x) * (1 + x * (1 - sigmoid(x))))
          y: grad_out * x * sigmoid(x)
        """, lambda F, x, y: F.silu(x) * y),
}


def _write(tmp_path, name, body):
    op = tmp_path / name
    op.mkdir()
    text = f"name: {name}\nkind: elementwise\ndtypes: [float32, float64]\n" + \
        textwrap.dedent(body)
    (op / f"{name}.yaml").write_text(text)
    return op


@pytest.mark.parametrize("name", sorted(SPECS))
def test_generated_op_matches_paddle(tmp_path, name):
    import paddle
    import paddle.nn.functional as F

    import opgen

    body, reference = SPECS[name]
    # Paddle's float attrs are 32-bit (the attr type string must be "float"), so a float64 op
    # with an attr agrees with Paddle's (double-precision) op only to float32 precision there.
    rtol = 1e-7 if "attrs:" in body else 1e-12
    op_dir = _write(tmp_path, name, body)
    opgen.generate(op_dir / f"{name}.yaml")
    module = opgen.load(op_dir, cpu_only=True)
    fn = getattr(module, name)
    n_in = body.count(",") + 1 if "inputs: [x, y]" in body else 1
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-3, 3, size=(7, 129)) for _ in range(n_in)]
    ours_in = [paddle.to_tensor(a, stop_gradient=False) for a in arrays]
    theirs_in = [paddle.to_tensor(a, stop_gradient=False) for a in arrays]
    ours, theirs = fn(*ours_in), reference(F, *theirs_in)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=rtol, atol=1e-12)
    grad_out = paddle.to_tensor(rng.uniform(-1, 1, size=arrays[0].shape))
    ours_grads = paddle.grad([ours], ours_in, grad_outputs=[grad_out])
    theirs_grads = paddle.grad([theirs], theirs_in, grad_outputs=[grad_out])
    for a, b in zip(ours_grads, theirs_grads, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=max(rtol, 1e-10), atol=1e-12)

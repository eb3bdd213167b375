"""More specs in the v1 format, generated, built (several ops, one build each) and compared with
Paddle's own ops on the CPU, forward and gradient."""

from __future__ import annotations

import struct
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
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)
    grad_out = paddle.to_tensor(rng.uniform(-1, 1, size=arrays[0].shape))
    ours_grads = paddle.grad([ours], ours_in, grad_outputs=[grad_out])
    theirs_grads = paddle.grad([theirs], theirs_in, grad_outputs=[grad_out])
    for a, b in zip(ours_grads, theirs_grads, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


EXACT_LEAKY = """\
name: exact_leaky
kind: elementwise
inputs: [x]
outputs: [out]
attrs:
  alpha: {type: float, default: 0.02}
forward:
  out: where(x > 0, x, alpha * x)
backward:
  x: where(x > 0, grad_out, alpha * grad_out)
"""


def float_bits(value: float) -> int:
    """A float attr as the raw op takes it: the 64 bits of the double, as an int64."""
    return struct.unpack("q", struct.pack("d", value))[0]


@pytest.fixture(scope="module")
def exact_leaky(tmp_path_factory):
    import opgen

    spec = tmp_path_factory.mktemp("ops") / "exact_leaky" / "exact_leaky.yaml"
    spec.parent.mkdir()
    spec.write_text(EXACT_LEAKY)
    opgen.generate(spec)
    return opgen.load(spec.parent, cpu_only=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("alpha", [None, 0.02, 0.3])
def test_float_attrs_are_exact_in_float64_kernels(exact_leaky, dtype, alpha):
    """Paddle's own leaky_relu takes alpha as a double in float64 (a float in float32): ours must
    agree bit for bit, forward and backward, up to |x| = 8."""
    import paddle
    import paddle.nn.functional as F

    # No x = 0: Paddle's gradient there is grad_out, the spec's is alpha * grad_out.
    data = np.concatenate([np.linspace(-8, 8, 4096), [-7.9, -1e-3, 1e-3]]).astype(dtype)
    ours_x = paddle.to_tensor(data, stop_gradient=False)
    theirs_x = paddle.to_tensor(data, stop_gradient=False)
    ours = exact_leaky.exact_leaky(ours_x) if alpha is None else \
        exact_leaky.exact_leaky(ours_x, alpha=alpha)
    theirs = F.leaky_relu(theirs_x, 0.02 if alpha is None else alpha)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    grad_out = paddle.to_tensor(np.linspace(-1, 1, data.size).astype(dtype))
    (ours_grad,) = paddle.grad([ours], [ours_x], grad_outputs=[grad_out])
    (theirs_grad,) = paddle.grad([theirs], [theirs_x], grad_outputs=[grad_out])
    np.testing.assert_array_equal(ours_grad.numpy(), theirs_grad.numpy())


def test_float_attrs_of_the_raw_op_in_a_static_graph(exact_leaky):
    """The registered op (not the wrapper) in Paddle's static graph, run by an Executor on the
    CPU: its float attr travels as an int64 attr holding the double's bits."""
    import paddle

    data = np.linspace(-8, 8, 257)
    raw_op = exact_leaky._ops().custom_exact_leaky
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [257], "float64")
            out = raw_op(x, float_bits(0.02))
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        (got,) = exe.run(main, feed={"x": data}, fetch_list=[out])
    finally:
        paddle.disable_static()
    np.testing.assert_array_equal(got, np.where(data > 0, data, data * 0.02))

"""examples/bias_gelu built and run for real: its generated tests, and agreement with Paddle's own
``F.gelu(x + bias, approximate=True)`` (forward and both gradients) on the CPU, over the
broadcast shapes a model uses; and its second-order gradients with those of the same function
composed of Paddle's ops (F.gelu has no double grad)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BIAS_GELU, GPU_PYTHON, run_opgen

pytestmark = pytest.mark.build


@pytest.fixture(scope="module")
def bias_gelu_op():
    import opgen

    return opgen.load(BIAS_GELU, cpu_only=True)


def test_generated_tests_pass_on_cpu():
    result = run_opgen("test", str(BIAS_GELU), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("x_shape", "bias_shape"), [
    ((64, 1024), (1024,)),      # activations [N, C] and a bias [C]
    ((2, 8, 129), (129,)),      # [B, S, C], C not a multiple of the vector width
    ((4, 3, 5), (3, 1)),        # a bias per row
    ((7, 9), ()),               # a 0-D bias
    ((16,), (16,)),             # the same shape
])
def test_matches_paddle_gelu_of_x_plus_bias(bias_gelu_op, dtype, x_shape, bias_shape):
    import paddle
    import paddle.nn.functional as F

    rng = np.random.default_rng(0)
    x_np = rng.uniform(-5, 5, size=x_shape).astype(dtype)
    bias_np = rng.uniform(-1, 1, size=bias_shape).astype(dtype)
    ours_x, theirs_x = (paddle.to_tensor(x_np, stop_gradient=False) for _ in range(2))
    ours_b, theirs_b = (paddle.to_tensor(bias_np, stop_gradient=False) for _ in range(2))
    ours = bias_gelu_op.bias_gelu(ours_x, ours_b)
    theirs = F.gelu(theirs_x + theirs_b, approximate=True)
    rtol = 1e-13 if dtype == "float64" else 2e-6
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=rtol, atol=rtol)
    grad_out = paddle.to_tensor(rng.uniform(-1, 1, size=theirs.shape).astype(dtype))
    ours_grads = paddle.grad([ours], [ours_x, ours_b], grad_outputs=[grad_out])
    theirs_grads = paddle.grad([theirs], [theirs_x, theirs_b], grad_outputs=[grad_out])
    for name, got, want in zip(["grad_x", "grad_bias"], ours_grads, theirs_grads, strict=True):
        assert got.shape == want.shape, name
        # grad_bias sums up to 8192 terms: in float32, the two sums round differently
        scale = np.abs(want.numpy()).max() + 1 if name == "grad_bias" else 1
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol,
                                   atol=rtol * scale * (64 if dtype == "float32" else 1),
                                   err_msg=name)


@pytest.mark.parametrize(("x_shape", "bias_shape"), [
    ((6, 129), (129,)), ((4, 3, 5), (3, 1)), ((7, 9), ()), ((16,), (16,)),
])
def test_second_order_gradients_match_paddles_own_ops(bias_gelu_op, x_shape, bias_shape):
    """paddle.grad(create_graph=True) twice, in float64: the gradients of x, bias and grad_out,
    each in its tensor's shape."""
    import paddle

    def composed(x, bias):
        u = x + bias
        return 0.5 * u * (1 + paddle.tanh(0.7978845608028654 * (u + 0.044715 * u ** 3)))

    rng = np.random.default_rng(1)
    arrays = [rng.uniform(-3, 3, size=x_shape), rng.uniform(-1, 1, size=bias_shape)]
    grad_out_np = rng.uniform(-1, 1, size=x_shape)
    grad_grads = [rng.uniform(-1, 1, size=x_shape), rng.uniform(-1, 1, size=bias_shape)]
    results = []
    for op in (bias_gelu_op.bias_gelu, composed):
        inputs = [paddle.to_tensor(a, stop_gradient=False) for a in arrays]
        grad_out = paddle.to_tensor(grad_out_np, stop_gradient=False)
        grads = paddle.grad([op(*inputs)], inputs, grad_outputs=[grad_out], create_graph=True)
        second = paddle.grad(list(grads), [*inputs, grad_out],
                             grad_outputs=[paddle.to_tensor(g) for g in grad_grads])
        results.append([g.numpy() for g in second])
    for name, ours, theirs in zip(["x", "bias", "grad_out"], *results, strict=True):
        assert ours.shape == theirs.shape, name
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, err_msg=name)


def test_a_strided_view_gives_what_its_dense_copy_gives_forward_and_backward(bias_gelu_op):
    # Paddle 3 hands the view to the op as it is (the wrapper no longer copies it): the kernels
    # make it dense, in the forward and in the backward, which reads x again
    import paddle

    rng = np.random.default_rng(0)
    base = paddle.to_tensor(rng.uniform(-3, 3, (64, 66)).astype("float32"), stop_gradient=False)
    bias = paddle.to_tensor(rng.uniform(-1, 1, (64,)).astype("float32"), stop_gradient=False)
    view = base[:, 1:65]
    assert not view.is_contiguous()
    dense = paddle.to_tensor(view.numpy(), stop_gradient=False)
    grad = paddle.to_tensor(rng.uniform(-1, 1, (64, 64)).astype("float32"))
    out, want = bias_gelu_op.bias_gelu(view, bias), bias_gelu_op.bias_gelu(dense, bias)
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    got_x, got_bias = paddle.grad([out], [base, bias], grad_outputs=[grad])
    want_x, want_bias = paddle.grad([want], [dense, bias], grad_outputs=[grad])
    np.testing.assert_array_equal(got_x.numpy()[:, 1:65], want_x.numpy())
    assert not got_x.numpy()[:, [0, 65]].any()  # the columns the view leaves out
    np.testing.assert_array_equal(got_bias.numpy(), want_bias.numpy())


def test_shapes_that_do_not_broadcast_are_refused_naming_both(bias_gelu_op):
    import paddle

    with pytest.raises(ValueError, match=r"bias_gelu: the inputs' shapes do not broadcast: "
                                         r"x \[4, 8\], bias \[3\]"):
        bias_gelu_op.bias_gelu(paddle.ones([4, 8]), paddle.ones([3]))


def test_an_eager_tensor_beside_a_static_variable_is_refused_in_python(bias_gelu_op):
    """In static mode the wrapper's static checks run when an input is not an eager tensor, and
    refuse the inputs that are (Paddle's static API aborts the process on them)."""
    import paddle

    bias = paddle.zeros([4])
    paddle.enable_static()
    try:
        x = paddle.static.data("x", [2, 4], "float32")
        with pytest.raises(TypeError, match="bias_gelu: bias is an eager paddle.Tensor, but "
                                            "Paddle is in static mode"):
            bias_gelu_op.bias_gelu(x, bias)
    finally:
        paddle.disable_static()


@pytest.mark.skipif(not GPU_PYTHON.exists(), reason="no .venv-gpu (paddlepaddle-gpu 2.6.2)")
def test_cuda_sources_compile_and_link_against_paddle_2_6():
    result = run_opgen("build", str(BIAS_GELU), "--arch", "90", python=GPU_PYTHON)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

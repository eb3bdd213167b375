"""examples/relu6 built and run for real: its generated tests, and agreement with Paddle's own
``paddle.nn.functional.relu6`` (forward and gradient) on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import RELU6, run_opgen

pytestmark = pytest.mark.build


@pytest.fixture(scope="module")
def relu6_op():
    import opgen

    return opgen.load(RELU6, cpu_only=True)


def test_generated_tests_pass_on_cpu():
    result = run_opgen("test", str(RELU6), "--device", "cpu", "--", "-q", "-p", "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threshold", [6.0, 2.5])
def test_matches_paddle_builtin_relu6(relu6_op, dtype, threshold):
    import paddle
    import paddle.nn.functional as F

    rng = np.random.default_rng(0)
    data = rng.uniform(-3, 9, size=(17, 33)).astype(dtype)
    data[0, :4] = [0.0, threshold, -0.0, 6.0]  # the kinks themselves
    ours_x = paddle.to_tensor(data, stop_gradient=False)
    theirs_x = paddle.to_tensor(data, stop_gradient=False)
    ours = relu6_op.relu6(ours_x, threshold=threshold)
    # Paddle's relu6 has a fixed threshold of 6; hardtanh(0, t) is the same function for any t.
    theirs = F.relu6(theirs_x) if threshold == 6.0 else F.hardtanh(theirs_x, 0.0, threshold)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    grad_out = paddle.to_tensor(rng.uniform(-1, 1, size=data.shape).astype(dtype))
    (ours_grad,) = paddle.grad([ours], [ours_x], grad_outputs=[grad_out])
    (theirs_grad,) = paddle.grad([theirs], [theirs_x], grad_outputs=[grad_out])
    np.testing.assert_array_equal(ours_grad.numpy(), theirs_grad.numpy())


def test_default_threshold_and_keyword(relu6_op):
    import paddle

    x = paddle.to_tensor(np.array([-1.0, 3.0, 7.0], dtype="float32"))
    np.testing.assert_array_equal(relu6_op.relu6(x).numpy(), [0.0, 3.0, 6.0])
    np.testing.assert_array_equal(relu6_op.relu6(x, threshold=2.0).numpy(), [0.0, 2.0, 2.0])


def test_a_threshold_of_minus_zero_is_not_plus_zero(relu6_op):
    """0.0 and -0.0 are one dict key; the remembered bits of one must not serve the other: the
    min of +0 and the threshold is the threshold's zero, sign included, as numpy's minimum."""
    import paddle

    x = paddle.to_tensor(np.zeros(2, dtype="float32"))
    for threshold in (0.0, -0.0, 0.0):
        got = relu6_op.relu6(x, threshold=threshold).numpy()
        want = np.minimum(np.maximum(np.zeros(2, "float32"), 0), np.float32(threshold))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=str(threshold))


def test_mismatched_inputs_fail_with_the_op_name(relu6_op):
    import paddle

    x = paddle.to_tensor(np.zeros(3, dtype="int32"))
    with pytest.raises(TypeError, match="relu6: x is int32; relu6 supports float32, float64"):
        relu6_op.relu6(x)
    with pytest.raises(Exception, match="custom_relu6: dtype int32 is not supported"):
        # the kernel's own check
        relu6_op._ops().custom_relu6(x, relu6_op._float_bits(6.0, "threshold"))
    # an empty input needs no kernel, and Paddle 3 goes to the op for it all the same: its dtype
    # is still refused, by the op and by the wrapper
    empty = paddle.zeros([0, 3], dtype="int32")
    with pytest.raises(TypeError, match="relu6: x is int32; relu6 supports float32, float64"):
        relu6_op.relu6(empty)
    with pytest.raises(Exception, match="custom_relu6: dtype int32 is not supported"):
        relu6_op._ops().custom_relu6(empty, relu6_op._float_bits(6.0, "threshold"))


def test_unchanged_op_rebuild_is_a_cache_hit():
    import time

    first = run_opgen("build", str(RELU6), "--cpu-only")
    assert first.returncode == 0, first.stderr
    start = time.perf_counter()
    again = run_opgen("build", str(RELU6), "--cpu-only")
    elapsed = time.perf_counter() - start
    assert again.returncode == 0 and "up to date" in again.stdout
    print(f"unchanged rebuild: {elapsed:.2f} s")


def test_the_wrapper_calls_paddles_custom_op_entry_and_keeps_its_behaviour(relu6_op):
    """The eager fast path (issue 15): the wrapper calls Paddle's C++ custom-op entry directly,
    not the library's Python API, and still checks its inputs, differentiates, passes NaN
    through, copies views and answers empty inputs without a kernel, in the autograd graph."""
    import paddle

    x = paddle.to_tensor([-1.0, 3.0, 7.0, float("nan")], stop_gradient=False)
    out = relu6_op.relu6(x)
    assert relu6_op._run is paddle._C_ops._run_custom_op
    np.testing.assert_array_equal(out.numpy(), [0.0, 3.0, 6.0, np.nan])
    (grad,) = paddle.grad(out, x, paddle.ones_like(out))
    np.testing.assert_array_equal(grad.numpy(), [0.0, 1.0, 0.0, 0.0])
    view = paddle.to_tensor(np.arange(12, dtype="float32").reshape(3, 4)).transpose([1, 0])
    np.testing.assert_array_equal(relu6_op.relu6(view).numpy(),
                                  np.minimum(np.arange(12).reshape(3, 4).T, 6))
    empty = paddle.zeros([0, 5])
    empty.stop_gradient = False
    result = relu6_op.relu6(empty)
    assert list(result.shape) == [0, 5] and not result.stop_gradient
    with pytest.raises(TypeError, match="relu6: x is int32; relu6 supports float32"):
        relu6_op.relu6(paddle.to_tensor([1, 2], dtype="int32"))


def test_only_what_is_not_an_eager_tensor_takes_the_slow_path(relu6_op):
    """The wrapper checks only inputs whose type is not paddle.Tensor: parameters (a subclass)
    and non-tensors still get their checks and results. It reads Paddle's mode first (an
    attribute, inlined), so in static mode an eager tensor given to the op or its in-place
    variant is refused in Python, where Paddle's static API would abort the process."""
    import paddle

    parameter = paddle.create_parameter([3], "float32")
    parameter.set_value(paddle.to_tensor([-2.0, 4.0, 9.0]))
    assert type(parameter) is not paddle.Tensor
    np.testing.assert_array_equal(relu6_op.relu6(parameter).numpy(), [0.0, 4.0, 6.0])
    with pytest.raises(TypeError, match="relu6: x must be a paddle.Tensor, not list"):
        relu6_op.relu6([1.0])
    eager = paddle.to_tensor([1.0])
    paddle.enable_static()
    try:
        for call in (relu6_op.relu6_, relu6_op.relu6):  # Paddle would abort on either
            with pytest.raises(TypeError, match="x is an eager paddle.Tensor, but Paddle is in "
                                                "static mode"):
                call(eager)
    finally:
        paddle.disable_static()

"""``backward: auto`` and intermediates in a real op: generated, built once on the CPU, and compared
with Paddle's own functions (``F.mish`` and friends), forward and gradient; then the op's own
generated tests run against it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_opgen

pytestmark = pytest.mark.build

SPEC = """\
name: mish_and_more
op_name: custom_mish_and_more
kind: elementwise
summary: mish written with softplus as an intermediate, and the new functions, derived backward
inputs: [x, y]
outputs: [out, out2]
dtypes: [float32, float64]
domain:
  x: [-6.0, 6.0]
  y: [-2.0, 2.0]
forward:
  sp: log1p(exp(x))
  out: x * tanh(sp)
  c: clamp(y, -1, 1)
  out2: softplus(y) * atan(x) + c ** 2 + sign(y) * tan(0.5 * y) + log2(exp2(y) + x ** 2)
backward: auto
"""


@pytest.fixture(scope="module")
def op_dir(tmp_path_factory):
    import opgen

    folder = tmp_path_factory.mktemp("ops") / "mish_and_more"
    folder.mkdir()
    (folder / "mish_and_more.yaml").write_text(SPEC)
    opgen.generate(folder / "mish_and_more.yaml")
    return folder


def test_forward_and_derived_gradient_match_paddle(op_dir):
    import paddle
    import paddle.nn.functional as F

    import opgen

    header = (op_dir / "csrc" / "mish_and_more.h").read_text()
    assert "    const MT sp = opgen::log1p(opgen::exp<T>(x));\n" in header
    assert "grad_sp = " in header  # the intermediate's own gradient, computed once
    module = opgen.load(op_dir, cpu_only=True)
    rng = np.random.default_rng(0)
    x_np, y_np = rng.uniform(-6, 6, size=(5, 203)), rng.uniform(-2, 2, size=(5, 203))
    ours_in = [paddle.to_tensor(a, stop_gradient=False) for a in (x_np, y_np)]
    theirs_in = [paddle.to_tensor(a, stop_gradient=False) for a in (x_np, y_np)]
    ours = module.mish_and_more(*ours_in)
    x, y = theirs_in
    theirs = (F.mish(x),
              F.softplus(y) * paddle.atan(x) + paddle.square(paddle.clip(y, -1.0, 1.0))
              + paddle.sign(y) * paddle.tan(0.5 * y) + paddle.log2(2 ** y + x ** 2))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    grads_out = [paddle.to_tensor(rng.uniform(-1, 1, size=x_np.shape)) for _ in range(2)]
    ours_grads = paddle.grad(list(ours), ours_in, grad_outputs=grads_out)
    theirs_grads = paddle.grad(list(theirs), theirs_in, grad_outputs=grads_out)
    for name, a, b in zip("xy", ours_grads, theirs_grads, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"grad_{name}")


def test_the_generated_tests_pass(op_dir):
    result = run_opgen("test", str(op_dir), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                       "-x")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]

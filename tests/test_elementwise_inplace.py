"""The in-place variant of an elementwise op with two outputs (tests/specs/bias_relu_mask.yaml:
``bias_relu_mask_(x, bias)`` writes out over x and returns mask as a new tensor), generated, built
and run for real: its generated tests on Paddle 3.3.1 (CPU), the same with the second output
written over x, and, built with CUDA by paddlepaddle-gpu 2.6.2, its in-place tests there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import GPU_PYTHON, ROOT, run_opgen

pytestmark = pytest.mark.build

SPEC = (ROOT / "tests" / "specs" / "bias_relu_mask.yaml").read_text()


def _generate(tmp_path: Path, text: str = SPEC, python: str | Path = sys.executable) -> Path:
    folder = tmp_path / "bias_relu_mask"
    folder.mkdir()
    (folder / "bias_relu_mask.yaml").write_text(text)
    result = run_opgen("generate", str(folder / "bias_relu_mask.yaml"), python=python)
    assert result.returncode == 0, result.stdout + result.stderr
    return folder


RUN = textwrap.dedent("""
    import sys
    import numpy as np
    import paddle
    sys.path.insert(0, sys.argv[1])
    from bias_relu_mask import bias_relu_mask, bias_relu_mask_

    x = paddle.to_tensor(np.linspace(-2, 2, 12).reshape(2, 6), dtype="float32")
    bias = paddle.full([6], 0.25, "float32")
    u = x.numpy() + 0.25
    address = x.data_ptr()
    out, mask = bias_relu_mask_(x, bias)
    assert out.data_ptr() == address == x.data_ptr(), "out is not in x's memory"
    assert mask.data_ptr() != address, "mask was written over x"
    np.testing.assert_array_equal(x.numpy(), np.where(u > 0, u, 0))
    np.testing.assert_array_equal(mask.numpy(), np.where(u > 0, 1, 0))
    # x is now out: a second call computes from it
    want = [t.numpy() for t in bias_relu_mask(out, bias)]
    got = bias_relu_mask_(out, bias)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)
    empty = paddle.zeros([0, 6], "float32")
    out, mask = bias_relu_mask_(empty, bias)
    assert out.data_ptr() == empty.data_ptr() and mask.shape == [0, 6], (out, mask)
    try:
        bias_relu_mask_(paddle.zeros([2, 1], "float32"), bias)
    except ValueError as exc:
        assert "in place, the other inputs must broadcast to x's shape" in str(exc), exc
    else:
        raise AssertionError("x was smaller than the result")
    print("ok")
""")


# float16 results bit for bit against numpy: x + bias is exact in float64 and rounded once, so
# only a conversion that does not round to nearest even differs (Paddle 2.6.2's host float16
# conversion did, by 1 ulp in places); bfloat16 against the same rounding of the float32 sum.
EXACT = textwrap.dedent("""
    import sys
    import numpy as np
    import paddle
    sys.path.insert(0, sys.argv[1])
    from bias_relu_mask import bias_relu_mask

    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, (4, 4099)).astype("float16")
    bias = rng.uniform(-1, 1, 4099).astype("float16")
    out, mask = bias_relu_mask(paddle.to_tensor(x), paddle.to_tensor(bias))
    u = x.astype(np.float64) + bias
    np.testing.assert_array_equal(out.numpy(), np.where(u > 0, u, 0).astype(np.float16))
    np.testing.assert_array_equal(mask.numpy(), (u > 0).astype(np.float16))

    def bf16(values):  # float32 -> bfloat16 bits, to nearest even
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)

    xb = paddle.to_tensor(x.astype(np.float32)).astype("bfloat16")
    bb = paddle.to_tensor(bias.astype(np.float32)).astype("bfloat16")
    out, _ = bias_relu_mask(xb, bb)
    xs = xb.astype("float32").numpy().astype(np.float64)
    u = xs + bb.astype("float32").numpy()
    want = bf16(np.where(u > 0, u, 0).astype(np.float32))
    np.testing.assert_array_equal(out.numpy(), want)  # a bfloat16 tensor's numpy(): its bits
    print("ok")
""")


def _exact(op: Path, python: str | Path = sys.executable) -> None:
    env = {**os.environ, "GLOG_minloglevel": "3", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([str(python), "-c", EXACT, str(op)], capture_output=True, text=True,
                         env=env, check=False)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), \
        run.stdout[-2000:] + run.stderr[-3000:]


def test_out_over_x_mask_new_and_the_generated_tests_pass_on_cpu(tmp_path):
    op = _generate(tmp_path)
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-v", "-p", "no:warnings")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    for test in ("test_inplace_writes_over_its_input[cpu]", "test_inplace_autograd[cpu]",
                 "test_inplace_in_a_static_graph", "test_inplace_saved_model_in_a_fresh_process"):
        assert f"{test} PASSED" in result.stdout, test
    env = {**os.environ, "GLOG_minloglevel": "3", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", RUN, str(op)], capture_output=True, text=True,
                         env=env, check=False)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), \
        run.stdout[-2000:] + run.stderr[-3000:]
    _exact(op)


def test_the_second_output_over_x(tmp_path):
    """mask written over x and out new: the kernels put the input at the output's place."""
    op = _generate(tmp_path, SPEC.replace("inplace: {x: out}", "inplace: {x: mask}"))
    assert "INPLACE_OUTPUT = 1" in (op / "test_bias_relu_mask.py").read_text()
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-v", "-p", "no:warnings",
                       "-k", "inplace")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert result.stdout.count(" PASSED") == 4, result.stdout[-3000:]


@pytest.mark.gpu_env
def test_cuda_build_and_inplace_tests_on_paddle_2_6(tmp_path):
    """paddlepaddle-gpu 2.6.2 builds the op's CUDA half; its eager entry refuses
    bias_relu_mask_ (Paddle 2.6 ignores SetInplaceMap there), and its static graph and saved
    model give both outputs."""
    if not GPU_PYTHON.exists():
        pytest.skip("no .venv-gpu (paddlepaddle-gpu 2.6.2): run scripts/setup.sh")
    op = _generate(tmp_path, python=GPU_PYTHON)
    env = {"CUDA_HOME": os.environ.get("CUDA_HOME", "/usr/local/cuda"),
           "OPGEN_TEST_DEVICES": "cpu"}
    result = run_opgen("test", str(op), "--device", "cpu", "--", "-v", "-p", "no:warnings",
                       "-k", "inplace", python=GPU_PYTHON, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "CPU + CUDA sm_90" in result.stdout + result.stderr
    for test in ("test_inplace_writes_over_its_input[cpu]", "test_inplace_in_a_static_graph",
                 "test_inplace_saved_model_in_a_fresh_process"):
        assert f"{test} PASSED" in result.stdout, test
    assert "test_inplace_autograd[cpu] SKIPPED" in result.stdout
    _exact(op, GPU_PYTHON)  # its CPU kernels' 16-bit results, on Paddle 2.6.2's types

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

"""The GPU half of an op, proven on a machine without a GPU: with paddlepaddle-gpu 2.6.2 (kept
in its own environment, .venv-gpu) and nvcc, relu6's .cu sources compile and link for sm_90, and
the built library runs relu6's generated tests on CPU tensors."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import GPU_PYTHON, RELU6, run_opgen
from test_builtin_ops import EXACT_LEAKY

pytestmark = [pytest.mark.build, pytest.mark.gpu_env]


@pytest.fixture(scope="module")
def gpu_python():
    if not GPU_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must prove the GPU build: run scripts/setup.sh to create .venv-gpu")
        pytest.skip("no .venv-gpu (paddlepaddle-gpu 2.6.2): run scripts/setup.sh")
    return GPU_PYTHON


def test_relu6_cuda_sources_compile_and_link(gpu_python):
    result = run_opgen("build", str(RELU6), "--arch", "90", python=gpu_python)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "CPU + CUDA sm_90" in result.stdout
    library = result.stdout.strip().split(": ")[-1]
    assert library.endswith("relu6_lib.so") and os.path.exists(library)


def test_relu6_built_with_cuda_passes_its_cpu_tests(gpu_python):
    result = run_opgen("test", str(RELU6), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                       python=gpu_python, env={"OPGEN_TEST_DEVICES": "cpu"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


TWO_INPUTS = """\
name: scaled_mul
kind: elementwise
summary: x times y, scaled
inputs: [x, y]
outputs: [out]
attrs:
  alpha: {type: float, default: 2.0}
dtypes: [float32, float64, float16]
forward:
  out: alpha * x * y
backward:
  x: grad_out * alpha * y
  y: grad_out * alpha * x
"""


def test_two_input_op_passes_its_tests_on_paddle_2_6(gpu_python, tmp_path):
    """Paddle 2.6's autograd fails on ops of two empty tensors ("Unable to fill empty grad
    inputs"); the generated wrapper must keep empty results differentiable there too."""
    spec = tmp_path / "scaled_mul" / "scaled_mul.yaml"
    spec.parent.mkdir()
    spec.write_text(TWO_INPUTS)
    assert run_opgen("generate", str(spec), python=gpu_python).returncode == 0
    result = run_opgen("test", str(spec.parent), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings", python=gpu_python, env={"OPGEN_TEST_DEVICES": "cpu"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "(0,)" not in result.stdout  # no failing empty case


EXACT_ON_PADDLE_2_6 = """
import struct, sys
import numpy as np, paddle, opgen
ops = opgen.load(sys.argv[1])  # the build the generated tests used: CPU + CUDA
x = np.linspace(-8, 8, 4096)
np.testing.assert_array_equal(ops.exact_leaky(paddle.to_tensor(x)).numpy(),
                              np.where(x > 0, x, x * 0.02))
x32 = x.astype("float32")
np.testing.assert_array_equal(ops.exact_leaky(paddle.to_tensor(x32), alpha=0.3).numpy(),
                              np.where(x32 > 0, x32, x32 * np.float32(0.3)))
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    out = ops._ops().custom_exact_leaky(paddle.static.data("x", [4096], "float64"),
                                        struct.unpack("q", struct.pack("d", 0.02))[0])
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
(got,) = exe.run(main, feed={"x": x}, fetch_list=[out])
np.testing.assert_array_equal(got, np.where(x > 0, x, x * 0.02))
"""


def test_float_attrs_are_exact_in_float64_on_paddle_2_6(gpu_python, tmp_path):
    """Float attrs travel as int64 bits (double attrs work in eager mode only): on Paddle 2.6 the
    op builds with CUDA, passes its generated tests, and is exact in float64, eager and static."""
    spec = tmp_path / "exact_leaky" / "exact_leaky.yaml"
    spec.parent.mkdir()
    spec.write_text(EXACT_LEAKY)
    assert run_opgen("generate", str(spec), python=gpu_python).returncode == 0
    result = run_opgen("test", str(spec.parent), "--device", "cpu", "--", "-q", "-p",
                       "no:warnings", python=gpu_python, env={"OPGEN_TEST_DEVICES": "cpu"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    run = subprocess.run([str(gpu_python), "-c", EXACT_ON_PADDLE_2_6, str(spec.parent)],
                         capture_output=True, text=True, check=False,
                         env={**os.environ, "GLOG_minloglevel": "3"})
    assert run.returncode == 0, run.stderr[-3000:]

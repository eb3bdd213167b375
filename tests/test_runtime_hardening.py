"""What a generated op does at run time with bad calls, NaN, missing gradients and unwritten
outputs (issue 10: items 1, 1b, 2 and 8). One two-input, two-output op is generated and built
once; its own generated tests, a deliberately broken copy of it and bad calls run against it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import GPU_PYTHON, ROOT, run_opgen

PAIR = (ROOT / "tests" / "specs" / "trig_pair.yaml").read_text()


@pytest.fixture(scope="module")
def pair_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hardening") / "trig_pair"
    folder.mkdir()
    (folder / "trig_pair.yaml").write_text(PAIR)
    for args in (["generate", str(folder / "trig_pair.yaml")], ["build", str(folder)]):
        proc = run_opgen(*args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


@pytest.fixture(scope="module")
def pair_dir_paddle_2_6(pair_dir, tmp_path_factory):
    """The same op built by paddlepaddle-gpu 2.6.2 (CPU and CUDA code), run on the CPU."""
    if not GPU_PYTHON.exists():
        pytest.skip("no .venv-gpu (paddlepaddle-gpu 2.6.2)")
    folder = tmp_path_factory.mktemp("hardening-2.6") / "trig_pair"
    shutil.copytree(pair_dir, folder, ignore=shutil.ignore_patterns("build"))
    proc = run_opgen("build", str(folder), python=GPU_PYTHON)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


@pytest.fixture(scope="module")
def trig_pair(pair_dir):
    spec = importlib.util.spec_from_file_location("trig_pair", pair_dir / "trig_pair.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.trig_pair


def _generated_tests(folder, *pytest_args, python=sys.executable):
    return run_opgen("test", str(folder), "--device", "cpu", "--", "-q", "-p", "no:warnings",
                     "-p", "no:cacheprovider", *pytest_args, python=python)


def test_generated_tests_pass_with_nan_one_output_gradients_and_double_backward(pair_dir):
    """The generated tests sample NaN and infinities, take the gradient through each output
    alone (Paddle passes the other output's gradient undefined: this crashed before) and ask for
    a double backward (silently wrong numbers before; derived now, through each input's gradient
    alone too); all of it passes on the CPU."""
    test_file = (pair_dir / "test_trig_pair.py").read_text()
    for name in ("test_backward_through_one_output", "test_double_backward_from_one_gradient",
                 "ot.poison_outputs()"):
        assert name in test_file
    proc = _generated_tests(pair_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout


def test_generated_tests_pass_on_paddle_2_6(pair_dir_paddle_2_6):
    """Paddle 2.6 passes undefined gradients and registers double backward its own way."""
    proc = _generated_tests(pair_dir_paddle_2_6, "-k", "one_output or double_backward or forward",
                            python=GPU_PYTHON)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_kernel_that_skips_its_last_element_fails_the_generated_tests(pair_dir, tmp_path):
    """Outputs are poisoned with NaN before the kernel runs: an element the kernel never writes
    fails the comparison (before, a fresh CPU output held whatever memory held, often zeros)."""
    broken = tmp_path / "trig_pair"
    shutil.copytree(pair_dir, broken, ignore=shutil.ignore_patterns("build"))
    runtime = broken / "csrc" / "opgen" / "broadcast.h"
    source = runtime.read_text()
    forward = source.index("void BroadcastLoop(")  # its last block ends one element early
    end = "const int64_t end = BlockBegin(plan.numel, blocks, b + 1);"
    at = source.index(end, forward)
    runtime.write_text(source[:at] + end[:-1] + " - (b + 1 == blocks);" + source[at + len(end):])
    proc = _generated_tests(broken, "-k", "test_forward and float32 and 1000003")
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "failed" in proc.stdout
    assert "nan" in proc.stdout.lower()


@pytest.mark.parametrize(("call", "error", "message"), [
    ("trig_pair(t([1, 2], 'int32'), t([1, 2], 'int32'))", TypeError,
     "trig_pair: x is int32; trig_pair supports float32, float64, float16, bfloat16"),
    ("trig_pair(t([1, 2], 'float32'), t([1, 2], 'float64'))", TypeError,
     "trig_pair: y is float64 but x is float32; the inputs must share one dtype"),
    ("trig_pair(t(np.ones((4, 8)), 'float32'), t([1, 2, 3], 'float32'))", ValueError,
     r"trig_pair: the inputs' shapes do not broadcast: x \[4, 8\], y \[3\]; aligned at their "
     "last dims, sizes must match or be 1"),
    ("trig_pair(t(np.ones(0), 'float32'), t([1, 2], 'float32'))", ValueError,
     r"trig_pair: the inputs' shapes do not broadcast: x \[0\], y \[2\]"),
    ("trig_pair(t(np.ones(0), 'float32'), t(np.ones(0), 'float64'))", TypeError,
     "trig_pair: y is float64 but x is float32"),
    ("trig_pair(np.ones(2), t([1, 2], 'float32'))", TypeError,
     "trig_pair: x must be a paddle.Tensor, not ndarray"),
])
def test_the_wrapper_refuses_bad_calls_naming_the_input_and_the_rule(trig_pair, call, error,
                                                                     message):
    import paddle

    def t(values, dtype):
        return paddle.to_tensor(np.asarray(values, dtype=dtype))

    with pytest.raises(error, match=message):
        eval(call, {"trig_pair": trig_pair, "t": t, "np": np})


RAW_CALLS = textwrap.dedent("""
    import sys
    import numpy as np, paddle
    sys.path.insert(0, {folder!r})
    import trig_pair
    ops = trig_pair._ops()
    def t(values, dtype):
        return paddle.to_tensor(np.asarray(values, dtype=dtype))
    for call in [
        lambda: ops.custom_trig_pair(t([1, 2], "int32"), t([1, 2], "int32")),
        lambda: ops.custom_trig_pair(t(np.ones((4, 8)), "float32"), t([1, 2, 3], "float32")),
        lambda: ops.custom_trig_pair(t([1, 2], "float32"), t([1, 2], "float64")),
    ]:
        try:
            call()
        except Exception as e:
            print("RAISED", str(e).strip().splitlines()[0])
        else:
            print("RETURNED")
""")


@pytest.mark.parametrize("paddle_version", ["3", "2.6"])
def test_the_raw_op_raises_its_errors_as_python_exceptions(request, paddle_version):
    """Bypassing the wrapper, the kernels' own checks raise (built without ostream formatting,
    which kills the process on machines whose g++ is newer than libpaddle's)."""
    if paddle_version == "3":
        folder, python = request.getfixturevalue("pair_dir"), sys.executable
    else:
        folder, python = request.getfixturevalue("pair_dir_paddle_2_6"), GPU_PYTHON
    proc = subprocess.run([str(python), "-c", RAW_CALLS.format(folder=str(folder))],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "GLOG_minloglevel": "3", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("RAISED custom_trig_pair: dtype int32 is not supported; "
                               "supported: float32, float64, float16, bfloat16"), lines
    assert lines[1].startswith("RAISED custom_trig_pair: x [4, 8] and y [3] do not broadcast: "
                               "aligned at their last dims, dim 1 of x is 8 and dim 0 of y is "
                               "3"), lines
    assert lines[2].startswith("RAISED custom_trig_pair: y is float64 but x is float32"), lines


RAW_STATIC = textwrap.dedent("""
    import sys
    import numpy as np, paddle
    sys.path.insert(0, {folder!r})
    import trig_pair
    paddle.enable_static()
    program = paddle.static.Program()
    with paddle.static.program_guard(program):
        x = paddle.static.data("x", [4, 8], "float32")
        y = paddle.static.data("y", [3], "float32")
        s, c = trig_pair._ops().custom_trig_pair(x, y)
        print("SHAPE", list(s.shape))
    executor = paddle.static.Executor(paddle.CPUPlace())
    try:
        executor.run(program, feed={{"x": np.ones((4, 8), "float32"), "y": np.ones(3, "float32")}},
                     fetch_list=[s])
    except Exception as e:
        print("RAISED", " ".join(str(e).split()))
    else:
        print("RETURNED")
""")


@pytest.mark.parametrize("paddle_version", ["3", "2.6"])
def test_the_raw_op_in_a_static_graph_refuses_shapes_that_do_not_broadcast(request,
                                                                           paddle_version):
    """InferShape cannot raise (Paddle aborts the process: it did, SIGABRT, before
    BroadcastShapeOrUnknown), so the output's shape is not known yet; the kernel refuses the
    inputs when the program runs, and the executor keeps its message."""
    if paddle_version == "3":
        folder, python = request.getfixturevalue("pair_dir"), sys.executable
    else:
        folder, python = request.getfixturevalue("pair_dir_paddle_2_6"), GPU_PYTHON
    proc = subprocess.run([str(python), "-c", RAW_STATIC.format(folder=str(folder))],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "GLOG_minloglevel": "3", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "SHAPE [-1]", lines
    assert lines[1].startswith("RAISED ") and "custom_trig_pair: x [4, 8] and y [3] do not " \
        "broadcast" in lines[1], lines

"""Bad calls of generated ops, each in its own process: does Python get an exception, or does the
process die? Run on the H200 (where, before opgen's fix, each of these ended in SIGSEGV) and here.

Generates small ops into a temporary folder (a one-input op with all four float dtypes, an op
limited to float32/float64, a two-input op, a two-output op, mish, and a custom op whose output
shapes are computed), builds them for the visible device, then runs every case below in a fresh
interpreter and prints one line per case. Exit status 1 when any case ended other than as
expected.

    python3 scripts/gpu/error_cases.py [--device gpu|cpu] [--arch 90]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SPECS = {
    "relu6": """
        name: relu6
        op_name: custom_relu6
        kind: elementwise
        inputs: [x]
        outputs: [out]
        attrs:
          threshold: {type: float, default: 6.0}
        forward:
          out: min(max(x, 0), threshold)
        backward:
          x: where((x > 0) & (x < threshold), grad_out, 0)
        """,
    "twin": """
        name: twin
        kind: elementwise
        dtypes: [float32, float64]
        inputs: [x]
        outputs: [out]
        forward:
          out: 2 * x
        backward:
          x: 2 * grad_out
        """,
    "axpy": """
        name: axpy
        kind: elementwise
        inputs: [x, y]
        outputs: [out]
        forward:
          out: 2 * x + y
        backward:
          x: 2 * grad_out
          y: grad_out
        """,
    "sin_cos": """
        name: sin_cos
        kind: elementwise
        inputs: [x]
        outputs: [s, c]
        forward:
          s: sin(x)
          c: cos(x)
        backward:
          x: grad_s * cos(x) - grad_c * sin(x)
        """,
    "mish": """
        name: mish
        kind: elementwise
        inputs: [x]
        outputs: [out]
        forward:
          out: x * tanh(log1p(exp(x)))
        backward:
          x: grad_out * (tanh(log1p(exp(x))) + x * (1 - tanh(log1p(exp(x))) ** 2) * sigmoid(x))
        """,
    # kind: custom, output shapes computed from an input's dim and an attr (its unchanged skeleton)
    "halve": (Path(__file__).resolve().parents[2] / "tests" / "specs" / "halve.yaml").read_text(),
}

# (name, code, expected): expected is "raises" (a Python exception, the process goes on) or "ok".
# `t(values, dtype, device)` makes a tensor; DEV is the device under test.
CASES = [
    ("int32 into relu6", "relu6(t([1, 2], 'int32', DEV))", "raises"),
    ("float16 into a float32/float64 op", "twin(t([1, 2], 'float16', DEV))", "raises"),
    ("shapes [4, 8] and [3]", "axpy(t(np.ones((4, 8)), 'float32', DEV), t([1, 2, 3], 'float32', DEV))",
     "raises"),
    ("shapes [4, 8] and [3] on the CPU",
     "axpy(t(np.ones((4, 8)), 'float32', 'cpu'), t([1, 2, 3], 'float32', 'cpu'))", "raises"),
    ("x on DEV, y on the CPU", "axpy(t([1, 2], 'float32', DEV), t([1, 2], 'float32', 'cpu'))",
     "raises"),
    ("empty x [0] with y [1] (broadcasts to [0])",
     "z = axpy(t(np.ones(0), 'float32', DEV), t([1], 'float32', DEV)); assert list(z.shape) == [0]",
     "ok"),
    ("empty x [0] with y [2]", "axpy(t(np.ones(0), 'float32', DEV), t([1, 2], 'float32', DEV))",
     "raises"),
    ("empty x with float64 y", "axpy(t(np.ones(0), 'float32', DEV), t(np.ones(0), 'float64', DEV))",
     "raises"),
    ("int32 through the raw op", "ops(relu6).custom_relu6(t([1, 2], 'int32', DEV), bits(6.0))",
     "raises"),
    ("gradient through one output of two",
     "x = t([0.5, 1.0], 'float32', DEV, grad=True); s, c = sin_cos(x);"
     "g, = paddle.grad([s], [x], grad_outputs=[t([1.0, 1.0], 'float32', DEV)]);"
     "assert np.allclose(g.numpy(), np.cos([0.5, 1.0]), rtol=1e-5), g.numpy()", "ok"),
    ("double backward (derived by opgen)",
     "x = t([0.5, 1.0], 'float64', DEV, grad=True); y = mish(x);"
     "g, = paddle.grad([y], [x], grad_outputs=[t([1.0, 1.0], 'float64', DEV)], create_graph=True);"
     "gg, = paddle.grad([g], [x], grad_outputs=[t([1.0, 1.0], 'float64', DEV)]);"
     "assert np.isfinite(gg.numpy()).all(), gg.numpy()", "ok"),
    ("second derivative through relu6(x) * x",
     "x = t([1.0, 2.0, 7.0], 'float64', DEV, grad=True);"
     "g, = paddle.grad([(relu6(x) * x).sum()], [x], create_graph=True);"
     "gg, = paddle.grad([g.sum()], [x]);"
     "assert np.allclose(gg.numpy(), [2.0, 2.0, 0.0]), gg.numpy()", "ok"),
    ("a static program with shapes [4, 8] and [3] (the raw op)",
     "paddle.enable_static(); main = paddle.static.Program();"
     "guard = paddle.static.program_guard(main); guard.__enter__();"
     "xv = paddle.static.data('x', [4, 8], 'float32'); yv = paddle.static.data('y', [3], 'float32');"
     "zv = ops(axpy).custom_axpy(xv, yv); guard.__exit__(None, None, None);"
     "place = paddle.CUDAPlace(0) if DEV == 'gpu' else paddle.CPUPlace();"
     "paddle.static.Executor(place).run(main, feed={'x': np.ones((4, 8), 'float32'),"
     " 'y': np.ones(3, 'float32')}, fetch_list=[zv])", "raises"),
    ("a computed shape rounds down as Python's //",
     "out, rest = halve(t(np.ones((3, 8)), 'float32', DEV), k=2);"
     "assert [list(out.shape), list(rest.shape)] == [[4], [6]], (out.shape, rest.shape)", "ok"),
    ("a shape divided by 0 (the wrapper)", "halve(t(np.ones((3, 8)), 'float32', DEV), k=0)",
     "raises"),
    ("a shape divided by 0 (the raw op)",
     "ops(halve).custom_halve(t(np.ones((3, 8)), 'float32', DEV), 0)", "raises"),
    ("a negative computed dim (the raw op)",
     "ops(halve).custom_halve(t(np.ones((3, 8)), 'float32', DEV), 11)", "raises"),
]

GPU_ONLY = {"x on DEV, y on the CPU"}  # on the CPU both are on the CPU
# Paddle's own multiply and sum run in it, which Paddle 2.6.2 has no sm_90 code for: on the
# H100/H200 they give zeros (round 24), so it runs on the CPU only.
CPU_ONLY = {"second derivative through relu6(x) * x"}

PRELUDE = """
import struct, sys
import numpy as np, paddle
sys.path[:0] = {paths!r}
from relu6 import relu6
from twin import twin
from axpy import axpy
from sin_cos import sin_cos
from mish import mish
from halve import halve
DEV = {device!r}
def t(values, dtype, device, grad=False):
    place = paddle.CUDAPlace(0) if device == "gpu" else paddle.CPUPlace()
    x = paddle.to_tensor(np.asarray(values, dtype="float32" if dtype == "bfloat16" else dtype), place=place)
    x.stop_gradient = not grad
    return x
def ops(wrapper):
    return sys.modules[wrapper.__module__]._ops()
def bits(value):
    return struct.unpack("<q", struct.pack("<d", value))[0]
"""


CASE_SECONDS = 120  # a case that takes longer hangs (its process is killed)


def run_case(prelude: str, code: str) -> tuple[str, str]:
    body = "\n    ".join(part.strip() for part in code.split(";"))
    script = prelude + "\ntry:\n    " + body + (
        "\nexcept Exception as e:\n    print('RAISED', type(e).__name__, str(e).strip().splitlines()[0][:150])"
        "\nelse:\n    print('RETURNED')\n")
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={**os.environ, "GLOG_minloglevel": "3"}, timeout=CASE_SECONDS)
    except subprocess.TimeoutExpired:
        return "hung", f"no result in {CASE_SECONDS} s"
    if proc.returncode < 0:
        return "died", f"killed by {signal.Signals(-proc.returncode).name}"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        return "died", f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    last = lines[-1]
    return ("raises" if last.startswith("RAISED") else "ok"), last


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="gpu")
    parser.add_argument("--arch", default="90")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="opgen-error-cases-"))
    arch = ["--arch", args.arch] if args.device == "gpu" else []

    def generate_and_build(name: str) -> str | None:
        """The op's `opgen generate` then `opgen build`; the failure's output, or None."""
        folder = work / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.yaml").write_text(textwrap.dedent(SPECS[name]).lstrip())
        for command in (["generate", str(folder / f"{name}.yaml")], ["build", str(folder), *arch]):
            proc = subprocess.run([sys.executable, "-m", "opgen", *command], capture_output=True,
                                  text=True)
            if proc.returncode:
                return f"opgen {' '.join(command)} failed:\n{proc.stdout}{proc.stderr}"
        return None

    # The builds at once: each is a compiler process or two (75 s each on the H200 machine).
    with ThreadPoolExecutor(max_workers=len(SPECS)) as pool:
        broken = [f for f in pool.map(generate_and_build, SPECS) if f is not None]
    if broken:
        print(broken[0])
        return 2
    prelude = PRELUDE.format(paths=[str(work / n) for n in SPECS], device=args.device)
    failures = ran = 0
    for title, code, expected in CASES:
        if (args.device == "cpu" and title in GPU_ONLY) or (args.device != "cpu" and
                                                            title in CPU_ONLY):
            continue
        outcome, detail = run_case(prelude, code)
        ran += 1
        ok = outcome == expected
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {title:38} expected {expected:6} got {outcome:6} {detail}")
    print(f"{ran - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

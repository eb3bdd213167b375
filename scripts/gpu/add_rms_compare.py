"""Issue 13: examples/add_rms_norm against the two ops it fuses, through Paddle on the GPU: a
generated elementwise add (out = x + y, from the spec below) followed by examples/rms_norm.
Paddle 2.6.2's own add has no sm_90 code, so the add is opgen's too. Per shape and dtype: the
time of a call of each (forward; forward + backward with paddle.grad and explicit gradients),
best of 7 rounds of back-to-back calls with one synchronization, and the fused op's share of the
pair's time. The fusion saves one pass (the pair writes h and reads it back: 5 passes over a
[rows, cols] tensor against 4) and one launch, so about 0.8 is the bandwidth bound.
Before the timings, both are checked against numpy (float64, from the inputs as the GPU holds
them) and against each other, read on the host (opgen.tensors.to_numpy): Paddle's own GPU kernels
(`astype` is one, even to the same dtype) leave their outputs unwritten on an H200, which round 11
read as a disagreement of the two.
  python3 scripts/gpu/add_rms_compare.py [--shapes 4096x4096,16384x1024,1024x32768] [--arch 90]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import paddle

import opgen
from opgen.tensors import to_numpy

ADD_SPEC = """\
name: residual_add
kind: elementwise
inputs: [x, y]
outputs: [out]
forward:
  out: x + y
backward: auto
"""

PLACE = None  # the GPU (--device gpu), else the CPU: a check of the script itself


def sync() -> None:
    if PLACE is not None:
        paddle.device.cuda.synchronize()


def on_gpu(array: np.ndarray, dtype: str, grad: bool = False) -> paddle.Tensor:
    t = paddle.to_tensor(array, place=paddle.CPUPlace()).astype(dtype)
    if PLACE is not None:
        t = t._copy_to(PLACE, True)
    t.stop_gradient = not grad
    return t


def best_us(fn, calls: int = 20) -> float:
    for _ in range(3):
        fn()
    sync()
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def compare(ops, shape: str, dtype: str, rng: np.random.Generator) -> None:
    add, rms_norm, add_rms_norm = ops
    rows, cols = (int(v) for v in shape.split("x"))
    x = on_gpu(rng.standard_normal((rows, cols)).astype("float32"), dtype, True)
    r = on_gpu(rng.standard_normal((rows, cols)).astype("float32"), dtype, True)
    w = on_gpu(rng.standard_normal(cols).astype("float32"), dtype, True)
    g = on_gpu(rng.standard_normal((rows, cols)).astype("float32"), dtype)

    def pair_fwd():
        return rms_norm(add(x, r), w)

    def fused_fwd():
        return add_rms_norm(x, r, w)[0]

    def pair_both():
        return paddle.grad([pair_fwd()], [x, r, w], grad_outputs=[g])

    def fused_both():
        return paddle.grad([fused_fwd()], [x, r, w], grad_outputs=[g])

    # the two agree with numpy and with each other before they are timed; everything is read
    # on the host (to_numpy), never through a Paddle kernel
    xs, rs, ws = (to_numpy(t) for t in (x, r, w))
    h_ref = xs + rs
    out_ref = h_ref / np.sqrt(np.mean(h_ref * h_ref, axis=-1, keepdims=True) + 1e-6) * ws
    a = to_numpy(pair_fwd())
    fused_out, fused_h = add_rms_norm(x, r, w)
    b, h = to_numpy(fused_out), to_numpy(fused_h)
    tol = 1e-5 if dtype == "float32" else 2e-2
    for name, got, want in (("add + rms_norm", a, out_ref), ("add_rms_norm", b, out_ref),
                            ("add_rms_norm.h", h, h_ref), ("fused vs pair", b, a)):
        if not np.allclose(got, want, rtol=tol, atol=tol):
            worst = int(np.argmax(np.abs(got - want)))
            raise AssertionError(f"{shape} {dtype} {name}: at {np.unravel_index(worst, got.shape)} "
                                 f"got {got.flat[worst]!r}, want {want.flat[worst]!r}")
    passes = (("forward", pair_fwd, fused_fwd), ("fwd+bwd", pair_both, fused_both))
    for label, pair, fused in passes:
        tp, tf = best_us(pair), best_us(fused)
        print(f"{shape:>12} {dtype:>9} {label:>9} {tp:13.1f}us {tf:11.1f}us {tf / tp:12.2f}",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="4096x4096,16384x1024,1024x32768")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--arch", default="90")
    parser.add_argument("--work", default="/tmp/add-rms")
    parser.add_argument("--device", default="gpu", choices=("gpu", "cpu"))
    args = parser.parse_args()
    global PLACE
    PLACE = paddle.CUDAPlace(0) if args.device == "gpu" else None
    folder = Path(args.work) / "residual_add"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "residual_add.yaml").write_text(ADD_SPEC)
    for command in (["generate", str(folder / "residual_add.yaml")],
                    ["build", str(folder)] + (["--arch", args.arch] if PLACE else [])):
        subprocess.run([sys.executable, "-m", "opgen", *command], check=True,
                       stdout=subprocess.DEVNULL)
    ops = (opgen.load(folder).residual_add, opgen.load("examples/rms_norm").rms_norm,
           opgen.load("examples/add_rms_norm").add_rms_norm)
    rng = np.random.default_rng(0)
    print(f"{'shape':>12} {'dtype':>9} {'pass':>9} {'add + rms_norm':>15} {'add_rms_norm':>13} "
          f"{'fused / pair':>12}")
    for shape in args.shapes.split(","):
        for dtype in args.dtypes.split(","):
            compare(ops, shape, dtype, rng)
    return 0


if __name__ == "__main__":
    sys.exit(main())

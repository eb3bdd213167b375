"""The row-wise examples' CPU kernels against Paddle's own CPU ops (docs/benchmarks.md, "CPU
kernels"; issue 15 asks the other kinds' CPU paths to keep up with Paddle's as relu6's does):
softmax against F.softmax, layer_norm against F.layer_norm, rms_norm and add_rms_norm against
their composition of Paddle ops (x * rsqrt(mean(x * x) + eps) * w, after x + residual), float32,
forward and forward + backward (paddle.grad), interleaved in one run, best of N rounds. Each call
allocates its outputs, as a model's does. Paddle's thread setting applies to both sides (one
thread unless OMP_NUM_THREADS says otherwise). Run from the repository root:
    GLOG_minloglevel=3 python scripts/cpu_rowwise_vs_builtins.py [--dtype D] [ROWSxCOLS ...]
With --dtype bfloat16 or float16 the inputs are of that dtype; Paddle 3.3.1 has no 16-bit CPU
softmax or layer_norm, so its side is what a model would write instead: the inputs cast to
float32, Paddle's op (or composition), and the result cast back.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import paddle
import paddle.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from opgen import api  # noqa: E402

EPS = 1e-6


def _load(name: str) -> Callable:
    return getattr(api.load_op(ROOT / "examples" / name, cpu_only=True), name)


def _rms(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    return x * paddle.rsqrt((x * x).mean(axis=-1, keepdim=True) + EPS) * w


def _best_us(fn: Callable[[], object], rounds: int, calls: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def _with_grad(fn: Callable[..., object], *inputs: paddle.Tensor) -> Callable[[], object]:
    def run() -> object:
        outs = fn(*inputs)
        out = outs[0] if isinstance(outs, (list, tuple)) else outs
        return paddle.grad([out], list(inputs), grad_outputs=[paddle.ones_like(out)])
    return run


def _in_float32(fn: Callable[..., paddle.Tensor]) -> Callable[..., paddle.Tensor]:
    """fn on its inputs cast to float32, its result cast back to the first input's dtype (as is
    where that is float32)."""
    def run(*inputs: paddle.Tensor) -> paddle.Tensor:
        dtype = inputs[0].dtype
        if dtype == paddle.float32:
            return fn(*inputs)
        return fn(*(t.astype("float32") for t in inputs)).astype(dtype)
    return run


def _pairs(ops: dict[str, Callable], x: paddle.Tensor, r: paddle.Tensor, w: paddle.Tensor,
           b: paddle.Tensor) -> dict[str, tuple[Callable[[], object], ...]]:
    """Per op: its forward, Paddle's, then each with paddle.grad."""
    cols = x.shape[-1]
    paddle_softmax = _in_float32(lambda t: F.softmax(t, axis=-1))
    paddle_layer_norm = _in_float32(lambda t, u, v: F.layer_norm(t, [cols], u, v, EPS))
    paddle_rms = _in_float32(_rms)
    paddle_add_rms = _in_float32(lambda t, s, u: _rms(t + s, u))
    softmax, layer_norm = ops["softmax"], ops["layer_norm"]
    rms_norm, add_rms_norm = ops["rms_norm"], ops["add_rms_norm"]
    return {
        "softmax": (lambda: softmax(x), lambda: paddle_softmax(x),
                    _with_grad(softmax, x), _with_grad(paddle_softmax, x)),
        "layer_norm": (lambda: layer_norm(x, w, b, EPS), lambda: paddle_layer_norm(x, w, b),
                       _with_grad(lambda *t: layer_norm(*t, EPS), x, w, b),
                       _with_grad(paddle_layer_norm, x, w, b)),
        "rms_norm": (lambda: rms_norm(x, w, EPS), lambda: paddle_rms(x, w),
                     _with_grad(lambda *t: rms_norm(*t, EPS), x, w), _with_grad(paddle_rms, x, w)),
        "add_rms_norm": (lambda: add_rms_norm(x, r, w, EPS), lambda: paddle_add_rms(x, r, w),
                         _with_grad(lambda *t: add_rms_norm(*t, EPS), x, r, w),
                         _with_grad(paddle_add_rms, x, r, w)),
    }


def main(shapes: list[tuple[int, int]], dtype: str) -> None:
    ops = {name: _load(name) for name in ("softmax", "layer_norm", "rms_norm", "add_rms_norm")}
    for rows, cols in shapes:
        rng = np.random.default_rng(0)
        tensors = []
        for shape in ((rows, cols), (rows, cols), (cols,), (cols,)):
            t = paddle.to_tensor(rng.standard_normal(shape).astype("float32")).astype(dtype)
            t.stop_gradient = False
            tensors.append(t)
        calls = max(1, (1 << 22) // (rows * cols))
        for name, fns in _pairs(ops, *tensors).items():
            times = [_best_us(fn, 9, calls) for fn in fns]
            print(f"{rows}x{cols} {dtype} {name:12s} forward {times[0]:9.0f} us vs "
                  f"{times[1]:9.0f} us ({times[0] / times[1]:.2f}x)   "
                  f"forward+backward {times[2]:9.0f} us vs "
                  f"{times[3]:9.0f} us ({times[2] / times[3]:.2f}x)", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    dtype = "float32"
    if args[:1] == ["--dtype"]:
        dtype, args = args[1], args[2:]
    args = args or ["4096x1024", "256x16384", "65536x64"]
    main([tuple(int(d) for d in a.split("x")) for a in args], dtype)  # type: ignore[misc]

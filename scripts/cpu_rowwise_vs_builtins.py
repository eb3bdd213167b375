"""The row-wise examples' CPU kernels against Paddle's own CPU ops (docs/benchmarks.md, "CPU
kernels"; issue 15 asks the other kinds' CPU paths to keep up with Paddle's as relu6's does):
softmax against F.softmax, layer_norm against F.layer_norm, rms_norm and add_rms_norm against
their composition of Paddle ops (x * rsqrt(mean(x * x) + eps) * w, after x + residual), float32,
forward and forward + backward (paddle.grad), interleaved in one run, best of N rounds. Each call
allocates its outputs, as a model's does. Paddle's thread setting applies to both sides (one
thread unless OMP_NUM_THREADS says otherwise). Run from the repository root:
    GLOG_minloglevel=3 python scripts/cpu_rowwise_vs_builtins.py [ROWSxCOLS ...]
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


def _pairs(ops: dict[str, Callable], x: paddle.Tensor, r: paddle.Tensor, w: paddle.Tensor,
           b: paddle.Tensor) -> dict[str, tuple[Callable[[], object], ...]]:
    """Per op: its forward, Paddle's, then each with paddle.grad."""
    cols = x.shape[-1]
    softmax, layer_norm = ops["softmax"], ops["layer_norm"]
    rms_norm, add_rms_norm = ops["rms_norm"], ops["add_rms_norm"]
    return {
        "softmax": (lambda: softmax(x), lambda: F.softmax(x, axis=-1),
                    _with_grad(softmax, x), _with_grad(lambda t: F.softmax(t, -1), x)),
        "layer_norm": (lambda: layer_norm(x, w, b, EPS),
                       lambda: F.layer_norm(x, [cols], w, b, EPS),
                       _with_grad(lambda *t: layer_norm(*t, EPS), x, w, b),
                       _with_grad(lambda t, u, v: F.layer_norm(t, [cols], u, v, EPS), x, w, b)),
        "rms_norm": (lambda: rms_norm(x, w, EPS), lambda: _rms(x, w),
                     _with_grad(lambda *t: rms_norm(*t, EPS), x, w), _with_grad(_rms, x, w)),
        "add_rms_norm": (lambda: add_rms_norm(x, r, w, EPS), lambda: _rms(x + r, w),
                         _with_grad(lambda *t: add_rms_norm(*t, EPS), x, r, w),
                         _with_grad(lambda t, s, u: _rms(t + s, u), x, r, w)),
    }


def main(shapes: list[tuple[int, int]]) -> None:
    ops = {name: _load(name) for name in ("softmax", "layer_norm", "rms_norm", "add_rms_norm")}
    for rows, cols in shapes:
        rng = np.random.default_rng(0)
        tensors = []
        for shape in ((rows, cols), (rows, cols), (cols,), (cols,)):
            t = paddle.to_tensor(rng.standard_normal(shape).astype("float32"))
            t.stop_gradient = False
            tensors.append(t)
        calls = max(1, (1 << 22) // (rows * cols))
        for name, fns in _pairs(ops, *tensors).items():
            times = [_best_us(fn, 9, calls) for fn in fns]
            print(f"{rows}x{cols} {name:12s} forward {times[0]:9.0f} us vs {times[1]:9.0f} us "
                  f"({times[0] / times[1]:.2f}x)   forward+backward {times[2]:9.0f} us vs "
                  f"{times[3]:9.0f} us ({times[2] / times[3]:.2f}x)", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:] or ["4096x1024", "256x16384", "65536x64"]
    main([tuple(int(d) for d in a.split("x")) for a in args])  # type: ignore[misc]

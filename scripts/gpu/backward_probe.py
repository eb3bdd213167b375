"""Where a bias_gelu backward step through Paddle's autograd goes, per dtype (issue 11: the
bfloat16 step took 0.113 ms against 0.068 ms in float16, while the launcher alone ran both at
the same rate). Times, for each dtype in turn and then again in the other order: the forward
call, `paddle.grad` of the whole step, and the generated backward op called directly
(`custom_bias_gelu_grad` has no Python API, so through the wrapper's autograd only). Run under
nsys (scripts/gpu/h200.sh backward-probe) it also lists every kernel and CUDA call of the steps.

    python3 scripts/gpu/backward_probe.py examples/bias_gelu --shape 16384x1024:1024
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("op_dir", type=Path)
    parser.add_argument("--shape", default="16384x1024:1024")
    parser.add_argument("--dtypes", default="bfloat16,float16")
    parser.add_argument("--iters", type=int, default=200)
    args = parser.parse_args()

    import paddle

    from opgen.tensors import to_paddle

    sys.path.insert(0, str(args.op_dir.resolve()))
    name = args.op_dir.resolve().name
    op = getattr(importlib.import_module(name), name)
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shape.split(":")]
    rng = np.random.default_rng(0)
    host = [rng.uniform(-3, 3, s).astype(np.float32) for s in shapes]
    sync = paddle.device.cuda.synchronize

    def timed(fn, iters: int) -> float:
        for _ in range(5):
            fn()
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        return (time.perf_counter() - start) * 1e3 / iters

    dtypes = args.dtypes.split(",")
    for order in (dtypes, dtypes[::-1]):
        for dtype in order:
            inputs = [to_paddle(h, dtype, "gpu", stop_gradient=False) for h in host]
            out = op(*inputs)
            grad = to_paddle(rng.uniform(-1, 1, tuple(out.shape)).astype(np.float32), dtype,
                             "gpu")
            def step(wrt: list, out=out, grad=grad) -> None:
                paddle.grad([out], wrt, grad_outputs=[grad], retain_graph=True)

            fwd = timed(lambda inputs=inputs: op(*inputs), args.iters)
            both = timed(lambda inputs=inputs: step(inputs), args.iters)
            only_x = timed(lambda inputs=inputs: step(inputs[:1]), args.iters)
            paddle.device.cuda.synchronize()
            print(f"{dtype:9s} forward {fwd:.4f} ms  grad(x, bias) {both:.4f} ms  "
                  f"grad(x) {only_x:.4f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

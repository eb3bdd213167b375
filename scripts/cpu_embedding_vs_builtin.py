"""The custom kind's CPU kernels against Paddle's (docs/benchmarks.md, "CPU kernels"; issue 15 asks
every kind's CPU path to keep up with Paddle's): examples/embedding against F.embedding, forward
and forward + backward (paddle.grad of the table), the two interleaved in one run, each round in a
new random order, best of N rounds. Each call allocates its outputs, as a model's does; Paddle's
thread setting applies to both sides. Run from the repository root:
    GLOG_minloglevel=3 python scripts/cpu_embedding_vs_builtin.py [--dtype D] [IDSxVxD ...]
"""

from __future__ import annotations

import random
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

ROUNDS = 15


def _with_grad(fn: Callable[..., paddle.Tensor], ids: paddle.Tensor,
               table: paddle.Tensor) -> Callable[[], object]:
    def run() -> object:
        out = fn(ids, table)
        return paddle.grad([out], [table], grad_outputs=[paddle.ones_like(out)])
    return run


def main(shapes: list[tuple[int, int, int]], dtype: str) -> None:
    embedding = api.load_op(ROOT / "examples" / "embedding", cpu_only=True).embedding
    for n, v, d in shapes:
        rng = np.random.default_rng(0)
        ids = paddle.to_tensor(rng.integers(0, v, n).astype("int64"))
        table = paddle.to_tensor(rng.standard_normal((v, d)).astype("float32")).astype(dtype)
        table.stop_gradient = False
        calls = {"op forward": lambda: embedding(ids, table),  # noqa: B023
                 "F.embedding forward": lambda: F.embedding(ids, table),  # noqa: B023
                 "op forward+backward": _with_grad(embedding, ids, table),
                 "F.embedding forward+backward": _with_grad(F.embedding, ids, table)}
        # calls a round: ~4M elements moved forward (the lookup), ~16M with the backward (which
        # also fills the table's gradient); never 1 call a round for a small lookup, whose time a
        # single call's noise would decide
        repeat = {name: max(1, (1 << 22) // (n * d) if "backward" not in name else
                            (1 << 24) // (n * d + v * d)) for name in calls}
        best = dict.fromkeys(calls, float("inf"))
        order = list(calls.items())
        for _ in range(ROUNDS):
            random.shuffle(order)
            for name, fn in order:
                start = time.perf_counter()
                for _ in range(repeat[name]):
                    fn()
                best[name] = min(best[name], (time.perf_counter() - start) / repeat[name] * 1e6)
        forward = best["op forward"] / best["F.embedding forward"]
        both = best["op forward+backward"] / best["F.embedding forward+backward"]
        print(f"ids [{n}], table [{v}, {d}] {dtype}: forward {best['op forward']:.0f} us vs "
              f"{best['F.embedding forward']:.0f} us ({forward:.2f}x)   forward+backward "
              f"{best['op forward+backward']:.0f} us vs "
              f"{best['F.embedding forward+backward']:.0f} us ({both:.2f}x)", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    dtype = "float32"
    if args[:1] == ["--dtype"]:
        dtype, args = args[1], args[2:]
    args = args or ["8192x32000x512", "65536x1000x256", "64x50000x1024"]
    main([tuple(int(k) for k in a.split("x")) for a in args], dtype)  # type: ignore[misc]

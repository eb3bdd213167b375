"""A generated wrapper against the op's raw entry into Paddle's custom-op machinery, one process
per run (docs/benchmarks.md, "Custom and row-wise calls"): examples/embedding (ids [4], table
[50, 12]), examples/rms_norm ([4, 8], [8]) or examples/relu6 ([1]), float32 on the CPU, the
wrapper, `_C_ops._run_custom_op` and the built-in (F.embedding, none, F.relu6) taking turns in a
random order each round, best of 25 rounds of 2000 calls. To compare two versions of a wrapper,
put the older beside the op under another name and run the two in turn, from the repository root:
    git show COMMIT:examples/rms_norm/rms_norm.py > examples/rms_norm/_before_rms_norm.py
    GLOG_minloglevel=3 python scripts/wrapper_ab.py rms_norm _before_rms_norm.py
    GLOG_minloglevel=3 python scripts/wrapper_ab.py rms_norm rms_norm.py
"""

from __future__ import annotations

import importlib.util
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import paddle
import paddle.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
CALLS, ROUNDS = 2000, 25


def calls_of(op: str, module) -> dict[str, Callable[[], object]]:
    run = None
    if op == "embedding":
        ids, table = paddle.to_tensor(np.arange(4, dtype="int64")), paddle.randn([50, 12])
        module.embedding(ids, table)  # loads the library and the entry
        run = module._run
        return {"built-in": lambda: F.embedding(ids, table),
                "entry": lambda: run("custom_embedding", ids, table, -1, False, True)[0],
                "op": lambda: module.embedding(ids, table)}
    if op == "rms_norm":
        x, w = paddle.rand([4, 8]), paddle.rand([8])
        module.rms_norm(x, w)
        run, bits = module._run, module._float_bits(1e-6, "eps")
        return {"entry": lambda: run("custom_rms_norm", x, w, bits)[0],
                "op": lambda: module.rms_norm(x, w)}
    x = paddle.rand([1])
    module.relu6(x)
    run, bits = module._run, module._float_bits(6.0, "threshold")
    return {"built-in": lambda: F.relu6(x), "entry": lambda: run("custom_relu6", x, bits)[0],
            "op": lambda: module.relu6(x)}


def main(op: str, wrapper: str) -> None:
    spec = importlib.util.spec_from_file_location(f"wrapper_{op}", ROOT / "examples" / op / wrapper)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls = calls_of(op, module)
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(ROUNDS):
        order = list(calls)
        random.shuffle(order)
        for name in order:
            fn = calls[name]
            start = time.perf_counter()
            for _ in range(CALLS):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / CALLS * 1e6)
    shown = "  ".join(f"{name} {us:.2f} us" for name, us in best.items())
    print(f"{op} {wrapper}: {shown}  | op - entry {best['op'] - best['entry']:+.2f} us, "
          f"op / entry {best['op'] / best['entry']:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""What the generated wrapper costs over the cheapest entry into Paddle's custom-op machinery
(issue 15; docs/benchmarks.md, "Per call"): examples/relu6 at one float32 element on the CPU,
each of these called 2000 times a round, in a new random order each round, best of 25 rounds:
    F.relu6    Paddle's built-in, the call a model would make instead
    entry      _C_ops._run_custom_op("custom_relu6", x, bits)[0], the C++ entry the wrapper calls
    bare       a Python function that does nothing but that call (the cost of having a wrapper)
    op         relu6(x), the generated wrapper
Run from the repository root: GLOG_minloglevel=3 python scripts/wrapper_over_entry.py
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import paddle
import paddle.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from opgen import api  # noqa: E402

CALLS = 2000
ROUNDS = 25


def main() -> None:
    module = api.load_op(ROOT / "examples" / "relu6", cpu_only=True)
    relu6 = module.relu6
    x = paddle.rand([1])
    relu6(x)  # loads the library and the entry
    run = module._run
    bits = {6.0: module._float_bits(6.0, "threshold")}

    def entry() -> paddle.Tensor:
        return run("custom_relu6", x, bits[6.0])[0]

    def bare(t: paddle.Tensor) -> paddle.Tensor:
        return run("custom_relu6", t, bits[6.0])[0]

    calls: dict[str, tuple[Callable[..., object], tuple[object, ...]]] = {
        "F.relu6": (F.relu6, (x,)), "entry": (entry, ()), "bare": (bare, (x,)),
        "op": (relu6, (x,))}
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(ROUNDS):
        order = list(calls)
        random.shuffle(order)
        for name in order:
            fn, args = calls[name]
            start = time.perf_counter()
            for _ in range(CALLS):
                fn(*args)
            best[name] = min(best[name], (time.perf_counter() - start) / CALLS * 1e6)
    for name, us in best.items():
        print(f"{name:8s} {us:7.3f} us   over the entry {us - best['entry']:+.3f} us   "
              f"/ entry {us / best['entry']:.3f}")


if __name__ == "__main__":
    main()

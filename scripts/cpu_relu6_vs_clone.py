"""relu6 against F.relu6 and Paddle's own copy (x.clone()) at 2^20 float32 elements on the CPU,
with the page faults each call takes: where the generated relu6 stands against what reading and
writing 4 MB costs through Paddle (docs/benchmarks.md, "CPU kernels"). Interleaved, best of 15
rounds of 200 calls, each round in a new random order. Run from the repository root:
    GLOG_minloglevel=3 python scripts/cpu_relu6_vs_clone.py
"""

from __future__ import annotations

import random
import resource
import sys
import time
from pathlib import Path

import numpy as np
import paddle
import paddle.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from opgen import api  # noqa: E402

relu6 = api.load_op(ROOT / "examples" / "relu6", cpu_only=True).relu6
x = paddle.to_tensor(np.random.default_rng(0).uniform(-2, 8, 2**20).astype("float32"))
calls = {"F.relu6": lambda: F.relu6(x), "relu6": lambda: relu6(x), "x.clone()": x.clone}
best = dict.fromkeys(calls, float("inf"))
faults = dict.fromkeys(calls, 0.0)
order = list(calls.items())
for fn in calls.values():
    for _ in range(20):
        fn()
for _ in range(15):
    random.shuffle(order)
    for name, fn in order:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        for _ in range(200):
            fn()
        best[name] = min(best[name], (time.perf_counter() - start) / 200 * 1e6)
        faults[name] = max(faults[name],
                           (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 200)
print("2^20 float32: " + "  ".join(f"{n} {us:.0f} us ({faults[n]:.1f} faults a call)"
                                   for n, us in best.items())
      + f"  | relu6 / F.relu6 {best['relu6'] / best['F.relu6']:.2f}"
      + f"  relu6 / clone {best['relu6'] / best['x.clone()']:.2f}")

"""CPU kernels against Paddle's built-ins (docs/benchmarks.md, "CPU kernels"): relu6 against
F.relu6 and bias_gelu against F.gelu(x + b, approximate=True), float32, at 2^20 and 2^24
elements, interleaved in one run, best of 31 rounds, each round taking the four in a new random
order (on a noisy machine, whichever ran just before a call changes its time). Each call allocates
its output, as a model's does. Run from the repository root:
    GLOG_minloglevel=3 python scripts/cpu_kernels_vs_builtins.py
"""

from __future__ import annotations

import random
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
bias_gelu = api.load_op(ROOT / "examples" / "bias_gelu", cpu_only=True).bias_gelu
for k in (20, 24):
    rng = np.random.default_rng(0)
    x = paddle.to_tensor(rng.uniform(-2, 8, 2**k).astype("float32"))
    rows = x.reshape([-1, 1024])
    b = paddle.to_tensor(rng.uniform(-1, 1, 1024).astype("float32"))
    calls = {"F.relu6": lambda: F.relu6(x), "relu6": lambda: relu6(x),  # noqa: B023
             "F.gelu(x+b)": lambda: F.gelu(rows + b, approximate=True),  # noqa: B023
             "bias_gelu": lambda: bias_gelu(rows, b)}  # noqa: B023
    n = 20 if k == 20 else 2
    best = dict.fromkeys(calls, float("inf"))
    order = list(calls.items())
    for _ in range(31):
        random.shuffle(order)
        for name, fn in order:
            start = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / n * 1e6)
    print(f"2^{k}: " + "  ".join(f"{name} {us:.0f} us" for name, us in best.items())
          + f"  | relu6 / F.relu6 {best['relu6'] / best['F.relu6']:.2f}"
          + f"  bias_gelu / F.gelu(x+b) {best['bias_gelu'] / best['F.gelu(x+b)']:.2f}",
          flush=True)

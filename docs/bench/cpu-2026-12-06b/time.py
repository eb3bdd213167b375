"""One variant's CPU forward times (ms a call, best of 7 rounds of 20 calls), three dtypes:
relu6, softclip (tanh) and swish (sigmoid) at 2^16 and 2^20 elements, layer_norm at [256, 4096]."""
import sys, time, json
import numpy as np, paddle, opgen
variant = sys.argv[1]
rows = {}

def best_of(call):
    for _ in range(3): call()
    best = 1e9
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(20): call()
        best = min(best, (time.perf_counter() - t) / 20)
    return best * 1e3

rng = np.random.default_rng(0)
for op in ("relu6", "softclip", "swish"):
    fn = getattr(opgen.load(f"/tmp/cmp/{variant}/{op}"), op)
    for n in (1 << 16, 1 << 20):
        for dtype in ("float32", "float16", "bfloat16"):
            x = paddle.to_tensor(rng.uniform(-4, 8, n).astype("float32")).astype(dtype)
            rows[f"{op} {dtype} {n}"] = best_of(lambda: fn(x))
ln = opgen.load(f"/tmp/cmp/{variant}/layer_norm").layer_norm
for dtype in ("float32", "float16", "bfloat16"):
    x = paddle.to_tensor(rng.standard_normal((256, 4096)).astype("float32")).astype(dtype)
    w = paddle.ones([4096], dtype=dtype)
    b = paddle.zeros([4096], dtype=dtype)
    rows[f"layer_norm {dtype} 256x4096"] = best_of(lambda: ln(x, w, b))
print(json.dumps(rows))

"""Where a rowwise example's call goes on the GPU (docs/benchmarks.md, round 6): per dtype, the
wall time of back-to-back calls with one synchronization, and the host's time to issue them
(the same calls before that synchronization); under ncu (`--calls 3`), each kernel's duration.
If issuing takes as long as the calls, the host is the bound; else the kernels are.
  python3 scripts/gpu/rowwise_call_profile.py layer_norm [--calls 50] [--shape 4096x4096]"""

import argparse
import time

import numpy as np
import paddle

import opgen

parser = argparse.ArgumentParser()
parser.add_argument("op")
parser.add_argument("--calls", type=int, default=50)
parser.add_argument("--shape", default="4096x4096")
args = parser.parse_args()
rows, cols = (int(v) for v in args.shape.split("x"))
fn = getattr(opgen.load(f"examples/{args.op}"), args.op)
place = paddle.CUDAPlace(0)
rng = np.random.default_rng(0)


def on_gpu(array, dtype):
    return paddle.to_tensor(array, place=paddle.CPUPlace()).astype(dtype)._copy_to(place, True)


for dtype in ("float32", "bfloat16", "float16"):
    x = on_gpu(rng.standard_normal((rows, cols)).astype("float32"), dtype)
    column = on_gpu(rng.standard_normal(cols).astype("float32"), dtype)
    inputs = {"softmax": [x], "rms_norm": [x, column], "layer_norm": [x, column, column],
              "add_rms_norm": [x, x, column]}[args.op]
    for _ in range(3):
        fn(*inputs)
    paddle.device.cuda.synchronize()
    issued, total = [], []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(args.calls):
            fn(*inputs)
        issued.append(time.perf_counter() - start)
        paddle.device.cuda.synchronize()
        total.append(time.perf_counter() - start)
    print(f"{args.op} {dtype} {args.shape}: {min(total) / args.calls * 1e6:.1f} us a call, "
          f"{min(issued) / args.calls * 1e6:.1f} us to issue one", flush=True)

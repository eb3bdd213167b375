"""The `elementwise-inplace` stage of scripts/gpu/h200.sh (issue 12): the in-place variant of an
elementwise op with two outputs (tests/specs/bias_relu_mask.yaml, one output written over x, the
other new) on gpu:0, for the op folder given.

paddlepaddle-gpu 2.6.2's eager custom-op entry ignores SetInplaceMap (NAME_ refuses there), and
its own kernels do not run on sm_90; its static graph does write over the input, and feeding and
fetching are copies. So the in-place CUDA kernel runs here in a static program of that op alone,
fed from the host; on a Paddle 3 it also runs eagerly. Every result is compared on the host with
numpy's exact result of the spec's math (one add and a select: the sum of two values of the
dtype, exact in float64, rounded once), bit for bit. Not with the op's CPU kernels: built against
Paddle 2.6.2 their float16 results are 1 ulp off in places (that Paddle's host float-to-half
conversion; measured 2026-12-01, the same kernels built against 3.3.1 equal numpy).
Prints one line per check; exits 1 if any fails.

Usage: python3 scripts/gpu/elementwise_inplace.py OP_DIR [--device gpu|cpu]
(--device cpu: a dry run of the same checks on this machine)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import paddle
import yaml

import opgen
from opgen import build

failures: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        failures.append(name)


def exact(x: np.ndarray, bias: np.ndarray) -> list[np.ndarray]:
    """bias_relu_mask's outputs (out, mask) from numpy: u = x + bias in float64 (exact for two
    values of x's dtype), rounded once to that dtype."""
    u = x.astype(np.float64) + bias.astype(np.float64)
    return [np.where(u > 0, u, 0).astype(x.dtype), np.where(u > 0, 1, 0).astype(x.dtype)]


def same(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[bool, str]:
    """Equal shapes and values (the op is one add and a select: no rounding differs)."""
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or not np.array_equal(g, w):
            diff = np.max(np.abs(g.astype(np.float64) - w)) if g.shape == w.shape else "shape"
            return False, f"output #{k}: {g.shape} against {w.shape}, max |diff| {diff}"
    return True, ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("op_dir", type=Path)
    parser.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    args = parser.parse_args()
    name = build.find_op(args.op_dir)
    module = opgen.load(args.op_dir, cpu_only=args.device == "cpu")
    op, op_ = getattr(module, name), getattr(module, f"{name}_")
    place = paddle.CUDAPlace(0) if args.device == "gpu" else paddle.CPUPlace()
    device = "gpu:0" if args.device == "gpu" else "cpu"
    spec = yaml.safe_load((args.op_dir / f"{name}.yaml").read_text())
    (written,) = spec["inplace"].values()  # the output written over x
    index = spec["outputs"].index(written)
    print(f"{name}_ on {device}, Paddle {paddle.__version__}: {written} over x", flush=True)

    rng = np.random.default_rng(12)
    for dtype in ("float32", "float16", "float64"):
        x = rng.uniform(-3, 3, (3, 333337)).astype(dtype)  # rows of an odd length: a tail
        bias = rng.uniform(-1, 1, x.shape[1:]).astype(dtype)
        by_name = dict(zip(("out", "mask"), exact(x, bias), strict=True))
        host = [by_name[o] for o in spec["outputs"]]  # in the op's order

        paddle.enable_static()
        try:
            main_program = paddle.static.Program()
            with paddle.static.program_guard(main_program, paddle.static.Program()):
                data = [paddle.static.data("x", list(x.shape), dtype),
                        paddle.static.data("bias", list(bias.shape), dtype)]
                outs = list(op_(*data))
            got = paddle.static.Executor(place).run(main_program, feed={"x": x, "bias": bias},
                                                    fetch_list=outs)
        finally:
            paddle.disable_static()
        check(f"{dtype}: {name}_ in a static program on {device} equals numpy",
              *same(got, host))

        gx, gb = paddle.to_tensor(x, place=place), paddle.to_tensor(bias, place=place)
        eager = [t.numpy() for t in op(gx, gb)]
        check(f"{dtype}: {name} eager on {device} equals numpy", *same(eager, host))
        address = gx.data_ptr()
        if paddle.__version__.startswith("2."):
            try:
                op_(gx, gb)
            except NotImplementedError:
                check(f"{dtype}: {name}_ eager on Paddle 2.6 refuses (NotImplementedError)", True)
            else:
                check(f"{dtype}: {name}_ eager on Paddle 2.6 refuses (NotImplementedError)",
                      False)
            continue
        result = op_(gx, gb)
        check(f"{dtype}: {name}_ eager on {device} writes {written} over x",
              result[index].data_ptr() == address == gx.data_ptr()
              and result[1 - index].data_ptr() != address)
        check(f"{dtype}: {name}_ eager on {device} equals numpy",
              *same([t.numpy() for t in result], host))
        check(f"{dtype}: x holds {written} after {name}_", *same([gx.numpy()], [host[index]]))

    print(f"{len(failures)} failed" if failures else "all passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

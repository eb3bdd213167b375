"""PyTorch copy and composed baselines on the GPU, for ``opgen bench`` (run as a subprocess so
torch's CUDA libraries never share a process with Paddle's). Prints the rows as one JSON line."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from types import CodeType
from typing import Any

import numpy as np

from .bench import (
    Row,
    _dtype_size,
    _rotation,
    compile_baseline,
    evaluate_baseline,
    framework_namespace,
    iterations,
    time_it,
)
from .expr import check_baseline


def rows_for(torch: Any, tree: CodeType | None, args: dict[str, Any], dtype: str,
             size: int) -> list[Row]:
    """The copy, and the baseline's forward and backward, at one dtype and size."""
    names, attrs, repeats = args["inputs"], args["attrs"], args["repeats"]
    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    nbytes = (len(names) + args["n_out"]) * size * _dtype_size(dtype)
    r = _rotation(nbytes)
    sets = [[torch.from_numpy(rng.uniform(lo, hi, size).astype(np.float32)).to(
        "cuda", getattr(torch, dtype)) for lo, hi in args["domains"]] for _ in range(r)]
    dst = torch.empty_like(sets[0][0])
    calls = iter(range(1 << 62))
    copy_bytes = 2 * size * _dtype_size(dtype)
    ms = time_it(lambda: dst.copy_(sets[next(calls) % r][0]), sync,
                 iters=iterations(copy_bytes, "gpu"), repeats=repeats)
    rows = [Row("copy", "forward", dtype, size, copy_bytes, ms, copy_bytes / ms / 1e6)]
    if tree is None:
        return rows
    ns = framework_namespace(torch, sets[0][0], "torch")

    def composed(inputs: list[Any]) -> Any:
        return evaluate_baseline(tree, ns, attrs, dict(zip(names, inputs, strict=True)))

    ms = time_it(lambda: composed(sets[next(calls) % r]), sync, iters=iterations(nbytes, "gpu"),
                 repeats=repeats)
    rows.append(Row("baseline", "forward", dtype, size, nbytes, ms, nbytes / ms / 1e6))
    graphs = []
    for inputs in sets:
        leaves = [t.clone().requires_grad_(True) for t in inputs]
        out = composed(leaves)
        graphs.append((out, leaves, torch.rand_like(out)))
    bwd_bytes = (2 * len(names) + args["n_out"]) * size * _dtype_size(dtype)

    def backward() -> None:
        out, leaves, grad = graphs[next(calls) % r]
        torch.autograd.grad(out, leaves, grad, retain_graph=True)

    ms = time_it(backward, sync, iters=iterations(bwd_bytes, "gpu"), repeats=repeats)
    rows.append(Row("baseline", "backward", dtype, size, bwd_bytes, ms, bwd_bytes / ms / 1e6))
    return rows


def main() -> None:
    import torch

    args = json.loads(sys.argv[1])
    tree = None
    if args["baseline"]:
        tree = compile_baseline(check_baseline(args["baseline"], args["symbols"]))
    rows = [row for dtype in args["dtypes"] for size in args["sizes"]
            for row in rows_for(torch, tree, args, dtype, size)]
    print(json.dumps([asdict(x) for x in rows]))


if __name__ == "__main__":
    main()

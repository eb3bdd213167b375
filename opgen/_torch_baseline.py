"""PyTorch copy and composed baselines on the GPU, for ``opgen bench`` (run as a subprocess so
torch's CUDA libraries never share a process with Paddle's). Prints the rows as one JSON line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from types import CodeType
from typing import Any

import numpy as np

from .bench import (
    CallRow,
    Case,
    Row,
    _dtype_size,
    _rotation,
    backward_elements,
    best_us,
    calls_per_round,
    compile_baseline,
    copy_elements,
    evaluate_baseline,
    forward_elements,
    framework_namespace,
    iterations,
    time_it,
)
from .expr import check_baseline


def rows_for(torch: Any, tree: CodeType | None, args: dict[str, Any], dtype: str,
             case: Case) -> list[Row]:
    """The copy, and the baseline's forward and backward, at one dtype and case (PyTorch
    broadcasts the inputs' shapes itself)."""
    names, attrs, repeats, n_out = args["inputs"], args["attrs"], args["repeats"], args["n_out"]
    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    item = _dtype_size(dtype)
    nbytes = forward_elements(case, len(names), n_out) * item
    r = _rotation(nbytes)

    def tensor(shape: tuple[int, ...], lo: float, hi: float) -> Any:
        return torch.from_numpy(rng.uniform(lo, hi, shape).astype(np.float32)).to(
            "cuda", getattr(torch, dtype))

    sets = [[tensor(shape, lo, hi) for shape, (lo, hi)
             in zip(case.input_shapes(len(names)), args["domains"], strict=True)]
            for _ in range(r)]
    n_copy = copy_elements(case, len(names), n_out)
    sources = [tensor((n_copy,), -1.0, 1.0) for _ in range(r)]
    dst = torch.empty_like(sources[0])
    calls = iter(range(1 << 62))
    copy_bytes = 2 * n_copy * item
    ms = time_it(lambda: dst.copy_(sources[next(calls) % r]), sync,
                 iters=iterations(copy_bytes, "gpu"), repeats=repeats)
    rows = [Row("copy", "forward", dtype, case.size, copy_bytes, ms, copy_bytes / ms / 1e6,
                case.label)]
    if tree is None:
        return rows
    ns = framework_namespace(torch, sets[0][0], "torch")

    def composed(inputs: list[Any]) -> Any:
        return evaluate_baseline(tree, ns, attrs, dict(zip(names, inputs, strict=True)))

    ms = time_it(lambda: composed(sets[next(calls) % r]), sync, iters=iterations(nbytes, "gpu"),
                 repeats=repeats)
    rows.append(Row("baseline", "forward", dtype, case.size, nbytes, ms, nbytes / ms / 1e6,
                    case.label))
    graphs = []
    for inputs in sets:
        leaves = [t.clone().requires_grad_(True) for t in inputs]
        out = composed(leaves)
        graphs.append((out, leaves, torch.rand_like(out)))
    # the inputs and the output gradients read, each input's gradient written
    reads = names + [f"grad_out{i}" for i in range(n_out)]
    bwd_bytes = backward_elements(case, names, reads) * item

    def backward() -> None:
        out, leaves, grad = graphs[next(calls) % r]
        torch.autograd.grad(out, leaves, grad, retain_graph=True)

    ms = time_it(backward, sync, iters=iterations(bwd_bytes, "gpu"), repeats=repeats)
    rows.append(Row("baseline", "backward", dtype, case.size, bwd_bytes, ms,
                    bwd_bytes / ms / 1e6, case.label))
    return rows


def per_call_rows(torch: Any, args: dict[str, Any]) -> list[CallRow]:
    """PyTorch's built-in per call at each size, float32, on the GPU:
    ``torch.nn.functional.<name>`` where torch has one, else the spec's baseline."""
    names, attrs = args["inputs"], args["attrs"]
    rng = np.random.default_rng(0)
    builtin = getattr(torch.nn.functional, args["name"], None)
    tree = None if builtin is not None or not args["baseline"] else \
        compile_baseline(check_baseline(args["baseline"], args["symbols"]))
    if builtin is None and tree is None:
        return []
    call = (f"torch F.{args['name']}({', '.join(names)})" if builtin is not None
            else f"torch {args['baseline']}")

    def timed(inputs: list[Any]) -> Callable[[], Any]:
        if builtin is not None:
            return lambda: builtin(*inputs)
        ns = framework_namespace(torch, inputs[0], "torch")
        given = dict(zip(names, inputs, strict=True))
        return lambda: evaluate_baseline(tree, ns, attrs, given)

    rows = []
    for size in args["sizes"]:
        inputs = [torch.from_numpy(rng.uniform(lo, hi, (size,)).astype(np.float32)).cuda()
                  for lo, hi in args["domains"]]
        us = best_us(timed(inputs), torch.cuda.synchronize, calls=calls_per_round(size),
                     rounds=args["rounds"])
        rows.append(CallRow("builtin", call, "gpu", size, us))
    return rows


def main() -> None:
    import torch

    args = json.loads(sys.argv[1])
    if args.get("per_call"):
        print(json.dumps([asdict(x) for x in per_call_rows(torch, args)]))
        return
    tree = None
    if args["baseline"]:
        tree = compile_baseline(check_baseline(args["baseline"], args["symbols"]))
    cases = [Case(size, None if shapes is None else tuple(map(tuple, shapes)))
             for size, shapes in args["cases"]]
    rows = [row for dtype in args["dtypes"] for case in cases
            for row in rows_for(torch, tree, args, dtype, case)]
    print(json.dumps([asdict(x) for x in rows]))


if __name__ == "__main__":
    main()

"""PyTorch copy and composed baselines on the GPU, for ``opgen bench`` (run as a subprocess so
torch's CUDA libraries never share a process with Paddle's). Prints the rows as one JSON line."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import numpy as np

from .bench import Row, _dtype_size, _rotation, check_baseline, framework_namespace, iterations
from .bench import time_it


def main() -> None:
    import torch

    args = json.loads(sys.argv[1])
    rows: list[Row] = []
    names, attrs = args["inputs"], args["attrs"]
    tree = None
    if args["baseline"]:
        tree = compile(check_baseline(args["baseline"], set(names) | set(attrs)), "<baseline>",
                       "eval")
    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    for dtype in args["dtypes"]:
        tdtype = getattr(torch, dtype)
        for size in args["sizes"]:
            nbytes = (len(names) + args["n_out"]) * size * _dtype_size(dtype)
            r = _rotation(nbytes)
            sets = [[torch.from_numpy(rng.uniform(lo, hi, size).astype(np.float32)).to(
                "cuda", tdtype) for lo, hi in args["domains"]] for _ in range(r)]
            dst = torch.empty_like(sets[0][0])
            counter = [0]
            copy_bytes = 2 * size * _dtype_size(dtype)

            def copy() -> None:
                counter[0] += 1
                dst.copy_(sets[counter[0] % r][0])

            ms = time_it(copy, sync, iters=iterations(copy_bytes, "gpu"), repeats=args["repeats"])
            rows.append(Row("copy", "forward", dtype, size, copy_bytes, ms,
                            copy_bytes / ms / 1e6))
            if tree is None:
                continue
            ns = framework_namespace(torch, sets[0][0], "torch")

            def composed(inputs: list) -> object:
                return eval(tree, {**ns, **attrs, **dict(zip(names, inputs))})

            def forward() -> None:
                counter[0] += 1
                composed(sets[counter[0] % r])

            ms = time_it(forward, sync, iters=iterations(nbytes, "gpu"), repeats=args["repeats"])
            rows.append(Row("baseline", "forward", dtype, size, nbytes, ms, nbytes / ms / 1e6))
            graphs = []
            for inputs in sets:
                leaves = [t.clone().requires_grad_(True) for t in inputs]
                out = composed(leaves)
                graphs.append((out, leaves, torch.rand_like(out)))
            bwd_bytes = (2 * len(names) + args["n_out"]) * size * _dtype_size(dtype)

            def backward() -> None:
                counter[0] += 1
                out, leaves, grad = graphs[counter[0] % r]
                torch.autograd.grad(out, leaves, grad, retain_graph=True)

            ms = time_it(backward, sync, iters=iterations(bwd_bytes, "gpu"),
                         repeats=args["repeats"])
            rows.append(Row("baseline", "backward", dtype, size, bwd_bytes, ms,
                            bwd_bytes / ms / 1e6))
    print(json.dumps([asdict(x) for x in rows]))


if __name__ == "__main__":
    main()

"""examples/embedding through Paddle on the GPU machine (scripts/gpu/h200.sh's `embedding` stage):
the op's forward and its table gradient, called as a model calls them, against PyTorch's
F.embedding on the same GPU and shapes. Paddle's own GPU kernels may not run there (paddlepaddle-gpu
2.6.2 has no sm_90 code), so inputs are copied from the host and gradients passed explicitly.
Also: an out-of-range id on the GPU must be a clear error, not a crash or a silent read."""

import itertools
import sys
import time

import numpy as np
import paddle
import torch
import torch.nn.functional as F

import opgen

op = opgen.load(sys.argv[1] if len(sys.argv) > 1 else "examples/embedding").embedding


def wall_ms(fn, sync, calls=50):
    """Milliseconds a call by wall clock over back-to-back calls, one sync per batch (median of
    5 batches): how the op is timed, and PyTorch too for a like-for-like column."""
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3 / calls)
    return sorted(times)[2]


def paddle_ms(fn, calls=50):
    return wall_ms(fn, paddle.device.cuda.synchronize, calls)


def torch_ms(fn, calls=50):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return sorted(times)[2]


def captured(place):
    """Under a CUDA graph's capture: with check_ids (the default) a clear error, since the check
    waits for the gather; with check_ids=False the replayed graph gathers the rows."""
    try:
        from paddle.device.cuda.graphs import CUDAGraph
    except ImportError as exc:
        print(f"CUDA graph capture: not checked ({exc})")
        return
    rng = np.random.default_rng(2)
    ids_np = rng.integers(0, 50, size=(8, 3))
    table_np = rng.standard_normal((50, 16)).astype(np.float32)
    ids = paddle.to_tensor(ids_np, place=place)
    table = paddle.to_tensor(table_np, place=place)
    graph = CUDAGraph(place=place, mode="thread_local")
    graph.capture_begin()
    try:
        op(ids, table)
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
        refused = str(exc)
    else:
        refused = ""
    finally:
        graph.capture_end()
    ok = "pass check_ids=False to capture the op" in refused
    said = next((line for line in refused.splitlines() if "check_ids" in line), refused[-160:])
    print(f"check_ids under capture: {'clear error' if ok else 'NOT REFUSED'}: {said.strip()}")
    graph = CUDAGraph(place=place, mode="thread_local")
    graph.capture_begin()
    out = op(ids, table, check_ids=False)
    graph.capture_end()
    graph.replay()  # the capture ran nothing: out's rows come from the replay
    paddle.device.cuda.synchronize()
    same = np.array_equal(out.numpy(), table_np[ids_np])
    print(f"check_ids=False captured and replayed: {'right rows' if same else 'WRONG'}")
    if not (ok and same):
        sys.exit(1)


def main():
    place = paddle.CUDAPlace(0)
    bad = paddle.to_tensor(np.array([1, 2, 7, 3]), place=place)
    try:
        op(bad, paddle.to_tensor(np.ones((5, 4), np.float32), place=place))
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
        ok = "ids holds 7 (at flat index 2), outside the table's rows [0, 5)" in str(exc)
        print(f"out-of-range id on the GPU: {'clear error' if ok else 'WRONG MESSAGE'}: {exc}")
        if not ok:
            sys.exit(1)
    else:
        print("out-of-range id on the GPU: NOT REFUSED")
        sys.exit(1)

    captured(place)
    n, rows, d = 65536, 100000, 1024
    rng = np.random.default_rng(1)
    uniform = rng.integers(0, rows, size=n)
    weights = 1.0 / np.arange(1, rows + 1)  # Zipf's law, as words are drawn: id k ~ 1 / (k + 1)
    zipf = rng.choice(rows, size=n, p=weights / weights.sum())
    print(f"ids [{n}], table [{rows}, {d}]; ms per call (median of 5 batches of 50)")
    print(f"{'ids':8} {'dtype':9} {'paddle op fwd':>14} {'unchecked':>10} {'torch fwd':>10} "
          f"{'torch wall':>10} {'op fwd+bwd':>11} {'+det':>8} {'torch fwd+bwd':>14}")
    for (label, ids_np), (dtype, tdtype) in itertools.product(
            (("uniform", uniform), ("zipf", zipf)),
            (("float32", torch.float32), ("bfloat16", torch.bfloat16),
             ("float16", torch.float16))):
        table_np = rng.standard_normal((rows, d)).astype(np.float32)
        ids = paddle.to_tensor(ids_np, place=place)
        table = paddle.to_tensor(table_np, place=paddle.CPUPlace()).astype(dtype)._copy_to(place, True)
        table.stop_gradient = False
        grad = paddle.to_tensor(np.full((n, d), 0.25, np.float32)).astype(dtype)._copy_to(place, True)
        fwd = paddle_ms(lambda: op(ids, table))
        unchecked = paddle_ms(lambda: op(ids, table, check_ids=False))
        both = paddle_ms(lambda: paddle.grad([op(ids, table)], [table], grad_outputs=[grad]), 20)
        det = paddle_ms(lambda: paddle.grad([op(ids, table, deterministic=True)], [table],
                                            grad_outputs=[grad]), 20)
        t_ids = torch.from_numpy(ids_np).cuda()
        t_table = torch.from_numpy(table_np).to("cuda", tdtype).requires_grad_()
        t_grad = torch.full((n, d), 0.25, device="cuda", dtype=tdtype)
        t_fwd = torch_ms(lambda: F.embedding(t_ids, t_table))
        t_wall = wall_ms(lambda: F.embedding(t_ids, t_table), torch.cuda.synchronize)
        t_both = torch_ms(lambda: torch.autograd.grad(F.embedding(t_ids, t_table), t_table,
                                                      t_grad), 20)
        print(f"{label:8} {dtype:9} {fwd:14.4f} {unchecked:10.4f} {t_fwd:10.4f} {t_wall:10.4f} {both:11.4f} "
              f"{det:8.4f} {t_both:14.4f}")


if __name__ == "__main__":
    main()

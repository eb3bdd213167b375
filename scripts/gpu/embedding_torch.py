"""PyTorch's F.embedding on the GPU machine, the baseline of scripts/gpu/embedding_bench.cu:
forward and the table's gradient (aten.embedding_dense_backward, what autograd runs) for the same
shapes, timed with CUDA events (median of 7 batches after a warm-up)."""

import torch
import torch.nn.functional as F


def time_ms(fn, calls=50):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(7):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return sorted(times)[3]


def main():
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    for dtype, n, rows, d in [(torch.float32, 65536, 100000, 1024),
                              (torch.bfloat16, 65536, 100000, 1024),
                              (torch.float16, 65536, 100000, 1024),
                              (torch.float32, 65536, 32000, 256)]:
        gen = torch.Generator(device="cuda").manual_seed(1)
        ids = torch.randint(0, rows, (n,), device="cuda", generator=gen)
        table = torch.full((rows, d), 0.5, device="cuda", dtype=dtype)
        grad = torch.full((n, d), 0.25, device="cuda", dtype=dtype)
        forward = time_ms(lambda: F.embedding(ids, table))
        backward = time_ms(lambda: torch.ops.aten.embedding_dense_backward(
            grad, ids, rows, -1, False), calls=20)
        moved = 2 * n * d * table.element_size() + n * 8
        print(f"{str(dtype).removeprefix('torch.'):9} ids [{n}] V={rows} D={d}")
        print(f"  torch forward           {forward:8.4f} ms  {moved / forward / 1e6:6.0f} GB/s")
        print(f"  torch backward          {backward:8.4f} ms  (embedding_dense_backward)")


if __name__ == "__main__":
    main()

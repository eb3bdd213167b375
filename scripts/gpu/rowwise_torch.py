"""PyTorch's softmax, layer_norm and rms_norm on the anchor shapes of issue 13, forward and
backward, beside a device-to-device copy of the same bytes, in the format of
scripts/gpu/rowwise_bench.cu (GB/s over the per-element tensors read and written). Run by
scripts/gpu/rowwise.sh."""

from __future__ import annotations

import torch
import torch.nn.functional as F

SHAPES = [(4096, 4096), (16384, 1024), (65536, 256), (1024, 32768), (262144, 128)]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def rms_norm(x: torch.Tensor, shape: tuple[int, ...], w: torch.Tensor, eps: float):
    """F.rms_norm where this PyTorch has it (2.4 on), else its composition."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, shape, w, eps)
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w


def ms(fn, iters: int) -> float:
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / iters


def line(op: str, rows: int, cols: int, dtype: str, t: float, nbytes: float,
         copy_gbs: float | None = None) -> None:
    gbs = nbytes / t / 1e6
    tail = f"  copy {copy_gbs:5.0f}  ratio {gbs / copy_gbs:.3f}" if copy_gbs else ""
    print(f"{op:<24} {rows:7d}x{cols:<6d} {dtype:<9} {t:8.4f} ms {gbs:7.0f} GB/s{tail}",
          flush=True)


def run_shape(rows: int, cols: int, dtype_name: str, dtype: torch.dtype) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, cols, device="cuda", dtype=dtype, generator=gen)
    g = torch.randn(rows, cols, device="cuda", dtype=dtype, generator=gen)
    w = torch.rand(cols, device="cuda", dtype=dtype, generator=gen) + 0.5
    b = torch.randn(cols, device="cuda", dtype=dtype, generator=gen)
    y = torch.empty_like(x)
    n = x.numel() * x.element_size()
    iters = max(100, int(2e10 / (4 * n)))
    t_copy = ms(lambda: y.copy_(x), iters)
    copy_gbs = 2 * n / t_copy / 1e6
    line("torch copy", rows, cols, dtype_name, t_copy, 2 * n)
    with torch.no_grad():
        fwd = {
            "torch softmax": lambda: torch.softmax(x, -1),
            "torch layer_norm": lambda: F.layer_norm(x, (cols,), w, b, 1e-5),
            "torch rms_norm": lambda: rms_norm(x, (cols,), w, 1e-6),
        }
        for op, fn in fwd.items():
            line(op, rows, cols, dtype_name, ms(fn, iters), 2 * n, copy_gbs)
    # backward: PyTorch's own kernels where it exposes them, autograd for rms_norm
    out = torch.softmax(x, -1)
    line("torch softmax_grad", rows, cols, dtype_name,
         ms(lambda: torch._softmax_backward_data(g, out, -1, x.dtype), iters), 3 * n, copy_gbs)
    _, mean, rstd = torch.native_layer_norm(x, (cols,), w, b, 1e-5)
    line("torch layer_norm_grad", rows, cols, dtype_name,
         ms(lambda: torch.ops.aten.native_layer_norm_backward(
             g, x, (cols,), mean, rstd, w, b, [True, True, True]), iters), 3 * n, copy_gbs)
    xr = x.detach().requires_grad_()
    wr = w.detach().requires_grad_()
    yr = rms_norm(xr, (cols,), wr, 1e-6)
    line("torch rms_norm_grad", rows, cols, dtype_name,
         ms(lambda: torch.autograd.grad(yr, (xr, wr), g, retain_graph=True), iters), 3 * n,
         copy_gbs)


def main() -> None:
    print("torch", torch.__version__, torch.cuda.get_device_name())
    for dtype_name, dtype in DTYPES.items():
        for rows, cols in SHAPES:
            run_shape(rows, cols, dtype_name, dtype)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

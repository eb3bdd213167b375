"""Where a custom op's call goes (issue 15): Paddle's custom-op entry with less and less work
behind it, beside examples/relu6 and the built-in, in one process, taking turns.

A probe op (built here with paddle.utils.cpp_extension.load) registers six ops that each take
one tensor x:
  floor_identity  returns x itself: the entry alone (no allocation, no kernel)
  floor_empty     returns paddle::empty of x's shape: the entry and an output
  floor_attr      floor_empty with an int64 attr, as relu6 takes its threshold's bits
  floor_backward  floor_attr with a backward registered (PD_BUILD_GRAD_OP), as relu6 has
  floor_launch    floor_empty, then one kernel of one block on x's stream (GPU; the CPU fills
                  nothing): the least a real op does
  floor_guard     floor_launch inside a device guard (cudaGetDevice, cudaSetDevice where it
                  differs), as opgen's kernels run
then times them with relu6's raw API and wrapper (built beforehand: `opgen build examples/relu6`)
and the built-in (F.relu6 on the CPU; PyTorch's F.relu6 in a subprocess on the GPU, since
Paddle 2.6.2's own GPU kernels do not run on sm_90), float32, best of the rounds.

    python3 scripts/gpu/entry_floor.py --device gpu --arch 90      # on the H200
    python3 scripts/gpu/entry_floor.py --device cpu                # here
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CC = r"""
#include <vector>
#include "paddle/extension.h"

#ifdef FLOOR_WITH_CUDA
std::vector<paddle::Tensor> LaunchOne(const paddle::Tensor& x, bool guard);
#endif

std::vector<paddle::Tensor> Identity(const paddle::Tensor& x) { return {x}; }

std::vector<paddle::Tensor> Empty(const paddle::Tensor& x) {
  return {paddle::empty(x.shape(), x.dtype(), x.place())};
}

std::vector<paddle::Tensor> EmptyAttr(const paddle::Tensor& x, int64_t bits) {
  return Empty(x);
}

std::vector<paddle::Tensor> EmptyAttrGrad(const paddle::Tensor& x, const paddle::Tensor& grad_out,
                                          int64_t bits) {
  return Empty(grad_out);
}

std::vector<paddle::Tensor> Launch(const paddle::Tensor& x) {
#ifdef FLOOR_WITH_CUDA
  if (x.is_gpu()) return LaunchOne(x, false);
#endif
  return Empty(x);
}

std::vector<paddle::Tensor> Guard(const paddle::Tensor& x) {
#ifdef FLOOR_WITH_CUDA
  if (x.is_gpu()) return LaunchOne(x, true);
#endif
  return Empty(x);
}

PD_BUILD_OP(floor_identity).Inputs({"X"}).Outputs({"Out"}).SetKernelFn(PD_KERNEL(Identity));
PD_BUILD_OP(floor_empty).Inputs({"X"}).Outputs({"Out"}).SetKernelFn(PD_KERNEL(Empty));
PD_BUILD_OP(floor_attr)
    .Inputs({"X"}).Outputs({"Out"}).Attrs({"bits: int64_t"}).SetKernelFn(PD_KERNEL(EmptyAttr));
PD_BUILD_OP(floor_backward)
    .Inputs({"X"}).Outputs({"Out"}).Attrs({"bits: int64_t"}).SetKernelFn(PD_KERNEL(EmptyAttr));
PD_BUILD_GRAD_OP(floor_backward)
    .Inputs({"X", paddle::Grad("Out")}).Outputs({paddle::Grad("X")}).Attrs({"bits: int64_t"})
    .SetKernelFn(PD_KERNEL(EmptyAttrGrad));
PD_BUILD_OP(floor_launch).Inputs({"X"}).Outputs({"Out"}).SetKernelFn(PD_KERNEL(Launch));
PD_BUILD_OP(floor_guard).Inputs({"X"}).Outputs({"Out"}).SetKernelFn(PD_KERNEL(Guard));
"""

CU = r"""
#include <vector>
#include "paddle/extension.h"

__global__ void Touch(float* out) { if (threadIdx.x == 0) out[0] = 0.0f; }

std::vector<paddle::Tensor> LaunchOne(const paddle::Tensor& x, bool guard) {
  int previous = -1;
  const int device = x.place().GetDeviceId();
  if (guard) {
    cudaGetDevice(&previous);
    if (previous != device) cudaSetDevice(device);
  }
  paddle::Tensor out = paddle::empty(x.shape(), x.dtype(), x.place());
  Touch<<<1, 32, 0, x.stream()>>>(out.data<float>());
  const cudaError_t status = cudaGetLastError();
  if (guard && previous != device) cudaSetDevice(previous);
  PD_CHECK(status == cudaSuccess, "floor: ", cudaGetErrorString(status));
  return {out};
}
"""

ENTRIES = ("floor_identity", "floor_empty", "floor_attr", "floor_backward", "floor_launch",
           "floor_guard")


def build(device: str, arch: str, work: Path):
    from paddle.utils.cpp_extension import load

    (work / "floor.cc").write_text(CC)
    sources = [str(work / "floor.cc")]
    cflags = ["-std=c++17", "-O2"]
    cuda_flags: list[str] = []
    if device == "gpu":
        (work / "floor.cu").write_text(CU)
        sources.append(str(work / "floor.cu"))
        cflags.append("-DFLOOR_WITH_CUDA")
        cuda_flags = ["-O3", "-std=c++17", f"-gencode=arch=compute_{arch},code=sm_{arch}"]
    return load(name="entry_floor", sources=sources, extra_cxx_cflags=cflags,
                extra_cuda_cflags=cuda_flags, build_directory=str(work), verbose=False)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    parser.add_argument("--arch", default="90")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--op", default=str(ROOT / "examples/relu6"))
    args = parser.parse_args()
    os.environ.setdefault("GLOG_minloglevel", "3")

    import numpy as np
    import paddle

    from opgen import api
    from opgen.bench import PER_CALL_SIZES, bench_per_call_torch, best_us_each, calls_per_round
    from opgen.spec import load as load_spec

    floor = build(args.device, args.arch, Path(tempfile.mkdtemp(prefix="entry-floor-")))
    relu6 = api.load_op(Path(args.op))
    spec = load_spec(next(Path(args.op).glob("*.yaml")))
    raw = getattr(relu6._ops(), spec.model.op_name)
    threshold = 6.0
    bits = int(np.array([threshold], np.float64).view(np.int64)[0])
    place = paddle.CUDAPlace(0) if args.device == "gpu" else paddle.CPUPlace()
    sync = paddle.device.cuda.synchronize if args.device == "gpu" else (lambda: None)

    names = [*ENTRIES, "relu6 raw API", "relu6(x)"]
    if args.device == "cpu":
        names.append("F.relu6(x)")

    def calls(x):
        """One callable per column of the table, each calling with x."""
        with_attr = ("floor_attr", "floor_backward")
        found = [partial(getattr(floor, e), x, *([bits] if e in with_attr else []))
                 for e in ENTRIES]
        found += [partial(raw, x, bits), partial(relu6.relu6, x)]
        if args.device == "cpu":
            found.append(partial(paddle.nn.functional.relu6, x))
        return found

    rows = []
    for size in PER_CALL_SIZES:
        x = paddle.to_tensor(np.linspace(-8, 8, size, dtype=np.float32), place=place)
        got = relu6.relu6(x).numpy()
        assert np.array_equal(got, np.clip(x.numpy(), 0, 6)), "relu6 is wrong here"
        rows.append((size, best_us_each(calls(x), sync, calls=calls_per_round(size),
                                        rounds=args.rounds)))
    if args.device == "gpu":
        names.append("torch F.relu6(x)")
        torch_rows = bench_per_call_torch(spec, sizes=PER_CALL_SIZES, rounds=args.rounds)
        for (size, times), row in zip(rows, torch_rows, strict=True):
            assert row.size == size
            times.append(row.us)

    print(f"{paddle.__version__} on {args.device}; us a call, best of {args.rounds} rounds; "
          "the last columns: over the built-in, over floor_launch")
    for size, times in rows:
        builtin, launch = times[-1], times[ENTRIES.index("floor_launch")]
        print(f"-- {size:,} elements")
        for name, us in zip(names, times, strict=True):
            print(f"  {name:20} {us:8.2f} us  {us / builtin:5.2f} x  {us / launch:5.2f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

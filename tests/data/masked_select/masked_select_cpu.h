// masked_select: the CPU kernels (tests/data/masked_select: written by hand over the skeleton).
#pragma once

#include <algorithm>
#include <cstdint>

#include "masked_select.h"

namespace masked_select {

// The wrapper checks x's and mask's last dims (D); the rest of mask's shape is checked here.
inline void CheckMaskShape(const paddle::Tensor& x, const paddle::Tensor& mask) {
  if (mask.shape() != x.shape()) {
    opgen::Fail("custom_masked_select: mask is ", opgen::ShapeString(mask.shape()),
                "; it must have x's shape ", opgen::ShapeString(x.shape()));
  }
}

// Forward, on CPU tensors:
//   XT: float, double, paddle::float16 or paddle::bfloat16
//   args.x: XT, [..., D]
//   args.mask: bool, [..., D]
//   args.out: XT, [-1]; allocate it (args.AllocateOut(shape)), then fill it
//   args.index: int64_t, [-1, 2]; allocate it (args.AllocateIndex(shape)), then fill it
template <typename XT>
void ForwardCPU(const ForwardArgs& args) {
  CheckMaskShape(args.x, args.mask);
  const int64_t n = args.x.numel();
  const bool* mask = args.mask.data<bool>();
  const int64_t count = std::count(mask, mask + n, true);
  XT* out = args.AllocateOut({count}).data<XT>();
  int64_t* index = args.AllocateIndex({count, 2}).data<int64_t>();
  const XT* x = args.x.data<XT>();
  const int64_t d = args.x.shape().back();
  for (int64_t i = 0, k = 0; i < n; ++i) {
    if (!mask[i]) continue;
    out[k] = x[i];
    index[2 * k] = i / d;
    index[2 * k + 1] = i % d;
    ++k;
  }
}

// Backward, on CPU tensors:
//   XT: float, double, paddle::float16 or paddle::bfloat16
//   args.x: XT, [..., D]
//   args.mask: bool, [..., D]
//   args.grad_out: XT, shaped like out
//   args.grad_index: int64_t, shaped like index
//   args.grad_x: XT, shaped like x; fill every element
template <typename XT>
void BackwardCPU(const BackwardArgs& args) {
  const int64_t n = args.x.numel();
  XT* grad_x = args.grad_x.data<XT>();
  std::fill_n(grad_x, n, XT(0));
  if (!args.grad_out.initialized()) return;  // out is empty, or no gradient reached it
  const bool* mask = args.mask.data<bool>();
  const XT* grad_out = args.grad_out.data<XT>();
  for (int64_t i = 0, k = 0; i < n; ++i) {
    if (mask[i]) grad_x[i] = grad_out[k++];
  }
}

}  // namespace masked_select

// embedding: the CPU kernels. This file is yours: opgen wrote it once from the spec
// as a skeleton that builds and passes its tests, and never replaces it. After a spec change,
// `opgen generate` merges what changed around your code (the comments listing each kernel's
// arguments, the template parameters) and reports the file as merged, or as a conflict to resolve.
#pragma once

#include <algorithm>
#include <cstdint>

#include "embedding.h"

namespace embedding {

// Forward, on CPU tensors:
//   IdsT: int32_t or int64_t
//   TableT: float, double, paddle::float16 or paddle::bfloat16
//   args.ids: IdsT, any shape
//   args.table: TableT, [V, D]
//   args.out: TableT, [*ids.shape, D]; fill every element
//   args.padding_idx: int64 attr
//   args.deterministic: bool attr
//   args.check_ids: bool attr
template <typename IdsT, typename TableT>
void ForwardCPU(const ForwardArgs& args) {
  // TODO: your kernel; reference.py holds what it must compute.
  std::fill_n(args.out.data<TableT>(), args.out.numel(), TableT(0));
}

// Backward, on CPU tensors:
//   IdsT: int32_t or int64_t
//   TableT: float, double, paddle::float16 or paddle::bfloat16
//   args.ids: IdsT, any shape
//   args.table: TableT, [V, D]
//   args.grad_out: TableT, shaped like out
//   args.grad_table: TableT, shaped like table; fill every element
//   args.padding_idx: int64 attr
//   args.deterministic: bool attr
//   args.check_ids: bool attr
template <typename IdsT, typename TableT>
void BackwardCPU(const BackwardArgs& args) {
  // TODO: your kernel; reference.py holds what it must compute.
  std::fill_n(args.grad_table.data<TableT>(), args.grad_table.numel(), TableT(0));
}

}  // namespace embedding

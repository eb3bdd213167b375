// What a generated row-wise op's header (examples/<op>/csrc/<op>.h) takes from opgen/rowwise_op.h,
// without Paddle: scripts/gpu/rowwise_examples.sh copies the examples' headers next to this
// folder, so their #include "opgen/rowwise_op.h" finds this file and the functors compile into
// a plain CUDA program. paddle::float16 and paddle::bfloat16 are CUDA's __half and __nv_bfloat16
// here: Paddle's phi::dtype::bfloat16 (a uint16_t converted with __bfloat162float and
// __float2bfloat16) compiles to the same SASS in these kernels (docs/benchmarks.md).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "opgen/rowwise.h"

namespace paddle {
using float16 = __half;
using bfloat16 = __nv_bfloat16;
}  // namespace paddle

namespace opgen {

template <typename... Ts>
struct Dtypes {};

namespace rowwise {

// As in templates/rowwise/csrc/opgen/rowwise_op.h.
template <typename... Roles>
struct RoleList {
  static constexpr int kSize = int(sizeof...(Roles));
};
enum class OutRole { kElem, kRow, kColSum };
struct Out {
  OutRole role;
  int like;
};

}  // namespace rowwise
}  // namespace opgen

// embedding: the CUDA kernels. This file is yours: opgen wrote it once from the spec
// as a skeleton that builds and passes its tests, and never replaces it. After a spec change,
// `opgen generate` merges what changed around your code (the comments listing each kernel's
// arguments, the template parameters) and reports the file as merged, or as a conflict to resolve.
// embedding.cu calls these with the inputs' device current; launch on gpu.stream, and it checks
// the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "opgen/cuda.cuh"
#include "embedding.h"

namespace embedding {

// The skeleton's kernel: a grid-stride loop over n elements with 64-bit indices.
template <typename T>
__global__ void CopyKernel(const T* __restrict__ from, T* __restrict__ to, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    to[i] = from[i];
  }
}

// Forward, on GPU tensors:
//   IdsT: int32_t or int64_t
//   TableT: float, double, paddle::float16 or paddle::bfloat16
//   args.ids: IdsT, any shape
//   args.table: TableT, [V, D]
//   args.out: TableT, [*ids.shape, D]; fill every element
//   args.padding_idx: int64 attr
//   args.deterministic: bool attr
//   args.check_ids: bool attr
template <typename IdsT, typename TableT>
void ForwardCUDA(const ForwardArgs& args, const opgen::cuda::Device& gpu) {
  // TODO: your kernels; reference.py holds what they must compute.
  cudaMemsetAsync(args.out.data<TableT>(), 0, args.out.numel() * sizeof(TableT),
                  gpu.stream);
}

// Backward, on GPU tensors:
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
void BackwardCUDA(const BackwardArgs& args, const opgen::cuda::Device& gpu) {
  // TODO: your kernels; reference.py holds what they must compute.
  cudaMemsetAsync(args.grad_table.data<TableT>(), 0, args.grad_table.numel() * sizeof(TableT),
                  gpu.stream);
}

}  // namespace embedding

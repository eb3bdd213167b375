// embedding: the CUDA kernels. This file is yours: opgen wrote it once from the spec
// as a skeleton that builds and passes its tests, and never replaces it. After a spec change,
// `opgen generate` merges what changed around your code (the comments listing each kernel's
// arguments, the template parameters) and reports the file as merged, or as a conflict to resolve.
// embedding.cu calls these with the inputs' device current; launch on gpu.stream, and it checks
// the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "embedding_cpu.h"      // CheckPaddingIdx
#include "embedding_kernels.cuh"  // the kernels themselves, free of Paddle
#include "opgen/cuda.cuh"
#include "embedding.h"

namespace embedding {

// Paddle's 16-bit types have the layout of CUDA's.
template <typename T>
struct CudaType {
  using type = T;
};
template <>
struct CudaType<paddle::float16> {
  using type = __half;
};
template <>
struct CudaType<paddle::bfloat16> {
  using type = __nv_bfloat16;
};

inline void RaiseOnBadId(const cuda::BadId& bad, int64_t rows) {
  if (bad.position_plus_one != 0) {
    opgen::Fail("custom_embedding: ids holds ", static_cast<int64_t>(bad.id), " (at flat index ",
                static_cast<int64_t>(bad.position_plus_one - 1),
                "), outside the table's rows [0, ", rows, ")");
  }
}

inline void FailOn(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // taken: a later launch check, of this op or another, must not see it
    opgen::Fail("custom_embedding: ", what, ": ", cudaGetErrorString(status));
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
  const int64_t rows = args.table.shape()[0];
  const int64_t d = args.table.shape()[1];
  CheckPaddingIdx(args.padding_idx, rows);
  // check_ids: the gather's first blocks check the ids and send the host a verdict while the
  // rest of it runs (cuda::IdCheck); the call waits for that verdict. Without it an out-of-range
  // id reads zeros, still never outside the table, and nothing waits.
  const int64_t n = args.ids.numel();
  cuda::IdCheck* check = nullptr;
  cuda::CheckArgs checked;
  if (args.check_ids && n > 0) {
    // A CUDA graph's capture records the gather without running it: no verdict would come.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    FailOn(cudaStreamIsCapturing(gpu.stream, &capture), "asking whether the stream is captured");
    if (capture == cudaStreamCaptureStatusActive) {
      opgen::Fail("custom_embedding: check_ids waits for the gather's verdict, which a CUDA ",
                  "graph's capture cannot give; pass check_ids=False to capture the op");
    }
    cudaError_t status = cudaSuccess;
    check = cuda::IdCheck::For(gpu.id, &status);
    FailOn(status, "setting up the id check failed");
    checked = check->Next();
  }
  FailOn(cuda::Gather(args.ids.data<IdsT>(), n, args.table.data<TableT>(), rows,
                      d * static_cast<int64_t>(sizeof(TableT)), args.padding_idx,
                      args.out.data<TableT>(), checked, gpu.id, gpu.stream),
         "the gather failed");
  cuda::BadId bad{};
  if (check != nullptr) FailOn(check->Wait(checked, gpu.stream, &bad), "the id check failed");
  RaiseOnBadId(bad, rows);
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
  // float32 and float64 rows under 4 KiB add with atomics unless `deterministic`; the rest sort
  // (16-bit sums are taken in float and rounded once): see cuda::UsesSort.
  using T = typename CudaType<TableT>::type;
  const int64_t rows = args.table.shape()[0];
  const int64_t d = args.table.shape()[1];
  const int64_t n = args.ids.numel();
  CheckPaddingIdx(args.padding_idx, rows);
  const bool sorted = cuda::UsesSort<T>(d, args.deterministic);
  if (sorted && n > 0x7fffffff) {
    opgen::Fail("custom_embedding: the sorted backward takes fewer than 2^31 ids, got ", n);
  }
  paddle::Tensor workspace;
  if (sorted && n > 0) {
    workspace = paddle::empty({static_cast<int64_t>(cuda::SortedWorkspaceBytes<T>(n, d))},
                              paddle::DataType::UINT8, args.ids.place());
  }
  const cudaError_t status = cuda::ScatterAdd<T, IdsT>(
      args.ids.data<IdsT>(), n, reinterpret_cast<const T*>(args.grad_out.data<TableT>()), rows, d,
      args.padding_idx, reinterpret_cast<T*>(args.grad_table.data<TableT>()), sorted,
      sorted && n > 0 ? workspace.data() : nullptr, gpu.id, gpu.stream);
  FailOn(status, "the table's gradient failed");
}

}  // namespace embedding

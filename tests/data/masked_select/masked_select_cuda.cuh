// masked_select: the CUDA kernels (tests/data/masked_select: written by hand over the skeleton).
// The count of true elements decides the outputs' sizes, so the forward counts on the device,
// reads the count back on the op's stream, allocates, then selects:
//   CountTiles   counts[b] = the true elements of tile b (kTile elements, one block each)
//   ScanTiles    offsets: counts' exclusive prefix sums in place, and their total after them
//   SelectTiles  each true element i goes to out[offsets[b] + its rank in the tile]
// The backward scatters grad_out back with the same offsets (grad_out's size is known: no read).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "masked_select.h"
#include "masked_select_cpu.h"  // CheckMaskShape
#include "opgen/cuda.cuh"

namespace masked_select {
namespace cuda {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRounds = 4;  // a tile is kRounds rows of kThreads consecutive elements
constexpr int64_t kTile = int64_t{kThreads} * kRounds;

__global__ void CountTiles(const bool* __restrict__ mask, int64_t n, int64_t* counts) {
  __shared__ int warp_counts[kWarps];
  const int64_t start = int64_t{blockIdx.x} * kTile;
  int count = 0;
  for (int r = 0; r < kRounds; ++r) {
    const int64_t i = start + int64_t{r} * kThreads + threadIdx.x;
    count += __popc(__ballot_sync(0xffffffffu, i < n && mask[i]));
  }
  if (threadIdx.x % 32 == 0) warp_counts[threadIdx.x / 32] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t total = 0;
    for (int w = 0; w < kWarps; ++w) total += warp_counts[w];
    counts[blockIdx.x] = total;
  }
}

// One block: each thread takes a run of counts, the runs' sums are scanned in shared memory.
__global__ void ScanTiles(int64_t* counts, int64_t tiles) {
  __shared__ int64_t sums[kThreads];
  const int64_t per = (tiles + kThreads - 1) / kThreads;
  const int64_t begin = threadIdx.x * per < tiles ? threadIdx.x * per : tiles;
  const int64_t end = begin + per < tiles ? begin + per : tiles;
  int64_t sum = 0;
  for (int64_t i = begin; i < end; ++i) sum += counts[i];
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int step = 1; step < kThreads; step *= 2) {  // inclusive scan of the runs' sums
    const int64_t before = threadIdx.x >= step ? sums[threadIdx.x - step] : 0;
    __syncthreads();
    sums[threadIdx.x] += before;
    __syncthreads();
  }
  int64_t offset = sums[threadIdx.x] - sum;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t count = counts[i];
    counts[i] = offset;
    offset += count;
  }
  if (threadIdx.x == kThreads - 1) counts[tiles] = sums[kThreads - 1];
}

// Calls visit(i, k) for each true element i of this block's tile, k its place among all of
// them in order: a ballot per warp and round ranks it, the warps' counts place the warp.
template <typename Visit>
__device__ void ForEachSelected(const bool* __restrict__ mask, int64_t n, const int64_t* offsets,
                                Visit visit) {
  __shared__ int warp_counts[kWarps];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  int64_t base = offsets[blockIdx.x];
  const int64_t start = int64_t{blockIdx.x} * kTile;
  for (int r = 0; r < kRounds; ++r) {
    const int64_t i = start + int64_t{r} * kThreads + threadIdx.x;
    const bool selected = i < n && mask[i];
    const unsigned ballot = __ballot_sync(0xffffffffu, selected);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0;
    int total = 0;
    for (int w = 0; w < kWarps; ++w) {
      before += w < warp ? warp_counts[w] : 0;
      total += warp_counts[w];
    }
    if (selected) visit(i, base + before + __popc(ballot & ((1u << lane) - 1u)));
    base += total;
    __syncthreads();  // warp_counts is the next round's
  }
}

// Copies move elements as unsigned integers of their size: no arithmetic on Paddle's types.
template <int Bytes>
struct BitsOf;
template <>
struct BitsOf<2> {
  using type = uint16_t;
};
template <>
struct BitsOf<4> {
  using type = uint32_t;
};
template <>
struct BitsOf<8> {
  using type = uint64_t;
};

template <typename T>
__global__ void SelectTiles(const T* __restrict__ x, const bool* __restrict__ mask, int64_t n,
                            int64_t d, const int64_t* offsets, T* __restrict__ out,
                            int64_t* __restrict__ index) {
  ForEachSelected(mask, n, offsets, [&](int64_t i, int64_t k) {
    out[k] = x[i];
    index[2 * k] = i / d;
    index[2 * k + 1] = i % d;
  });
}

template <typename T>
__global__ void ScatterTiles(const T* __restrict__ grad_out, const bool* __restrict__ mask,
                             int64_t n, const int64_t* offsets, T* __restrict__ grad_x) {
  ForEachSelected(mask, n, offsets, [&](int64_t i, int64_t k) { grad_x[i] = grad_out[k]; });
}

}  // namespace cuda

inline void CheckCuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // taken: a later launch check must not see it again
    opgen::Fail("custom_masked_select: ", what, ": ", cudaGetErrorString(status));
  }
}

// Each tile's offset among the true elements (tiles + 1 of them, the total last), on gpu.stream.
inline paddle::Tensor TileOffsets(const paddle::Tensor& mask, int64_t tiles,
                                  const opgen::cuda::Device& gpu) {
  if (tiles > 0x7fffffff) {
    opgen::Fail("custom_masked_select: ", mask.numel(), " elements are more than 2^31 tiles");
  }
  paddle::Tensor offsets = paddle::empty({tiles + 1}, paddle::DataType::INT64, mask.place());
  cuda::CountTiles<<<static_cast<unsigned>(tiles), cuda::kThreads, 0, gpu.stream>>>(
      mask.data<bool>(), mask.numel(), offsets.data<int64_t>());
  CheckCuda(cudaGetLastError(), "counting");
  cuda::ScanTiles<<<1, cuda::kThreads, 0, gpu.stream>>>(offsets.data<int64_t>(), tiles);
  CheckCuda(cudaGetLastError(), "counting");
  return offsets;
}

// Forward, on GPU tensors:
//   XT: float, double, paddle::float16 or paddle::bfloat16
//   args.x: XT, [..., D]
//   args.mask: bool, [..., D]
//   args.out: XT, [-1]; allocate it (args.AllocateOut(shape)), then fill it
//   args.index: int64_t, [-1, 2]; allocate it (args.AllocateIndex(shape)), then fill it
template <typename XT>
void ForwardCUDA(const ForwardArgs& args, const opgen::cuda::Device& gpu) {
  using Bits = typename cuda::BitsOf<sizeof(XT)>::type;
  CheckMaskShape(args.x, args.mask);
  const int64_t n = args.x.numel();
  const int64_t tiles = (n + cuda::kTile - 1) / cuda::kTile;
  int64_t count = 0;
  paddle::Tensor offsets;
  if (n > 0) {
    offsets = TileOffsets(args.mask, tiles, gpu);
    // The count is the offsets' last entry: copied after the kernels on gpu.stream, and waited
    // for, since the outputs' sizes depend on it.
    CheckCuda(cudaMemcpyAsync(&count, offsets.data<int64_t>() + tiles, sizeof(count),
                              cudaMemcpyDeviceToHost, gpu.stream),
              "reading the count back");
    CheckCuda(cudaStreamSynchronize(gpu.stream), "reading the count back");
  }
  paddle::Tensor& out = args.AllocateOut({count});
  paddle::Tensor& index = args.AllocateIndex({count, 2});
  if (count == 0) return;
  cuda::SelectTiles<<<static_cast<unsigned>(tiles), cuda::kThreads, 0, gpu.stream>>>(
      reinterpret_cast<const Bits*>(args.x.data<XT>()), args.mask.data<bool>(), n,
      args.x.shape().back(), offsets.data<int64_t>(), reinterpret_cast<Bits*>(out.data<XT>()),
      index.data<int64_t>());
}

// Backward, on GPU tensors:
//   XT: float, double, paddle::float16 or paddle::bfloat16
//   args.x: XT, [..., D]
//   args.mask: bool, [..., D]
//   args.grad_out: XT, shaped like out
//   args.grad_index: int64_t, shaped like index
//   args.grad_x: XT, shaped like x; fill every element
template <typename XT>
void BackwardCUDA(const BackwardArgs& args, const opgen::cuda::Device& gpu) {
  using Bits = typename cuda::BitsOf<sizeof(XT)>::type;
  const int64_t n = args.x.numel();
  if (n == 0) return;
  CheckCuda(cudaMemsetAsync(args.grad_x.data<XT>(), 0, n * sizeof(XT), gpu.stream),
            "zeroing grad_x");
  if (!args.grad_out.initialized()) return;  // out is empty, or no gradient reached it
  const int64_t tiles = (n + cuda::kTile - 1) / cuda::kTile;
  const paddle::Tensor offsets = TileOffsets(args.mask, tiles, gpu);
  cuda::ScatterTiles<<<static_cast<unsigned>(tiles), cuda::kThreads, 0, gpu.stream>>>(
      reinterpret_cast<const Bits*>(args.grad_out.data<XT>()), args.mask.data<bool>(), n,
      offsets.data<int64_t>(), reinterpret_cast<Bits*>(args.grad_x.data<XT>()));
}

}  // namespace masked_select

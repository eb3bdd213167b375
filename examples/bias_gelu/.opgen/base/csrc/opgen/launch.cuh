// opgen elementwise launcher: the CUDA kernels every generated op's functors run in. It owns what
// hand-written kernels tend to get wrong: 64-bit sizes, pointer alignment and vector width, the
// tail, grid sizing, the device guard and the launch error. Plain CUDA with no Paddle in it (the
// Paddle side is opgen/elementwise.cuh), so it can be built and timed on its own
// (scripts/gpu/launcher_bench.cu in opgen's repository).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "opgen/cuda.cuh"  // DeviceGuard, MultiprocessorCount
#include "opgen/math.h"

namespace opgen {
namespace cuda {

// Tuning knobs, settable with -D (OPGEN_NVCC_FLAGS at build time); the defaults were chosen on an
// H200 (docs/benchmarks.md in opgen's repository).
#ifndef OPGEN_THREADS
#define OPGEN_THREADS 128
#endif
#ifndef OPGEN_UNROLL
#define OPGEN_UNROLL 1
#endif
#ifndef OPGEN_WAVES
#define OPGEN_WAVES 0
#endif
#ifndef OPGEN_STREAMING
#define OPGEN_STREAMING 0
#endif
constexpr int kThreads = OPGEN_THREADS;
// Vectors each thread loads before it computes: keeps enough bytes in flight to saturate HBM.
constexpr int kUnroll = OPGEN_UNROLL;
// Waves of resident blocks the grid holds, blocks striding over the remaining tiles; 0 launches
// one block per tile.
constexpr int kWaves = OPGEN_WAVES;

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Vector loads and stores; with OPGEN_STREAMING, marked evict-first (each byte is touched once).
template <typename V>
__device__ __forceinline__ V LoadVec(const V* p) {
#if OPGEN_STREAMING
  if constexpr (sizeof(V) == 16) {
    uint4 bits = __ldcs(reinterpret_cast<const uint4*>(p));
    return *reinterpret_cast<V*>(&bits);
  }
#endif
  return *p;
}
template <typename V>
__device__ __forceinline__ void StoreVec(V* p, const V& v) {
#if OPGEN_STREAMING
  if constexpr (sizeof(V) == 16) {
    __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(&v));
    return;
  }
#endif
  *p = v;
}

template <typename T, int kVec, typename F, int kIn, int kOut>
__device__ __forceinline__ void ApplyVec(const F& f, const Vec<T, kVec> (&in)[kIn],
                                         Vec<T, kVec> (&out)[kOut]) {
  using MT = OpMathT<T>;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    MT args[kIn];
    MT results[kOut];
#pragma unroll
    for (int k = 0; k < kIn; ++k) args[k] = static_cast<MT>(in[k].v[j]);
    Apply(f, args, results);
#pragma unroll
    for (int k = 0; k < kOut; ++k) out[k].v[j] = static_cast<T>(results[k]);
  }
}

// Full tiles of kThreads * kVec * kUnroll elements go through kVec-wide loads and stores; the one
// partial tile at the end goes element by element with bounds checks. Blocks stride over tiles.
template <int kVec, typename T, typename F, int kIn, int kOut>
__global__ void __launch_bounds__(kThreads)
    ElementwiseKernel(F f, int64_t n, Pointers<const T, kIn> in, Pointers<T, kOut> out) {
  using V = Vec<T, kVec>;
  constexpr int64_t kTile = int64_t{kThreads} * kVec * kUnroll;
  const int64_t full_tiles = n / kTile;
  for (int64_t tile = blockIdx.x; tile < full_tiles; tile += gridDim.x) {
    const int64_t first = tile * kTile + int64_t{threadIdx.x} * kVec;
    V loaded[kUnroll][kIn];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kIn; ++k) {
        // An absent input (a missing output gradient) reads as zeros; the test is uniform.
        loaded[u][k] = in.at[k] ? LoadVec(reinterpret_cast<const V*>(in.at[k] + first +
                                                                    u * kThreads * kVec))
                                : V{};
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      V results[kOut];
      ApplyVec<T, kVec>(f, loaded[u], results);
#pragma unroll
      for (int k = 0; k < kOut; ++k) {
        StoreVec(reinterpret_cast<V*>(out.at[k] + first + u * kThreads * kVec), results[k]);
      }
    }
  }
  // The tail belongs to the block that would have taken the next tile.
  if (blockIdx.x == full_tiles % gridDim.x) {
    using MT = OpMathT<T>;
    for (int64_t i = full_tiles * kTile + threadIdx.x; i < n; i += kThreads) {
      MT args[kIn];
      MT results[kOut];
#pragma unroll
      for (int k = 0; k < kIn; ++k) args[k] = in.at[k] ? static_cast<MT>(in.at[k][i]) : MT(0);
      Apply(f, args, results);
#pragma unroll
      for (int k = 0; k < kOut; ++k) out.at[k][i] = static_cast<T>(results[k]);
    }
  }
}

// The widest vector (at most 16 bytes) that every pointer's alignment allows.
template <typename T, int kIn, int kOut>
int VectorWidth(const Pointers<const T, kIn>& in, const Pointers<T, kOut>& out) {
  int width = 16 / static_cast<int>(sizeof(T));
  auto fits = [&](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % (width * sizeof(T)) == 0;
  };
  while (width > 1) {
    bool aligned = true;
    for (int k = 0; k < kIn; ++k) aligned = aligned && fits(in.at[k]);
    for (int k = 0; k < kOut; ++k) aligned = aligned && fits(out.at[k]);
    if (aligned) break;
    width /= 2;
  }
  return width;
}

template <int kVec, typename T, typename F, int kIn, int kOut>
void LaunchWidth(const F& f, int64_t n, const Pointers<const T, kIn>& in,
                 const Pointers<T, kOut>& out, int device, cudaStream_t stream) {
  constexpr int64_t kTile = int64_t{kThreads} * kVec * kUnroll;
  const int64_t tiles = (n + kTile - 1) / kTile;
  int64_t grid = tiles;
  if constexpr (kWaves > 0) {
    constexpr auto kernel = ElementwiseKernel<kVec, T, F, kIn, kOut>;
    const int64_t cap = int64_t{kWaves} * MultiprocessorCount(device) *
                        ResidentBlocksPerSM<kernel>(device, kThreads, 0);
    if (cap < grid) grid = cap;
  }
  constexpr int64_t kMaxGrid = (int64_t{1} << 31) - 1;
  if (grid > kMaxGrid) grid = kMaxGrid;
  ElementwiseKernel<kVec, T, F, kIn, kOut>
      <<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(f, n, in, out);
}

// Runs `f` over n elements of `in`, writing `out`, on `device` and `stream`, with the widest
// vectors the pointers allow; a null input pointer reads as zeros. Returns the launch's error
// (cudaSuccess when n is 0).
template <typename T, typename F, int kIn, int kOut>
cudaError_t Launch(const F& f, int64_t n, const Pointers<const T, kIn>& in,
                   const Pointers<T, kOut>& out, int device, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeviceGuard guard(device);
  switch (VectorWidth(in, out)) {
    case 8:
      if constexpr (16 / sizeof(T) >= 8) LaunchWidth<8>(f, n, in, out, device, stream);
      break;
    case 4:
      if constexpr (16 / sizeof(T) >= 4) LaunchWidth<4>(f, n, in, out, device, stream);
      break;
    case 2:
      LaunchWidth<2>(f, n, in, out, device, stream);
      break;
    default:
      LaunchWidth<1>(f, n, in, out, device, stream);
  }
  return cudaGetLastError();
}

// The textbook kernel, one element per thread in blocks of 256, kept only as the benchmark's
// point of comparison (`opgen bench` renders a copy of the op that launches through it).
template <typename T, typename F, int kIn, int kOut>
__global__ void NaiveKernel(F f, int64_t n, Pointers<const T, kIn> in, Pointers<T, kOut> out) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= n) return;
  using MT = OpMathT<T>;
  MT args[kIn];
  MT results[kOut];
  for (int k = 0; k < kIn; ++k) args[k] = in.at[k] ? static_cast<MT>(in.at[k][i]) : MT(0);
  Apply(f, args, results);
  for (int k = 0; k < kOut; ++k) out.at[k][i] = static_cast<T>(results[k]);
}

template <typename T, typename F, int kIn, int kOut>
cudaError_t LaunchNaive(const F& f, int64_t n, const Pointers<const T, kIn>& in,
                        const Pointers<T, kOut>& out, int device, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeviceGuard guard(device);
  const auto grid = static_cast<unsigned>((n + 255) / 256);
  NaiveKernel<T><<<grid, 256, 0, stream>>>(f, n, in, out);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace opgen

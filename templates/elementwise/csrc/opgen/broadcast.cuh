// opgen broadcasting launcher: runs an op's functor over inputs that numpy-broadcast to the output,
// forward and backward, from a plan made by opgen/broadcast.h. Plain CUDA with no Paddle in it,
// so it can be checked and timed on its own (scripts/gpu/broadcast_bench.cu in opgen's
// repository). Every launcher returns the launch's error and never aborts.
//
// Forward. Same-shape calls go to opgen::cuda::Launch (opgen/launch.cuh). Plans of at most two
// dims (a bias [N, C] + [C], a per-row scale [N, C] * [N, 1], a scalar operand, an outer
// product) go to one kernel that loads the full inputs in 16-byte vectors, and the [C] inputs
// in the same vectors when no vector straddles two rows. Everything else goes to a kernel that
// turns each output index into every input's offset with precomputed divisions (IntDivider),
// in vectors along the innermost dim when it allows. Index math is 32-bit below 2^31 output
// elements, 64-bit from there on.
//
// Backward. The gradient of a broadcast input is the sum of its elementwise gradient over the
// dims it is broadcast along. It is summed in OpMathT (float; double for double), in an order
// fixed by the plan and the device, without atomics, so two runs give the same bits:
//   [N, C] with [C]      one pass over the big tensors writes the full gradients and each row
//                        block's column sums to the workspace; a small kernel adds the row
//                        blocks' sums in order;
//   [N, C] with [N, 1]   a group of lanes (part of a warp, a warp, or a block) per row;
//   scalar operand       one pass writes the full gradients and a sum per block; one block per
//                        gradient adds those (on sm_90 and later both of these small kernels
//                        are programmatic dependent launches, scheduled while the pass drains);
//   anything else        a pass writes the full gradients; then, per broadcast input, a block
//                        takes a few of its elements and sums their gradient over the reduced
//                        dims (recomputed from the inputs, not stored), a fixed tree at the end.
// A null input pointer (an absent output gradient, an input the functor does not read) reads as
// zeros, forward and backward, and is never loaded.
// The caller allocates the workspace (BroadcastBackwardWorkspaceBytes; the Paddle side takes it
// from paddle::empty, whose allocations are 256-byte aligned).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "opgen/broadcast.h"
#include "opgen/divider.h"
#include "opgen/launch.cuh"
#include "opgen/math.h"

namespace opgen {
namespace cuda {

// Threads of the backward kernels' blocks, and how many of them a [C] gradient's pass lays
// across the columns (the rest go down the rows). Settable with -D like launch.cuh's knobs.
#ifndef OPGEN_BCAST_REDUCE_THREADS
#define OPGEN_BCAST_REDUCE_THREADS 256
#endif
#ifndef OPGEN_BCAST_COLUMN_LANES
#define OPGEN_BCAST_COLUMN_LANES 64
#endif
// Vectors each thread of the 2-d forward kernel loads before it computes (bytes in flight while
// the math runs), blocks of the [C] gradient's pass an SM must hold at once (the register cap
// that sets), and rows each of its threads loads before it computes.
#ifndef OPGEN_BCAST_UNROLL
#define OPGEN_BCAST_UNROLL 2
#endif
// 0: the 2-d forward kernel runs one block per tile; N > 0: N waves of resident blocks stride
// over the tiles, each thread loading its next tile while it computes the current one.
#ifndef OPGEN_BCAST_WAVES
#define OPGEN_BCAST_WAVES 0
#endif
#ifndef OPGEN_BCAST_COLUMN_BLOCKS
#define OPGEN_BCAST_COLUMN_BLOCKS 4
#endif
#ifndef OPGEN_BCAST_ROW_UNROLL
#define OPGEN_BCAST_ROW_UNROLL 1
#endif
// The widest vector, in bytes, of the [C] gradient's pass (16 or 8), and the reduced elements each
// thread of the general gradient's pass loads before it computes.
#ifndef OPGEN_BCAST_COLUMN_VECTOR_BYTES
#define OPGEN_BCAST_COLUMN_VECTOR_BYTES 16
#endif
// 1: each thread of the [C] gradient's pass loads its next row while it computes the current one
// (OPGEN_BCAST_ROW_UNROLL is then unused); 0: it loads OPGEN_BCAST_ROW_UNROLL rows, then computes.
#ifndef OPGEN_BCAST_COLUMN_PREFETCH
#define OPGEN_BCAST_COLUMN_PREFETCH 1
#endif
// 1: on devices of compute capability 9.0 and later, the kernel that adds a gradient's block
// sums is a programmatic dependent launch: it is scheduled while the pass before it drains and
// waits for that pass on the device, instead of being launched after it ends (0.5-1 us of a
// 16-bit bias_gelu backward on the H200; opgen's docs/benchmarks.md, round 20). 0: a plain
// launch.
#ifndef OPGEN_BCAST_PDL
#define OPGEN_BCAST_PDL 1
#endif
#ifndef OPGEN_BCAST_GATHER_UNROLL
#define OPGEN_BCAST_GATHER_UNROLL 2
#endif
// Vectors of its row each thread of the [N, 1] gradient's pass loads before it computes (2 was
// slower on the H200 in every dtype, with and without the pass's per-row input known; opgen's
// docs/benchmarks.md, round 21).
#ifndef OPGEN_BCAST_PER_ROW_UNROLL
#define OPGEN_BCAST_PER_ROW_UNROLL 1
#endif
// The general (N-d) forward kernel's widest vector in bytes and its unroll.
#ifndef OPGEN_BCAST_ND_VECTOR_BYTES
#define OPGEN_BCAST_ND_VECTOR_BYTES 16
#endif
#ifndef OPGEN_BCAST_ND_UNROLL
#define OPGEN_BCAST_ND_UNROLL OPGEN_BCAST_UNROLL
#endif
// 1: a vector of 16-bit values from one of several sources is assembled as 32-bit words
// (LoadOrSplat); 0: lane by lane (kept to measure the difference: opgen's docs/benchmarks.md,
// round 18).
#ifndef OPGEN_BCAST_WORDS
#define OPGEN_BCAST_WORDS 1
#endif
// 1: a bfloat16 lane of a vector is read out of its 32-bit word (LaneOf, opgen/cuda.cuh), as
// the row-wise launcher does; 0: through CUDA's conversion. On the H200 bias_gelu's bfloat16
// backward takes 2 % less time with it, and no bfloat16 pattern takes more (opgen's
// docs/benchmarks.md, round 22).
#ifndef OPGEN_BCAST_BF16_LANES
#define OPGEN_BCAST_BF16_LANES 1
#endif
constexpr int kReduceThreads = OPGEN_BCAST_REDUCE_THREADS;
constexpr int kColumnLanes = OPGEN_BCAST_COLUMN_LANES;
constexpr int kBroadcastUnroll = OPGEN_BCAST_UNROLL;
constexpr int kColumnMinBlocks = OPGEN_BCAST_COLUMN_BLOCKS;
constexpr int kBroadcastWaves = OPGEN_BCAST_WAVES;
constexpr bool kBFloat16Lanes = OPGEN_BCAST_BF16_LANES != 0;
static_assert((kReduceThreads & (kReduceThreads - 1)) == 0 && kReduceThreads >= 32,
              "OPGEN_BCAST_REDUCE_THREADS must be a power of two of at least a warp");
static_assert((kColumnLanes & (kColumnLanes - 1)) == 0 && kColumnLanes <= kReduceThreads,
              "OPGEN_BCAST_COLUMN_LANES must be a power of two of at most the block");
// A row of at least this many vectors gets a block of its own in the [N, 1] gradient's pass;
// shorter rows share a warp.
constexpr int64_t kBlockPerRowVectors = 1024;
constexpr int kRowUnroll = OPGEN_BCAST_ROW_UNROLL;
constexpr int kPerRowUnroll = OPGEN_BCAST_PER_ROW_UNROLL;
constexpr int kColumnVectorBytes = OPGEN_BCAST_COLUMN_VECTOR_BYTES;
constexpr int kGatherUnroll = OPGEN_BCAST_GATHER_UNROLL;
constexpr bool kColumnPrefetch = OPGEN_BCAST_COLUMN_PREFETCH != 0;
constexpr bool kDependentLaunch = OPGEN_BCAST_PDL != 0;
constexpr int kNdVectorBytes = OPGEN_BCAST_ND_VECTOR_BYTES;
constexpr int kNdUnroll = OPGEN_BCAST_ND_UNROLL;
static_assert(kColumnVectorBytes == 16 || kColumnVectorBytes == 8,
              "OPGEN_BCAST_COLUMN_VECTOR_BYTES must be 16 or 8");

namespace detail {

inline bool AlignedTo(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// The widest vector (at most 16 bytes) for which `fits(width)` holds.
template <typename T, typename Fits>
int WidestVector(Fits fits) {
  int width = 16 / static_cast<int>(sizeof(T));
  while (width > 1 && !fits(width)) width /= 2;
  return width;
}

// Calls `body(std::integral_constant<int, width>{})`: the run-time width as a compile-time one.
template <typename T, typename Body>
void WithVectorWidth(int width, Body&& body) {
  constexpr int kMax = 16 / static_cast<int>(sizeof(T));
  if constexpr (kMax >= 8) {
    if (width == 8) return body(std::integral_constant<int, 8>{});
  }
  if constexpr (kMax >= 4) {
    if (width == 4) return body(std::integral_constant<int, 4>{});
  }
  if constexpr (kMax >= 2) {
    if (width == 2) return body(std::integral_constant<int, 2>{});
  }
  body(std::integral_constant<int, 1>{});
}

// Calls `body(I{})` with the index type for `n` elements: IntDivider<uint32_t> is exact below
// 2^31.
template <typename Body>
void WithIndexType(int64_t n, Body&& body) {
  if (n <= int64_t{INT32_MAX}) {
    body(uint32_t{});
  } else {
    body(uint64_t{});
  }
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls `body(std::integral_constant<int, k>{})` for k = 0 .. kCount - 1.
template <int kCount, typename Body, int... K>
void ForEachIndexImpl(Body& body, std::integer_sequence<int, K...>) {
  (body(std::integral_constant<int, K>{}), ...);
}
template <int kCount, typename Body>
void ForEachIndex(Body&& body) {
  ForEachIndexImpl<kCount>(body, std::make_integer_sequence<int, kCount>{});
}

}  // namespace detail

// A vector of zeros (+0 in every floating type: all bits clear): what an absent (null) input
// reads as.
template <typename V>
__device__ __forceinline__ V ZeroVec() {
  V v;
  __builtin_memset(&v, 0, sizeof v);
  return v;
}

// kVec values of an input: the vector at `p + offset` when `vector`, else the one value at
// `p + offset` in every lane; zeros for a null input (no load). Vectors of 16-bit values are
// assembled as 32-bit words: choosing among the three sources lane by lane costs a byte permute
// (PRMT) per 16-bit lane and source, about five instructions an element in the broadcasting
// kernels' SASS on the H200 (opgen's docs/benchmarks.md, round 18); choosing among words costs
// a register move at most.
template <typename V, typename T, typename I>
__device__ __forceinline__ V LoadOrSplat(const T* p, I offset, bool vector) {
  if constexpr (OPGEN_BCAST_WORDS && sizeof(T) == 2 && sizeof(V) % 4 == 0) {
    using W = Vec<uint32_t, sizeof(V) / 4>;
    W words;
    if (p == nullptr) {
      words = ZeroVec<W>();
    } else if (vector) {
      words = LoadVec(reinterpret_cast<const W*>(p + offset));
    } else {
      const uint32_t bits = *reinterpret_cast<const uint16_t*>(p + offset);
#pragma unroll
      for (int i = 0; i < static_cast<int>(sizeof(V) / 4); ++i) words.v[i] = bits * 0x10001u;
    }
    V v;
    __builtin_memcpy(&v, &words, sizeof v);
    return v;
  } else {
    if (p == nullptr) return ZeroVec<V>();
    if (vector) return LoadVec(reinterpret_cast<const V*>(p + offset));
    V v;
    const T value = p[offset];
#pragma unroll
    for (int j = 0; j < static_cast<int>(sizeof(V) / sizeof(T)); ++j) v.v[j] = value;
    return v;
  }
}

// A vector of an input at `p + offset`, zeros for a null input (no load).
template <typename V, typename T, typename I>
__device__ __forceinline__ V LoadVecOrZero(const T* p, I offset) {
  return LoadOrSplat<V>(p, offset, true);
}

// One element of an input as OpMathT, 0 for a null input (no load).
template <typename T, typename I>
__device__ __forceinline__ OpMathT<T> ReadOrZero(const T* p, I offset) {
  return p != nullptr ? static_cast<OpMathT<T>>(p[offset]) : OpMathT<T>(0);
}

namespace detail {

inline int64_t PowerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

constexpr int64_t kMaxGrid = (int64_t{1} << 31) - 1;

// Blocks of kReduceThreads the device can hold at once, at most: the bound the workspace is
// sized for.
inline int64_t MaxResidentReduceBlocks(int device) {
  const int threads = DeviceAttribute<cudaDevAttrMaxThreadsPerMultiProcessor>(device);
  return int64_t{threads >= kReduceThreads ? threads / kReduceThreads : 1} *
         MultiprocessorCount(device);
}

// Blocks of kKernel (kReduceThreads each) resident on the device at once, never more than the
// workspace was sized for.
template <auto kKernel>
int64_t ResidentBlocks(int device) {
  const int per_sm = ResidentBlocksPerSM<kKernel>(device, kReduceThreads, 0);
  return std::min(int64_t{per_sm} * MultiprocessorCount(device), MaxResidentReduceBlocks(device));
}

template <int kIn, int kOut>
int ReducedGradients(const BroadcastPlan<kIn>& plan) {
  int count = 0;
  for (int g = 0; g < kOut; ++g) count += plan.IsFull(g) ? 0 : 1;
  return count;
}

}  // namespace detail

// ---- forward, plans of at most two dims ------------------------------------------------------
// What an input of a 2-d plan [rows, cols] is, by its strides.
enum class Operand2d : uint8_t {
  kFull,       // [rows, cols]: strides (cols, 1)
  kPerColumn,  // [cols], one value per column (a bias): strides (0, 1)
  kPerRow,     // [rows, 1], one value per row: strides (1, 0)
  kScalar,     // strides (0, 0)
};

template <int kIn>
struct View2d {
  int64_t rows = 1;
  int64_t cols = 1;
  Operand2d kind[kIn];
};

// A plan of one or two dims as [rows, cols]; one dim is a single row.
template <int kIn>
View2d<kIn> ViewAs2d(const BroadcastPlan<kIn>& plan) {
  View2d<kIn> view;
  const bool two = plan.rank == 2;
  view.rows = two ? plan.dims[0] : 1;
  view.cols = plan.dims[two ? 1 : 0];
  for (int k = 0; k < kIn; ++k) {
    const bool along_cols = plan.strides[k][two ? 1 : 0] != 0;
    const bool along_rows = two && plan.strides[k][0] != 0;
    if (!two) {
      view.kind[k] = along_cols ? Operand2d::kFull : Operand2d::kScalar;
    } else if (along_cols) {
      view.kind[k] = along_rows ? Operand2d::kFull : Operand2d::kPerColumn;
    } else {
      view.kind[k] = along_rows ? Operand2d::kPerRow : Operand2d::kScalar;
    }
  }
  return view;
}

template <typename I, int kIn>
struct Params2d {
  I n;                  // rows * cols
  IntDivider<I> cols;   // an index's row and column
  Operand2d kind[kIn];
};

// kVec values of input `p` (as T) for the kVec outputs from `first`, whose row and column are
// `at`; zeros for a null input. kWholeRows: the kVec outputs lie in one row (cols is a multiple
// of kVec, or there is one row) and a [cols] input is aligned for a vector at any multiple of kVec.
template <int kVec, bool kWholeRows, typename I, typename T>
__device__ __forceinline__ Vec<T, kVec> Load2d(const T* p, Operand2d kind, I first, DivMod<I> at,
                                               I cols) {
  using V = Vec<T, kVec>;
  if constexpr (kWholeRows) {
    // One vector load or one value repeated: the source's offset chosen first, so a 16-bit
    // vector is assembled once (LoadOrSplat).
    I offset = 0;
    switch (kind) {
      case Operand2d::kFull:
        offset = first;
        break;
      case Operand2d::kPerColumn:
        offset = at.mod;
        break;
      case Operand2d::kPerRow:
        offset = at.div;
        break;
      case Operand2d::kScalar:
      default:
        break;
    }
    return LoadOrSplat<V>(p, offset, kind == Operand2d::kFull || kind == Operand2d::kPerColumn);
  } else {
    // A vector's outputs may span two rows: a [cols] or [rows, 1] input element by element.
    if (p == nullptr) return ZeroVec<V>();
    V v;
    switch (kind) {
      case Operand2d::kFull:
        return LoadVec(reinterpret_cast<const V*>(p + first));
      case Operand2d::kPerColumn: {
        I col = at.mod;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          v.v[j] = p[col];
          if (++col == cols) col = 0;
        }
        return v;
      }
      case Operand2d::kPerRow: {
        I row = at.div, col = at.mod;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          v.v[j] = p[row];
          if (++col == cols) {
            col = 0;
            ++row;
          }
        }
        return v;
      }
      case Operand2d::kScalar:
      default: {
        const T value = p[0];
#pragma unroll
        for (int j = 0; j < kVec; ++j) v.v[j] = value;
        return v;
      }
    }
  }
}

// Calls `f` on kVec elements' values and stores the kOut results as vectors at `first`; a null
// output is not stored (the backward's summed gradients, when its full ones go through here).
template <int kVec, typename T, typename F, int kIn, int kOut>
__device__ __forceinline__ void ApplyAndStore(const F& f, const Vec<T, kVec> (&values)[kIn],
                                              const Pointers<T, kOut>& out, int64_t first) {
  using MT = OpMathT<T>;
  using V = Vec<T, kVec>;
  V results[kOut];
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    MT args[kIn];
    MT r[kOut];
#pragma unroll
    for (int k = 0; k < kIn; ++k) args[k] = LaneOf<MT, kBFloat16Lanes>(values[k], j);
    Apply(f, args, r);
#pragma unroll
    for (int o = 0; o < kOut; ++o) results[o].v[j] = static_cast<T>(r[o]);
  }
#pragma unroll
  for (int o = 0; o < kOut; ++o) {
    if (out.at[o] != nullptr) StoreVec(reinterpret_cast<V*>(out.at[o] + first), results[o]);
  }
}

// Tiles of kThreads * kVec * kBroadcastUnroll outputs, one block per tile (blocks stride when
// the grid is capped): each thread loads its kBroadcastUnroll vectors (a block's vectors
// side by side), then computes and stores them. The partial tile at the end goes element by
// element, by the block that would take the next tile.
template <int kVec, bool kWholeRows, typename I, typename T, typename F, int kIn, int kOut>
__global__ void __launch_bounds__(kThreads)
    Broadcast2dKernel(F f, Params2d<I, kIn> p, Pointers<const T, kIn> in, Pointers<T, kOut> out) {
  using V = Vec<T, kVec>;
  constexpr I kStep = I{kThreads} * kVec;
  constexpr I kTile = kStep * kBroadcastUnroll;
  const I cols = p.cols.divisor();
  const I full_tiles = p.n / kTile;
  const auto load = [&](V (&values)[kBroadcastUnroll][kIn], I tile) {
    const I first = tile * kTile + static_cast<I>(threadIdx.x) * kVec;
#pragma unroll
    for (int u = 0; u < kBroadcastUnroll; ++u) {
      const DivMod<I> at = p.cols.Divide(first + u * kStep);
#pragma unroll
      for (int k = 0; k < kIn; ++k) {
        values[u][k] = Load2d<kVec, kWholeRows>(in.at[k], p.kind[k], first + u * kStep, at, cols);
      }
    }
  };
  const auto compute = [&](const V (&values)[kBroadcastUnroll][kIn], I tile) {
    const I first = tile * kTile + static_cast<I>(threadIdx.x) * kVec;
#pragma unroll
    for (int u = 0; u < kBroadcastUnroll; ++u) {
      ApplyAndStore<kVec, T>(f, values[u], out, static_cast<int64_t>(first + u * kStep));
    }
  };
  if constexpr (kBroadcastWaves > 0) {
    // The next tile's loads are in flight while this one computes.
    I tile = blockIdx.x;
    V next[kBroadcastUnroll][kIn];
    if (tile < full_tiles) load(next, tile);
    for (; tile < full_tiles; tile += gridDim.x) {
      V current[kBroadcastUnroll][kIn];
#pragma unroll
      for (int u = 0; u < kBroadcastUnroll; ++u) {
#pragma unroll
        for (int k = 0; k < kIn; ++k) current[u][k] = next[u][k];
      }
      if (full_tiles - tile > gridDim.x) load(next, tile + gridDim.x);
      compute(current, tile);
    }
  } else {
    for (I tile = blockIdx.x; tile < full_tiles; tile += gridDim.x) {
      V values[kBroadcastUnroll][kIn];
      load(values, tile);
      compute(values, tile);
    }
  }
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (I i = full_tiles * kTile + threadIdx.x; i < p.n; i += kThreads) {
      const DivMod<I> at = p.cols.Divide(i);
      Vec<T, 1> values[kIn];
#pragma unroll
      for (int k = 0; k < kIn; ++k) values[k] = Load2d<1, true>(in.at[k], p.kind[k], i, at, cols);
      ApplyAndStore<1, T>(f, values, out, static_cast<int64_t>(i));
    }
  }
}

template <int kVec, bool kWholeRows, typename I, typename T, typename F, int kIn, int kOut>
void Launch2dWith(const F& f, const Params2d<I, kIn>& p, const Pointers<const T, kIn>& in,
                  const Pointers<T, kOut>& out, int device, cudaStream_t stream) {
  constexpr int64_t kTile = int64_t{kThreads} * kVec * kBroadcastUnroll;
  constexpr auto kernel = Broadcast2dKernel<kVec, kWholeRows, I, T, F, kIn, kOut>;
  int64_t grid = detail::CeilDiv(static_cast<int64_t>(p.n), kTile);
  if constexpr (kBroadcastWaves > 0) {
    static const int per_sm = [] {
      int count = 0;
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, kThreads, 0);
      return count > 0 ? count : 1;
    }();
    const int64_t cap = int64_t{kBroadcastWaves} * per_sm * MultiprocessorCount(device);
    if (grid > cap) grid = cap;
  }
  if (grid > detail::kMaxGrid) grid = detail::kMaxGrid;
  kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(f, p, in, out);
}

template <typename T, typename F, int kIn, int kOut>
void Launch2d(const F& f, const BroadcastPlan<kIn>& plan, const Pointers<const T, kIn>& in,
              const Pointers<T, kOut>& out, int device, cudaStream_t stream) {
  const View2d<kIn> view = ViewAs2d(plan);
  // Full inputs and the outputs are read and written at the output's index: they set the width.
  const int width = detail::WidestVector<T>([&](int w) {
    const std::size_t bytes = w * sizeof(T);
    bool aligned = true;
    for (int k = 0; k < kIn; ++k) {
      if (view.kind[k] == Operand2d::kFull) aligned = aligned && detail::AlignedTo(in.at[k], bytes);
    }
    for (int o = 0; o < kOut; ++o) aligned = aligned && detail::AlignedTo(out.at[o], bytes);
    return aligned;
  });
  bool whole_rows = view.rows == 1 || view.cols % width == 0;
  for (int k = 0; k < kIn; ++k) {
    if (view.kind[k] == Operand2d::kPerColumn) {
      whole_rows = whole_rows && detail::AlignedTo(in.at[k], width * sizeof(T));
    }
  }
  detail::WithIndexType(plan.numel, [&](auto index) {
    using I = decltype(index);
    Params2d<I, kIn> p;
    p.n = static_cast<I>(plan.numel);
    p.cols = IntDivider<I>(static_cast<I>(view.cols));
    for (int k = 0; k < kIn; ++k) p.kind[k] = view.kind[k];
    detail::WithVectorWidth<T>(width, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      if constexpr (kVec == 1) {
        Launch2dWith<1, true>(f, p, in, out, device, stream);
      } else if (whole_rows) {
        Launch2dWith<kVec, true>(f, p, in, out, device, stream);
      } else {
        Launch2dWith<kVec, false>(f, p, in, out, device, stream);
      }
    });
  });
}

// ---- forward, any plan -----------------------------------------------------------------------
// Each input's offset for an output index: the index's digits in the output's dims (innermost
// first, by precomputed division) times the input's strides.
template <typename I, int kIn>
struct OffsetCalculator {
  int rank;
  IntDivider<I> sizes[kMaxBroadcastRank];  // innermost first
  I strides[kMaxBroadcastRank][kIn];       // innermost first; strides[0][k] is 0 or 1

  __device__ __forceinline__ void Offsets(I linear, I (&offsets)[kIn]) const {
#pragma unroll
    for (int k = 0; k < kIn; ++k) offsets[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxBroadcastRank; ++d) {
      if (d == rank) break;
      const DivMod<I> digit = sizes[d].Divide(linear);
      linear = digit.div;
#pragma unroll
      for (int k = 0; k < kIn; ++k) offsets[k] += digit.mod * strides[d][k];
    }
  }
};

template <typename I, int kIn>
OffsetCalculator<I, kIn> MakeOffsetCalculator(const BroadcastPlan<kIn>& plan) {
  OffsetCalculator<I, kIn> calc;
  calc.rank = plan.rank;
  for (int d = 0; d < plan.rank; ++d) {
    const int from = plan.rank - 1 - d;
    calc.sizes[d] = IntDivider<I>(static_cast<I>(plan.dims[from]));
    for (int k = 0; k < kIn; ++k) calc.strides[d][k] = static_cast<I>(plan.strides[k][from]);
  }
  return calc;
}

// As Broadcast2dKernel, each input read at its own offset. With kVec > 1 the innermost dim is a
// multiple of kVec, so a vector of outputs reads a vector of an input that runs along that dim
// and one value of an input broadcast along it.
template <int kVec, typename I, typename T, typename F, int kIn, int kOut>
__global__ void __launch_bounds__(kThreads)
    BroadcastNdKernel(F f, I n, OffsetCalculator<I, kIn> calc, Pointers<const T, kIn> in,
                      Pointers<T, kOut> out) {
  using V = Vec<T, kVec>;
  constexpr I kStep = I{kThreads} * kVec;
  constexpr I kTile = kStep * kNdUnroll;
  const I full_tiles = n / kTile;
  for (I tile = blockIdx.x; tile < full_tiles; tile += gridDim.x) {
    const I first = tile * kTile + static_cast<I>(threadIdx.x) * kVec;
    V values[kNdUnroll][kIn];
#pragma unroll
    for (int u = 0; u < kNdUnroll; ++u) {
      I offsets[kIn];
      calc.Offsets(first + u * kStep, offsets);
#pragma unroll
      for (int k = 0; k < kIn; ++k) {
        values[u][k] = LoadOrSplat<V>(in.at[k], offsets[k], calc.strides[0][k] != 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kNdUnroll; ++u) {
      ApplyAndStore<kVec, T>(f, values[u], out, static_cast<int64_t>(first + u * kStep));
    }
  }
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (I i = full_tiles * kTile + threadIdx.x; i < n; i += kThreads) {
      I offsets[kIn];
      calc.Offsets(i, offsets);
      Vec<T, 1> values[kIn];
#pragma unroll
      for (int k = 0; k < kIn; ++k) {
        values[k] = in.at[k] != nullptr ? Vec<T, 1>{{in.at[k][offsets[k]]}} : ZeroVec<Vec<T, 1>>();
      }
      ApplyAndStore<1, T>(f, values, out, static_cast<int64_t>(i));
    }
  }
}

template <typename T, typename F, int kIn, int kOut>
void LaunchNd(const F& f, const BroadcastPlan<kIn>& plan, const Pointers<const T, kIn>& in,
              const Pointers<T, kOut>& out, cudaStream_t stream) {
  const int inner = plan.rank - 1;
  const int width = detail::WidestVector<T>([&](int w) {
    const std::size_t bytes = w * sizeof(T);
    bool fits = bytes <= kNdVectorBytes && plan.dims[inner] % w == 0;
    for (int k = 0; k < kIn; ++k) {
      if (plan.strides[k][inner] != 0) fits = fits && detail::AlignedTo(in.at[k], bytes);
    }
    for (int o = 0; o < kOut; ++o) fits = fits && detail::AlignedTo(out.at[o], bytes);
    return fits;
  });
  detail::WithIndexType(plan.numel, [&](auto index) {
    using I = decltype(index);
    const OffsetCalculator<I, kIn> calc = MakeOffsetCalculator<I>(plan);
    detail::WithVectorWidth<T>(width, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      constexpr int64_t kTile = int64_t{kThreads} * kVec * kNdUnroll;
      int64_t grid = detail::CeilDiv(plan.numel, kTile);
      if (grid > detail::kMaxGrid) grid = detail::kMaxGrid;
      BroadcastNdKernel<kVec, I, T, F, kIn, kOut><<<static_cast<unsigned>(grid), kThreads, 0,
                                                    stream>>>(
          f, static_cast<I>(plan.numel), calc, in, out);
    });
  });
}

// Runs `f` over the plan's output: kOut outputs of the output's shape (contiguous), each input
// read where it broadcasts to, on `device` and `stream`. Returns the launch's error (cudaSuccess
// for an empty output).
template <typename T, typename F, int kIn, int kOut>
cudaError_t LaunchBroadcast(const F& f, const BroadcastPlan<kIn>& plan,
                            const Pointers<const T, kIn>& in, const Pointers<T, kOut>& out,
                            int device, cudaStream_t stream) {
  if (plan.pattern == BroadcastPattern::kEmpty) return cudaSuccess;
  if (plan.pattern == BroadcastPattern::kSameShape) {
    return Launch(f, plan.numel, in, out, device, stream);
  }
  DeviceGuard guard(device);
  if (plan.rank <= 2) {
    Launch2d(f, plan, in, out, device, stream);
  } else {
    LaunchNd(f, plan, in, out, stream);
  }
  return cudaGetLastError();
}

// ---- backward: shared pieces -----------------------------------------------------------------
// The sum of `value` over the block (1-d, kReduceThreads), in a fixed order: a butterfly within
// each warp, then the warps' sums in order by thread 0, which alone gets the result.
template <typename MT>
__device__ __forceinline__ MT BlockSum(MT value, MT* warp_sums) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = value;
  __syncthreads();
  MT total = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kReduceThreads / 32; ++w) total += warp_sums[w];
  }
  __syncthreads();
  return total;
}

// out[c] = the sum over b of partials[b][c], b in [0, count), in a fixed order: threadIdx.y
// takes b = y, y + blockDim.y, ..., then a tree over y. blockDim.y is a power of two.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    SumPartialsKernel(const OpMathT<T>* partials, int64_t count, int64_t cols, T* out) {
  using MT = OpMathT<T>;
  __shared__ MT shared[kReduceThreads];
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  // A dependent launch with OPGEN_BCAST_PDL (LaunchSumPartials): the pass's sums after its end.
  if constexpr (kDependentLaunch) WaitForPrimaryGrid();
  MT sum = 0;
  if (c < cols) {
    // Eight loads in flight at a time, added in order.
    constexpr int kBatch = 8;
    const int64_t step = blockDim.y;
    int64_t b = threadIdx.y;
    for (; b + (kBatch - 1) * step < count; b += kBatch * step) {
      MT batch[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) batch[u] = partials[(b + u * step) * cols + c];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) sum += batch[u];
    }
    for (; b < count; b += step) sum += partials[b * cols + c];
  }
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  shared[tid] = sum;
  __syncthreads();
  for (int s = blockDim.y / 2; s > 0; s /= 2) {
    if (threadIdx.y < s) shared[tid] += shared[tid + s * blockDim.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && c < cols) out[c] = static_cast<T>(shared[tid]);
}

// Lanes across the columns: 32 (a 128-byte row) when that gives two blocks per SM, down to 8
// (a 32-byte sector) otherwise, so that a [1024] gradient's sums still fill the device.
template <typename T>
void LaunchSumPartials(const OpMathT<T>* partials, int64_t count, int64_t cols, T* out,
                       int device, cudaStream_t stream) {
  int lanes_x = static_cast<int>(detail::PowerOfTwoAtLeast(cols < 32 ? cols : 32));
  while (lanes_x > 8 && detail::CeilDiv(cols, lanes_x) < 2 * MultiprocessorCount(device)) {
    lanes_x /= 2;
  }
  const dim3 block(lanes_x, kReduceThreads / lanes_x);
  const dim3 grid(static_cast<unsigned>(detail::CeilDiv(cols, lanes_x)));
  if constexpr (kDependentLaunch) {
    LaunchDependent<SumPartialsKernel<T>>(grid, block, device, stream, partials, count, cols, out);
  } else {
    SumPartialsKernel<T><<<grid, block, 0, stream>>>(partials, count, cols, out);
  }
}

// Whether every operand that is not fixed (inputs and gradients alike; gradient g is fixed iff
// input g is) is aligned to `bytes`: a vector width the [N, 1] and scalar passes may take.
template <typename T, int kIn, int kOut>
bool FullOperandsAligned(const bool (&fixed_input)[kIn], const Pointers<const T, kIn>& in,
                         const Pointers<T, kOut>& grads, std::size_t bytes) {
  bool aligned = true;
  for (int k = 0; k < kIn; ++k) {
    if (!fixed_input[k]) aligned = aligned && detail::AlignedTo(in.at[k], bytes);
  }
  for (int g = 0; g < kOut; ++g) {
    if (!fixed_input[g]) aligned = aligned && detail::AlignedTo(grads.at[g], bytes);
  }
  return aligned;
}

// ---- backward, [N, C] with [C] ---------------------------------------------------------------
template <int kIn>
struct ColumnPass {
  int64_t rows;
  int64_t cols;
  int64_t rows_per_block;
  bool per_column[kIn];  // [C] inputs; the others are full. Gradient g is summed iff input g is.
};

// The [C] gradients' pass: block (x, y) takes columns [x * lanes_x * kVec, ...) of the rows
// [y * rows_per_block, ...); each thread runs down its vector of columns (kRowUnroll rows loaded
// before it computes), writes the full gradients and sums the [C] ones in registers; the block
// adds its threads' sums down the rows (a fixed tree in shared memory) and writes them as row y
// of its gradient's partials. A null input reads as zeros. The register cap lets
// kColumnMinBlocks blocks share an SM, enough warps to cover the loads' latency.
// kMask names the [C] inputs at compile time (bit k: input k), so that the registers of the
// others' sums and fixed values are not held; kRuntimeMask reads them from p.per_column.
constexpr uint32_t kRuntimeMask = 0xffffffffu;

template <uint32_t kMask, int kIn>
__device__ __forceinline__ bool FlagOf(const bool (&flags)[kIn], int k) {
  if constexpr (kMask == kRuntimeMask) {
    return flags[k];
  } else {
    return ((kMask >> k) & 1u) != 0;
  }
}
template <uint32_t kMask, int kIn>
__device__ __forceinline__ bool PerColumn(const ColumnPass<kIn>& p, int k) {
  return FlagOf<kMask>(p.per_column, k);
}

// Calls launch(width, mask), both as std::integral_constant: with mask = 1 << k where the vector
// is the widest (kWidest elements) and input k alone is flagged, the common case (a bias, a
// per-row scale) a pass compiles for; with kRuntimeMask (the kernel reads the flags) otherwise.
template <typename T, int kWidest, int kIn, typename Launch>
void WithFlagsKnown(int width, const bool (&flags)[kIn], Launch&& launch) {
  uint32_t mask = 0;
  for (int k = 0; k < kIn; ++k) mask |= flags[k] ? 1u << k : 0u;
  bool done = false;
  if (width == kWidest) {
    detail::ForEachIndex<kIn>([&](auto k) {
      constexpr uint32_t kMask = 1u << decltype(k)::value;
      if (!done && mask == kMask) {
        launch(std::integral_constant<int, kWidest>{}, std::integral_constant<uint32_t, kMask>{});
        done = true;
      }
    });
  }
  if (!done) {
    detail::WithVectorWidth<T>(width, [&](auto vec) {
      launch(vec, std::integral_constant<uint32_t, kRuntimeMask>{});
    });
  }
}

template <int kVec, uint32_t kMask, typename T, typename F, int kIn, int kOut>
__global__ void __launch_bounds__(kReduceThreads, kColumnMinBlocks)
    ColumnPassKernel(F f, ColumnPass<kIn> p, Pointers<const T, kIn> in, Pointers<T, kOut> grads,
                     OpMathT<T>* partials) {
  using MT = OpMathT<T>;
  using V = Vec<T, kVec>;
  if constexpr (kDependentLaunch) LetDependentsLaunch();  // the row-block sums' kernel waits
  const auto per_column = [&p](int k) { return PerColumn<kMask>(p, k); };
  const int64_t col = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * kVec;
  const int64_t first_row = int64_t{blockIdx.y} * p.rows_per_block;
  const int64_t end_row = first_row + p.rows_per_block < p.rows ? first_row + p.rows_per_block
                                                                 : p.rows;
  MT sums[kOut][kVec];
#pragma unroll
  for (int g = 0; g < kOut; ++g) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) sums[g][j] = 0;
  }
  if (col < p.cols) {
    V fixed[kIn];  // the [C] inputs' values, the same on every row
#pragma unroll
    for (int k = 0; k < kIn; ++k) {
      fixed[k] = per_column(k) ? LoadVecOrZero<V>(in.at[k], col) : ZeroVec<V>();
    }
    const int64_t step = blockDim.y;
    // One row's values, its gradients and its sums.
    const auto compute = [&](const V (&values)[kIn], int64_t row) {
      V results[kOut];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        MT args[kIn];
        MT r[kOut];
#pragma unroll
        for (int k = 0; k < kIn; ++k) args[k] = LaneOf<MT, kBFloat16Lanes>(values[k], j);
        Apply(f, args, r);
#pragma unroll
        for (int g = 0; g < kOut; ++g) {
          if (per_column(g)) {
            sums[g][j] += r[g];
          } else {
            results[g].v[j] = static_cast<T>(r[g]);
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kOut; ++g) {
        if (!per_column(g)) {
          StoreVec(reinterpret_cast<V*>(grads.at[g] + row * p.cols + col), results[g]);
        }
      }
    };
    // Input k's values in `row`. With the mask known only at run time, what is chosen is the
    // offset, not the vector (a [C] input is read again, from L1), so that a 16-bit vector is
    // assembled once (LoadOrSplat); `row` may then be past the block's rows, where a full input is
    // read at row 0 (in bounds; the values are not used).
    const auto load_one = [&](int k, int64_t row) {
      if constexpr (kMask == kRuntimeMask) {
        const bool same = per_column(k) || row >= end_row;
        return LoadVecOrZero<V>(in.at[k], same ? col : row * p.cols + col);
      } else {
        return per_column(k) || row >= end_row ? fixed[k]
                                               : LoadVecOrZero<V>(in.at[k], row * p.cols + col);
      }
    };
    const auto load = [&](V (&values)[kIn], int64_t row) {
#pragma unroll
      for (int k = 0; k < kIn; ++k) values[k] = load_one(k, row);
    };
    if constexpr (kColumnPrefetch) {
      // The next row's loads are in flight while this one computes.
      int64_t row = first_row + threadIdx.y;
      V next[kIn];
      if (row < end_row) load(next, row);
      for (; row < end_row; row += step) {
        V current[kIn];
#pragma unroll
        for (int k = 0; k < kIn; ++k) current[k] = next[k];
        if (row + step < end_row) load(next, row + step);
        compute(current, row);
      }
    } else {
      // kRowUnroll rows loaded, then computed.
      for (int64_t row0 = first_row + threadIdx.y; row0 < end_row; row0 += kRowUnroll * step) {
        V loaded[kRowUnroll][kIn];
#pragma unroll
        for (int u = 0; u < kRowUnroll; ++u) {
          const int64_t row = row0 + u * step;
#pragma unroll
          for (int k = 0; k < kIn; ++k) loaded[u][k] = load_one(k, row);
        }
#pragma unroll
        for (int u = 0; u < kRowUnroll; ++u) {
          const int64_t row = row0 + u * step;
          if (row >= end_row) break;
          compute(loaded[u], row);
        }
      }
    }
  }
  // Down the rows of the block: element j of thread t at shared[j][t], a tree over threadIdx.y.
  __shared__ MT shared[kVec][kReduceThreads];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  int slot = 0;
#pragma unroll
  for (int g = 0; g < kOut; ++g) {
    if (!per_column(g)) continue;
#pragma unroll
    for (int j = 0; j < kVec; ++j) shared[j][tid] = sums[g][j];
    __syncthreads();
    for (int s = blockDim.y / 2; s > 0; s /= 2) {
      if (threadIdx.y < s) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) shared[j][tid] += shared[j][tid + s * blockDim.x];
      }
      __syncthreads();
    }
    if (threadIdx.y == 0 && col < p.cols) {
      MT* row = partials + (int64_t{slot} * gridDim.y + blockIdx.y) * p.cols + col;
#pragma unroll
      for (int j = 0; j < kVec; ++j) row[j] = shared[j][tid];
    }
    __syncthreads();
    ++slot;
  }
}

struct ColumnGeometry {
  int lanes_x;  // threads across the columns; kReduceThreads / lanes_x down the rows
  int64_t col_blocks;
  int64_t row_blocks;
  int64_t rows_per_block;
};

// The grid of the [C] gradients' pass: vectors of `width` elements, as many row blocks as
// `resident` blocks in all allow. The workspace is sized with the widest vector and the most
// blocks a device can hold: a narrower vector (an unaligned pointer) or a kernel that fits fewer
// blocks only makes fewer row blocks.
template <typename T>
ColumnGeometry ColumnPassGeometry(int64_t rows, int64_t cols, int width, int64_t resident) {
  auto lanes_for = [](int64_t vectors) {
    return static_cast<int>(
        detail::PowerOfTwoAtLeast(vectors < kColumnLanes ? vectors : kColumnLanes));
  };
  ColumnGeometry g;
  const int64_t vectors = detail::CeilDiv(cols, width);
  g.lanes_x = lanes_for(vectors);
  g.col_blocks = detail::CeilDiv(vectors, g.lanes_x);
  // At most `resident` blocks in all: one wave (a few blocks more would make a second one).
  int64_t row_blocks = resident / g.col_blocks;
  if (row_blocks > rows) row_blocks = rows;
  if (row_blocks < 1) row_blocks = 1;
  g.rows_per_block = detail::CeilDiv(rows, row_blocks);
  g.row_blocks = detail::CeilDiv(rows, g.rows_per_block);
  return g;
}

template <typename T, typename F, int kIn, int kOut>
void LaunchColumnBackward(const F& f, const BroadcastPlan<kIn>& plan,
                          const Pointers<const T, kIn>& in, const Pointers<T, kOut>& grads,
                          OpMathT<T>* partials, int device, cudaStream_t stream) {
  const View2d<kIn> view = ViewAs2d(plan);
  ColumnPass<kIn> p;
  p.rows = view.rows;
  p.cols = view.cols;
  for (int k = 0; k < kIn; ++k) p.per_column[k] = view.kind[k] == Operand2d::kPerColumn;
  const int width = detail::WidestVector<T>([&](int w) {
    if (w * sizeof(T) > kColumnVectorBytes) return false;
    bool fits = view.cols % w == 0;
    for (int k = 0; k < kIn; ++k) fits = fits && detail::AlignedTo(in.at[k], w * sizeof(T));
    for (int g = 0; g < kOut; ++g) {
      if (!p.per_column[g]) fits = fits && detail::AlignedTo(grads.at[g], w * sizeof(T));
    }
    return fits;
  });
  // The kernel with the [C] inputs known at compile time for the widest vector and one [C]
  // input (a bias), the common case; the run-time flags otherwise.
  auto launch = [&](auto vec, auto mask_constant) {
    constexpr int kVec = decltype(vec)::value;
    constexpr uint32_t kMask = decltype(mask_constant)::value;
    constexpr auto kernel = ColumnPassKernel<kVec, kMask, T, F, kIn, kOut>;
    const ColumnGeometry g = ColumnPassGeometry<T>(p.rows, p.cols, kVec,
                                                   detail::ResidentBlocks<kernel>(device));
    p.rows_per_block = g.rows_per_block;
    const dim3 grid(static_cast<unsigned>(g.col_blocks), static_cast<unsigned>(g.row_blocks));
    const dim3 block(g.lanes_x, kReduceThreads / g.lanes_x);
    kernel<<<grid, block, 0, stream>>>(f, p, in, grads, partials);
    int slot = 0;
    for (int k = 0; k < kOut; ++k) {
      if (!p.per_column[k]) continue;
      LaunchSumPartials(partials + slot * g.row_blocks * p.cols, g.row_blocks, p.cols,
                        grads.at[k], device, stream);
      ++slot;
    }
  };
  constexpr int kWidest = kColumnVectorBytes / static_cast<int>(sizeof(T)) > 0
                              ? kColumnVectorBytes / static_cast<int>(sizeof(T))
                              : 1;
  WithFlagsKnown<T, kWidest>(width, p.per_column, launch);
}

// ---- backward, [N, C] with [N, 1] ------------------------------------------------------------
template <int kIn>
struct RowPass {
  int64_t rows;
  int64_t cols;
  int lanes;          // threads per row: a power of two up to a warp, or the block
  bool per_row[kIn];  // [N, 1] inputs; the others are full. Gradient g is summed iff input g is.
};

// `lanes` threads per row run along it, writing the full gradients and summing the [N, 1] ones;
// a butterfly over the row's lanes (and, for a block per row, the warps' sums in order) adds
// them up. kMask names the [N, 1] inputs at compile time as in ColumnPassKernel (kRuntimeMask:
// from p.per_row), so that the others' vectors alone are loaded and held.
template <int kVec, bool kBlockPerRow, uint32_t kMask, typename T, typename F, int kIn, int kOut>
__global__ void __launch_bounds__(kReduceThreads)
    RowPassKernel(F f, RowPass<kIn> p, Pointers<const T, kIn> in, Pointers<T, kOut> grads) {
  using MT = OpMathT<T>;
  using V = Vec<T, kVec>;
  const auto per_row = [&p](int k) { return FlagOf<kMask>(p.per_row, k); };
  __shared__ MT warp_sums[kReduceThreads / 32];
  const int lanes = kBlockPerRow ? kReduceThreads : p.lanes;
  const int rows_per_block = kReduceThreads / lanes;
  const int lane = threadIdx.x % lanes;
  const int64_t vectors = p.cols / kVec;
  // Every thread of the block runs the same iterations: the shuffles and barriers need them all.
  for (int64_t base = int64_t{blockIdx.x} * rows_per_block; base < p.rows;
       base += int64_t{gridDim.x} * rows_per_block) {
    const int64_t row = base + threadIdx.x / lanes;
    const bool valid = row < p.rows;
    MT sums[kOut];
#pragma unroll
    for (int g = 0; g < kOut; ++g) sums[g] = 0;
    if (valid) {
      MT fixed[kIn];  // the [N, 1] inputs' values for this row
#pragma unroll
      for (int k = 0; k < kIn; ++k) fixed[k] = per_row(k) ? ReadOrZero(in.at[k], row) : MT(0);
      // kPerRowUnroll vectors of the row loaded, then computed: the stores of one round may
      // not be moved above the next round's loads (the pointers may alias), so the loads in
      // flight are the ones issued together.
      for (int64_t v0 = lane; v0 < vectors; v0 += int64_t{lanes} * kPerRowUnroll) {
        V loaded[kPerRowUnroll][kIn];
#pragma unroll
        for (int u = 0; u < kPerRowUnroll; ++u) {
          const int64_t v = v0 + int64_t{u} * lanes;
#pragma unroll
          for (int k = 0; k < kIn; ++k) {
            loaded[u][k] = !per_row(k) && v < vectors
                               ? LoadVecOrZero<V>(in.at[k], row * p.cols + v * kVec)
                               : ZeroVec<V>();
          }
        }
#pragma unroll
        for (int u = 0; u < kPerRowUnroll; ++u) {
          const int64_t v = v0 + int64_t{u} * lanes;
          if (v >= vectors) break;
          const int64_t at = row * p.cols + v * kVec;
          V results[kOut];
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            MT args[kIn];
            MT r[kOut];
#pragma unroll
            for (int k = 0; k < kIn; ++k) {
              args[k] = per_row(k) ? fixed[k] : LaneOf<MT, kBFloat16Lanes>(loaded[u][k], j);
            }
            Apply(f, args, r);
#pragma unroll
            for (int g = 0; g < kOut; ++g) {
              if (per_row(g)) {
                sums[g] += r[g];
              } else {
                results[g].v[j] = static_cast<T>(r[g]);
              }
            }
          }
#pragma unroll
          for (int g = 0; g < kOut; ++g) {
            if (!per_row(g)) StoreVec(reinterpret_cast<V*>(grads.at[g] + at), results[g]);
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kOut; ++g) {
      if (!per_row(g)) continue;
      MT sum;
      if constexpr (kBlockPerRow) {
        sum = BlockSum(sums[g], warp_sums);
      } else {
        sum = sums[g];
        for (int offset = lanes / 2; offset > 0; offset /= 2) {
          sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        }
      }
      if (valid && lane == 0) grads.at[g][row] = static_cast<T>(sum);
    }
  }
}

template <typename T, typename F, int kIn, int kOut>
void LaunchRowBackward(const F& f, const BroadcastPlan<kIn>& plan,
                       const Pointers<const T, kIn>& in, const Pointers<T, kOut>& grads,
                       cudaStream_t stream) {
  const View2d<kIn> view = ViewAs2d(plan);
  RowPass<kIn> p;
  p.rows = view.rows;
  p.cols = view.cols;
  for (int k = 0; k < kIn; ++k) p.per_row[k] = view.kind[k] == Operand2d::kPerRow;
  const int width = detail::WidestVector<T>([&](int w) {
    return view.cols % w == 0 && FullOperandsAligned(p.per_row, in, grads, w * sizeof(T));
  });
  auto launch = [&](auto vec, auto mask_constant) {
    constexpr int kVec = decltype(vec)::value;
    constexpr uint32_t kMask = decltype(mask_constant)::value;
    const int64_t vectors = p.cols / kVec;
    const bool block_per_row = vectors >= kBlockPerRowVectors;
    p.lanes = block_per_row ? kReduceThreads
                            : static_cast<int>(detail::PowerOfTwoAtLeast(vectors < 32 ? vectors
                                                                                      : 32));
    const int64_t row_groups = detail::CeilDiv(p.rows, kReduceThreads / p.lanes);
    const unsigned grid =
        static_cast<unsigned>(row_groups < detail::kMaxGrid ? row_groups : detail::kMaxGrid);
    if (block_per_row) {
      RowPassKernel<kVec, true, kMask, T><<<grid, kReduceThreads, 0, stream>>>(f, p, in, grads);
    } else {
      RowPassKernel<kVec, false, kMask, T><<<grid, kReduceThreads, 0, stream>>>(f, p, in, grads);
    }
  };
  // As for the [C] pass: the [N, 1] input known at compile time for the widest vector and one
  // such input (a per-row scale).
  WithFlagsKnown<T, 16 / static_cast<int>(sizeof(T))>(width, p.per_row, launch);
}

// ---- backward, scalar operands ---------------------------------------------------------------
template <int kIn>
struct ScalarPass {
  int64_t n;
  // One-element inputs; the others are full. Gradient g is summed iff input g is.
  bool scalar[kIn];
};

// Blocks stride over tiles of kReduceThreads * kVec elements, writing the full gradients and
// summing the scalars' ones; each block writes its sums to partials[slot][blockIdx.x].
template <int kVec, typename T, typename F, int kIn, int kOut>
__global__ void __launch_bounds__(kReduceThreads)
    ScalarPassKernel(F f, ScalarPass<kIn> p, Pointers<const T, kIn> in, Pointers<T, kOut> grads,
                     OpMathT<T>* partials) {
  using MT = OpMathT<T>;
  using V = Vec<T, kVec>;
  __shared__ MT warp_sums[kReduceThreads / 32];
  MT fixed[kIn];
#pragma unroll
  for (int k = 0; k < kIn; ++k) fixed[k] = p.scalar[k] ? ReadOrZero(in.at[k], 0) : MT(0);
  MT sums[kOut];
#pragma unroll
  for (int g = 0; g < kOut; ++g) sums[g] = 0;
  constexpr int64_t kTile = int64_t{kReduceThreads} * kVec;
  const int64_t full_tiles = p.n / kTile;
  for (int64_t tile = blockIdx.x; tile < full_tiles; tile += gridDim.x) {
    const int64_t first = tile * kTile + int64_t{threadIdx.x} * kVec;
    MT values[kIn][kVec];
#pragma unroll
    for (int k = 0; k < kIn; ++k) {
      if (p.scalar[k]) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) values[k][j] = fixed[k];
      } else {
        const V x = LoadVecOrZero<V>(in.at[k], first);
#pragma unroll
        for (int j = 0; j < kVec; ++j) values[k][j] = LaneOf<MT, kBFloat16Lanes>(x, j);
      }
    }
    V results[kOut];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      MT args[kIn];
      MT r[kOut];
#pragma unroll
      for (int k = 0; k < kIn; ++k) args[k] = values[k][j];
      Apply(f, args, r);
#pragma unroll
      for (int g = 0; g < kOut; ++g) {
        if (p.scalar[g]) {
          sums[g] += r[g];
        } else {
          results[g].v[j] = static_cast<T>(r[g]);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kOut; ++g) {
      if (!p.scalar[g]) StoreVec(reinterpret_cast<V*>(grads.at[g] + first), results[g]);
    }
  }
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (int64_t i = full_tiles * kTile + threadIdx.x; i < p.n; i += kReduceThreads) {
      MT args[kIn];
      MT r[kOut];
#pragma unroll
      for (int k = 0; k < kIn; ++k) args[k] = p.scalar[k] ? fixed[k] : ReadOrZero(in.at[k], i);
      Apply(f, args, r);
#pragma unroll
      for (int g = 0; g < kOut; ++g) {
        if (p.scalar[g]) {
          sums[g] += r[g];
        } else {
          grads.at[g][i] = static_cast<T>(r[g]);
        }
      }
    }
  }
  int slot = 0;
#pragma unroll
  for (int g = 0; g < kOut; ++g) {
    if (!p.scalar[g]) continue;
    const MT total = BlockSum(sums[g], warp_sums);
    if (threadIdx.x == 0) partials[int64_t{slot} * gridDim.x + blockIdx.x] = total;
    ++slot;
  }
}

template <typename T, typename F, int kIn, int kOut>
void LaunchScalarBackward(const F& f, const BroadcastPlan<kIn>& plan,
                          const Pointers<const T, kIn>& in, const Pointers<T, kOut>& grads,
                          OpMathT<T>* partials, int device, cudaStream_t stream) {
  ScalarPass<kIn> p;
  p.n = plan.numel;
  for (int k = 0; k < kIn; ++k) p.scalar[k] = !plan.IsFull(k);
  const int width = detail::WidestVector<T>(
      [&](int w) { return FullOperandsAligned(p.scalar, in, grads, w * sizeof(T)); });
  detail::WithVectorWidth<T>(width, [&](auto vec) {
    constexpr int kVec = decltype(vec)::value;
    constexpr auto kernel = ScalarPassKernel<kVec, T, F, kIn, kOut>;
    const int64_t tiles = detail::CeilDiv(p.n, int64_t{kReduceThreads} * kVec);
    int64_t blocks = detail::ResidentBlocks<kernel>(device);
    if (blocks > tiles) blocks = tiles;
    kernel<<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(f, p, in, grads,
                                                                       partials);
    int slot = 0;
    for (int g = 0; g < kOut; ++g) {
      if (!p.scalar[g]) continue;
      LaunchSumPartials(partials + slot * blocks, blocks, 1, grads.at[g], device, stream);
      ++slot;
    }
  });
}

// ---- backward, any plan ----------------------------------------------------------------------

// A broadcast input's gradient as a reduction: element e of the input (its digits in the dims the
// input keeps) sums the functor's gradient over the output elements its digits in the other
// (reduced) dims pick. Each input's offset for such an element is the sum of both digit sets
// times that input's strides, so nothing goes through the output's linear index.
template <typename I, int kIn>
struct GatherMap {
  I count;          // elements of the input: kept digit sets
  I reduced_count;  // output elements each of them sums
  int kept_rank;
  int reduced_rank;
  IntDivider<I> kept_sizes[kMaxBroadcastRank];  // innermost first
  I kept_strides[kMaxBroadcastRank][kIn];       // every input's stride over those dims
  IntDivider<I> reduced_sizes[kMaxBroadcastRank];
  I reduced_strides[kMaxBroadcastRank][kIn];
};

template <typename I, int kIn>
GatherMap<I, kIn> MakeGatherMap(const BroadcastPlan<kIn>& plan, int input) {
  GatherMap<I, kIn> map;
  map.count = static_cast<I>(plan.in_numel[input]);
  map.reduced_count = 1;
  map.kept_rank = map.reduced_rank = 0;
  for (int d = plan.rank - 1; d >= 0; --d) {
    const I size = static_cast<I>(plan.dims[d]);
    const bool kept = plan.strides[input][d] != 0;
    const int at = kept ? map.kept_rank++ : map.reduced_rank++;
    (kept ? map.kept_sizes : map.reduced_sizes)[at] = IntDivider<I>(size);
    for (int k = 0; k < kIn; ++k) {
      (kept ? map.kept_strides : map.reduced_strides)[at][k] =
          static_cast<I>(plan.strides[k][d]);
    }
    if (!kept) map.reduced_count *= size;
  }
  return map;
}

// Gradient `g` of a broadcast input, one pass, no workspace: block x takes blockDim.x consecutive
// input elements (consecutive output addresses when the innermost dim is kept, so lanes run
// along it; else blockDim.x is 1 and the block's threads run along the reduced elements), its
// threadIdx.y walks the reduced elements y, y + blockDim.y, ..., and a fixed tree over y in
// shared memory adds them up: the same order every run. A null input reads as zeros.
template <typename I, typename T, typename F, int kIn, int kOut>
__global__ void __launch_bounds__(kReduceThreads)
    GatherSumKernel(F f, int g, GatherMap<I, kIn> map, Pointers<const T, kIn> in, T* grad) {
  using MT = OpMathT<T>;
  __shared__ MT shared[kReduceThreads];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  // Blocks stride over groups of blockDim.x elements; the loop's bounds are the block's alone,
  // so every thread reaches the barriers.
  for (I group = static_cast<I>(blockIdx.x) * blockDim.x; group < map.count;
       group += static_cast<I>(gridDim.x) * blockDim.x) {
    const I e = group + threadIdx.x;
    MT sum = 0;
    if (e < map.count) {
      I base[kIn];
#pragma unroll
      for (int k = 0; k < kIn; ++k) base[k] = 0;
      I rest = e;
      for (int d = 0; d < map.kept_rank; ++d) {
        const DivMod<I> digit = map.kept_sizes[d].Divide(rest);
        rest = digit.div;
#pragma unroll
        for (int k = 0; k < kIn; ++k) base[k] += digit.mod * map.kept_strides[d][k];
      }
      for (I j = threadIdx.y; j < map.reduced_count; j += blockDim.y) {
        I offsets[kIn];
#pragma unroll
        for (int k = 0; k < kIn; ++k) offsets[k] = base[k];
        rest = j;
        for (int d = 0; d < map.reduced_rank; ++d) {
          const DivMod<I> digit = map.reduced_sizes[d].Divide(rest);
          rest = digit.div;
#pragma unroll
          for (int k = 0; k < kIn; ++k) offsets[k] += digit.mod * map.reduced_strides[d][k];
        }
        MT args[kIn];
        MT r[kOut];
#pragma unroll
        for (int k = 0; k < kIn; ++k) args[k] = ReadOrZero(in.at[k], offsets[k]);
        Apply(f, args, r);
#pragma unroll
        for (int o = 0; o < kOut; ++o) {
          if (o == g) sum += r[o];
        }
      }
    }
    shared[tid] = sum;
    __syncthreads();
    for (int s = blockDim.y / 2; s > 0; s /= 2) {
      if (threadIdx.y < s) shared[tid] += shared[tid + s * blockDim.x];
      __syncthreads();
    }
    if (threadIdx.y == 0 && e < map.count) grad[e] = static_cast<T>(shared[tid]);
    __syncthreads();
  }
}

// GatherSumKernel for a gradient whose input keeps the innermost dim, kVec of its elements per
// thread (consecutive along that dim, which is a multiple of kVec): each input that runs along
// the innermost dim is read in vectors, one broadcast along it as one value; each thread loads
// kGatherUnroll reduced elements' vectors before it computes, and the block adds its threads'
// sums over threadIdx.y with the same fixed tree. The same order every run.
template <int kVec, typename I, typename T, typename F, int kIn, int kOut>
__global__ void __launch_bounds__(kReduceThreads)
    GatherSumVecKernel(F f, int g, GatherMap<I, kIn> map, Pointers<const T, kIn> in, T* grad) {
  using MT = OpMathT<T>;
  using V = Vec<T, kVec>;
  __shared__ MT shared[kVec][kReduceThreads];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const I per_block = static_cast<I>(blockDim.x) * kVec;
  for (I group = static_cast<I>(blockIdx.x) * per_block; group < map.count;
       group += static_cast<I>(gridDim.x) * per_block) {
    const I e = group + static_cast<I>(threadIdx.x) * kVec;
    MT sum[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) sum[j] = 0;
    if (e < map.count) {
      I base[kIn];
#pragma unroll
      for (int k = 0; k < kIn; ++k) base[k] = 0;
      I rest = e;
      for (int d = 0; d < map.kept_rank; ++d) {
        const DivMod<I> digit = map.kept_sizes[d].Divide(rest);
        rest = digit.div;
#pragma unroll
        for (int k = 0; k < kIn; ++k) base[k] += digit.mod * map.kept_strides[d][k];
      }
      const I step = blockDim.y;
      for (I j0 = threadIdx.y; j0 < map.reduced_count; j0 += kGatherUnroll * step) {
        V loaded[kGatherUnroll][kIn];
#pragma unroll
        for (int u = 0; u < kGatherUnroll; ++u) {
          const I j = j0 + u * step;
          I offsets[kIn];
#pragma unroll
          for (int k = 0; k < kIn; ++k) offsets[k] = base[k];
          rest = j < map.reduced_count ? j : 0;
          for (int d = 0; d < map.reduced_rank; ++d) {
            const DivMod<I> digit = map.reduced_sizes[d].Divide(rest);
            rest = digit.div;
#pragma unroll
            for (int k = 0; k < kIn; ++k) offsets[k] += digit.mod * map.reduced_strides[d][k];
          }
#pragma unroll
          for (int k = 0; k < kIn; ++k) {
            loaded[u][k] = LoadOrSplat<V>(in.at[k], offsets[k], map.kept_strides[0][k] != 0);
          }
        }
#pragma unroll
        for (int u = 0; u < kGatherUnroll; ++u) {
          if (j0 + u * step >= map.reduced_count) break;
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            MT args[kIn];
            MT r[kOut];
#pragma unroll
            for (int k = 0; k < kIn; ++k) args[k] = static_cast<MT>(loaded[u][k].v[i]);
            Apply(f, args, r);
#pragma unroll
            for (int o = 0; o < kOut; ++o) {
              if (o == g) sum[i] += r[o];
            }
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kVec; ++i) shared[i][tid] = sum[i];
    __syncthreads();
    for (int s = blockDim.y / 2; s > 0; s /= 2) {
      if (threadIdx.y < s) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) shared[i][tid] += shared[i][tid + s * blockDim.x];
      }
      __syncthreads();
    }
    if (threadIdx.y == 0 && e < map.count) {
      V result;
#pragma unroll
      for (int i = 0; i < kVec; ++i) result.v[i] = static_cast<T>(shared[i][tid]);
      *reinterpret_cast<V*>(grad + e) = result;
    }
    __syncthreads();
  }
}

template <typename T, typename F, int kIn, int kOut>
void LaunchNdBackward(const F& f, const BroadcastPlan<kIn>& plan,
                      const Pointers<const T, kIn>& in, const Pointers<T, kOut>& grads,
                      int device, cudaStream_t stream) {
  // The full gradients: the forward kernel's pass over the output, in vectors, with the summed
  // gradients' outputs null (not stored).
  Pointers<T, kOut> full = grads;
  bool any_full = false;
  for (int g = 0; g < kOut; ++g) {
    full.at[g] = plan.IsFull(g) ? grads.at[g] : nullptr;
    any_full = any_full || plan.IsFull(g);
  }
  if (any_full) LaunchNd(f, plan, in, full, stream);
  detail::WithIndexType(plan.numel, [&](auto index) {
    using I = decltype(index);
    for (int g = 0; g < kOut; ++g) {
      if (plan.IsFull(g)) continue;
      const GatherMap<I, kIn> map = MakeGatherMap<I>(plan, g);
      // Lanes along the input's elements when they are consecutive in the output (the innermost
      // dim kept) and there are enough of them; the rest of the block along the reduced ones.
      const bool inner_kept = plan.strides[g][plan.rank - 1] != 0;
      // Vectors along the innermost dim when it is kept and every input that runs along it (and
      // the gradient) allows them.
      const int inner = plan.rank - 1;
      const int width = !inner_kept ? 1 : detail::WidestVector<T>([&](int w) {
        const std::size_t bytes = w * sizeof(T);
        bool fits = plan.dims[inner] % w == 0 && detail::AlignedTo(grads.at[g], bytes);
        for (int k = 0; k < kIn; ++k) {
          if (plan.strides[k][inner] != 0) fits = fits && detail::AlignedTo(in.at[k], bytes);
        }
        return fits;
      });
      if (width > 1) {
        detail::WithVectorWidth<T>(width, [&](auto vec) {
          constexpr int kVec = decltype(vec)::value;
          const int64_t vectors = plan.in_numel[g] / kVec;
          // Lanes across the vectors: a warp's worth when that makes enough blocks to fill the
          // device, fewer (and more threads down the reduced elements) otherwise.
          int lanes = 32;
          while (lanes > 1 && lanes / 2 >= vectors) lanes /= 2;
          const int64_t enough = 4 * MultiprocessorCount(device);
          while (lanes > 4 && detail::CeilDiv(vectors, lanes) < enough) lanes /= 2;
          const dim3 block(lanes, kReduceThreads / lanes);
          int64_t blocks = detail::CeilDiv(vectors, lanes);
          if (blocks > detail::kMaxGrid) blocks = detail::kMaxGrid;
          GatherSumVecKernel<kVec, I, T, F, kIn, kOut>
              <<<static_cast<unsigned>(blocks), block, 0, stream>>>(f, g, map, in, grads.at[g]);
        });
        continue;
      }
      int lanes = inner_kept ? 32 : 1;
      while (lanes > 1 && lanes / 2 >= plan.in_numel[g]) lanes /= 2;
      const dim3 block(lanes, kReduceThreads / lanes);
      int64_t blocks = detail::CeilDiv(plan.in_numel[g], lanes);
      if (blocks > detail::kMaxGrid) blocks = detail::kMaxGrid;
      GatherSumKernel<I, T, F, kIn, kOut><<<static_cast<unsigned>(blocks), block, 0, stream>>>(
          f, g, map, in, grads.at[g]);
    }
  });
}

// ---- backward: the entry points --------------------------------------------------------------
// Workspace bytes LaunchBroadcastBackward needs for a plan of the backward functor's inputs, the
// first kOut of which get gradients, on `device`; 0 when the pattern needs none.
template <typename T, int kOut, int kIn>
std::size_t BroadcastBackwardWorkspaceBytes(const BroadcastPlan<kIn>& plan, int device) {
  static_assert(kOut <= kIn, "the gradients belong to the first kOut inputs of the plan");
  using MT = OpMathT<T>;
  const int64_t reduced = detail::ReducedGradients<kIn, kOut>(plan);
  int64_t elements = 0;
  switch (plan.pattern) {
    case BroadcastPattern::kTrailingVector: {
      const View2d<kIn> view = ViewAs2d(plan);
      const int widest = 16 / static_cast<int>(sizeof(T));
      const ColumnGeometry g = ColumnPassGeometry<T>(view.rows, view.cols, widest,
                                                     detail::MaxResidentReduceBlocks(device));
      elements = reduced * g.row_blocks * view.cols;
      break;
    }
    case BroadcastPattern::kScalarOperand:
      elements = reduced * detail::MaxResidentReduceBlocks(device);
      break;
    default:
      break;
  }
  return static_cast<std::size_t>(elements) * sizeof(MT);
}

// Runs the backward functor `f` over the plan of its inputs (the forward inputs first, then the
// output gradients and whatever else it reads) and writes grads.at[g], the gradient of input g,
// in input g's shape: directly when input g is full, else summed over the dims it is broadcast
// along (see the top of this file). `workspace` holds at least
// BroadcastBackwardWorkspaceBytes<T, kOut>(plan, device) bytes, aligned for OpMathT<T>; it may
// be null when that is 0. Returns the first launch error, cudaErrorInvalidValue for a workspace
// too small or misaligned.
template <typename T, typename F, int kIn, int kOut>
cudaError_t LaunchBroadcastBackward(const F& f, const BroadcastPlan<kIn>& plan,
                                    const Pointers<const T, kIn>& in,
                                    const Pointers<T, kOut>& grads, void* workspace,
                                    std::size_t workspace_bytes, int device,
                                    cudaStream_t stream) {
  static_assert(kOut <= kIn, "the gradients belong to the first kOut inputs of the plan");
  using MT = OpMathT<T>;
  if (workspace_bytes < BroadcastBackwardWorkspaceBytes<T, kOut>(plan, device) ||
      !detail::AlignedTo(workspace, alignof(MT))) {
    return cudaErrorInvalidValue;
  }
  auto* partials = static_cast<MT*>(workspace);
  switch (plan.pattern) {
    case BroadcastPattern::kEmpty: {
      // Nothing flows back to a broadcast input through an empty output: its gradient is 0.
      DeviceGuard guard(device);
      for (int g = 0; g < kOut; ++g) {
        if (plan.IsFull(g)) continue;
        const cudaError_t status =
            cudaMemsetAsync(grads.at[g], 0, plan.in_numel[g] * sizeof(T), stream);
        if (status != cudaSuccess) return status;
      }
      return cudaSuccess;
    }
    case BroadcastPattern::kSameShape:
      return Launch(f, plan.numel, in, grads, device, stream);
    default:
      break;
  }
  DeviceGuard guard(device);
  switch (plan.pattern) {
    case BroadcastPattern::kTrailingVector:
      LaunchColumnBackward(f, plan, in, grads, partials, device, stream);
      break;
    case BroadcastPattern::kLeadingVector:
      LaunchRowBackward(f, plan, in, grads, stream);
      break;
    case BroadcastPattern::kScalarOperand:
      LaunchScalarBackward(f, plan, in, grads, partials, device, stream);
      break;
    default:
      LaunchNdBackward(f, plan, in, grads, device, stream);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace opgen

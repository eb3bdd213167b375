// opgen row-wise launcher: runs a row-wise op's functor (see opgen/rowwise.h for the interface and
// an example) over every row on the GPU. Plain CUDA with no Paddle in it, so it can be checked and
// timed on its own (scripts/gpu/rowwise_bench.cu in opgen's repository). Every launcher returns
// the launch's error and never aborts.
//
//   const std::size_t bytes = opgen::rowwise::WorkspaceBytes<Functor<T>, Elem, Col>(p);
//   cudaError_t e = opgen::rowwise::Run<Functor<T>, Elem, Col>(functor, p, workspace, stream);
//
// Both run on the current device; `workspace` (256-byte aligned, `bytes` long; null when bytes is
// 0) holds the column sums' per-block (per-cluster) partials. The schedule depends on the row
// length:
//   short rows      a group of 1 to 32 lanes of a warp per row, several rows per block, the row
//                   in registers (every input read once), reductions by warp shuffles;
//   medium rows     a warp per row, up to 8 vectors per lane in registers;
//   long rows       a block per row, the row in registers, shuffles then shared memory (with
//                   column sums, rows of up to 512 lanes share blocks of OPGEN_ROW_SUM_THREADS
//                   or, rows of 512, OPGEN_ROW_WIDE_SUM_THREADS);
//   longer rows     (sm_90 on) a cluster of 2 to 8 blocks per row, each block a slice of it in
//                   registers; for a reduction each block sends its result into every block's
//                   shared memory (st.async, counted by an mbarrier there);
//   longest rows    a block per row looping over global memory; each reduction re-reads the
//                   inputs (one row at a time per block, so they come from L2 mostly).
// Loads and stores are 16 bytes wide when every pointer is 16-byte aligned and cols is a multiple
// of the vector, element by element otherwise. Offsets are 64-bit. Column sums: each thread keeps
// its columns' sums over the rows its block processes (in registers, or in the block's slice of
// the workspace for the longest rows), each block writes them to the workspace (a cluster: one
// slice, each block its columns), and a second kernel adds the partials in a fixed order: the
// same bits on every run, no atomics.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "opgen/cuda.cuh"
#include "opgen/math.h"
#include "opgen/rowwise.h"

namespace opgen {
namespace rowwise {

// Tuning knobs, settable with -D (OPGEN_NVCC_FLAGS at build time).
// Threads per block of the short- and medium-row schedules (several rows per block).
#ifndef OPGEN_ROW_THREADS
#define OPGEN_ROW_THREADS 256
#endif
// Vectors a lane of the short-row schedule takes before the row gets more lanes (1: as many lanes
// as vectors, up to 32).
#ifndef OPGEN_ROW_LANE_VECS
#define OPGEN_ROW_LANE_VECS 2
#endif
// Bytes each thread holds in registers at most for the row: its per-element inputs' elements and
// their column sums (sets the vectors per lane, and so the longest row each register schedule
// takes). Larger values are not supported: with 256 a launch failed ("invalid argument") on the
// H200 (opgen's docs/benchmarks.md, round 14).
#ifndef OPGEN_ROW_REG_BYTES
#define OPGEN_ROW_REG_BYTES 128
#endif
// Vectors per thread the block-per-row schedule aims at before it takes more threads.
#ifndef OPGEN_ROW_BLOCK_VECS
#define OPGEN_ROW_BLOCK_VECS 4
#endif
// Threads per block of the schedule that loops over global memory (512 with column sums, whose
// blocks are one per SM).
#ifndef OPGEN_ROW_LOOP_THREADS
#define OPGEN_ROW_LOOP_THREADS 1024
#endif
// 0 launches one block per row group; N > 0 at most N waves of resident blocks, which then stride
// over the rows (column sums always use one wave).
#ifndef OPGEN_ROW_WAVES
#define OPGEN_ROW_WAVES 0
#endif

// Blocks per multiprocessor of a register schedule with column sums (0: as many as fit). Each
// block writes one [K, cols] partial, so fewer blocks move fewer bytes, at some occupancy.
#ifndef OPGEN_ROW_SUM_BLOCKS
#define OPGEN_ROW_SUM_BLOCKS 0
#endif
// 1: the block-per-row register schedule with 1024 threads (the longest rows a block holds: one
// block per SM) and the cluster schedules keep their blocks resident and copy the next row into
// shared memory (cp.async) while they work on the current one. It pays for the longest rows and
// costs smaller blocks, so they do not prefetch (figures: opgen's docs/benchmarks.md, "Row-wise
// launcher on its own").
#ifndef OPGEN_ROW_PREFETCH
#define OPGEN_ROW_PREFETCH 1
#endif
// 1: block-per-row register schedules with column sums (one row per block, 16-byte vectors)
// prefetch their next row too, whatever their size (their blocks are resident and stride over
// the rows anyway).
#ifndef OPGEN_ROW_PREFETCH_SUMS
#define OPGEN_ROW_PREFETCH_SUMS 0
#endif
// Threads of a block of the block-per-row schedules with column sums (0: one row per block, the
// block as large as the row needs; 512 or 1024: rows of 128 to 512 lanes share a block, whose
// rows' column sums meet in shared memory, so fewer partials). 512 measured best on the H200
// (norm backwards at 1024 and 4096 columns: +0.08 to +0.16 of a copy in most cells, one cell
// -0.15; opgen's docs/benchmarks.md, round 9).
#ifndef OPGEN_ROW_SUM_THREADS
#define OPGEN_ROW_SUM_THREADS 512
#endif
// The same for rows of 512 lanes (0: OPGEN_ROW_SUM_THREADS). Two such rows a 1024-thread block
// measured faster on an H100 than one a 512-thread block (the norms' backwards at 4096 columns:
// float32 +0.04 to +0.05 of a copy, layer_norm's 16-bit +0.09), where rows of 128 and 256 lanes
// measured slower in blocks of 1024 (-0.08 to -0.10 in 16-bit; opgen's docs/benchmarks.md,
// rounds 25 and 26).
#ifndef OPGEN_ROW_WIDE_SUM_THREADS
#define OPGEN_ROW_WIDE_SUM_THREADS 1024
#endif
// 1: a row that 512 threads hold with every chunk their registers allow takes a block of 512
// (two an SM, each loading its own row) rather than 1024 threads with half the chunks (one an
// SM, staging its next row), measured faster for one-input forwards (16-bit at 32768 columns,
// float32 at 16384) and the same elsewhere (opgen's docs/benchmarks.md, round 25); 0: the 1024.
#ifndef OPGEN_ROW_HALF_BLOCKS
#define OPGEN_ROW_HALF_BLOCKS 1
#endif
// 1: float32 rows of one per-element input and no column sums, too long for 1024 threads of
// kBlockVecs vectors each (16384 to 32768 floats), go to the loop over global memory, which reads
// the row twice (the second time from L2), rather than to a 1024-thread block that holds it in
// registers and stages the next one in shared memory: one such row an SM left the SMs idle 12 % of
// the time. Measured faster on an H100 for the forwards of softmax, rms_norm and layer_norm at
// 1024 x 32768, and slower for rows of two inputs (softmax's backward) or with column sums
// (opgen's docs/benchmarks.md, round 30); 0: the 1024 threads.
#ifndef OPGEN_ROW_LONG_LOOP
#define OPGEN_ROW_LONG_LOOP 1
#endif
// 1: 16-bit rows with column sums that share a block in rows of at least 512 lanes, each thread
// loading at most two vectors a row (one chunk of one or two per-element inputs), stage their
// next rows in shared memory (cp.async) while they reduce and write the current ones: such
// threads have too few loads in flight. Measured faster on an H100 for layer_norm's 16-bit
// backward at 4096 columns, and slower where threads load three vectors (add_rms_norm's) or the
// rows are shorter (opgen's docs/benchmarks.md, round 29); 0: no staging.
#ifndef OPGEN_ROW_STAGE_GROUPS
#define OPGEN_ROW_STAGE_GROUPS 1
#endif
// 1: where a register schedule stages its next row (OPGEN_ROW_PREFETCH, OPGEN_ROW_STAGE_GROUPS),
// each thread also loads that row's per-row inputs (layer_norm's saved mean and rstd) into
// registers then, so a row does not start by waiting on them (measured faster for layer_norm's
// backwards at 32768 columns on an H100; opgen's docs/benchmarks.md, round 29); 0: each row
// loads them first.
#ifndef OPGEN_ROW_PREFETCH_ROW_VALUES
#define OPGEN_ROW_PREFETCH_ROW_VALUES 1
#endif
// 1: on devices of compute capability 9.0 and later, the kernel that adds the column sums'
// partials is a programmatic dependent launch: scheduled while the row kernel drains, it waits
// for it on the device instead of being launched after it ends. Measured faster on an H100 in
// most backwards with column sums (+0.01 to +0.02 of a copy; opgen's docs/benchmarks.md, round
// 26); 0: a plain launch.
#ifndef OPGEN_ROW_PDL
#define OPGEN_ROW_PDL 1
#endif
// Threads of each block of a cluster (512 or 1024). 512 measured faster on the H200 for the
// norms' backwards at 1024 x 32768 (rms_norm +0.04 to +0.07 of a copy in every dtype; opgen's
// docs/benchmarks.md, round 13); 512-thread cluster blocks state one block per multiprocessor
// to ptxas, so their threads may take up to 128 registers.
#ifndef OPGEN_ROW_CLUSTER_THREADS
#define OPGEN_ROW_CLUSTER_THREADS 512
#endif
// 1: a float32 row that no cluster of OPGEN_ROW_CLUSTER_THREADS-thread blocks holds or runs
// tries clusters of four and eight 1024-thread blocks before the loop (add_rms_norm's backward
// at 1024 x 32768 holds one chunk a thread, so eight 512-thread blocks held half its row; it and
// softmax's backward measured faster so on an H100, and 16-bit softmax's backward slower: opgen's
// docs/benchmarks.md, round 36); 0: the loop.
#ifndef OPGEN_ROW_CLUSTER_FALLBACK
#define OPGEN_ROW_CLUSTER_FALLBACK 1
#endif
// 1: with column sums, a 16-bit row longer than 512 lanes' chunks takes a cluster of blocks of
// one chunk each where a cluster of up to OPGEN_ROW_MAX_CLUSTER blocks holds it, before a block
// of 1024 threads or a cluster of more chunks: fewer registers a thread (rms_norm's row of 32768
// columns in eight blocks of one chunk, not four of two, which held one block an SM). Measured
// faster on an H100 in rms_norm's 16-bit backwards at 1024 x 32768 and 2048 x 16384; float32
// rows do not take it (layer_norm's lost at 2048 x 16384; opgen's docs/benchmarks.md, round 28);
// 0: as before.
#ifndef OPGEN_ROW_CLUSTER_CHUNKS
#define OPGEN_ROW_CLUSTER_CHUNKS 1
#endif
// The kernel that adds the column sums' partials gives each column 32 slices of them (a block
// of 32 x 32 threads) where there are at least this many partials, 8 (32 x 8) otherwise: fewer
// loads one after another a thread for the many partials of short rows (faster on an H100 in
// the norms' backwards at 256 and 128 columns), and no idle threads for a cluster schedule's few
// (opgen's docs/benchmarks.md, round 28). 0: always 8.
#ifndef OPGEN_ROW_WIDE_SUM_PARTIALS
#define OPGEN_ROW_WIDE_SUM_PARTIALS 128
#endif
// The most blocks of a cluster that share a row too long for one block's registers (2, 4 or 8;
// 1: no clusters, such rows take the loop). Clusters need sm_90 and are used where the device
// and the kernel's build have them.
#ifndef OPGEN_ROW_MAX_CLUSTER
#define OPGEN_ROW_MAX_CLUSTER 8
#endif
// 1: a cluster's reduction sends each block's value into every block's shared memory
// (st.async, completing an mbarrier there) instead of meeting at a cluster barrier, which waits
// for every write in flight (three times a row in layer_norm's backward); 0: the barrier.
#ifndef OPGEN_ROW_CLUSTER_PUSH
#define OPGEN_ROW_CLUSTER_PUSH 1
#endif
// 1: a block's warps combine their values by shuffles (one shared-memory read per thread); 0:
// each thread reads every warp's value.
#ifndef OPGEN_ROW_BLOCK_SHUFFLE
#define OPGEN_ROW_BLOCK_SHUFFLE 1
#endif
// Elements per thread up to which a register schedule keeps row.keep's values of 16-bit rows in
// registers, one per element; above it, in float32 and float64 (bound by memory, not by the math
// a kept value saves), and on the loop schedule, they are recomputed where a lambda takes them.
// 0: always recomputed. Keeping saves 16-bit softmax forwards one exp an element and measured
// faster on the H200; in float32 it measured no faster (opgen's docs/benchmarks.md, round 14).
#ifndef OPGEN_ROW_KEPT_REGS
#define OPGEN_ROW_KEPT_REGS 32
#endif
// 1: a 16-bit input vector that is either loaded or zeros (an absent input, a lane past the row)
// is chosen as 32-bit words; 0: lane by lane, which costs a byte permute (PRMT) per 16-bit lane:
// hundreds in each 16-bit kernel of the row-wise examples. Words measured faster in most 16-bit
// cells, most in the long rows, and the same in float32 (opgen's docs/benchmarks.md, round 19).
#ifndef OPGEN_ROW_WORDS
#define OPGEN_ROW_WORDS 1
#endif
// 1: a bfloat16 lane of a vector is read out of its 32-bit word (LaneOf, opgen/cuda.cuh); 0:
// through CUDA's conversion, to measure the difference.
#ifndef OPGEN_ROW_BF16_LANES
#define OPGEN_ROW_BF16_LANES 1
#endif
// 1: where a register schedule with column sums stages its rows (OPGEN_ROW_PREFETCH), each
// thread loads its column inputs' vectors (layer_norm's weight) once, before its first row,
// rather than once a row. Measured faster on an H100 in the norms' backwards at 1024 x 32768
// (+0.02 to +0.05 of a copy, the most in layer_norm's 16-bit one, which then runs an eighth
// fewer instructions) and at 4096 x 4096. Forwards do not take it (held beside eight chunks a
// thread, the vectors spilled and add_rms_norm's float16 forward lost 0.09), nor 1024-thread
// blocks of several chunks (64 registers a thread: rms_norm's float16 backward at 16384 columns
// spilled; opgen's docs/benchmarks.md, round 35). 0: once a row.
#ifndef OPGEN_ROW_HOIST_COLUMNS
#define OPGEN_ROW_HOIST_COLUMNS 1
#endif
// Clusters need CUDA 11.8's runtime API (cudaLaunchKernelEx, cluster occupancy); with an older
// toolkit such rows take the loop.
#if defined(CUDART_VERSION) && CUDART_VERSION >= 11080
#define OPGEN_ROW_HAS_CLUSTERS 1
#else
#define OPGEN_ROW_HAS_CLUSTERS 0
#endif

constexpr int kRowThreads = OPGEN_ROW_THREADS;
constexpr bool kPrefetch = OPGEN_ROW_PREFETCH != 0;
constexpr bool kBFloat16Lanes = OPGEN_ROW_BF16_LANES != 0;
constexpr bool kPrefetchSums = OPGEN_ROW_PREFETCH_SUMS != 0;
constexpr int kMaxCluster = OPGEN_ROW_MAX_CLUSTER;
constexpr int kSumThreads = OPGEN_ROW_SUM_THREADS;
constexpr int kWideSumThreads =
    OPGEN_ROW_WIDE_SUM_THREADS > 0 ? OPGEN_ROW_WIDE_SUM_THREADS : OPGEN_ROW_SUM_THREADS;
constexpr int kClusterThreads = OPGEN_ROW_CLUSTER_THREADS;
constexpr bool kClusterChunks = OPGEN_ROW_CLUSTER_CHUNKS != 0;
constexpr bool kClusterFallback = OPGEN_ROW_CLUSTER_FALLBACK != 0;
constexpr int64_t kWideSumPartials = OPGEN_ROW_WIDE_SUM_PARTIALS;
constexpr bool kHalfBlocks = OPGEN_ROW_HALF_BLOCKS != 0;
constexpr bool kStageGroups = OPGEN_ROW_STAGE_GROUPS != 0;
constexpr bool kPrefetchRowValues = OPGEN_ROW_PREFETCH_ROW_VALUES != 0;
constexpr bool kHoistColumns = OPGEN_ROW_HOIST_COLUMNS != 0;
constexpr bool kLongLoop = OPGEN_ROW_LONG_LOOP != 0;
constexpr int kSumBlocks = OPGEN_ROW_SUM_BLOCKS;
constexpr int kKeptRegs = OPGEN_ROW_KEPT_REGS;
constexpr int kLaneVecs = OPGEN_ROW_LANE_VECS;
constexpr int kRegBytes = OPGEN_ROW_REG_BYTES;
constexpr int kBlockVecs = OPGEN_ROW_BLOCK_VECS;
constexpr int kLoopThreads = OPGEN_ROW_LOOP_THREADS;
constexpr int kWaves = OPGEN_ROW_WAVES;
constexpr bool kClusterPush = OPGEN_ROW_CLUSTER_PUSH != 0;
constexpr bool kBlockShuffle = OPGEN_ROW_BLOCK_SHUFFLE != 0;
constexpr bool kRowWords = OPGEN_ROW_WORDS != 0;
constexpr bool kDependentSums = OPGEN_ROW_PDL != 0;
constexpr int kMaxBlockThreads = 1024;
constexpr int64_t kMaxGrid = (int64_t{1} << 31) - 1;  // blocks stride over the rest
static_assert(kRowThreads % 32 == 0 && kRowThreads <= kMaxBlockThreads, "OPGEN_ROW_THREADS");
static_assert(kLoopThreads % 32 == 0 && kLoopThreads <= kMaxBlockThreads,
              "OPGEN_ROW_LOOP_THREADS");
static_assert(kMaxCluster == 1 || kMaxCluster == 2 || kMaxCluster == 4 || kMaxCluster == 8,
              "OPGEN_ROW_MAX_CLUSTER");
static_assert(kSumThreads == 0 || kSumThreads == 512 || kSumThreads == 1024,
              "OPGEN_ROW_SUM_THREADS");
static_assert(kWideSumThreads == 0 || kWideSumThreads == 512 || kWideSumThreads == 1024,
              "OPGEN_ROW_WIDE_SUM_THREADS");
static_assert(kClusterThreads == 512 || kClusterThreads == 1024, "OPGEN_ROW_CLUSTER_THREADS");

namespace detail {

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Whether vectors V are loaded and chosen as 32-bit words (OPGEN_ROW_WORDS, 16-bit values, an
// even count); other vectors keep the loads they had.
template <typename V>
constexpr bool kAsWords = kRowWords && sizeof(V{}.v[0]) == 2 && sizeof(V) % 4 == 0;

// `*p` when `load`, else zeros (p is not read), for vectors kAsWords picks.
template <typename V>
__device__ __forceinline__ V LoadOrZero(bool load, const V* p) {
  static_assert(kAsWords<V>, "LoadOrZero assembles 16-bit vectors as words");
  using W = Vec<uint32_t, sizeof(V) / 4>;
  W words{};
  if (load) words = *reinterpret_cast<const W*>(p);
  V v;
  __builtin_memcpy(&v, &words, sizeof v);
  return v;
}

template <int I, typename... Roles>
using RoleAt = std::tuple_element_t<I, std::tuple<Roles...>>;

template <typename... Roles>
constexpr int CountElem() {
  return (0 + ... + int(std::is_same_v<Roles, Elem>));
}

// The position of input I among the element inputs.
template <typename... Roles>
constexpr int ElemSlotOf(int i) {
  constexpr bool is_elem[] = {std::is_same_v<Roles, Elem>..., false};
  int slot = 0;
  for (int k = 0; k < i; ++k) slot += is_elem[k] ? 1 : 0;
  return slot;
}
template <int I, typename... Roles>
constexpr int kElemSlot = ElemSlotOf<Roles...>(I);

// 16 bytes from global to shared memory without a trip through registers (sm_80 on), and the
// wait for this thread's copies.
__device__ __forceinline__ void CopyAsync16(void* shared, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global)
               : "memory");
#else
  *static_cast<uint4*>(shared) = *static_cast<const uint4*>(global);
#endif
}
__device__ __forceinline__ void CopyAsyncCommit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void CopyAsyncWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

constexpr int PowerOfTwoAtLeast(int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}
constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Sum {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a + b;
  }
};
struct Max {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return opgen::max(a, b);
  }
};
struct Min {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return opgen::min(a, b);
  }
};

// The reductions below combine K values at once (a functor's row.sum of a lambda returning K
// values: one set of shuffles and one barrier for all K), lane by lane; K is 1 for most.

// Combines v over kLanes consecutive lanes (a power of two up to 32); every lane gets the result
// (for max and min, a zero result's sign may differ between lanes: see BlockReduce).
template <int kLanes, typename Op, typename A, int K>
__device__ __forceinline__ Array<A, K> WarpReduce(Array<A, K> v, Op op) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = op(v[k], __shfl_xor_sync(0xffffffffu, v[k], offset));
  }
  return v;
}

// Combines v over each group of kLanes consecutive threads of the block (a multiple of 32; the
// whole block when kLanes is its size); every thread gets its group's result, the same bits in
// each. `slots` is [2][32][kWidth] of shared memory whose halves are used alternately, so one
// barrier per reduction (every thread of the block takes part): a reduction of any K <= kWidth
// values never writes the half the one before it read. The warps' values meet by shuffles: each
// warp reads its group's kWarps values, kWarps lanes apart, and combines them as WarpReduce does.
template <int kLanes, int kWidth, typename Op, typename A, int K>
__device__ __forceinline__ Array<A, K> BlockReduce(Array<A, K> v, Op op, A* slots, int& phase) {
  static_assert(K <= kWidth, "more values than the functor's kReduceWidth");
  constexpr int kWarps = kLanes / 32;
  v = WarpReduce<32>(v, op);
  A* slot = slots + phase * 32 * kWidth;
  phase ^= 1;
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) slot[threadIdx.x / 32 * K + k] = v[k];
  }
  __syncthreads();
  const A* group = slot + threadIdx.x / kLanes * kWarps * K;
  Array<A, K> r;
  if constexpr (kBlockShuffle && (kWarps & (kWarps - 1)) == 0) {
    // Lanes l and l ^ offset combine the same two values in opposite orders, which max and min
    // may answer with different bits (max(+0, -0) is -0, max(-0, +0) is +0); every warp of the
    // group computes the same lanes, so lane 0's result is the same in all of them.
#pragma unroll
    for (int k = 0; k < K; ++k) r[k] = group[threadIdx.x % kWarps * K + k];
    r = WarpReduce<kWarps>(r, op);
#pragma unroll
    for (int k = 0; k < K; ++k) r[k] = __shfl_sync(0xffffffffu, r[k], 0);
  } else {  // OPGEN_ROW_BLOCK_SHUFFLE=0, or OPGEN_ROW_THREADS not a power of two
#pragma unroll
    for (int k = 0; k < K; ++k) r[k] = group[k];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
#pragma unroll
      for (int k = 0; k < K; ++k) r[k] = op(r[k], group[w * K + k]);
    }
  }
  return r;
}

template <typename A>
__device__ __forceinline__ A Identity(Sum) {
  return A(0);
}
template <typename A>
__device__ __forceinline__ A Identity(Max) {
  return -Infinity<A>();
}
template <typename A>
__device__ __forceinline__ A Identity(Min) {
  return Infinity<A>();
}
template <typename A, int K, typename Op>
__device__ __forceinline__ Array<A, K> Identities(Op op) {
  Array<A, K> v;
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = Identity<A>(op);
  return v;
}

// A schedule that holds the row in registers: kLanes threads per row (up to 32: a part of a warp;
// more: whole warps, up to the whole block; with kCluster > 1, the whole block of each of kCluster
// blocks, each holding a contiguous slice of the row), kChunks vectors of kVec elements per
// thread and per element input.
template <int kVec_, int kChunks_, int kLanes_, int kThreads_, int kCluster_ = 1>
struct RegisterConfig {
  static constexpr int kVec = kVec_;
  static constexpr int kChunks = kChunks_;
  static constexpr int kLanes = kLanes_;
  static constexpr int kThreads = kThreads_;
  static constexpr int kCluster = kCluster_;
  static constexpr int kGroups = kThreads / kLanes;  // rows a block (or cluster) runs at once
  static constexpr int64_t kCapacity = int64_t{kVec} * kChunks * kLanes;  // columns per block
  static_assert(kLanes <= 32 || (kLanes % 32 == 0 && kThreads % kLanes == 0),
                "a row is part of a warp or whole warps of the block");
  static_assert(kCluster == 1 || kLanes == kThreads, "a cluster shares one row per block");
};

// Whether a configuration stages the next row in shared memory (OPGEN_ROW_PREFETCH): blocks of
// 1024 threads and clusters, and with OPGEN_ROW_PREFETCH_SUMS any block per row with column sums
// (measured slower in float32 and no faster in 16-bit on the H200, so off).
template <class Cfg, class P>
constexpr bool kPrefetches =
    kPrefetch && Cfg::kLanes == Cfg::kThreads &&
    Cfg::kVec * sizeof(typename P::Storage) == 16 &&
    (Cfg::kThreads == kMaxBlockThreads || Cfg::kCluster > 1 ||
     (kPrefetchSums && P::kColumnSums > 0));

// The vectors of shared memory that one group of kLanes threads stages a row in.
template <class Cfg, class... Roles>
constexpr int kStagedVectors = CountElem<Roles...>() * Cfg::kChunks * Cfg::kLanes;

// Whether the rows that share a block of register schedule Cfg stage their next rows
// (OPGEN_ROW_STAGE_GROUPS): each group of kLanes threads its own slice of shared memory.
template <class Cfg, class P, class... Roles>
constexpr bool kStagesGroups =
    kStageGroups && Cfg::kGroups > 1 && Cfg::kCluster == 1 && Cfg::kLanes >= 512 &&
    P::kColumnSums > 0 && sizeof(typename P::Storage) == 2 &&
    Cfg::kVec * sizeof(typename P::Storage) == 16 && Cfg::kChunks * CountElem<Roles...>() <= 2;

// Minimum blocks per multiprocessor stated to ptxas (0: none): one for clusters of 512-thread
// blocks, so their threads may take up to 128 registers; other kernels keep ptxas's default
// (stating one for them too took more registers and slowed short 16-bit rows).
template <class Cfg>
constexpr int kMinBlocks = Cfg::kCluster > 1 && Cfg::kThreads == 512 ? 1 : 0;

// The shared memory of a kernel's reductions of up to kWidth values at once (the functor's
// kReduceWidth): two rounds of each warp's values (BlockReduce), and for a cluster's
// (ClusterReduce) two rounds of each block's values, with the mbarriers that count them in
// (OPGEN_ROW_CLUSTER_PUSH) or the block's own values (the barrier).
template <typename A, int kWidth>
struct ReduceShared {
  A warps[2 * 32 * kWidth];
  A blocks[2][kMaxCluster * kWidth];
  alignas(8) unsigned long long arrived[2];
};

// Sets up a cluster kernel's ReduceShared before its first ClusterReduce: with
// OPGEN_ROW_CLUSTER_PUSH, each block's mbarriers, which every block of the cluster must see
// initialized before it sends to them (hence the cluster barrier).
template <int kCluster, typename A, int kWidth>
__device__ __forceinline__ void ClusterReduceInit(ReduceShared<A, kWidth>* shared) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kClusterPush) {
    if (threadIdx.x == 0) {
      for (int b = 0; b < 2; ++b) {
        const unsigned bar = static_cast<unsigned>(__cvta_generic_to_shared(&shared->arrived[b]));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cooperative_groups::this_cluster().sync();
  }
#else
  (void)shared;
#endif
}

// Stores `value` at `address` of the shared memory of cluster block `rank`, counted in by that
// block's mbarrier at `bar` (both addresses in this block's shared window).
template <typename A>
__device__ __forceinline__ void SendToBlock(A value, unsigned address, unsigned bar,
                                            unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned remote_address, remote_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote_address)
               : "r"(address), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote_bar) : "r"(bar), "r"(rank));
  if constexpr (sizeof(A) == 8) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];\n"
                 ::"r"(remote_address), "l"(__double_as_longlong(value)), "r"(remote_bar)
                 : "memory");
  } else {
    static_assert(sizeof(A) == 4, "cluster reductions take float or double");
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n"
                 ::"r"(remote_address), "r"(__float_as_uint(value)), "r"(remote_bar)
                 : "memory");
  }
#else
  (void)value, (void)address, (void)bar, (void)rank;
#endif
}

// Combines the blocks' results v (the same in all of a block's threads) over a cluster of
// kCluster blocks, in rank order; every thread of the cluster gets the result. `round` counts
// the kernel's cluster reductions (the caller keeps it), so rounds alternate between two sets
// of slots.
//   Push (OPGEN_ROW_CLUSTER_PUSH): block r's first kCluster threads send v to slots r of every
//   block, and each block waits on its mbarrier for kCluster * K values. A block sends round
//   n + 2 (the same slots) only after it received round n + 1 from every block, which each block
//   sent after the barrier of its next BlockReduce, so after all its threads read round n.
//   Barrier: each block writes v to its slots and the cluster meets at a barrier; a block writes
//   a slot again only after every block passed the next barrier, so after it read the slot.
template <int kCluster, typename Op, typename A, int K, int kWidth>
__device__ __forceinline__ Array<A, K> ClusterReduce(Array<A, K> v, Op op,
                                                     ReduceShared<A, kWidth>* shared, int& round) {
  static_assert(K <= kWidth, "more values than the functor's kReduceWidth");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int set = round & 1;
  A* slots = shared->blocks[set];  // block r's values at r * K
  if constexpr (kClusterPush) {
    const unsigned parity = static_cast<unsigned>(round >> 1) & 1u;
    const unsigned bar = static_cast<unsigned>(__cvta_generic_to_shared(&shared->arrived[set]));
    const unsigned rank = blockIdx.x % kCluster;
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                   "r"(static_cast<unsigned>(kCluster * K * sizeof(A)))
                   : "memory");
    }
    if (threadIdx.x < kCluster) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        SendToBlock(v[k], static_cast<unsigned>(__cvta_generic_to_shared(&slots[rank * K + k])),
                    bar, threadIdx.x);
      }
    }
    // The wait acquires at CTA scope (try_wait's default), as TMA pipelines wait for data other
    // blocks' async copies complete on their mbarrier: the values are in this block's shared
    // memory once the phase completes. Acquiring at cluster scope passed the same checks but
    // made the long-row backwards much slower on the H200 (opgen's docs/benchmarks.md, round 14).
    unsigned done = 0;
    do {
      asm volatile(
          "{\n .reg .pred p;\n"
          " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          " selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    } while (!done);
    ++round;
    Array<A, K> r;
#pragma unroll
    for (int k = 0; k < K; ++k) r[k] = slots[k];
#pragma unroll
    for (int b = 1; b < kCluster; ++b) {
#pragma unroll
      for (int k = 0; k < K; ++k) r[k] = op(r[k], slots[b * K + k]);
    }
    return r;
  } else {
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    if (threadIdx.x == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) slots[k] = v[k];
    }
    cluster.sync();
    ++round;
    Array<A, K> r;
#pragma unroll
    for (int k = 0; k < K; ++k) r[k] = *cluster.map_shared_rank(&slots[k], 0);
#pragma unroll
    for (int rank = 1; rank < kCluster; ++rank) {
#pragma unroll
      for (int k = 0; k < K; ++k) r[k] = op(r[k], *cluster.map_shared_rank(&slots[k], rank));
    }
    return r;
  }
#elif defined(__CUDA_ARCH__)
  (void)op, (void)shared, (void)round;
  __trap();  // never launched: clusters run only where the kernel was built for sm_90 on
  return v;
#else
  (void)op, (void)shared, (void)round;
  return v;  // the host pass
#endif
}

// Waits for every block of the cluster (before a block exits, so none exits while another may
// still read or send to its shared memory).
__device__ __forceinline__ void ClusterSync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#endif
}

// A kernel's reductions: its shared memory and the counters that alternate between its sets.
template <typename A, int kWidth>
struct Reduction {
  ReduceShared<A, kWidth>* shared;
  int phase = 0;  // BlockReduce's set
  int round = 0;  // ClusterReduce's rounds
};

// The per-thread column sums of a functor: [kColSum][kChunks * kVec].
template <typename A, int kColSum, int kPerThread>
struct ColumnSums {
  A v[kColSum > 0 ? kColSum : 1][kPerThread];
};

// row.keep and the Row calls that take kept values, on the GPU: a kept value is recomputed where
// a lambda takes it (Recompute in rowwise.h), so each call is the same call with one lambda.
#define OPGEN_ROW_RECOMPUTES_KEPT                                                     \
  template <typename F, typename... K>                                               \
  __device__ __forceinline__ auto keep(const F& f, const K&... kept) {               \
    return Recompute(f, kept...);                                                    \
  }                                                                                  \
  template <typename F, typename K, typename... Ks>                                  \
  __device__ __forceinline__ auto sum(const F& f, const K& k, const Ks&... ks) {      \
    return sum(Recompute(f, k, ks...));                                              \
  }                                                                                  \
  template <typename F, typename K, typename... Ks>                                  \
  __device__ __forceinline__ auto mean(const F& f, const K& k, const Ks&... ks) {     \
    return mean(Recompute(f, k, ks...));                                             \
  }                                                                                  \
  template <typename F, typename K, typename... Ks>                                  \
  __device__ __forceinline__ auto max(const F& f, const K& k, const Ks&... ks) {      \
    return max(Recompute(f, k, ks...));                                              \
  }                                                                                  \
  template <typename F, typename K, typename... Ks>                                  \
  __device__ __forceinline__ auto min(const F& f, const K& k, const Ks&... ks) {      \
    return min(Recompute(f, k, ks...));                                              \
  }                                                                                  \
  template <typename F, typename K, typename... Ks>                                  \
  __device__ __forceinline__ void put(const F& f, const K& k, const Ks&... ks) {     \
    put(Recompute(f, k, ks...));                                                     \
  }                                                                                  \
  template <typename F, typename K, typename... Ks>                                  \
  __device__ __forceinline__ void put_column_sums(const F& f, const K& k,            \
                                                  const Ks&... ks) {                 \
    put_column_sums(Recompute(f, k, ks...));                                         \
  }

// One row held in registers; see rowwise.h for what the functor calls. Its reductions take up to
// kWidth values at once.
template <class Cfg, class P, int kWidth, class... Roles>
class RegisterRow {
 public:

  using T = typename P::Storage;
  using Acc = OpMathT<T>;
  static constexpr int kIn = P::kInputs;
  static constexpr int kVec = Cfg::kVec;
  static constexpr int kChunks = Cfg::kChunks;
  static constexpr int kLanes = Cfg::kLanes;
  static constexpr int kCluster = Cfg::kCluster;
  using V = Vec<T, kVec>;
  using Sums = ColumnSums<Acc, P::kColumnSums, kChunks * kVec>;

  // The per-row inputs of one row (the other roles' slots go unused).
  struct RowValues {
    Acc v[kIn];
  };
  // The column inputs' vectors of a thread's chunks: the same for every row it takes.
  struct Columns {
    V v[kIn][kChunks];
  };
  __device__ __forceinline__ static Columns LoadColumnsOf(const P& p, int lane) {
    Columns columns;
    LoadColumnsOfEach(p, lane, columns, std::make_index_sequence<kIn>{});
    return columns;
  }

  // `staged`: the row's element inputs already in shared memory (see Stage), or null;
  // `values`: its per-row inputs already loaded (see LoadRowValues), or null.
  __device__ __forceinline__ RegisterRow(const P& p, int64_t row, int lane, bool live,
                                         Reduction<Acc, kWidth>& reduction, Sums& sums,
                                         const V* staged = nullptr,
                                         const RowValues* values = nullptr,
                                         const Columns* columns = nullptr)
      : p_(p), row_(row), lane_(lane), live_(live), reduction_(reduction), sums_(sums) {
    Load(staged, std::make_index_sequence<kIn>{});
    hoisted_ = columns != nullptr;
    if (columns != nullptr) columns_ = *columns;
    if (values != nullptr) {
#pragma unroll
      for (int i = 0; i < kIn; ++i) row_value_[i] = values->v[i];
    } else {
      const RowValues loaded = LoadRowValues(p, row, live);
#pragma unroll
      for (int i = 0; i < kIn; ++i) row_value_[i] = loaded.v[i];
    }
  }

  // Row `row`'s per-row inputs (zeros for a dead row or an absent input).
  __device__ __forceinline__ static RowValues LoadRowValues(const P& p, int64_t row, bool live) {
    RowValues values;
    LoadRowValuesOf(p, row, live, values, std::make_index_sequence<kIn>{});
    return values;
  }

  // Starts copying row `row`'s element inputs to `staged` ([element input][chunk][lane]), each
  // thread its own vectors, so only the copying thread reads them back.
  __device__ __forceinline__ static void Stage(const P& p, int64_t row, int lane, V* staged) {
    StageInputs(p, row, lane, staged, std::make_index_sequence<kIn>{});
    CopyAsyncCommit();
  }

  __device__ __forceinline__ Acc size() const { return static_cast<Acc>(p_.cols); }

  // row.keep: for 16-bit rows whose thread's values fit in kKeptRegs registers, computed once into
  // registers (a Kept), which the lambdas after it read; otherwise recomputed where a lambda takes
  // it, as the other schedules do (a Kept costs a register per element the thread holds).
  static constexpr bool kKeepsInRegisters =
      sizeof(T) < sizeof(Acc) && kChunks * kVec <= kKeptRegs;
  struct Kept {
    Acc v[kChunks * kVec];
  };

  template <typename F, typename... K>
  __device__ __forceinline__ auto keep(const F& f, const K&... kept) {
    if constexpr (kKeepsInRegisters) {
      Kept k;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        V cols[kIn];
        if (Valid(c)) LoadColumns(c, cols, Indices{});
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          k.v[c * kVec + e] =
              Valid(c) ? static_cast<Acc>(Call(f, c, e, cols, Indices{}, kept...)) : Acc(0);
        }
      }
      return k;
    } else {
      return Recompute(f, kept...);
    }
  }

  template <typename F, typename... K>
  __device__ __forceinline__ auto sum(const F& f, const K&... kept) {
    return Reduce(f, Sum{}, kept...);
  }
  template <typename F, typename... K>
  __device__ __forceinline__ auto mean(const F& f, const K&... kept) {
    return Mean(Reduce(f, Sum{}, kept...), size());
  }
  template <typename F, typename... K>
  __device__ __forceinline__ auto max(const F& f, const K&... kept) {
    return Reduce(f, Max{}, kept...);
  }
  template <typename F, typename... K>
  __device__ __forceinline__ auto min(const F& f, const K&... kept) {
    return Reduce(f, Min{}, kept...);
  }

  template <typename F, typename... K>
  __device__ __forceinline__ void put(const F& f, const K&... kept) {
    using R = decltype(Call(f, 0, 0, nullptr, Indices{}, kept...));
    static_assert(ResultSize<R>::value == P::kOutputs,
                  "row.put: the lambda returns a different number of values than the op has "
                  "per-element outputs");
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (!Valid(c)) continue;
      V cols[kIn];
      LoadColumns(c, cols, Indices{});
      V out[P::kOutputs > 0 ? P::kOutputs : 1];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const R r = Call(f, c, e, cols, Indices{}, kept...);
#pragma unroll
        for (int k = 0; k < P::kOutputs; ++k) out[k].v[e] = static_cast<T>(Part<Acc>(r, k));
      }
#pragma unroll
      for (int k = 0; k < P::kOutputs; ++k) {
        *reinterpret_cast<V*>(p_.out[k] + row_ * p_.cols + Column(c)) = out[k];
      }
    }
  }

  template <typename... Values>
  __device__ __forceinline__ void put_rows(const Values&... values) {
    static_assert(sizeof...(Values) == P::kRowOutputs,
                  "row.put_rows: a different number of values than the op has per-row outputs");
    if (!live_ || lane_ != 0 || Rank() != 0) return;
    const Acc v[] = {static_cast<Acc>(values)...};
#pragma unroll
    for (int k = 0; k < P::kRowOutputs; ++k) p_.row_out[k][row_] = v[k];
  }

  template <typename F, typename... K>
  __device__ __forceinline__ void put_column_sums(const F& f, const K&... kept) {
    using R = decltype(Call(f, 0, 0, nullptr, Indices{}, kept...));
    static_assert(ResultSize<R>::value == P::kColumnSums,
                  "row.put_column_sums: the lambda returns a different number of values than "
                  "the op has column sums");
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (!Valid(c)) continue;
      V cols[kIn];
      LoadColumns(c, cols, Indices{});
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const R r = Call(f, c, e, cols, Indices{}, kept...);
#pragma unroll
        for (int k = 0; k < P::kColumnSums; ++k) sums_.v[k][c * kVec + e] += Part<Acc>(r, k);
      }
    }
  }

  // This block's rank in its cluster: the slice of the row it holds.
  __device__ __forceinline__ static int Rank() {
    if constexpr (kCluster > 1) {
      return static_cast<int>(blockIdx.x % kCluster);
    } else {
      return 0;
    }
  }
  // The first column of chunk c of `lane` (of this block's slice).
  __device__ __forceinline__ static int64_t ColumnOf(int c, int lane) {
    return ((int64_t{Rank()} * kChunks + c) * kLanes + lane) * kVec;
  }
  __device__ __forceinline__ int64_t Column(int c) const { return ColumnOf(c, lane_); }
  __device__ __forceinline__ bool Valid(int c) const { return live_ && Column(c) < p_.cols; }

 private:
  using Indices = std::make_index_sequence<kIn>;

  template <std::size_t... I>
  __device__ __forceinline__ static void StageInputs(const P& p, int64_t row, int lane, V* staged,
                                                     std::index_sequence<I...>) {
    (StageOne<int(I)>(p, row, lane, staged), ...);
  }
  template <int I>
  __device__ __forceinline__ static void StageOne(const P& p, int64_t row, int lane, V* staged) {
    if constexpr (std::is_same_v<RoleAt<I, Roles...>, Elem>) {
      if (p.in[I] == nullptr) return;
      const T* base = static_cast<const T*>(p.in[I]) + row * p.cols;
      V* mine = staged + kElemSlot<I, Roles...> * kChunks * kLanes + lane;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int64_t column = ColumnOf(c, lane);
        if (column < p.cols) CopyAsync16(mine + c * kLanes, base + column);
      }
    }
  }

  template <std::size_t... I>
  __device__ __forceinline__ void Load(const V* staged, std::index_sequence<I...>) {
    (LoadOne<int(I)>(staged), ...);
  }
  template <int I>
  __device__ __forceinline__ void LoadOne(const V* staged) {
    using Role = RoleAt<I, Roles...>;
    const void* ptr = p_.in[I];
    if constexpr (std::is_same_v<Role, Elem>) {
      const T* base = static_cast<const T*>(ptr) + row_ * p_.cols;
      const V* mine = staged + kElemSlot<I, Roles...> * kChunks * kLanes + lane_;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        if constexpr (kAsWords<V>) {
          const bool load = ptr != nullptr && Valid(c);
          if (staged != nullptr) {
            data_[I][c] = LoadOrZero(load, mine + c * kLanes);
          } else {
            data_[I][c] =
                LoadOrZero(load, reinterpret_cast<const V*>(base + (load ? Column(c) : 0)));
          }
        } else if (ptr == nullptr || !Valid(c)) {
          data_[I][c] = V{};
        } else if (staged != nullptr) {
          data_[I][c] = mine[c * kLanes];
        } else {
          data_[I][c] = *reinterpret_cast<const V*>(base + Column(c));
        }
      }
    } else {
      (void)staged;
    }
  }

  template <std::size_t... I>
  __device__ __forceinline__ static void LoadRowValuesOf(const P& p, int64_t row, bool live,
                                                         RowValues& values,
                                                         std::index_sequence<I...>) {
    ((values.v[I] = RowValueOf<int(I)>(p, row, live)), ...);
  }
  template <int I>
  __device__ __forceinline__ static Acc RowValueOf(const P& p, int64_t row, bool live) {
    using Role = RoleAt<I, Roles...>;
    if constexpr (std::is_same_v<Role, RowIn> || std::is_same_v<Role, RowStat>) {
      using S = typename Stored<Role, T>::type;
      const void* ptr = p.in[I];
      return (ptr != nullptr && live) ? static_cast<Acc>(static_cast<const S*>(ptr)[row]) : Acc(0);
    } else {
      return Acc(0);
    }
  }

  template <std::size_t... I>
  __device__ __forceinline__ static void LoadColumnsOfEach(const P& p, int lane, Columns& columns,
                                                           std::index_sequence<I...>) {
    (LoadColumnsOfOne<int(I)>(p, lane, columns), ...);
  }
  template <int I>
  __device__ __forceinline__ static void LoadColumnsOfOne(const P& p, int lane, Columns& columns) {
    if constexpr (std::is_same_v<RoleAt<I, Roles...>, Col>) {
      const T* ptr = static_cast<const T*>(p.in[I]);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int64_t column = ColumnOf(c, lane);
        const bool load = ptr != nullptr && column < p.cols;
        columns.v[I][c] = load ? *reinterpret_cast<const V*>(ptr + column) : V{};
      }
    }
  }

  template <std::size_t... I>
  __device__ __forceinline__ void LoadColumns(int c, V* cols, std::index_sequence<I...>) const {
    if (hoisted_) {
      ((std::is_same_v<RoleAt<int(I), Roles...>, Col> ? (void)(cols[I] = columns_.v[I][c])
                                                        : (void)0),
       ...);
      return;
    }
    if constexpr (kAsWords<V>) {
      ((std::is_same_v<RoleAt<int(I), Roles...>, Col> ? (void)(cols[I] = ColumnVector<int(I)>(c))
                                                        : (void)0),
       ...);
    } else {
      ((std::is_same_v<RoleAt<int(I), Roles...>, Col>
            ? (void)(cols[I] = p_.in[I] != nullptr
                                   ? *reinterpret_cast<const V*>(static_cast<const T*>(p_.in[I]) +
                                                                 Column(c))
                                   : V{})
            : (void)0),
       ...);
    }
  }
  // Column input I's vector of chunk c, as 32-bit words (LoadOrZero); a null input's pointer
  // stays null (offset 0): it is not read.
  template <int I>
  __device__ __forceinline__ V ColumnVector(int c) const {
    const T* ptr = static_cast<const T*>(p_.in[I]);
    return LoadOrZero(ptr != nullptr,
                      reinterpret_cast<const V*>(ptr + (ptr != nullptr ? Column(c) : 0)));
  }

  template <int I>
  __device__ __forceinline__ Acc Arg(int c, int e, const V* cols) const {
    using Role = RoleAt<I, Roles...>;
    if constexpr (std::is_same_v<Role, Elem>) {
      return opgen::cuda::LaneOf<Acc, kBFloat16Lanes>(data_[I][c], e);
    } else if constexpr (std::is_same_v<Role, Col>) {
      return opgen::cuda::LaneOf<Acc, kBFloat16Lanes>(cols[I], e);
    } else {
      return row_value_[I];
    }
  }

  // f of the inputs at element e of chunk c, then of the kept values there: a Kept's register,
  // or a recomputed value (Recompute's lambda of the inputs).
  template <typename F, std::size_t... I, typename... K>
  __device__ __forceinline__ auto Call(const F& f, int c, int e, const V* cols,
                                       std::index_sequence<I...>, const K&... kept) const {
    const auto of_inputs = [&](const auto&... in) {
      return f(in..., KeptAt(kept, c, e, in...)...);
    };
    return of_inputs(Arg<int(I)>(c, e, cols)...);
  }
  template <typename K, typename... In>
  __device__ __forceinline__ static auto KeptAt(const K& kept, int c, int e, const In&... in) {
    if constexpr (std::is_same_v<K, Kept>) {
      return kept.v[c * kVec + e];
    } else {
      return kept(in...);
    }
  }

  template <typename F, typename Op, typename... K>
  __device__ __forceinline__ auto Reduce(const F& f, Op op, const K&... kept) {
    using R = decltype(Call(f, 0, 0, nullptr, Indices{}, kept...));
    constexpr int kValues = ResultSize<R>::value;
    static_assert(kValues <= kWidth,
                  "a reduction of more values at once than the functor's kReduceWidth");
    Array<Acc, kValues> acc = Identities<Acc, kValues>(op);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (!Valid(c)) continue;
      V cols[kIn];
      LoadColumns(c, cols, Indices{});
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const R r = Call(f, c, e, cols, Indices{}, kept...);
#pragma unroll
        for (int k = 0; k < kValues; ++k) acc[k] = op(acc[k], Part<Acc>(r, k));
      }
    }
    if constexpr (kLanes <= 32) {
      acc = WarpReduce<kLanes>(acc, op);
    } else {
      acc = BlockReduce<kLanes, kWidth>(acc, op, reduction_.shared->warps, reduction_.phase);
      if constexpr (kCluster > 1) {
        acc = ClusterReduce<kCluster>(acc, op, reduction_.shared, reduction_.round);
      }
    }
    return ReductionResult<Acc, R>(acc);
  }

  const P& p_;
  int64_t row_;
  int lane_;
  bool live_;
  Reduction<Acc, kWidth>& reduction_;  // the kernel's, so consecutive rows alternate too
  Sums& sums_;
  V data_[kIn][kChunks];  // the element inputs' vectors (the other roles' slots go unused)
  Acc row_value_[kIn];    // the per-row inputs
  // The column inputs' vectors when hoisted. A copy, not a `const Columns*`: the pointer changed
  // ptxas's registers in the bfloat16 backwards and measured slower in layer_norm's (opgen's
  // docs/benchmarks.md, round 36).
  bool hoisted_ = false;
  Columns columns_;
};

// Rows of the block are groups of kLanes threads; the block (a cluster: its blocks together)
// strides over row groups. With column sums, each block's (cluster's) sums over its rows go to
// partials[unit][k][cols].
template <class Cfg, class F, class P, class... Roles>
__global__ void __launch_bounds__(Cfg::kThreads, kMinBlocks<Cfg>)
    RegisterKernel(F f, P p, typename P::Acc* partials) {
  using Acc = typename P::Acc;
  constexpr int kWidth = ReduceWidthOf<F>::value;
  using Row = RegisterRow<Cfg, P, kWidth, Roles...>;
  constexpr int kColSum = P::kColumnSums;
  constexpr int kPerThread = Cfg::kChunks * Cfg::kVec;
  if constexpr (kDependentSums && kColSum > 0) cuda::LetDependentsLaunch();  // SumPartialsKernel
  __shared__ ReduceShared<Acc, kWidth> reduce_shared;
  Reduction<Acc, kWidth> reduction{&reduce_shared};
  if constexpr (Cfg::kCluster > 1) ClusterReduceInit<Cfg::kCluster>(&reduce_shared);
  // A cluster works as one block would: `unit` counts clusters (blocks when kCluster is 1).
  const int64_t unit = blockIdx.x / Cfg::kCluster;
  const int64_t units = gridDim.x / Cfg::kCluster;
  typename Row::Sums sums;
#pragma unroll
  for (int k = 0; k < (kColSum > 0 ? kColSum : 1); ++k) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) sums.v[k][i] = Acc(0);
  }
  const int group = threadIdx.x / Cfg::kLanes;
  const int lane = threadIdx.x % Cfg::kLanes;
  if constexpr (kPrefetches<Cfg, P>) {
    // One row per block at a time; the next one's copy to shared memory runs while this one is
    // reduced and written.
    extern __shared__ __align__(16) unsigned char staged_bytes[];
    auto* staged = reinterpret_cast<typename Row::V*>(staged_bytes);
    typename Row::RowValues values;  // the staged row's per-row inputs
    // Not for 1024-thread blocks of several chunks: with 64 registers a thread they spilled.
    constexpr bool kHoist = kHoistColumns && kColSum > 0 &&
                            (Cfg::kThreads < kMaxBlockThreads || Cfg::kChunks == 1);
    typename Row::Columns columns;
    if constexpr (kHoist) columns = Row::LoadColumnsOf(p, lane);
    int64_t row = unit;
    if (row < p.rows) {
      Row::Stage(p, row, lane, staged);
      if constexpr (kPrefetchRowValues) values = Row::LoadRowValues(p, row, true);
    }
    for (; row < p.rows; row += units) {
      CopyAsyncWait();
      Row r(p, row, lane, true, reduction, sums, staged, kPrefetchRowValues ? &values : nullptr,
            kHoist ? &columns : nullptr);
      const int64_t next = row + units;
      if (next < p.rows) {
        Row::Stage(p, next, lane, staged);
        if constexpr (kPrefetchRowValues) values = Row::LoadRowValues(p, next, true);
      }
      f(r);
    }
  } else if constexpr (kStagesGroups<Cfg, P, Roles...>) {
    // Each group stages its next row while it reduces and writes this one; every group takes
    // every step (the reductions' barriers are the block's), a group past the end a dead row.
    extern __shared__ __align__(16) unsigned char staged_bytes[];
    auto* staged = reinterpret_cast<typename Row::V*>(staged_bytes) +
                   group * kStagedVectors<Cfg, Roles...>;
    const int64_t step = units * Cfg::kGroups;
    int64_t row = unit * Cfg::kGroups + group;
    typename Row::RowValues values;  // the staged row's per-row inputs (zeros past the end)
    if constexpr (kPrefetchRowValues) values = Row::LoadRowValues(p, row, row < p.rows);
    if (row < p.rows) Row::Stage(p, row, lane, staged);
    for (int64_t first = unit * Cfg::kGroups; first < p.rows; first += step, row += step) {
      CopyAsyncWait();
      Row r(p, row, lane, row < p.rows, reduction, sums, staged,
            kPrefetchRowValues ? &values : nullptr);
      const int64_t next = row + step;
      if (next < p.rows) Row::Stage(p, next, lane, staged);
      if constexpr (kPrefetchRowValues) values = Row::LoadRowValues(p, next, next < p.rows);
      f(r);
    }
    __syncthreads();  // the column sums below take the same shared memory
  } else {
    for (int64_t first = unit * Cfg::kGroups; first < p.rows; first += units * Cfg::kGroups) {
      const int64_t row = first + group;
      Row r(p, row, lane, row < p.rows, reduction, sums);
      f(r);
    }
  }
  if constexpr (kColSum > 0) {
    Acc* mine = partials + unit * kColSum * p.cols;
    if constexpr (Cfg::kGroups > 1) {
      // The groups' sums are added in group order in shared memory.
      extern __shared__ __align__(16) unsigned char shared_bytes[];
      Acc* shared = reinterpret_cast<Acc*>(shared_bytes);
      for (int g = 0; g < Cfg::kGroups; ++g) {
        if (group == g) {
#pragma unroll
          for (int c = 0; c < Cfg::kChunks; ++c) {
#pragma unroll
            for (int e = 0; e < Cfg::kVec; ++e) {
              const int at = (c * Cfg::kLanes + lane) * Cfg::kVec + e;
#pragma unroll
              for (int k = 0; k < kColSum; ++k) {
                Acc& s = shared[k * Cfg::kCapacity + at];
                s = g == 0 ? sums.v[k][c * Cfg::kVec + e] : s + sums.v[k][c * Cfg::kVec + e];
              }
            }
          }
        }
        __syncthreads();
      }
      for (int64_t i = threadIdx.x; i < int64_t{kColSum} * p.cols; i += Cfg::kThreads) {
        const int64_t k = i / p.cols;
        mine[i] = shared[k * Cfg::kCapacity + (i - k * p.cols)];
      }
    } else {
#pragma unroll
      for (int c = 0; c < Cfg::kChunks; ++c) {
#pragma unroll
        for (int e = 0; e < Cfg::kVec; ++e) {
          const int64_t j = Row::ColumnOf(c, lane) + e;
          if (j >= p.cols) continue;
#pragma unroll
          for (int k = 0; k < kColSum; ++k) mine[k * p.cols + j] = sums.v[k][c * Cfg::kVec + e];
        }
      }
    }
  }
  if constexpr (Cfg::kCluster > 1) ClusterSync();
}

// One row looped over global memory by a block; each reduction and each put re-reads the inputs.
// Column sums go straight to the block's slice of the workspace: its first row writes it, the
// next ones add to it (each thread keeps to its own columns, so no barrier).
template <int kVec, int kThreads, class P, int kWidth, class... Roles>
class LoopRow {
 public:

  using T = typename P::Storage;
  using Acc = OpMathT<T>;
  static constexpr int kIn = P::kInputs;
  using V = Vec<T, kVec>;
  static constexpr int kUnroll = 4;  // vectors a thread loads before it computes

  __device__ __forceinline__ LoopRow(const P& p, int64_t row, bool first,
                                     Reduction<Acc, kWidth>& reduction, Acc* sums)
      : p_(p), row_(row), first_(first), reduction_(reduction), sums_(sums) {
    LoadRowValues(std::make_index_sequence<kIn>{});
  }

  __device__ __forceinline__ Acc size() const { return static_cast<Acc>(p_.cols); }
  OPGEN_ROW_RECOMPUTES_KEPT
  template <typename F>
  __device__ __forceinline__ auto sum(const F& f) {
    return Reduce(f, Sum{});
  }
  template <typename F>
  __device__ __forceinline__ auto mean(const F& f) {
    return Mean(Reduce(f, Sum{}), size());
  }
  template <typename F>
  __device__ __forceinline__ auto max(const F& f) {
    return Reduce(f, Max{});
  }
  template <typename F>
  __device__ __forceinline__ auto min(const F& f) {
    return Reduce(f, Min{});
  }

  template <typename F>
  __device__ __forceinline__ void put(const F& f) {
    using R = decltype(Call(f, nullptr, 0, Indices{}));
    static_assert(ResultSize<R>::value == P::kOutputs,
                  "row.put: the lambda returns a different number of values than the op has "
                  "per-element outputs");
    ForVectors([&](int64_t v, const V* in) {
      V out[P::kOutputs > 0 ? P::kOutputs : 1];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const R r = Call(f, in, e, Indices{});
#pragma unroll
        for (int k = 0; k < P::kOutputs; ++k) out[k].v[e] = static_cast<T>(Part<Acc>(r, k));
      }
#pragma unroll
      for (int k = 0; k < P::kOutputs; ++k) {
        reinterpret_cast<V*>(p_.out[k] + row_ * p_.cols)[v] = out[k];
      }
    });
  }

  template <typename... Values>
  __device__ __forceinline__ void put_rows(const Values&... values) {
    static_assert(sizeof...(Values) == P::kRowOutputs,
                  "row.put_rows: a different number of values than the op has per-row outputs");
    if (threadIdx.x != 0) return;
    const Acc v[] = {static_cast<Acc>(values)...};
#pragma unroll
    for (int k = 0; k < P::kRowOutputs; ++k) p_.row_out[k][row_] = v[k];
  }

  template <typename F>
  __device__ __forceinline__ void put_column_sums(const F& f) {
    using R = decltype(Call(f, nullptr, 0, Indices{}));
    static_assert(ResultSize<R>::value == P::kColumnSums,
                  "row.put_column_sums: the lambda returns a different number of values than "
                  "the op has column sums");
    ForVectors([&](int64_t v, const V* in) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const R r = Call(f, in, e, Indices{});
#pragma unroll
        for (int k = 0; k < P::kColumnSums; ++k) {
          Acc& s = sums_[k * p_.cols + v * kVec + e];
          s = first_ ? Part<Acc>(r, k) : s + Part<Acc>(r, k);
        }
      }
    });
  }

 private:
  using Indices = std::make_index_sequence<kIn>;

  template <std::size_t... I>
  __device__ __forceinline__ void LoadRowValues(std::index_sequence<I...>) {
    ((row_value_[I] = LoadRowValue<int(I)>()), ...);
  }
  template <int I>
  __device__ __forceinline__ Acc LoadRowValue() const {
    using Role = RoleAt<I, Roles...>;
    if constexpr (std::is_same_v<Role, RowIn> || std::is_same_v<Role, RowStat>) {
      using S = typename Stored<Role, T>::type;
      return p_.in[I] != nullptr ? static_cast<Acc>(static_cast<const S*>(p_.in[I])[row_])
                                 : Acc(0);
    } else {
      return Acc(0);
    }
  }

  // Vector v of input I (element inputs: this row's; column inputs: the shared one).
  template <int I>
  __device__ __forceinline__ V LoadVector(int64_t v) const {
    using Role = RoleAt<I, Roles...>;
    const T* ptr = static_cast<const T*>(p_.in[I]);
    if constexpr (kAsWords<V> && (std::is_same_v<Role, Elem> || std::is_same_v<Role, Col>)) {
      // A null input's pointer stays null (offset 0): it is not read.
      const int64_t row_at = std::is_same_v<Role, Elem> ? row_ * p_.cols : 0;
      const int64_t at = ptr != nullptr ? row_at + v * kVec : 0;
      return LoadOrZero(ptr != nullptr, reinterpret_cast<const V*>(ptr + at));
    } else if constexpr (std::is_same_v<Role, Elem>) {
      return ptr != nullptr ? reinterpret_cast<const V*>(ptr + row_ * p_.cols)[v] : V{};
    } else if constexpr (std::is_same_v<Role, Col>) {
      return ptr != nullptr ? reinterpret_cast<const V*>(ptr)[v] : V{};
    } else {
      return V{};
    }
  }
  template <std::size_t... I>
  __device__ __forceinline__ void LoadVectors(int64_t v, V* in, std::index_sequence<I...>) const {
    ((in[I] = LoadVector<int(I)>(v)), ...);
  }

  // body(v, inputs' vectors v) for every vector of the row this thread takes, kUnroll loads
  // ahead of the math.
  template <typename Body>
  __device__ __forceinline__ void ForVectors(Body&& body) {
    const int64_t vectors = p_.cols / kVec;
    int64_t v = threadIdx.x;
    for (; v + (kUnroll - 1) * kThreads < vectors; v += kUnroll * kThreads) {
      V in[kUnroll][kIn];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) LoadVectors(v + u * kThreads, in[u], Indices{});
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) body(v + u * kThreads, in[u]);
    }
    for (; v < vectors; v += kThreads) {
      V in[kIn];
      LoadVectors(v, in, Indices{});
      body(v, in);
    }
  }

  template <int I>
  __device__ __forceinline__ Acc Arg(const V* in, int e) const {
    using Role = RoleAt<I, Roles...>;
    if constexpr (std::is_same_v<Role, Elem> || std::is_same_v<Role, Col>) {
      return opgen::cuda::LaneOf<Acc, kBFloat16Lanes>(in[I], e);
    } else {
      return row_value_[I];
    }
  }
  template <typename F, std::size_t... I>
  __device__ __forceinline__ auto Call(const F& f, const V* in, int e,
                                       std::index_sequence<I...>) const {
    return f(Arg<int(I)>(in, e)...);
  }

  template <typename F, typename Op>
  __device__ __forceinline__ auto Reduce(const F& f, Op op) {
    using R = decltype(Call(f, nullptr, 0, Indices{}));
    constexpr int kValues = ResultSize<R>::value;
    static_assert(kValues <= kWidth,
                  "a reduction of more values at once than the functor's kReduceWidth");
    Array<Acc, kValues> acc = Identities<Acc, kValues>(op);
    ForVectors([&](int64_t, const V* in) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const R r = Call(f, in, e, Indices{});
#pragma unroll
        for (int k = 0; k < kValues; ++k) acc[k] = op(acc[k], Part<Acc>(r, k));
      }
    });
    acc = BlockReduce<kThreads, kWidth>(acc, op, reduction_.shared->warps, reduction_.phase);
    return ReductionResult<Acc, R>(acc);
  }

  const P& p_;
  int64_t row_;
  bool first_;  // the block's first row
  Reduction<Acc, kWidth>& reduction_;
  Acc* sums_;
  Acc row_value_[kIn];
};

template <int kVec, int kThreads, class F, class P, class... Roles>
__global__ void __launch_bounds__(kThreads) LoopKernel(F f, P p, typename P::Acc* partials) {
  using Acc = typename P::Acc;
  constexpr int kWidth = ReduceWidthOf<F>::value;
  __shared__ ReduceShared<Acc, kWidth> reduce_shared;
  Reduction<Acc, kWidth> reduction{&reduce_shared};
  if constexpr (kDependentSums && P::kColumnSums > 0) cuda::LetDependentsLaunch();
  Acc* sums = P::kColumnSums > 0 ? partials + int64_t{blockIdx.x} * P::kColumnSums * p.cols
                                 : nullptr;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    LoopRow<kVec, kThreads, P, kWidth, Roles...> r(p, row, row == int64_t{blockIdx.x}, reduction,
                                                   sums);
    f(r);
  }
}

// col_sum[k][j] = the blocks' partials[b][k][j] added over b: a 32-column tile per block,
// kSlices slices of the partials per column (slice y: b = y, y + kSlices, ...), each summed in
// order with up to eight loads in flight, then the slices in order.
template <typename T, int kColSum, int kSlices>
__global__ void __launch_bounds__(32 * kSlices)
    SumPartialsKernel(const OpMathT<T>* partials, int64_t blocks, int64_t cols,
                      Array<T*, kColSum> col_sum) {
  using Acc = OpMathT<T>;
  static_assert(kSlices == 8 || kSlices == 32, "slices of 8 or 32");
  constexpr int kBatch = kSlices == 8 ? 8 : 4;
  __shared__ Acc slices[kSlices][32];
  const int64_t i = int64_t{blockIdx.x} * 32 + threadIdx.x;  // k * cols + j
  const int64_t width = int64_t{kColSum} * cols;
  if constexpr (kDependentSums) cuda::WaitForPrimaryGrid();  // the partials, once written
  Acc s = Acc(0);
  if (i < width) {
    int64_t b = threadIdx.y;
    for (; b + (kBatch - 1) * kSlices < blocks; b += kBatch * kSlices) {
      Acc batch[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) batch[u] = partials[(b + u * kSlices) * width + i];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) s += batch[u];
    }
    for (; b < blocks; b += kSlices) s += partials[b * width + i];
  }
  slices[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || i >= width) return;
  Acc total = slices[0][threadIdx.x];
#pragma unroll
  for (int y = 1; y < kSlices; ++y) total += slices[y][threadIdx.x];
  const int64_t k = i / cols;
  col_sum[int(k)][i - k * cols] = static_cast<T>(total);
}

// Adds the `count` blocks' partials into p.col_sum on `stream` (SumPartialsKernel, kSlices
// slices a column), as a programmatic dependent launch where OPGEN_ROW_PDL says so.
template <typename T, int kColSum, int kSlices, class P>
cudaError_t SumPartials(const P& p, const OpMathT<T>* partials, int64_t count,
                        cudaStream_t stream) {
  const dim3 tiles(static_cast<unsigned>(CeilDiv(int64_t{kColSum} * p.cols, 32)));
  const dim3 threads(32, kSlices);
  constexpr auto kSum = SumPartialsKernel<T, kColSum, kSlices>;
  if constexpr (kDependentSums) {
    int device = 0;
    cudaGetDevice(&device);
    cuda::LaunchDependent<kSum>(tiles, threads, device, stream, partials, count, p.cols,
                                p.col_sum);
  } else {
    kSum<<<tiles, threads, 0, stream>>>(partials, count, p.cols, p.col_sum);
  }
  return cudaGetLastError();
}

// The current device's (the op's device guard made it current).
inline int MultiprocessorCount() {
  int device = 0;
  cudaGetDevice(&device);
  return cuda::MultiprocessorCount(device);
}

// Blocks of `kernel` one multiprocessor of the current device holds at once (asked once per
// kernel and device).
template <auto kKernel>
int ResidentBlocks(int threads, std::size_t shared_bytes) {
  int device = 0;
  cudaGetDevice(&device);
  return cuda::ResidentBlocksPerSM<kKernel>(device, threads, shared_bytes);
}

// Lets `kKernel` have `bytes` of dynamic shared memory where that is more than the default 48 KiB.
template <auto kKernel>
void AllowSharedBytes(std::size_t bytes) {
  if (bytes > 48 * 1024) {
    cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bytes));
  }
}

#if OPGEN_ROW_HAS_CLUSTERS
// The config that launches a kernel in clusters of `cluster` blocks on `stream` (it points into
// itself: not copied).
struct ClusterLaunch {
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attribute[1] = {};
  ClusterLaunch(int64_t grid, int threads, std::size_t shared_bytes, int cluster,
                cudaStream_t stream) {
    config.gridDim = dim3(static_cast<unsigned>(grid));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = static_cast<unsigned>(cluster);
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};
#endif

// Clusters of kCluster blocks of `kKernel` (with `threads` and `shared_bytes` each) the current
// device holds at once: 0 where it launches no clusters (before sm_90, or a toolkit before CUDA
// 11.8) or where the kernel's code was not built for sm_90 on (a JIT of an older arch's PTX,
// whose cluster code is compiled out). Asked once per kernel and device.
template <auto kKernel, int kCluster>
int ResidentClusters(int threads, std::size_t shared_bytes) {
  int device = 0;
  cudaGetDevice(&device);
  using Question = std::pair<std::integral_constant<decltype(kKernel), kKernel>,
                             std::integral_constant<int, kCluster>>;
  return cuda::OncePerDevice<Question>(device, [device, threads, shared_bytes] {
    int count = 0;
#if OPGEN_ROW_HAS_CLUSTERS
    int launches = 0;
    cudaFuncAttributes attributes;
    if (cudaDeviceGetAttribute(&launches, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
        launches != 0 && cudaFuncGetAttributes(&attributes, kKernel) == cudaSuccess &&
        attributes.ptxVersion >= 90) {
      AllowSharedBytes<kKernel>(shared_bytes);  // as the launch will
      ClusterLaunch launch(kCluster, threads, shared_bytes, kCluster, nullptr);
      if (cudaOccupancyMaxActiveClusters(&count, kKernel, &launch.config) != cudaSuccess) {
        count = 0;
      }
    }
    cudaGetLastError();  // a failed query leaves no error behind for the next launch
#else
    (void)device;
    (void)threads;
    (void)shared_bytes;
#endif
    return count > 0 ? count : 0;
  });
}

inline bool AlignedTo(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// A launch's shape; with column sums, `partials` is the number of per-block (per-cluster)
// partial sums.
struct Launch {
  int64_t grid = 0;
  int threads = 0;
  std::size_t shared_bytes = 0;
  int64_t partials = 0;
};

// Whether every element and column input and every output can be read and written in vectors
// of kVec (per-row inputs are read one value at a time).
template <int kVec, class P, class... Roles>
bool VectorsFit(const P& p) {
  using T = typename P::Storage;
  if (p.cols % kVec != 0) return false;
  constexpr std::size_t kBytes = sizeof(T) * kVec;
  const bool vector_loaded[] = {(std::is_same_v<Roles, Elem> || std::is_same_v<Roles, Col>)...,
                                false};
  for (int k = 0; k < P::kInputs; ++k) {
    if (vector_loaded[k] && !AlignedTo(p.in[k], kBytes)) return false;
  }
  for (int k = 0; k < P::kOutputs; ++k) {
    if (!AlignedTo(p.out[k], kBytes)) return false;
  }
  return true;
}

// The schedules of one functor: which one a row length takes (With), its grid (Plan*) and its
// launch (Run*).
template <class F, class P, class... Roles>
struct Schedules {
  using T = typename P::Storage;
  using Acc = OpMathT<T>;
  static constexpr int kElem = CountElem<Roles...>() > 0 ? CountElem<Roles...>() : 1;
  static constexpr int kColSum = P::kColumnSums;

  // Vectors per lane the register budget allows, a power of two from 1 to 8: each holds kVec
  // elements of every element input and, with column sums, their kVec sums in Acc.
  template <int kVec>
  static constexpr int MaxChunks() {
    const int per_chunk = kVec * (kElem * int(sizeof(T)) + kColSum * int(sizeof(Acc)));
    int chunks = kRegBytes / per_chunk;
    int p = 1;
    while (p * 2 <= chunks && p < 8) p *= 2;
    return p;
  }

  // The dynamic shared memory of a block of register schedule Cfg: the staged next rows (one a
  // group), the groups' column sums, or the larger where the sums reuse the staged rows' space.
  template <class Cfg>
  static constexpr std::size_t SharedBytes() {
    const std::size_t staged =
        kPrefetches<Cfg, P> || kStagesGroups<Cfg, P, Roles...>
            ? std::size_t(CountElem<Roles...>()) * Cfg::kCapacity * Cfg::kGroups * sizeof(T)
            : 0;
    const std::size_t sums =
        kColSum > 0 && Cfg::kGroups > 1 ? std::size_t(kColSum) * Cfg::kCapacity * sizeof(Acc) : 0;
    return staged > sums ? staged : sums;
  }

  template <class Cfg>
  static Launch PlanRegister(const P& p) {
    constexpr auto kernel = RegisterKernel<Cfg, F, P, Roles...>;
    constexpr bool kStaged = kPrefetches<Cfg, P>;
    Launch l;
    l.threads = Cfg::kThreads;
    l.shared_bytes = SharedBytes<Cfg>();
    AllowSharedBytes<kernel>(l.shared_bytes);
    const int64_t groups = CeilDiv(p.rows, Cfg::kGroups);
    l.grid = groups;
    if constexpr (Cfg::kCluster > 1) {  // l.grid counts clusters until the end
      if (kStaged || kColSum > 0 || kWaves > 0) {
        // Runs<Cfg> chose this schedule only where the count is above 0.
        const int64_t resident =
            ResidentClusters<kernel, Cfg::kCluster>(l.threads, l.shared_bytes);
        const int64_t cap = kStaged || kColSum > 0 ? resident : resident * kWaves;
        if (cap < l.grid) l.grid = cap;
      }
      if (l.grid > kMaxGrid / Cfg::kCluster) l.grid = kMaxGrid / Cfg::kCluster;
      l.partials = l.grid;
      l.grid *= Cfg::kCluster;
      return l;
    }
    if (kStaged) {  // resident blocks only: each goes on to its next row
      const int64_t resident =
          int64_t{MultiprocessorCount()} * ResidentBlocks<kernel>(l.threads, l.shared_bytes);
      if (resident < l.grid) l.grid = resident;
    } else if (kColSum > 0 || kWaves > 0) {
      int per_sm = ResidentBlocks<kernel>(l.threads, l.shared_bytes);
      if (kColSum > 0 && kSumBlocks > 0 && kSumBlocks < per_sm) per_sm = kSumBlocks;
      const int64_t resident = int64_t{MultiprocessorCount()} * per_sm;
      const int64_t cap = kColSum > 0 ? resident : resident * (kWaves > 0 ? kWaves : 1);
      if (cap < l.grid) l.grid = cap;
    }
    if (l.grid > kMaxGrid) l.grid = kMaxGrid;
    l.partials = l.grid;
    return l;
  }
  template <class Cfg>
  static cudaError_t RunRegister(const F& f, const P& p, const Launch& l, Acc* partials,
                                 cudaStream_t stream) {
    constexpr auto kernel = RegisterKernel<Cfg, F, P, Roles...>;
    if constexpr (Cfg::kCluster > 1) {
#if OPGEN_ROW_HAS_CLUSTERS
      ClusterLaunch launch(l.grid, l.threads, l.shared_bytes, Cfg::kCluster, stream);
      const cudaError_t launched = cudaLaunchKernelEx(&launch.config, kernel, f, p, partials);
      const cudaError_t last = cudaGetLastError();  // and clears it, as after <<<>>>
      return launched != cudaSuccess ? launched : last;
#else
      return cudaErrorNotSupported;  // Runs<Cfg> never chooses it
#endif
    } else {
      kernel<<<static_cast<unsigned>(l.grid), l.threads, l.shared_bytes, stream>>>(f, p,
                                                                                  partials);
      return cudaGetLastError();
    }
  }
  // Whether the cluster schedule Cfg runs on the current device (see ResidentClusters).
  template <class Cfg>
  static bool Runs() {
    constexpr auto kernel = RegisterKernel<Cfg, F, P, Roles...>;
    return ResidentClusters<kernel, Cfg::kCluster>(Cfg::kThreads, SharedBytes<Cfg>()) > 0;
  }

  // The loop's threads: with column sums, 512 (its blocks are one per SM; measured faster).
  static constexpr int kLoop = kColSum > 0 ? (kLoopThreads < 512 ? kLoopThreads : 512)
                                           : kLoopThreads;

  template <int kVec>
  static Launch PlanLoop(const P& p) {
    constexpr auto kernel = LoopKernel<kVec, kLoop, F, P, Roles...>;
    Launch l;
    l.threads = kLoop;
    l.grid = p.rows;
    if (kColSum > 0 || kWaves > 0) {
      // With column sums, one block per multiprocessor: each block's partials are K long rows.
      const int64_t sms = MultiprocessorCount();
      const int64_t cap = kColSum > 0 ? sms : sms * ResidentBlocks<kernel>(l.threads, 0) * kWaves;
      if (cap < l.grid) l.grid = cap;
    }
    if (l.grid > kMaxGrid) l.grid = kMaxGrid;
    l.partials = l.grid;
    return l;
  }
  template <int kVec>
  static cudaError_t RunLoop(const F& f, const P& p, const Launch& l, Acc* partials,
                             cudaStream_t stream) {
    LoopKernel<kVec, kLoop, F, P, Roles...>
        <<<static_cast<unsigned>(l.grid), l.threads, 0, stream>>>(f, p, partials);
    return cudaGetLastError();
  }

  // Returns on_register(RegisterConfig) for the register schedule that holds a row of p.cols
  // (the fewest lanes that do), or on_loop(vector width) when none does.
  template <int kVec, class OnRegister, class OnLoop>
  static auto WithWidth(const P& p, OnRegister&& on_register, OnLoop&& on_loop) {
    constexpr int kMaxChunks = MaxChunks<kVec>();
    const int64_t vectors = p.cols / kVec;
    // Short rows: a part of a warp, kLaneVecs vectors per lane.
    constexpr int kShort = kLaneVecs < kMaxChunks ? kLaneVecs : kMaxChunks;
    const int64_t lanes_wanted = CeilDiv(vectors > 0 ? vectors : 1, kShort);
    if (lanes_wanted <= 16) {
      switch (PowerOfTwoAtLeast(lanes_wanted)) {
        case 1: return on_register(RegisterConfig<kVec, kShort, 1, kRowThreads>{});
        case 2: return on_register(RegisterConfig<kVec, kShort, 2, kRowThreads>{});
        case 4: return on_register(RegisterConfig<kVec, kShort, 4, kRowThreads>{});
        case 8: return on_register(RegisterConfig<kVec, kShort, 8, kRowThreads>{});
        default: return on_register(RegisterConfig<kVec, kShort, 16, kRowThreads>{});
      }
    }
    // Medium rows: a warp per row.
    if (vectors <= 32 * kMaxChunks) {
      switch (PowerOfTwoAtLeast(CeilDiv(vectors, 32))) {
        case 1: return on_register(RegisterConfig<kVec, 1, 32, kRowThreads>{});
        case 2: return on_register(RegisterConfig<kVec, (kMaxChunks < 2 ? kMaxChunks : 2), 32,
                                                  kRowThreads>{});
        case 4: return on_register(RegisterConfig<kVec, (kMaxChunks < 4 ? kMaxChunks : 4), 32,
                                                  kRowThreads>{});
        default: return on_register(RegisterConfig<kVec, kMaxChunks, 32, kRowThreads>{});
      }
    }
    // Long rows: a block per row, kBlockVecs vectors per thread (up to kMaxChunks with 1024
    // threads); with column sums and OPGEN_ROW_SUM_THREADS, rows share blocks of that size
    // (rows of 512 lanes, of OPGEN_ROW_WIDE_SUM_THREADS). The scalar path goes to the loop
    // instead (odd lengths this long are rare).
    if constexpr (kVec > 1) {
      constexpr int kChunks = kBlockVecs < kMaxChunks ? kBlockVecs : kMaxChunks;
      constexpr bool kShare = kColSum > 0 && kSumThreads > 0;
      if (vectors <= int64_t{128} * kChunks) {
        // 128 lanes with the fewest chunks that hold the row: a chunk no lane uses would still
        // take registers (in 16-bit with column sums, 79 a thread where 46 serve, and one block
        // per SM instead of two).
        constexpr int kT = kShare ? kSumThreads : 128;
        if (vectors <= 128) return on_register(RegisterConfig<kVec, 1, 128, kT>{});
        if constexpr (kChunks > 2) {
          if (vectors <= 256) return on_register(RegisterConfig<kVec, 2, 128, kT>{});
        }
        if constexpr (kChunks > 4) {
          if (vectors <= 512) return on_register(RegisterConfig<kVec, 4, 128, kT>{});
        }
        return on_register(RegisterConfig<kVec, kChunks, 128, kT>{});
      }
      if (vectors <= int64_t{256} * kChunks) {
        return on_register(RegisterConfig<kVec, kChunks, 256, kShare ? kSumThreads : 256>{});
      }
      if (vectors <= int64_t{512} * kChunks) {
        constexpr int kT = kShare ? kWideSumThreads : 512;
        return on_register(RegisterConfig<kVec, kChunks, 512, kT>{});
      }
      // A row that 512 threads hold with every chunk of their budget (OPGEN_ROW_HALF_BLOCKS):
      // with the default budget, rows of one per-element input.
      if constexpr (kHalfBlocks && kColSum == 0 && kMaxChunks > kChunks) {
        if (vectors <= int64_t{512} * kMaxChunks) {
          return on_register(RegisterConfig<kVec, kMaxChunks, 512, 512>{});
        }
      }
      // 16-bit rows with column sums: clusters of one chunk a thread (OPGEN_ROW_CLUSTER_CHUNKS).
      if constexpr (kClusterChunks && kColSum > 0 && sizeof(T) == 2 && kChunks > 1 &&
                    kMaxCluster >= 4) {
        constexpr int kT = kClusterThreads;
        using Quad1 = RegisterConfig<kVec, 1, kT, kT, 4>;
        using Octet1 = RegisterConfig<kVec, 1, kT, kT, 8>;
        if (vectors <= int64_t{4 * kT} && Runs<Quad1>()) return on_register(Quad1{});
        if constexpr (kMaxCluster >= 8) {
          if (vectors <= int64_t{8 * kT} && Runs<Octet1>()) return on_register(Octet1{});
        }
      }
      if (vectors <= int64_t{1024} * kChunks) {
        return on_register(RegisterConfig<kVec, kChunks, 1024, 1024>{});
      }
      if constexpr (kLongLoop && kColSum == 0 && CountElem<Roles...>() == 1 &&
                    std::is_same_v<T, float>) {
        if (vectors <= int64_t{1024} * kMaxChunks) {
          return on_loop(std::integral_constant<int, kVec>{});
        }
      }
      if (vectors <= int64_t{1024} * kMaxChunks) {
        return on_register(RegisterConfig<kVec, kMaxChunks, 1024, 1024>{});
      }
      // Longer rows: the smallest cluster of 2, 4 or 8 blocks that holds the row with kBlockVecs
      // vectors per thread, where clusters run (where kBlockVecs is half of kMaxChunks, a pair
      // holds what one block above does, so such rows start at four blocks).
      constexpr int kT = kClusterThreads;
      using Pair = RegisterConfig<kVec, kChunks, kT, kT, 2>;
      using Quad = RegisterConfig<kVec, kChunks, kT, kT, 4>;
      using Octet = RegisterConfig<kVec, kChunks, kT, kT, 8>;
      if constexpr (kMaxCluster >= 2) {
        if (vectors <= int64_t{2 * kT} * kChunks && Runs<Pair>()) return on_register(Pair{});
      }
      if constexpr (kMaxCluster >= 4) {
        if (vectors <= int64_t{4 * kT} * kChunks && Runs<Quad>()) return on_register(Quad{});
      }
      if constexpr (kMaxCluster >= 8) {
        if (vectors <= int64_t{8 * kT} * kChunks && Runs<Octet>()) return on_register(Octet{});
      }
      // Then float32 rows: clusters of 1024-thread blocks (OPGEN_ROW_CLUSTER_FALLBACK).
      if constexpr (kClusterFallback && std::is_same_v<T, float> && kT < kMaxBlockThreads &&
                    kMaxCluster >= 4) {
        constexpr int kW = kMaxBlockThreads;
        using WideQuad = RegisterConfig<kVec, kChunks, kW, kW, 4>;
        using WideOctet = RegisterConfig<kVec, kChunks, kW, kW, 8>;
        if (vectors <= int64_t{4 * kW} * kChunks && Runs<WideQuad>()) {
          return on_register(WideQuad{});
        }
        if constexpr (kMaxCluster >= 8) {
          if (vectors <= int64_t{8 * kW} * kChunks && Runs<WideOctet>()) {
            return on_register(WideOctet{});
          }
        }
      }
    }
    return on_loop(std::integral_constant<int, kVec>{});
  }

  template <class OnRegister, class OnLoop>
  static auto With(const P& p, OnRegister&& on_register, OnLoop&& on_loop) {
    constexpr int kWide = 16 / int(sizeof(T));
    static_assert(kWide > 1, "vectors of 16 bytes hold at least two elements");
    if (VectorsFit<kWide, P, Roles...>(p)) return WithWidth<kWide>(p, on_register, on_loop);
    return WithWidth<1>(p, on_register, on_loop);
  }

  static Launch Plan(const P& p) {
    return With(
        p, [&](auto cfg) { return PlanRegister<decltype(cfg)>(p); },
        [&](auto vec) { return PlanLoop<decltype(vec)::value>(p); });
  }
};

}  // namespace detail

// Bytes of workspace Run needs for `p` on the current device: the column sums' per-block
// (per-cluster) partials (0 for a functor without column sums). Depends on rows, cols and the
// pointers' alignment.
template <class F, class... Roles, typename T, int kIn, int kOut, int kRowOut, int kColSum>
std::size_t WorkspaceBytes(const Pointers<T, kIn, kOut, kRowOut, kColSum>& p) {
  using P = Pointers<T, kIn, kOut, kRowOut, kColSum>;
  if constexpr (kColSum == 0) {
    (void)p;
    return 0;
  } else {
    if (p.rows == 0 || p.cols == 0) return 0;
    const detail::Launch l = detail::Schedules<F, P, Roles...>::Plan(p);
    return std::size_t(l.partials) * kColSum * std::size_t(p.cols) * sizeof(OpMathT<T>);
  }
}

// Runs `f` over every row of `p` on the current device and `stream`; `workspace` holds
// WorkspaceBytes(p) bytes (null when that is 0). Returns the first launch error, or cudaSuccess.
template <class F, class... Roles, typename T, int kIn, int kOut, int kRowOut, int kColSum>
cudaError_t Run(const F& f, const Pointers<T, kIn, kOut, kRowOut, kColSum>& p, void* workspace,
                cudaStream_t stream) {
  static_assert(sizeof...(Roles) == kIn, "Run: one role tag per input");
  static_assert(detail::KnownRoles<Roles...>(), "Run: roles are Elem, Col, RowIn, RowStat");
  using P = Pointers<T, kIn, kOut, kRowOut, kColSum>;
  using S = detail::Schedules<F, P, Roles...>;
  using AccT = OpMathT<T>;
  if (p.rows == 0) {
    // No rows: the column sums are zeros (all-zero bits in every float type).
    for (int k = 0; k < kColSum; ++k) {
      if (p.cols == 0) break;
      const cudaError_t e = cudaMemsetAsync(p.col_sum[k], 0, std::size_t(p.cols) * sizeof(T),
                                            stream);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
  auto* partials = static_cast<AccT*>(workspace);
  detail::Launch launch;
  const cudaError_t status = S::With(
      p,
      [&](auto cfg) {
        launch = S::template PlanRegister<decltype(cfg)>(p);
        return S::template RunRegister<decltype(cfg)>(f, p, launch, partials, stream);
      },
      [&](auto vec) {
        launch = S::template PlanLoop<decltype(vec)::value>(p);
        return S::template RunLoop<decltype(vec)::value>(f, p, launch, partials, stream);
      });
  if (status != cudaSuccess) return status;
  if constexpr (kColSum > 0) {
    if (p.cols > 0) {
      const bool wide = kWideSumPartials > 0 && launch.partials >= kWideSumPartials;
      return wide ? detail::SumPartials<T, kColSum, 32>(p, partials, launch.partials, stream)
                  : detail::SumPartials<T, kColSum, 8>(p, partials, launch.partials, stream);
    }
  }
  return cudaSuccess;
}

}  // namespace rowwise
}  // namespace opgen

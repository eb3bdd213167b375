// embedding's CUDA kernels, with no Paddle in them: csrc/embedding_cuda.cuh calls them on
// Paddle's tensors, scripts/gpu/embedding_bench.cu checks and times them on their own.
//   forward   out[i, :] = table[ids[i], :]: a gather of whole rows in 16-byte vectors (the widest
//             that the row size and both pointers allow); padding rows and out-of-range ids read
//             as zeros, never read outside the table; with an IdCheck, the gather's first blocks
//             check every id before they copy and send the host a verdict to raise on.
//   backward  grad_table[v, :] = sum of grad_out[i, :] over i with ids[i] == v, two ways:
//             atomics (float32 and float64; fast, the order of the additions varies), or sorted:
//             ids radix-sorted with their positions, then one warp per piece of a run of equal
//             ids (at most EMBEDDING_PIECE_ROWS rows) sums its rows in a fixed order; a run
//             longer than that (a frequent token, a vocabulary of two) is summed in pieces whose
//             partial sums one block then adds in order (any dtype; bit-for-bit repeatable).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "opgen/cuda.cuh"

// Tuning knobs (-D, or OPGEN_NVCC_FLAGS at build time). The gather's were timed on an H200; the
// sorted backward's on an H100 (opgen's docs/benchmarks.md, round 33): pieces of 16 rows with one
// row in flight took 0.44-0.51 of the time of pieces of 64 with two for Zipf-distributed ids and
// two ids in float32, 0.76-0.88 in bfloat16, 0.94-0.97 for uniform ids, in two runs; 3 or 4 rows
// in flight were slower in every 16-bit case, pieces of 32 slower than 16.
#ifndef EMBEDDING_THREADS
#define EMBEDDING_THREADS 256
#endif
#ifndef EMBEDDING_UNROLL
#define EMBEDDING_UNROLL 2  // rows each thread has in flight in the gather
#endif
#ifndef EMBEDDING_STREAMING_STORES
#define EMBEDDING_STREAMING_STORES 1  // out is written once and not read back soon
#endif
#ifndef EMBEDDING_PIECE_ROWS
#define EMBEDDING_PIECE_ROWS 16  // the most rows of grad_out one warp sums in the sorted backward
#endif
#ifndef EMBEDDING_SUM_ROWS
#define EMBEDDING_SUM_ROWS 1  // rows of grad_out a lane has in flight in the sorted backward
#endif

namespace embedding {
namespace cuda {

constexpr int kThreads = EMBEDDING_THREADS;
constexpr int kUnroll = EMBEDDING_UNROLL;
constexpr int64_t kPieceRows = EMBEDDING_PIECE_ROWS;
constexpr int kSumRows = EMBEDDING_SUM_ROWS;
static_assert(kPieceRows >= 1 && kSumRows >= 1, "EMBEDDING_PIECE_ROWS and _SUM_ROWS count rows");

// Where the kernels record an out-of-range id: {position + 1, id} of the first thread to record
// one (with several, which one is not fixed; the CPU names the lowest position); {0, 0} if none.
struct BadId {
  unsigned long long position_plus_one;
  long long id;
};

template <typename V>
__device__ __forceinline__ void Store(V* p, const V& v) {
#if EMBEDDING_STREAMING_STORES
  if constexpr (sizeof(V) == 16) {
    __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(&v));
    return;
  }
#endif
  *p = v;
}

template <typename Id>
__device__ __forceinline__ void Record(BadId* bad, int64_t position, Id id) {
  if (atomicCAS(&bad->position_plus_one, 0ull,
                static_cast<unsigned long long>(position) + 1ull) == 0ull) {
    bad->id = static_cast<long long>(id);
  }
}

// ---- the out-of-range check -------------------------------------------------------------------
// An out-of-range id must be an error the caller can raise, so the host has to wait for something
// that has looked at the ids; what it waits for decides the cost. Not the gather: the GPU would
// idle while the host prepares the next call. Not a kernel of its own on a side stream, read back
// by an event (the design before this one): its launch, the read-back copy and the event's wake-up
// sat on the path from one call to the next, and a 16-bit gather of 64K rows (68 us on an H200) is
// shorter than that path through Paddle. Instead the gather's first `blocks` blocks (one per SM,
// so all in its first wave) check every id before they copy, the last of them to finish writes
// the verdict into pinned host memory, and the caller spins on that memory: it hears back a few
// microseconds after the gather starts, and the next call's gather is queued before this one ends.

// What the checking blocks share on the device; zero between checks (the last block resets it).
struct CheckState {
  BadId bad;
  unsigned blocks_done;
};

// What the last checking block writes to the host: the first out-of-range id found ({0, 0}: none),
// then, last, the number of the check it answers.
struct Verdict {
  BadId bad;
  unsigned long long check;
};

// The kernel's part of a check; `state` null means no check.
struct CheckArgs {
  CheckState* state = nullptr;
  Verdict* verdict = nullptr;  // the device's address of the host's Verdict
  unsigned long long check = 0;
  unsigned blocks = 0;  // the blocks that check: the first `blocks` of the grid
};

template <typename Id>
__device__ void CheckIds(const Id* __restrict__ ids, int64_t n, int64_t rows,
                         const CheckArgs& check) {
  const int64_t per_block = (n + check.blocks - 1) / check.blocks;
  const int64_t begin = per_block * blockIdx.x;
  const int64_t end = begin + per_block < n ? begin + per_block : n;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const Id id = ids[i];
    if (id < 0 || static_cast<int64_t>(id) >= rows) Record(&check.state->bad, i, id);
  }
  __threadfence();  // this block's records reach the device before it counts itself done
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (atomicAdd(&check.state->blocks_done, 1u) != check.blocks - 1) return;
  // The last block: every record is in. Send the verdict, then reset the state for the next check
  // before the host can start one.
  __threadfence();
  volatile BadId* bad = &check.state->bad;
  volatile Verdict* verdict = check.verdict;
  verdict->bad.position_plus_one = bad->position_plus_one;
  verdict->bad.id = bad->id;
  bad->position_plus_one = 0;
  bad->id = 0;
  check.state->blocks_done = 0;
  __threadfence_system();
  verdict->check = check.check;
}

// The threads of a block form `kThreads / lanes` rows of `lanes` threads; each row of threads
// copies kUnroll rows of the table per pass, vector by vector, loading all before storing.
template <typename V, typename Id>
__global__ void __launch_bounds__(kThreads)
    GatherKernel(const Id* __restrict__ ids, int64_t n, const V* __restrict__ table, int64_t rows,
                 int64_t vectors_per_row, int64_t padding_idx, int lanes, V* __restrict__ out,
                 CheckArgs check) {
  if (check.state != nullptr && blockIdx.x < check.blocks) CheckIds(ids, n, rows, check);
  const int lane = threadIdx.x % lanes;
  const int row_of_block = threadIdx.x / lanes;
  const int64_t rows_per_pass = int64_t{kThreads / lanes} * kUnroll;
  for (int64_t first = int64_t{blockIdx.x} * rows_per_pass; first < n;
       first += int64_t{gridDim.x} * rows_per_pass) {
    int64_t source[kUnroll];  // the table row to read; -1 reads zeros, -2 is past the end
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = first + int64_t{u} * (kThreads / lanes) + row_of_block;
      source[u] = -2;
      if (i < n) {
        const Id id = ids[i];
        const bool in_range = id >= 0 && static_cast<int64_t>(id) < rows;
        source[u] = in_range && static_cast<int64_t>(id) != padding_idx ? int64_t{id} : -1;
      }
    }
    for (int64_t c = lane; c < vectors_per_row; c += lanes) {
      V v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        v[u] = source[u] >= 0 ? __ldg(table + source[u] * vectors_per_row + c) : V{};
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + int64_t{u} * (kThreads / lanes) + row_of_block;
        if (source[u] != -2) Store(out + i * vectors_per_row + c, v[u]);
      }
    }
  }
}

template <typename V, typename Id>
void LaunchGatherAs(const Id* ids, int64_t n, const void* table, int64_t rows, int64_t row_bytes,
                    int64_t padding_idx, void* out, CheckArgs check, int device,
                    cudaStream_t stream) {
  const int64_t vectors = row_bytes / static_cast<int64_t>(sizeof(V));
  int lanes = 1;
  while (lanes < vectors && lanes < kThreads) lanes *= 2;
  const int64_t rows_per_block = int64_t{kThreads / lanes} * kUnroll;
  const unsigned grid = opgen::cuda::GridFor(n, kThreads, device, rows_per_block);
  if (check.state != nullptr) {
    const unsigned sms = static_cast<unsigned>(opgen::cuda::MultiprocessorCount(device));
    check.blocks = grid < sms ? grid : sms;
  }
  GatherKernel<V, Id><<<grid, kThreads, 0, stream>>>(
      ids, n, static_cast<const V*>(table), rows, vectors, padding_idx, lanes,
      static_cast<V*>(out), check);
}

// out[i, :] = table[ids[i], :] for i < n, rows of row_bytes bytes; padding_idx (-1: none) and
// out-of-range ids give zero rows. With check.state set (IdCheck::Next), the kernel also checks
// the ids, even when rows are empty, and answers on the host (IdCheck::Wait). Returns the launch's
// error; nothing is launched when n is 0, or row_bytes is 0 and nothing is checked.
template <typename Id>
cudaError_t Gather(const Id* ids, int64_t n, const void* table, int64_t rows, int64_t row_bytes,
                   int64_t padding_idx, void* out, CheckArgs check, int device,
                   cudaStream_t stream) {
  if (n == 0 || (row_bytes == 0 && check.state == nullptr)) return cudaSuccess;
  opgen::cuda::DeviceGuard guard(device);
  const auto address = reinterpret_cast<std::uintptr_t>(table) |
                       reinterpret_cast<std::uintptr_t>(out) |
                       static_cast<std::uintptr_t>(row_bytes);
  if (address % 16 == 0) {
    LaunchGatherAs<uint4>(ids, n, table, rows, row_bytes, padding_idx, out, check, device, stream);
  } else if (address % 8 == 0) {
    LaunchGatherAs<uint2>(ids, n, table, rows, row_bytes, padding_idx, out, check, device, stream);
  } else if (address % 4 == 0) {
    LaunchGatherAs<unsigned>(ids, n, table, rows, row_bytes, padding_idx, out, check, device,
                             stream);
  } else {
    LaunchGatherAs<unsigned short>(ids, n, table, rows, row_bytes, padding_idx, out, check,
                                   device, stream);
  }
  return cudaGetLastError();
}

// One per host thread and device: the device state and the host's pinned verdict, made on first
// use and kept for the thread's life (freeing CUDA objects at exit can outlive the driver). A call
// takes Next() for its gather and waits for it before the next call takes another, so one check
// per IdCheck is in flight at a time.
class IdCheck {
 public:
  // The check of the calling thread on `device` (current), or null with *error set.
  static IdCheck* For(int device, cudaError_t* error) {
    constexpr int kMaxDevices = 64;
    thread_local IdCheck* checks[kMaxDevices] = {};
    *error = cudaSuccess;
    if (device < 0 || device >= kMaxDevices) {
      *error = cudaErrorInvalidDevice;
      return nullptr;
    }
    if (checks[device] == nullptr) {
      auto* check = new IdCheck();
      *error = check->Init();
      if (*error != cudaSuccess) {
        check->Release();
        delete check;
        return nullptr;
      }
      checks[device] = check;
    }
    return checks[device];
  }

  // The arguments of the next gather's check.
  CheckArgs Next() {
    CheckArgs args;
    args.state = state_;
    args.verdict = device_verdict_;
    args.check = ++checks_;
    return args;
  }

  // Waits until the gather launched on `stream` with `args` has sent its verdict and stores it
  // ({0, 0}: every id in range). Spins on the host's memory, asking the stream now and then
  // whether it failed or finished without an answer (cudaErrorUnknown: a bug in the check).
  cudaError_t Wait(const CheckArgs& args, cudaStream_t stream, BadId* found) {
    const volatile Verdict* verdict = host_verdict_;
    for (unsigned spins = 1; verdict->check != args.check; ++spins) {
      if (spins % 4096 != 0) continue;
      const cudaError_t status = cudaStreamQuery(stream);
      if (status == cudaErrorNotReady) continue;
      if (status != cudaSuccess) return status;
      if (verdict->check != args.check) return cudaErrorUnknown;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    found->position_plus_one = verdict->bad.position_plus_one;
    found->id = verdict->bad.id;
    return cudaSuccess;
  }

 private:
  cudaError_t Init() {
    cudaError_t status = cudaMalloc(&state_, sizeof(CheckState));
    if (status == cudaSuccess) status = cudaMemset(state_, 0, sizeof(CheckState));
    if (status == cudaSuccess) {
      status = cudaHostAlloc(&host_verdict_, sizeof(Verdict),
                             cudaHostAllocMapped | cudaHostAllocPortable);
    }
    if (status == cudaSuccess) {
      *host_verdict_ = Verdict{};
      status = cudaHostGetDevicePointer(&device_verdict_, host_verdict_, 0);
    }
    if (status == cudaSuccess) status = cudaDeviceSynchronize();  // the memset done
    return status;
  }
  void Release() {
    if (host_verdict_ != nullptr) cudaFreeHost(host_verdict_);
    if (state_ != nullptr) cudaFree(state_);
  }

  CheckState* state_ = nullptr;
  Verdict* host_verdict_ = nullptr;
  Verdict* device_verdict_ = nullptr;
  unsigned long long checks_ = 0;
};

// ---- backward --------------------------------------------------------------------------------
// Sums are taken in float for float, float16 and bfloat16, in double for double.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

__device__ __forceinline__ float ToAcc(float x) { return x; }
__device__ __forceinline__ double ToAcc(double x) { return x; }
__device__ __forceinline__ float ToAcc(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToAcc(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T FromAcc(Acc<T> x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return x;
  }
}

template <typename Id>
__device__ __forceinline__ bool Counts(Id id, int64_t rows, int64_t padding_idx) {
  return id >= 0 && static_cast<int64_t>(id) < rows && static_cast<int64_t>(id) != padding_idx;
}

// Atomics: each row of threads adds one row of grad_out into its id's row of grad_table.
template <typename T, typename Id>
__global__ void __launch_bounds__(kThreads)
    ScatterAddAtomicKernel(const Id* __restrict__ ids, int64_t n, const T* __restrict__ grad_out,
                           int64_t rows, int64_t d, int64_t padding_idx, int lanes,
                           T* __restrict__ grad_table) {
  const int lane = threadIdx.x % lanes;
  const int64_t rows_per_pass = kThreads / lanes;
  for (int64_t i = int64_t{blockIdx.x} * rows_per_pass + threadIdx.x / lanes; i < n;
       i += int64_t{gridDim.x} * rows_per_pass) {
    const Id id = ids[i];
    if (!Counts(id, rows, padding_idx)) continue;
    const T* from = grad_out + i * d;
    T* to = grad_table + static_cast<int64_t>(id) * d;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (std::is_same_v<T, float>) {
      if (d % 4 == 0 && reinterpret_cast<std::uintptr_t>(from) % 16 == 0 &&
          reinterpret_cast<std::uintptr_t>(to) % 16 == 0) {
        // sm_90 adds four floats with one atomic (red.global.v4.f32).
        for (int64_t c = lane; c < d / 4; c += lanes) {
          atomicAdd(reinterpret_cast<float4*>(to) + c,
                    __ldg(reinterpret_cast<const float4*>(from) + c));
        }
        continue;
      }
    }
#endif
    for (int64_t c = lane; c < d; c += lanes) atomicAdd(to + c, __ldg(from + c));
  }
}

// Sorted: keys are the ids (an id that adds nothing becomes `rows`, sorted last), values their
// positions.
template <typename Id>
__global__ void KeysKernel(const Id* __restrict__ ids, int64_t n, int64_t rows,
                           int64_t padding_idx, int64_t* __restrict__ keys,
                           int64_t* __restrict__ positions) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Id id = ids[i];
    keys[i] = Counts(id, rows, padding_idx) ? static_cast<int64_t>(id) : rows;
    positions[i] = i;
  }
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// ---- the sorted backward's pieces -----------------------------------------------------------
// A run of equal sorted keys of at most kPieceRows positions is one piece, summed by one warp
// straight into the table's row. A longer run (a frequent token; token types, a vocabulary of
// two) would leave one warp summing thousands of rows while the others idle, so it is cut where
// the position is a multiple of kPieceRows: each piece's warp writes its sum, in Acc, into a slot
// of `partials`, and CombineKernel adds a run's slots in order. A window of kPieceRows positions
// holds at most two such pieces, the one that starts it and the head of a long run that starts
// inside it, so slot 2 * window + (1 for a head inside) is each piece's own.

// The first position in [lo, hi) whose key is `key` or above, or hi (the keys are sorted). The
// keys are integers, so the first above `key` is LowerBound(..., key + 1).
__device__ __forceinline__ int64_t LowerBound(const int64_t* __restrict__ keys, int64_t lo,
                                              int64_t hi, int64_t key) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] >= key) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

struct Piece {
  int64_t key;
  int64_t end;     // one past its last position
  int64_t slot;    // its slot in `partials`; -1: a whole run, written to the table
  bool run_start;  // the run's first piece
};

__device__ __forceinline__ int64_t SlotOf(int64_t position) {
  return 2 * (position / kPieceRows) + (position % kPieceRows != 0 ? 1 : 0);
}

// Whether a piece starts at position p, and which. Every lane of a warp reads the same keys.
__device__ __forceinline__ bool PieceAt(const int64_t* __restrict__ keys, int64_t n, int64_t rows,
                                        int64_t p, Piece* piece) {
  const int64_t key = keys[p];
  if (key == rows) return false;  // ids that add nothing
  const bool run_start = p == 0 || keys[p - 1] != key;
  if (!run_start && p % kPieceRows != 0) return false;
  // The run's first position, or p - kPieceRows if it began that far back (long either way).
  const int64_t start = run_start ? p : LowerBound(keys, p >= kPieceRows ? p - kPieceRows : 0, p,
                                                   key);
  const bool long_run = start + kPieceRows < n && keys[start + kPieceRows] == key;
  if (!long_run && !run_start) return false;  // a short run is summed from its start
  const int64_t limit = long_run ? (p / kPieceRows + 1) * kPieceRows : p + kPieceRows;
  piece->key = key;
  piece->end = LowerBound(keys, p + 1, limit < n ? limit : n, key + 1);
  piece->slot = long_run ? SlotOf(p) : -1;
  piece->run_start = run_start;
  return true;
}

// The long runs CombineKernel adds up: their first positions, in the order their warps came
// (which does not change a run's sum).
struct LongRuns {
  int64_t* starts = nullptr;
  unsigned* count = nullptr;
};

// One warp a piece: its lanes sum the piece's rows of grad_out, kVec columns at a time, kGroups
// column groups and kSumRows rows in flight, in sorted order, and write the table's row (or the
// piece's slot) once.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    SegmentSumKernel(const int64_t* __restrict__ keys, const int64_t* __restrict__ positions,
                     int64_t n, const T* __restrict__ grad_out, int64_t rows, int64_t d,
                     T* __restrict__ grad_table, Acc<T>* __restrict__ partials,
                     LongRuns long_runs) {
  using V = Pack<T, kVec>;
  using A = Pack<Acc<T>, kVec>;
  constexpr int kGroups = 4;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * (kThreads / 32);
  const int64_t vectors = d / kVec;
  for (int64_t start = int64_t{blockIdx.x} * (kThreads / 32) + threadIdx.x / 32; start < n;
       start += warps) {
    Piece piece;
    if (!PieceAt(keys, n, rows, start, &piece)) continue;
    if (lane == 0 && piece.slot >= 0 && piece.run_start) {
      long_runs.starts[atomicAdd(long_runs.count, 1u)] = start;
    }
    for (int64_t first = lane; first < vectors; first += 32 * kGroups) {
      Acc<T> sum[kGroups][kVec] = {};
      for (int64_t j = start; j < piece.end; j += kSumRows) {
        const V* row[kSumRows];
#pragma unroll
        for (int r = 0; r < kSumRows; ++r) {
          row[r] = j + r < piece.end
                       ? reinterpret_cast<const V*>(grad_out + positions[j + r] * d)
                       : nullptr;
        }
        V x[kSumRows][kGroups];
#pragma unroll
        for (int r = 0; r < kSumRows; ++r) {
#pragma unroll
          for (int g = 0; g < kGroups; ++g) {
            const int64_t c = first + 32 * g;
            x[r][g] = row[r] != nullptr && c < vectors ? row[r][c] : V{};
          }
        }
#pragma unroll
        for (int r = 0; r < kSumRows; ++r) {
#pragma unroll
          for (int g = 0; g < kGroups; ++g) {
#pragma unroll
            for (int k = 0; k < kVec; ++k) sum[g][k] += ToAcc(x[r][g].v[k]);
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int64_t c = first + 32 * g;
        if (c >= vectors) break;
        if (piece.slot < 0) {
          V o;
#pragma unroll
          for (int k = 0; k < kVec; ++k) o.v[k] = FromAcc<T>(sum[g][k]);
          reinterpret_cast<V*>(grad_table + piece.key * d)[c] = o;
        } else {
          A o;
#pragma unroll
          for (int k = 0; k < kVec; ++k) o.v[k] = sum[g][k];
          reinterpret_cast<A*>(partials + piece.slot * d)[c] = o;
        }
      }
    }
  }
}

// One block a long run: each thread adds a column's slots in the order of their positions
// (kAccVec columns at a time, four slots in flight) and writes the table's row.
template <typename T, int kAccVec>
__global__ void __launch_bounds__(kThreads)
    CombineKernel(const int64_t* __restrict__ keys, int64_t n, const Acc<T>* __restrict__ partials,
                  LongRuns long_runs, int64_t d, T* __restrict__ grad_table) {
  using A = Pack<Acc<T>, kAccVec>;
  const unsigned count = *long_runs.count;
  const int64_t vectors = d / kAccVec;
  for (unsigned i = blockIdx.x; i < count; i += gridDim.x) {
    const int64_t start = long_runs.starts[i];
    const int64_t key = keys[start];
    const int64_t last = LowerBound(keys, start + kPieceRows, n, key + 1) - 1;
    const int64_t first_window = start / kPieceRows + 1;  // windows whose first piece is the run's
    const int64_t last_window = last / kPieceRows;
    for (int64_t c = threadIdx.x; c < vectors; c += kThreads) {
      A sum = reinterpret_cast<const A*>(partials + SlotOf(start) * d)[c];
      int64_t w = first_window;
      for (; w + 3 <= last_window; w += 4) {
        A x[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          x[u] = reinterpret_cast<const A*>(partials + 2 * (w + u) * d)[c];
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
#pragma unroll
          for (int k = 0; k < kAccVec; ++k) sum.v[k] += x[u].v[k];
        }
      }
      for (; w <= last_window; ++w) {
        const A x = reinterpret_cast<const A*>(partials + 2 * w * d)[c];
#pragma unroll
        for (int k = 0; k < kAccVec; ++k) sum.v[k] += x.v[k];
      }
#pragma unroll
      for (int k = 0; k < kAccVec; ++k) {
        grad_table[key * d + c * kAccVec + k] = FromAcc<T>(sum.v[k]);
      }
    }
  }
}

// Where each of ScatterAddSorted's arrays begins in its workspace, for n ids of rows of d.
template <typename T>
struct SortedLayout {
  std::size_t keys, positions, sorted_keys, sorted_positions, partials, starts, count, cub, total;
  std::size_t cub_bytes;

  SortedLayout(int64_t n, int64_t d) {
    const auto size = static_cast<std::size_t>(n);
    const std::size_t windows = (size + kPieceRows - 1) / kPieceRows;
    auto next = [this](std::size_t bytes) {  // 256-byte aligned, as cudaMalloc's
      const std::size_t at = total;
      total += (bytes + 255) / 256 * 256;
      return at;
    };
    total = 0;
    keys = next(size * sizeof(int64_t));
    positions = next(size * sizeof(int64_t));
    sorted_keys = next(size * sizeof(int64_t));
    sorted_positions = next(size * sizeof(int64_t));
    partials = next(2 * windows * static_cast<std::size_t>(d) * sizeof(Acc<T>));
    starts = next((size / (kPieceRows + 1) + 1) * sizeof(int64_t));
    count = next(sizeof(unsigned));
    cub_bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, static_cast<const int64_t*>(nullptr),
                                    static_cast<int64_t*>(nullptr),
                                    static_cast<const int64_t*>(nullptr),
                                    static_cast<int64_t*>(nullptr), static_cast<int>(n));
    cub = next(cub_bytes);
  }
};

// Bytes of workspace ScatterAddSorted needs for n ids of rows of d: the keys and positions, four
// arrays of n int64 (sorted and not), the long runs' partial sums (2 * n / EMBEDDING_PIECE_ROWS
// rows of d sums) and their starts, and cub's storage. The sums dominate: with pieces of 16 and
// float sums, n * d / 2 bytes, an eighth of a float32 grad_out and a quarter of a 16-bit one.
template <typename T>
std::size_t SortedWorkspaceBytes(int64_t n, int64_t d) {
  return SortedLayout<T>(n, d).total + 256;  // + 256: the workspace's own alignment
}

inline int BitsFor(int64_t value) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) <= value) ++bits;
  return bits;
}

// Whether ScatterAdd sorts: asked to (`deterministic`), for dtypes without usable atomics
// (float16, bfloat16), and for rows of 4 KiB or more, where sorting is the faster of the two
// (H200, ids [65536]: D = 1024 float32 sorted 0.27 ms, atomics 0.32 ms; D = 256 atomics 0.05 ms,
// sorted 0.09 ms; docs/benchmarks.md).
template <typename T>
bool UsesSort(int64_t d, bool deterministic) {
  constexpr bool kAtomics = std::is_same_v<T, float> || std::is_same_v<T, double>;
  return deterministic || !kAtomics || d * static_cast<int64_t>(sizeof(T)) >= 4096;
}

// grad_table = zeros, then the sum of grad_out's rows per id. The sorted path (UsesSort) needs
// `workspace` of SortedWorkspaceBytes<T>(n, d) bytes, and n below 2^31. Returns the first CUDA
// error.
template <typename T, typename Id>
cudaError_t ScatterAdd(const Id* ids, int64_t n, const T* grad_out, int64_t rows, int64_t d,
                       int64_t padding_idx, T* grad_table, bool deterministic, void* workspace,
                       int device, cudaStream_t stream) {
  opgen::cuda::DeviceGuard guard(device);
  cudaError_t status = cudaMemsetAsync(grad_table, 0, rows * d * sizeof(T), stream);
  if (status != cudaSuccess || n == 0 || d == 0) return status;
  if (!UsesSort<T>(d, deterministic)) {
    int lanes = 1;
    const int64_t vectors = std::is_same_v<T, float> && d % 4 == 0 ? d / 4 : d;
    while (lanes < vectors && lanes < kThreads) lanes *= 2;
    const unsigned grid = opgen::cuda::GridFor(n, kThreads, device, kThreads / lanes);
    ScatterAddAtomicKernel<T, Id><<<grid, kThreads, 0, stream>>>(ids, n, grad_out, rows, d,
                                                                  padding_idx, lanes, grad_table);
    return cudaGetLastError();
  }
  if (n > 0x7fffffff) return cudaErrorInvalidValue;
  const SortedLayout<T> layout(n, d);
  auto base = reinterpret_cast<std::uintptr_t>(workspace);
  base = (base + 255) / 256 * 256;
  auto at = [base](std::size_t offset) { return reinterpret_cast<void*>(base + offset); };
  auto* keys = static_cast<int64_t*>(at(layout.keys));
  auto* positions = static_cast<int64_t*>(at(layout.positions));
  auto* sorted_keys = static_cast<int64_t*>(at(layout.sorted_keys));
  auto* sorted_positions = static_cast<int64_t*>(at(layout.sorted_positions));
  auto* partials = static_cast<Acc<T>*>(at(layout.partials));
  LongRuns long_runs{static_cast<int64_t*>(at(layout.starts)),
                     static_cast<unsigned*>(at(layout.count))};
  std::size_t cub_bytes = layout.cub_bytes;
  const bool can_be_long = n > kPieceRows;  // a run longer than one piece
  if (can_be_long) status = cudaMemsetAsync(long_runs.count, 0, sizeof(unsigned), stream);
  if (status != cudaSuccess) return status;
  KeysKernel<Id><<<opgen::cuda::GridFor(n, kThreads, device), kThreads, 0, stream>>>(
      ids, n, rows, padding_idx, keys, positions);
  status = cub::DeviceRadixSort::SortPairs(at(layout.cub), cub_bytes, keys, sorted_keys,
                                           positions, sorted_positions, static_cast<int>(n), 0,
                                           BitsFor(rows), stream);
  if (status != cudaSuccess) return status;
  // One warp a piece: the grid covers n warps, up to what is resident at once.
  const unsigned grid = opgen::cuda::GridFor(n, kThreads, device, kThreads / 32, 1);
  constexpr int kWide = 16 / sizeof(T);
  const bool wide = (d * sizeof(T)) % 16 == 0 &&
                    (reinterpret_cast<std::uintptr_t>(grad_out) |
                     reinterpret_cast<std::uintptr_t>(grad_table)) % 16 == 0;
  if (wide) {
    SegmentSumKernel<T, kWide><<<grid, kThreads, 0, stream>>>(
        sorted_keys, sorted_positions, n, grad_out, rows, d, grad_table, partials, long_runs);
  } else {
    SegmentSumKernel<T, 1><<<grid, kThreads, 0, stream>>>(
        sorted_keys, sorted_positions, n, grad_out, rows, d, grad_table, partials, long_runs);
  }
  status = cudaGetLastError();
  if (status != cudaSuccess || !can_be_long) return status;
  // One block a long run; there are at most n / (kPieceRows + 1), fewer blocks loop.
  const unsigned combine_grid =
      opgen::cuda::GridFor(n / (kPieceRows + 1) + 1, kThreads, device, 1);
  constexpr int kAccWide = 16 / sizeof(Acc<T>);
  if (d % kAccWide == 0) {
    CombineKernel<T, kAccWide><<<combine_grid, kThreads, 0, stream>>>(
        sorted_keys, n, partials, long_runs, d, grad_table);
  } else {
    CombineKernel<T, 1><<<combine_grid, kThreads, 0, stream>>>(sorted_keys, n, partials,
                                                               long_runs, d, grad_table);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace embedding

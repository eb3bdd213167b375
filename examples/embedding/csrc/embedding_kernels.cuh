// embedding's CUDA kernels, with no Paddle in them: csrc/embedding_cuda.cuh calls them on
// Paddle's tensors, scripts/gpu/embedding_bench.cu checks and times them on their own.
//   forward   out[i, :] = table[ids[i], :]: a gather of whole rows in 16-byte vectors (the widest
//             that the row size and both pointers allow); padding rows and out-of-range ids read
//             as zeros, never read outside the table; with an IdCheck, the gather's first blocks
//             check every id before they copy and send the host a verdict to raise on.
//   backward  grad_table[v, :] = sum of grad_out[i, :] over i with ids[i] == v, two ways:
//             atomics (float32 and float64; fast, the order of the additions varies), or sorted:
//             ids radix-sorted with their positions, then one warp per run of equal ids sums
//             its rows in a fixed order (any dtype; bit-for-bit repeatable).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "opgen/cuda.cuh"

// Tuning knobs (-D, or OPGEN_NVCC_FLAGS at build time); the defaults were timed on an H200.
#ifndef EMBEDDING_THREADS
#define EMBEDDING_THREADS 256
#endif
#ifndef EMBEDDING_UNROLL
#define EMBEDDING_UNROLL 2  // rows each thread has in flight in the gather
#endif
#ifndef EMBEDDING_STREAMING_STORES
#define EMBEDDING_STREAMING_STORES 1  // out is written once and not read back soon
#endif

namespace embedding {
namespace cuda {

constexpr int kThreads = EMBEDDING_THREADS;
constexpr int kUnroll = EMBEDDING_UNROLL;

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

// One warp per run of equal sorted keys (found where the key changes): its lanes sum the run's
// rows of grad_out, kVec columns at a time and four column groups in flight, in sorted order,
// and write the table's row once.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    SegmentSumKernel(const int64_t* __restrict__ keys, const int64_t* __restrict__ positions,
                     int64_t n, const T* __restrict__ grad_out, int64_t rows, int64_t d,
                     T* __restrict__ grad_table) {
  using V = Pack<T, kVec>;
  constexpr int kGroups = 4;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * (kThreads / 32);
  const int64_t vectors = d / kVec;
  for (int64_t start = int64_t{blockIdx.x} * (kThreads / 32) + threadIdx.x / 32; start < n;
       start += warps) {
    const int64_t key = keys[start];
    if (key == rows || (start > 0 && keys[start - 1] == key)) continue;
    int64_t end = start + 1;
    while (end < n && keys[end] == key) ++end;
    for (int64_t first = lane; first < vectors; first += 32 * kGroups) {
      Acc<T> sum[kGroups][kVec] = {};
      for (int64_t j = start; j < end; ++j) {
        const V* row = reinterpret_cast<const V*>(grad_out + positions[j] * d);
        V x[kGroups];
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
          const int64_t c = first + 32 * g;
          x[g] = c < vectors ? row[c] : V{};
        }
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) sum[g][k] += ToAcc(x[g].v[k]);
        }
      }
      V* to = reinterpret_cast<V*>(grad_table + key * d);
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const int64_t c = first + 32 * g;
        if (c >= vectors) break;
        V o;
#pragma unroll
        for (int k = 0; k < kVec; ++k) o.v[k] = FromAcc<T>(sum[g][k]);
        to[c] = o;
      }
    }
  }
}

// Bytes of workspace ScatterAddSorted needs for n ids (4 arrays of n int64 and cub's storage).
inline std::size_t SortedWorkspaceBytes(int64_t n) {
  std::size_t cub_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, static_cast<const int64_t*>(nullptr),
                                  static_cast<int64_t*>(nullptr),
                                  static_cast<const int64_t*>(nullptr),
                                  static_cast<int64_t*>(nullptr), static_cast<int>(n));
  return 4 * static_cast<std::size_t>(n) * sizeof(int64_t) + cub_bytes + 256;
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
// `workspace` of SortedWorkspaceBytes(n) bytes, and n below 2^31. Returns the first CUDA error.
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
  auto* keys = static_cast<int64_t*>(workspace);
  int64_t* positions = keys + n;
  int64_t* sorted_keys = positions + n;
  int64_t* sorted_positions = sorted_keys + n;
  auto cub_storage = reinterpret_cast<std::uintptr_t>(sorted_positions + n);
  cub_storage = (cub_storage + 255) / 256 * 256;
  std::size_t cub_bytes = SortedWorkspaceBytes(n) - 4 * n * sizeof(int64_t) - 256;
  KeysKernel<Id><<<opgen::cuda::GridFor(n, kThreads, device), kThreads, 0, stream>>>(
      ids, n, rows, padding_idx, keys, positions);
  status = cub::DeviceRadixSort::SortPairs(reinterpret_cast<void*>(cub_storage), cub_bytes, keys,
                                           sorted_keys, positions, sorted_positions,
                                           static_cast<int>(n), 0, BitsFor(rows), stream);
  if (status != cudaSuccess) return status;
  // One warp per run: the grid covers n warps, up to what is resident at once.
  const unsigned grid = opgen::cuda::GridFor(n, kThreads, device, kThreads / 32, 1);
  constexpr int kWide = 16 / sizeof(T);
  const bool wide = (d * sizeof(T)) % 16 == 0 &&
                    (reinterpret_cast<std::uintptr_t>(grad_out) |
                     reinterpret_cast<std::uintptr_t>(grad_table)) % 16 == 0;
  if (wide) {
    SegmentSumKernel<T, kWide><<<grid, kThreads, 0, stream>>>(
        sorted_keys, sorted_positions, n, grad_out, rows, d, grad_table);
  } else {
    SegmentSumKernel<T, 1><<<grid, kThreads, 0, stream>>>(sorted_keys, sorted_positions, n,
                                                          grad_out, rows, d, grad_table);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace embedding

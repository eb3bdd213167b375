// opgen CUDA helpers every kind's kernels use: the device guard, the device's attributes,
// programmatic dependent launches, the grid for a grid-stride loop over n items with 64-bit
// sizes, and a vector's lanes in the math type. Plain CUDA with no Paddle in it, so kernels
// built on it can be timed on their own (scripts/gpu/ in opgen's repository).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "opgen/math.h"

namespace opgen {

template <>
struct IsBFloat16<__nv_bfloat16> : std::true_type {};

namespace cuda {

// Makes `device` current for the guard's lifetime, so a tensor on gpu:1 runs on gpu:1.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&previous_);
    if (device != previous_) cudaSetDevice(device);
    current_ = device;
  }
  ~DeviceGuard() {
    if (current_ != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int current_ = 0;
};

// Where an op's kernels run: the device of its inputs (current while they run) and its stream.
struct Device {
  int id;
  cudaStream_t stream;
};

// `ask()` (a value >= 0) for `device`, asked once per device and question (`Question`, a type
// that names it: an attribute, a kernel's occupancy), every time for a device id past the first
// 64. Machines may hold GPUs of several kinds, so nothing is asked once for all devices; ops run
// on several host threads (a predictor's), so the cache is atomic, and two threads asking at once
// store the same value.
template <typename Question, typename Ask>
int OncePerDevice(int device, const Ask& ask) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};  // the value + 1; 0: not asked yet
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached) {
    const int known = cache[device].load(std::memory_order_relaxed);
    if (known != 0) return known - 1;
  }
  const int value = ask();
  if (cached) cache[device].store(value + 1, std::memory_order_relaxed);
  return value;
}

// `kAttribute` of `device` (cudaDeviceGetAttribute), asked once per device; 0 where the question
// fails.
template <cudaDeviceAttr kAttribute>
int DeviceAttribute(int device) {
  return OncePerDevice<std::integral_constant<cudaDeviceAttr, kAttribute>>(device, [device] {
    int value = 0;
    return cudaDeviceGetAttribute(&value, kAttribute, device) == cudaSuccess ? value : 0;
  });
}

// Blocks of `kKernel` with `threads` threads and `shared_bytes` of dynamic shared memory that
// one multiprocessor of `device` (the current device) holds at once, at least 1; asked once per
// kernel and device (a kernel is always launched with the same threads and shared memory).
template <auto kKernel>
int ResidentBlocksPerSM(int device, int threads, std::size_t shared_bytes) {
  using Question = std::integral_constant<decltype(kKernel), kKernel>;
  return OncePerDevice<Question>(device, [threads, shared_bytes] {
    int count = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kKernel, threads, shared_bytes) !=
        cudaSuccess) {
      cudaGetLastError();  // a failed query leaves no error behind for the next launch
      count = 0;
    }
    return count > 0 ? count : 1;
  });
}

inline int MultiprocessorCount(int device) {
  const int count = DeviceAttribute<cudaDevAttrMultiProcessorCount>(device);
  return count > 0 ? count : 1;
}

// Programmatic dependent launch (compute capability 9.0 on). A kernel launched with
// LaunchDependent may be scheduled while the kernel before it in the stream still runs, once each
// of that kernel's blocks has called LetDependentsLaunch or ended; it waits in WaitForPrimaryGrid
// until that kernel has completed and its writes are visible, so it reads them after the wait
// only. Both are no-ops in code built for an older arch and in a kernel launched the plain way.
__device__ __forceinline__ void WaitForPrimaryGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void LetDependentsLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether kKernel can be a dependent launch on `device`: the device runs them (compute capability
// 9.0 on) and the kernel's code was built for sm_90 on. Code the driver compiled from an older
// arch's PTX has no wait in it, and would read what the kernel before it writes too early. Asked
// once per kernel and device (every time for a device id past the first 64).
template <auto kKernel>
bool DependentLaunchRuns(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};  // 1: no, 2: yes; 0: not asked yet
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached) {
    const int known = cache[device].load(std::memory_order_relaxed);
    if (known != 0) return known == 2;
  }
  bool runs = DeviceAttribute<cudaDevAttrComputeCapabilityMajor>(device) >= 9;
  if (runs) {
    cudaFuncAttributes attributes;
    if (cudaFuncGetAttributes(&attributes, kKernel) == cudaSuccess) {
      runs = attributes.ptxVersion >= 90;
    } else {
      runs = false;
      cudaGetLastError();  // the failed query's error, not the launch's
    }
  }
  if (cached) cache[device].store(runs ? 2 : 1, std::memory_order_relaxed);
  return runs;
}

// kKernel<<<grid, block, 0, stream>>>(args...), as a programmatic dependent launch where it can be
// one (DependentLaunchRuns) and `stream` is not being captured into a CUDA graph (there: the plain
// launch). Returns the launch's error, which cudaGetLastError then reports too, as after <<<>>>.
template <auto kKernel, typename... Args>
cudaError_t LaunchDependent(dim3 grid, dim3 block, int device, cudaStream_t stream,
                            const Args&... args) {
#if defined(CUDART_VERSION) && CUDART_VERSION >= 11080
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (DependentLaunchRuns<kKernel>(device) &&
      cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
      capture == cudaStreamCaptureStatusNone) {
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kKernel, args...);
  }
#endif
  kKernel<<<grid, block, 0, stream>>>(args...);
  return cudaPeekAtLastError();
}

// Blocks of `threads` for a grid-stride loop over `n` items (each block taking `per_block` items
// a pass): enough to cover n, at most `waves` blocks per multiprocessor's worth of 2048 threads,
// and never more than CUDA's grid limit. 0 when n is 0: launch nothing.
inline unsigned GridFor(int64_t n, int threads, int device, int64_t per_block = 0,
                        int waves = 4) {
  if (n <= 0) return 0;
  if (per_block <= 0) per_block = threads;
  int64_t blocks = (n + per_block - 1) / per_block;
  const int64_t resident = int64_t{MultiprocessorCount(device)} * (2048 / threads) * waves;
  if (blocks > resident) blocks = resident;
  constexpr int64_t kMaxGrid = (int64_t{1} << 31) - 1;
  return static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

// Element j of the vector v (a struct holding an array `v` of lanes) as Acc. A bfloat16 is the
// high half of a float, so with kWords its lane is read out of its 32-bit word with a shift or a
// mask; CUDA's conversion takes a 16-bit register of its own per lane, which made the kernels
// that hold vectors in registers hold up to half as many again in bfloat16 as in float16.
template <typename Acc, bool kWords, typename V>
__device__ __forceinline__ Acc LaneOf(const V& v, int j) {
  using T = std::remove_cv_t<std::remove_reference_t<decltype(v.v[0])>>;
  if constexpr (kWords && IsBFloat16<T>::value && sizeof(V) % 4 == 0) {
    uint32_t words[sizeof(V) / 4];
    __builtin_memcpy(words, &v, sizeof v);
    const uint32_t word = words[j / 2];
    return static_cast<Acc>(__uint_as_float(j % 2 == 0 ? word << 16 : word & 0xffff0000u));
  } else {
    return static_cast<Acc>(v.v[j]);
  }
}

}  // namespace cuda
}  // namespace opgen

// Times opgen's CUDA launcher (templates/elementwise/csrc/opgen/launch.cuh) on its own, without Paddle,
// against cudaMemcpyAsync of the same bytes on the same GPU. Build one binary per set of launcher
// knobs and compare (scripts/gpu/launcher.sh does both):
//   nvcc -O3 -std=c++17 -arch=sm_90 -Itemplates/common/csrc -Itemplates/elementwise/csrc -DOPGEN_WAVES=0 \
//     scripts/gpu/launcher_bench.cu -o /tmp/launcher_bench && /tmp/launcher_bench 268435456
// Prints one line per (dtype, kernel): median ms per call, GB/s (bytes read + written) and the
// ratio to the copy. Forward results are checked against the host before timing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "opgen/launch.cuh"

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e = (call);                                                          \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// relu6 as opgen renders it (examples/relu6/csrc/relu6.h).
template <typename MT>
struct Forward {
  MT threshold;
  OPGEN_HD void operator()(MT x, MT& out) const {
    out = opgen::min(opgen::max(x, MT(0)), threshold);
  }
};
template <typename MT>
struct Backward {
  MT threshold;
  OPGEN_HD void operator()(MT x, MT grad_out, MT& grad_x) const {
    grad_x = opgen::where(x > MT(0) && x < threshold, grad_out, MT(0));
  }
};

template <typename T>
__global__ void Fill(T* p, int64_t n, float scale, float shift) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = static_cast<T>(static_cast<float>((i * 2654435761u) % 1000) * scale + shift);
  }
}

// Median milliseconds per call of `body`, over 7 timed batches of `calls` calls after a warm-up.
template <typename Body>
float TimeMs(Body body, int calls) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) body();
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < calls; ++i) body();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t / calls);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <typename T>
void Run(const char* dtype, int64_t n, const char* variant) {
  const size_t bytes = n * sizeof(T);
  T *x, *dy, *out;
  CHECK(cudaMalloc(&x, bytes));
  CHECK(cudaMalloc(&dy, bytes));
  CHECK(cudaMalloc(&out, bytes));
  Fill<<<1024, 256>>>(x, n, 0.01f, -2.0f);  // [-2, 8): both sides of 0 and 6
  Fill<<<1024, 256>>>(dy, n, 0.001f, 0.5f);
  CHECK(cudaDeviceSynchronize());
  using MT = opgen::OpMathT<T>;
  const Forward<MT> fwd{MT(6)};
  const Backward<MT> bwd{MT(6)};
  opgen::Pointers<const T, 1> in1{{x}};
  opgen::Pointers<const T, 2> in2{{x, dy}};
  opgen::Pointers<T, 1> out1{{out}};

  // Correctness of the forward on a sample of the output, before any timing.
  CHECK(opgen::cuda::Launch(fwd, n, in1, out1, 0, 0));
  CHECK(cudaDeviceSynchronize());
  std::vector<T> hx(4096), hout(4096);
  for (int64_t at : {int64_t{0}, n / 2, n - 4096}) {
    CHECK(cudaMemcpy(hx.data(), x + at, 4096 * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hout.data(), out + at, 4096 * sizeof(T), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 4096; ++i) {
      const float expect = std::min(std::max(static_cast<float>(hx[i]), 0.0f), 6.0f);
      if (static_cast<float>(hout[i]) != static_cast<float>(static_cast<T>(expect))) {
        std::fprintf(stderr, "%s %s: wrong forward at %lld\n", variant, dtype,
                     static_cast<long long>(at + i));
        std::exit(1);
      }
    }
  }

  const int calls = std::max<int64_t>(5, (int64_t{20} << 28) / std::max<int64_t>(n, 1) / 8);
  const float copy = TimeMs([&] { CHECK(cudaMemcpyAsync(out, x, bytes, cudaMemcpyDeviceToDevice)); }, calls);
  struct Row {
    const char* kernel;
    double bytes_moved;
    float ms;
  };
  const Row rows[] = {
      {"copy", 2.0 * bytes, copy},
      {"forward", 2.0 * bytes,
       TimeMs([&] { CHECK(opgen::cuda::Launch(fwd, n, in1, out1, 0, 0)); }, calls)},
      {"backward", 3.0 * bytes,
       TimeMs([&] { CHECK(opgen::cuda::Launch(bwd, n, in2, out1, 0, 0)); }, calls)},
      {"naive", 2.0 * bytes,
       TimeMs([&] { CHECK(opgen::cuda::LaunchNaive(fwd, n, in1, out1, 0, 0)); }, calls)},
  };
  const double copy_gbs = 2.0 * bytes / (copy * 1e6);
  for (const Row& r : rows) {
    const double gbs = r.bytes_moved / (r.ms * 1e6);
    std::printf("%-32s %-9s n=%-11lld %-9s %9.4f ms %7.0f GB/s %6.3f x copy\n", variant, dtype,
                static_cast<long long>(n), r.kernel, r.ms, gbs, gbs / copy_gbs);
  }
  CHECK(cudaFree(x));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(out));
}

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (int64_t{1} << 28);
  const char* variant = argc > 2 ? argv[2] : "default";
  Run<float>("float32", n, variant);
  Run<__half>("float16", n, variant);
  Run<__nv_bfloat16>("bfloat16", n, variant);
  return 0;
}

// relu6's CPU loop on its own, in the forms tried against Eigen's (docs/benchmarks.md, "CPU
// kernels"): the functor of examples/relu6 (opgen::min_uniform / max_uniform) over 2^20 floats in
// chunks of 2^16, as opgen::cpu::ApplyChunk runs it, written to outputs that take turns as
// Paddle's allocator hands them out. Best of 29 rounds of 10 calls each, the forms interleaved.
// Build and run from the repository root, with the build's flags (opgen/build.py, CXX_FLAGS):
//   g++ -O3 -std=c++17 -fno-trapping-math -fno-math-errno -ffp-contract=off \
//       -fno-tree-loop-distribute-patterns -I templates/common/csrc \
//       scripts/cpu_relu6_loop.cc -o /tmp/relu6_loop && /tmp/relu6_loop [elements] [outputs]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "opgen/math.h"

namespace {

struct Relu6 {
  float threshold;
  void operator()(float x, float& out) const {
    out = opgen::min_uniform(opgen::max_uniform(x, 0.f), threshold);
  }
};

#define RELU6_LOOP                 \
  for (int j = 0; j < m; ++j) {    \
    float r;                       \
    f(in[j], r);                   \
    out[j] = r;                    \
  }

__attribute__((noinline, target("avx512f"))) void Avx512(Relu6 f, const float* __restrict in,
                                                         float* __restrict out, int m) {
  RELU6_LOOP
}
__attribute__((noinline, target("avx2"))) void Avx2(Relu6 f, const float* __restrict in,
                                                    float* __restrict out, int m) {
  RELU6_LOOP
}
__attribute__((noinline, target("avx512f,prefer-vector-width=256"))) void Avx512On256(
    Relu6 f, const float* __restrict in, float* __restrict out, int m) {
  RELU6_LOOP
}
__attribute__((noinline, target("avx2"))) void Avx2Unrolled(Relu6 f, const float* __restrict in,
                                                            float* __restrict out, int m) {
#pragma GCC unroll 4
  RELU6_LOOP
}

// Streaming stores: 1024 values computed into a buffer in L1, then streamed out.
__attribute__((noinline, target("avx2"))) void Avx2Streaming(Relu6 f, const float* __restrict in,
                                                             float* __restrict out, int m) {
  alignas(64) float buffer[1024];
  for (int j0 = 0; j0 < m; j0 += 1024) {
    const int n = std::min(1024, m - j0);
    for (int j = 0; j < n; ++j) f(in[j0 + j], buffer[j]);
    int j = 0;
    for (; j + 8 <= n && (reinterpret_cast<uintptr_t>(out + j0 + j) % 32) == 0; j += 8) {
      _mm256_stream_ps(out + j0 + j, _mm256_load_ps(buffer + j));
    }
    for (; j < n; ++j) out[j0 + j] = buffer[j];
  }
  _mm_sfence();
}

// Software prefetches kIn floats ahead of the input and kOut ahead of the output (for writing),
// a cache line each, before each block of 256 values.
template <int kIn, int kOut>
__attribute__((noinline, target("avx2,prfchw"))) void Avx2Prefetch(Relu6 f,
                                                                   const float* __restrict in,
                                                                   float* __restrict out, int m) {
  int j0 = 0;
  for (; j0 + 256 <= m; j0 += 256) {
    for (int l = 0; l < 256; l += 16) {
      if (kIn > 0) __builtin_prefetch(in + j0 + kIn + l, 0, 3);
      if (kOut > 0) __builtin_prefetch(out + j0 + kOut + l, 1, 3);
    }
    for (int j = 0; j < 256; ++j) f(in[j0 + j], out[j0 + j]);
  }
  for (int j = j0; j < m; ++j) f(in[j], out[j]);
}

void Copy(Relu6, const float* __restrict in, float* __restrict out, int m) {
  std::memcpy(out, in, sizeof(float) * m);
}

using Loop = void (*)(Relu6, const float*, float*, int);

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1 << 20;
  const int outputs = argc > 2 ? std::atoi(argv[2]) : 2;
  constexpr int kChunk = 1 << 16;
  float* x = static_cast<float*>(std::aligned_alloc(4096, sizeof(float) * n));
  std::vector<float*> outs;
  for (int k = 0; k < outputs; ++k) {
    outs.push_back(static_cast<float*>(std::aligned_alloc(4096, sizeof(float) * n)));
    std::memset(outs.back(), 0, sizeof(float) * n);
  }
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 0.01f - 2.f;
  struct Form {
    const char* name;
    Loop loop;
    double best_us;
  };
  std::vector<Form> forms = {
      {"AVX-512 (the committed clone)", Avx512, 1e30},
      {"AVX2", Avx2, 1e30},
      {"AVX-512 on 256-bit vectors", Avx512On256, 1e30},
      {"AVX2, unrolled 4x (as Eigen)", Avx2Unrolled, 1e30},
      {"AVX2, streaming stores", Avx2Streaming, 1e30},
      {"AVX2, prefetch in 4 KB ahead", Avx2Prefetch<1024, 0>, 1e30},
      {"AVX2, prefetchw out 4 KB ahead", Avx2Prefetch<0, 1024>, 1e30},
      {"AVX2, prefetch both 4 KB ahead", Avx2Prefetch<1024, 1024>, 1e30},
      {"memcpy (glibc)", Copy, 1e30},
  };
  const Relu6 f{6.f};
  int turn = 0;
  for (int round = 0; round < 30; ++round) {
    for (Form& form : forms) {
      for (int call = 0; call < 10; ++call) {
        float* out = outs[turn++ % outputs];
        const auto start = std::chrono::steady_clock::now();
        for (int j0 = 0; j0 < n; j0 += kChunk) {
          form.loop(f, x + j0, out + j0, std::min(kChunk, n - j0));
        }
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count();
        if (round > 0) form.best_us = std::min(form.best_us, us);  // round 0 warms up
      }
    }
  }
  std::printf("%d floats, %d outputs taking turns, best of 29 rounds of 10 calls:\n", n, outputs);
  for (const Form& form : forms) std::printf("  %-32s %8.1f us\n", form.name, form.best_us);
  return 0;
}

// opgen CPU loops' shared pieces: the thread count Paddle's own CPU kernels use, a parallel loop
// over blocks of work, the attribute that compiles a loop for several instruction sets, and how a
// loop reads and stores the tensors' values.
// Plain C++ with no Paddle in it; the kinds' CPU loops (opgen/broadcast.h, opgen/rowwise.h) use
// them.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "opgen/math.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define OPGEN_CPU_X86 1
#include <immintrin.h>
#else
#define OPGEN_CPU_X86 0
#endif

namespace opgen {
namespace cpu {

// ---- threads --------------------------------------------------------------------------------
// The CPU loops use as many threads as Paddle's own CPU kernels may: its OpenMP setting
// (OMP_NUM_THREADS, which Paddle sets to 1 unless the environment says otherwise, or
// paddle.base.core.set_num_threads), read from the OpenMP runtime Paddle links (libiomp5) when
// the process has one, else from OMP_NUM_THREADS.
extern "C" int omp_get_max_threads(void) __attribute__((weak));

inline int CpuThreads() {
  if (omp_get_max_threads != nullptr) return std::max(1, omp_get_max_threads());
  const char* value = std::getenv("OMP_NUM_THREADS");
  const int threads = value != nullptr ? std::atoi(value) : 1;
  return std::max(1, threads);
}

// Calls body(b) for each b in [0, blocks), spread over CpuThreads() threads (the caller's one of
// them); which thread runs a block never changes what it computes.
template <typename Body>
void ParallelFor(int64_t blocks, const Body& body) {
  const int64_t threads = std::min<int64_t>(CpuThreads(), blocks);
  if (threads <= 1) {
    for (int64_t b = 0; b < blocks; ++b) body(b);
    return;
  }
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<std::size_t>(threads - 1));
  for (int64_t t = 1; t < threads; ++t) {
    helpers.emplace_back([&body, t, threads, blocks] {
      for (int64_t b = t; b < blocks; b += threads) body(b);
    });
  }
  for (int64_t b = 0; b < blocks; b += threads) body(b);
  for (std::thread& helper : helpers) helper.join();
}

}  // namespace cpu
}  // namespace opgen

// ---- instruction sets -----------------------------------------------------------------------
// A function marked OPGEN_CPU_CLONES is compiled for AVX-512, AVX2 and the baseline (SSE2 on
// x86-64), and the loader picks the widest the CPU has (GCC's function multiversioning), so a
// built op stays portable (the build passes no -march). Every clone computes the same bits: the
// build passes -ffp-contract=off (no fused multiply-add), and the functors' math has no other
// instruction that differs by width. Not inlined, so the loops it holds are compiled per clone.
#if OPGEN_CPU_X86
#define OPGEN_CPU_CLONES __attribute__((noinline, target_clones("avx512f", "avx2", "default")))
#else
#define OPGEN_CPU_CLONES __attribute__((noinline))
#endif

namespace opgen {
namespace cpu {

// ---- values ---------------------------------------------------------------------------------
// How every kind's CPU loop reads a T as OpMathT and stores an OpMathT as T: plain conversions,
// which opgen/paddle.h specializes for Paddle's 16-bit types (opgen/math.h's branch-free
// conversions, which vectorize and round to nearest even, where Paddle's host conversions do
// neither).
template <typename T>
struct LoadAs {
  static OpMathT<T> From(T value) { return static_cast<OpMathT<T>>(value); }
};
template <typename T>
struct StoreAs {
  static T From(OpMathT<T> r) { return static_cast<T>(r); }
};

// n values converted to and from OpMathT in bulk: loops of their own, cloned per instruction set,
// as a float16's conversion is a dozen integer instructions an element, which the baseline clone
// runs four at a time and AVX2 eight.
template <typename T>
OPGEN_CPU_CLONES void LoadChunk(const T* src, OpMathT<T>* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = LoadAs<T>::From(src[j]);
}
template <typename T>
OPGEN_CPU_CLONES void StoreChunk(const OpMathT<T>* src, T* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = StoreAs<T>::From(src[j]);
}

// ---- float16 in bulk ------------------------------------------------------------------------
// n float16s (of a 2-byte type that holds a float16's bits in .x, as paddle::float16) to floats
// and back, 8 at a time with x86's F16C instructions where the CPU has them (every x86-64 of the
// last decade; asked once), 10 to 15 x faster than the branch-free conversions of opgen/math.h,
// which the other CPUs take. The same bits either way, but that F16C loads a signaling NaN as a
// quiet one, as the first arithmetic on it would. opgen/paddle.h sends LoadChunk and StoreChunk
// of paddle::float16 here.
namespace detail {

inline bool HasF16c() {
#if OPGEN_CPU_X86
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  }();
  return has;
#else
  return false;
#endif
}

#if OPGEN_CPU_X86
// The last n % 8 values go through a zero-padded vector, so that every value gets the same bits.
template <typename Half>
__attribute__((target("avx,f16c"))) void LoadFloat16sF16c(const Half* src, float* dst,
                                                           int64_t n) {
  static_assert(sizeof(Half) == 2, "a float16 is 2 bytes");
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
    _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(halves));
  }
  if (j == n) return;
  uint16_t rest[8] = {};
  float values[8];
  for (int64_t k = j; k < n; ++k) rest[k - j] = src[k].x;
  _mm256_storeu_ps(values, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<__m128i*>(rest))));
  for (int64_t k = j; k < n; ++k) dst[k] = values[k - j];
}

template <typename Half>
__attribute__((target("avx,f16c"))) void StoreFloat16sF16c(const float* src, Half* dst,
                                                            int64_t n) {
  static_assert(sizeof(Half) == 2, "a float16 is 2 bytes");
  constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(src + j), kNearestEven);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), halves);
  }
  if (j == n) return;
  float rest[8] = {};
  uint16_t halves[8];
  for (int64_t k = j; k < n; ++k) rest[k - j] = src[k];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(halves),
                   _mm256_cvtps_ph(_mm256_loadu_ps(rest), kNearestEven));
  for (int64_t k = j; k < n; ++k) dst[k].x = halves[k - j];
}
#endif

template <typename Half>
OPGEN_CPU_CLONES void LoadFloat16sPortable(const Half* src, float* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = Float16Value(src[j].x);
}
template <typename Half>
OPGEN_CPU_CLONES void StoreFloat16sPortable(const float* src, Half* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j].x = Float16Bits(src[j]);
}

}  // namespace detail

template <typename Half>
void LoadFloat16s(const Half* src, float* dst, int64_t n) {
#if OPGEN_CPU_X86
  if (detail::HasF16c()) return detail::LoadFloat16sF16c(src, dst, n);
#endif
  detail::LoadFloat16sPortable(src, dst, n);
}
template <typename Half>
void StoreFloat16s(const float* src, Half* dst, int64_t n) {
#if OPGEN_CPU_X86
  if (detail::HasF16c()) return detail::StoreFloat16sF16c(src, dst, n);
#endif
  detail::StoreFloat16sPortable(src, dst, n);
}

}  // namespace cpu
}  // namespace opgen

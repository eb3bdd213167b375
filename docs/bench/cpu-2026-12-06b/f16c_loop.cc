#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>
#include <immintrin.h>
#include "opgen/math.h"
struct h16 { uint16_t x; };
#define CLONES __attribute__((noinline, target_clones("avx512f", "avx2", "default")))
CLONES void LoadSoft(const h16* s, float* d, int64_t n) { for (int64_t j = 0; j < n; ++j) d[j] = opgen::Float16Value(s[j].x); }
CLONES void StoreSoft(const float* s, h16* d, int64_t n) { for (int64_t j = 0; j < n; ++j) d[j].x = opgen::Float16Bits(s[j]); }
__attribute__((noinline, target("avx512f"))) void LoadHw(const h16* s, float* d, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(d + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(s + j))));
  for (; j < n; ++j) d[j] = opgen::Float16Value(s[j].x);
}
__attribute__((noinline, target("avx512f"))) void StoreHw(const float* s, h16* d, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm256_storeu_si256((__m256i*)(d + j), _mm512_cvtps_ph(_mm512_loadu_ps(s + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; j < n; ++j) d[j].x = opgen::Float16Bits(s[j]);
}
template <class F> double Time(F f) { double best = 1e9; for (int r = 0; r < 50; ++r) { auto t = std::chrono::steady_clock::now(); for (int i = 0; i < 100; ++i) f(); double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count() / 100; if (us < best) best = us; } return best; }
int main1() {
  const int64_t n = 1 << 14;
  std::vector<h16> h(n), h2(n); std::vector<float> f(n), f2(n);
  for (int64_t i = 0; i < n; ++i) h[i].x = uint16_t(i * 7);
  printf("load soft %.2f us  hw %.2f us\n", Time([&]{ LoadSoft(h.data(), f.data(), n); }), Time([&]{ LoadHw(h.data(), f2.data(), n); }));
  printf("store soft %.2f us  hw %.2f us\n", Time([&]{ StoreSoft(f.data(), h.data(), n); }), Time([&]{ StoreHw(f.data(), h2.data(), n); }));
  // exhaustive equality
  std::vector<h16> all(65536); std::vector<float> a(65536), b(65536);
  for (int i = 0; i < 65536; ++i) all[i].x = i;
  LoadSoft(all.data(), a.data(), 65536); LoadHw(all.data(), b.data(), 65536);
  int diff = 0, nandiff = 0; for (int i = 0; i < 65536; ++i) if (memcmp(&a[i], &b[i], 4)) { if (a[i] != a[i]) nandiff++; else diff++; }
  printf("load: %d differ (non-NaN), %d NaN bit patterns differ\n", diff, nandiff);
  // stores: random floats + edge
  const int64_t m = 1 << 24; std::vector<float> fs(m); std::vector<h16> s1(m), s2(m);
  uint32_t seed = 1; for (int64_t i = 0; i < m; ++i) { seed = seed * 1664525u + 1013904223u; uint32_t bits = seed; memcpy(&fs[i], &bits, 4); }
  StoreSoft(fs.data(), s1.data(), m); StoreHw(fs.data(), s2.data(), m);
  diff = 0; nandiff = 0; for (int64_t i = 0; i < m; ++i) if (s1[i].x != s2[i].x) { if (fs[i] != fs[i]) nandiff++; else diff++; }
  printf("store: %d differ (non-NaN), %d NaN differ of %ld\n", diff, nandiff, (long)m);
  return 0;
}
__attribute__((noinline, target("avx,f16c"))) void LoadF16c(const h16* s, float* d, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s + j))));
  for (; j < n; ++j) d[j] = opgen::Float16Value(s[j].x);
}
__attribute__((noinline, target("avx,f16c"))) void StoreF16c(const float* s, h16* d, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm_storeu_si128((__m128i*)(d + j), _mm256_cvtps_ph(_mm256_loadu_ps(s + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; j < n; ++j) d[j].x = opgen::Float16Bits(s[j]);
}
int main2() {
  const int64_t n = 1 << 14;
  std::vector<h16> h(n); std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) h[i].x = uint16_t(i * 7);
  for (int k = 0; k < 3; ++k) {
  printf("load soft %.2f avx512 %.2f f16c %.2f us\n", Time([&]{ LoadSoft(h.data(), f.data(), n); }), Time([&]{ LoadHw(h.data(), f.data(), n); }), Time([&]{ LoadF16c(h.data(), f.data(), n); }));
  printf("store soft %.2f avx512 %.2f f16c %.2f us\n", Time([&]{ StoreSoft(f.data(), h.data(), n); }), Time([&]{ StoreHw(f.data(), h.data(), n); }), Time([&]{ StoreF16c(f.data(), h.data(), n); }));
  }
  return 0;
}
int main() { main2(); return main1(); }

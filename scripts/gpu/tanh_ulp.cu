// Measures opgen::tanh(float) on the device (opgen/math.h) against double precision over every
// one of the 2^32 float bit patterns, next to CUDA's own tanhf:
//   nvcc -O3 -std=c++17 -arch=sm_90 -Itemplates/common/csrc -Itemplates/elementwise/csrc scripts/gpu/tanh_ulp.cu \
//     -o /tmp/tanh_ulp && /tmp/tanh_ulp
// The reference is tanh in double rounded to float (correctly rounded but for inputs whose tanh
// lies within about 2^-29 of a halfway point, where it can be one ulp off). For each function:
// the largest distance in ulps (steps between adjacent floats) from that reference, the largest
// error in ulps of the exact value, and how many inputs are more than 2 ulps away; then the
// special values: every NaN gives NaN, tanh(+-inf) = +-1, tanh(+-0) = +-0 bit for bit. Exits 1
// when opgen::tanh is more than 2 ulps off anywhere or a special value is wrong.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "opgen/math.h"

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t e = (call);                                                           \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

struct Stats {
  unsigned long long worst_distance;  // distance << 32 | input bits
  unsigned long long worst_error;     // error in millionths of an ulp << 32 | input bits
  unsigned long long over_two;        // inputs more than 2 ulps from the reference
  unsigned long long bad_special;     // NaN, inf or zero handled wrongly
};

// Floats in order as integers: adjacent floats differ by 1, -0 and +0 both map to 0.
__device__ int64_t Ordered(float f) {
  const int32_t bits = __float_as_int(f);
  return bits < 0 ? -int64_t{bits & 0x7fffffff} : int64_t{bits};
}

__device__ void Record(Stats* s, uint32_t bits, float x, float got, double exact) {
  if (isnan(x)) {
    if (!isnan(got)) atomicAdd(&s->bad_special, 1ull);
    return;
  }
  if (isinf(x) || x == 0.0f) {
    const float want = isinf(x) ? copysignf(1.0f, x) : x;
    if (__float_as_int(got) != __float_as_int(want)) atomicAdd(&s->bad_special, 1ull);
  }
  const float rounded = __double2float_rn(exact);
  int64_t distance = Ordered(got) - Ordered(rounded);
  if (distance < 0) distance = -distance;
  if (isnan(got)) distance = int64_t{1} << 30;
  const float mag = fabsf(rounded);
  const double ulp = static_cast<double>(nextafterf(mag, INFINITY)) - mag;
  double error = fabs(static_cast<double>(got) - exact) / ulp;
  if (!(error < 4000.0)) error = 4000.0;
  const auto micro = static_cast<unsigned long long>(error * 1e6);
  if (distance > 2) atomicAdd(&s->over_two, 1ull);
  atomicMax(&s->worst_distance, static_cast<unsigned long long>(distance) << 32 | bits);
  atomicMax(&s->worst_error, micro << 32 | bits);
}

__global__ void Sweep(Stats* stats) {
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (uint64_t{1} << 32);
       i += uint64_t{gridDim.x} * blockDim.x) {
    const auto bits = static_cast<uint32_t>(i);
    const float x = __uint_as_float(bits);
    const double exact = ::tanh(static_cast<double>(x));
    Record(&stats[0], bits, x, opgen::tanh(x), exact);
    Record(&stats[1], bits, x, ::tanhf(x), exact);
  }
}

int main() {
  Stats* stats;
  CHECK(cudaMalloc(&stats, 2 * sizeof(Stats)));
  CHECK(cudaMemset(stats, 0, 2 * sizeof(Stats)));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  Sweep<<<132 * 16, 256>>>(stats);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  Stats host[2];
  CHECK(cudaMemcpy(host, stats, sizeof host, cudaMemcpyDeviceToHost));
  const char* names[2] = {"opgen::tanh", "tanhf"};
  for (int f = 0; f < 2; ++f) {
    const Stats& s = host[f];
    const auto at = [](unsigned long long key) {
      const auto bits = static_cast<uint32_t>(key);
      float x;
      std::memcpy(&x, &bits, sizeof x);
      return x;
    };
    std::printf("%-12s all 2^32 floats: max %llu ulp from the rounded double (at x = %.9g), "
                "max error %.3f ulp (at x = %.9g), %llu inputs over 2 ulp, %llu bad NaN/inf/0\n",
                names[f], s.worst_distance >> 32, at(s.worst_distance),
                static_cast<double>(s.worst_error >> 32) * 1e-6, at(s.worst_error), s.over_two,
                s.bad_special);
  }
  std::printf("sweep: %.1f ms\n", ms);
  const bool ok = (host[0].worst_distance >> 32) <= 2 && host[0].bad_special == 0;
  std::printf("opgen::tanh %s\n", ok ? "within 2 ulp, special values right" : "FAILS");
  return ok ? 0 : 1;
}

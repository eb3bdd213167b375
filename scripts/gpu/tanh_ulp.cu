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
// The fast forms for 16-bit types (opgen::lowp::tanh, and the hardware's tanh.approx.f32 for
// comparison) are judged by their largest absolute error instead, and gelu_tanh(u) in the form
// u * lowp::sigmoid(2 z) by its largest absolute error against double over |u| <= 16, and its
// largest error relative to the float16 tolerance, 1e-3 + 1e-3 |gelu|, everywhere; exits 1 when
// lowp::tanh is off by more than 2^-20 or a special value of it is wrong.
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
  unsigned long long worst_abs;       // absolute error in units of 2^-40 << 32 | input bits
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
  double abs_error = fabs(static_cast<double>(got) - exact) * 0x1p40;
  if (!(abs_error < 4e9)) abs_error = 4e9;
  atomicMax(&s->worst_abs, static_cast<unsigned long long>(abs_error) << 32 | bits);
  if (distance > 2) atomicAdd(&s->over_two, 1ull);
  atomicMax(&s->worst_distance, static_cast<unsigned long long>(distance) << 32 | bits);
  atomicMax(&s->worst_error, micro << 32 | bits);
}

__device__ float TanhApprox(float x) {
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(x));
  return t;
}

// gelu_tanh in double, and the fast form the 16-bit kernels may use.
__device__ double GeluExact(double u) {
  return 0.5 * u * (1.0 + ::tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)));
}
__device__ float GeluSigmoid(float u) {
  const float z = 0.7978845608028654f * (u + 0.044715f * u * u * u);
  return u * opgen::lowp::sigmoid(2.0f * z);
}

struct GeluStats {
  unsigned long long worst_abs;  // in units of 2^-40 << 32 | input bits, over |u| <= 16
  unsigned long long worst_tol;  // error / (1e-3 + 1e-3 |gelu|) in millionths << 32 | bits
};

__global__ void SweepGelu(GeluStats* s) {
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (uint64_t{1} << 32);
       i += uint64_t{gridDim.x} * blockDim.x) {
    const auto bits = static_cast<uint32_t>(i);
    const float u = __uint_as_float(bits);
    if (!isfinite(u)) continue;
    const double exact = GeluExact(u);
    if (!isfinite(exact)) continue;
    const double error = fabs(static_cast<double>(GeluSigmoid(u)) - exact);
    if (fabsf(u) <= 16.0f) {
      double a = error * 0x1p40;
      if (!(a < 4e9)) a = 4e9;
      atomicMax(&s->worst_abs, static_cast<unsigned long long>(a) << 32 | bits);
    }
    double t = error / (1e-3 + 1e-3 * fabs(exact)) * 1e6;
    if (!(t < 4e9)) t = 4e9;
    atomicMax(&s->worst_tol, static_cast<unsigned long long>(t) << 32 | bits);
  }
}

__global__ void Sweep(Stats* stats) {
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (uint64_t{1} << 32);
       i += uint64_t{gridDim.x} * blockDim.x) {
    const auto bits = static_cast<uint32_t>(i);
    const float x = __uint_as_float(bits);
    const double exact = ::tanh(static_cast<double>(x));
    Record(&stats[0], bits, x, opgen::tanh(x), exact);
    Record(&stats[1], bits, x, ::tanhf(x), exact);
    Record(&stats[2], bits, x, opgen::lowp::tanh(x), exact);
    Record(&stats[3], bits, x, TanhApprox(x), exact);
  }
}

int main() {
  Stats* stats;
  constexpr int kFunctions = 4;
  CHECK(cudaMalloc(&stats, kFunctions * sizeof(Stats)));
  CHECK(cudaMemset(stats, 0, kFunctions * sizeof(Stats)));
  GeluStats* gelu;
  CHECK(cudaMalloc(&gelu, sizeof(GeluStats)));
  CHECK(cudaMemset(gelu, 0, sizeof(GeluStats)));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  Sweep<<<132 * 16, 256>>>(stats);
  SweepGelu<<<132 * 16, 256>>>(gelu);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  Stats host[kFunctions];
  CHECK(cudaMemcpy(host, stats, sizeof host, cudaMemcpyDeviceToHost));
  GeluStats host_gelu;
  CHECK(cudaMemcpy(&host_gelu, gelu, sizeof host_gelu, cudaMemcpyDeviceToHost));
  const char* names[kFunctions] = {"opgen::tanh", "tanhf", "lowp::tanh", "tanh.approx"};
  const auto at = [](unsigned long long key) {
    const auto bits = static_cast<uint32_t>(key);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    return x;
  };
  for (int f = 0; f < kFunctions; ++f) {
    const Stats& s = host[f];
    std::printf("%-12s all 2^32 floats: max %llu ulp from the rounded double (at x = %.9g), "
                "max error %.3f ulp (at x = %.9g), %llu inputs over 2 ulp, %llu bad NaN/inf/0\n",
                names[f], s.worst_distance >> 32, at(s.worst_distance),
                static_cast<double>(s.worst_error >> 32) * 1e-6, at(s.worst_error), s.over_two,
                s.bad_special);
    std::printf("%-12s max absolute error %.3g = 2^%.2f (at x = %.9g)\n", names[f],
                static_cast<double>(s.worst_abs >> 32) * 0x1p-40,
                std::log2(static_cast<double>((s.worst_abs >> 32) | 1)) - 40, at(s.worst_abs));
  }
  std::printf("gelu u*lowp::sigmoid(2z): max absolute error %.3g over |u| <= 16 (at u = %.9g); "
              "max error / (1e-3 + 1e-3 |gelu|) %.4f (at u = %.9g)\n",
              static_cast<double>(host_gelu.worst_abs >> 32) * 0x1p-40, at(host_gelu.worst_abs),
              static_cast<double>(host_gelu.worst_tol >> 32) * 1e-6, at(host_gelu.worst_tol));
  std::printf("sweep: %.1f ms\n", ms);
  const bool ok = (host[0].worst_distance >> 32) <= 2 && host[0].bad_special == 0;
  std::printf("opgen::tanh %s\n", ok ? "within 2 ulp, special values right" : "FAILS");
  const bool lowp_ok = (host[2].worst_abs >> 32) <= (1ull << 20) && host[2].bad_special == 0;
  std::printf("opgen::lowp::tanh %s\n",
              lowp_ok ? "within 2^-20 absolute, special values right" : "FAILS");
  return ok && lowp_ok ? 0 : 1;
}

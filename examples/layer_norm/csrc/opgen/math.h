// opgen math: the spec's expression functions for float and double, and the glue that calls a
// functor on arrays. Plain C++/CUDA with no Paddle in it, so the launcher can be built and timed
// on its own (scripts/gpu/launcher_bench.cu).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__CUDACC__)
#define OPGEN_HD __host__ __device__ __forceinline__
#else
#define OPGEN_HD inline
#endif

namespace opgen {

// A float attr's value. Paddle's float attrs are 32-bit and its double attrs work in eager mode
// only, so opgen registers a float attr as an int64 attr holding the double's bits. Functors that
// compute in double use it exactly; those computing in float round it as Paddle rounds float attrs.
inline double DoubleFromBits(int64_t bits) {
  static_assert(sizeof(double) == sizeof(int64_t), "a double must be 64 bits");
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// ---- 16-bit stores on the host ----------------------------------------------------------------
// A float rounded to the nearest float16 (ties to even), as its bits: inf past the largest
// float16, subnormals rounded too, NaN a quiet NaN with its sign and the top of its payload (the
// bits x86's F16C conversion gives, which opgen/cpu.h's bulk loop uses where the CPU has it).
// Branch-free enough to vectorize (F. Giesen's float_to_half_fast3_rtne, checked by him over
// every float).
inline uint16_t Float16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint32_t half;
  if (bits >= (127u + 16u) << 23) {  // inf or NaN in float16
    half = bits > 0x7F800000u ? 0x7E00u | ((bits >> 13) & 0x3FFu) : 0x7C00u;
  } else if (bits < (127u - 14u) << 23) {  // a float16 subnormal or zero: the float adder rounds
    constexpr uint32_t kMagicBits = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    float magic, sum;
    std::memcpy(&magic, &kMagicBits, sizeof magic);
    std::memcpy(&sum, &bits, sizeof sum);
    sum += magic;
    std::memcpy(&half, &sum, sizeof half);
    half -= kMagicBits;
  } else {  // normal: rebias the exponent, add half an ulp less one, plus one if the ulp is odd
    const uint32_t odd = (bits >> 13) & 1u;
    bits += ((15u - 127u) << 23) + 0xFFFu + odd;
    half = bits >> 13;
  }
  return static_cast<uint16_t>(half | (sign >> 16));
}

// A float rounded to the nearest bfloat16 (ties to even), as its bits; NaN becomes 0x7FFF.
inline uint16_t BFloat16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(nan ? 0x7FFFu : rounded);
}

// ---- 16-bit loads on the host -----------------------------------------------------------------
// The float a float16's bits hold, exactly: subnormals, infinities and NaNs (kept quiet) too.
// Branch-free and only on normal floats (a subnormal float16 is made as a normal float minus
// 2^-14, so flushing float subnormals to zero changes nothing): loops of it vectorize (F.
// Giesen's half_to_float_fast4).
inline float Float16Value(uint16_t half) {
  const uint32_t shifted = static_cast<uint32_t>(half & 0x7FFFu) << 13;  // exponent and mantissa
  const uint32_t exponent = shifted & (0x7C00u << 13);
  const uint32_t normal = shifted + ((127u - 15u) << 23);                // rebias the exponent
  const uint32_t special = normal + ((128u - 16u) << 23);                // inf and NaN: all ones
  constexpr uint32_t kMagicBits = 113u << 23;                            // 2^-14
  float small, magic;
  const uint32_t small_bits = normal + (1u << 23);
  std::memcpy(&small, &small_bits, sizeof small);
  std::memcpy(&magic, &kMagicBits, sizeof magic);
  small -= magic;  // a subnormal float16 (or zero): its mantissa times 2^-24, exactly
  uint32_t small_result;
  std::memcpy(&small_result, &small, sizeof small_result);
  uint32_t bits = exponent == (0x7C00u << 13) ? special : (exponent == 0 ? small_result : normal);
  bits |= static_cast<uint32_t>(half & 0x8000u) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The float a bfloat16's bits hold, exactly: the top half of a float.
inline float BFloat16Value(uint16_t bfloat) {
  const uint32_t bits = static_cast<uint32_t>(bfloat) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// ---- math type -------------------------------------------------------------------------------
// Functors compute in float for float32, float16 and bfloat16, and in double for float64.
template <typename T>
struct OpMath {
  using type = float;
};
template <>
struct OpMath<double> {
  using type = double;
};
template <typename T>
using OpMathT = typename OpMath<T>::type;

// Whether T is a bfloat16: CUDA's (opgen/cuda.cuh) and Paddle's (opgen/paddle.h) say so.
template <typename T>
struct IsBFloat16 : std::false_type {};

// ---- the functions of the spec's expression language, for float and double -------------------
#define OPGEN_UNARY(name, float_fn, double_fn)                 \
  OPGEN_HD float name(float x) { return float_fn(x); }         \
  OPGEN_HD double name(double x) { return double_fn(x); }
#define OPGEN_BINARY(name, float_fn, double_fn)                          \
  OPGEN_HD float name(float a, float b) { return float_fn(a, b); }       \
  OPGEN_HD double name(double a, double b) { return double_fn(a, b); }

OPGEN_UNARY(abs, ::fabsf, ::fabs)
OPGEN_UNARY(log, ::logf, ::log)
OPGEN_UNARY(log1p, ::log1pf, ::log1p)
OPGEN_UNARY(expm1, ::expm1f, ::expm1)
OPGEN_UNARY(sqrt, ::sqrtf, ::sqrt)
OPGEN_UNARY(erf, ::erff, ::erf)
OPGEN_UNARY(sin, ::sinf, ::sin)
OPGEN_UNARY(cos, ::cosf, ::cos)
OPGEN_UNARY(floor, ::floorf, ::floor)
OPGEN_UNARY(ceil, ::ceilf, ::ceil)
OPGEN_BINARY(pow, ::powf, ::pow)
#undef OPGEN_UNARY
#undef OPGEN_BINARY

// exp. On the host, float exp is a polynomial instead of libm's expf (a call per element):
// plain arithmetic and selects, which the CPU loops vectorize (the build's -fno-trapping-math lets
// the compiler compute both sides of a select). e^x = 2^n e^r with n = round(x log2 e), |r| <=
// ln(2)/2, e^r by its Taylor series to r^7, and 2^n as two powers of two (n / 2 and the rest) so
// that results below 2^-126 are rounded once to a subnormal and 2^n near the top does not
// overflow early. x is clamped to [-104, 89] first, where exp is 0 and inf in float. Within 1.22
// ulp of exp over every float in [-104, 89] (all checked once; tests/test_cpu_kernels.py samples
// them); NaN propagates, exp(-inf) = 0, exp(inf) = inf. No fma (a library call without FMA
// hardware), so every machine and every vector width computes the same bits. On the device it is
// CUDA's expf; OPGEN_FAST_EXP=0 restores expf on the host.
#ifndef OPGEN_FAST_EXP
#define OPGEN_FAST_EXP 1
#endif
OPGEN_HD float exp(float x) {
#if !defined(__CUDA_ARCH__) && OPGEN_FAST_EXP
  const float c = x == x ? (x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x)) : 0.0f;
  const float n = (c * 0x1.715476p+0f + 0x1.8p23f) - 0x1.8p23f;  // round(x log2 e)
  const float r = (c - n * 0x1.62e4p-1f) - n * 0x1.7f7d1cp-20f;   // x - n ln 2, ln 2 in two parts
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t k = static_cast<int32_t>(n);
  const int32_t k1 = k >> 1, k2 = k - k1;  // 2^k = 2^k1 2^k2, each a normal float
  const int32_t b1 = (k1 + 127) << 23, b2 = (k2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  const float e = (p * s1) * s2;
  return x == x ? e : x;
#else
  return ::expf(x);
#endif
}
OPGEN_HD double exp(double x) { return ::exp(x); }

// tanh. On the device, float tanh is libdevice's tanhf formula with less work around it: for
// |x| >= 0.6, 1 - 2 / (2^(2|x| log2 e) + 1) from the hardware's exp2 and reciprocal (exp2
// overflows to inf for |x| > 44, which gives exactly 1, so no clamp); below, x + x^3 P(x^2) with
// libdevice's minimax coefficients; both are computed and one selected (no branch). Within 2 ulp
// of the correctly rounded result over every float (scripts/gpu/tanh_ulp.cu checks all 2^32 on
// the GPU); NaN propagates, tanh(+-inf) = +-1, tanh(-0) = -0. OPGEN_FAST_TANH=0 restores tanhf.
#ifndef OPGEN_FAST_TANH
#define OPGEN_FAST_TANH 1
#endif
OPGEN_HD float tanh(float x) {
#if defined(__CUDA_ARCH__) && OPGEN_FAST_TANH
  const float a = ::fabsf(x);
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(a * 0x1.715476p+1f));  // 2 log2(e)
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.0f));
  const float large = ::copysignf(::fmaf(-2.0f, r, 1.0f), x);
  const float x2 = x * x;
  float p = ::fmaf(0x1.01e104p-6f, x2, -0x1.ac795cp-5f);
  p = ::fmaf(p, x2, 0x1.10b282p-3f);
  p = ::fmaf(p, x2, -0x1.5553dap-2f);
  // (p x^2 + 0) x + x, not p (x^2 x) + x: the + 0 makes -0 * p * x^2 +0, so tanh(-0) is -0.
  const float small = ::fmaf(::fmaf(p, x2, 0.0f), x, x);
  return a >= 0.6f ? large : small;
#elif !defined(__CUDA_ARCH__) && OPGEN_FAST_TANH
  // On the host the same two formulas, with exp from a polynomial instead of libm's expf (a
  // call per element): plain arithmetic and selects, which the CPU loops vectorize. exp(2|x|):
  // 2^n e^r with n = round(2|x| log2 e), |r| <= ln(2)/2, e^r by its Taylor series to r^7;
  // 2|x| is capped at 20, where tanh is 1 in float. Within 2 ulp of tanh rounded to float (all
  // 2^31 floats in [-12, 12] checked once; tests/test_cpu_kernels.py samples them); no fma (a
  // library call without FMA hardware), so every machine computes the same bits.
  const float a = ::fabsf(x);
  const float y = a + a < 20.0f ? a + a : 20.0f;
  const float n = (y * 0x1.715476p+0f + 0x1.8p23f) - 0x1.8p23f;  // round to nearest
  const float r = (y - n * 0x1.62e4p-1f) - n * 0x1.7f7d1cp-20f;   // ln 2 in two parts
  // e^r's series by Estrin's scheme (pairs, then r^2, then r^4): 3 steps deep, not Horner's 7,
  // so the out-of-order core overlaps more elements' chains.
  const float r2 = r * r;
  const float p01 = 1.0f + r, p23 = 0.5f + r * (1.0f / 6);
  const float p45 = 1.0f / 24 + r * (1.0f / 120), p67 = 1.0f / 720 + r * (1.0f / 5040);
  const float p = (p01 + r2 * p23) + (r2 * r2) * (p45 + r2 * p67);
  const int32_t scale_bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const float large = ::copysignf(1.0f - 2.0f / (p * scale + 1.0f), x);
  const float x2 = x * x;
  float q = 0x1.01e104p-6f * x2 - 0x1.ac795cp-5f;
  q = q * x2 + 0x1.10b282p-3f;
  q = q * x2 - 0x1.5553dap-2f;
  const float small = (q * x2 + 0.0f) * x + x;  // + 0: tanh(-0) is -0, as above
  return a >= 0.6f ? large : small;
#else
  return ::tanhf(x);
#endif
}
OPGEN_HD double tanh(double x) { return ::tanh(x); }

// Fast forms for values that are stored in 16 bits (float16, bfloat16), whose tolerance is an
// absolute error of about 1e-3: computed in float, but without the care for the last float bit.
// On the host they are the accurate functions.
namespace lowp {
// tanh(x) = sign(x) (1 - 2 / (2^(2|x| log2 e) + 1)) everywhere: the accurate tanh's large-|x| form
// without its small-|x| polynomial. Absolute error below 2^-20 (scripts/gpu/tanh_ulp.cu checks it
// over every float); relative error grows as |x| -> 0, where a 16-bit type's tolerance is
// absolute. NaN propagates, tanh(+-inf) = +-1, tanh(+-0) = +-0.
OPGEN_HD float tanh(float x) {
#if defined(__CUDA_ARCH__)
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(::fabsf(x) * 0x1.715476p+1f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.0f));
  return ::copysignf(::fmaf(-2.0f, r, 1.0f), x);
#else
  return opgen::tanh(x);  // vectorized, where libm's tanhf is a call per element
#endif
}
OPGEN_HD double tanh(double x) { return ::tanh(x); }
// e^x as 2^(x log2 e) from the hardware's exp2, where libdevice's expf spends 6 more
// instructions on the last bits: relative error below 4e-6 (rounding x log2 e adds up to
// |x| 2^-24 log 2; opgen's docs/benchmarks.md has what was measured), results below 2^-126
// (x < -87.3) flushed to 0. NaN propagates, exp(-inf) = 0, exp(inf) = inf. It makes 16-bit
// softmax kernels bound by memory rather than by exp.
OPGEN_HD float exp(float x) {
#if defined(__CUDA_ARCH__)
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * 0x1.715476p+0f));  // log2(e)
  return e;
#else
  return opgen::exp(x);
#endif
}
OPGEN_HD double exp(double x) { return ::exp(x); }
// 1 / (1 + e^-x) from the hardware's exp2 and reciprocal: relative error of a few float ulps
// for every x (e^-x overflowing to inf gives 0).
OPGEN_HD float sigmoid(float x) {
#if defined(__CUDA_ARCH__)
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * -0x1.715476p+0f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.0f));
  return r;
#else
  return 1.0f / (1.0f + opgen::exp(-x));  // opgen::sigmoid's host form (below)
#endif
}
OPGEN_HD double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }
}  // namespace lowp

// min and max propagate NaN as numpy's minimum and maximum do (fminf/fmaxf return the number, and
// a bare comparison's result would depend on the argument order), and give b when a == b (so
// max(-0, +0) is +0, as numpy's). A select that is the CPU's own min or max instruction (which
// gives b for a NaN in either), then one for a NaN in a: a + b, NaN too, rather than a, or GCC 12
// merges the two selects into one with branchy, ~4x slower vectorized code.
template <typename MT>
OPGEN_HD MT min(MT a, MT b) {
  const MT smaller = a < b ? a : b;
  return a != a ? a + b : smaller;
}
template <typename MT>
OPGEN_HD MT max(MT a, MT b) {
  const MT larger = a > b ? a : b;
  return a != a ? a + b : larger;
}

// min and max where b is the same for every element of a loop (a literal or an attr; the
// expression compiler emits these then), with the same results as min and max above, bit for bit.
// On the CPU the checks of b are the same at every element, so the compiler takes them out of the
// loop and keeps one loop per outcome (GCC's loop unswitching); the usual one is a single min or
// max instruction with b first, which gives a for a NaN in a, plus + 0 where b is +0 (a's -0
// becomes b's +0, numpy's answer at a tie): min(max(x, 0), threshold) takes half the
// instructions a vector that the checked form takes (opgen's docs/benchmarks.md, "CPU kernels").
// The GPU is bound by memory there and keeps min and max.
template <typename MT>
OPGEN_HD MT min_uniform(MT a, MT b) {
#if defined(__CUDA_ARCH__)
  return min(a, b);
#else
  if (b != b || (b == MT(0) && std::signbit(b))) return min(a, b);
  const MT smaller = b < a ? b : a;
  return b == MT(0) ? smaller + MT(0) : smaller;
#endif
}
template <typename MT>
OPGEN_HD MT max_uniform(MT a, MT b) {
#if defined(__CUDA_ARCH__)
  return max(a, b);
#else
  if (b != b || (b == MT(0) && std::signbit(b))) return max(a, b);
  const MT larger = b > a ? b : a;
  return b == MT(0) ? larger + MT(0) : larger;
#endif
}

OPGEN_HD float rsqrt(float x) {
#if defined(__CUDA_ARCH__)
  return ::rsqrtf(x);
#else
  return 1.0f / ::sqrtf(x);
#endif
}
OPGEN_HD double rsqrt(double x) {
#if defined(__CUDA_ARCH__)
  return ::rsqrt(x);
#else
  return 1.0 / ::sqrt(x);
#endif
}
// sigmoid through opgen::exp: on the host its vectorized polynomial, not a libm call per element.
OPGEN_HD float sigmoid(float x) { return 1.0f / (1.0f + opgen::exp(-x)); }
OPGEN_HD double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }

// opgen::exp<T>(x), opgen::tanh<T>(x) and opgen::sigmoid<T>(x): the function for values stored
// as T, which is how generated functors call them. A float16 or bfloat16 result keeps about 3
// significant digits, so for those the GPU takes opgen::lowp's fast forms (tanh and sigmoid:
// absolute error below 2^-20; exp: relative error below 4e-6); every other dtype, and the CPU,
// take the accurate functions above.
template <typename T>
constexpr bool kLowPrecision = sizeof(T) == 2 && std::is_same<OpMathT<T>, float>::value;
template <typename T>
OPGEN_HD OpMathT<T> exp(OpMathT<T> x) {
  if constexpr (kLowPrecision<T>) {
    return lowp::exp(x);
  } else {
    return opgen::exp(x);
  }
}
template <typename T>
OPGEN_HD OpMathT<T> tanh(OpMathT<T> x) {
  if constexpr (kLowPrecision<T>) {
    return lowp::tanh(x);
  } else {
    return opgen::tanh(x);
  }
}
template <typename T>
OPGEN_HD OpMathT<T> sigmoid(OpMathT<T> x) {
  if constexpr (kLowPrecision<T>) {
    return lowp::sigmoid(x);
  } else {
    return opgen::sigmoid(x);
  }
}

template <typename MT>
OPGEN_HD MT where(bool condition, MT a, MT b) {
  return condition ? a : b;
}

// softplus, square, clamp, sign, tan, atan, log2, exp2; and cube, which x ** 3 is emitted as.
// NaN in any argument gives NaN, as in numpy.
OPGEN_HD float tan(float x) { return ::tanf(x); }
OPGEN_HD double tan(double x) { return ::tan(x); }
OPGEN_HD float atan(float x) { return ::atanf(x); }
OPGEN_HD double atan(double x) { return ::atan(x); }
OPGEN_HD float log2(float x) { return ::log2f(x); }
OPGEN_HD double log2(double x) { return ::log2(x); }
OPGEN_HD float exp2(float x) { return ::exp2f(x); }
OPGEN_HD double exp2(double x) { return ::exp2(x); }
// log(1 + exp(x)) without overflow for large x or loss of exp(x) for very negative x.
OPGEN_HD float softplus(float x) {
  return x > 0.0f ? x + ::log1pf(::expf(-x)) : ::log1pf(::expf(x));
}
OPGEN_HD double softplus(double x) { return x > 0.0 ? x + ::log1p(::exp(-x)) : ::log1p(::exp(x)); }
template <typename MT>
OPGEN_HD MT square(MT x) {
  return x * x;
}
template <typename MT>
OPGEN_HD MT cube(MT x) {
  return x * x * x;
}
// numpy's clip: max(x, lo), then min(that, hi), so hi wins when lo > hi; a NaN anywhere is kept
// (each comparison with it is false).
template <typename MT>
OPGEN_HD MT clamp(MT x, MT lo, MT hi) {
  return min(max(x, lo), hi);
}
// clamp with lo and hi the same for every element (see min_uniform).
template <typename MT>
OPGEN_HD MT clamp_uniform(MT x, MT lo, MT hi) {
  return min_uniform(max_uniform(x, lo), hi);
}
// -1, 0 or 1; NaN stays NaN (and -0 stays -0).
template <typename MT>
OPGEN_HD MT sign(MT x) {
  return x > MT(0) ? MT(1) : (x < MT(0) ? MT(-1) : x);
}

// ---- calling a functor with its inputs and outputs as separate arguments ---------------------
// A functor reads `operator()(MT in0, ..., MT& out0, ...)`; the launchers hold arrays.
template <typename F, typename MT, int kIn, int kOut, std::size_t... I, std::size_t... O>
OPGEN_HD void ApplyImpl(const F& f, const MT (&in)[kIn], MT (&out)[kOut],
                        std::index_sequence<I...>, std::index_sequence<O...>) {
  f(in[I]..., out[O]...);
}
template <typename F, typename MT, int kIn, int kOut>
OPGEN_HD void Apply(const F& f, const MT (&in)[kIn], MT (&out)[kOut]) {
  ApplyImpl(f, in, out, std::make_index_sequence<kIn>{}, std::make_index_sequence<kOut>{});
}

// A fixed-size array usable on host and device: a functor's several results at once
// (`return {a, b};`), or pointers by role. N may be 0 (it then holds one unused slot, as C++ has
// no empty arrays).
template <typename T, int N>
struct Array {
  T v[N > 0 ? N : 1];
  OPGEN_HD T& operator[](int i) { return v[i]; }
  OPGEN_HD const T& operator[](int i) const { return v[i]; }
};

// Pointers to the inputs or outputs of one launch, passed to kernels by value.
template <typename T, int N>
struct Pointers {
  T* at[N];
};

}  // namespace opgen

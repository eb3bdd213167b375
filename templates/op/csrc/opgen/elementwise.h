// opgen elementwise runtime: the part of every generated op that is not the op's own math.
// Shared by the CPU kernels (compiled by the host compiler) and the CUDA kernels (nvcc).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paddle/extension.h"

#if defined(__CUDACC__)
#define OPGEN_HD __host__ __device__ __forceinline__
#else
#define OPGEN_HD inline
#endif

namespace opgen {

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

// ---- the functions of the spec's expression language, for float and double -------------------
#define OPGEN_UNARY(name, float_fn, double_fn)                 \
  OPGEN_HD float name(float x) { return float_fn(x); }         \
  OPGEN_HD double name(double x) { return double_fn(x); }
#define OPGEN_BINARY(name, float_fn, double_fn)                          \
  OPGEN_HD float name(float a, float b) { return float_fn(a, b); }       \
  OPGEN_HD double name(double a, double b) { return double_fn(a, b); }

OPGEN_UNARY(abs, ::fabsf, ::fabs)
OPGEN_UNARY(exp, ::expf, ::exp)
OPGEN_UNARY(log, ::logf, ::log)
OPGEN_UNARY(log1p, ::log1pf, ::log1p)
OPGEN_UNARY(expm1, ::expm1f, ::expm1)
OPGEN_UNARY(sqrt, ::sqrtf, ::sqrt)
OPGEN_UNARY(tanh, ::tanhf, ::tanh)
OPGEN_UNARY(erf, ::erff, ::erf)
OPGEN_UNARY(sin, ::sinf, ::sin)
OPGEN_UNARY(cos, ::cosf, ::cos)
OPGEN_UNARY(floor, ::floorf, ::floor)
OPGEN_UNARY(ceil, ::ceilf, ::ceil)
OPGEN_BINARY(pow, ::powf, ::pow)
#undef OPGEN_UNARY
#undef OPGEN_BINARY

// min and max: one instruction on the GPU; on the CPU a comparison the compiler vectorizes,
// where fminf/fmaxf would be library calls (their NaN rules block vectorization).
template <typename MT>
OPGEN_HD MT min(MT a, MT b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<MT, float>) return ::fminf(a, b);
  else return ::fmin(a, b);
#else
  return b < a ? b : a;
#endif
}
template <typename MT>
OPGEN_HD MT max(MT a, MT b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<MT, float>) return ::fmaxf(a, b);
  else return ::fmax(a, b);
#else
  return a < b ? b : a;
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
OPGEN_HD float sigmoid(float x) { return 1.0f / (1.0f + ::expf(-x)); }
OPGEN_HD double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }
template <typename MT>
OPGEN_HD MT where(bool condition, MT a, MT b) {
  return condition ? a : b;
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

// Pointers to the inputs or outputs of one launch, passed to kernels by value.
template <typename T, int N>
struct Pointers {
  T* at[N];
};

// The data of each tensor of `tensors`, as T.
template <typename T, int N>
Pointers<const T, N> ConstData(const std::vector<paddle::Tensor>& tensors) {
  Pointers<const T, N> data;
  for (int k = 0; k < N; ++k) data.at[k] = tensors[k].template data<T>();
  return data;
}
template <typename T, int N>
Pointers<T, N> MutableData(std::vector<paddle::Tensor>& tensors) {
  Pointers<T, N> data;
  for (int k = 0; k < N; ++k) data.at[k] = tensors[k].template data<T>();
  return data;
}

// ---- dtypes ----------------------------------------------------------------------------------
template <typename... Ts>
struct Dtypes {};

template <typename T>
constexpr paddle::DataType DataTypeOf();
template <>
constexpr paddle::DataType DataTypeOf<float>() { return paddle::DataType::FLOAT32; }
template <>
constexpr paddle::DataType DataTypeOf<double>() { return paddle::DataType::FLOAT64; }
template <>
constexpr paddle::DataType DataTypeOf<paddle::float16>() { return paddle::DataType::FLOAT16; }
template <>
constexpr paddle::DataType DataTypeOf<paddle::bfloat16>() { return paddle::DataType::BFLOAT16; }

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls `body(TypeTag<T>{})` for the T of `dtype` among the op's dtypes, or fails naming them.
template <typename... Ts, typename Body>
void Dispatch(Dtypes<Ts...>, paddle::DataType dtype, const char* op, Body&& body) {
  const bool found = ((dtype == DataTypeOf<Ts>() && (body(TypeTag<Ts>{}), true)) || ...);
  if (!found) {
    std::ostringstream supported;
    ((supported << " " << DataTypeOf<Ts>()), ...);
    PD_THROW(op, ": dtype ", dtype, " is not supported; supported:", supported.str());
  }
}

// ---- tensors ---------------------------------------------------------------------------------
inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// Paddle 3 tensors may be strided views; Paddle 2.6 has no contiguous() (and no strided views
// reach custom ops). Pick whichever this Paddle offers.
template <typename Tensor>
auto Contiguous(const Tensor& t, int) -> decltype(t.contiguous()) {
  return t.is_contiguous() ? t : t.contiguous();
}
template <typename Tensor>
Tensor Contiguous(const Tensor& t, long) {
  return t;
}

// Elementwise inputs share one shape, dtype and device. Returns them contiguous.
template <std::size_t kIn>
std::vector<paddle::Tensor> CheckInputs(const char* op, const paddle::Tensor (&inputs)[kIn]) {
  std::vector<paddle::Tensor> checked;
  checked.reserve(kIn);
  const paddle::Tensor& first = inputs[0];
  for (std::size_t i = 0; i < kIn; ++i) {
    const paddle::Tensor& t = inputs[i];
    PD_CHECK(t.numel() == 0 || t.initialized(), op, ": input #", i, " is not initialized");
    if (i > 0) {
      PD_CHECK(t.shape() == first.shape(), op, ": input #", i, " has shape ",
               ShapeString(t.shape()), " but input #0 has ", ShapeString(first.shape()),
               "; elementwise inputs must share one shape");
      PD_CHECK(t.dtype() == first.dtype(), op, ": input #", i, " is ", t.dtype(),
               " but input #0 is ", first.dtype());
      PD_CHECK(t.place() == first.place(), op, ": input #", i, " is on ", t.place(),
               " but input #0 is on ", first.place());
    }
    checked.push_back(t.numel() == 0 ? t : Contiguous(t, 0));
  }
  return checked;
}

template <std::size_t kOut>
std::vector<paddle::Tensor> EmptyLike(const paddle::Tensor& like) {
  std::vector<paddle::Tensor> outputs;
  outputs.reserve(kOut);
  for (std::size_t i = 0; i < kOut; ++i) {
    outputs.push_back(paddle::empty(like.shape(), like.dtype(), like.place()));
  }
  return outputs;
}

namespace cpu {

template <typename T, typename F, int kIn, int kOut>
void Loop(const F& f, int64_t n, Pointers<const T, kIn> in, Pointers<T, kOut> out) {
  using MT = OpMathT<T>;
  for (int64_t i = 0; i < n; ++i) {
    MT args[kIn];
    MT results[kOut];
    for (int k = 0; k < kIn; ++k) args[k] = static_cast<MT>(in.at[k][i]);
    Apply(f, args, results);
    for (int k = 0; k < kOut; ++k) out.at[k][i] = static_cast<T>(results[k]);
  }
}

// Runs `Functor<MT>(attrs...)` over CPU tensors: checks the inputs, allocates kOut outputs
// shaped like them, dispatches over Dtypes and loops.
template <typename DtypeList, template <typename> class Functor, int kOut, std::size_t kIn,
          typename... Attrs>
std::vector<paddle::Tensor> Elementwise(const char* op, const char* kernel,
                                        const paddle::Tensor (&inputs)[kIn],
                                        const Attrs&... attrs) {
  std::vector<paddle::Tensor> ins = CheckInputs(op, inputs);
  PD_CHECK(ins[0].is_cpu(), op, ": ", kernel, " expected CPU tensors, got ", ins[0].place());
  std::vector<paddle::Tensor> outs = EmptyLike<kOut>(ins[0]);
  const int64_t n = ins[0].numel();
  if (n == 0) return outs;
  Dispatch(DtypeList{}, ins[0].dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = ConstData<T, int(kIn)>(ins);
    const auto out = MutableData<T, kOut>(outs);
    Loop<T>(Functor<OpMathT<T>>(attrs...), n, in, out);
  });
  return outs;
}

}  // namespace cpu
}  // namespace opgen

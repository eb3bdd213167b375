// opgen's Paddle glue that every kind's runtime shares: float attrs carried as bits, dtype
// dispatch, dense tensors, and poisoned outputs for the tests. Errors go through opgen/error.h.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "paddle/extension.h"

#include "opgen/error.h"
#include "opgen/math.h"

namespace opgen {

// opgen::DoubleFromBits (a float attr's value from its 64 bits) is in opgen/math.h.

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
    std::string supported;
    ((supported += std::string(supported.empty() ? "" : ", ") + DtypeName(DataTypeOf<Ts>())), ...);
    Fail(op, ": dtype ", dtype, " is not supported; supported: ", supported);
  }
}

// ---- tensors ---------------------------------------------------------------------------------
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

// Outputs are filled with 0xFF bytes (NaN in every float dtype) before the kernel runs when the
// environment sets OPGEN_POISON_OUTPUTS=1, as the generated tests do: an element the kernel
// never writes then fails the comparison instead of passing with whatever memory held.
inline bool PoisonOutputs() {
  static const bool poison = [] {
    const char* value = std::getenv("OPGEN_POISON_OUTPUTS");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return poison;
}

inline int64_t Bytes(const paddle::Tensor& t) {
  return t.numel() * static_cast<int64_t>(phi::SizeOf(t.dtype()));
}

}  // namespace opgen

// opgen's Paddle glue that every kind's runtime shares: dtype dispatch, dense tensors, poisoned
// outputs for the tests, outputs Paddle 2.6 takes when empty (with a custom op's data-dependent
// ones) and the dims a custom op's output shapes compute. Errors go through opgen/error.h.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "paddle/extension.h"

#include "opgen/cpu.h"
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

template <>
struct IsBFloat16<paddle::bfloat16> : std::true_type {};

template <typename T>
struct TypeTag {
  using type = T;
};

// ---- 16-bit values on the host ---------------------------------------------------------------
// The CPU loops (every kind's) read and store Paddle's 16-bit dtypes through opgen/math.h's
// conversions rather than Paddle's host ones: those run an element at a time, Paddle 2.6's float
// -> float16 rounds some ties away from even (1 ulp off in places, against numpy; measured
// 2026-12-01) and garbles |value| below about 2^-64 (3.6e-26 became 6.6e-07), and its float ->
// bfloat16 switches over std::fpclassify, which keeps store loops from vectorizing.
namespace cpu {
template <>
struct LoadAs<paddle::float16> {
  static float From(paddle::float16 value) { return Float16Value(value.x); }
};
template <>
struct LoadAs<paddle::bfloat16> {
  static float From(paddle::bfloat16 value) { return BFloat16Value(value.x); }
};
template <>
struct StoreAs<paddle::float16> {
  static paddle::float16 From(float r) {
    paddle::float16 stored;
    stored.x = Float16Bits(r);
    return stored;
  }
};
template <>
struct StoreAs<paddle::bfloat16> {
  static paddle::bfloat16 From(float r) {
    paddle::bfloat16 stored;
    stored.x = BFloat16Bits(r);
    return stored;
  }
};
template <>
inline void LoadChunk<paddle::float16>(const paddle::float16* src, float* dst, int64_t n) {
  LoadFloat16s(src, dst, n);
}
template <>
inline void StoreChunk<paddle::float16>(const float* src, paddle::float16* dst, int64_t n) {
  StoreFloat16s(src, dst, n);
}
}  // namespace cpu

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

// Fails as Dispatch does where `dtype` is not one of the op's: for a call that needs no kernel (an
// empty output), which must refuse what a kernel would.
template <typename... Ts>
void CheckDtype(Dtypes<Ts...> dtypes, paddle::DataType dtype, const char* op) {
  Dispatch(dtypes, dtype, op, [](auto) {});
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

// ---- outputs ---------------------------------------------------------------------------------
// A new tensor for an op to write, uninitialized: paddle::empty, and for CPU tensors of 8 MB and
// more a request for transparent huge pages over their memory. Such buffers come fresh from mmap
// on every call (glibc maps allocations over its mmap threshold, 32 MB at most, and unmaps them
// when freed), so the kernel's first writes fault them in 4 KB at a time: at 2^24 float32
// elements that was most of an elementwise op's time. With the request (where the system's
// transparent_hugepage is `madvise` or `always`) the same writes fault 2 MB at a time (what
// that saved is in opgen's docs/benchmarks.md, "CPU kernels").
// PyTorch's CPU allocator has the same request behind THP_MEM_ALLOC_ENABLE.
inline paddle::Tensor EmptyOutput(const std::vector<int64_t>& shape, paddle::DataType dtype,
                                  const paddle::Place& place) {
  paddle::Tensor tensor = paddle::empty(shape, dtype, place);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t(1) << 21;
  const int64_t bytes = Bytes(tensor);
  if (tensor.is_cpu() && bytes >= int64_t(4 * kHugePage)) {
    const auto begin = reinterpret_cast<uintptr_t>(tensor.data());
    const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);  // whole pages inside
    const uintptr_t last = (begin + static_cast<uintptr_t>(bytes)) & ~(kHugePage - 1);
    if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
#endif
  return tensor;
}

// An op's output of `shape`, not initialized. For a shape with no elements paddle::empty gives a
// tensor without memory, which Paddle 2.6 refuses as an op's output ("output is not initialized"
// in eager mode, "meta data must be valid" in static programs): there such a tensor gets one
// element's memory, then the empty shape, through Tensor::reshape (which Paddle calls deprecated,
// and logs a warning about once). Paddle 3 takes the tensor without memory (3.3.1: eager, static,
// to_static, jit.load); its paddle/extension.h defines CUSTOM_OP_WITH_SPMD, 2.6's does not.
inline paddle::Tensor AllocateOutput(const std::vector<int64_t>& shape, paddle::DataType dtype,
                                     const paddle::Place& place) {
#ifndef CUSTOM_OP_WITH_SPMD
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  if (n == 0) {
    paddle::Tensor tensor = paddle::empty({1}, dtype, place);
    tensor.reshape(shape);
    return tensor;
  }
#endif
  return EmptyOutput(shape, dtype, place);
}

// Whether none of `tensors` has an element (an undefined tensor has none). Where no output of a
// custom op has one, its entry points return without a kernel.
template <typename... Tensors>
bool NoElements(const Tensors&... tensors) {
  return ((!tensors.defined() || tensors.numel() == 0) && ...);
}

// A tensor of zeros like `like` (a gradient where the op's outputs had no element).
inline paddle::Tensor ZerosLike(const paddle::Tensor& like) {
  return paddle::experimental::zeros(like.shape(), like.dtype(), like.place());
}

// ---- shape inference ------------------------------------------------------------------------
// An InferShape function must not throw: Paddle aborts the process on an exception from one
// (std::terminate; Paddle 3.3.1 building a static program, measured 2026-12-05). Its body runs
// inside this: where it refuses the inputs (opgen::Fail), each of the `outputs` shapes is given
// as not known yet ([-1]), and the kernels refuse the inputs, with their error, when the program
// runs. (The Python wrappers check a static graph's variables first, as far as they are known.)
template <typename Infer>
std::vector<std::vector<int64_t>> InferShapesOrUnknown(std::size_t outputs, Infer&& infer) {
  try {
    return infer();
  } catch (...) {
    return std::vector<std::vector<int64_t>>(outputs, std::vector<int64_t>{-1});
  }
}

// ---- a custom op's inputs ------------------------------------------------------------------
// What a custom op's CheckInputs and CheckShapes (its .cc) refuse before a kernel or InferShape
// reads a dim: `spec` is the input's shape as the spec writes it ("[V, D]"). InferShape sees a
// static graph's dims not known yet as -1, which agrees with any size.

// `shape` has `rank` dims, or at least `rank` where the spec's shape starts with `...`.
inline void CheckRank(const char* op, const char* input, const std::vector<int64_t>& shape,
                      std::size_t rank, bool at_least, const char* spec) {
  if (at_least ? shape.size() >= rank : shape.size() == rank) return;
  Fail(op, ": ", input, " must have ", at_least ? "at least " : "", rank,
       rank == 1 ? " dim " : " dims ", spec,
       ", got shape ", ShapeString(shape));
}

// A dim the spec fixes: `dim` ("x.shape[1]" in `what`) is `size`.
inline void CheckDim(const char* op, const char* what, int64_t dim, int64_t size,
                     const char* spec) {
  if (dim == size || dim == -1) return;
  Fail(op, ": ", what, " must be ", size, " ", spec, ", got ", dim);
}

// Two dims the spec names alike (`name`: "D") agree.
inline void CheckSameDim(const char* op, const char* name, const char* what, int64_t dim,
                         const char* other_what, int64_t other) {
  if (dim == other || dim == -1 || other == -1) return;
  Fail(op, ": ", what, " (", name, ") is ", dim, " but ", other_what, " (", name, ") is ", other);
}

// An optional input's shape, as InferShape receives it.
inline paddle::optional<std::vector<int64_t>> ShapeOf(const paddle::optional<paddle::Tensor>& t) {
  if (!t) return paddle::none;
  return t->shape();
}

// An input whose dtype the spec fixes (`int64`) or ties to another input's (`same as x`): the
// dispatch over the listed dtypes does not see it, so a kernel would read it as the wrong type.
inline void CheckDtype(const char* op, const char* input, paddle::DataType dtype,
                       paddle::DataType expected) {
  if (dtype != expected) Fail(op, ": ", input, " is ", dtype, "; it must be ", expected);
}

inline void CheckSameDtype(const char* op, const char* input, paddle::DataType dtype,
                           const char* other, paddle::DataType expected) {
  if (dtype != expected) {
    Fail(op, ": ", input, " is ", dtype, "; it must have the dtype of ", other, " (", expected,
         ")");
  }
}

// The inputs are on one device, `first`'s: the kernels read them all there (a custom op's, and
// the row-wise kind's, checks).
inline void CheckSamePlace(const char* op, const char* input, const paddle::Tensor& tensor,
                           const char* first_name, const paddle::Tensor& first) {
  if (tensor.place() != first.place()) {
    Fail(op, ": ", input, " is on ", tensor.place(), " but ", first_name, " is on ",
         first.place(), "; the inputs must be on one device");
  }
}

// A gradient a custom op's backward reads (`grad`, of `output`): Paddle passes paddle.grad's
// grad_outputs on unchecked, and a kernel would read past a smaller one. It has the output's shape
// (`shape`; null where only the data gives it) and dtype (UNDEFINED: not checked, an integer
// output's) and is on `first`'s device; an absent one is left to the kernels.
inline void CheckGrad(const char* op, const char* grad, const paddle::Tensor& tensor,
                      const char* output, const std::vector<int64_t>* shape,
                      paddle::DataType dtype, const char* first_name,
                      const paddle::Tensor& first) {
  if (!tensor.defined()) return;
  if (shape != nullptr && tensor.shape() != *shape) {
    Fail(op, ": ", grad, " has shape ", ShapeString(tensor.shape()), "; it must have ", output,
         "'s, ", ShapeString(*shape));
  }
  if (dtype != paddle::DataType::UNDEFINED && tensor.dtype() != dtype) {
    Fail(op, ": ", grad, " is ", tensor.dtype(), "; it must have ", output, "'s dtype, ", dtype);
  }
  CheckSamePlace(op, grad, tensor, first_name, first);
}

// ---- output shapes a spec computes ---------------------------------------------------------
// `shape` names the op, the output and its spec shape ("custom_pad: out's shape [D + 2 * p]") for
// the error each raises.

// a // b of dims as Python computes it, rounded toward minus infinity (C++'s / truncates), so
// InferShape, the kernels and the Python wrapper agree; a division by 0 raises, and so does the
// one quotient int64_t has no room for.
inline int64_t FloorDiv(int64_t a, int64_t b, const char* shape) {
  if (b == 0) Fail(shape, ": a dim is divided by 0 for these inputs");
  if (b == -1 && a == std::numeric_limits<int64_t>::min()) {
    Fail(shape, ": a dim is more than 2^63 - 1 for these inputs");
  }
  const int64_t quotient = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient;
}

// Whether one of `dims` is not known yet: -1, as InferShape sees a static graph's free dims.
inline bool AnyUnknown(std::initializer_list<int64_t> dims) {
  for (const int64_t d : dims) {
    if (d < 0) return true;
  }
  return false;
}

// A dim an output's spec shape computes, refused where it is negative for these inputs.
inline int64_t ComputedDim(int64_t dim, const char* shape) {
  if (dim < 0) Fail(shape, ": a dim is ", dim, " for these inputs; a size is at least 0");
  return dim;
}

// A custom op's output whose spec shape has sizes only the data gives (-1), allocated by its
// kernels once they know them: `shape` must have the rank of the spec's shape (`spec`, which is
// `expected` for these inputs) and its dims where those are not -1.
inline paddle::Tensor AllocateDataDependent(const char* op, const char* output, const char* spec,
                                            const std::vector<int64_t>& expected,
                                            const std::vector<int64_t>& shape,
                                            paddle::DataType dtype, const paddle::Place& place) {
  const std::string asked = std::string(op) + ": the kernel allocated " + output + " as " +
                            ShapeString(shape) + ", but " + output + "'s shape is " + spec;
  if (shape.size() != expected.size()) {
    Fail(asked, ": ", expected.size(), " dims (", ShapeString(expected), " for these inputs)");
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (expected[i] >= 0 && shape[i] != expected[i]) {
      Fail(asked, " (", ShapeString(expected), " for these inputs): dim ", i, " is ",
           expected[i]);
    }
    if (shape[i] < 0) Fail(asked, ": a size is at least 0");
  }
  return AllocateOutput(shape, dtype, place);
}

// After a custom op's kernel: `tensor`, an output the kernel allocates (its spec shape `spec` has
// a size only the data gives), was allocated, through ForwardArgs' `allocate`.
inline void CheckAllocated(const char* op, const char* kernel, const paddle::Tensor& tensor,
                           const char* output, const char* spec, const char* allocate) {
  if (!tensor.defined()) {
    Fail(op, ": ", kernel, " did not allocate ", output, " (", spec, ", a size only the data ",
         "gives): call args.", allocate, "(shape) once the kernel knows its shape");
  }
}

}  // namespace opgen

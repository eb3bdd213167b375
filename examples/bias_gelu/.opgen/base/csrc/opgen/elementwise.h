// opgen elementwise runtime, Paddle side: dtype dispatch, input checks, broadcasting, output
// allocation and the CPU loops. The op's math (opgen/math.h) and the launchers (opgen/launch.cuh,
// opgen/broadcast.h and .cuh) do not see Paddle; this header and opgen/elementwise.cuh connect
// them to paddle::Tensor. Errors go through opgen/error.h (never PD_CHECK or PD_THROW, see there).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "paddle/extension.h"

#include "opgen/broadcast.h"
#include "opgen/error.h"
#include "opgen/math.h"
#include "opgen/paddle.h"

namespace opgen {

// The data of each tensor of `tensors`, as T; null for an absent tensor (a missing output
// gradient), which the loops read as zeros.
template <typename T, int N>
Pointers<const T, N> ConstData(const std::vector<paddle::Tensor>& tensors) {
  Pointers<const T, N> data;
  for (int k = 0; k < N; ++k) {
    data.at[k] = tensors[k].defined() ? tensors[k].template data<T>() : nullptr;
  }
  return data;
}
template <typename T, int N>
Pointers<T, N> MutableData(std::vector<paddle::Tensor>& tensors) {
  Pointers<T, N> data;
  for (int k = 0; k < N; ++k) data.at[k] = tensors[k].template data<T>();
  return data;
}

// The first input that is present: Paddle passes an undefined tensor for the gradient of an
// output that the loss does not use.
template <std::size_t kIn>
const paddle::Tensor& FirstPresent(const char* op, const paddle::Tensor (&inputs)[kIn]) {
  for (const paddle::Tensor& t : inputs) {
    if (t.defined()) return t;
  }
  Fail(op, ": every input is missing");
}

// The names of a functor's inputs, in its order, as error messages give them: the generated
// functor's kInputs, checked against the tensors it is run over.
template <template <typename> class Functor, std::size_t kIn>
constexpr const char* const (&InputNames())[kIn] {
  static_assert(std::size(Functor<float>::kInputs) == kIn,
                "a functor runs over as many tensors as it names inputs");
  return Functor<float>::kInputs;
}

// Elementwise inputs share one dtype and device; their shapes broadcast (see PlanOf). Returns
// them contiguous; an absent input (see FirstPresent) stays absent and reads as zeros, without
// being materialized. `names`: the inputs' names, for the errors.
template <std::size_t kIn>
std::vector<paddle::Tensor> CheckInputs(const char* op, const char* const (&names)[kIn],
                                        const paddle::Tensor (&inputs)[kIn]) {
  std::vector<paddle::Tensor> checked;
  checked.reserve(kIn);
  const paddle::Tensor& first = FirstPresent(op, inputs);
  std::size_t first_index = 0;
  while (&inputs[first_index] != &first) ++first_index;
  for (std::size_t i = 0; i < kIn; ++i) {
    const paddle::Tensor& t = inputs[i];
    if (!t.defined()) {
      checked.push_back(t);
      continue;
    }
    if (t.numel() != 0 && !t.initialized()) Fail(op, ": ", names[i], " holds no data");
    if (t.dtype() != first.dtype()) {
      Fail(op, ": ", names[i], " is ", t.dtype(), " but ", names[first_index], " is ",
           first.dtype(), "; elementwise inputs must share one dtype");
    }
    if (t.place() != first.place()) {
      Fail(op, ": ", names[i], " is on ", t.place(), " but ", names[first_index], " is on ",
           first.place(), "; elementwise inputs must be on one device");
    }
    checked.push_back(t.numel() == 0 ? t : Contiguous(t, 0));
  }
  return checked;
}

// How `shapes` broadcast (numpy's rules); fails naming the op, the inputs (`names`) and their
// shapes when they do not.
template <int kIn>
BroadcastPlan<kIn> PlanOfShapes(const char* op, const char* const (&names)[kIn],
                                const std::vector<int64_t> (&shapes)[kIn]) {
  BroadcastPlan<kIn> plan;
  const std::string error = MakeBroadcastPlan(shapes, &plan, names);
  if (!error.empty()) Fail(op, ": ", error);
  return plan;
}

// How the inputs broadcast (numpy's rules) to the output; an absent input counts as shaped like
// `absent_like`. Fails naming the op and the shapes when they do not broadcast.
template <int kIn>
BroadcastPlan<kIn> PlanOf(const char* op, const char* const (&names)[kIn],
                          const std::vector<paddle::Tensor>& inputs,
                          const std::vector<int64_t>& absent_like) {
  std::vector<int64_t> shapes[kIn];
  for (int k = 0; k < kIn; ++k) {
    shapes[k] = inputs[k].defined() ? inputs[k].shape() : absent_like;
  }
  return PlanOfShapes(op, names, shapes);
}

// The output shape for InferShape: numpy's broadcast of `shapes`, where -1 is a dim not known
// until run time (it broadcasts with 1 to -1, and with anything else to that). Where the shapes
// do not broadcast it is not known either ([-1]): an InferShape must not throw (Paddle aborts the
// process, 3.3.1 building a static program: see InferShapesOrUnknown, opgen/paddle.h), and the
// kernels refuse the inputs, naming them, when the program runs.
template <std::size_t kIn>
std::vector<int64_t> BroadcastShapeOrUnknown(const std::vector<int64_t> (&shapes)[kIn]) {
  std::size_t rank = 0;
  for (const std::vector<int64_t>& shape : shapes) rank = std::max(rank, shape.size());
  std::vector<int64_t> out(rank, 1);
  for (std::size_t k = 0; k < kIn; ++k) {
    const std::size_t missing = rank - shapes[k].size();
    for (std::size_t d = 0; d < shapes[k].size(); ++d) {
      const int64_t size = shapes[k][d];
      int64_t& result = out[missing + d];
      if (size == 1 || size == result) continue;
      if (result == 1 || result == -1) {
        result = size;
      } else if (size != -1) {
        return {-1};
      }
    }
  }
  return out;
}

// kOut uninitialized tensors of `shape`, with `like`'s dtype and place.
template <std::size_t kOut>
std::vector<paddle::Tensor> Empty(const std::vector<int64_t>& shape, const paddle::Tensor& like) {
  std::vector<paddle::Tensor> outputs;
  outputs.reserve(kOut);
  for (std::size_t i = 0; i < kOut; ++i) {
    outputs.push_back(EmptyOutput(shape, like.dtype(), like.place()));
  }
  return outputs;
}

// The kOut outputs of an in-place op (the spec's `inplace:`): output `over` is its first input,
// which must have the outputs' shape; the others are allocated, as Empty's are.
template <std::size_t kOut>
std::vector<paddle::Tensor> InPlaceOutputs(const char* op, int over,
                                           const std::vector<paddle::Tensor>& inputs,
                                           const std::vector<int64_t>& out_shape) {
  if (inputs[0].shape() != out_shape) {
    Fail(op, ": the in-place input has shape ", ShapeString(inputs[0].shape()),
         " but the output's is ", ShapeString(out_shape), "; the output is written over it");
  }
  std::vector<paddle::Tensor> outputs = Empty<kOut - 1>(out_shape, inputs[0]);
  outputs.insert(outputs.begin() + over, inputs[0]);
  return outputs;
}

// What an in-place op's kernel returns to Paddle: the outputs it allocated, not the one written
// over its input (Paddle binds that one itself).
inline std::vector<paddle::Tensor> Allocated(std::vector<paddle::Tensor> outputs, int over) {
  outputs.erase(outputs.begin() + over);
  return outputs;
}

// The tensors a gradient functor reads, in its order: the kGrad tensors whose gradients it gives
// (the forward inputs for a backward; for a double backward also output gradients), those it
// does not read absent: they lend the gradients their shapes only; then the rest (forward outputs,
// output gradients, the gradients reaching a backward's results). A tensor Paddle did not pass is
// absent.
template <std::size_t kGrad, std::size_t kRest>
std::vector<paddle::Tensor> GradInputs(const char* op, const char* const (&names)[kGrad + kRest],
                                       const paddle::Tensor (&targets)[kGrad],
                                       const bool (&reads)[kGrad],
                                       const paddle::Tensor (&rest)[kRest]) {
  paddle::Tensor all[kGrad + kRest];
  for (std::size_t k = 0; k < kGrad; ++k) {
    if (reads[k]) all[k] = targets[k];
  }
  for (std::size_t k = 0; k < kRest; ++k) all[kGrad + k] = rest[k];
  return CheckInputs(op, names, all);
}

// The first tensor that is present, among the targets and the rest.
template <std::size_t kGrad, std::size_t kRest>
const paddle::Tensor& FirstPresentOf(const char* op, const paddle::Tensor (&targets)[kGrad],
                                     const paddle::Tensor (&rest)[kRest]) {
  for (const paddle::Tensor& t : targets) {
    if (t.defined()) return t;
  }
  return FirstPresent(op, rest);
}

// The shapes a gradient functor's tensors broadcast from: each present tensor's own (a forward
// input's, the output's, or for the gradient reaching a broadcast input's gradient, that
// input's); an absent one counts as shaped like the output, the broadcast of the others.
template <std::size_t kGrad, std::size_t kRest>
void GradShapes(const char* op, const char* const (&names)[kGrad + kRest],
                const paddle::Tensor (&targets)[kGrad], const paddle::Tensor (&rest)[kRest],
                std::vector<int64_t> (&shapes)[kGrad + kRest]) {
  for (std::size_t k = 0; k < kGrad + kRest; ++k) {
    const paddle::Tensor& t = k < kGrad ? targets[k] : rest[k - kGrad];
    shapes[k] = t.defined() ? t.shape() : std::vector<int64_t>{};  // 0-d: no dims of its own
  }
  std::vector<int64_t> output_shape;
  const std::string error = BroadcastShapes(shapes, &output_shape, names);
  if (!error.empty()) Fail(op, ": ", error);
  for (std::size_t k = 0; k < kGrad + kRest; ++k) {
    const paddle::Tensor& t = k < kGrad ? targets[k] : rest[k - kGrad];
    if (!t.defined()) shapes[k] = output_shape;
  }
}

// An uninitialized gradient of each of the first kGrad `shapes`, typed and placed like `like`.
template <std::size_t kGrad, std::size_t kIn>
std::vector<paddle::Tensor> EmptyGradients(const std::vector<int64_t> (&shapes)[kIn],
                                           const paddle::Tensor& like) {
  static_assert(kGrad <= kIn, "the gradients belong to the first kGrad tensors");
  std::vector<paddle::Tensor> grads;
  grads.reserve(kGrad);
  for (std::size_t k = 0; k < kGrad; ++k) {
    grads.push_back(EmptyOutput(shapes[k], like.dtype(), like.place()));
  }
  return grads;
}

namespace cpu {

// Runs `Functor<T>(attrs...)` over CPU tensors: checks the inputs, allocates kOut outputs of
// their broadcast shape, dispatches over Dtypes and loops. kOver >= 0: output kOver is written over
// the first input, which has the outputs' shape (the spec's `inplace:`), and the others are
// allocated; each element of it is read before it is written, at the same index.
template <typename DtypeList, template <typename> class Functor, int kOut, int kOver = -1,
          std::size_t kIn, typename... Attrs>
std::vector<paddle::Tensor> Elementwise(const char* op, const char* kernel,
                                        const paddle::Tensor (&inputs)[kIn],
                                        const Attrs&... attrs) {
  static_assert(kOver < kOut, "the output written over the first input is one of the outputs");
  const auto& names = InputNames<Functor, kIn>();
  std::vector<paddle::Tensor> ins = CheckInputs(op, names, inputs);
  const paddle::Tensor& like = FirstPresent(op, inputs);
  if (!like.is_cpu()) Fail(op, ": ", kernel, " expected CPU tensors, got ", like.place());
  const BroadcastPlan<int(kIn)> plan = PlanOf<int(kIn)>(op, names, ins, like.shape());
  std::vector<paddle::Tensor> outs = kOver >= 0
                                         ? InPlaceOutputs<kOut>(op, kOver, ins, plan.out_shape)
                                         : Empty<kOut>(plan.out_shape, like);
  if (plan.numel == 0) {  // nothing to compute, but a dtype the op lacks is still refused
    CheckDtype(DtypeList{}, like.dtype(), op);
    return outs;
  }
  if (PoisonOutputs()) {
    for (int k = 0; k < kOut; ++k) {
      if (k != kOver) std::memset(outs[k].data(), 0xFF, Bytes(outs[k]));
    }
  }
  Dispatch(DtypeList{}, like.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = ConstData<T, int(kIn)>(ins);
    const auto out = MutableData<T, kOut>(outs);
    const Functor<T> f(attrs...);
    BroadcastLoop<T>(f, plan, in, out);
  });
  return outs;
}

// The in-place variant (the spec's `inplace:`): output kOver is written over inputs[0]. Returns
// the other outputs, which it allocates (what Paddle takes from an in-place kernel); the twin of
// cuda::ElementwiseInPlace.
template <typename DtypeList, template <typename> class Functor, int kOut, int kOver,
          std::size_t kIn, typename... Attrs>
std::vector<paddle::Tensor> ElementwiseInPlace(const char* op, const char* kernel,
                                               const paddle::Tensor (&inputs)[kIn],
                                               const Attrs&... attrs) {
  static_assert(0 <= kOver && kOver < kOut, "the output written over inputs[0] is an output");
  return Allocated(Elementwise<DtypeList, Functor, kOut, kOver>(op, kernel, inputs, attrs...),
                   kOver);
}

// The gradients of tensors that broadcast: runs `Functor<T>(attrs...)` over `targets` (those
// `reads` marks) and `rest` (see GradInputs), and returns the gradient of each target, shaped
// like it: where the target was broadcast, its elementwise gradient summed over those dims. The
// backward of an op whose inputs broadcast (the targets: its inputs), and its double backward
// (the targets: inputs and output gradients, each of its own shape).
template <typename DtypeList, template <typename> class Functor, std::size_t kGrad,
          std::size_t kRest, typename... Attrs>
std::vector<paddle::Tensor> ElementwiseGrad(const char* op, const char* kernel,
                                            const paddle::Tensor (&targets)[kGrad],
                                            const bool (&reads)[kGrad],
                                            const paddle::Tensor (&rest)[kRest],
                                            const Attrs&... attrs) {
  constexpr int kIn = int(kGrad + kRest);
  const auto& names = InputNames<Functor, kGrad + kRest>();
  const std::vector<paddle::Tensor> ins = GradInputs(op, names, targets, reads, rest);
  const paddle::Tensor& like = FirstPresentOf(op, targets, rest);
  if (!like.is_cpu()) Fail(op, ": ", kernel, " expected CPU tensors, got ", like.place());
  std::vector<int64_t> shapes[kIn];
  GradShapes(op, names, targets, rest, shapes);
  const BroadcastPlan<kIn> plan = PlanOfShapes(op, names, shapes);
  std::vector<paddle::Tensor> grads = EmptyGradients<kGrad>(shapes, like);
  if (plan.numel == 0 || PoisonOutputs()) {  // an empty output gives zero gradients
    for (paddle::Tensor& t : grads) {
      if (t.numel() > 0) std::memset(t.data(), plan.numel == 0 ? 0 : 0xFF, Bytes(t));
    }
  }
  if (plan.numel == 0) return grads;
  Dispatch(DtypeList{}, like.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = ConstData<T, kIn>(ins);
    const auto out = MutableData<T, int(kGrad)>(grads);
    const Functor<T> f(attrs...);
    BroadcastBackwardLoop<T>(f, plan, in, out);
  });
  return grads;
}

}  // namespace cpu
}  // namespace opgen

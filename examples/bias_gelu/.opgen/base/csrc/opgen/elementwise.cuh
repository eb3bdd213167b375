// opgen elementwise runtime, CUDA side: connects paddle::Tensor to the launcher in
// opgen/launch.cuh. Empty tensors, the device guard, the tensor's stream and the launch error
// check are handled here once for every generated op; the op itself is only a functor.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <vector>

#include "opgen/broadcast.cuh"
#include "opgen/elementwise.h"
#include "opgen/launch.cuh"

namespace opgen {
namespace cuda {

enum class Schedule { kVectorized, kNaive };

// Fills each tensor of `tensors` with `byte` on `stream`; the first error, or cudaSuccess.
inline cudaError_t Fill(std::vector<paddle::Tensor>& tensors, int byte, cudaStream_t stream) {
  for (paddle::Tensor& t : tensors) {
    if (t.numel() == 0) continue;
    const cudaError_t status = cudaMemsetAsync(t.data(), byte, Bytes(t), stream);
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

// Runs `Functor<T>(attrs...)` over GPU tensors on their device and stream: checks the inputs,
// allocates kOut outputs of their broadcast shape, dispatches over Dtypes and launches. kOver >= 0:
// output kOver is written over the first input (see cpu::Elementwise).
template <Schedule kSchedule, typename DtypeList, template <typename> class Functor, int kOut,
          int kOver, std::size_t kIn, typename... Attrs>
std::vector<paddle::Tensor> Run(const char* op, const char* kernel,
                                const paddle::Tensor (&inputs)[kIn], const Attrs&... attrs) {
  const auto& names = InputNames<Functor, kIn>();
  std::vector<paddle::Tensor> ins = CheckInputs(op, names, inputs);
  const paddle::Tensor& like = FirstPresent(op, inputs);
  if (!like.is_gpu()) Fail(op, ": ", kernel, " expected GPU tensors, got ", like.place());
  const int device = like.place().GetDeviceId();
  DeviceGuard guard(device);  // outputs are allocated on the inputs' device
  const BroadcastPlan<int(kIn)> plan = PlanOf<int(kIn)>(op, names, ins, like.shape());
  std::vector<paddle::Tensor> outs = kOver >= 0
                                         ? InPlaceOutputs<kOut>(op, kOver, ins, plan.out_shape)
                                         : Empty<kOut>(plan.out_shape, like);
  if (plan.numel == 0) {  // nothing to compute, but a dtype the op lacks is still refused
    CheckDtype(DtypeList{}, like.dtype(), op);
    return outs;
  }
  const cudaStream_t stream = like.stream();
  cudaError_t status = cudaSuccess;
  if (PoisonOutputs()) {
    std::vector<paddle::Tensor> allocated = kOver >= 0 ? Allocated(outs, kOver) : outs;
    status = Fill(allocated, 0xFF, stream);
  }
  Dispatch(DtypeList{}, like.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = ConstData<T, int(kIn)>(ins);
    const auto out = MutableData<T, kOut>(outs);
    const Functor<T> f(attrs...);
    if (status != cudaSuccess) return;
    if constexpr (kSchedule == Schedule::kNaive) {  // opgen bench's baseline, built apart
      if (plan.pattern == BroadcastPattern::kSameShape) {
        status = LaunchNaive(f, plan.numel, in, out, device, stream);
        return;
      }
    }
    status = LaunchBroadcast(f, plan, in, out, device, stream);  // same shape: Launch
  });
  if (status != cudaSuccess) {
    Fail(op, ": CUDA kernel '", kernel, "' failed to launch: ", cudaGetErrorString(status));
  }
  return outs;
}

// The gradients of tensors that broadcast, on the GPU: see cpu::ElementwiseGrad. The sums over
// broadcast dims take a workspace from Paddle's allocator; no atomics, so results repeat.
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
  if (!like.is_gpu()) Fail(op, ": ", kernel, " expected GPU tensors, got ", like.place());
  const int device = like.place().GetDeviceId();
  DeviceGuard guard(device);
  std::vector<int64_t> shapes[kIn];
  GradShapes(op, names, targets, rest, shapes);
  const BroadcastPlan<kIn> plan = PlanOfShapes(op, names, shapes);
  std::vector<paddle::Tensor> grads = EmptyGradients<kGrad>(shapes, like);
  const cudaStream_t stream = like.stream();
  cudaError_t status = cudaSuccess;
  if (plan.numel == 0 || PoisonOutputs()) {  // an empty output gives zero gradients
    status = Fill(grads, plan.numel == 0 ? 0 : 0xFF, stream);
  }
  if (plan.numel > 0 && status == cudaSuccess) {
    Dispatch(DtypeList{}, like.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const auto in = ConstData<T, kIn>(ins);
      const auto out = MutableData<T, int(kGrad)>(grads);
      const Functor<T> f(attrs...);
      const std::size_t bytes = BroadcastBackwardWorkspaceBytes<T, int(kGrad)>(plan, device);
      paddle::Tensor workspace;
      if (bytes > 0) {
        workspace = paddle::empty({static_cast<int64_t>(bytes)}, paddle::DataType::UINT8,
                                  like.place());
      }
      status = LaunchBroadcastBackward(f, plan, in, out, bytes > 0 ? workspace.data() : nullptr,
                                       bytes, device, stream);
    });
  }
  if (status != cudaSuccess) {
    Fail(op, ": CUDA kernel '", kernel, "' failed to launch: ", cudaGetErrorString(status));
  }
  return grads;
}

// The launcher every generated op uses.
template <typename DtypeList, template <typename> class Functor, int kOut, std::size_t kIn,
          typename... Attrs>
std::vector<paddle::Tensor> Elementwise(const char* op, const char* kernel,
                                        const paddle::Tensor (&inputs)[kIn],
                                        const Attrs&... attrs) {
  return Run<Schedule::kVectorized, DtypeList, Functor, kOut, -1>(op, kernel, inputs, attrs...);
}

// The in-place variant (the spec's `inplace:`): output kOver is written over inputs[0]. Returns
// the other outputs, which it allocates (what Paddle takes from an in-place kernel).
template <typename DtypeList, template <typename> class Functor, int kOut, int kOver,
          std::size_t kIn, typename... Attrs>
std::vector<paddle::Tensor> ElementwiseInPlace(const char* op, const char* kernel,
                                               const paddle::Tensor (&inputs)[kIn],
                                               const Attrs&... attrs) {
  static_assert(0 <= kOver && kOver < kOut, "the output written over inputs[0] is an output");
  return Allocated(Run<Schedule::kVectorized, DtypeList, Functor, kOut, kOver>(
                       op, kernel, inputs, attrs...),
                   kOver);
}

// The textbook one-element-per-thread kernel, for `opgen bench`'s comparison only.
template <typename DtypeList, template <typename> class Functor, int kOut, std::size_t kIn,
          typename... Attrs>
std::vector<paddle::Tensor> NaiveElementwise(const char* op, const char* kernel,
                                             const paddle::Tensor (&inputs)[kIn],
                                             const Attrs&... attrs) {
  return Run<Schedule::kNaive, DtypeList, Functor, kOut, -1>(op, kernel, inputs, attrs...);
}

}  // namespace cuda
}  // namespace opgen

// opgen elementwise runtime, CUDA side: connects paddle::Tensor to the launcher in
// opgen/launch.cuh. Empty tensors, the device guard, the tensor's stream and the launch error
// check are handled here once for every generated op; the op itself is only a functor.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <vector>

#include "opgen/elementwise.h"
#include "opgen/launch.cuh"

namespace opgen {
namespace cuda {

enum class Schedule { kVectorized, kNaive };

// Runs `Functor<MT>(attrs...)` over GPU tensors on their device and stream: checks the inputs,
// allocates kOut outputs shaped like them, dispatches over Dtypes and launches.
template <Schedule kSchedule, typename DtypeList, template <typename> class Functor, int kOut,
          std::size_t kIn, typename... Attrs>
std::vector<paddle::Tensor> Run(const char* op, const char* kernel,
                                const paddle::Tensor (&inputs)[kIn], const Attrs&... attrs) {
  std::vector<paddle::Tensor> ins = CheckInputs(op, inputs);
  const paddle::Tensor& like = FirstPresent(op, inputs);
  if (!like.is_gpu()) Fail(op, ": ", kernel, " expected GPU tensors, got ", like.place());
  const int device = like.place().GetDeviceId();
  DeviceGuard guard(device);  // outputs are allocated on the inputs' device
  std::vector<paddle::Tensor> outs = EmptyLike<kOut>(like);
  const int64_t n = like.numel();
  if (n == 0) return outs;
  const cudaStream_t stream = like.stream();
  cudaError_t status = cudaSuccess;
  if (PoisonOutputs()) {
    for (paddle::Tensor& t : outs) {
      if (status == cudaSuccess) status = cudaMemsetAsync(t.data(), 0xFF, Bytes(t), stream);
    }
  }
  Dispatch(DtypeList{}, like.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = ConstData<T, int(kIn)>(ins);
    const auto out = MutableData<T, kOut>(outs);
    const Functor<OpMathT<T>> f(attrs...);
    if (status != cudaSuccess) return;
    status = kSchedule == Schedule::kVectorized ? Launch(f, n, in, out, device, stream)
                                                : LaunchNaive(f, n, in, out, device, stream);
  });
  if (status != cudaSuccess) {
    Fail(op, ": CUDA kernel '", kernel, "' failed to launch: ", cudaGetErrorString(status));
  }
  return outs;
}

// The launcher every generated op uses.
template <typename DtypeList, template <typename> class Functor, int kOut, std::size_t kIn,
          typename... Attrs>
std::vector<paddle::Tensor> Elementwise(const char* op, const char* kernel,
                                        const paddle::Tensor (&inputs)[kIn],
                                        const Attrs&... attrs) {
  return Run<Schedule::kVectorized, DtypeList, Functor, kOut>(op, kernel, inputs, attrs...);
}

// The textbook one-element-per-thread kernel, for `opgen bench`'s comparison only.
template <typename DtypeList, template <typename> class Functor, int kOut, std::size_t kIn,
          typename... Attrs>
std::vector<paddle::Tensor> NaiveElementwise(const char* op, const char* kernel,
                                             const paddle::Tensor (&inputs)[kIn],
                                             const Attrs&... attrs) {
  return Run<Schedule::kNaive, DtypeList, Functor, kOut>(op, kernel, inputs, attrs...);
}

}  // namespace cuda
}  // namespace opgen

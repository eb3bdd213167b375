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
  PD_CHECK(ins[0].is_gpu(), op, ": expected GPU tensors, got ", ins[0].place());
  const int device = ins[0].place().GetDeviceId();
  DeviceGuard guard(device);  // outputs are allocated on the inputs' device
  std::vector<paddle::Tensor> outs = EmptyLike<kOut>(ins[0]);
  const int64_t n = ins[0].numel();
  if (n == 0) return outs;
  cudaError_t status = cudaSuccess;
  Dispatch(DtypeList{}, ins[0].dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto in = ConstData<T, int(kIn)>(ins);
    const auto out = MutableData<T, kOut>(outs);
    const Functor<OpMathT<T>> f(attrs...);
    status = kSchedule == Schedule::kVectorized
                 ? Launch(f, n, in, out, device, ins[0].stream())
                 : LaunchNaive(f, n, in, out, device, ins[0].stream());
  });
  PD_CHECK(status == cudaSuccess, op, ": CUDA kernel '", kernel, "' failed to launch: ",
           cudaGetErrorString(status));
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

// opgen row-wise runtime, CUDA side: connects paddle::Tensor to the launcher in opgen/rowwise.cuh.
// The device guard, the tensor's stream, the column sums' workspace (from Paddle's allocator) and
// the launch error check are handled here once for every generated op.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "opgen/rowwise.cuh"
#include "opgen/rowwise_op.h"

namespace opgen {
namespace rowwise {
namespace cuda {

// Runs `f` over the rows of `p` with its workspace (column sums) from Paddle's allocator.
template <typename F, typename P, typename... Roles>
cudaError_t RunOn(const F& f, const P& p, RoleList<Roles...>, const paddle::Place& place,
                  cudaStream_t stream) {
  const std::size_t bytes = WorkspaceBytes<F, Roles...>(p);
  paddle::Tensor workspace;
  if (bytes > 0) {
    workspace = paddle::empty({static_cast<int64_t>(bytes)}, paddle::DataType::UINT8, place);
  }
  return Run<F, Roles...>(f, p, bytes > 0 ? workspace.data() : nullptr, stream);
}

// to[i] = from[i] in T (a 16-bit type), rounded as the launcher's own stores are.
constexpr int kNarrowThreads = 256;
constexpr int64_t kNarrowMaxBlocks = 4096;

template <typename A, typename T>
__global__ void __launch_bounds__(kNarrowThreads) NarrowKernel(const A* from, T* to, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    to[i] = static_cast<T>(from[i]);
  }
}

template <typename A, typename T>
cudaError_t Narrow(const A* from, T* to, int64_t n, cudaStream_t stream) {
  const int64_t blocks = detail::CeilDiv(n, kNarrowThreads);
  const unsigned grid =
      static_cast<unsigned>(blocks < kNarrowMaxBlocks ? blocks : kNarrowMaxBlocks);
  NarrowKernel<<<grid, kNarrowThreads, 0, stream>>>(from, to, n);
  return cudaGetLastError();
}

// Launch (opgen/rowwise_op.h) on GPU tensors, on their device and stream.
template <typename DtypeList, template <typename> class Functor, typename Io, std::size_t kIn,
          typename... Attrs>
std::vector<paddle::Tensor> Rowwise(const char* op, const char* kernel,
                                    const paddle::Tensor (&inputs)[kIn], const Attrs&... attrs) {
  const paddle::Tensor* like = nullptr;
  for (const paddle::Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (!t.is_gpu()) Fail(op, ": ", kernel, " expected GPU tensors, got ", t.place());
    if (like == nullptr) like = &t;
  }
  if (like == nullptr) Fail(op, ": every input is missing");
  const paddle::Place place = like->place();
  opgen::cuda::DeviceGuard guard(place.GetDeviceId());  // outputs go on the inputs' device
  const cudaStream_t stream = like->stream();
  cudaError_t status = cudaSuccess;
  auto poison = [&](std::vector<paddle::Tensor>& tensors) {
    for (paddle::Tensor& t : tensors) {
      if (t.numel() > 0 && status == cudaSuccess) {
        status = cudaMemsetAsync(t.data(), 0xFF, Bytes(t), stream);
      }
    }
  };
  auto run = [&](const auto& f, const auto& p, auto roles) {
    if (status != cudaSuccess) return;
    status = RunOn(f, p, roles, place, stream);
  };
  auto narrow = [&](const auto* from, auto* to, int64_t n) {
    if (status == cudaSuccess) status = Narrow(from, to, n, stream);
  };
  std::vector<paddle::Tensor> outputs =
      Launch<DtypeList, Functor, Io>(op, inputs, poison, run, narrow, attrs...);
  if (status != cudaSuccess) {
    Fail(op, ": CUDA kernel '", kernel, "' failed: ", cudaGetErrorString(status));
  }
  return outputs;
}

}  // namespace cuda
}  // namespace rowwise
}  // namespace opgen

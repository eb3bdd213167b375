// opgen row-wise runtime, Paddle side: input checks by role, the [rows, cols] view, output
// allocation, dtype dispatch, OPGEN_POISON_OUTPUTS, and the CPU entry point. The functors and
// their loops (opgen/rowwise.h, opgen/rowwise.cuh) do not see Paddle; this header connects them
// to paddle::Tensor. Errors go through opgen/error.h (never PD_CHECK or PD_THROW, see there).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paddle/extension.h"

#include "opgen/error.h"
#include "opgen/math.h"
#include "opgen/paddle.h"
#include "opgen/rowwise.h"

namespace opgen {
namespace rowwise {

// The roles of an op's inputs, in spec order (Elem, Col, RowIn, RowStat of opgen/rowwise.h).
template <typename... Roles>
struct RoleList {
  static constexpr int kSize = int(sizeof...(Roles));
};

// One output of a launch: its role, and the input whose shape and dtype it takes (a backward's
// gradient), or -1 for the role's own: per-element outputs are shaped like the per-element
// inputs, per-row ones like them without the last dim (in the math type: float32 statistics
// for 16-bit inputs), column sums [cols].
enum class OutRole { kElem, kRow, kColSum };
struct Out {
  OutRole role;
  int like;
};

// How many of `outs` have `role` (the Io structs state the counts too, for the Pointers type).
template <std::size_t N>
constexpr int CountOuts(const Out (&outs)[N], OutRole role) {
  int count = 0;
  for (std::size_t k = 0; k < N; ++k) count += outs[k].role == role ? 1 : 0;
  return count;
}

template <typename Role>
constexpr const char* RoleName() {
  if constexpr (std::is_same_v<Role, Elem>) {
    return "per-element [*, C]";
  } else if constexpr (std::is_same_v<Role, Col>) {
    return "per-column [C]";
  } else if constexpr (std::is_same_v<Role, RowIn>) {
    return "per-row [*] or [*, 1]";
  } else {
    return "a per-row statistic [*]";
  }
}

// The float type a computation in `dtype` reduces in: float64 for float64, else float32.
inline paddle::DataType AccDtype(paddle::DataType dtype) {
  return dtype == paddle::DataType::FLOAT64 ? paddle::DataType::FLOAT64
                                            : paddle::DataType::FLOAT32;
}

// A per-column tensor's shape, [C], for rows of `shape` ([-1] where its rank is not known yet).
inline std::vector<int64_t> ColumnShape(const std::vector<int64_t>& shape) {
  return {shape.empty() ? int64_t{-1} : shape.back()};
}

// The [rows, cols] view of an op's per-element inputs.
struct View {
  std::vector<int64_t> shape;      // the per-element inputs' shape, rank >= 1
  std::vector<int64_t> row_shape;  // without its last dim: per-row inputs and outputs
  int64_t rows = 0;
  int64_t cols = 0;
};

namespace detail {

inline View ViewOf(const std::vector<int64_t>& shape) {
  View view;
  view.shape = shape;
  view.row_shape.assign(shape.begin(), shape.end() - 1);
  view.cols = shape.back();
  view.rows = 1;
  for (int64_t d : view.row_shape) view.rows *= d;
  return view;
}

template <typename Role>
bool ShapeFits(const std::vector<int64_t>& shape, const View& view) {
  if constexpr (std::is_same_v<Role, Elem>) {
    return shape == view.shape;
  } else if constexpr (std::is_same_v<Role, Col>) {
    return shape == std::vector<int64_t>{view.cols};
  } else if constexpr (std::is_same_v<Role, RowIn>) {
    std::vector<int64_t> with_one = view.row_shape;
    with_one.push_back(1);
    return shape == view.row_shape || shape == with_one;
  } else {
    return shape == view.row_shape;
  }
}

template <typename Role>
std::string ExpectedShape(const View& view) {
  if constexpr (std::is_same_v<Role, Col>) return ShapeString({view.cols});
  if constexpr (std::is_same_v<Role, Elem>) return ShapeString(view.shape);
  std::string text = ShapeString(view.row_shape);
  if constexpr (std::is_same_v<Role, RowIn>) {
    std::vector<int64_t> with_one = view.row_shape;
    with_one.push_back(1);
    text += " or " + ShapeString(with_one);
  }
  return text;
}

}  // namespace detail

// Checks the inputs against their roles: one dtype (per-row statistics in its math type), one
// device, each shape the role's; an absent input (a gradient Paddle did not pass) stays absent.
// Returns the view and the inputs, dense.
template <typename... Roles, std::size_t kIn>
View CheckInputs(const char* op, RoleList<Roles...>, const char* const (&names)[kIn],
                 const paddle::Tensor (&inputs)[kIn], std::vector<paddle::Tensor>* checked) {
  static_assert(sizeof...(Roles) == kIn, "one role per input");
  constexpr bool kElem[] = {std::is_same_v<Roles, Elem>...};
  constexpr bool kStat[] = {std::is_same_v<Roles, RowStat>...};
  std::size_t first = kIn;
  for (std::size_t i = 0; i < kIn && first == kIn; ++i) {
    if (kElem[i] && inputs[i].defined()) first = i;
  }
  if (first == kIn) Fail(op, ": every per-element input is missing");
  const paddle::Tensor& like = inputs[first];
  if (like.shape().empty()) {
    Fail(op, ": ", names[first], " is 0-D; a row-wise op needs at least one dim (the row)");
  }
  const View view = detail::ViewOf(like.shape());
  const paddle::DataType acc = AccDtype(like.dtype());
  checked->clear();
  std::size_t i = 0;
  const bool (&stat)[kIn] = kStat;
  auto check = [&](auto role) {
    using Role = decltype(role);
    const paddle::Tensor& t = inputs[i];
    if (t.defined()) {
      if (t.numel() != 0 && !t.initialized()) Fail(op, ": ", names[i], " holds no data");
      const paddle::DataType want = stat[i] ? acc : like.dtype();
      if (t.dtype() != want) {
        Fail(op, ": ", names[i], " is ", t.dtype(), " but ", names[first], " is ", like.dtype(),
             stat[i] ? "; saved per-row statistics are float32 (float64 for float64)"
                     : "; the inputs must share one dtype");
      }
      CheckSamePlace(op, names[i], t, names[first], like);
      if (!detail::ShapeFits<Role>(t.shape(), view)) {
        Fail(op, ": ", names[i], " has shape ", ShapeString(t.shape()), ", but as ",
             RoleName<Role>(), " input it must be ", detail::ExpectedShape<Role>(view), " for ",
             names[first], " of shape ", ShapeString(view.shape));
      }
    }
    checked->push_back(t.defined() && t.numel() != 0 ? Contiguous(t, 0) : t);
    ++i;
  };
  (check(Roles{}), ...);
  return view;
}

// The outputs of a launch, allocated as `outs` describes them (see Out).
template <std::size_t kIn, std::size_t kOutAll>
std::vector<paddle::Tensor> Allocate(const View& view, const paddle::Tensor& like,
                                     const paddle::Tensor (&inputs)[kIn],
                                     const Out (&outs)[kOutAll]) {
  std::vector<paddle::Tensor> tensors;
  tensors.reserve(kOutAll);
  for (const Out& o : outs) {
    std::vector<int64_t> shape = o.role == OutRole::kElem  ? view.shape
                                 : o.role == OutRole::kRow ? view.row_shape
                                                           : std::vector<int64_t>{view.cols};
    paddle::DataType dtype = o.role == OutRole::kRow ? AccDtype(like.dtype()) : like.dtype();
    // a gradient: its input's shape, where the gradient op keeps the input (it keeps every
    // per-row one; per-element and per-column gradients have the role's shape anyway)
    if (o.like >= 0 && inputs[o.like].defined()) shape = inputs[o.like].shape();
    tensors.push_back(EmptyOutput(shape, dtype, like.place()));
  }
  return tensors;
}

// Runs `run(functor, pointers)` for the op's dtype, as `Io` (the generated op's description of
// one direction: its tensors' roles `Roles` and names `kNames`, which it reads `kReads` (an input
// it does not read is passed as null, never loaded), its outputs `kOuts` and how many of each
// role `kOut`, `kRowOut`, `kColSum`): checks the inputs, allocates the outputs, fills the
// pointers. `poison(outputs)` fills them with NaN when OPGEN_POISON_OUTPUTS asks for it; `run`
// is the CPU loop or the GPU launcher. Returns the outputs in `kOuts`' order. A per-row gradient
// of a 16-bit input is computed in the math type, then stored in the input's dtype by
// `narrow(from, to, n)` (opgen's own loop or kernel: Paddle 2.6.2's cast kernel is not built for
// every GPU, and on the H200 it left such gradients as garbage).
template <typename DtypeList, template <typename> class Functor, typename Io, std::size_t kIn,
          typename Poison, typename Run, typename Narrow, typename... Attrs>
std::vector<paddle::Tensor> Launch(const char* op, const paddle::Tensor (&inputs)[kIn],
                                   const Poison& poison, const Run& run, const Narrow& narrow,
                                   const Attrs&... attrs) {
  constexpr int kOut = Io::kOut, kRowOut = Io::kRowOut, kColSum = Io::kColSum;
  constexpr std::size_t kOutAll = std::size(Io::kOuts);
  static_assert(kOut == CountOuts(Io::kOuts, OutRole::kElem) &&
                    kRowOut == CountOuts(Io::kOuts, OutRole::kRow) &&
                    kColSum == CountOuts(Io::kOuts, OutRole::kColSum),
                "kOut, kRowOut and kColSum count kOuts' roles");
  static_assert(std::size(Io::kNames) == kIn, "one name per input");
  std::vector<paddle::Tensor> ins;
  const View view = CheckInputs(op, typename Io::Roles{}, Io::kNames, inputs, &ins);
  const paddle::Tensor* like = nullptr;
  for (const paddle::Tensor& t : ins) {
    if (like == nullptr && t.defined() && t.shape() == view.shape) like = &t;
  }
  std::vector<paddle::Tensor> tensors = Allocate(view, *like, inputs, Io::kOuts);
  if (PoisonOutputs()) poison(tensors);
  Dispatch(DtypeList{}, like->dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Pointers<T, int(kIn), kOut, kRowOut, kColSum> p;
    for (std::size_t i = 0; i < kIn; ++i) {
      p.in[int(i)] = Io::kReads[i] && ins[i].defined() ? ins[i].data() : nullptr;
    }
    int n[3] = {0, 0, 0};
    for (std::size_t k = 0; k < kOutAll; ++k) {
      void* data = tensors[k].data();
      switch (Io::kOuts[k].role) {
        case OutRole::kElem: p.out[n[0]++] = static_cast<T*>(data); break;
        case OutRole::kRow: p.row_out[n[1]++] = static_cast<OpMathT<T>*>(data); break;
        case OutRole::kColSum: p.col_sum[n[2]++] = static_cast<T*>(data); break;
      }
    }
    p.rows = view.rows;
    p.cols = view.cols;
    run(Functor<T>(attrs...), p, typename Io::Roles{});
    for (std::size_t k = 0; k < kOutAll; ++k) {  // a per-row gradient of a 16-bit input
      const int like_input = Io::kOuts[k].like;
      if (like_input < 0 || tensors[k].dtype() == DataTypeOf<T>()) continue;
      paddle::Tensor stored = EmptyOutput(tensors[k].shape(), DataTypeOf<T>(), like->place());
      if (stored.numel() > 0) {
        narrow(static_cast<const OpMathT<T>*>(tensors[k].data()), static_cast<T*>(stored.data()),
               stored.numel());
      }
      tensors[k] = stored;
    }
  });
  return tensors;
}

namespace cpu {

// RunCpu with the roles of Io's inputs and which of them it reads.
template <typename Io, typename F, typename P, typename... Roles, std::size_t... I>
void RunWith(const F& f, const P& p, RoleList<Roles...>, std::index_sequence<I...>) {
  RunCpu<F, Roles...>(f, p, Reads<Io::kReads[I]...>{});
}

// Launch (above) on CPU tensors.
template <typename DtypeList, template <typename> class Functor, typename Io, std::size_t kIn,
          typename... Attrs>
std::vector<paddle::Tensor> Rowwise(const char* op, const char* kernel,
                                    const paddle::Tensor (&inputs)[kIn], const Attrs&... attrs) {
  for (const paddle::Tensor& t : inputs) {
    if (t.defined() && !t.is_cpu()) {
      Fail(op, ": ", kernel, " expected CPU tensors, got ", t.place());
    }
  }
  auto poison = [](std::vector<paddle::Tensor>& tensors) {
    for (paddle::Tensor& t : tensors) {
      if (t.numel() > 0) std::memset(t.data(), 0xFF, Bytes(t));
    }
  };
  auto run = [](const auto& f, const auto& p, auto roles) {
    RunWith<Io>(f, p, roles, std::make_index_sequence<kIn>{});
  };
  auto narrow = [](const auto* from, auto* to, int64_t n) { StoreChunk(from, to, n); };
  return Launch<DtypeList, Functor, Io>(op, inputs, poison, run, narrow, attrs...);
}

}  // namespace cpu
}  // namespace rowwise
}  // namespace opgen

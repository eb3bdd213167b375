// opgen broadcasting runtime, host side: numpy's broadcasting rules, the plan a broadcasting op
// runs from, and the CPU loops, forward and backward. The plan coalesces the output's dims (a
// `[B, S, C] + [C]` becomes the 2-d `[B*S, C] + [C]`), gives each input element strides with 0
// where it is broadcast, and names the pattern the GPU launcher (opgen/broadcast.cuh) has a fast
// path for. Plain C++ with no Paddle and no CUDA in it. Errors come back as strings, built with
// std::to_string: ostream number formatting kills the process inside ops on some machines.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "opgen/math.h"

namespace opgen {

// Dims a plan may keep once contiguous ones are merged; the GPU kernels' index math is unrolled
// over this many.
constexpr int kMaxBroadcastRank = 8;

// "[2, 3]"; "[]" for a 0-d shape.
inline std::string DimsString(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

// The product of `dims`, or -1 when it does not fit in int64_t (a 0 anywhere makes it 0).
inline int64_t NumelOf(const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d == 0) return 0;
  }
  int64_t numel = 1;
  for (int64_t d : dims) {
    if (numel > std::numeric_limits<int64_t>::max() / d) return -1;
    numel *= d;
  }
  return numel;
}

// The shape `shapes` broadcast to, in `out`: shapes are aligned at their last dims, a missing dim
// counts as 1, and a dim of 1 stretches to the other inputs' size (to 0 as well). Returns "" or
// why they do not broadcast, naming the inputs, their shapes and the dims that differ.
template <int kIn>
std::string BroadcastShapes(const std::vector<int64_t> (&shapes)[kIn], std::vector<int64_t>* out) {
  std::size_t rank = 0;
  for (int k = 0; k < kIn; ++k) {
    for (int64_t d : shapes[k]) {
      if (d < 0) {
        return "input #" + std::to_string(k) + " has a negative dim: " + DimsString(shapes[k]);
      }
    }
    if (shapes[k].size() > rank) rank = shapes[k].size();
  }
  std::vector<int64_t> result(rank, 1);
  std::vector<int> source(rank, -1);  // the input that gave result[d] its size
  for (int k = 0; k < kIn; ++k) {
    const std::size_t offset = rank - shapes[k].size();
    for (std::size_t i = 0; i < shapes[k].size(); ++i) {
      const int64_t size = shapes[k][i];
      int64_t& dim = result[offset + i];
      if (size == 1 || size == dim) continue;
      if (dim == 1) {
        dim = size;
        source[offset + i] = k;
        continue;
      }
      const int j = source[offset + i];
      const std::size_t j_dim = offset + i - (rank - shapes[j].size());
      return "inputs #" + std::to_string(j) + " " + DimsString(shapes[j]) + " and #" +
             std::to_string(k) + " " + DimsString(shapes[k]) +
             " do not broadcast: aligned at their last dims, dim " + std::to_string(j_dim) +
             " of #" + std::to_string(j) + " is " + std::to_string(dim) + " and dim " +
             std::to_string(i) + " of #" + std::to_string(k) + " is " + std::to_string(size) +
             "; sizes must match or be 1";
    }
  }
  if (NumelOf(result) < 0) {
    return "the inputs broadcast to " + DimsString(result) + ", more than 2^63 elements";
  }
  *out = std::move(result);
  return "";
}

// The fast paths of opgen/broadcast.cuh. "Full" means an input with as many elements as the
// output: read, and its gradient written, at the output's index.
enum class BroadcastPattern {
  kEmpty,           // the output has no elements
  kSameShape,       // every input full: the plain elementwise launcher
  kTrailingVector,  // [N, C] with [C] (a bias): every other input full; strides (0, 1)
  kLeadingVector,   // [N, C] with [N, 1] (a per-row scale): every other input full; strides (1, 0)
  kScalarOperand,   // every input that is not full has one element: strides all 0
  kGeneral,         // anything else: per-input offsets from the output index
};

inline const char* PatternName(BroadcastPattern pattern) {
  switch (pattern) {
    case BroadcastPattern::kEmpty: return "empty";
    case BroadcastPattern::kSameShape: return "same shape";
    case BroadcastPattern::kTrailingVector: return "trailing vector";
    case BroadcastPattern::kLeadingVector: return "leading vector";
    case BroadcastPattern::kScalarOperand: return "scalar operand";
    case BroadcastPattern::kGeneral: return "general";
  }
  return "?";
}

// How kIn inputs broadcast to the output. The output is contiguous with the (coalesced) dims
// `dims`; the element of the output at index (i_0, ..., i_{rank-1}) reads input k at
// sum_d i_d * strides[k][d] of its own contiguous storage.
template <int kIn>
struct BroadcastPlan {
  std::vector<int64_t> out_shape;  // the broadcast shape, as numpy gives it
  int64_t numel = 0;               // elements of the output
  int64_t in_numel[kIn] = {};      // elements of each input
  // The output's dims with those of size 1 dropped and neighbours merged where every input is
  // contiguous (or broadcast) across both, outermost first. 0 dims when numel is 0 or 1.
  int rank = 0;
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t strides[kIn][kMaxBroadcastRank] = {};  // in elements; 0 where input k is broadcast
  BroadcastPattern pattern = BroadcastPattern::kEmpty;

  bool IsFull(int k) const { return in_numel[k] == numel; }
};

namespace detail {

template <int kIn>
struct PlanDim {
  int64_t size;
  int64_t stride[kIn];
};

// Strides (0, 1) for the trailing vector, (1, 0) for the leading one: every input that is not
// full must have them.
template <int kIn>
bool EveryBroadcastInputHas(const BroadcastPlan<kIn>& plan, int64_t outer, int64_t inner) {
  for (int k = 0; k < kIn; ++k) {
    if (plan.IsFull(k)) continue;
    if (plan.strides[k][0] != outer || plan.strides[k][1] != inner) return false;
  }
  return true;
}

template <int kIn>
BroadcastPattern Classify(const BroadcastPlan<kIn>& plan) {
  if (plan.numel == 0) return BroadcastPattern::kEmpty;
  bool all_full = true, broadcast_scalars = true;
  for (int k = 0; k < kIn; ++k) {
    all_full = all_full && plan.IsFull(k);
    broadcast_scalars = broadcast_scalars && (plan.IsFull(k) || plan.in_numel[k] == 1);
  }
  if (all_full) return BroadcastPattern::kSameShape;
  if (broadcast_scalars) return BroadcastPattern::kScalarOperand;
  if (plan.rank == 2 && EveryBroadcastInputHas(plan, 0, 1)) {
    return BroadcastPattern::kTrailingVector;
  }
  if (plan.rank == 2 && EveryBroadcastInputHas(plan, 1, 0)) {
    return BroadcastPattern::kLeadingVector;
  }
  return BroadcastPattern::kGeneral;
}

}  // namespace detail

// Broadcasts `shapes` and plans the loop over the output (see BroadcastPlan). Returns "" or why
// the shapes do not broadcast, or need more than kMaxBroadcastRank dims after merging.
template <int kIn>
std::string MakeBroadcastPlan(const std::vector<int64_t> (&shapes)[kIn],
                              BroadcastPlan<kIn>* plan) {
  BroadcastPlan<kIn> p;
  std::string error = BroadcastShapes(shapes, &p.out_shape);
  if (!error.empty()) return error;
  p.numel = NumelOf(p.out_shape);
  for (int k = 0; k < kIn; ++k) p.in_numel[k] = NumelOf(shapes[k]);

  if (p.numel > 0) {
    // Each input's strides over the output's dims, innermost first: 0 where it has size 1.
    const std::size_t rank = p.out_shape.size();
    std::vector<detail::PlanDim<kIn>> all(rank);
    int64_t running[kIn];
    for (int k = 0; k < kIn; ++k) running[k] = 1;
    for (std::size_t d = rank; d-- > 0;) {
      all[d].size = p.out_shape[d];
      for (int k = 0; k < kIn; ++k) {
        const std::size_t missing = rank - shapes[k].size();
        const int64_t size = d < missing ? 1 : shapes[k][d - missing];
        all[d].stride[k] = size == 1 ? 0 : running[k];
        running[k] *= size;
      }
    }
    // Size-1 output dims carry nothing. An outer dim merges with the inner one after it when
    // every input steps across the pair as across one dim (contiguous, or broadcast in both).
    std::vector<detail::PlanDim<kIn>> kept;
    for (const detail::PlanDim<kIn>& dim : all) {
      if (dim.size == 1) continue;
      bool merges = !kept.empty();
      for (int k = 0; merges && k < kIn; ++k) {
        merges = kept.back().stride[k] == dim.stride[k] * dim.size;
      }
      if (merges) {
        kept.back().size *= dim.size;
        for (int k = 0; k < kIn; ++k) kept.back().stride[k] = dim.stride[k];
      } else {
        kept.push_back(dim);
      }
    }
    if (kept.size() > static_cast<std::size_t>(kMaxBroadcastRank)) {
      std::string listed;
      for (int k = 0; k < kIn; ++k) listed += (k ? ", " : "") + DimsString(shapes[k]);
      return "inputs " + listed + " broadcast to " + DimsString(p.out_shape) + ", which keeps " +
             std::to_string(kept.size()) + " dims after merging contiguous ones; at most " +
             std::to_string(kMaxBroadcastRank) + " are supported";
    }
    p.rank = static_cast<int>(kept.size());
    for (int d = 0; d < p.rank; ++d) {
      p.dims[d] = kept[d].size;
      for (int k = 0; k < kIn; ++k) p.strides[k][d] = kept[d].stride[k];
    }
  }
  p.pattern = detail::Classify(p);
  *plan = std::move(p);
  return "";
}

namespace cpu {

// How the CPU loops store a result as T: a plain conversion. The Paddle side specializes it for
// paddle::float16, whose software conversion mishandles tiny values (cpu::Store in
// opgen/elementwise.h), before any loop is instantiated.
template <typename T>
struct StoreAs {
  static T From(OpMathT<T> r) { return static_cast<T>(r); }
};

// Element `offset` of an input as OpMathT; a null input (absent: a missing output gradient, or a
// forward input the functor does not read) reads as zeros.
template <typename T>
OpMathT<T> Read(const T* p, int64_t offset) {
  return p != nullptr ? static_cast<OpMathT<T>>(p[offset]) : OpMathT<T>(0);
}

// Walks the output of a plan in order, keeping each input's offset (an odometer over the dims).
template <int kIn>
class BroadcastCursor {
 public:
  explicit BroadcastCursor(const BroadcastPlan<kIn>& plan) : plan_(plan) {}

  int64_t offset(int k) const { return offset_[k]; }

  void Next() {
    for (int d = plan_.rank - 1; d >= 0; --d) {
      for (int k = 0; k < kIn; ++k) offset_[k] += plan_.strides[k][d];
      if (++index_[d] < plan_.dims[d]) return;
      for (int k = 0; k < kIn; ++k) offset_[k] -= plan_.strides[k][d] * plan_.dims[d];
      index_[d] = 0;
    }
  }

 private:
  const BroadcastPlan<kIn>& plan_;
  int64_t index_[kMaxBroadcastRank] = {};
  int64_t offset_[kIn] = {};
};

// Runs `f` over the plan's output: kOut outputs of the output's shape, each input read where it
// broadcasts to (a null input as zeros).
template <typename T, typename F, int kIn, int kOut>
void BroadcastLoop(const F& f, const BroadcastPlan<kIn>& plan, Pointers<const T, kIn> in,
                   Pointers<T, kOut> out) {
  using MT = OpMathT<T>;
  BroadcastCursor<kIn> cursor(plan);
  for (int64_t i = 0; i < plan.numel; ++i, cursor.Next()) {
    MT args[kIn];
    MT results[kOut];
    for (int k = 0; k < kIn; ++k) args[k] = Read(in.at[k], cursor.offset(k));
    Apply(f, args, results);
    for (int k = 0; k < kOut; ++k) out.at[k][i] = StoreAs<T>::From(results[k]);
  }
}

// Runs a backward functor over the plan of its inputs, the forward inputs first (then the output
// gradients, and whatever else it reads; a null one reads as zeros): output g is the gradient of
// input g and has its shape.
// A full input's gradient is written at the output's index; a broadcast input's is the sum of its
// elementwise gradient over the dims it is broadcast along, accumulated in OpMathT (float, or
// double for double) in the output's order and stored once. An empty output gives zero gradients.
template <typename T, typename F, int kIn, int kOut>
void BroadcastBackwardLoop(const F& f, const BroadcastPlan<kIn>& plan,
                           Pointers<const T, kIn> in, Pointers<T, kOut> grads) {
  static_assert(kOut <= kIn, "the gradients belong to the first kOut inputs of the plan");
  using MT = OpMathT<T>;
  bool reduced[kOut];
  std::vector<MT> sums[kOut];
  for (int g = 0; g < kOut; ++g) {
    reduced[g] = !plan.IsFull(g);
    if (reduced[g]) sums[g].assign(static_cast<std::size_t>(plan.in_numel[g]), MT(0));
  }
  BroadcastCursor<kIn> cursor(plan);
  for (int64_t i = 0; i < plan.numel; ++i, cursor.Next()) {
    MT args[kIn];
    MT results[kOut];
    for (int k = 0; k < kIn; ++k) args[k] = Read(in.at[k], cursor.offset(k));
    Apply(f, args, results);
    for (int g = 0; g < kOut; ++g) {
      if (reduced[g]) {
        sums[g][cursor.offset(g)] += results[g];
      } else {
        grads.at[g][i] = StoreAs<T>::From(results[g]);
      }
    }
  }
  for (int g = 0; g < kOut; ++g) {
    for (std::size_t e = 0; e < sums[g].size(); ++e) grads.at[g][e] = StoreAs<T>::From(sums[g][e]);
  }
}

}  // namespace cpu
}  // namespace opgen

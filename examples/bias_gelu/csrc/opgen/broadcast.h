// opgen broadcasting runtime, host side: numpy's broadcasting rules, the plan a broadcasting op
// runs from, and the CPU loops, forward and backward. The plan coalesces the output's dims (a
// `[B, S, C] + [C]` becomes the 2-d `[B*S, C] + [C]`), gives each input element strides with 0
// where it is broadcast, and names the pattern the GPU launcher (opgen/broadcast.cuh) has a fast
// path for. Plain C++ with no Paddle and no CUDA in it. Errors come back as strings, built with
// std::to_string: ostream number formatting kills the process inside ops on some machines.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "opgen/cpu.h"
#include "opgen/math.h"
#include "opgen/text.h"

namespace opgen {

// Dims a plan may keep once contiguous ones are merged; the GPU kernels' index math is unrolled
// over this many.
constexpr int kMaxBroadcastRank = 8;

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

// How an error names input k: by `names` (the op's tensor names) where given, else by number.
inline std::string InputName(const char* const* names, int k) {
  return names != nullptr ? std::string(names[k]) : "input #" + std::to_string(k);
}

// The shape `shapes` broadcast to, in `out`: shapes are aligned at their last dims, a missing dim
// counts as 1, and a dim of 1 stretches to the other inputs' size (to 0 as well). Returns "" or
// why they do not broadcast, naming the inputs (`names`, or their numbers where null), their
// shapes and the dims that differ.
template <int kIn>
std::string BroadcastShapes(const std::vector<int64_t> (&shapes)[kIn], std::vector<int64_t>* out,
                            const char* const* names = nullptr) {
  std::size_t rank = 0;
  for (int k = 0; k < kIn; ++k) {
    for (int64_t d : shapes[k]) {
      if (d < 0) return InputName(names, k) + " has a negative dim: " + ShapeString(shapes[k]);
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
      const std::string a = InputName(names, j), b = InputName(names, k);
      return a + " " + ShapeString(shapes[j]) + " and " + b + " " + ShapeString(shapes[k]) +
             " do not broadcast: aligned at their last dims, dim " + std::to_string(j_dim) +
             " of " + a + " is " + std::to_string(dim) + " and dim " + std::to_string(i) +
             " of " + b + " is " + std::to_string(size) + "; sizes must match or be 1";
    }
  }
  if (NumelOf(result) < 0) {
    return "the inputs broadcast to " + ShapeString(result) + ", more than 2^63 elements";
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
// the shapes do not broadcast (naming the inputs as BroadcastShapes does), or need more than
// kMaxBroadcastRank dims after merging.
template <int kIn>
std::string MakeBroadcastPlan(const std::vector<int64_t> (&shapes)[kIn], BroadcastPlan<kIn>* plan,
                              const char* const* names = nullptr) {
  BroadcastPlan<kIn> p;
  std::string error = BroadcastShapes(shapes, &p.out_shape, names);
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
      for (int k = 0; k < kIn; ++k) listed += (k ? ", " : "") + ShapeString(shapes[k]);
      return "inputs " + listed + " broadcast to " + ShapeString(p.out_shape) + ", which keeps " +
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

// The loops read and store a T through LoadAs and StoreAs, in bulk through LoadChunk and
// StoreChunk (opgen/cpu.h; for Paddle's 16-bit types, opgen/paddle.h).

// Element `offset` of an input as OpMathT; a null input (absent: a missing output gradient, or a
// forward input the functor does not read) reads as zeros.
template <typename T>
OpMathT<T> Read(const T* p, int64_t offset) {
  return p != nullptr ? LoadAs<T>::From(p[offset]) : OpMathT<T>(0);
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

// ---- the CPU loops --------------------------------------------------------------------------
// Every loop walks the output in rows of the plan's innermost dim, along which each input is
// either contiguous (stride 1) or broadcast (stride 0), and runs the functor over chunks of up to
// kChunk elements of a row in a loop of its own (ApplyChunk), which the compiler vectorizes: it
// reads arrays of OpMathT (the tensor's memory itself for float and double, else the chunk
// converted into a buffer) and writes arrays of OpMathT (the output's memory, or a buffer that is
// converted, or summed for a gradient). A plan of one dim (same shape, a scalar operand) is one
// long row.
constexpr int kChunk = 256;

// Work is cut into blocks of at least kBlock output elements, at most kMaxBlocks of them, fixed
// by the shapes alone: threads take whole blocks, and a broadcast input's gradient is summed per
// block and the blocks' sums added in block order, so a result never depends on the thread count.
constexpr int64_t kBlock = int64_t(1) << 16;
constexpr int64_t kMaxBlocks = 64;

// ApplyChunk is cloned for AVX-512, AVX2 and the baseline (OPGEN_CPU_CLONES, opgen/cpu.h).

// The functor over elements [0, m) of the inputs' and outputs' arrays. Not inlined (and cloned,
// see above): on its own, with a copy of the functor whose attrs cannot alias the outputs, GCC
// vectorizes the loop and if-converts the functor's selects.
template <typename F, typename MT, int kIn, int kOut>
OPGEN_CPU_CLONES void ApplyChunk(const F& f, const MT* const (&args)[kIn],
                                 MT* const (&results)[kOut], int m) {
  const F local = f;
  const MT* in[kIn];
  MT* out[kOut];
  for (int k = 0; k < kIn; ++k) in[k] = args[k];
  for (int k = 0; k < kOut; ++k) out[k] = results[k];
  for (int j = 0; j < m; ++j) {
    MT a[kIn];
    MT r[kOut];
    for (int k = 0; k < kIn; ++k) a[k] = in[k][j];
    Apply(local, a, r);
    for (int k = 0; k < kOut; ++k) out[k][j] = r[k];
  }
}

// Elements [offset, offset + m) of an input as an array of OpMathT: the input's own memory when
// it is contiguous there and already OpMathT, else `buffer` filled with them converted, with its
// element at `offset` repeated (stride 0), or with zeros (a null input).
template <typename T>
inline const OpMathT<T>* ChunkOf(const T* p, int64_t offset, int64_t stride, int m,
                                 OpMathT<T>* buffer) {
  using MT = OpMathT<T>;
  if (p == nullptr) {
    for (int j = 0; j < m; ++j) buffer[j] = MT(0);
  } else if (stride == 0) {
    const MT value = LoadAs<T>::From(p[offset]);
    for (int j = 0; j < m; ++j) buffer[j] = value;
  } else if constexpr (std::is_same_v<T, MT>) {
    return p + offset;
  } else {
    LoadChunk(p + offset, buffer, m);
  }
  return buffer;
}

// The functor over one chunk: m elements of a row piece, from element `j0` of the piece on.
// Output k goes to `direct[k]` when that is not null and T is OpMathT, else to `staged[k]`, and
// the function returns for each output whether it is staged.
template <typename T, typename F, int kIn, int kOut>
inline void RunChunk(const F& f, const Pointers<const T, kIn>& in, const int64_t* offsets,
                     const int64_t* strides, int64_t j0, int m, T* const (&direct)[kOut],
                     OpMathT<T> (&staged)[kOut][kChunk], bool (&is_staged)[kOut]) {
  using MT = OpMathT<T>;
  MT buffers[kIn][kChunk];
  const MT* args[kIn];
  MT* results[kOut];
  for (int k = 0; k < kIn; ++k) {
    args[k] = ChunkOf(in.at[k], offsets[k] + j0 * strides[k], strides[k], m, buffers[k]);
  }
  for (int k = 0; k < kOut; ++k) {
    is_staged[k] = true;
    results[k] = staged[k];
    if constexpr (std::is_same_v<T, MT>) {
      if (direct[k] != nullptr) {
        is_staged[k] = false;
        results[k] = direct[k];
      }
    }
  }
  ApplyChunk(f, args, results, m);
}

// Where T is what the math runs in (float, double) and every input of a row piece is present and
// contiguous along it, the functor reads and writes the tensors' own memory: nothing is staged,
// so the piece goes to ApplyChunk in chunks of kInPlaceChunk, not kChunk (each call of the
// cloned ApplyChunk, through the loader's dispatch, costs about what 256 elements do).
constexpr int kInPlaceChunk = 1 << 16;

template <typename T, int kIn>
inline bool ReadsInPlace(const Pointers<const T, kIn>& in, const int64_t* strides) {
  static_assert(std::is_same_v<T, OpMathT<T>>, "16-bit inputs are converted, never read in place");
  for (int k = 0; k < kIn; ++k) {
    if (in.at[k] == nullptr || strides[k] != 1) return false;
  }
  return true;
}

// The functor over elements [i, i + count) of the outputs, input k's from offsets[k] on: the case
// ReadsInPlace accepts.
template <typename T, typename F, int kIn, int kOut>
inline void ApplyInPlace(const F& f, const Pointers<const T, kIn>& in, const int64_t* offsets,
                         T* const (&out)[kOut], int64_t i, int64_t count) {
  for (int64_t j0 = 0; j0 < count; j0 += kInPlaceChunk) {
    const int m = static_cast<int>(std::min<int64_t>(kInPlaceChunk, count - j0));
    const T* args[kIn];
    T* results[kOut];
    for (int k = 0; k < kIn; ++k) args[k] = in.at[k] + offsets[k] + j0;
    for (int k = 0; k < kOut; ++k) results[k] = out[k] + i + j0;
    ApplyChunk(f, args, results, m);
  }
}

// The sum of m values in a fixed order: 8 running sums (vectorized), then added pairwise.
template <typename MT>
inline MT SumChunk(const MT* values, int m) {
  MT lanes[8] = {};
  int j = 0;
  for (; j + 8 <= m; j += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += values[j + l];
  }
  for (int l = 0; j + l < m; ++l) lanes[l] += values[j + l];
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// Calls `piece(i, offsets, strides, count)` for each run of output elements [i, i + count) in
// [begin, end) that lies in one row: input k's element j of the run is at offsets[k] +
// j * strides[k] (strides are 1 or 0).
template <int kIn, typename Piece>
void ForEachRowPiece(const BroadcastPlan<kIn>& plan, int64_t begin, int64_t end, Piece&& piece) {
  const int rank = plan.rank;
  const int64_t inner = rank > 0 ? plan.dims[rank - 1] : 1;
  int64_t strides[kIn];
  int64_t offsets[kIn] = {};
  int64_t index[kMaxBroadcastRank] = {};
  for (int k = 0; k < kIn; ++k) strides[k] = rank > 0 ? plan.strides[k][rank - 1] : 0;
  int64_t rest = begin;
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = rest % plan.dims[d];
    rest /= plan.dims[d];
    for (int k = 0; k < kIn; ++k) offsets[k] += index[d] * plan.strides[k][d];
  }
  int64_t column = rank > 0 ? index[rank - 1] : 0;
  for (int64_t i = begin; i < end;) {
    const int64_t count = std::min(inner - column, end - i);
    piece(i, static_cast<const int64_t*>(offsets), static_cast<const int64_t*>(strides), count);
    i += count;
    if (i >= end) break;
    // The next row: back to its first column, then one step of the outer dims' odometer.
    for (int k = 0; k < kIn; ++k) offsets[k] -= column * strides[k];
    column = 0;
    for (int d = rank - 2; d >= 0; --d) {
      for (int k = 0; k < kIn; ++k) offsets[k] += plan.strides[k][d];
      if (++index[d] < plan.dims[d]) break;
      for (int k = 0; k < kIn; ++k) offsets[k] -= plan.strides[k][d] * plan.dims[d];
      index[d] = 0;
    }
  }
}

// Blocks of a plan's output (see kBlock); no more than `limit`.
inline int64_t BlocksOf(int64_t numel, int64_t limit = kMaxBlocks) {
  return std::max<int64_t>(1, std::min({numel / kBlock, kMaxBlocks, limit}));
}
inline int64_t BlockBegin(int64_t numel, int64_t blocks, int64_t b) {
  // numel * b / blocks without overflow: numel < 2^63 and blocks <= kMaxBlocks
  return numel / blocks * b + numel % blocks * b / blocks;
}

// Runs `f` over the plan's output: kOut outputs of the output's shape, each input read where it
// broadcasts to (a null input as zeros).
template <typename T, typename F, int kIn, int kOut>
void BroadcastLoop(const F& f, const BroadcastPlan<kIn>& plan, Pointers<const T, kIn> in,
                   Pointers<T, kOut> out) {
  using MT = OpMathT<T>;
  const int64_t blocks = BlocksOf(plan.numel);
  ParallelFor(blocks, [&](int64_t b) {
    const int64_t begin = BlockBegin(plan.numel, blocks, b);
    const int64_t end = BlockBegin(plan.numel, blocks, b + 1);
    ForEachRowPiece(plan, begin, end, [&](int64_t i, const int64_t* offsets,
                                          const int64_t* strides, int64_t count) {
      if constexpr (std::is_same_v<T, MT>) {
        if (ReadsInPlace(in, strides)) return ApplyInPlace(f, in, offsets, out.at, i, count);
      }
      for (int64_t j0 = 0; j0 < count; j0 += kChunk) {
        const int m = static_cast<int>(std::min<int64_t>(kChunk, count - j0));
        T* direct[kOut];
        for (int k = 0; k < kOut; ++k) direct[k] = out.at[k] + i + j0;
        MT staged[kOut][kChunk];
        bool is_staged[kOut];
        RunChunk<T>(f, in, offsets, strides, j0, m, direct, staged, is_staged);
        for (int k = 0; k < kOut; ++k) {
          if (is_staged[k]) StoreChunk(staged[k], direct[k], m);
        }
      }
    });
  });
}

// Runs a backward functor over the plan of its inputs, the forward inputs first (then the output
// gradients, and whatever else it reads; a null one reads as zeros): output g is the gradient of
// input g and has its shape.
// A full input's gradient is written at the output's index; a broadcast input's is the sum of its
// elementwise gradient over the dims it is broadcast along, accumulated in OpMathT (float, or
// double for double): per block (see kBlock) in the output's order (8 running sums along a row it
// is broadcast over), then the blocks' sums in block order, stored once. An empty output gives
// zero gradients.
template <typename T, typename F, int kIn, int kOut>
void BroadcastBackwardLoop(const F& f, const BroadcastPlan<kIn>& plan,
                           Pointers<const T, kIn> in, Pointers<T, kOut> grads) {
  static_assert(kOut <= kIn, "the gradients belong to the first kOut inputs of the plan");
  using MT = OpMathT<T>;
  bool reduced[kOut];
  bool any_reduced = false;
  int64_t limit = kMaxBlocks;  // a block's sums take no more memory than the output
  for (int g = 0; g < kOut; ++g) {
    reduced[g] = !plan.IsFull(g);
    any_reduced = any_reduced || reduced[g];
    if (reduced[g]) limit = std::min(limit, plan.numel / std::max<int64_t>(plan.in_numel[g], 1));
  }
  const int64_t blocks = BlocksOf(plan.numel, limit);
  std::vector<MT> sums[kOut];  // block b's sums for input g at b * in_numel[g]
  for (int g = 0; g < kOut; ++g) {
    if (reduced[g]) sums[g].assign(static_cast<std::size_t>(blocks * plan.in_numel[g]), MT(0));
  }
  ParallelFor(blocks, [&](int64_t b) {
    MT* block_sums[kOut];
    for (int g = 0; g < kOut; ++g) {
      block_sums[g] = reduced[g] ? sums[g].data() + b * plan.in_numel[g] : nullptr;
    }
    const int64_t begin = BlockBegin(plan.numel, blocks, b);
    const int64_t end = BlockBegin(plan.numel, blocks, b + 1);
    ForEachRowPiece(plan, begin, end, [&](int64_t i, const int64_t* offsets,
                                          const int64_t* strides, int64_t count) {
      if constexpr (std::is_same_v<T, MT>) {
        if (!any_reduced && ReadsInPlace(in, strides)) {
          return ApplyInPlace(f, in, offsets, grads.at, i, count);
        }
      }
      for (int64_t j0 = 0; j0 < count; j0 += kChunk) {
        const int m = static_cast<int>(std::min<int64_t>(kChunk, count - j0));
        T* direct[kOut];
        for (int g = 0; g < kOut; ++g) direct[g] = reduced[g] ? nullptr : grads.at[g] + i + j0;
        MT staged[kOut][kChunk];
        bool is_staged[kOut];
        RunChunk<T>(f, in, offsets, strides, j0, m, direct, staged, is_staged);
        for (int g = 0; g < kOut; ++g) {
          if (!reduced[g]) {
            if (is_staged[g]) StoreChunk(staged[g], direct[g], m);
          } else if (strides[g] == 0) {
            block_sums[g][offsets[g]] += SumChunk(staged[g], m);
          } else {
            MT* sums_here = block_sums[g] + offsets[g] + j0 * strides[g];
            for (int j = 0; j < m; ++j) sums_here[j] += staged[g][j];
          }
        }
      }
    });
  });
  for (int g = 0; g < kOut; ++g) {
    if (!reduced[g]) continue;
    const int64_t n = plan.in_numel[g];
    for (int64_t e = 0; e < n; ++e) {
      MT total = sums[g][e];
      for (int64_t b = 1; b < blocks; ++b) total += sums[g][b * n + e];
      grads.at[g][e] = StoreAs<T>::From(total);
    }
  }
}

}  // namespace cpu
}  // namespace opgen

// opgen row-wise runtime, host side: the interface a row-wise op's functor is written against,
// and the CPU loop that runs it. A row-wise op sees its per-element inputs as [rows, cols] (the
// last axis is the row); its functor is called once per row with a Row object whose class the
// runtime picks (here a plain loop over the row; on the GPU, opgen/rowwise.cuh's schedules).
// Plain C++ with no Paddle and no CUDA in it.
//
// A functor (one per direction):
//
//   template <typename T>                 // the storage type: float, double, a 16-bit type
//   struct RmsNormForward {
//     using Acc = opgen::OpMathT<T>;      // float for float and 16-bit types, double for double
//     Acc eps;                            // attrs
//     template <class Row>
//     OPGEN_HD void operator()(Row& row) const {
//       // Each lambda gets every input at column j, in spec order, as Acc: x[r, j], weight[j].
//       const Acc ss = row.sum([&](Acc x, Acc) { return x * x; });
//       const Acc rstd = opgen::rsqrt(ss / row.size() + eps);
//       row.put_rows(rstd);                                  // per-row outputs, stored as Acc
//       row.put([&](Acc x, Acc weight) { return x * rstd * weight; });  // stored as T
//     }
//   };
//
// and its launch, with one role tag per input in spec order:
//
//   using opgen::rowwise::Elem;  using opgen::rowwise::Col;
//   opgen::rowwise::Pointers<T, /*in*/ 2, /*out*/ 1, /*row_out*/ 1> p;
//   p.in[0] = x;  p.in[1] = weight;  p.out[0] = out;  p.row_out[0] = rstd;
//   p.rows = rows;  p.cols = cols;
//   opgen::rowwise::RunCpu<RmsNormForward<T>, Elem, Col>(functor, p);        // this header
//   // GPU (opgen/rowwise.cuh): a workspace only when the functor calls put_column_sums.
//   const std::size_t bytes = opgen::rowwise::WorkspaceBytes<RmsNormForward<T>, Elem, Col>(p);
//   cudaError_t e = opgen::rowwise::Run<RmsNormForward<T>, Elem, Col>(functor, p, workspace,
//                                                                      stream);
//
// What a Row offers (the same on every schedule):
//   row.size()              cols, as Acc
//   row.sum(f), row.mean(f) f(inputs at j...) summed over the row in Acc; mean = sum / size
//   row.max(f), row.min(f)  NaN-propagating (a NaN anywhere gives NaN)
//                           Empty rows (cols == 0): sum 0, mean NaN, max -inf, min +inf.
//                           Where f returns opgen::Array<Acc, K>, each returns
//                           opgen::Array<Acc, K>: K reductions of one kind in one round (on the
//                           GPU, one set of shuffles and barriers for all K). The functor then
//                           states the largest such K as `static constexpr int kReduceWidth`.
//   row.put(f)              f returns Acc (one output) or opgen::Array<Acc, kOut>: out[k][r, j]
//   row.put_rows(a, ...)    kRowOut Acc values: row_out[k][r]
//   row.put_column_sums(f)  f returns Acc or opgen::Array<Acc, kColSum>: col_sum[k][j] is the sum
//                           over all rows, in Acc, in an order fixed by rows and cols (no atomics;
//                           two runs give the same bits); all zeros when rows == 0.
//   row.keep(f)             f at every column, computed once, for the lambdas after it to take:
//                           pass it after the lambda, which takes the inputs, then the kept
//                           values in that order: `const auto e = row.keep(g);
//                           row.put([&](MT x, MT e) { ... }, e);`. Every call above (but
//                           put_rows) and keep itself take kept values. The CPU computes f into
//                           a scratch row; the GPU into registers for 16-bit rows of its
//                           register schedules (OPGEN_ROW_KEPT_REGS), elsewhere again where a
//                           lambda takes it. For a value that costs more than reading it
//                           (softmax's exp).
// A functor calls put, put_rows and put_column_sums at most once each, after its reductions.
// Every reduction returns the same value to every thread of a row, so code after it is uniform.
// Every row makes the same reductions in the same order (no reduction behind a branch on the
// data): rows that share a block or a cluster on the GPU meet at the same barriers.
// The functor runs once per row even when cols == 0 (its per-row outputs are still written).
//
// Inputs by role (the tag pack's order is the inputs' order, and the lambdas' parameters'):
//   Elem     [rows, cols] in T
//   Col      [cols] in T, the same for every row (layer norm's weight)
//   RowIn    [rows] in T, one value per row, passed at every j
//   RowStat  [rows] in Acc: a per-row output of the forward (mean, rstd) read by the backward
// A null input pointer reads as zeros (an absent output gradient) and is never loaded. RunCpu may
// be told which inputs the functor reads (Reads<...>, from the op's kReads); the others are never
// loaded either. 16-bit inputs are converted to the math type a row at a time before the functor
// runs on it.
// All tensors are contiguous; pointers of any alignment work (the GPU picks its vector width at
// run time).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "opgen/cpu.h"
#include "opgen/math.h"

namespace opgen {

namespace rowwise {

// ---- roles of the inputs ---------------------------------------------------------------------
struct Elem {};
struct Col {};
struct RowIn {};
struct RowStat {};

// The storage type of an input of role `Role` for an op of storage type T.
template <typename Role, typename T>
struct Stored {
  using type = T;
};
template <typename T>
struct Stored<RowStat, T> {
  using type = OpMathT<T>;
};

// Everything one launch reads and writes; passed to kernels by value.
template <typename T, int kIn, int kOut, int kRowOut = 0, int kColSum = 0>
struct Pointers {
  using Storage = T;
  using Acc = OpMathT<T>;
  static constexpr int kInputs = kIn;
  static constexpr int kOutputs = kOut;
  static constexpr int kRowOutputs = kRowOut;
  static constexpr int kColumnSums = kColSum;
  Array<const void*, kIn> in;  // spec order; each points to Stored<role, T>
  Array<T*, kOut> out;         // [rows, cols]
  Array<Acc*, kRowOut> row_out;  // [rows]
  Array<T*, kColSum> col_sum;  // [cols]
  int64_t rows = 0;
  int64_t cols = 0;
};

namespace detail {

template <typename... Roles>
constexpr bool KnownRoles() {
  return ((std::is_same_v<Roles, Elem> || std::is_same_v<Roles, Col> ||
           std::is_same_v<Roles, RowIn> || std::is_same_v<Roles, RowStat>) && ...);
}

// How many values a lambda's result holds: an opgen::Array's size, else 1 (a number, or a class
// that converts to one, such as a 16-bit type).
template <typename R>
struct ResultSize {
  static constexpr int value = 1;
  static constexpr bool kArray = false;
};
template <typename A, int N>
struct ResultSize<Array<A, N>> {
  static constexpr int value = N;
  static constexpr bool kArray = true;
};
template <typename F, typename... Args>
using ResultOf = std::decay_t<std::invoke_result_t<const F&, Args...>>;

// Value k of a lambda's result, as Acc.
template <typename AccT, typename R>
OPGEN_HD AccT Part(const R& result, int k) {
  if constexpr (!ResultSize<R>::kArray) {
    (void)k;
    return static_cast<AccT>(result);
  } else {
    return static_cast<AccT>(result[k]);
  }
}

// What a reduction of a lambda returning R gives: Acc for one value, opgen::Array<Acc, K> for K.
template <typename AccT, typename R>
OPGEN_HD auto ReductionResult(const Array<AccT, ResultSize<R>::value>& values) {
  if constexpr (!ResultSize<R>::kArray) {
    return values[0];
  } else {
    return values;
  }
}

// The most values a functor reduces in one round (its kReduceWidth, else 1): the GPU sizes its
// reductions' shared memory by it.
template <typename F, typename = void>
struct ReduceWidthOf {
  static constexpr int value = 1;
};
template <typename F>
struct ReduceWidthOf<F, std::void_t<decltype(F::kReduceWidth)>> {
  static constexpr int value = F::kReduceWidth;
};

// A kept value (row.keep) on a schedule that recomputes it where a lambda takes it, as the GPU's
// do (the row is in registers or in cache there, and the math is cheap next to its memory): f of
// the inputs at a column, and of the kept values f itself takes. A lambda called with kept values
// becomes one lambda of the inputs the same way.
template <typename F, typename... K>
OPGEN_HD auto Recompute(const F& f, const K&... kept) {
  return [f, kept...](const auto&... in) { return f(in..., kept(in...)...); };
}

template <typename AccT>
OPGEN_HD AccT Infinity() {
  return static_cast<AccT>(HUGE_VALF);  // std::numeric_limits is host-only in CUDA
}

// row.mean from row.sum's result: each sum divided by the row's size.
template <typename AccT>
OPGEN_HD AccT Mean(AccT sum, AccT size) {
  return sum / size;
}
template <typename AccT, int K>
OPGEN_HD Array<AccT, K> Mean(Array<AccT, K> sums, AccT size) {
  for (int k = 0; k < K; ++k) sums[k] = sums[k] / size;
  return sums;
}

}  // namespace detail

// ---- the CPU loop ------------------------------------------------------------------------------
// Which of a functor's inputs it reads, in spec order (Reads<true, false, true>): the CPU loop
// never loads the others, which read as zeros (the Paddle side passes them as null). Reads<>, the
// default, means every input.
template <bool... kRead>
struct Reads {};

namespace cpu {

// The loop reads and stores a T through LoadAs and StoreAs, a row's inputs in bulk through
// LoadChunk (opgen/cpu.h; for Paddle's 16-bit types, opgen/paddle.h), as the elementwise loops do.
using opgen::cpu::LoadAs;
using opgen::cpu::LoadChunk;
using opgen::cpu::StoreAs;
using opgen::cpu::StoreChunk;

// A value row.keep computed at every column of a row, which later lambdas take.
template <typename Acc>
struct Kept {
  const Acc* values;
};

// The rows that one thread runs keep their values here: slot k holds the k-th row.keep's (every
// row makes the same calls, so the slots are allocated by the first row and reused).
template <typename Acc>
class Scratch {
 public:
  Acc* Slot(int k, int64_t cols) { return Grow(slots_, k, cols); }

  // Input i converted to Acc (16-bit inputs): a row of a per-element input, converted for each
  // row; a per-column input, converted by the first row only (`fresh` says whether it is).
  Acc* Input(int i, int64_t cols, bool* fresh) {
    *fresh = inputs_.size() <= static_cast<std::size_t>(i) || inputs_[i].empty();
    return Grow(inputs_, i, cols);
  }

  // A row of zeros in Acc (which is also T where T is not 16-bit): what a null input reads.
  const Acc* Zeros(int64_t cols) {
    if (zeros_.size() < static_cast<std::size_t>(cols)) zeros_.resize(cols, Acc(0));
    return zeros_.data();
  }

 private:
  static Acc* Grow(std::vector<std::vector<Acc>>& slots, int k, int64_t cols) {
    if (slots.size() <= static_cast<std::size_t>(k)) slots.resize(k + 1);
    std::vector<Acc>& slot = slots[k];  // moving `slots` keeps each slot's memory where it is
    if (slot.size() < static_cast<std::size_t>(cols)) slot.resize(cols);
    return slot.data();
  }

  std::vector<std::vector<Acc>> slots_;
  std::vector<std::vector<Acc>> inputs_;
  std::vector<Acc> zeros_;
};

// The CPU row's reductions: of two values (Of), and of two vectors of values lane by lane, into
// the first (Into: GCC's vectors, with opgen::max's and min's selects written out, as GCC notes
// that a function taking vectors by value has another ABI without AVX).
struct Add {
  template <typename A>
  static A Of(A a, A b) {
    return a + b;
  }
  template <typename V>
  static void Into(V& a, const V& b) {
    a += b;
  }
};
struct Max {
  template <typename A>
  static A Of(A a, A b) {
    return opgen::max(a, b);
  }
  template <typename V>
  static void Into(V& a, const V& b) {
    const V larger = a > b ? a : b;
    a = a != a ? a + b : larger;
  }
};
struct Min {
  template <typename A>
  static A Of(A a, A b) {
    return opgen::min(a, b);
  }
  template <typename V>
  static void Into(V& a, const V& b) {
    const V smaller = a < b ? a : b;
    a = a != a ? a + b : smaller;
  }
};

// One row on the CPU: plain loops over the row, which GCC vectorizes. Reductions run in 32
// interleaved lanes combined as a tree, fixed by the source, so every vector width gives the same
// bits (and sums a better rounding than a single running sum). `Read` is a Reads<...> with one
// flag per input: an input that is not read is the constant 0. A read input that is null (an
// absent output gradient) reads as a row of zeros, so every row's loops load without a check.
// Per-row inputs are loaded once, when the row is made.
template <typename P, typename Read, typename... Roles>
class Row;

template <typename P, bool... kRead, typename... Roles>
class Row<P, Reads<kRead...>, Roles...> {
 public:
  using T = typename P::Storage;
  using Acc = OpMathT<T>;

  Row(const P& p, int64_t row, Acc* column_sums, Scratch<Acc>* scratch)
      : p_(p), row_(row), cols_(p.cols), column_sums_(column_sums), scratch_(scratch) {
    for (int i = 0; i < P::kInputs; ++i) {
      const bool per_element = kElementwise[i];
      const char* base = static_cast<const char*>(p.in[i]);
      base_[i] = base != nullptr && per_element && kRowMajor[i]
                     ? base + kBytes[i] * static_cast<std::size_t>(row * p.cols)
                     : base;
      if (base_[i] == nullptr && per_element && kReadAt[i]) {
        base_[i] = scratch->Zeros(cols_);
      } else if constexpr (kConverts) {
        if (base_[i] != nullptr && per_element && kReadAt[i]) {
          bool fresh = false;
          Acc* converted = scratch->Input(i, cols_, &fresh);
          if (kRowMajor[i] || fresh) Convert(static_cast<const T*>(base_[i]), converted, cols_);
          base_[i] = converted;
        }
      }
    }
    LoadRowValues(std::index_sequence_for<Roles...>{});
  }

  Acc size() const { return static_cast<Acc>(cols_); }

  template <typename F, typename... K>
  auto sum(const F& f, const K&... kept) const {
    return Reduce<Add>(Acc(0), f, kept...);
  }
  template <typename F, typename... K>
  auto mean(const F& f, const K&... kept) const {
    return detail::Mean(sum(f, kept...), size());  // 0 / 0 is NaN for an empty row
  }
  template <typename F, typename... K>
  auto max(const F& f, const K&... kept) const {
    return Reduce<Max>(-detail::Infinity<Acc>(), f, kept...);
  }
  template <typename F, typename... K>
  auto min(const F& f, const K&... kept) const {
    return Reduce<Min>(detail::Infinity<Acc>(), f, kept...);
  }

  // f's value at every column, computed once into this thread's scratch row.
  template <typename F, typename... K>
  Kept<Acc> keep(const F& f, const K&... kept) {
    Acc* values = scratch_->Slot(kept_++, cols_);
    for (int64_t j = 0; j < cols_; ++j) values[j] = Value(j, f, kept...);
    return Kept<Acc>{values};
  }

  template <typename F, typename... K>
  void put(const F& f, const K&... kept) const {
    using R = decltype(Call(0, f, kept...));
    static_assert(detail::ResultSize<R>::value == P::kOutputs,
                  "row.put: the lambda returns a different number of values than the op has "
                  "per-element outputs");
    T* out[P::kOutputs > 0 ? P::kOutputs : 1];
    for (int k = 0; k < P::kOutputs; ++k) out[k] = p_.out[k] + row_ * cols_;
    if constexpr (!kStagesStores) {
      for (int64_t j = 0; j < cols_; ++j) {
        const R r = Call(j, f, kept...);
        for (int k = 0; k < P::kOutputs; ++k) {
          out[k][j] = StoreAs<T>::From(detail::Part<Acc>(r, k));
        }
      }
    } else {  // kStage values at a time in Acc, then stored in bulk
      Acc staged[P::kOutputs > 0 ? P::kOutputs : 1][kStage];
      for (int64_t j0 = 0; j0 < cols_; j0 += kStage) {
        const int64_t m = std::min<int64_t>(kStage, cols_ - j0);
        for (int64_t j = 0; j < m; ++j) {
          const R r = Call(j0 + j, f, kept...);
          for (int k = 0; k < P::kOutputs; ++k) staged[k][j] = detail::Part<Acc>(r, k);
        }
        for (int k = 0; k < P::kOutputs; ++k) StoreChunk(staged[k], out[k] + j0, m);
      }
    }
  }

  template <typename... Values>
  void put_rows(const Values&... values) const {
    static_assert(sizeof...(Values) == P::kRowOutputs,
                  "row.put_rows: a different number of values than the op has per-row outputs");
    const Acc v[] = {static_cast<Acc>(values)...};
    for (int k = 0; k < P::kRowOutputs; ++k) p_.row_out[k][row_] = v[k];
  }

  template <typename F, typename... K>
  void put_column_sums(const F& f, const K&... kept) const {
    using R = decltype(Call(0, f, kept...));
    static_assert(detail::ResultSize<R>::value == P::kColumnSums,
                  "row.put_column_sums: the lambda returns a different number of values than "
                  "the op has column sums");
    Acc* sums = column_sums_;
    for (int64_t j = 0; j < cols_; ++j) {
      const R r = Call(j, f, kept...);
      for (int k = 0; k < P::kColumnSums; ++k) sums[k * cols_ + j] += detail::Part<Acc>(r, k);
    }
  }

 private:
  using Indices = std::index_sequence_for<Roles...>;
  static constexpr int kLanes = 32;  // Reduce's, as 4 vectors of 8
  static constexpr int kSlots = P::kInputs > 0 ? P::kInputs : 1;
  static constexpr bool kReadAt[kSlots] = {kRead...};
  static constexpr bool kElementwise[kSlots] = {(std::is_same_v<Roles, Elem> ||
                                                 std::is_same_v<Roles, Col>)...};
  static constexpr bool kRowMajor[kSlots] = {std::is_same_v<Roles, Elem>...};
  static constexpr std::size_t kBytes[kSlots] = {sizeof(typename Stored<Roles, T>::type)...};
  // 16-bit inputs are converted to Acc a row at a time (per-column ones once) in a loop of their
  // own, so the functor's loops read Acc arrays, as for float32 (converting in them kept GCC from
  // vectorizing: bfloat16 layer_norm 3-5 ns an element against 0.7 in float32).
  static constexpr bool kConverts = !std::is_same_v<T, Acc>;
  // And float16 outputs are stored from Acc kStage columns at a time, in bulk (StoreChunk: 8
  // float16s an instruction where the CPU has F16C, against a dozen instructions each; layer_norm's
  // float16 forward 3 x faster). A bfloat16 store (a rounding add and a shift) vectorizes in the
  // functor's loop, where staging it measured 8 % slower.
  static constexpr bool kStagesStores = kConverts && !IsBFloat16<T>::value;
  static constexpr int64_t kStage = 256;

  static void Convert(const T* from, Acc* to, int64_t n) { LoadChunk(from, to, n); }

  template <std::size_t... I>
  void LoadRowValues(std::index_sequence<I...>) {
    ((row_value_[I] = RowValue<I, Roles>()), ...);
  }
  template <std::size_t I, typename Role>
  Acc RowValue() const {
    if constexpr (std::is_same_v<Role, RowIn> || std::is_same_v<Role, RowStat>) {
      using S = typename Stored<Role, T>::type;
      const S* s = static_cast<const S*>(p_.in[int(I)]);
      return kReadAt[I] && s != nullptr ? static_cast<Acc>(LoadAs<S>::From(s[row_])) : Acc(0);
    } else {
      return Acc(0);
    }
  }

  // Input I at column j, as Acc.
  template <std::size_t I, typename Role>
  Acc In(int64_t j) const {
    if constexpr (!kReadAt[I]) {
      return Acc(0);
    } else if constexpr (std::is_same_v<Role, Elem> || std::is_same_v<Role, Col>) {
      using S = std::conditional_t<kConverts, Acc, T>;  // what base_ points to
      return static_cast<Acc>(static_cast<const S*>(base_[I])[j]);
    } else {
      return row_value_[I];
    }
  }

  // f of the inputs at column j, then of the kept values there.
  template <typename F, typename... K>
  auto Call(int64_t j, const F& f, const K&... kept) const {
    return CallWith(j, Indices{}, f, kept...);
  }
  template <std::size_t... I, typename F, typename... K>
  auto CallWith(int64_t j, std::index_sequence<I...>, const F& f, const K&... kept) const {
    return f(In<I, Roles>(j)..., kept.values[j]...);
  }
  template <typename F, typename... K>
  Acc Value(int64_t j, const F& f, const K&... kept) const {
    return static_cast<Acc>(Call(j, f, kept...));
  }

  // `f` over the row combined by `Op` (Add, Max, Min), starting from `start`; where f returns K
  // values, each of them over the row (the CPU gains nothing from reducing them together: each
  // pass computes one, and the compiler drops the others' math).
  template <typename Op, typename F, typename... K>
  auto Reduce(Acc start, const F& f, const K&... kept) const {
    using R = decltype(Call(0, f, kept...));
    constexpr int kValues = detail::ResultSize<R>::value;
    Array<Acc, kValues> values;
    for (int k = 0; k < kValues; ++k) {
      values[k] = ReduceOne<Op>(start, [&](int64_t j) {
        return detail::Part<Acc>(Call(j, f, kept...), k);
      });
    }
    return detail::ReductionResult<Acc, R>(values);
  }

  // `at(j)` over the row combined by `Op`, starting from `start`: column j goes to lane
  // j % kLanes, and the lanes are combined as a tree (lane l with l + 16, then with l + 8, then
  // the last 8 pairwise). The values are computed kLanes at a time into a buffer, in a loop of
  // their own (which GCC vectorizes however much math f holds; the build's
  // -fno-tree-loop-distribute-patterns keeps a plain copy a loop, not a memcpy call), then
  // combined into the lanes as 4 vectors of 8 (GCC's vector extension, lane by lane in every
  // clone; 4 so that a sum does not wait on the one before). The last values are padded with
  // `start`, which changes no lane (a lane is never -0).
  template <typename Op, typename At>
  Acc ReduceOne(Acc start, const At& at) const {
    Lanes lanes;
    Fill(lanes, start);
    Acc v[kLanes];
    int64_t j = 0;
    for (; j + kLanes <= cols_; j += kLanes) {
      for (int i = 0; i < kLanes; ++i) v[i] = at(j + i);
      Combine<Op>(lanes, v);
    }
    if (j < cols_) {
      const int m = static_cast<int>(cols_ - j);
      for (int i = 0; i < m; ++i) v[i] = at(j + i);
      for (int i = m; i < kLanes; ++i) v[i] = start;
      Combine<Op>(lanes, v);
    }
    Fold<Op>(lanes);
    Acc lane[8];
    std::memcpy(lane, &lanes, sizeof lane);
    return Op::Of(Op::Of(Op::Of(lane[0], lane[1]), Op::Of(lane[2], lane[3])),
                  Op::Of(Op::Of(lane[4], lane[5]), Op::Of(lane[6], lane[7])));
  }
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
  typedef Acc Vec8 __attribute__((vector_size(8 * sizeof(Acc))));
  struct Lanes {
    Vec8 v0, v1, v2, v3;
  };
  static void Fill(Lanes& a, Acc value) {
    a.v0 = Vec8{} + value;
    a.v1 = a.v0;
    a.v2 = a.v0;
    a.v3 = a.v0;
  }
  // The next kLanes values, `b`, into the lanes.
  template <typename Op>
  static void Combine(Lanes& a, const Acc* b) {
    Vec8 x0, x1, x2, x3;
    std::memcpy(&x0, b, sizeof x0);
    std::memcpy(&x1, b + 8, sizeof x1);
    std::memcpy(&x2, b + 16, sizeof x2);
    std::memcpy(&x3, b + 24, sizeof x3);
    Op::Into(a.v0, x0);
    Op::Into(a.v1, x1);
    Op::Into(a.v2, x2);
    Op::Into(a.v3, x3);
  }
  // Lanes l + 16 into l, then l + 8 into l: the first 8 lanes hold the rest of the tree.
  template <typename Op>
  static void Fold(Lanes& a) {
    Op::Into(a.v0, a.v2);
    Op::Into(a.v1, a.v3);
    Op::Into(a.v0, a.v1);
  }
#else
  struct Lanes {
    Acc v[kLanes];
  };
  static void Fill(Lanes& a, Acc value) {
    for (int l = 0; l < kLanes; ++l) a.v[l] = value;
  }
  template <typename Op>
  static void Combine(Lanes& a, const Acc* b) {
    for (int l = 0; l < kLanes; ++l) a.v[l] = Op::Of(a.v[l], b[l]);
  }
  template <typename Op>
  static void Fold(Lanes& a) {
    for (int l = 0; l < 16; ++l) a.v[l] = Op::Of(a.v[l], a.v[l + 16]);
    for (int l = 0; l < 8; ++l) a.v[l] = Op::Of(a.v[l], a.v[l + 8]);
  }
#endif

  const P& p_;
  int64_t row_;
  int64_t cols_;
  Acc* column_sums_;
  Scratch<Acc>* scratch_;
  int kept_ = 0;  // row.keep calls so far
  const void* base_[kSlots];  // per-element inputs: this row's start (Elem) or column 0 (Col)
  Acc row_value_[kSlots];     // per-row inputs: this row's value
};

// Rows per chunk of the column sums: each chunk sums its rows in order, then the chunks' sums
// are added in order, so the result depends on rows and cols only (not on the thread count).
inline int64_t ChunkRows(int64_t rows) {
  constexpr int64_t kMinChunk = 256;
  constexpr int64_t kMaxChunks = 64;
  const int64_t even = (rows + kMaxChunks - 1) / kMaxChunks;
  return even > kMinChunk ? even : kMinChunk;
}

// Rows per block of a launch without column sums: blocks of at least 2^16 elements, the least
// work worth a thread.
inline int64_t BlockRows(int64_t cols) {
  constexpr int64_t kBlock = int64_t(1) << 16;
  return cols >= kBlock ? 1 : kBlock / (cols > 0 ? cols : 1);
}

// Runs f over rows [begin, end) with a copy of f (whose attrs then cannot alias the outputs, so
// the loops vectorize), adding the column sums to `column_sums`. Cloned for AVX-512 and AVX2
// (opgen/cpu.h), with every call inlined (flatten), the functor's and the Row's, so that all of
// it is compiled per clone.
template <typename Read, typename... Roles, typename F, typename P>
OPGEN_CPU_CLONES __attribute__((flatten)) void Rows(const F& f, const P& p, int64_t begin,
                                                    int64_t end,
                                                    OpMathT<typename P::Storage>* column_sums) {
  const F local = f;
  Scratch<OpMathT<typename P::Storage>> scratch;
  for (int64_t r = begin; r < end; ++r) {
    Row<P, Read, Roles...> row(p, r, column_sums, &scratch);
    local(row);
  }
}

template <int kIn, std::size_t... I>
Reads<(I < std::size_t(kIn))...> AllRead(std::index_sequence<I...>) {
  return {};
}

}  // namespace cpu

// Runs `f` over every row of `p` on the CPU, reading the inputs `reads` says (every input by
// default). Rows run on Paddle's CPU thread count (opgen/cpu.h) in blocks fixed by the shape; the
// results are the same bits on any thread count.
template <typename F, typename... Roles, typename T, int kIn, int kOut, int kRowOut, int kColSum,
          bool... kRead>
void RunCpu(const F& f, const Pointers<T, kIn, kOut, kRowOut, kColSum>& p,
            Reads<kRead...> reads = {}) {
  static_assert(sizeof...(Roles) == kIn, "RunCpu: one role tag per input");
  static_assert(detail::KnownRoles<Roles...>(), "RunCpu: roles are Elem, Col, RowIn, RowStat");
  static_assert(sizeof...(kRead) == 0 || int(sizeof...(kRead)) == kIn,
                "RunCpu: one Reads flag per input");
  if constexpr (sizeof...(kRead) == 0 && kIn > 0) {
    RunCpu<F, Roles...>(f, p, cpu::AllRead<kIn>(std::make_index_sequence<kIn>{}));
  } else {
    (void)reads;
    using Read = Reads<kRead...>;
    using AccT = OpMathT<T>;
    auto rows = [&](int64_t begin, int64_t end, AccT* column_sums) {
      cpu::Rows<Read, Roles...>(f, p, begin, end, column_sums);
    };
    const int64_t n = p.rows;
    const int64_t cols = p.cols;
    if constexpr (kColSum == 0) {
      const int64_t block = cpu::BlockRows(cols);
      opgen::cpu::ParallelFor((n + block - 1) / block, [&](int64_t b) {
        rows(b * block, std::min(n, (b + 1) * block), nullptr);
      });
    } else {
      const int64_t chunk_rows = cpu::ChunkRows(n);
      const int64_t chunks = (n + chunk_rows - 1) / chunk_rows;
      const std::size_t width = static_cast<std::size_t>(kColSum * cols);
      // One partial sum per chunk, each summed in row order, then added in chunk order; one
      // thread reuses one buffer for every chunk, which adds the same values in the same order.
      const bool parallel = opgen::cpu::CpuThreads() > 1 && chunks > 1;
      std::vector<AccT> total(width, AccT(0));
      std::vector<AccT> partials(width * static_cast<std::size_t>(parallel ? chunks : 1));
      auto chunk = [&](int64_t c) {
        AccT* partial = partials.data() + (parallel ? width * static_cast<std::size_t>(c) : 0);
        std::fill(partial, partial + width, AccT(0));
        rows(c * chunk_rows, std::min(n, (c + 1) * chunk_rows), partial);
      };
      auto add = [&](int64_t c) {
        const AccT* partial =
            partials.data() + (parallel ? width * static_cast<std::size_t>(c) : 0);
        for (std::size_t i = 0; i < width; ++i) total[i] += partial[i];
      };
      if (parallel) {
        opgen::cpu::ParallelFor(chunks, chunk);
        for (int64_t c = 0; c < chunks; ++c) add(c);
      } else {
        for (int64_t c = 0; c < chunks; ++c) chunk(c), add(c);
      }
      for (int k = 0; k < kColSum; ++k) {
        for (int64_t j = 0; j < cols; ++j) {
          p.col_sum[k][j] = cpu::StoreAs<T>::From(total[k * cols + j]);
        }
      }
    }
  }
}

}  // namespace rowwise
}  // namespace opgen

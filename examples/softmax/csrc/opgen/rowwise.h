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
//     using Acc = opgen::Acc<T>;          // float for float and 16-bit types, double for double
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
//   row.put(f)              f returns Acc (one output) or opgen::Array<Acc, kOut>: out[k][r, j]
//   row.put_rows(a, ...)    kRowOut Acc values: row_out[k][r]
//   row.put_column_sums(f)  f returns Acc or opgen::Array<Acc, kColSum>: col_sum[k][j] is the sum
//                           over all rows, in Acc, in an order fixed by rows and cols (no atomics;
//                           two runs give the same bits); all zeros when rows == 0.
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
// A null input pointer reads as zeros (an absent output gradient) and is never loaded.
// All tensors are contiguous; pointers of any alignment work (the GPU picks its vector width at
// run time).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "opgen/math.h"

namespace opgen {

// The type a row-wise functor computes and reduces in.
template <typename T>
using Acc = OpMathT<T>;

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

// Input of role `Role` at row `row`, column j, as Acc; null reads as zero.
template <typename Role, typename T>
OPGEN_HD OpMathT<T> Load(const void* p, int64_t row, int64_t cols, int64_t j) {
  using S = typename Stored<Role, T>::type;
  if (p == nullptr) return OpMathT<T>(0);
  const S* s = static_cast<const S*>(p);
  if constexpr (std::is_same_v<Role, Elem>) {
    return static_cast<OpMathT<T>>(s[row * cols + j]);
  } else if constexpr (std::is_same_v<Role, Col>) {
    return static_cast<OpMathT<T>>(s[j]);
  } else {
    return static_cast<OpMathT<T>>(s[row]);
  }
}

// How many values a lambda's result holds: an opgen::Array's size, else 1.
template <typename R>
struct ResultSize {
  static constexpr int value = 1;
};
template <typename A, int N>
struct ResultSize<Array<A, N>> {
  static constexpr int value = N;
};
template <typename F, typename... Args>
using ResultOf = std::decay_t<std::invoke_result_t<const F&, Args...>>;

// Value k of a lambda's result, as Acc.
template <typename AccT, typename R>
OPGEN_HD AccT Part(const R& result, int k) {
  if constexpr (ResultSize<R>::value == 1 && !std::is_class_v<R>) {
    (void)k;
    return static_cast<AccT>(result);
  } else {
    return static_cast<AccT>(result[k]);
  }
}

template <typename AccT>
OPGEN_HD AccT Infinity() {
  return static_cast<AccT>(HUGE_VALF);  // std::numeric_limits is host-only in CUDA
}

}  // namespace detail

// ---- the CPU loop ------------------------------------------------------------------------------
namespace cpu {

// How the CPU loop stores a result as T: a plain conversion. The Paddle side (opgen/rowwise_op.h)
// specializes it for Paddle's 16-bit types before any loop is instantiated: rounded to nearest
// even by opgen, not by Paddle's host conversions (see opgen/paddle.h).
template <typename T>
struct StoreAs {
  static T From(OpMathT<T> r) { return static_cast<T>(r); }
};

// One row on the CPU: plain loops over the row, sums in 8 interleaved lanes added as a tree (the
// same rounding as a vectorized loop, and a better one than a single running sum).
template <typename P, typename... Roles>
class Row {
 public:
  using T = typename P::Storage;
  using Acc = OpMathT<T>;

  Row(const P& p, int64_t row, Acc* column_sums) : p_(p), row_(row), column_sums_(column_sums) {}

  Acc size() const { return static_cast<Acc>(p_.cols); }

  template <typename F>
  Acc sum(const F& f) const {
    constexpr int kLanes = 8;
    Acc lane[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= p_.cols; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) lane[l] += Value(f, j + l);
    }
    for (int l = 0; j < p_.cols; ++j, ++l) lane[l] += Value(f, j);
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
  template <typename F>
  Acc mean(const F& f) const {
    return sum(f) / size();  // 0 / 0 is NaN for an empty row
  }
  template <typename F>
  Acc max(const F& f) const {
    Acc m = -detail::Infinity<Acc>();
    for (int64_t j = 0; j < p_.cols; ++j) m = opgen::max(m, Value(f, j));
    return m;
  }
  template <typename F>
  Acc min(const F& f) const {
    Acc m = detail::Infinity<Acc>();
    for (int64_t j = 0; j < p_.cols; ++j) m = opgen::min(m, Value(f, j));
    return m;
  }

  template <typename F>
  void put(const F& f) const {
    using R = decltype(Call(f, 0, Indices{}));
    static_assert(detail::ResultSize<R>::value == P::kOutputs,
                  "row.put: the lambda returns a different number of values than the op has "
                  "per-element outputs");
    for (int64_t j = 0; j < p_.cols; ++j) {
      const R r = Call(f, j, Indices{});
      for (int k = 0; k < P::kOutputs; ++k) {
        p_.out[k][row_ * p_.cols + j] = StoreAs<T>::From(detail::Part<Acc>(r, k));
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

  template <typename F>
  void put_column_sums(const F& f) const {
    using R = decltype(Call(f, 0, Indices{}));
    static_assert(detail::ResultSize<R>::value == P::kColumnSums,
                  "row.put_column_sums: the lambda returns a different number of values than "
                  "the op has column sums");
    for (int64_t j = 0; j < p_.cols; ++j) {
      const R r = Call(f, j, Indices{});
      for (int k = 0; k < P::kColumnSums; ++k) {
        column_sums_[k * p_.cols + j] += detail::Part<Acc>(r, k);
      }
    }
  }

 private:
  using Indices = std::index_sequence_for<Roles...>;

  template <typename F, std::size_t... I>
  auto Call(const F& f, int64_t j, std::index_sequence<I...>) const {
    return f(detail::Load<Roles, T>(p_.in[int(I)], row_, p_.cols, j)...);
  }
  template <typename F>
  Acc Value(const F& f, int64_t j) const {
    return static_cast<Acc>(Call(f, j, Indices{}));
  }

  const P& p_;
  int64_t row_;
  Acc* column_sums_;
};

// Rows per chunk of the column sums: each chunk sums its rows in order, then the chunks' sums
// are added in order, so the result depends on rows and cols only (with or without OpenMP).
inline int64_t ChunkRows(int64_t rows) {
  constexpr int64_t kMinChunk = 256;
  constexpr int64_t kMaxChunks = 64;
  const int64_t even = (rows + kMaxChunks - 1) / kMaxChunks;
  return even > kMinChunk ? even : kMinChunk;
}

}  // namespace cpu

// Runs `f` over every row of `p` on the CPU. Rows run in parallel when the op is built with
// OpenMP (-fopenmp), serially otherwise; the results are the same bits either way.
template <typename F, typename... Roles, typename T, int kIn, int kOut, int kRowOut, int kColSum>
void RunCpu(const F& f, const Pointers<T, kIn, kOut, kRowOut, kColSum>& p) {
  static_assert(sizeof...(Roles) == kIn, "RunCpu: one role tag per input");
  static_assert(detail::KnownRoles<Roles...>(), "RunCpu: roles are Elem, Col, RowIn, RowStat");
  using P = Pointers<T, kIn, kOut, kRowOut, kColSum>;
  using AccT = OpMathT<T>;
  using RowT = cpu::Row<P, Roles...>;
  const int64_t rows = p.rows;
  const int64_t cols = p.cols;
  if constexpr (kColSum == 0) {
#if defined(_OPENMP)
    _Pragma("omp parallel for schedule(static)")
#endif
    for (int64_t r = 0; r < rows; ++r) {
      RowT row(p, r, nullptr);
      f(row);
    }
  } else {
    const int64_t chunk_rows = cpu::ChunkRows(rows);
    const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    const std::size_t width = static_cast<std::size_t>(kColSum * cols);
    std::vector<AccT> total(width, AccT(0));
#if defined(_OPENMP)
    std::vector<AccT> partials(width * static_cast<std::size_t>(chunks), AccT(0));
    _Pragma("omp parallel for schedule(static)")
    for (int64_t c = 0; c < chunks; ++c) {
      AccT* partial = partials.data() + width * static_cast<std::size_t>(c);
      const int64_t end = (c + 1) * chunk_rows < rows ? (c + 1) * chunk_rows : rows;
      for (int64_t r = c * chunk_rows; r < end; ++r) {
        RowT row(p, r, partial);
        f(row);
      }
    }
    for (int64_t c = 0; c < chunks; ++c) {
      const AccT* partial = partials.data() + width * static_cast<std::size_t>(c);
      for (std::size_t i = 0; i < width; ++i) total[i] += partial[i];
    }
#else
    std::vector<AccT> partial(width);
    for (int64_t c = 0; c < chunks; ++c) {
      std::fill(partial.begin(), partial.end(), AccT(0));
      const int64_t end = (c + 1) * chunk_rows < rows ? (c + 1) * chunk_rows : rows;
      for (int64_t r = c * chunk_rows; r < end; ++r) {
        RowT row(p, r, partial.data());
        f(row);
      }
      for (std::size_t i = 0; i < width; ++i) total[i] += partial[i];
    }
#endif
    for (int k = 0; k < kColSum; ++k) {
      for (int64_t j = 0; j < cols; ++j) {
        p.col_sum[k][j] = cpu::StoreAs<T>::From(total[k * cols + j]);
      }
    }
  }
}

}  // namespace rowwise
}  // namespace opgen

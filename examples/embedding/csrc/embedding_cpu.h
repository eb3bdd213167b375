// embedding: the CPU kernels. This file is yours: opgen wrote it once from the spec
// as a skeleton that builds and passes its tests, and never replaces it. After a spec change,
// `opgen generate` merges what changed around your code (the comments listing each kernel's
// arguments, the template parameters) and reports the file as merged, or as a conflict to resolve.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "embedding.h"
#include "opgen/paddle.h"  // LoadAs, StoreChunk: 16-bit conversions

namespace embedding {

// padding_idx is -1 (no padding row) or a row of the table.
inline void CheckPaddingIdx(int64_t padding_idx, int64_t rows) {
  if (padding_idx != -1 && (padding_idx < 0 || padding_idx >= rows)) {
    opgen::Fail("custom_embedding: padding_idx is ", padding_idx, "; it must be -1 (none) or a ",
                "row of the table, in [0, ", rows, ")");
  }
}

// The first id outside [0, rows) is an error naming it and where it is; never a read outside
// the table.
template <typename IdsT>
void CheckIds(const IdsT* ids, int64_t n, int64_t rows) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || static_cast<int64_t>(ids[i]) >= rows) {
      opgen::Fail("custom_embedding: ids holds ", static_cast<int64_t>(ids[i]),
                  " (at flat index ", i, "), outside the table's rows [0, ", rows, ")");
    }
  }
}

// Forward, on CPU tensors:
//   IdsT: int32_t or int64_t
//   TableT: float, double, paddle::float16 or paddle::bfloat16
//   args.ids: IdsT, any shape
//   args.table: TableT, [V, D]
//   args.out: TableT, [*ids.shape, D]; fill every element
//   args.padding_idx: int64 attr
//   args.deterministic: bool attr
//   args.check_ids: bool attr
template <typename IdsT, typename TableT>
void ForwardCPU(const ForwardArgs& args) {
  const int64_t rows = args.table.shape()[0];
  const int64_t d = args.table.shape()[1];
  const int64_t n = args.ids.numel();
  const IdsT* ids = args.ids.data<IdsT>();
  const TableT* table = args.table.data<TableT>();
  TableT* out = args.out.data<TableT>();
  CheckPaddingIdx(args.padding_idx, rows);
  if (args.check_ids) CheckIds(ids, n, rows);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id == args.padding_idx || id < 0 || id >= rows) {  // out of range: unchecked, zeros
      std::memset(out + i * d, 0, d * sizeof(TableT));  // zero bits are 0 in every float dtype
    } else {
      std::memcpy(out + i * d, table + id * d, d * sizeof(TableT));
    }
  }
}

// Backward, on CPU tensors:
//   IdsT: int32_t or int64_t
//   TableT: float, double, paddle::float16 or paddle::bfloat16
//   args.ids: IdsT, any shape
//   args.table: TableT, [V, D]
//   args.grad_out: TableT, shaped like out
//   args.grad_table: TableT, shaped like table; fill every element
//   args.padding_idx: int64 attr
//   args.deterministic: bool attr
//   args.check_ids: bool attr
template <typename IdsT, typename TableT>
void BackwardCPU(const BackwardArgs& args) {
  // Summed in float (double for float64) in the order of ids, rounded once: the same result on
  // every run, so `deterministic` changes nothing here. The gradient starts as zeros, and only
  // the rows some id reads are summed: float and double tables in place, 16-bit ones in a float
  // row of their own each, converted once at the end. (A whole float copy of the table, zeroed
  // and converted, cost more than the lookup for a large vocabulary.)
  using Acc = std::conditional_t<std::is_same_v<TableT, double>, double, float>;
  const int64_t rows = args.table.shape()[0];
  const int64_t d = args.table.shape()[1];
  const int64_t n = args.ids.numel();
  const IdsT* ids = args.ids.data<IdsT>();
  const TableT* grad_out = args.grad_out.data<TableT>();
  TableT* grad_table = args.grad_table.data<TableT>();
  CheckPaddingIdx(args.padding_idx, rows);
  if (args.check_ids) CheckIds(ids, n, rows);
  std::memset(grad_table, 0, rows * d * sizeof(TableT));  // zero bits are 0 in every float dtype
  if constexpr (std::is_same_v<TableT, Acc>) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      if (id == args.padding_idx || id < 0 || id >= rows) continue;
      TableT* row = grad_table + id * d;
      const TableT* from = grad_out + i * d;
      for (int64_t c = 0; c < d; ++c) row[c] += from[c];
    }
  } else {
    std::vector<int64_t> slot(static_cast<std::size_t>(rows), -1);  // row -> its sums, or -1
    std::vector<Acc> sums;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      if (id == args.padding_idx || id < 0 || id >= rows) continue;
      if (slot[id] < 0) {
        slot[id] = static_cast<int64_t>(sums.size());
        sums.resize(sums.size() + static_cast<std::size_t>(d), Acc(0));
      }
      Acc* row = sums.data() + slot[id];
      const TableT* from = grad_out + i * d;
      for (int64_t c = 0; c < d; ++c) row[c] += opgen::cpu::LoadAs<TableT>::From(from[c]);
    }
    // Rounded to nearest even (opgen/paddle.h; Paddle's own host conversion truncates bfloat16).
    for (int64_t r = 0; r < rows; ++r) {
      if (slot[r] < 0) continue;
      opgen::cpu::StoreChunk<TableT>(sums.data() + slot[r], grad_table + r * d, d);
    }
  }
}

}  // namespace embedding

// The row-wise ops scripts/gpu/rowwise_bench.cu checks and times on the GPU and
// tests/cpp/rowwise_runtime.cc runs on the CPU: softmax (with scale), rms_norm and layer_norm,
// forward and backward, written by hand in the shape opgen generates (see opgen/rowwise.h).
#pragma once

#include "opgen/rowwise.h"

template <typename T>
struct SoftmaxForward {  // out = exp(scale x - max) / sum
  using Acc = opgen::OpMathT<T>;
  Acc scale;
  template <class Row>
  OPGEN_HD void operator()(Row& row) const {
    const Acc m = row.max([&](Acc x) { return x * scale; });
    const auto e = row.keep([&](Acc x) { return opgen::exp<T>(x * scale - m); });
    const Acc s = row.sum([&](Acc, Acc e) { return e; }, e);
    const Acc inv = Acc(1) / s;
    row.put([&](Acc, Acc e) { return e * inv; }, e);
  }
};
template <typename T>
struct SoftmaxBackward {  // inputs out, grad_out
  using Acc = opgen::OpMathT<T>;
  Acc scale;
  template <class Row>
  OPGEN_HD void operator()(Row& row) const {
    const Acc d = row.sum([&](Acc y, Acc g) { return y * g; });
    row.put([&](Acc y, Acc g) { return scale * y * (g - d); });
  }
};
template <typename T>
struct RmsNormForward {  // inputs x, weight; outputs out; per-row rstd
  using Acc = opgen::OpMathT<T>;
  Acc eps;
  template <class Row>
  OPGEN_HD void operator()(Row& row) const {
    const Acc rstd = opgen::rsqrt(row.mean([&](Acc x, Acc) { return x * x; }) + eps);
    row.put_rows(rstd);
    row.put([&](Acc x, Acc w) { return x * rstd * w; });
  }
};
template <typename T>
struct RmsNormBackward {  // inputs x, weight, rstd, grad_out; grad_x; column sums grad_weight
  using Acc = opgen::OpMathT<T>;
  template <class Row>
  OPGEN_HD void operator()(Row& row) const {
    const Acc c = row.mean([&](Acc x, Acc w, Acc, Acc g) { return g * w * x; });
    row.put([&](Acc x, Acc w, Acc r, Acc g) { return r * (g * w - x * r * r * c); });
    row.put_column_sums([&](Acc x, Acc, Acc r, Acc g) { return g * x * r; });
  }
};
template <typename T>
struct LayerNormForward {  // inputs x, weight, bias; out; per-row mean, rstd
  using Acc = opgen::OpMathT<T>;
  Acc eps;
  template <class Row>
  OPGEN_HD void operator()(Row& row) const {
    const Acc mean = row.mean([&](Acc x, Acc, Acc) { return x; });
    const Acc var = row.mean([&](Acc x, Acc, Acc) { return (x - mean) * (x - mean); });
    const Acc rstd = opgen::rsqrt(var + eps);
    row.put_rows(mean, rstd);
    row.put([&](Acc x, Acc w, Acc b) { return (x - mean) * rstd * w + b; });
  }
};
template <typename T>
struct LayerNormBackward {  // inputs x, weight, mean, rstd, grad_out; grad_x; grad_w, grad_b
  using Acc = opgen::OpMathT<T>;
  template <class Row>
  OPGEN_HD void operator()(Row& row) const {
    const Acc a = row.mean([&](Acc, Acc w, Acc, Acc, Acc g) { return g * w; });
    const Acc b = row.mean([&](Acc x, Acc w, Acc m, Acc r, Acc g) { return g * w * (x - m) * r; });
    row.put([&](Acc x, Acc w, Acc m, Acc r, Acc g) {
      return r * (g * w - a - (x - m) * r * b);
    });
    row.put_column_sums([&](Acc x, Acc, Acc m, Acc r, Acc g) -> opgen::Array<Acc, 2> {
      return {g * (x - m) * r, g};
    });
  }
};

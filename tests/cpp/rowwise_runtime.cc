// Drives templates/rowwise/csrc/opgen/rowwise.h's CPU loop for tests/test_rowwise_runtime.py,
// which compares what it prints with numpy. The ops are scripts/gpu/rowwise_ops.h's, the same the
// GPU bench checks. Reads one command per line on stdin, answers one JSON line per command:
//   run DTYPE OP ROWS COLS [special | nograd | zerograd]
//     DTYPE f32 or f64; OP softmax, rms_norm, layer_norm (forward) or softmax_grad,
//     rms_norm_grad, layer_norm_grad (backward, fed this program's own forward results). Inputs
//     from Value() below: x (k = 0), weight 1 + Value(1) / 2, bias (k = 3), grad_out (k = 2);
//     `special` makes softmax's row 0 all -inf and puts a NaN in row 1; `nograd` passes a
//     backward's grad_out as null (absent: the loop reads a row of zeros), `zerograd` as zeros.
//   Answer: {"out": [...], "rows": [[...], ...], "cols": [[...], ...], "saved": [[...], ...]}:
//   the per-element output, the per-row outputs, the column sums, and for a backward the forward
//   results it was given (softmax's output; the norms' per-row statistics).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "rowwise_ops.h"

using opgen::rowwise::Col;
using opgen::rowwise::Elem;
using opgen::rowwise::Pointers;
using opgen::rowwise::RowStat;
using opgen::rowwise::RunCpu;

double Value(int k, int64_t i) {
  return static_cast<double>((i * 7919 + k * 104729) % 2003) / 1001.0 - 1.0;
}

template <typename T>
std::string Numbers(const std::vector<T>& values) {
  std::string text = "[";
  char buffer[40];
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = static_cast<double>(values[i]);
    if (std::isnan(v)) {
      std::snprintf(buffer, sizeof buffer, "NaN");
    } else if (std::isinf(v)) {
      std::snprintf(buffer, sizeof buffer, v > 0 ? "Infinity" : "-Infinity");
    } else {
      std::snprintf(buffer, sizeof buffer, "%.17g", v);
    }
    text += (i ? "," : "") + std::string(buffer);
  }
  return text + "]";
}

template <typename T>
std::string List(const std::vector<std::vector<T>>& lists) {
  std::string text = "[";
  for (std::size_t i = 0; i < lists.size(); ++i) text += (i ? "," : "") + Numbers(lists[i]);
  return text + "]";
}

template <typename T>
std::string Run(const std::string& op, int64_t rows, int64_t cols, const std::string& flag) {
  const bool special = flag == "special";
  using Acc = opgen::OpMathT<T>;
  const int64_t n = rows * cols;
  std::vector<T> x(n), g(n), w(cols), b(cols), out(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = T(Value(0, i));
    g[i] = flag == "zerograd" ? T(0) : T(Value(2, i));
  }
  const T* grad = flag == "nograd" ? nullptr : g.data();
  for (int64_t j = 0; j < cols; ++j) {
    w[j] = T(1 + Value(1, j) / 2);
    b[j] = T(Value(3, j));
  }
  std::vector<std::vector<Acc>> row_outs, saved_rows;
  std::vector<std::vector<T>> col_outs, saved_elems;
  const bool backward = op.size() > 5 && op.compare(op.size() - 5, 5, "_grad") == 0;
  const std::string base = backward ? op.substr(0, op.size() - 5) : op;
  if (base == "softmax") {
    if (special && rows >= 2 && cols >= 1) {
      for (int64_t j = 0; j < cols; ++j) x[j] = -INFINITY;
      x[cols + cols / 2] = NAN;
    }
    Pointers<T, 1, 1> p;
    p.in[0] = x.data();
    p.out[0] = out.data();
    p.rows = rows;
    p.cols = cols;
    RunCpu<SoftmaxForward<T>, Elem>(SoftmaxForward<T>{Acc(0.75)}, p);
    if (backward) {
      const std::vector<T> y = out;
      Pointers<T, 2, 1> q;
      q.in[0] = y.data();
      q.in[1] = grad;
      q.out[0] = out.data();
      q.rows = rows;
      q.cols = cols;
      RunCpu<SoftmaxBackward<T>, Elem, Elem>(SoftmaxBackward<T>{Acc(0.75)}, q);
      saved_elems.push_back(y);
    }
  } else if (base == "rms_norm") {
    std::vector<Acc> rstd(rows);
    Pointers<T, 2, 1, 1> p;
    p.in[0] = x.data();
    p.in[1] = w.data();
    p.out[0] = out.data();
    p.row_out[0] = rstd.data();
    p.rows = rows;
    p.cols = cols;
    RunCpu<RmsNormForward<T>, Elem, Col>(RmsNormForward<T>{Acc(1e-6)}, p);
    if (backward) {
      std::vector<T> grad_w(cols, T(-7));  // overwritten, zeros when rows == 0
      Pointers<T, 4, 1, 0, 1> q;
      q.in[0] = x.data();
      q.in[1] = w.data();
      q.in[2] = rstd.data();
      q.in[3] = grad;
      q.out[0] = out.data();
      q.col_sum[0] = grad_w.data();
      q.rows = rows;
      q.cols = cols;
      RunCpu<RmsNormBackward<T>, Elem, Col, RowStat, Elem>(RmsNormBackward<T>{}, q);
      saved_rows.push_back(rstd);
      col_outs.push_back(grad_w);
    } else {
      row_outs.push_back(rstd);
    }
  } else if (base == "layer_norm") {
    std::vector<Acc> mean(rows), rstd(rows);
    Pointers<T, 3, 1, 2> p;
    p.in[0] = x.data();
    p.in[1] = w.data();
    p.in[2] = b.data();
    p.out[0] = out.data();
    p.row_out[0] = mean.data();
    p.row_out[1] = rstd.data();
    p.rows = rows;
    p.cols = cols;
    RunCpu<LayerNormForward<T>, Elem, Col, Col>(LayerNormForward<T>{Acc(1e-5)}, p);
    if (backward) {
      std::vector<T> grad_w(cols, T(-7)), grad_b(cols, T(-7));
      Pointers<T, 5, 1, 0, 2> q;
      q.in[0] = x.data();
      q.in[1] = w.data();
      q.in[2] = mean.data();
      q.in[3] = rstd.data();
      q.in[4] = grad;
      q.out[0] = out.data();
      q.col_sum[0] = grad_w.data();
      q.col_sum[1] = grad_b.data();
      q.rows = rows;
      q.cols = cols;
      RunCpu<LayerNormBackward<T>, Elem, Col, RowStat, RowStat, Elem>(LayerNormBackward<T>{}, q);
      saved_rows = {mean, rstd};
      col_outs = {grad_w, grad_b};
    } else {
      row_outs = {mean, rstd};
    }
  } else {
    return "{\"error\": \"unknown op " + op + "\"}";
  }
  std::string saved = List(saved_rows);
  if (!saved_elems.empty()) saved = List(saved_elems);
  return "{\"out\": " + Numbers(out) + ", \"rows\": " + List(row_outs) +
         ", \"cols\": " + List(col_outs) + ", \"saved\": " + saved + "}";
}

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string command, dtype, op, flag;
    int64_t rows = 0, cols = 0;
    words >> command >> dtype >> op >> rows >> cols >> flag;
    if (command != "run") {
      std::printf("{\"error\": \"unknown command\"}\n");
    } else if (dtype == "f32") {
      std::printf("%s\n", Run<float>(op, rows, cols, flag).c_str());
    } else {
      std::printf("%s\n", Run<double>(op, rows, cols, flag).c_str());
    }
  }
  return 0;
}

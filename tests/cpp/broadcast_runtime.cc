// Drives templates/elementwise/csrc/opgen/broadcast.h and divider.h for tests/test_broadcast_runtime.py,
// which compares what it prints with numpy. Reads one command per line on stdin, answers one
// JSON line per command on stdout:
//   plan A;B[;C]          shapes as comma lists ("" is 0-d): the plan, or {"error": ...}
//   run DTYPE OP A;B [null K]
//                         DTYPE f32 or f64, OP mul or tanh_add: the forward output and both
//                         gradients from the CPU loops, inputs from Value() below; with
//                         `null K`, input K (0 x, 1 y, 2 the output gradient) is passed as a
//                         null pointer, which the loops read as zeros
//   divider               IntDivider against / and % on many divisors and dividends
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "opgen/broadcast.h"
#include "opgen/divider.h"

using Shape = std::vector<int64_t>;

// Input k's element i; the test computes the same in float64 and casts to the dtype.
double Value(int k, int64_t i) {
  return static_cast<double>((i * 7919 + k * 104729) % 2003) / 1001.0 - 1.0;
}

template <typename MT>
struct Mul {
  void operator()(MT x, MT y, MT& out) const { out = x * y; }
};
template <typename MT>
struct MulGrad {
  void operator()(MT x, MT y, MT grad_out, MT& grad_x, MT& grad_y) const {
    grad_x = grad_out * y;
    grad_y = grad_out * x;
  }
};
template <typename MT>
struct TanhAdd {  // tanh(x + 2 y)
  void operator()(MT x, MT y, MT& out) const { out = opgen::tanh(x + MT(2) * y); }
};
template <typename MT>
struct TanhAddGrad {
  void operator()(MT x, MT y, MT grad_out, MT& grad_x, MT& grad_y) const {
    const MT t = opgen::tanh(x + MT(2) * y);
    grad_x = grad_out * (MT(1) - t * t);
    grad_y = MT(2) * grad_x;
  }
};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string Ints(const int64_t* values, int count) {
  std::string text = "[";
  for (int i = 0; i < count; ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text + "]";
}

template <typename T>
std::string Numbers(const std::vector<T>& values) {
  std::string text = "[";
  char buffer[40];
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::snprintf(buffer, sizeof buffer, std::is_same_v<T, float> ? "%.9g" : "%.17g",
                  static_cast<double>(values[i]));
    text += (i ? "," : "") + std::string(buffer);
  }
  return text + "]";
}

std::vector<Shape> ParseShapes(const std::string& text) {
  std::vector<Shape> shapes(1);
  std::string number;
  auto flush = [&] {
    if (!number.empty()) shapes.back().push_back(std::stoll(number));
    number.clear();
  };
  for (char c : text) {
    if (c == ';') {
      flush();
      shapes.emplace_back();
    } else if (c == ',') {
      flush();
    } else if (c != ' ') {
      number += c;
    }
  }
  flush();
  return shapes;
}

template <int kIn>
std::string PlanJson(const std::vector<Shape>& given) {
  Shape shapes[kIn];
  for (int k = 0; k < kIn; ++k) shapes[k] = given[k];
  opgen::BroadcastPlan<kIn> plan;
  const std::string error = opgen::MakeBroadcastPlan(shapes, &plan);
  if (!error.empty()) return "{\"error\": \"" + Escape(error) + "\"}";
  std::string strides = "[";
  for (int k = 0; k < kIn; ++k) strides += (k ? "," : "") + Ints(plan.strides[k], plan.rank);
  strides += "]";
  bool full[kIn];
  std::string fulls = "[";
  for (int k = 0; k < kIn; ++k) {
    full[k] = plan.IsFull(k);
    fulls += std::string(k ? "," : "") + (full[k] ? "true" : "false");
  }
  return "{\"out_shape\": " + Ints(plan.out_shape.data(), static_cast<int>(plan.out_shape.size())) +
         ", \"numel\": " + std::to_string(plan.numel) + ", \"pattern\": \"" +
         opgen::PatternName(plan.pattern) + "\", \"dims\": " + Ints(plan.dims, plan.rank) +
         ", \"strides\": " + strides + ", \"full\": " + fulls + "]}";
}

template <typename T, template <typename> class Fwd, template <typename> class Bwd>
std::string Run(const std::vector<Shape>& given, int null_input) {
  using MT = opgen::OpMathT<T>;
  const Shape forward_shapes[2] = {given[0], given[1]};
  opgen::BroadcastPlan<2> plan;
  const std::string error = opgen::MakeBroadcastPlan(forward_shapes, &plan);
  if (!error.empty()) return "{\"error\": \"" + Escape(error) + "\"}";
  const Shape backward_shapes[3] = {given[0], given[1], plan.out_shape};
  opgen::BroadcastPlan<3> backward_plan;
  opgen::MakeBroadcastPlan(backward_shapes, &backward_plan);
  std::vector<T> x(plan.in_numel[0]), y(plan.in_numel[1]), dy(plan.numel);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(Value(0, i));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<T>(Value(1, i));
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<T>(Value(2, i));
  // Gradients start as NaN: every element must be written.
  std::vector<T> out(plan.numel), gx(x.size(), NAN), gy(y.size(), NAN);
  opgen::Pointers<const T, 3> in{{x.data(), y.data(), dy.data()}};
  if (null_input >= 0) in.at[null_input] = nullptr;
  opgen::cpu::BroadcastLoop<T>(Fwd<MT>{}, plan, opgen::Pointers<const T, 2>{{in.at[0], in.at[1]}},
                               opgen::Pointers<T, 1>{{out.data()}});
  opgen::cpu::BroadcastBackwardLoop<T>(Bwd<MT>{}, backward_plan, in,
                                       opgen::Pointers<T, 2>{{gx.data(), gy.data()}});
  return "{\"pattern\": \"" + std::string(opgen::PatternName(plan.pattern)) +
         "\", \"backward_pattern\": \"" + opgen::PatternName(backward_plan.pattern) +
         "\", \"out\": " + Numbers(out) + ", \"grad_x\": " + Numbers(gx) +
         ", \"grad_y\": " + Numbers(gy) + "}";
}

template <typename I>
long CountWrongDivisions(std::mt19937_64& rng) {
  const I half = I{1} << (8 * sizeof(I) - 1);  // divisors and dividends stay below this
  long wrong = 0;
  auto check = [&](I d, I n) {
    const opgen::IntDivider<I> divider(d);
    const opgen::DivMod<I> got = divider.Divide(n);
    if (got.div != n / d || got.mod != n % d) ++wrong;
  };
  for (int s = 0; s < static_cast<int>(8 * sizeof(I)) - 1; ++s) {
    for (int delta = -1; delta <= 1; ++delta) {
      const I d = (I{1} << s) + static_cast<I>(delta);
      if (d < 1 || d >= half) continue;
      for (I n : {I{0}, I{1}, static_cast<I>(d - 1), d, static_cast<I>(d + 1),
                  static_cast<I>(half - 1), static_cast<I>(half - 2)}) {
        if (n < half) check(d, n);
      }
    }
  }
  for (int t = 0; t < 20000; ++t) {
    const I d = t % 2 ? static_cast<I>(rng() % 5000 + 1) : static_cast<I>(rng() % (half - 1) + 1);
    for (int k = 0; k < 8; ++k) check(d, static_cast<I>(rng() % half));
  }
  return wrong;
}

int main() {
  char line[4096];
  std::mt19937_64 rng(11);
  while (std::fgets(line, sizeof line, stdin) != nullptr) {
    std::string command(line);
    while (!command.empty() && (command.back() == '\n' || command.back() == '\r')) {
      command.pop_back();
    }
    std::string answer;
    if (command.rfind("plan ", 0) == 0) {
      const std::vector<Shape> shapes = ParseShapes(command.substr(5));
      answer = shapes.size() == 2 ? PlanJson<2>(shapes) : PlanJson<3>(shapes);
    } else if (command.rfind("run ", 0) == 0) {
      int null_input = -1;
      const std::size_t null_at = command.find(" null ");
      if (null_at != std::string::npos) {
        null_input = std::stoi(command.substr(null_at + 6));
        command.resize(null_at);
      }
      char dtype[8], op[16];
      int consumed = 0;
      std::sscanf(command.c_str(), "run %7s %15s %n", dtype, op, &consumed);
      const std::vector<Shape> shapes = ParseShapes(command.substr(consumed));
      const bool f32 = std::strcmp(dtype, "f32") == 0, mul = std::strcmp(op, "mul") == 0;
      if (f32) {
        answer = mul ? Run<float, Mul, MulGrad>(shapes, null_input)
                     : Run<float, TanhAdd, TanhAddGrad>(shapes, null_input);
      } else {
        answer = mul ? Run<double, Mul, MulGrad>(shapes, null_input)
                     : Run<double, TanhAdd, TanhAddGrad>(shapes, null_input);
      }
    } else if (command == "divider") {
      answer = "{\"wrong32\": " + std::to_string(CountWrongDivisions<uint32_t>(rng)) +
               ", \"wrong64\": " + std::to_string(CountWrongDivisions<uint64_t>(rng)) + "}";
    } else {
      answer = "{\"error\": \"unknown command\"}";
    }
    std::printf("%s\n", answer.c_str());
  }
  return 0;
}

// Checks and times opgen's broadcasting launcher (templates/elementwise/csrc/opgen/broadcast.cuh) on its
// own, without Paddle (scripts/gpu/broadcast.sh builds and runs it):
//   nvcc -O3 -std=c++17 -arch=sm_90 -Itemplates/common/csrc -Itemplates/elementwise/csrc scripts/gpu/broadcast_bench.cu
//     -o /tmp/broadcast_bench && /tmp/broadcast_bench [--large] [--check-only | --time-only | --profile |
//     --profile-forward]
// First every path, forward and backward, in float32, float16 and bfloat16, against a host
// reference: bias, unaligned and ragged rows, per-row values, scalars, general N-d, empty and 0-d
// shapes, misaligned pointers, each output checked for writes past its end, each backward run
// twice for bit-identical gradients; --large adds outputs of more than 2^31 elements (64-bit
// index math, about 9 GB of device memory at a time). Then times the patterns with CUDA events
// against a device-to-device cudaMemcpyAsync of the same bytes, measured in the same run: one
// line per (case, dtype) with ms, GB/s over the bytes the op must move, and the ratio to the copy.
// Exits 1 on any mismatch; a ratio below its target is reported (MISS) without failing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "opgen/broadcast.cuh"

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t e = (call);                                                            \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));  \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

using Shape = std::vector<int64_t>;

// ---- the ops -------------------------------------------------------------------------------
// bias + gelu (tanh form), as opgen would render `out: gelu_tanh(x + b)` and its derivative.
constexpr double kSqrt2OverPi = 0.7978845608028654;
template <typename MT>
struct BiasGelu {
  OPGEN_HD void operator()(MT x, MT b, MT& out) const {
    const MT v = x + b;
    out = MT(0.5) * v * (MT(1) + opgen::tanh(MT(kSqrt2OverPi) * (v + MT(0.044715) * v * v * v)));
  }
};
template <typename MT>
struct BiasGeluGrad {
  OPGEN_HD void operator()(MT x, MT b, MT grad_out, MT& grad_x, MT& grad_b) const {
    const MT v = x + b;
    const MT t = opgen::tanh(MT(kSqrt2OverPi) * (v + MT(0.044715) * v * v * v));
    const MT dt = MT(kSqrt2OverPi) * (MT(1) + MT(3 * 0.044715) * v * v);
    const MT g = grad_out * (MT(0.5) * (MT(1) + t) + MT(0.5) * v * (MT(1) - t * t) * dt);
    grad_x = g;
    grad_b = g;
  }
};
// The same for float16 and bfloat16 with faster math (opgen::lowp), by BENCH_GELU:
//   0 opgen::tanh (as float32), 1 opgen::lowp::tanh, 2 the hardware's tanh.approx.f32,
//   3 the sigmoid form: gelu_tanh(v) = v sigmoid(2 z), its derivative
//     s + 2 v s (1 - s) dz/dv with s = sigmoid(2 z), with opgen::lowp::sigmoid;
//   4 the sigmoid form with opgen::sigmoid (expf and a division, as float32 would get);
//   5 opgen::lowp::tanh with the derivative's constants folded for fused multiply-adds
//     (g' = fma(v fma(1.5 k c, v^2, k / 2), 1 - t^2, fma(t, 1/2, 1/2))), 6 the same with
//     tanh.approx.f32: how much of the 16-bit backward is its instruction count.
// On the host (the reference) every form is the accurate one.
#ifndef BENCH_GELU
#define BENCH_GELU 1  // what a generated op computes: opgen::tanh<T> is opgen::lowp::tanh
#endif
template <typename MT>
OPGEN_HD MT LowpTanh(MT z) {
#if BENCH_GELU == 0
  return opgen::tanh(z);
#elif (BENCH_GELU == 2 || BENCH_GELU == 6) && defined(__CUDA_ARCH__)
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(static_cast<float>(z)));
  return t;
#else
  return opgen::lowp::tanh(z);
#endif
}
template <typename MT>
struct BiasGeluLowp {
  OPGEN_HD void operator()(MT x, MT b, MT& out) const {
    const MT v = x + b;
    const MT z = MT(kSqrt2OverPi) * (v + MT(0.044715) * v * v * v);
#if BENCH_GELU == 3
    out = v * opgen::lowp::sigmoid(MT(2) * z);
#elif BENCH_GELU == 4
    out = v * opgen::sigmoid(MT(2) * z);
#else
    out = MT(0.5) * v * (MT(1) + LowpTanh(z));
#endif
  }
};
template <typename MT>
struct BiasGeluLowpGrad {
  OPGEN_HD void operator()(MT x, MT b, MT grad_out, MT& grad_x, MT& grad_b) const {
    const MT v = x + b;
    const MT z = MT(kSqrt2OverPi) * (v + MT(0.044715) * v * v * v);
    const MT dz = MT(kSqrt2OverPi) * (MT(1) + MT(3 * 0.044715) * v * v);
#if BENCH_GELU == 3 || BENCH_GELU == 4
#if BENCH_GELU == 3
    const MT s = opgen::lowp::sigmoid(MT(2) * z);
#else
    const MT s = opgen::sigmoid(MT(2) * z);
#endif
    const MT g = grad_out * (s + MT(2) * v * s * (MT(1) - s) * dz);
#elif BENCH_GELU == 5 || BENCH_GELU == 6
    (void)z;
    (void)dz;
    constexpr double kc = kSqrt2OverPi * 0.044715;
    const MT v2 = v * v;
    const MT t = LowpTanh(v * (MT(kc) * v2 + MT(kSqrt2OverPi)));
    const MT half_dz = MT(1.5 * kc) * v2 + MT(0.5 * kSqrt2OverPi);
    const MT g = grad_out * ((v * half_dz) * (MT(1) - t * t) + (MT(0.5) * t + MT(0.5)));
#else
    const MT t = LowpTanh(z);
    const MT g = grad_out * (MT(0.5) * (MT(1) + t) + MT(0.5) * v * (MT(1) - t * t) * dz);
#endif
    grad_x = g;
    grad_b = g;
  }
};
// The bias_gelu functors a dtype gets: the fast forms for 16-bit types.
template <typename T>
constexpr bool kLowp = sizeof(T) == 2;

// x * y: each input's gradient is the other one's value, so swapped gradients show.
template <typename MT>
struct Mul {
  OPGEN_HD void operator()(MT x, MT y, MT& out) const { out = x * y; }
};
template <typename MT>
struct MulGrad {
  OPGEN_HD void operator()(MT x, MT y, MT grad_out, MT& grad_x, MT& grad_y) const {
    grad_x = grad_out * y;
    grad_y = grad_out * x;
  }
};

// ---- dtypes --------------------------------------------------------------------------------
template <typename T>
struct Dtype;
template <>
struct Dtype<float> {
  static constexpr const char* kName = "float32";
  static constexpr double kRtol = 2e-6, kAtol = 1e-5;  // host and device tanhf differ by an ulp
};
template <>
struct Dtype<__half> {
  static constexpr const char* kName = "float16";
  static constexpr double kRtol = 2e-3, kAtol = 1e-3;  // one float16 ulp is 2^-10
};
template <>
struct Dtype<__nv_bfloat16> {
  static constexpr const char* kName = "bfloat16";
  static constexpr double kRtol = 1.6e-2, kAtol = 1e-2;  // one bfloat16 ulp is 2^-7
};

// ---- device memory -------------------------------------------------------------------------
// A device array of n elements from `shift` elements into its allocation (a shift makes the
// pointer misaligned for vectors), followed by kGuard elements of a fixed byte pattern that no
// kernel may touch.
constexpr int64_t kGuard = 64;
constexpr unsigned char kGuardByte = 0x5a;

template <typename T>
struct DeviceArray {
  DeviceArray() = default;
  DeviceArray(int64_t count, int shift_elements) : n(count), shift(shift_elements) {
    bytes = (n + shift + kGuard) * sizeof(T);
    CHECK(cudaMalloc(&base, bytes));
    CHECK(cudaMemset(base, kGuardByte, bytes));
    p = base + shift;
  }
  ~DeviceArray() {
    if (base != nullptr) cudaFree(base);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void Upload(const std::vector<T>& host) {
    if (n > 0) CHECK(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> Download() const {
    std::vector<T> host(n);
    if (n > 0) CHECK(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  bool GuardIntact() const {
    std::vector<unsigned char> guard(kGuard * sizeof(T));
    CHECK(cudaMemcpy(guard.data(), p + n, guard.size(), cudaMemcpyDeviceToHost));
    for (unsigned char c : guard) {
      if (c != kGuardByte) return false;
    }
    return true;
  }

  T* base = nullptr;
  T* p = nullptr;
  int64_t n = 0;
  int shift = 0;
  std::size_t bytes = 0;
};

// ---- host values and the reference ---------------------------------------------------------
template <typename T>
std::vector<T> HostRandom(int64_t n, uint64_t seed, float lo, float hi) {
  std::vector<T> values(n);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float unit = static_cast<float>(state >> 40) / static_cast<float>(1ull << 24);
    values[i] = static_cast<T>(lo + (hi - lo) * unit);
  }
  return values;
}

int failures = 0;
int checks = 0;

void Fail(const std::string& what) {
  ++failures;
  if (failures <= 40) std::printf("MISMATCH %s\n", what.c_str());
}

// A value with every digit a float has: std::to_string's six decimals print 1e-7 as 0.000000.
std::string Exact(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

bool Close(double got, double want, double tolerance) {
  if (std::isnan(want)) return std::isnan(got);
  return std::fabs(got - want) <= tolerance;
}

template <typename T>
double TolFor(double want) {
  return Dtype<T>::kAtol + Dtype<T>::kRtol * std::fabs(want);
}

std::string CaseName(const char* op, const char* dtype, const Shape& a, const Shape& b, int shift_a,
                     int shift_b, int null_input = -1) {
  std::string name = std::string(op) + " " + dtype + " " + opgen::ShapeString(a) + " with " +
                     opgen::ShapeString(b);
  if (shift_a || shift_b) {
    name += " (shifted " + std::to_string(shift_a) + ", " + std::to_string(shift_b) + ")";
  }
  if (null_input >= 0) name += " (input #" + std::to_string(null_input) + " null)";
  return name;
}

// Forward and backward of one op on one pair of shapes, against the host: the forward output
// and full gradients element by element at the dtype's tolerance; summed gradients against a
// double-precision sum, allowing for float summation in another order (a fraction of the sum
// of the terms' magnitudes); the CPU loops of opgen/broadcast.h the same way; guards; and the
// backward's gradients bit for bit across two runs. With null_input k (0 x, 1 y, 2 grad_out),
// that input is passed as a null pointer everywhere and the reference reads it as zeros.
template <typename T, template <typename> class Fwd, template <typename> class Bwd>
void CheckCase(const char* op, const Shape& a, const Shape& b, int shift_a = 0, int shift_b = 0,
               int null_input = -1) {
  using MT = opgen::OpMathT<T>;
  const std::string name = CaseName(op, Dtype<T>::kName, a, b, shift_a, shift_b, null_input);
  ++checks;
  opgen::BroadcastPlan<2> plan;
  const Shape shapes[2] = {a, b};
  const std::string error = opgen::MakeBroadcastPlan(shapes, &plan);
  if (!error.empty()) return Fail(name + ": " + error);
  opgen::BroadcastPlan<3> backward_plan;
  const Shape backward_shapes[3] = {a, b, plan.out_shape};
  if (!opgen::MakeBroadcastPlan(backward_shapes, &backward_plan).empty()) {
    return Fail(name + ": no backward plan");
  }
  const int64_t n = plan.numel;
  std::vector<T> hx = HostRandom<T>(plan.in_numel[0], 1 + a.size(), -3.0f, 3.0f);
  std::vector<T> hy = HostRandom<T>(plan.in_numel[1], 7 + b.size(), -2.0f, 2.0f);
  std::vector<T> hdy = HostRandom<T>(n, 13, -1.0f, 1.0f);
  std::vector<T>* host_inputs[3] = {&hx, &hy, &hdy};
  if (null_input >= 0) {
    for (T& v : *host_inputs[null_input]) v = static_cast<T>(0.0f);
  }
  // Input k as the launchers get it: null for the absent one.
  auto pass = [&](int k, const T* p) { return k == null_input ? nullptr : p; };

  // Host reference: the forward in MT rounded to T; gradients elementwise in MT, summed in
  // double with the sum of magnitudes.
  std::vector<T> want_out(n);
  std::vector<T> want_full[2] = {std::vector<T>(n), std::vector<T>(n)};
  std::vector<double> want_sum[2], magnitude[2];
  for (int g = 0; g < 2; ++g) {
    want_sum[g].assign(plan.in_numel[g], 0.0);
    magnitude[g].assign(plan.in_numel[g], 0.0);
  }
  {
    opgen::cpu::BroadcastCursor<2> cursor(plan);
    for (int64_t i = 0; i < n; ++i, cursor.Next()) {
      const MT x = static_cast<MT>(hx[cursor.offset(0)]), y = static_cast<MT>(hy[cursor.offset(1)]);
      MT out, gx, gy;
      Fwd<MT>{}(x, y, out);
      Bwd<MT>{}(x, y, static_cast<MT>(hdy[i]), gx, gy);
      want_out[i] = static_cast<T>(out);
      const MT grads[2] = {gx, gy};
      for (int g = 0; g < 2; ++g) {
        want_full[g][i] = static_cast<T>(grads[g]);
        want_sum[g][cursor.offset(g)] += grads[g];
        magnitude[g][cursor.offset(g)] += std::fabs(grads[g]);
      }
    }
  }
  auto check_grad = [&](const char* who, int g, const std::vector<T>& got, double sum_rtol) {
    if (plan.IsFull(g)) {
      for (int64_t i = 0; i < plan.in_numel[g]; ++i) {
        const double w = static_cast<float>(want_full[g][i]), v = static_cast<float>(got[i]);
        if (!Close(v, w, TolFor<T>(w))) {
          return Fail(name + ": " + who + " grad #" + std::to_string(g) + " [" +
                      std::to_string(i) + "] = " + Exact(v) + ", want " + Exact(w));
        }
      }
      return;
    }
    for (int64_t e = 0; e < plan.in_numel[g]; ++e) {
      const double w = want_sum[g][e], v = static_cast<float>(got[e]);
      if (!Close(v, w, TolFor<T>(w) + sum_rtol * magnitude[g][e])) {
        return Fail(name + ": " + who + " summed grad #" + std::to_string(g) + " [" +
                    std::to_string(e) + "] = " + Exact(v) + ", want " + Exact(w));
      }
    }
  };

  // The CPU loops.
  {
    std::vector<T> out(n), gx(plan.in_numel[0]), gy(plan.in_numel[1]);
    opgen::cpu::BroadcastLoop<T>(
        Fwd<MT>{}, plan, opgen::Pointers<const T, 2>{{pass(0, hx.data()), pass(1, hy.data())}},
        opgen::Pointers<T, 1>{{out.data()}});
    for (int64_t i = 0; i < n; ++i) {
      if (static_cast<float>(out[i]) != static_cast<float>(want_out[i])) {
        Fail(name + ": CPU forward differs at " + std::to_string(i));
        break;
      }
    }
    opgen::cpu::BroadcastBackwardLoop<T>(
        Bwd<MT>{}, backward_plan,
        opgen::Pointers<const T, 3>{{pass(0, hx.data()), pass(1, hy.data()), pass(2, hdy.data())}},
        opgen::Pointers<T, 2>{{gx.data(), gy.data()}});
    check_grad("CPU", 0, gx, 1e-4);
    check_grad("CPU", 1, gy, 1e-4);
  }

  // The GPU.
  DeviceArray<T> x(plan.in_numel[0], shift_a), y(plan.in_numel[1], shift_b), dy(n, 0), out(n, 0);
  DeviceArray<T> gx(plan.in_numel[0], shift_a), gy(plan.in_numel[1], shift_b);
  x.Upload(hx);
  y.Upload(hy);
  dy.Upload(hdy);
  CHECK(opgen::cuda::LaunchBroadcast(Fwd<MT>{}, plan,
                                     opgen::Pointers<const T, 2>{{pass(0, x.p), pass(1, y.p)}},
                                     opgen::Pointers<T, 1>{{out.p}}, 0, 0));
  CHECK(cudaDeviceSynchronize());
  {
    const std::vector<T> got = out.Download();
    for (int64_t i = 0; i < n; ++i) {
      const double w = static_cast<float>(want_out[i]), v = static_cast<float>(got[i]);
      if (!Close(v, w, TolFor<T>(w))) {
        Fail(name + ": forward [" + std::to_string(i) + "] = " + Exact(v) + ", want " + Exact(w) +
             " (" + opgen::PatternName(plan.pattern) + ")");
        break;
      }
    }
    if (!out.GuardIntact()) Fail(name + ": forward wrote past the output");
  }
  const std::size_t workspace_bytes =
      opgen::cuda::BroadcastBackwardWorkspaceBytes<T, 2>(backward_plan, 0);
  void* workspace = nullptr;
  if (workspace_bytes > 0) CHECK(cudaMalloc(&workspace, workspace_bytes));
  std::vector<T> first_run[2];
  for (int run = 0; run < 2; ++run) {
    CHECK(opgen::cuda::LaunchBroadcastBackward(
        Bwd<MT>{}, backward_plan,
        opgen::Pointers<const T, 3>{{pass(0, x.p), pass(1, y.p), pass(2, dy.p)}},
        opgen::Pointers<T, 2>{{gx.p, gy.p}}, workspace, workspace_bytes, 0, 0));
    CHECK(cudaDeviceSynchronize());
    const std::vector<T> got[2] = {gx.Download(), gy.Download()};
    for (int g = 0; g < 2; ++g) {
      if (run == 0) {
        check_grad("GPU", g, got[g], 2e-5);
        first_run[g] = got[g];
      } else if (!got[g].empty() &&
                 std::memcmp(got[g].data(), first_run[g].data(), got[g].size() * sizeof(T)) != 0) {
        Fail(name + ": grad #" + std::to_string(g) + " differs between two runs");
      }
    }
  }
  if (!gx.GuardIntact() || !gy.GuardIntact()) Fail(name + ": backward wrote past a gradient");
  if (workspace != nullptr) CHECK(cudaFree(workspace));
}

template <typename T>
void CheckBiasGelu(const Shape& a, const Shape& b, int shift_a = 0, int shift_b = 0,
                   int null_input = -1);

template <typename T>
void CheckAll() {
  using Case = std::pair<Shape, Shape>;
  const Case cases[] = {
      {{16, 1024}, {1024}},           // bias, whole vectors
      {{1024}, {16, 1024}},           // the bias first
      {{37, 1023}, {1023}},           // bias, rows that are no whole vectors
      {{3, 5, 7}, {7}},               // collapses to [15, 7]
      {{64, 2}, {2}},                 // narrow rows
      {{1000, 3}, {1, 3}},            // C smaller than a vector, 1000 rows
      {{300, 4}, {4}},                // [C] gradient over many row blocks
      {{129, 1000}, {129, 1}},        // per-row value, a warp per row
      {{77, 5}, {77, 1}},             // per-row value, short rows
      {{31, 4100}, {31, 1}},          // per-row value, a block per row
      {{2, 3, 1}, {2, 3, 4099}},      // per-row value first, a block per row, ragged
      {{100003}, {}},                 // a 0-d scalar
      {{}, {5, 7}},                   // the scalar first
      {{4, 1, 3}, {1, 1, 1}},         // a one-element operand of rank 3
      {{8, 1, 64}, {1, 16, 64}},      // general, vectors along the inner dim
      {{5, 1, 3}, {1, 4, 1}},         // general, odd dims
      {{7, 1}, {1, 9}},               // outer product (two dims, both broadcast)
      {{3, 1}, {3}},                  // outer product from numpy's alignment
      {{2, 3, 4, 5, 6}, {3, 1, 5, 1}},  // general, rank 5
      {{64, 1, 512}, {1, 256, 512}},  // general, the timed shape: 256 and 64 summed per element
      {{2, 1, 3000}, {1, 500, 1}},    // general, the [500] gradient sums 6000 along the inner dim
      {{4, 1, 64}, {4, 24, 64}},      // general, one input full, the other summed in vectors
      {{3, 1, 16}, {1, 5, 16}},       // general, reduced counts that are no whole unrolls
      {{3, 1, 1000}, {1, 7, 1000}},   // general, no whole tiles
      {{2, 3, 1, 64}, {1, 3, 5, 64}},  // general, rank 4, both inputs in vectors
      {{5, 1, 37}, {1, 9, 37}},       // general, one element at a time
      {{6, 1, 40}, {1, 5, 40}},       // general, 16-bit vectors of 8, 32-bit of 4
      {{2, 1, 2, 1, 2, 1, 2, 1, 2}, {1, 2, 1, 2, 1, 2, 1, 2, 1}},  // 9 dims that stay 9: refused
      {{0, 3}, {3}},                  // empty: the [3] gradient is zeros
      {{4, 0}, {1}},                  // empty, scalar
      {{0}, {}},                      // empty 1-d with a 0-d
      {{}, {}},                       // 0-d with 0-d
      {{}, {1}},                      // 0-d with [1]
      {{1000}, {1000}},               // same shape
      {{513, 1}, {513}},              // [N, 1] with [N]: an outer product, not the same shape
  };
  for (const Case& c : cases) {
    opgen::BroadcastPlan<2> plan;
    const Shape shapes[2] = {c.first, c.second};
    if (!opgen::MakeBroadcastPlan(shapes, &plan).empty()) continue;  // the 9-d case (CPU test)
    CheckBiasGelu<T>(c.first, c.second);
    CheckCase<T, Mul, MulGrad>("mul", c.first, c.second);
  }
  // Pointers misaligned for vectors: the full input, the vector, both.
  CheckBiasGelu<T>({16, 1024}, {1024}, 1, 0);
  CheckBiasGelu<T>({16, 1024}, {1024}, 0, 1);
  CheckCase<T, Mul, MulGrad>("mul", {129, 1000}, {129, 1}, 1, 1);
  CheckCase<T, Mul, MulGrad>("mul", {8, 1, 64}, {1, 16, 64}, 0, 1);
  CheckCase<T, Mul, MulGrad>("mul", {100003}, {}, 1, 0);
  // Null inputs read as zeros, on every path: each input of the bias, the per-row value, the
  // scalar, the general pattern (both kernels of its backward) and the same shape.
  for (int k = 0; k < 3; ++k) {
    CheckBiasGelu<T>({16, 1024}, {1024}, 0, 0, k);
    CheckBiasGelu<T>({37, 1023}, {1023}, 0, 0, k);
    CheckCase<T, Mul, MulGrad>("mul", {129, 1000}, {129, 1}, 0, 0, k);
    CheckCase<T, Mul, MulGrad>("mul", {31, 4100}, {31, 1}, 0, 0, k);
    CheckCase<T, Mul, MulGrad>("mul", {100003}, {}, 0, 0, k);
    CheckCase<T, Mul, MulGrad>("mul", {8, 1, 64}, {1, 16, 64}, 0, 0, k);
    CheckCase<T, Mul, MulGrad>("mul", {2, 3, 4, 5, 6}, {3, 1, 5, 1}, 0, 0, k);
    CheckCase<T, Mul, MulGrad>("mul", {2, 3, 1, 64}, {1, 3, 5, 64}, 0, 0, k);
    CheckBiasGelu<T>({6, 1, 5}, {6, 7, 5}, 0, 0, k);
    CheckCase<T, Mul, MulGrad>("mul", {1000}, {1000}, 0, 0, k);
  }
}

template <typename T>
void CheckBiasGelu(const Shape& a, const Shape& b, int shift_a, int shift_b, int null_input) {
  if constexpr (kLowp<T>) {
    CheckCase<T, BiasGeluLowp, BiasGeluLowpGrad>("bias_gelu", a, b, shift_a, shift_b, null_input);
  } else {
    CheckCase<T, BiasGelu, BiasGeluGrad>("bias_gelu", a, b, shift_a, shift_b, null_input);
  }
}

// ---- outputs of more than 2^31 elements: 64-bit index math, checked on samples ---------------
// (k - 500) * scale for k = i * 2654435761 % 1000: one rounding, so the device (which would fuse
// `k * scale + shift` into an fma) and the host compute the same float.
__host__ __device__ inline float Pattern(int64_t i, float scale) {
  return static_cast<float>(
             static_cast<int>((static_cast<uint64_t>(i) * 2654435761u) % 1000) - 500) *
         scale;
}
template <typename T>
__global__ void Fill(T* p, int64_t n, float scale) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = static_cast<T>(Pattern(i, scale));
  }
}
template <typename T>
float FillValue(int64_t i, float scale) {
  return static_cast<float>(static_cast<T>(Pattern(i, scale)));
}

template <typename T>
void CheckLarge(const Shape& a, const Shape& b) {
  using MT = opgen::OpMathT<T>;
  const std::string name = CaseName("large mul", Dtype<T>::kName, a, b, 0, 0);
  ++checks;
  opgen::BroadcastPlan<2> plan;
  const Shape shapes[2] = {a, b};
  if (!opgen::MakeBroadcastPlan(shapes, &plan).empty()) return Fail(name + ": no plan");
  T *x, *y, *out;
  CHECK(cudaMalloc(&x, plan.in_numel[0] * sizeof(T)));
  CHECK(cudaMalloc(&y, plan.in_numel[1] * sizeof(T)));
  CHECK(cudaMalloc(&out, plan.numel * sizeof(T)));
  Fill<<<4096, 256>>>(x, plan.in_numel[0], 0.004f);
  Fill<<<4096, 256>>>(y, plan.in_numel[1], 0.003f);
  CHECK(opgen::cuda::LaunchBroadcast(Mul<MT>{}, plan, opgen::Pointers<const T, 2>{{x, y}},
                                     opgen::Pointers<T, 1>{{out}}, 0, 0));
  CHECK(cudaDeviceSynchronize());
  const int64_t n = plan.numel, span = 4096;
  for (int64_t at : {int64_t{0}, (int64_t{1} << 31) - span / 2, (int64_t{1} << 32) - span / 2,
                     n / 2 + 12345, n - span}) {
    if (at < 0 || at + span > n) continue;
    std::vector<T> got(span);
    CHECK(cudaMemcpy(got.data(), out + at, span * sizeof(T), cudaMemcpyDeviceToHost));
    for (int64_t i = at; i < at + span; ++i) {
      int64_t offset[2] = {0, 0}, rest = i;
      for (int d = plan.rank - 1; d >= 0; --d) {
        const int64_t digit = rest % plan.dims[d];
        rest /= plan.dims[d];
        for (int k = 0; k < 2; ++k) offset[k] += digit * plan.strides[k][d];
      }
      const float want = static_cast<float>(static_cast<T>(
          FillValue<T>(offset[0], 0.004f) * FillValue<T>(offset[1], 0.003f)));
      if (static_cast<float>(got[i - at]) != want) {
        Fail(name + ": [" + std::to_string(i) + "] = " + Exact(static_cast<float>(got[i - at])) +
             ", want " + Exact(want));
        break;
      }
    }
  }
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(out));
}

// ---- timing --------------------------------------------------------------------------------
// Median milliseconds per call of body(call), over 7 timed batches after a warm-up.
template <typename Body>
float TimeMs(Body body, int calls) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) body(i);
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < calls; ++i) body(i);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t / calls);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Missed {
  std::string what;
  double ratio, target;
};
std::vector<Missed> missed;

// Enough buffer sets that consecutive calls do not find their inputs in L2 (50 MB on an H200).
constexpr int64_t kRotateBytes = int64_t{256} << 20;
int SetsFor(int64_t bytes_per_set) {
  const int64_t sets = kRotateBytes / bytes_per_set + 1;
  return static_cast<int>(std::min<int64_t>(8, std::max<int64_t>(2, sets)));
}

void Report(const std::string& what, const char* dtype, double bytes, float ms, float copy_ms,
            double target) {
  const double gbs = bytes / (ms * 1e6), copy_gbs = bytes / (copy_ms * 1e6);
  const double ratio = gbs / copy_gbs;
  std::printf("%-44s %-9s %9.4f ms %7.0f GB/s   copy %7.0f GB/s   %6.3f x copy", what.c_str(),
              dtype, ms, gbs, copy_gbs, ratio);
  if (target > 0) {
    std::printf("   target %.2f %s", target, ratio >= target ? "ok" : "MISS");
    if (ratio < target) missed.push_back({what + " " + dtype, ratio, target});
  }
  std::printf("\n");
  std::fflush(stdout);
}

// Times a device-to-device copy that moves `bytes` (half read, half written), rotating buffers.
float CopyMs(double bytes) {
  const std::size_t half = static_cast<std::size_t>(bytes / 2);
  const int sets = SetsFor(static_cast<int64_t>(bytes));
  std::vector<char*> src(sets), dst(sets);
  for (int s = 0; s < sets; ++s) {
    CHECK(cudaMalloc(&src[s], half));
    CHECK(cudaMalloc(&dst[s], half));
    CHECK(cudaMemset(src[s], 1, half));
  }
  const int calls = std::max<int>(5, static_cast<int>(2e10 / bytes / 8));
  const float ms = TimeMs(
      [&](int i) {
        CHECK(cudaMemcpyAsync(dst[i % sets], src[i % sets], half, cudaMemcpyDeviceToDevice));
      },
      calls);
  for (int s = 0; s < sets; ++s) {
    CHECK(cudaFree(src[s]));
    CHECK(cudaFree(dst[s]));
  }
  return ms;
}

// Forward of `Fwd` on [a] with [b], and its backward when `backward_target` >= 0.
template <typename T, template <typename> class Fwd, template <typename> class Bwd>
void TimeCase(const char* op, const Shape& a, const Shape& b, double forward_target,
              double backward_target, bool backward) {
  using MT = opgen::OpMathT<T>;
  opgen::BroadcastPlan<2> plan;
  opgen::BroadcastPlan<3> backward_plan;
  const Shape shapes[2] = {a, b};
  if (!opgen::MakeBroadcastPlan(shapes, &plan).empty()) std::exit(1);
  const Shape backward_shapes[3] = {a, b, plan.out_shape};
  if (!opgen::MakeBroadcastPlan(backward_shapes, &backward_plan).empty()) std::exit(1);
  const int64_t na = plan.in_numel[0], nb = plan.in_numel[1], n = plan.numel;
  const double forward_bytes = static_cast<double>(na + nb + n) * sizeof(T);
  // Backward: reads x, y and grad_out, writes a gradient per input.
  const double backward_bytes = static_cast<double>(2 * (na + nb) + n) * sizeof(T);
  const int sets = SetsFor(static_cast<int64_t>(backward ? backward_bytes : forward_bytes));
  std::vector<T*> x(sets), y(sets), dy(sets), out(sets), gx(sets), gy(sets);
  for (int s = 0; s < sets; ++s) {
    CHECK(cudaMalloc(&x[s], na * sizeof(T)));
    CHECK(cudaMalloc(&y[s], nb * sizeof(T)));
    CHECK(cudaMalloc(&out[s], n * sizeof(T)));
    Fill<<<1024, 256>>>(x[s], na, 0.006f);
    Fill<<<1024, 256>>>(y[s], nb, 0.002f);
    if (backward) {
      CHECK(cudaMalloc(&dy[s], n * sizeof(T)));
      CHECK(cudaMalloc(&gx[s], na * sizeof(T)));
      CHECK(cudaMalloc(&gy[s], nb * sizeof(T)));
      Fill<<<1024, 256>>>(dy[s], n, 0.001f);
    }
  }
  CHECK(cudaDeviceSynchronize());
  const std::string what = std::string(op) + " " + opgen::ShapeString(a) + " with " +
                           opgen::ShapeString(b) + " (" + opgen::PatternName(plan.pattern) + ")";
  const int calls = std::max<int>(5, static_cast<int>(2e10 / forward_bytes / 8));
  const float forward_ms = TimeMs(
      [&](int i) {
        const int s = i % sets;
        CHECK(opgen::cuda::LaunchBroadcast(Fwd<MT>{}, plan,
                                           opgen::Pointers<const T, 2>{{x[s], y[s]}},
                                           opgen::Pointers<T, 1>{{out[s]}}, 0, 0));
      },
      calls);
  const float forward_copy_ms = CopyMs(forward_bytes);
  Report(what + " forward", Dtype<T>::kName, forward_bytes, forward_ms, forward_copy_ms,
         forward_target);
  if (plan.pattern == opgen::BroadcastPattern::kGeneral) {
    // The output is nearly all of the bytes here: how fast does the device only write them?
    const float memset_ms = TimeMs(
        [&](int i) { CHECK(cudaMemsetAsync(out[i % sets], 0, n * sizeof(T))); }, calls);
    Report(what + " memset out", Dtype<T>::kName, forward_bytes, memset_ms, forward_copy_ms, 0);
    // The same kernel with both inputs absent (read as zeros, never loaded): its stores alone.
    const float stores_ms = TimeMs(
        [&](int i) {
          CHECK(opgen::cuda::LaunchBroadcast(Fwd<MT>{}, plan,
                                             opgen::Pointers<const T, 2>{{nullptr, nullptr}},
                                             opgen::Pointers<T, 1>{{out[i % sets]}}, 0, 0));
        },
        calls);
    Report(what + " stores only", Dtype<T>::kName, forward_bytes, stores_ms, forward_copy_ms, 0);
  }
  if (backward) {
    const std::size_t workspace_bytes =
        opgen::cuda::BroadcastBackwardWorkspaceBytes<T, 2>(backward_plan, 0);
    void* workspace = nullptr;
    if (workspace_bytes > 0) CHECK(cudaMalloc(&workspace, workspace_bytes));
    const float backward_ms = TimeMs(
        [&](int i) {
          const int s = i % sets;
          CHECK(opgen::cuda::LaunchBroadcastBackward(
              Bwd<MT>{}, backward_plan, opgen::Pointers<const T, 3>{{x[s], y[s], dy[s]}},
              opgen::Pointers<T, 2>{{gx[s], gy[s]}}, workspace, workspace_bytes, 0, 0));
        },
        calls);
    Report(what + " backward", Dtype<T>::kName, backward_bytes, backward_ms,
           CopyMs(backward_bytes), backward_target);
    if (workspace != nullptr) CHECK(cudaFree(workspace));
  }
  for (int s = 0; s < sets; ++s) {
    CHECK(cudaFree(x[s]));
    CHECK(cudaFree(y[s]));
    CHECK(cudaFree(out[s]));
    if (backward) {
      CHECK(cudaFree(dy[s]));
      CHECK(cudaFree(gx[s]));
      CHECK(cudaFree(gy[s]));
    }
  }
}

template <typename T>
void TimeAll() {
  // Targets (issue 11): bias forward >= 0.95 of the copy, general >= 0.85, backward >= 0.85.
  if constexpr (kLowp<T>) {
    TimeCase<T, BiasGeluLowp, BiasGeluLowpGrad>("bias_gelu", {16384, 1024}, {1024}, 0.95, 0.85,
                                                true);
    TimeCase<T, BiasGeluLowp, BiasGeluLowpGrad>("bias_gelu", {4096, 4096}, {4096}, 0.95, 0.85,
                                                true);
  } else {
    TimeCase<T, BiasGelu, BiasGeluGrad>("bias_gelu", {16384, 1024}, {1024}, 0.95, 0.85, true);
    TimeCase<T, BiasGelu, BiasGeluGrad>("bias_gelu", {4096, 4096}, {4096}, 0.95, 0.85, true);
  }
  TimeCase<T, Mul, MulGrad>("mul", {16384, 1024}, {16384, 1}, 0.95, 0, true);
  TimeCase<T, Mul, MulGrad>("mul", {16384, 1024}, {}, 0.95, 0, true);
  TimeCase<T, Mul, MulGrad>("mul", {64, 1, 512}, {1, 256, 512}, 0.85, 0, true);
  TimeCase<T, Mul, MulGrad>("mul", {64, 1, 512}, {64, 256, 512}, 0, 0, true);  // one summed
  TimeCase<T, Mul, MulGrad>("mul", {16384, 1024}, {16384, 1024}, 0, 0, false);  // same shape
}

// One bias_gelu forward and backward on [16384, 1024] with [1024], for ncu (--profile).
template <typename T, template <typename> class Fwd, template <typename> class Bwd>
void ProfileBiasWith() {
  using MT = opgen::OpMathT<T>;
  opgen::BroadcastPlan<2> plan;
  opgen::BroadcastPlan<3> backward_plan;
  const Shape shapes[2] = {{16384, 1024}, {1024}};
  const Shape backward_shapes[3] = {{16384, 1024}, {1024}, {16384, 1024}};
  opgen::MakeBroadcastPlan(shapes, &plan);
  opgen::MakeBroadcastPlan(backward_shapes, &backward_plan);
  DeviceArray<T> x(plan.numel, 0), b(1024, 0), dy(plan.numel, 0), out(plan.numel, 0);
  DeviceArray<T> gx(plan.numel, 0), gb(1024, 0);
  const std::size_t workspace_bytes =
      opgen::cuda::BroadcastBackwardWorkspaceBytes<T, 2>(backward_plan, 0);
  void* workspace = nullptr;
  CHECK(cudaMalloc(&workspace, workspace_bytes));
  CHECK(opgen::cuda::LaunchBroadcast(Fwd<MT>{}, plan, opgen::Pointers<const T, 2>{{x.p, b.p}},
                                     opgen::Pointers<T, 1>{{out.p}}, 0, 0));
  CHECK(opgen::cuda::LaunchBroadcastBackward(
      Bwd<MT>{}, backward_plan, opgen::Pointers<const T, 3>{{x.p, b.p, dy.p}},
      opgen::Pointers<T, 2>{{gx.p, gb.p}}, workspace, workspace_bytes, 0, 0));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(workspace));
}
// mul [16384, 1024] * [16384, 1]'s backward (the [N, 1] pass) and a same-shape multiply that
// moves as many bytes (two reads, one write), for ncu (--profile) to set side by side.
template <typename T>
void ProfilePerRow() {
  using MT = opgen::OpMathT<T>;
  opgen::BroadcastPlan<2> same_plan;
  opgen::BroadcastPlan<3> backward_plan;
  const Shape same_shapes[2] = {{16384, 1024}, {16384, 1024}};
  const Shape backward_shapes[3] = {{16384, 1024}, {16384, 1}, {16384, 1024}};
  opgen::MakeBroadcastPlan(same_shapes, &same_plan);
  opgen::MakeBroadcastPlan(backward_shapes, &backward_plan);
  DeviceArray<T> x(same_plan.numel, 0), y(same_plan.numel, 0), out(same_plan.numel, 0);
  DeviceArray<T> r(16384, 0), gr(16384, 0);
  CHECK(opgen::cuda::LaunchBroadcast(Mul<MT>{}, same_plan, opgen::Pointers<const T, 2>{{x.p, y.p}},
                                     opgen::Pointers<T, 1>{{out.p}}, 0, 0));
  const std::size_t workspace_bytes =
      opgen::cuda::BroadcastBackwardWorkspaceBytes<T, 2>(backward_plan, 0);
  void* workspace = nullptr;
  if (workspace_bytes > 0) CHECK(cudaMalloc(&workspace, workspace_bytes));
  CHECK(opgen::cuda::LaunchBroadcastBackward(
      MulGrad<MT>{}, backward_plan, opgen::Pointers<const T, 3>{{x.p, r.p, y.p}},
      opgen::Pointers<T, 2>{{out.p, gr.p}}, workspace, workspace_bytes, 0, 0));
  CHECK(cudaDeviceSynchronize());
  if (workspace != nullptr) CHECK(cudaFree(workspace));
}
template <typename T>
void ProfileBias() {
  if constexpr (kLowp<T>) {
    ProfileBiasWith<T, BiasGeluLowp, BiasGeluLowpGrad>();
  } else {
    ProfileBiasWith<T, BiasGelu, BiasGeluGrad>();
  }
  ProfilePerRow<T>();
}

// One forward of each shape the forward targets miss in 16-bit, for ncu (--profile-forward):
// bias_gelu [4096, 4096] + [4096] (2-d kernel) and mul [64, 1, 512] * [1, 256, 512] (N-d kernel).
template <typename T, template <typename> class Fwd>
void ProfileForwardWith(const Shape& a, const Shape& b) {
  using MT = opgen::OpMathT<T>;
  opgen::BroadcastPlan<2> plan;
  const Shape shapes[2] = {a, b};
  opgen::MakeBroadcastPlan(shapes, &plan);
  DeviceArray<T> x(plan.in_numel[0], 0), y(plan.in_numel[1], 0), out(plan.numel, 0);
  CHECK(opgen::cuda::LaunchBroadcast(Fwd<MT>{}, plan, opgen::Pointers<const T, 2>{{x.p, y.p}},
                                     opgen::Pointers<T, 1>{{out.p}}, 0, 0));
  CHECK(cudaDeviceSynchronize());
}
template <typename T>
void ProfileForward() {
  if constexpr (kLowp<T>) {
    ProfileForwardWith<T, BiasGeluLowp>({4096, 4096}, {4096});
  } else {
    ProfileForwardWith<T, BiasGelu>({4096, 4096}, {4096});
  }
  ProfileForwardWith<T, Mul>({64, 1, 512}, {1, 256, 512});
}

int main(int argc, char** argv) {
  bool large = false, check_only = false, profile = false, time_only = false;
  bool profile_forward = false;
  for (int i = 1; i < argc; ++i) {
    large = large || std::strcmp(argv[i], "--large") == 0;
    time_only = time_only || std::strcmp(argv[i], "--time-only") == 0;
    check_only = check_only || std::strcmp(argv[i], "--check-only") == 0;
    profile = profile || std::strcmp(argv[i], "--profile") == 0;
    profile_forward = profile_forward || std::strcmp(argv[i], "--profile-forward") == 0;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);
  if (profile_forward) {
    ProfileForward<float>();
    ProfileForward<__half>();
    ProfileForward<__nv_bfloat16>();
    return 0;
  }
  if (profile) {
    ProfileBias<float>();
    ProfileBias<__half>();
    ProfileBias<__nv_bfloat16>();
    return 0;
  }
  if (!time_only) {
    CheckAll<float>();
    CheckAll<__half>();
    CheckAll<__nv_bfloat16>();
  }
  if (large) {
    CheckLarge<__half>({(int64_t{1} << 21) + 3, 1024}, {1024});      // 2-d kernel, 64-bit
    CheckLarge<__half>({(int64_t{1} << 21) + 3, 1024}, {(int64_t{1} << 21) + 3, 1});
    CheckLarge<__half>({33, 1, 65536}, {1, 1025, 65536});           // N-d kernel, 64-bit
  }
  std::printf("correctness: %d cases, %d mismatches\n", checks, failures);
  std::fflush(stdout);
  if (failures > 0) return 1;
  if (check_only) return 0;
  TimeAll<float>();
  TimeAll<__half>();
  TimeAll<__nv_bfloat16>();
  if (missed.empty()) {
    std::printf("targets: all met\n");
  } else {
    for (const Missed& m : missed) {
      std::printf("target missed: %s %.3f < %.2f\n", m.what.c_str(), m.ratio, m.target);
    }
  }
  return 0;
}

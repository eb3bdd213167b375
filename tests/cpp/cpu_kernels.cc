// Driver for tests/test_cpu_kernels.py: the CPU side of opgen's math and loops, without Paddle.
//   tanh STRIDE          the worst ulp distance of opgen::tanh(float) from tanh rounded to float,
//                        over every STRIDE-th float in [-12, 12], and the special values
//   exp STRIDE           opgen::exp(float) of every STRIDE-th float in [-104, 89], and of -inf, inf,
//                        NaN, +-0 and the ends of the range: the floats' bits and the results'
//   sigmoid STRIDE       the worst ulp distance of opgen::sigmoid(float) from the sigmoid rounded to
//                        float (an absolute error of 2^-126 where that is subnormal), over every
//                        STRIDE-th float in [-104, 104], and how many of those
//                        floats the 16-bit forms (opgen::lowp's tanh and sigmoid, which on the
//                        host are the accurate ones) give other bits than the accurate forms
//   halves               opgen::Float16Value of every float16 (its bits 0 to 65535): the floats' bits
//   halves-bulk          the same through opgen::cpu::LoadFloat16s (F16C where the CPU has it) and
//                        its portable loop, in calls of 13 (so that every call has a tail)
//   stores STRIDE        every STRIDE-th float (by bits) to float16 through opgen::Float16Bits and
//                        through opgen::cpu::StoreFloat16s in calls of 13: how many differ; and the
//                        bits of every 64th of them (input, output)
//   minmax A B           opgen::min, max and clamp of two floats, and their _uniform forms (bits
//                        printed, to see -0 and NaN)
//   gradsums ROWS COLS   a backward over [ROWS, COLS] with a [COLS] bias: the bias gradient's bits
// Built with the flags opgen builds ops with (opgen.build.CXX_FLAGS).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "opgen/broadcast.h"

namespace {

struct Half {  // a float16's bits, as paddle::float16 holds them
  uint16_t x;
};

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Distance in representable floats (same sign assumed: tanh keeps the sign).
int64_t Ulps(float a, float b) {
  return std::llabs(static_cast<int64_t>(static_cast<int32_t>(Bits(a))) -
                    static_cast<int64_t>(static_cast<int32_t>(Bits(b))));
}

template <typename MT>
struct TanhGrad {  // grad_x = grad * (1 - tanh(x + bias)^2); grad_bias the same, summed
  void operator()(MT x, MT bias, MT grad, MT& grad_x, MT& grad_bias) const {
    const MT t = opgen::tanh(x + bias);
    grad_x = grad * (MT(1) - t * t);
    grad_bias = grad_x;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "tanh" && argc == 3) {
    const uint32_t stride = static_cast<uint32_t>(std::atol(argv[2]));
    int64_t worst = 0;
    float at = 0;
    for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += stride) {
      float x;
      const uint32_t bits = static_cast<uint32_t>(b);
      std::memcpy(&x, &bits, sizeof x);
      if (!(std::fabs(x) <= 12.0f)) continue;
      const int64_t d = Ulps(opgen::tanh(x), static_cast<float>(std::tanh(static_cast<double>(x))));
      if (d > worst) worst = d, at = x;
    }
    const float z = opgen::tanh(-0.0f);
    std::printf("{\"worst_ulp\": %lld, \"at\": %.9g, \"minus_zero\": %s, \"nan\": %s, "
                "\"inf\": %.9g, \"minus_inf\": %.9g}\n",
                static_cast<long long>(worst), at, std::signbit(z) && z == 0 ? "true" : "false",
                std::isnan(opgen::tanh(NAN)) ? "true" : "false", opgen::tanh(INFINITY),
                opgen::tanh(-INFINITY));
    return 0;
  }
  if (mode == "exp" && argc == 3) {
    const uint32_t stride = static_cast<uint32_t>(std::atol(argv[2]));
    std::vector<float> xs = {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, 88.72283f, 88.72284f,
                             -87.33654f, -103.97208f, -104.0f, 89.0f, -150.0f, 1000.0f};
    for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += stride) {
      float x;
      const uint32_t bits = static_cast<uint32_t>(b);
      std::memcpy(&x, &bits, sizeof x);
      if (x >= -104.0f && x <= 89.0f) xs.push_back(x);
    }
    std::string x_bits, exp_bits;
    for (float x : xs) {
      x_bits += (x_bits.empty() ? "" : ",") + std::to_string(Bits(x));
      exp_bits += (exp_bits.empty() ? "" : ",") + std::to_string(Bits(opgen::exp(x)));
    }
    std::printf("{\"x\": [%s], \"exp\": [%s]}\n", x_bits.c_str(), exp_bits.c_str());
    return 0;
  }
  if (mode == "sigmoid" && argc == 3) {
    const uint32_t stride = static_cast<uint32_t>(std::atol(argv[2]));
    int64_t worst = 0, lowp_differ = 0, samples = 0;
    float at = 0;
    for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += stride) {
      float x;
      const uint32_t bits = static_cast<uint32_t>(b);
      std::memcpy(&x, &bits, sizeof x);
      if (!(std::fabs(x) <= 104.0f)) continue;
      ++samples;
      const float want = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
      const float got = opgen::sigmoid(x);
      // below the smallest normal float (x < -87.3) an absolute error: e^-x overflows there
      // (as libm's expf does past -88.72), so the result is 0 where it would be subnormal
      const int64_t d = want < 0x1p-126f ? (std::fabs(got - want) <= 0x1p-126f ? 0 : INT64_MAX)
                                         : Ulps(got, want);
      if (d > worst) worst = d, at = x;
      lowp_differ += Bits(opgen::lowp::sigmoid(x)) != Bits(got);
      lowp_differ += Bits(opgen::lowp::tanh(x)) != Bits(opgen::tanh(x));
    }
    std::printf("{\"worst_ulp\": %lld, \"at\": %.9g, \"samples\": %lld, \"lowp_differ\": %lld, "
                "\"inf\": %.9g, \"minus_inf\": %.9g, \"nan\": %s}\n",
                static_cast<long long>(worst), at, static_cast<long long>(samples),
                static_cast<long long>(lowp_differ), opgen::sigmoid(INFINITY),
                opgen::sigmoid(-INFINITY), std::isnan(opgen::sigmoid(NAN)) ? "true" : "false");
    return 0;
  }
  if (mode == "halves" && argc == 2) {
    std::string bits;
    for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
      bits += (h ? "," : "") + std::to_string(Bits(opgen::Float16Value(static_cast<uint16_t>(h))));
    }
    std::printf("{\"bits\": [%s]}\n", bits.c_str());
    return 0;
  }
  if (mode == "halves-bulk" && argc == 2) {
    std::vector<Half> halves(1 << 16);
    for (uint32_t h = 0; h <= 0xFFFFu; ++h) halves[h].x = static_cast<uint16_t>(h);
    std::vector<float> bulk(halves.size()), portable(halves.size());
    for (size_t j = 0; j < halves.size(); j += 13) {
      const int64_t n = std::min<int64_t>(13, static_cast<int64_t>(halves.size() - j));
      opgen::cpu::LoadFloat16s(&halves[j], &bulk[j], n);
      opgen::cpu::detail::LoadFloat16sPortable(&halves[j], &portable[j], n);
    }
    std::string b, p;
    for (size_t h = 0; h < halves.size(); ++h) {
      b += (h ? "," : "") + std::to_string(Bits(bulk[h]));
      p += (h ? "," : "") + std::to_string(Bits(portable[h]));
    }
    std::printf("{\"f16c\": %s, \"bulk\": [%s], \"portable\": [%s]}\n",
                opgen::cpu::detail::HasF16c() ? "true" : "false", b.c_str(), p.c_str());
    return 0;
  }
  if (mode == "stores" && argc == 3) {
    const uint64_t stride = std::strtoull(argv[2], nullptr, 10);
    std::vector<float> values;
    for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += stride) {
      float value;
      const uint32_t b32 = static_cast<uint32_t>(bits);
      std::memcpy(&value, &b32, sizeof value);
      values.push_back(value);
    }
    std::vector<Half> bulk(values.size());
    for (size_t j = 0; j < values.size(); j += 13) {
      const int64_t n = std::min<int64_t>(13, static_cast<int64_t>(values.size() - j));
      opgen::cpu::StoreFloat16s(&values[j], &bulk[j], n);
    }
    int64_t differ = 0;
    std::string sample;
    for (size_t j = 0; j < values.size(); ++j) {
      const uint16_t scalar = opgen::Float16Bits(values[j]);
      differ += scalar != bulk[j].x;
      if (j % 64 == 0) {
        sample += (j ? "," : "") + std::to_string(Bits(values[j])) + "," + std::to_string(scalar);
      }
    }
    std::printf("{\"f16c\": %s, \"samples\": %zu, \"differ\": %lld, \"pairs\": [%s]}\n",
                opgen::cpu::detail::HasF16c() ? "true" : "false", values.size(),
                static_cast<long long>(differ), sample.c_str());
    return 0;
  }
  if (mode == "minmax" && argc == 4) {
    const float a = std::strtof(argv[2], nullptr), b = std::strtof(argv[3], nullptr);
    std::printf("{\"min\": %u, \"max\": %u, \"clamp\": %u, \"min_uniform\": %u, "
                "\"max_uniform\": %u, \"clamp_uniform\": %u}\n", Bits(opgen::min(a, b)),
                Bits(opgen::max(a, b)), Bits(opgen::clamp(a, b, 1.0f)),
                Bits(opgen::min_uniform(a, b)), Bits(opgen::max_uniform(a, b)),
                Bits(opgen::clamp_uniform(a, b, 1.0f)));
    return 0;
  }
  if (mode == "gradsums" && argc == 4) {
    const int64_t rows = std::atoll(argv[2]), cols = std::atoll(argv[3]);
    const std::vector<int64_t> shapes[3] = {{rows, cols}, {cols}, {rows, cols}};
    opgen::BroadcastPlan<3> plan;
    if (!opgen::MakeBroadcastPlan(shapes, &plan).empty()) return 2;
    std::vector<float> x(rows * cols), bias(cols), grad(rows * cols), gx(rows * cols), gb(cols);
    for (int64_t i = 0; i < rows * cols; ++i) {
      x[i] = std::sin(0.37f * static_cast<float>(i % 9973));
      grad[i] = std::cos(0.11f * static_cast<float>(i % 7919));
    }
    for (int64_t c = 0; c < cols; ++c) bias[c] = 0.01f * static_cast<float>(c % 100);
    opgen::cpu::BroadcastBackwardLoop<float>(
        TanhGrad<float>{}, plan, opgen::Pointers<const float, 3>{{x.data(), bias.data(), grad.data()}},
        opgen::Pointers<float, 2>{{gx.data(), gb.data()}});
    std::printf("{\"threads\": %d, \"grad_bias_bits\": [", opgen::cpu::CpuThreads());
    for (int64_t c = 0; c < cols; ++c) std::printf("%s%u", c ? ", " : "", Bits(gb[c]));
    std::printf("], \"grad_bias\": [");
    for (int64_t c = 0; c < cols; ++c) std::printf("%s%.9g", c ? ", " : "", gb[c]);
    std::printf("]}\n");
    return 0;
  }
  std::fprintf(stderr, "usage: cpu_kernels tanh STRIDE | exp STRIDE | sigmoid STRIDE | halves | "
                       "halves-bulk | stores STRIDE | minmax A B | gradsums ROWS COLS\n");
  return 2;
}

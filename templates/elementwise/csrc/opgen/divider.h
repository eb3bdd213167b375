// opgen fast integer division by a divisor known at launch time: a multiply-high, an add and a
// shift instead of a division. GPUs have no integer divide unit (a 32-bit `/` is a subroutine of
// some twenty instructions, a 64-bit one several times that), and the broadcasting kernels
// (opgen/broadcast.cuh) divide every output index by the output's dims. The method is PyTorch's
// IntDivider (aten/src/ATen/cuda/detail/IntegerDivider.cuh), after Granlund and Montgomery,
// "Division by invariant integers using multiplication" (1994), extended here to 64 bits.
// Host and device code; the host computes the magic numbers and can check them (the CPU tests do).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cstdint>
#include <type_traits>

#include "opgen/math.h"

namespace opgen {

template <typename I>
struct DivMod {
  I div;
  I mod;
};

// The high half of a 64 x 64-bit product.
OPGEN_HD uint64_t MulHi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  const uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
  const uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo, lo_hi = a_lo * b_hi, hi_lo = a_hi * b_lo;
  const uint64_t middle = (lo_lo >> 32) + (lo_hi & 0xffffffffu) + (hi_lo & 0xffffffffu);
  return a_hi * b_hi + (lo_hi >> 32) + (hi_lo >> 32) + (middle >> 32);
#endif
}

OPGEN_HD uint32_t MulHi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
#endif
}

// Divides by `divisor` in [1, 2^(bits-1)) dividends in [0, 2^(bits-1)), for I = uint32_t or
// uint64_t: n / d = (mulhi(n, m) + n) >> s, with s = ceil(log2(d)) and
// m = floor(2^bits * (2^s - d) / d) + 1, which fits in `bits` bits. The sum cannot overflow
// because mulhi(n, m) <= n < 2^(bits-1); that is why dividends stay below half the range (the
// launchers switch to 64-bit indices from 2^31 elements on).
template <typename I>
class IntDivider {
  static_assert(std::is_same_v<I, uint32_t> || std::is_same_v<I, uint64_t>,
                "IntDivider works on uint32_t or uint64_t");
  static constexpr int kBits = 8 * sizeof(I);

 public:
  IntDivider() = default;
  explicit IntDivider(I divisor) : divisor_(divisor) {
    while (shift_ < kBits - 1 && (I{1} << shift_) < divisor) ++shift_;
    // floor(2^bits * a / d) for a = 2^s - d < d, by binary long division: the remainder stays
    // below d < 2^(bits-1), so doubling it never overflows.
    const I a = (I{1} << shift_) - divisor;
    I quotient = 0, remainder = a;
    for (int bit = 0; bit < kBits; ++bit) {
      remainder <<= 1;
      quotient <<= 1;
      if (remainder >= divisor) {
        remainder -= divisor;
        quotient |= 1;
      }
    }
    magic_ = quotient + 1;
  }

  OPGEN_HD I divisor() const { return divisor_; }

  OPGEN_HD I Div(I n) const {
    I high;
    if constexpr (kBits == 32) {
      high = MulHi32(n, magic_);
    } else {
      high = MulHi64(n, magic_);
    }
    return (high + n) >> shift_;
  }

  OPGEN_HD DivMod<I> Divide(I n) const {
    const I q = Div(n);
    return {q, n - q * divisor_};
  }

 private:
  I divisor_ = 1;
  I magic_ = 1;  // d = 1: s = 0, m = 1, (mulhi(n, 1) + n) >> 0 = 0 + n
  int shift_ = 0;
};

}  // namespace opgen

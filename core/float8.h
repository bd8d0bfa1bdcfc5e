// hg::float8_e4m3 and hg::float8_e5m2: the two 8-bit float storage formats
// (OCP FP8, the formats of Hopper/Ada tensor cores), for host and device.
//
// Note [fp8 formats]
//   E4M3 ("E4M3FN"): sign, 4 exponent bits (bias 7), 3 mantissa bits. No
//     infinities: S.1111.111 is NaN (0x7f / 0xff), every other pattern is
//     finite. Largest 448 (S.1111.110), smallest normal 2^-6, smallest
//     subnormal 2^-9.
//   E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like:
//     S.11111.00 is +-inf, S.11111.{01,10,11} NaN. Largest 57344
//     (S.11110.11), smallest normal 2^-14, smallest subnormal 2^-16.
//
// Note [fp8 conversions]
// float -> fp8 rounds to nearest, ties to even, with correct subnormals, in
// one rounding. A value whose magnitude rounds past the largest finite value
// overflows, in one of two ways:
//   - the format's own (the default, what `float8_e4m3(f)` and
//     `.to(hg::kF8E4M3)` do): NaN for E4M3 (it has no inf), +-inf for E5M2;
//     an infinite input behaves the same way. PyTorch 2.15's
//     `.to(torch.float8_e4m3fn)` saturates to +-448 instead.
//   - saturating (`from_float_saturate`, what the scaled casts of amp use and
//     cuBLASLt/CUDA call "satfinite"): +-max (448 or 57344); +-inf -> +-max.
// NaN always becomes NaN (S.1111.111 for E4M3, S.11111.11 for E5M2). Rounding
// is decided on the unbounded-exponent result, so the tie just above the
// largest value goes to the even neighbour: 464 -> 448 in E4M3 (448 has an
// even mantissa, the next step 480 an odd one), 61440 -> inf in E5M2.
// f16 and bf16 inputs convert through float (exact), so they round once too;
// f64 inputs go through float rounded to odd (core/convert.h).
// fp8 -> float is exact. The integer code below runs on the host, in the
// cuda-emu build and on the device (the same bits everywhere); arithmetic on
// fp8 is not defined (hg ops refuse fp8 tensors: it is a storage format that
// scaled casts produce and the fp8 GEMM consumes).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>

#include "core/half.h"
#include "core/macros.h"

namespace hg {

namespace detail {

// The two formats, named once (the conversions below and the CPU's
// branch-free cast in kernels/fp8/fp8_cpu.cpp read them): exponent and mantissa
// bits, the largest finite pattern (sign clear), what an overflow gives
// without saturation, and whether the format has infinities.
struct E4M3Format {
  static constexpr int kExp = 4, kMant = 3;
  static constexpr uint32_t kMaxBits = 0x7eu, kOverflowBits = 0x7fu;  // 448; NaN
  static constexpr bool kHasInf = false;
};
struct E5M2Format {
  static constexpr int kExp = 5, kMant = 2;
  static constexpr uint32_t kMaxBits = 0x7bu, kOverflowBits = 0x7cu;  // 57344; inf
  static constexpr bool kHasInf = true;
};

// float -> fp8 bits for a format with kExp exponent and kMant mantissa bits.
// kMaxBits: the largest finite pattern (sign clear); kOverflowBits: what an
// overflow gives without saturation (NaN 0x7f for E4M3, inf 0x7c for E5M2).
template <int kExp, int kMant, uint32_t kMaxBits, uint32_t kOverflowBits>
HG_HOST_DEVICE inline uint8_t float_to_fp8_bits(float f, bool saturate) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  const uint32_t overflow = sign | (saturate ? kMaxBits : kOverflowBits);
  const uint32_t fexp = abs >> 23;  // biased float exponent
  const uint32_t mant = abs & 0x7fffffu;
  // Largest unbiased exponent whose values can still round to a finite fp8.
  constexpr uint32_t kMaxFexp = 127u + static_cast<uint32_t>((kMaxBits >> kMant) - kBias);
  if (fexp > kMaxFexp) return static_cast<uint8_t>(overflow);  // includes inf
  // Smallest normal fp8 is 2^(1-bias): below it, quantise to multiples of the
  // smallest subnormal 2^(1-bias-kMant).
  constexpr uint32_t kMinNormalFexp = 127u + 1u - kBias;
  uint32_t bits;
  if (fexp < kMinNormalFexp) {
    const uint32_t m = fexp == 0 ? mant : (mant | 0x800000u);
    const uint32_t e = fexp == 0 ? 1u : fexp;
    // value = m * 2^(e-150) = (m >> shift) units of 2^(1-bias-kMant).
    const uint32_t shift = 150u + 1u - static_cast<uint32_t>(kBias + kMant) - e;
    if (shift > 24) return static_cast<uint8_t>(sign);  // below half the smallest subnormal
    bits = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (bits & 1u))) ++bits;  // may carry into the smallest normal
  } else {
    constexpr uint32_t kDrop = 23u - kMant;
    bits = ((fexp - kMinNormalFexp + 1u) << kMant) | (mant >> kDrop);
    const uint32_t rem = mant & ((1u << kDrop) - 1u);
    const uint32_t halfway = 1u << (kDrop - 1u);
    if (rem > halfway || (rem == halfway && (bits & 1u))) ++bits;  // carry may bump the exponent
  }
  if (bits > kMaxBits) return static_cast<uint8_t>(overflow);
  return static_cast<uint8_t>(sign | bits);
}

// fp8 bits -> float, exact. kHasInf: E5M2 (exponent all ones is inf/NaN);
// otherwise only S.1111.111 is NaN.
template <int kExp, int kMant, bool kHasInf>
HG_HOST_DEVICE inline float fp8_bits_to_float(uint8_t b) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kExpMask = (1u << kExp) - 1u;
  constexpr uint32_t kMantMask = (1u << kMant) - 1u;
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exp = (static_cast<uint32_t>(b) >> kMant) & kExpMask;
  uint32_t mant = b & kMantMask;
  if (kHasInf ? exp == kExpMask : (b & 0x7fu) == 0x7fu) {
    if (kHasInf && mant == 0) return bits_float(sign | 0x7f800000u);
    return bits_float(sign | 0x7fc00000u);  // quiet NaN
  }
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    uint32_t e = 127u + 1u - kBias;  // normalise the subnormal
    while ((mant & (1u << kMant)) == 0) {
      mant <<= 1;
      --e;
    }
    return bits_float(sign | (e << 23) | ((mant & kMantMask) << (23 - kMant)));
  }
  return bits_float(sign | ((exp + 127u - kBias) << 23) | (mant << (23 - kMant)));
}

template <typename F>
HG_HOST_DEVICE inline uint8_t float_to_fp8_bits_of(float f, bool saturate) {
  return float_to_fp8_bits<F::kExp, F::kMant, F::kMaxBits, F::kOverflowBits>(f, saturate);
}
HG_HOST_DEVICE inline uint8_t float_to_e4m3_bits(float f, bool saturate) {
  return float_to_fp8_bits_of<E4M3Format>(f, saturate);
}
HG_HOST_DEVICE inline uint8_t float_to_e5m2_bits(float f, bool saturate) {
  return float_to_fp8_bits_of<E5M2Format>(f, saturate);
}
HG_HOST_DEVICE inline float e4m3_bits_to_float(uint8_t b) {
  return fp8_bits_to_float<E4M3Format::kExp, E4M3Format::kMant, E4M3Format::kHasInf>(b);
}
HG_HOST_DEVICE inline float e5m2_bits_to_float(uint8_t b) {
  return fp8_bits_to_float<E5M2Format::kExp, E5M2Format::kMant, E5M2Format::kHasInf>(b);
}

}  // namespace detail

struct alignas(1) float8_e4m3 {
  uint8_t x;  // raw E4M3FN bits

  static constexpr float kMax = 448.0f;

  float8_e4m3() = default;
  HG_HOST_DEVICE float8_e4m3(float f) : x(detail::float_to_e4m3_bits(f, false)) {}  // NOLINT: like float
  HG_HOST_DEVICE operator float() const { return detail::e4m3_bits_to_float(x); }   // NOLINT

  HG_HOST_DEVICE static float8_e4m3 from_bits(uint8_t bits) {
    float8_e4m3 v;
    v.x = bits;
    return v;
  }
  // Overflow (and +-inf) saturates to +-448 instead of becoming NaN.
  HG_HOST_DEVICE static float8_e4m3 from_float_saturate(float f) {
    return from_bits(detail::float_to_e4m3_bits(f, true));
  }
  HG_HOST_DEVICE uint8_t bits() const { return x; }
};

struct alignas(1) float8_e5m2 {
  uint8_t x;  // raw E5M2 bits

  static constexpr float kMax = 57344.0f;

  float8_e5m2() = default;
  HG_HOST_DEVICE float8_e5m2(float f) : x(detail::float_to_e5m2_bits(f, false)) {}  // NOLINT
  HG_HOST_DEVICE operator float() const { return detail::e5m2_bits_to_float(x); }   // NOLINT

  HG_HOST_DEVICE static float8_e5m2 from_bits(uint8_t bits) {
    float8_e5m2 v;
    v.x = bits;
    return v;
  }
  // Overflow (and +-inf) saturates to +-57344 instead of becoming +-inf.
  HG_HOST_DEVICE static float8_e5m2 from_float_saturate(float f) {
    return from_bits(detail::float_to_e5m2_bits(f, true));
  }
  HG_HOST_DEVICE uint8_t bits() const { return x; }
};

static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1, "fp8 types must be 1 byte");

std::ostream& operator<<(std::ostream& os, float8_e4m3 v);
std::ostream& operator<<(std::ostream& os, float8_e5m2 v);

}  // namespace hg

namespace std {

template <>
class numeric_limits<hg::float8_e4m3> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = false;
  static constexpr int digits = 4;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr int radix = 2;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 3;
  static constexpr int min_exponent = -5;
  static constexpr int min_exponent10 = -1;
  static constexpr int max_exponent = 9;
  static constexpr int max_exponent10 = 2;
  static hg::float8_e4m3 round_error() { return hg::float8_e4m3::from_bits(0x30); }  // 0.5
  static hg::float8_e4m3 min() { return hg::float8_e4m3::from_bits(0x08); }          // 2^-6
  static hg::float8_e4m3 max() { return hg::float8_e4m3::from_bits(0x7e); }          // 448
  static hg::float8_e4m3 lowest() { return hg::float8_e4m3::from_bits(0xfe); }       // -448
  static hg::float8_e4m3 epsilon() { return hg::float8_e4m3::from_bits(0x20); }      // 2^-3
  static hg::float8_e4m3 quiet_NaN() { return hg::float8_e4m3::from_bits(0x7f); }
  static hg::float8_e4m3 denorm_min() { return hg::float8_e4m3::from_bits(0x01); }  // 2^-9
};

template <>
class numeric_limits<hg::float8_e5m2> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = false;
  static constexpr int digits = 3;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr int radix = 2;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static hg::float8_e5m2 round_error() { return hg::float8_e5m2::from_bits(0x38); }  // 0.5
  static hg::float8_e5m2 min() { return hg::float8_e5m2::from_bits(0x04); }          // 2^-14
  static hg::float8_e5m2 max() { return hg::float8_e5m2::from_bits(0x7b); }          // 57344
  static hg::float8_e5m2 lowest() { return hg::float8_e5m2::from_bits(0xfb); }       // -57344
  static hg::float8_e5m2 epsilon() { return hg::float8_e5m2::from_bits(0x34); }      // 2^-2
  static hg::float8_e5m2 infinity() { return hg::float8_e5m2::from_bits(0x7c); }
  static hg::float8_e5m2 quiet_NaN() { return hg::float8_e5m2::from_bits(0x7f); }
  static hg::float8_e5m2 denorm_min() { return hg::float8_e5m2::from_bits(0x01); }  // 2^-16
};

}  // namespace std

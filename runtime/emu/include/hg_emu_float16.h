// Shared helpers of the cuda-emu cuda_fp16.h and cuda_bf16.h: rounding that
// agrees bit for bit with the GPU's correctly rounded 16-bit instructions.
//
// Note [Emulated 16-bit arithmetic]
// The GPU computes __hadd/__hsub/__hmul/__hdiv/hsqrt on halves and bfloat16s
// correctly rounded (round to nearest even). We compute in float and round
// once to 16 bits. That double rounding is harmless: float keeps p' = 24 bits
// and for +,-,*,/,sqrt double rounding is innocuous when p' >= 2p + 2
// (half: p = 11 -> needs 24; bfloat16: p = 8 -> needs 18). A fused
// multiply-add does not fit that rule, so __hfma goes through double (a*b is
// exact there) and then to float with round-to-odd, which makes the final
// round-to-nearest-even to 16 bits exact (round-to-odd with >= p + 2 bits).
// Float -> 16-bit conversions are core/half.h's (exhaustively tested).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/half.h"

namespace hg::emu::detail {

// double -> float rounded to odd: truncate, then set the last bit if anything
// was lost. Used only for values that then round to 16 bits.
inline float double_to_float_round_odd(double d) {
  float f = static_cast<float>(d);  // round to nearest even
  if (std::isnan(d) || std::isinf(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) {
    f = std::nextafter(f, 0.0f);  // rounded away from zero: step back = truncation
  }
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;  // sticky: the value was inexact
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t double_to_half_bits(double d) { return hg::detail::float_to_half_bits(double_to_float_round_odd(d)); }
inline uint16_t double_to_bfloat16_bits(double d) {
  return hg::detail::float_to_bfloat16_bits(double_to_float_round_odd(d));
}

// 16-bit float -> integer conversions with the rounding CUDA names: _rn (nearest
// even), _rz (toward zero), _rd (down), _ru (up). Out-of-range values saturate
// and NaN gives 0, as the GPU's cvt instructions do.
enum class IntRounding { kNearest, kZero, kDown, kUp };

template <typename Int>
Int float_to_int_saturate(float f, IntRounding rounding) {
  if (std::isnan(f)) return Int{0};
  double r = f;
  switch (rounding) {
    case IntRounding::kNearest:
      r = std::nearbyint(r);
      break;  // default mode: nearest even
    case IntRounding::kZero:
      r = std::trunc(r);
      break;
    case IntRounding::kDown:
      r = std::floor(r);
      break;
    case IntRounding::kUp:
      r = std::ceil(r);
      break;
  }
  constexpr double lo = static_cast<double>(std::numeric_limits<Int>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<Int>::max());
  if (r <= lo) return std::numeric_limits<Int>::min();
  if (r >= hi) return std::numeric_limits<Int>::max();
  return static_cast<Int>(r);
}

}  // namespace hg::emu::detail

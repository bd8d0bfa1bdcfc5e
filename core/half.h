// hg::half (IEEE binary16) and hg::bfloat16: 16-bit storage types for host and device.
//
// Note [16-bit conversions]
// float -> 16-bit rounds to nearest, ties to even, with correct subnormals;
// values whose magnitude rounds past the largest finite value become +-inf
// (65520 and above for half, never clamped); NaN stays NaN and is made quiet.
// 16-bit -> float is exact (every half and bfloat16 is a float).
// On the device (nvcc, __CUDA_ARCH__) these map to the hardware conversions
// (__float2half_rn, __half2float, __float2bfloat16_rn, ...), which implement the
// same rounding; on the host and in the cuda-emu build the portable integer code
// below runs. Arithmetic is done in float: a half converts implicitly to float,
// so `a * b` for halves computes in fp32, and storing back rounds once.
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <limits>

#include "core/macros.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace hg {

namespace detail {

HG_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

HG_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float -> binary16 bits, round-to-nearest-even.
HG_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep the top payload bits, force the quiet bit
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) {  // |f| >= 65520 rounds past 65504: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  const uint32_t exp = abs >> 23;  // biased float exponent
  const uint32_t mant = abs & 0x7fffffu;
  if (exp < 113) {  // |f| < 2^-14: half subnormal (or zero)
    // Value in units of the smallest half subnormal 2^-24 is m * 2^-shift.
    const uint32_t m = mant | 0x800000u;
    const uint32_t shift = 126u - exp;  // >= 14
    if (shift > 24) return static_cast<uint16_t>(sign);  // < 2^-25 (or exactly): rounds to 0
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // may carry into 0x400 = 2^-14
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = ((exp - 112u) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent
  return static_cast<uint16_t>(sign | h);
}

// binary16 bits -> float, exact.
HG_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // inf or NaN (NaN made quiet)
    return bits_float(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  }
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    uint32_t e = 113;  // normalise the subnormal
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    return bits_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float -> bfloat16 bits, round-to-nearest-even (overflow rounds to inf).
HG_HOST_DEVICE inline uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t lsb = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + lsb) >> 16);
}

HG_HOST_DEVICE inline float bfloat16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

struct alignas(2) half {
  uint16_t x;  // raw binary16 bits

  half() = default;
  HG_HOST_DEVICE half(float f) : x(from_float(f)) {}  // NOLINT: implicit like float
  HG_HOST_DEVICE operator float() const { return to_float(x); }  // NOLINT

  HG_HOST_DEVICE static half from_bits(uint16_t bits) {
    half h;
    h.x = bits;
    return h;
  }
  HG_HOST_DEVICE uint16_t bits() const { return x; }

 private:
  HG_HOST_DEVICE static uint16_t from_float(float f) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(f));
#else
    return detail::float_to_half_bits(f);
#endif
  }
  HG_HOST_DEVICE static float to_float(uint16_t bits) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits));
#else
    return detail::half_bits_to_float(bits);
#endif
  }
};

struct alignas(2) bfloat16 {
  uint16_t x;  // raw bfloat16 bits (the top half of a float32)

  bfloat16() = default;
  HG_HOST_DEVICE bfloat16(float f) : x(from_float(f)) {}  // NOLINT
  HG_HOST_DEVICE operator float() const { return to_float(x); }  // NOLINT

  HG_HOST_DEVICE static bfloat16 from_bits(uint16_t bits) {
    bfloat16 b;
    b.x = bits;
    return b;
  }
  HG_HOST_DEVICE uint16_t bits() const { return x; }

 private:
  HG_HOST_DEVICE static uint16_t from_float(float f) {
#if defined(__CUDA_ARCH__)
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
    return detail::float_to_bfloat16_bits(f);
#endif
  }
  HG_HOST_DEVICE static float to_float(uint16_t bits) {
#if defined(__CUDA_ARCH__)
    return __bfloat162float(__ushort_as_bfloat16(bits));
#else
    return detail::bfloat16_bits_to_float(bits);
#endif
  }
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2, "16-bit types must be 2 bytes");

std::ostream& operator<<(std::ostream& os, half h);
std::ostream& operator<<(std::ostream& os, bfloat16 b);

}  // namespace hg

namespace std {

template <>
class numeric_limits<hg::half> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 11;
  // The remaining members of the primary template, so that generic code
  // (numeric_limits<T>::is_integer, ::max_digits10, ...) compiles for half.
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool is_iec559 = true;  // IEEE 754 binary16
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr int radix = 2;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static hg::half round_error() { return hg::half::from_bits(0x3800); }  // 0.5
  static hg::half signaling_NaN() { return hg::half::from_bits(0x7d00); }
  static hg::half min() { return hg::half::from_bits(0x0400); }         // 2^-14
  static hg::half max() { return hg::half::from_bits(0x7bff); }         // 65504
  static hg::half lowest() { return hg::half::from_bits(0xfbff); }      // -65504
  static hg::half epsilon() { return hg::half::from_bits(0x1400); }     // 2^-10
  static hg::half infinity() { return hg::half::from_bits(0x7c00); }
  static hg::half quiet_NaN() { return hg::half::from_bits(0x7e00); }
  static hg::half denorm_min() { return hg::half::from_bits(0x0001); }  // 2^-24
};

template <>
class numeric_limits<hg::bfloat16> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool is_iec559 = false;  // not an IEEE 754 interchange format
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr int radix = 2;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static hg::bfloat16 round_error() { return hg::bfloat16::from_bits(0x3f00); }  // 0.5
  static hg::bfloat16 signaling_NaN() { return hg::bfloat16::from_bits(0x7fa0); }
  static hg::bfloat16 min() { return hg::bfloat16::from_bits(0x0080); }      // 2^-126
  static hg::bfloat16 max() { return hg::bfloat16::from_bits(0x7f7f); }      // ~3.39e38
  static hg::bfloat16 lowest() { return hg::bfloat16::from_bits(0xff7f); }
  static hg::bfloat16 epsilon() { return hg::bfloat16::from_bits(0x3c00); }  // 2^-7
  static hg::bfloat16 infinity() { return hg::bfloat16::from_bits(0x7f80); }
  static hg::bfloat16 quiet_NaN() { return hg::bfloat16::from_bits(0x7fc0); }
  static hg::bfloat16 denorm_min() { return hg::bfloat16::from_bits(0x0001); }
};

}  // namespace std

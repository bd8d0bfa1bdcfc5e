// convert_value<To>(from): the one element conversion rule used by copies,
// casts, printing and item().
//
// Float to float rounds to nearest even (through float for the 16-bit and
// 8-bit types; fp8 overflow follows the format: Note [fp8 conversions]).
// Float to integer truncates toward zero; NaN becomes 0 and values outside the
// integer's range saturate (C++ leaves both undefined; we pick a rule so that
// results never depend on the compiler). Anything to bool is `value != 0`.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/float8.h"
#include "core/half.h"
#include "core/macros.h"

namespace hg {

template <typename T>
inline constexpr bool is_16bit_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <typename T>
inline constexpr bool is_fp8_v = std::is_same_v<T, float8_e4m3> || std::is_same_v<T, float8_e5m2>;

// The floats narrower than float: stored in their own type, computed through float.
template <typename T>
inline constexpr bool is_narrow_float_v = is_16bit_v<T> || is_fp8_v<T>;

// The type a value is widened to before conversion: float for the 16-bit and
// 8-bit floats (exact), the value itself otherwise.
template <typename T>
HG_HOST_DEVICE inline auto widen(T v) {
  if constexpr (is_narrow_float_v<T>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

template <typename To, typename From>
HG_HOST_DEVICE inline To convert_value(From from) {
  if constexpr (std::is_same_v<To, From>) {
    return from;
  } else if constexpr (std::is_same_v<To, bool>) {
    return widen(from) != 0;  // NaN counts as true, like C++ and PyTorch
  } else if constexpr (is_narrow_float_v<To>) {
    // double -> float -> half would round twice (wrong when the float lands on
    // a 16-bit tie the double was not on). Rounding double -> float to *odd*
    // (truncate, then set the last bit if inexact) keeps the sticky
    // information, and with 13+ spare bits the final RNE is then correct
    // (the fp8 formats have 3 or 2 mantissa bits: 20+ spare).
    if constexpr (std::is_same_v<From, double>) {
      float f = static_cast<float>(from);
      const double back = static_cast<double>(f);
      if (back != from && std::isfinite(f)) {
        if (std::fabs(back) > std::fabs(from)) f = std::nextafter(f, 0.0f);  // truncate
        f = detail::bits_float(detail::float_bits(f) | 1u);                  // sticky -> odd
      }
      return To(f);
    } else {
      return To(static_cast<float>(widen(from)));
    }
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(widen(from));
  } else {  // integer destination
    if constexpr (std::is_same_v<From, bool>) {
      return static_cast<To>(from ? 1 : 0);
    } else if constexpr (std::is_integral_v<From>) {
      return static_cast<To>(from);  // two's complement wrap, like PyTorch
    } else {
      const double v = static_cast<double>(widen(from));
      if (std::isnan(v)) return To(0);
      constexpr double lo = static_cast<double>(std::numeric_limits<To>::lowest());
      constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
      if (v <= lo) return std::numeric_limits<To>::lowest();
      if (v >= hi) return std::numeric_limits<To>::max();
      return static_cast<To>(v);
    }
  }
}

}  // namespace hg

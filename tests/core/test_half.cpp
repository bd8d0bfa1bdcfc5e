// hg::half conversions: exhaustive round trip, float -> half against an
// independent reference, named edge cases, numeric_limits.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "core/half.h"

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t to_half_bits(float f) { return hg::half(f).bits(); }

// Independent float -> binary16 reference, written in exact double arithmetic
// (no bit tricks shared with core/half.h). Every float and every half is exact
// in double. q is the spacing of halves around |f|; lo = floor(|f| / q) * q is
// the half below, lo + q the one above; compare the remainder to q / 2 and
// break ties towards an even multiple of q. All steps are exact: q is a power
// of two, and |f| - lo is the low bits of |f|. NaN is not handled here.
uint16_t reference_half_bits(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;  // halfway past 65504 and beyond: inf
  double q = 0x1p-24;                      // subnormal spacing below 2^-14
  if (a >= 0x1p-14) {
    int e;
    std::frexp(a, &e);          // a in [2^(e-1), 2^e)
    q = std::ldexp(1.0, e - 11);  // 10 fraction bits
  }
  const double n = std::floor(a / q);
  const double lo = n * q;
  const double twice_rem = 2.0 * (a - lo);
  const bool odd = std::fmod(n, 2.0) == 1.0;
  const bool round_up = twice_rem > q || (twice_rem == q && odd);
  const double r = round_up ? lo + q : lo;
  // Encode r: subnormal (count of 2^-24) or exponent + 10 fraction bits.
  if (r < 0x1p-14) return sign | static_cast<uint16_t>(r * 0x1p24);
  int e;
  const double m = std::frexp(r, &e);  // r = m 2^e, m in [0.5, 1)
  const auto biased = static_cast<uint16_t>(e - 1 + 15);
  const auto fraction = static_cast<uint16_t>((2.0 * m - 1.0) * 1024.0);
  return sign | static_cast<uint16_t>(biased << 10) | fraction;
}

}  // namespace

TEST_CASE("half: every bit pattern round-trips through float", "[core][half]") {
  int nan_count = 0;
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto h = hg::half::from_bits(static_cast<uint16_t>(bits));
    const float f = h;
    const uint16_t back = hg::half(f).bits();
    const bool is_nan = (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
    if (is_nan) {
      // NaN stays NaN with its sign and payload; a signalling NaN comes back
      // quiet (quiet bit 0x200 set), like a hardware conversion.
      ++nan_count;
      REQUIRE(std::isnan(f));
      REQUIRE(back == (bits | 0x0200u));
    } else {
      // Exact in both directions, including subnormals, +-0 and +-inf.
      if (back != bits) FAIL("half bits 0x" << std::hex << bits << " came back as 0x" << back);
      REQUIRE(reference_half_bits(f) == bits);  // and the float is the right value
    }
  }
  CHECK(nan_count == 2 * 1023);
}

TEST_CASE("half: float -> half matches an independent RNE reference", "[core][half]") {
  // Every float up to 2^17 in magnitude (all half exponents, subnormals, the
  // overflow boundary and a binade of overflow) is 1.2e9 patterns per sign,
  // about 13 s; we take every 61st pattern (61 is odd, so the 13 bits that
  // decide rounding take every value), ~2e7 per sign, ~0.3 s in total.
  // The exhaustive part is the next test case: every rounding boundary.
  constexpr uint32_t kStride = 61;
  constexpr uint32_t kLimit = 0x48000000u;  // bits of 2^17
  uint64_t checked = 0;
  for (const uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t b = 0; b <= kLimit; b += kStride) {
      const float f = float_of(sign | b);
      const uint16_t got = to_half_bits(f);
      const uint16_t want = reference_half_bits(f);
      if (got != want) {
        FAIL("float 0x" << std::hex << (sign | b) << " (" << f << ") -> half 0x" << got
                        << ", reference 0x" << want);
      }
      ++checked;
    }
  }
  CHECK(checked > 39'000'000);
  // Far outside the half range: everything large is inf, everything tiny is 0.
  for (uint32_t b = kLimit; b < 0x7f800000u; b += 4099) {
    REQUIRE(to_half_bits(float_of(b)) == 0x7c00);
    REQUIRE(to_half_bits(float_of(b | 0x80000000u)) == 0xfc00);
  }
  for (uint32_t b = 0; b < 0x33000000u; b += 4099) {  // below 2^-25: +-0
    REQUIRE(to_half_bits(float_of(b)) == 0x0000);
    REQUIRE(to_half_bits(float_of(b | 0x80000000u)) == 0x8000);
  }
}

TEST_CASE("half: every rounding boundary, exhaustively", "[core][half]") {
  // For each pair of adjacent non-negative halves (lo, lo+1) - including 65504
  // and inf, whose "midpoint" 65520 is the overflow threshold - check the
  // floats at and next to the midpoint, and next to lo itself, both signs.
  for (uint32_t lo = 0; lo < 0x7c00u; ++lo) {
    const double v_lo = hg::half::from_bits(static_cast<uint16_t>(lo));
    const double v_hi = lo + 1 == 0x7c00u ? 65536.0 : static_cast<double>(
        static_cast<float>(hg::half::from_bits(static_cast<uint16_t>(lo + 1))));
    const auto mid = static_cast<float>((v_lo + v_hi) / 2);  // 12 bits: exact in float
    REQUIRE(static_cast<double>(mid) == (v_lo + v_hi) / 2);
    const uint32_t mid_bits = bits_of(mid);
    const uint32_t lo_bits = bits_of(static_cast<float>(v_lo));
    const uint32_t probes[] = {mid_bits - 2, mid_bits - 1, mid_bits, mid_bits + 1, mid_bits + 2,
                               lo_bits + 1,  lo_bits + 2,  lo_bits == 0 ? 0 : lo_bits - 1};
    for (const uint32_t p : probes) {
      for (const uint32_t sign : {0u, 0x80000000u}) {
        const float f = float_of(sign | p);
        REQUIRE(to_half_bits(f) == reference_half_bits(f));
#if defined(__FLT16_MAX__) && !defined(__CUDACC__)
        // A third opinion where the compiler has IEEE _Float16 (GCC >= 12 on
        // x86-64: libgcc's soft-float conversion, also RNE).
        const auto compiler_half = static_cast<_Float16>(f);
        uint16_t compiler_bits;
        std::memcpy(&compiler_bits, &compiler_half, sizeof compiler_bits);
        REQUIRE(to_half_bits(f) == compiler_bits);
#endif
      }
    }
    // The tie itself goes to the even neighbour.
    const uint16_t even = (lo & 1u) == 0 ? static_cast<uint16_t>(lo) : static_cast<uint16_t>(lo + 1);
    REQUIRE(to_half_bits(mid) == even);
  }
}

TEST_CASE("half: named edge cases", "[core][half]") {
  CHECK(to_half_bits(65504.0f) == 0x7bff);                  // largest finite
  CHECK(to_half_bits(-65504.0f) == 0xfbff);
  CHECK(to_half_bits(65519.99f) == 0x7bff);                 // just below the midpoint
  CHECK(to_half_bits(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(to_half_bits(65520.0f) == 0x7c00);                  // the tie rounds to even: 2^16, i.e. inf
  CHECK(to_half_bits(-65520.0f) == 0xfc00);
  CHECK(to_half_bits(1e6f) == 0x7c00);
  CHECK(to_half_bits(std::numeric_limits<float>::max()) == 0x7c00);
  CHECK(to_half_bits(0x1p-24f) == 0x0001);                  // smallest subnormal
  CHECK(to_half_bits(0x1p-25f) == 0x0000);                  // tie with 0: even is 0
  CHECK(to_half_bits(-0x1p-25f) == 0x8000);
  CHECK(to_half_bits(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);
  CHECK(to_half_bits(3 * 0x1p-25f) == 0x0002);              // tie 1 vs 2: even is 2
  CHECK(to_half_bits(1023 * 0x1p-24f) == 0x03ff);           // largest subnormal
  CHECK(to_half_bits(1023.5f * 0x1p-24f) == 0x0400);        // rounds up into 2^-14
  CHECK(to_half_bits(0x1p-14f) == 0x0400);                  // smallest normal
  CHECK(to_half_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(to_half_bits(2049.0f) == 0x6800);                   // tie: 2048 (even)
  CHECK(static_cast<float>(hg::half(2049.0f)) == 2048.0f);
  CHECK(static_cast<float>(hg::half(2051.0f)) == 2052.0f);  // tie: 2052 (even)
  CHECK(static_cast<float>(hg::half(2050.0f)) == 2050.0f);
  CHECK(to_half_bits(1.0f) == 0x3c00);
  CHECK(to_half_bits(1.0f / 3.0f) == 0x3555);
  CHECK(to_half_bits(0.1f) == 0x2e66);
  for (int i = -2048; i <= 2048; ++i) {  // every integer up to 2^11 is exact
    REQUIRE(static_cast<float>(hg::half(static_cast<float>(i))) == static_cast<float>(i));
  }
  CHECK(to_half_bits(0.0f) == 0x0000);
  CHECK(to_half_bits(-0.0f) == 0x8000);  // sign of zero is kept
  CHECK(std::signbit(static_cast<float>(hg::half::from_bits(0x8000))));
  CHECK(to_half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(to_half_bits(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(std::isinf(static_cast<float>(hg::half::from_bits(0x7c00))));
  CHECK(to_half_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7e00);
  // NaN: sign and the top 9 payload bits survive, the result is always quiet.
  for (const uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u,
                                  0x7fbfffffu, 0x7fe02000u, 0xff812345u}) {
    const uint16_t h = to_half_bits(float_of(nan_bits));
    INFO("float NaN 0x" << std::hex << nan_bits << " -> 0x" << h);
    CHECK((h & 0x7c00u) == 0x7c00u);
    CHECK((h & 0x0200u) != 0);                                // quiet
    CHECK((h & 0x01ffu) == ((nan_bits >> 13) & 0x01ffu));     // payload
    CHECK((h >> 15) == (nan_bits >> 31));                     // sign
  }
  // Arithmetic goes through float and rounds once on store.
  const hg::half a = 0.1f;
  const hg::half b = 0.2f;
  const hg::half sum = a + b;
  CHECK(sum.bits() == to_half_bits(static_cast<float>(a) + static_cast<float>(b)));
}

TEST_CASE("half: numeric_limits", "[core][half]") {
  using Limits = std::numeric_limits<hg::half>;
  STATIC_REQUIRE(Limits::is_specialized);
  STATIC_REQUIRE(Limits::is_signed);
  STATIC_REQUIRE(Limits::has_infinity);
  STATIC_REQUIRE(Limits::has_quiet_NaN);
  STATIC_REQUIRE(Limits::digits == 11);
  CHECK(static_cast<float>(Limits::max()) == 65504.0f);
  CHECK(static_cast<float>(Limits::lowest()) == -65504.0f);
  CHECK(static_cast<float>(Limits::min()) == 0x1p-14f);
  CHECK(static_cast<float>(Limits::denorm_min()) == 0x1p-24f);
  CHECK(static_cast<float>(Limits::epsilon()) == 0x1p-10f);
  // epsilon is the gap between 1 and the next half.
  CHECK(static_cast<float>(hg::half::from_bits(0x3c01)) - 1.0f == static_cast<float>(Limits::epsilon()));
  CHECK(std::isinf(static_cast<float>(Limits::infinity())));
  CHECK(static_cast<float>(Limits::infinity()) > 0);
  CHECK(std::isnan(static_cast<float>(Limits::quiet_NaN())));
  CHECK((Limits::quiet_NaN().bits() & 0x0200u) != 0);
  // max is the largest finite: one step up is inf.
  CHECK(Limits::max().bits() + 1 == Limits::infinity().bits());
  STATIC_REQUIRE(!Limits::is_integer);
  STATIC_REQUIRE(Limits::is_iec559);
  STATIC_REQUIRE(Limits::radix == 2);
  STATIC_REQUIRE(Limits::digits10 == 3);
  STATIC_REQUIRE(Limits::max_digits10 == 5);
  // min normal is 2^(min_exponent - 1); max is below 2^max_exponent.
  CHECK(std::ldexp(1.0f, Limits::min_exponent - 1) == static_cast<float>(Limits::min()));
  CHECK(std::ldexp(1.0f, Limits::max_exponent) == 65536.0f);
  CHECK(static_cast<float>(hg::half(1e4f)) == 1e4f);  // max_exponent10 = 4 is finite
  STATIC_REQUIRE(Limits::max_exponent10 == 4);
  STATIC_REQUIRE(Limits::min_exponent10 == -4);       // 1e-4 > 2^-14 > 1e-5
  CHECK(static_cast<float>(Limits::round_error()) == 0.5f);
  const uint16_t snan = Limits::signaling_NaN().bits();
  CHECK(std::isnan(static_cast<float>(Limits::signaling_NaN())));
  CHECK((snan & 0x0200u) == 0);                           // quiet bit clear
  CHECK(hg::half(static_cast<float>(Limits::signaling_NaN())).bits() == (snan | 0x0200u));
  // The digits claim: 2^11 + 1 is the first integer a half cannot hold.
  CHECK(static_cast<float>(hg::half(2048.0f + 1.0f)) != 2049.0f);
  CHECK(static_cast<float>(hg::half(1024.0f + 1.0f)) == 1025.0f);
}

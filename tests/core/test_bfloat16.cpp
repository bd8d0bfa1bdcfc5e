// hg::bfloat16 conversions: exhaustive round trip, float -> bfloat16 against an
// independent reference, rounding boundaries, edges, numeric_limits.
#include <catch2/catch.hpp>

#include <cfloat>
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

uint16_t to_bf16_bits(float f) { return hg::bfloat16(f).bits(); }

// Independent float -> bfloat16 reference in exact double arithmetic: q is the
// spacing of bfloat16 values around |f| (8 significant bits; 2^-133 in the
// subnormal range), round |f| to a multiple of q with ties to even, then read
// the bits off the (exactly representable) float result. Not for NaN.
uint16_t reference_bf16_bits(float f) {
  const double a = std::fabs(static_cast<double>(f));
  double q = 0x1p-133;
  if (a >= 0x1p-126) {
    int e;
    std::frexp(a, &e);           // a in [2^(e-1), 2^e)
    q = std::ldexp(1.0, e - 8);  // 7 fraction bits
  }
  const double n = std::floor(a / q);
  const double lo = n * q;
  const double twice_rem = 2.0 * (a - lo);
  const bool odd = std::fmod(n, 2.0) == 1.0;
  const double r = (twice_rem > q || (twice_rem == q && odd)) ? lo + q : lo;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (r >= 0x1p128) return sign | 0x7f80;  // rounded past FLT_MAX's binade: inf
  const uint32_t r_bits = bits_of(static_cast<float>(r));  // exact
  if ((r_bits & 0xffffu) != 0) FAIL("reference produced a non-bfloat16 value " << r);
  return sign | static_cast<uint16_t>(r_bits >> 16);
}

bool is_nan_bits(uint32_t f_bits) { return (f_bits & 0x7fffffffu) > 0x7f800000u; }

}  // namespace

TEST_CASE("bfloat16: every bit pattern round-trips through float", "[core][bfloat16]") {
  int nan_count = 0;
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const float f = hg::bfloat16::from_bits(static_cast<uint16_t>(bits));
    REQUIRE(bits_of(f) == bits << 16);  // widening is exact: the float's top half
    const uint16_t back = hg::bfloat16(f).bits();
    if ((bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0) {
      // NaN keeps sign and payload; a signalling NaN comes back quiet (0x40).
      ++nan_count;
      REQUIRE(std::isnan(f));
      REQUIRE(back == (bits | 0x40u));
    } else if (back != bits) {
      FAIL("bfloat16 bits 0x" << std::hex << bits << " came back as 0x" << back);
    }
  }
  CHECK(nan_count == 2 * 127);
}

TEST_CASE("bfloat16: float -> bfloat16 matches an independent RNE reference", "[core][bfloat16]") {
  // All 2^32 float patterns would take ~40 s; every 1021st (odd, so the 16
  // rounding bits take every value) gives 4.2e6 samples over every exponent,
  // both signs, subnormals, inf and NaN. Rounding boundaries are exhaustive
  // in the next test case.
  constexpr uint32_t kStride = 1021;
  uint64_t checked = 0;
  for (uint64_t b = 0; b <= 0xffffffffu; b += kStride) {
    const auto f_bits = static_cast<uint32_t>(b);
    const float f = float_of(f_bits);
    const uint16_t got = to_bf16_bits(f);
    if (is_nan_bits(f_bits)) {
      if (got != ((f_bits >> 16) | 0x40u)) {  // sign + top payload, made quiet
        FAIL("float NaN 0x" << std::hex << f_bits << " -> bfloat16 0x" << got);
      }
      continue;
    }
    const uint16_t want = reference_bf16_bits(f);
    if (got != want) {
      FAIL("float 0x" << std::hex << f_bits << " (" << f << ") -> bfloat16 0x" << got
                      << ", reference 0x" << want);
    }
    // Relative error of a normal result is at most half a unit in the 8th bit.
    const float back = hg::bfloat16::from_bits(got);
    // (Plain ifs instead of REQUIRE in the hot loops: Catch's per-assertion
    // bookkeeping would dominate the run time under ASan.)
    if (std::isnormal(f) && std::isfinite(back) &&
        !(std::fabs(static_cast<double>(back) - f) < 0x1p-8 * std::fabs(static_cast<double>(f)))) {
      FAIL("relative error too large for float " << f << " -> " << back);
    }
    ++checked;
  }
  CHECK(checked > 4'000'000);
}

TEST_CASE("bfloat16: every rounding boundary, exhaustively", "[core][bfloat16]") {
  // For each non-NaN bfloat16 b, the float patterns next to b and at/next to
  // the midpoint between b and the next bfloat16 (b << 16 | 0x8000).
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    if ((b & 0x7fffu) >= 0x7f80u) continue;  // inf / NaN: no upper neighbour
    const uint32_t base = b << 16;
    const uint32_t probes[] = {base, base + 1, base + 0x7ffe, base + 0x7fff,
                               base + 0x8000, base + 0x8001, base + 0xffff};
    for (const uint32_t p : probes) {
      const float f = float_of(p);
      REQUIRE(to_bf16_bits(f) == reference_bf16_bits(f));
    }
    // The exact midpoint goes to the even neighbour (carry handles the binade
    // step and the overflow to inf).
    const uint16_t even = (b & 1u) == 0 ? static_cast<uint16_t>(b) : static_cast<uint16_t>(b + 1);
    REQUIRE(to_bf16_bits(float_of(base + 0x8000)) == even);
  }
}

TEST_CASE("bfloat16: named edge cases", "[core][bfloat16]") {
  CHECK(to_bf16_bits(1.0f) == 0x3f80);
  CHECK(to_bf16_bits(-2.0f) == 0xc000);
  CHECK(to_bf16_bits(0.0f) == 0x0000);
  CHECK(to_bf16_bits(-0.0f) == 0x8000);
  CHECK(to_bf16_bits(1.0f + 0x1p-8f) == 0x3f80);          // tie: even (1.0)
  CHECK(to_bf16_bits(1.0f + 3 * 0x1p-8f) == 0x3f82);      // tie: even (1 + 2^-6)
  CHECK(to_bf16_bits(1.0f + 0x1p-8f + 0x1p-23f) == 0x3f81);
  CHECK(to_bf16_bits(257.0f) == 0x4380);                  // 257 -> 256
  for (int i = -256; i <= 256; ++i) {  // every integer up to 2^8 is exact
    REQUIRE(static_cast<float>(hg::bfloat16(static_cast<float>(i))) == static_cast<float>(i));
  }
  // FLT_MAX = (2 - 2^-23) 2^127 is above the midpoint between bfloat16 max
  // (2 - 2^-7) 2^127 and 2^128, so it rounds to inf (never clamped).
  CHECK(to_bf16_bits(FLT_MAX) == 0x7f80);
  CHECK(to_bf16_bits(-FLT_MAX) == 0xff80);
  CHECK(to_bf16_bits(float_of(0x7f7f7fffu)) == 0x7f7f);   // just below that midpoint
  CHECK(to_bf16_bits(float_of(0x7f7f8000u)) == 0x7f80);   // the midpoint: even is inf
  CHECK(to_bf16_bits(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(to_bf16_bits(-std::numeric_limits<float>::infinity()) == 0xff80);
  // Subnormals round like everything else; the smallest float subnormal is
  // below half of bfloat16's smallest (2^-133) and goes to zero.
  CHECK(to_bf16_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(to_bf16_bits(0x1p-133f) == 0x0001);
  CHECK(to_bf16_bits(0x1p-126f) == 0x0080);
  CHECK(to_bf16_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7fc0);
  for (const uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u,
                                  0x7fffffffu, 0xff812345u}) {
    const uint16_t h = to_bf16_bits(float_of(nan_bits));
    INFO("float NaN 0x" << std::hex << nan_bits << " -> 0x" << h);
    CHECK(std::isnan(static_cast<float>(hg::bfloat16::from_bits(h))));
    CHECK((h & 0x40u) != 0);                       // quiet
    CHECK((h & 0x3fu) == ((nan_bits >> 16) & 0x3fu));  // payload
    CHECK((h >> 15) == (nan_bits >> 31));          // sign
  }
}

TEST_CASE("bfloat16: numeric_limits", "[core][bfloat16]") {
  using Limits = std::numeric_limits<hg::bfloat16>;
  STATIC_REQUIRE(Limits::is_specialized);
  STATIC_REQUIRE(Limits::is_signed);
  STATIC_REQUIRE(Limits::has_infinity);
  STATIC_REQUIRE(Limits::has_quiet_NaN);
  STATIC_REQUIRE(Limits::digits == 8);
  CHECK(static_cast<float>(Limits::max()) == 0x1.fep127f);
  CHECK(static_cast<float>(Limits::lowest()) == -0x1.fep127f);
  CHECK(static_cast<float>(Limits::min()) == FLT_MIN);
  CHECK(static_cast<float>(Limits::denorm_min()) == 0x1p-133f);
  CHECK(static_cast<float>(Limits::epsilon()) == 0x1p-7f);
  CHECK(static_cast<float>(hg::bfloat16::from_bits(0x3f81)) - 1.0f ==
        static_cast<float>(Limits::epsilon()));
  CHECK(std::isinf(static_cast<float>(Limits::infinity())));
  CHECK(std::isnan(static_cast<float>(Limits::quiet_NaN())));
  CHECK(Limits::max().bits() + 1 == Limits::infinity().bits());
  STATIC_REQUIRE(!Limits::is_integer);
  STATIC_REQUIRE(!Limits::is_iec559);
  STATIC_REQUIRE(Limits::radix == 2);
  STATIC_REQUIRE(Limits::digits10 == 2);
  STATIC_REQUIRE(Limits::max_digits10 == 4);
  // Same exponent range as float.
  STATIC_REQUIRE(Limits::min_exponent == std::numeric_limits<float>::min_exponent);
  STATIC_REQUIRE(Limits::max_exponent == std::numeric_limits<float>::max_exponent);
  STATIC_REQUIRE(Limits::min_exponent10 == std::numeric_limits<float>::min_exponent10);
  STATIC_REQUIRE(Limits::max_exponent10 == std::numeric_limits<float>::max_exponent10);
  CHECK(static_cast<float>(Limits::round_error()) == 0.5f);
  const uint16_t snan = Limits::signaling_NaN().bits();
  CHECK(std::isnan(static_cast<float>(Limits::signaling_NaN())));
  CHECK((snan & 0x40u) == 0);  // quiet bit clear
  CHECK(hg::bfloat16(static_cast<float>(Limits::signaling_NaN())).bits() == (snan | 0x40u));
}

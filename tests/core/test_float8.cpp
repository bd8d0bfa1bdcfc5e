// hg::float8_e4m3 / hg::float8_e5m2 (Note [fp8 conversions]): every one of the
// 256 patterns of each format decoded, every f16 and every bf16 input encoded
// in both overflow modes, random f32 inputs, the f64 path, against an
// integer-only reference written here from the format definitions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "core/convert.h"
#include "core/float8.h"
#include "core/half.h"

namespace {

// ---- the reference: magnitudes as integers in units of 2^-kScale ------------
//
// Every value below is |x| * 2^kScale as an exact int64 (kScale = 45 keeps
// f32 inputs in [2^-20, 2^17) exact, and the largest fp8 neighbour, 65536,
// is 2^61). Rounding picks the nearer of the two fp8 neighbours, the one with
// the even last bit on a tie, from an unbounded-exponent view of the format
// (one pattern past the largest finite one stands for "overflowed").

constexpr int kScale = 45;

struct Format {
  int exp_bits;
  int mant_bits;
  bool has_inf;            // E5M2: exponent all ones is inf/NaN; E4M3FN: only S.1111.111 is NaN
  uint32_t max_bits;       // largest finite pattern
  uint32_t overflow_bits;  // the format's overflow result (NaN for E4M3, inf for E5M2)
};
constexpr Format kE4M3{4, 3, false, 0x7e, 0x7f};
constexpr Format kE5M2{5, 2, true, 0x7b, 0x7c};

int bias(const Format& f) { return (1 << (f.exp_bits - 1)) - 1; }

// The textbook value of pattern p (sign dropped), as if every exponent were finite:
// exponent field 0 -> mant * 2^(1-bias-M), else (2^M + mant) * 2^(e-bias-M).
int64_t ref_magnitude(const Format& f, uint32_t p) {
  const uint32_t e = (p >> f.mant_bits) & ((1u << f.exp_bits) - 1u);
  const int64_t mant = p & ((1u << f.mant_bits) - 1u);
  if (e == 0) return mant << (kScale + 1 - bias(f) - f.mant_bits);
  return ((int64_t{1} << f.mant_bits) + mant) << (kScale + static_cast<int>(e) - bias(f) - f.mant_bits);
}

bool ref_is_nan(const Format& f, uint8_t b) {
  const uint32_t e = (b >> f.mant_bits) & ((1u << f.exp_bits) - 1u);
  const uint32_t mant = b & ((1u << f.mant_bits) - 1u);
  return f.has_inf ? (e == (1u << f.exp_bits) - 1u && mant != 0) : (b & 0x7fu) == 0x7fu;
}

bool ref_is_inf(const Format& f, uint8_t b) {
  return f.has_inf && (b & 0x7fu) == ((1u << f.exp_bits) - 1u) << f.mant_bits;
}

// A finite input: sign and |x| * 2^kScale. `huge` marks inputs far past every fp8 value.
struct Input {
  bool negative = false;
  int64_t mag = 0;
  bool huge = false;
  bool inf = false;
  bool nan = false;
};

uint8_t ref_encode(const Format& f, const Input& in, bool saturate) {
  const uint8_t sign = in.negative ? 0x80 : 0x00;
  if (in.nan) return 0;  // callers check NaN by class, not bits
  const uint8_t overflow = static_cast<uint8_t>(sign | (saturate ? f.max_bits : f.overflow_bits));
  if (in.inf || in.huge) return overflow;
  const uint32_t past = f.max_bits + 1;  // the "overflowed" neighbour
  if (in.mag > ref_magnitude(f, past)) return overflow;
  uint32_t lo = 0;  // the largest pattern not above the input
  while (lo + 1 <= past && ref_magnitude(f, lo + 1) <= in.mag) ++lo;
  uint32_t pick = lo;
  if (ref_magnitude(f, lo) != in.mag) {
    const uint32_t hi = lo + 1;
    const int64_t below = in.mag - ref_magnitude(f, lo);
    const int64_t above = ref_magnitude(f, hi) - in.mag;
    if (above < below || (above == below && (hi & 1u) == 0)) pick = hi;
  }
  if (pick == past) return overflow;
  return static_cast<uint8_t>(sign | pick);
}

// Inputs: IEEE-style (sign, exponent field, mantissa field) with the given
// widths, read into the scaled-integer form.
Input ref_decode_ieee(uint32_t bits, int exp_bits, int mant_bits) {
  Input in;
  const int ieee_bias = (1 << (exp_bits - 1)) - 1;
  in.negative = ((bits >> (exp_bits + mant_bits)) & 1u) != 0;
  const uint32_t e = (bits >> mant_bits) & ((1u << exp_bits) - 1u);
  const int64_t mant = bits & ((1u << mant_bits) - 1u);
  if (e == (1u << exp_bits) - 1u) {
    (mant == 0 ? in.inf : in.nan) = true;
    return in;
  }
  const int64_t significand = e == 0 ? mant : (int64_t{1} << mant_bits) + mant;
  const int shift = kScale + (e == 0 ? 1 : static_cast<int>(e)) - ieee_bias - mant_bits;
  if (significand == 0) return in;
  if (shift < 0) {
    // |x| < 2^(mant_bits+1) * 2^(shift-kScale) <= 2^-19 here: far below half of
    // the smallest fp8 subnormal (2^-17 for E5M2); any positive stand-in works.
    in.mag = -shift >= 62 ? 1 : std::max<int64_t>(1, significand >> -shift);  // no shift past the width
    return in;
  }
  if (shift + mant_bits + 1 >= 62) {
    in.huge = true;  // >= 2^17 * 2^... : past 65536 either way
    return in;
  }
  in.mag = significand << shift;
  return in;
}

// Mismatches are counted (a Catch2 assertion per input would dominate the run
// time) and the first one is reported.
struct Tally {
  int64_t checked = 0, failed = 0;
  std::string first;
  void fail(const std::string& what) {
    if (failed++ == 0) first = what;
  }
};

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

template <typename T>
void check_one(const Format& f, const Input& in, float x, Tally& tally, const char* kind, uint32_t input_bits) {
  for (const bool saturate : {false, true}) {
    const T got = saturate ? T::from_float_saturate(x) : T(x);
    ++tally.checked;
    bool ok;
    uint8_t want = 0;
    if (in.nan) {
      ok = ref_is_nan(f, got.bits());
    } else {
      want = ref_encode(f, in, saturate);
      ok = ref_is_nan(f, want) ? ref_is_nan(f, got.bits()) : got.bits() == want;
    }
    if (!ok) {
      tally.fail(std::string(kind) + " " + hex(input_bits) + (saturate ? " saturating" : "") + ": got " +
                 hex(got.bits()) + ", want " + hex(want));
    }
  }
}

void report(const Tally& tally) {
  INFO("first mismatch: " << tally.first);
  CHECK(tally.checked > 0);
  CHECK(tally.failed == 0);
}

template <typename T>
void check_all_patterns(const Format& f) {
  int nans = 0, infs = 0;
  for (uint32_t p = 0; p < 256; ++p) {
    const auto b = static_cast<uint8_t>(p);
    const float v = T::from_bits(b);
    INFO("pattern " << hex(p) << " -> " << v);
    if (ref_is_nan(f, b)) {
      ++nans;
      CHECK(std::isnan(v));
      CHECK(ref_is_nan(f, T(v).bits()));  // NaN stays NaN, in both modes
      CHECK(ref_is_nan(f, T::from_float_saturate(v).bits()));
      continue;
    }
    const bool negative = (p & 0x80u) != 0;
    CHECK(std::signbit(v) == negative);
    if (ref_is_inf(f, b)) {
      ++infs;
      CHECK(std::isinf(v));
      CHECK(T(v).bits() == b);
      CHECK(T::from_float_saturate(v).bits() == (b & 0x80u) + f.max_bits);
      continue;
    }
    // Exact value: |v| * 2^kScale is an integer well inside double's 53 bits.
    CHECK(std::ldexp(static_cast<double>(std::fabs(v)), kScale) == static_cast<double>(ref_magnitude(f, p & 0x7fu)));
    // Round trip, both modes.
    CHECK(T(v).bits() == b);
    CHECK(T::from_float_saturate(v).bits() == b);
  }
  CHECK(nans == (f.has_inf ? 6 : 2));
  CHECK(infs == (f.has_inf ? 2 : 0));
}

// Every 16-bit input, through the value type and through convert_value (the
// element rule of tensor copies and casts).
template <typename T, typename Sixteen>
void check_every_16bit(const Format& f, int exp_bits, int mant_bits, const char* kind) {
  Tally tally, tensor_path;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const Sixteen x = Sixteen::from_bits(static_cast<uint16_t>(h));
    const Input in = ref_decode_ieee(h, exp_bits, mant_bits);
    check_one<T>(f, in, static_cast<float>(x), tally, kind, h);
    ++tensor_path.checked;
    if (!in.nan && hg::convert_value<T>(x).bits() != T(static_cast<float>(x)).bits()) {
      tensor_path.fail(std::string(kind) + " " + hex(h));
    }
  }
  report(tally);
  report(tensor_path);
}

// Random f32 in [2^-20, 2^17) (exact at kScale), plus the neighbours of every
// fp8 value and of every midpoint between two: the rounding boundaries.
template <typename T>
void check_f32(const Format& f) {
  Tally tally;
  std::mt19937 rng(35);
  std::uniform_int_distribution<uint32_t> exp_dist(127 - 20, 127 + 16), mant_dist(0, 0x7fffff);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = ((rng() & 1u) << 31) | (exp_dist(rng) << 23) | mant_dist(rng);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    check_one<T>(f, ref_decode_ieee(bits, 8, 23), x, tally, "f32", bits);
  }
  for (uint32_t p = 1; p <= f.max_bits + 1; ++p) {
    // Midpoint between p-1 and p, and the f32 values just around it and around p.
    const double mid = std::ldexp(static_cast<double>(ref_magnitude(f, p - 1) + ref_magnitude(f, p)) / 2, -kScale);
    const double at = std::ldexp(static_cast<double>(ref_magnitude(f, p)), -kScale);
    for (const double c : {mid, at}) {
      const float center = static_cast<float>(c);
      for (const float x : {std::nextafter(center, 0.0f), center, std::nextafter(center, 1e30f)}) {
        uint32_t bits;
        std::memcpy(&bits, &x, sizeof bits);
        check_one<T>(f, ref_decode_ieee(bits, 8, 23), x, tally, "f32 boundary", bits);
      }
    }
  }
  report(tally);
}

}  // namespace

TEST_CASE("fp8 E4M3: all 256 patterns decode to the format's values and round-trip", "[core][fp8]") {
  check_all_patterns<hg::float8_e4m3>(kE4M3);
}

TEST_CASE("fp8 E5M2: all 256 patterns decode to the format's values and round-trip", "[core][fp8]") {
  check_all_patterns<hg::float8_e5m2>(kE5M2);
}

TEST_CASE("fp8: every f16 input encodes like the reference, both overflow modes", "[core][fp8]") {
  check_every_16bit<hg::float8_e4m3, hg::half>(kE4M3, 5, 10, "f16");
  check_every_16bit<hg::float8_e5m2, hg::half>(kE5M2, 5, 10, "f16");
}

TEST_CASE("fp8: every bf16 input encodes like the reference, both overflow modes", "[core][fp8]") {
  check_every_16bit<hg::float8_e4m3, hg::bfloat16>(kE4M3, 8, 7, "bf16");
  check_every_16bit<hg::float8_e5m2, hg::bfloat16>(kE5M2, 8, 7, "bf16");
}

TEST_CASE("fp8: random and boundary f32 inputs encode like the reference", "[core][fp8]") {
  check_f32<hg::float8_e4m3>(kE4M3);
  check_f32<hg::float8_e5m2>(kE5M2);
}

TEST_CASE("fp8: the named edges of Note [fp8 conversions]", "[core][fp8]") {
  using hg::float8_e4m3;
  using hg::float8_e5m2;
  CHECK(float8_e4m3(448.0f).bits() == 0x7e);
  CHECK(float8_e4m3(464.0f).bits() == 0x7e);  // tie: 448 has the even mantissa
  CHECK(std::isnan(static_cast<float>(float8_e4m3(464.5f))));
  CHECK(float8_e4m3::from_float_saturate(464.5f).bits() == 0x7e);
  CHECK(float8_e4m3::from_float_saturate(-1e30f).bits() == 0xfe);
  CHECK(std::isnan(static_cast<float>(float8_e4m3(std::numeric_limits<float>::infinity()))));
  CHECK(float8_e4m3::from_float_saturate(-std::numeric_limits<float>::infinity()).bits() == 0xfe);
  CHECK(float8_e4m3(0x1p-10f).bits() == 0x00);         // half the smallest subnormal: tie to 0
  CHECK(float8_e4m3(0x1.000002p-10f).bits() == 0x01);  // just above: 2^-9
  CHECK(float8_e4m3(-0.0f).bits() == 0x80);
  CHECK(float8_e5m2(57344.0f).bits() == 0x7b);
  CHECK(float8_e5m2(61440.0f).bits() == 0x7c);  // tie: goes to the even neighbour, 2^16 = inf
  CHECK(float8_e5m2(61439.0f).bits() == 0x7b);
  CHECK(float8_e5m2::from_float_saturate(61440.0f).bits() == 0x7b);
  CHECK(float8_e5m2(-std::numeric_limits<float>::infinity()).bits() == 0xfc);
  CHECK(float8_e5m2(0x1p-17f).bits() == 0x00);
  CHECK(float8_e5m2(0x1.8p-17f).bits() == 0x01);
  CHECK(static_cast<float>(std::numeric_limits<float8_e4m3>::max()) == 448.0f);
  CHECK(static_cast<float>(std::numeric_limits<float8_e5m2>::max()) == 57344.0f);
  CHECK(static_cast<float>(std::numeric_limits<float8_e4m3>::denorm_min()) == 0x1p-9f);
  CHECK(static_cast<float>(std::numeric_limits<float8_e5m2>::denorm_min()) == 0x1p-16f);
  CHECK(static_cast<float>(std::numeric_limits<float8_e4m3>::epsilon()) == 0.125f);
  CHECK(static_cast<float>(std::numeric_limits<float8_e5m2>::epsilon()) == 0.25f);
}

TEST_CASE("fp8: f64 inputs round once (through float rounded to odd)", "[core][fp8]") {
  // 1 + 2^-4 is the E4M3 tie between 1 and 1.125; a double just above it must
  // round up, though rounding it to float first would land on the tie.
  CHECK(static_cast<float>(hg::convert_value<hg::float8_e4m3>(1.0 + 0x1p-4 + 0x1p-40)) == 1.125f);
  CHECK(static_cast<float>(hg::convert_value<hg::float8_e4m3>(1.0 + 0x1p-4)) == 1.0f);
  CHECK(static_cast<float>(hg::convert_value<hg::float8_e4m3>(1.0 + 0x1p-4 - 0x1p-40)) == 1.0f);
  CHECK(static_cast<float>(hg::convert_value<hg::float8_e5m2>(1.0 + 0x1p-3 + 0x1p-40)) == 1.25f);
  CHECK(std::isinf(static_cast<float>(hg::convert_value<hg::float8_e5m2>(1e300))));
  CHECK(std::isnan(static_cast<float>(hg::convert_value<hg::float8_e4m3>(1e300))));
  CHECK(hg::convert_value<hg::float8_e4m3>(1e-300).bits() == 0x00);
  // fp8 -> integer and bool follow the float rules.
  CHECK(hg::convert_value<int32_t>(hg::float8_e4m3(-3.5f)) == -3);
  CHECK(hg::convert_value<bool>(hg::float8_e5m2(0.0f)) == false);
}

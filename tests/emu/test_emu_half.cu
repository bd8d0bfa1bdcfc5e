// cuda-emu: the emulated cuda_fp16.h / cuda_bf16.h agree with hg::half /
// hg::bfloat16 (core/half.h) and round like the GPU's correctly rounded ops.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "tests/emu/emu_test_util.h"

using hg::emu::test::DeviceBuffer;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

// a*b + c for halves, exactly: every half is an integer multiple of 2^-24, so
// the result is N * 2^-48 with |N| < 2^81; then rounded once to half by way of
// a round-to-odd double (53 bits >= 11 + 2, so the final rounding is exact).
uint16_t reference_hfma(float a, float b, float c) {
  const auto scaled = [](float x) { return static_cast<Int128>(std::ldexp(static_cast<double>(x), 24)); };
  const Int128 n = scaled(a) * scaled(b) + scaled(c) * (Int128{1} << 24);
  if (n == 0) return (std::signbit(a) != std::signbit(b) && std::signbit(c)) ? 0x8000 : 0;
  const bool negative = n < 0;
  UInt128 mag = static_cast<UInt128>(negative ? -n : n);
  int shift = 0;
  while ((mag >> shift) >= (static_cast<UInt128>(1) << 53)) ++shift;
  uint64_t top = static_cast<uint64_t>(mag >> shift);
  if (shift > 0 && (mag & ((static_cast<UInt128>(1) << shift) - 1)) != 0) top |= 1;  // round to odd
  const double value = std::ldexp(static_cast<double>(top), shift - 48) * (negative ? -1.0 : 1.0);
  return hg::emu::detail::double_to_half_bits(value);
}

__global__ void half_ops_kernel(__half* out, const __half* a, const __half* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[4 * i + 0] = __hadd(a[i], b[i]);
  out[4 * i + 1] = __hmul(a[i], b[i]);
  out[4 * i + 2] = __hfma(a[i], b[i], a[i]);
  const half2 p = __floats2half2_rn(__half2float(a[i]), __half2float(b[i]));
  out[4 * i + 3] = __high2half(__hmul2(p, p));
}

__global__ void atomic_half_kernel(__half* h, __nv_bfloat16* b, float* f) {
  atomicAdd(h, __float2half_rn(1.0f));
  atomicAdd(b, __float2bfloat16_rn(1.0f));
  atomicAdd(f, 1.0f);
}

}  // namespace

TEST_CASE("emu: half conversions agree with hg::half for every bit pattern", "[emu][half]") {
  for (uint32_t u = 0; u < 65536; ++u) {
    const auto bits = static_cast<uint16_t>(u);
    const float from_cuda = __half2float(__ushort_as_half(bits));
    const float from_hg = static_cast<float>(hg::half::from_bits(bits));
    REQUIRE(bits_of(from_cuda) == bits_of(from_hg));
    REQUIRE(__half_as_ushort(__ushort_as_half(bits)) == bits);
    REQUIRE(__hisnan(__ushort_as_half(bits)) == std::isnan(from_hg));
    REQUIRE((__hisinf(__ushort_as_half(bits)) != 0) == std::isinf(from_hg));
    const float bf_cuda = __bfloat162float(__ushort_as_bfloat16(bits));
    const float bf_hg = static_cast<float>(hg::bfloat16::from_bits(bits));
    REQUIRE(bits_of(bf_cuda) == bits_of(bf_hg));
    REQUIRE(__hisnan(__ushort_as_bfloat16(bits)) == std::isnan(bf_hg));
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    float f;
    const uint32_t u = any_bits(rng);
    std::memcpy(&f, &u, sizeof f);
    if (i % 2) f = std::ldexp(static_cast<float>(u % 100000) - 50000.0f, -static_cast<int>(u % 40));
    REQUIRE(__half_as_ushort(__float2half_rn(f)) == hg::half(f).bits());
    REQUIRE(__bfloat16_as_ushort(__float2bfloat16_rn(f)) == hg::bfloat16(f).bits());
  }
  const half2 h2 = __floats2half2_rn(1.5f, -2.25f);
  CHECK(__low2float(h2) == 1.5f);
  CHECK(__high2float(h2) == -2.25f);
  const float2 f2 = __half22float2(h2);
  CHECK((f2.x == 1.5f && f2.y == -2.25f));
  const __nv_bfloat162 b2 = __floats2bfloat162_rn(3.0f, 0.5f);
  CHECK((__low2float(b2) == 3.0f && __high2float(b2) == 0.5f));
}

TEST_CASE("emu: half arithmetic is correctly rounded, fma included", "[emu][half]") {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any_half(0, 0xffff);
  int checked = 0;
  while (checked < 100000) {
    const __half a = __ushort_as_half(static_cast<uint16_t>(any_half(rng)));
    const __half b = __ushort_as_half(static_cast<uint16_t>(any_half(rng)));
    const __half c = __ushort_as_half(static_cast<uint16_t>(any_half(rng)));
    if (__hisnan(a) || __hisnan(b) || __hisnan(c) || __hisinf(a) || __hisinf(b) || __hisinf(c)) continue;
    ++checked;
    const float fa = __half2float(a), fb = __half2float(b), fc = __half2float(c);
    REQUIRE(__half_as_ushort(__hadd(a, b)) == hg::half(static_cast<float>(double(fa) + double(fb))).bits());
    REQUIRE(__half_as_ushort(__hmul(a, b)) == hg::half(static_cast<float>(double(fa) * double(fb))).bits());
    const uint16_t expected = reference_hfma(fa, fb, fc);
    const uint16_t got = __half_as_ushort(__hfma(a, b, c));
    if ((expected & 0x7fff) > 0x7c00) continue;  // overflowed to inf in a way that produced NaN? skip
    INFO(fa << " * " << fb << " + " << fc);
    REQUIRE(got == expected);
  }
  // A case where fmaf-then-round would round twice: a*b+c lies just above a
  // half tie, but the float nearest to it is the tie itself.
  const __half a = __float2half_rn(1.0f + std::ldexp(1.0f, -10));
  const __half c = __float2half_rn(std::ldexp(1.0f, -11) - std::ldexp(1.0f, -21));
  CHECK(__half_as_ushort(__hfma(a, a, c)) ==
        reference_hfma(__half2float(a), __half2float(a), __half2float(c)));
  CHECK(__hlt(__float2half_rn(1.0f), __float2half_rn(2.0f)));
  CHECK_FALSE(__heq(__ushort_as_half(0x7e00), __ushort_as_half(0x7e00)));  // NaN != NaN
  CHECK(__hneu(__ushort_as_half(0x7e00), __ushort_as_half(0x7e00)));
  CHECK(__half2float(__hmax(__ushort_as_half(0x7e00), __float2half_rn(3.0f))) == 3.0f);
}

TEST_CASE("emu: half intrinsics in a kernel match the host", "[emu][half]") {
  const int n = 1000;
  std::vector<__half> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = __float2half_rn(static_cast<float>(i) * 0.37f - 100.0f);
    b[i] = __float2half_rn(1.0f / static_cast<float>(i + 1));
  }
  DeviceBuffer<__half> da(a), db(b), out(4 * n);
  HG_LAUNCH(half_ops_kernel, dim3(4), dim3(256), 0, nullptr, out.get(), da.get(), db.get(), n);
  const std::vector<__half> r = out.download();
  for (int i = 0; i < n; ++i) {
    const float fa = __half2float(a[i]), fb = __half2float(b[i]);
    REQUIRE(__half_as_ushort(r[4 * i + 0]) == hg::half(fa + fb).bits());
    REQUIRE(__half_as_ushort(r[4 * i + 1]) == hg::half(fa * fb).bits());
    REQUIRE(__half_as_ushort(r[4 * i + 2]) == reference_hfma(fa, fb, fa));
    REQUIRE(__half_as_ushort(r[4 * i + 3]) == hg::half(fb * fb).bits());
  }
}

TEST_CASE("emu: 16-bit atomicAdd", "[emu][half]") {
  DeviceBuffer<__half> h(1);
  DeviceBuffer<__nv_bfloat16> b(1);
  DeviceBuffer<float> f(1);
  h.upload({__float2half_rn(0.0f)});
  b.upload({__float2bfloat16_rn(0.0f)});
  f.fill_zero();
  HG_LAUNCH(atomic_half_kernel, dim3(4), dim3(64), 0, nullptr, h.get(), b.get(), f.get());
  CHECK(__half2float(h.download()[0]) == 256.0f);
  CHECK(__bfloat162float(b.download()[0]) == 256.0f);  // integers up to 256 are exact in bf16
  CHECK(f.download()[0] == 256.0f);
}

// The CPU's 16-bit row converters (kernels/cpu/convert_simd.h) must hand the
// thread back with the upper halves of the YMM registers clean: a dirty upper
// state makes every later non-VEX SSE instruction of the library (built for
// baseline x86-64) merge with it. Note [vzeroupper before the tail] in
// kernels/cpu/convert_simd.cpp has the measurement that found it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/convert_simd.h"
#include "tests/skip.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

namespace {

// XGETBV(1) = XINUSE where the CPU has it; bit 2 is the YMM_Hi128 component
// (set while any YMM register's upper half is not in its initial, zero state).
bool xinuse_supported() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || ((c >> 27) & 1) == 0) return false;  // OSXSAVE
  if (__get_cpuid_count(0xd, 1, &a, &b, &c, &d) == 0) return false;
  return ((a >> 2) & 1) != 0;
}

bool upper_ymm_in_use() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return ((lo >> 2) & 1) != 0;
}

}  // namespace

TEST_CASE("the AVX2 converters return with the upper YMM state clean", "[kernels][cpu][needs-avx2-f16c]") {
  if (!xinuse_supported() || std::strcmp(hg::cpu::convert_isa(), "avx2-f16c") != 0) {
    HG_SKIP("needs XGETBV(1) and the avx2-f16c converters (this process: " << hg::cpu::convert_isa() << ")");
  }
  // 8 + 3 elements: the vector loop, then the portable tail (the path that
  // used to leave the state dirty), and a multiple of 8 (no tail).
  for (const int64_t n : {int64_t{11}, int64_t{16}}) {
    std::vector<float> f(static_cast<size_t>(n), 1.5f);
    std::vector<uint16_t> h(static_cast<size_t>(n), 0x3c00);
    hg::cpu::widen_f16(h.data(), f.data(), n);
    CHECK_FALSE(upper_ymm_in_use());
    hg::cpu::widen_bf16(h.data(), f.data(), n);
    CHECK_FALSE(upper_ymm_in_use());
    hg::cpu::narrow_f16(f.data(), h.data(), n);
    CHECK_FALSE(upper_ymm_in_use());
    hg::cpu::narrow_bf16(f.data(), h.data(), n);
    CHECK_FALSE(upper_ymm_in_use());
  }
}
#else
TEST_CASE("the AVX2 converters return with the upper YMM state clean", "[kernels][cpu][needs-avx2-f16c]") {
  HG_SKIP("x86 only");
}
#endif

// The Adam/AdamW kernels (kernels/optimizer/optimizer_simd_impl.h) for AVX2, 8
// floats a vector; compiled with -mavx2 -mf16c -ffp-contract=off
// (kernels/optimizer/sources.cmake) and called only when the CPU has AVX2 and F16C
// (kernels/optimizer/optimizer_cpu.cpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/simd16_avx2.h"

namespace hg::cpu::opt_avx2 {
using VR = __m256;
inline constexpr int kW = 8;
inline VR vs_sqrt(VR v) { return _mm256_sqrt_ps(v); }
// x / b: this file has no FMA (CPUs with AVX2 and F16C but no FMA exist in
// principle), so the bias corrections divide (the AVX-512 file does not).
inline VR vs_div_scalar(VR x, VR b, VR /*y*/) { return _mm256_div_ps(x, b); }
// 16-bit lanes in registers: kernels/cpu/simd16_avx2.h.
inline VR vs_load_f16(const uint16_t* p) { return simd16_avx2::load_f16(p); }
inline void vs_store_f16(uint16_t* p, VR v) { simd16_avx2::store_f16(p, v); }
inline VR vs_load_bf16(const uint16_t* p) { return simd16_avx2::load_bf16(p); }
inline void vs_store_bf16(uint16_t* p, VR v) { simd16_avx2::store_bf16(p, v); }
inline void vs_leave() { _mm256_zeroupper(); }
}  // namespace hg::cpu::opt_avx2

#define HG_OPT_NS opt_avx2
#define HG_OPT_NAME "avx2"
#include "kernels/optimizer/optimizer_simd_impl.h"

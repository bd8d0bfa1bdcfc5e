// The Adam/AdamW kernels (kernels/optimizer/optimizer_simd_impl.h) for AVX-512, 16
// floats a vector; compiled with -mavx512f -mavx2 -mf16c -ffp-contract=off
// (kernels/optimizer/sources.cmake) and called only when the CPU has AVX-512F
// (kernels/optimizer/optimizer_cpu.cpp).
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused source
// of their masked builtins, which -Wmaybe-uninitialized reports wherever they
// are inlined: a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "kernels/optimizer/div_scalar_avx512.h"
#include "kernels/cpu/simd16_avx512.h"

namespace hg::cpu::opt_avx512 {
using VR = __m512;
inline constexpr int kW = 16;
inline VR vs_sqrt(VR v) { return _mm512_sqrt_ps(v); }
// x / b for the bias corrections, without the divider:
// kernels/optimizer/div_scalar_avx512.h.
inline VR vs_div_scalar(VR x, VR b, VR y) { return div_scalar_avx512(x, b, y); }
// 16-bit lanes in registers: kernels/cpu/simd16_avx512.h.
inline VR vs_load_f16(const uint16_t* p) { return simd16_avx512::load_f16(p); }
inline void vs_store_f16(uint16_t* p, VR v) { simd16_avx512::store_f16(p, v); }
inline VR vs_load_bf16(const uint16_t* p) { return simd16_avx512::load_bf16(p); }
inline void vs_store_bf16(uint16_t* p, VR v) { simd16_avx512::store_bf16(p, v); }
inline void vs_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail] (kernels/cpu/convert_simd.cpp)
}  // namespace hg::cpu::opt_avx512

#define HG_OPT_NS opt_avx512
#define HG_OPT_NAME "avx512"
#include "kernels/optimizer/optimizer_simd_impl.h"

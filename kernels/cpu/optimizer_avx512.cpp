// The Adam/AdamW kernels (kernels/cpu/optimizer_simd_impl.h) for AVX-512, 16
// floats a vector; compiled with -mavx512f -mavx2 -mf16c -ffp-contract=off
// (kernels/cpu/sources.cmake) and called only when the CPU has AVX-512F
// (kernels/cpu/optimizer.cpp).
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused source
// of their masked builtins, which -Wmaybe-uninitialized reports wherever they
// are inlined: a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/simd16_avx512.h"

namespace hg::cpu::opt_avx512 {
using VR = __m512;
inline constexpr int kW = 16;
inline VR vs_sqrt(VR v) { return _mm512_sqrt_ps(v); }
// x / b correctly rounded for a positive scalar b (every lane) with
// y = RN(1 / b), without the divider: q = x y, then one Markstein correction
// q + (x - q b) y, the residual exact through the FMA. Exact wherever
// 2^-100 <= |q| <= 2^100 (Markstein's correction theorem; checked for every
// f32 x against 22 divisors, bias corrections among them, by
// scripts/check-div-scalar.cpp: no difference in that range); a zero x
// keeps its sign through q; a vector with any other
// lane (subnormal, huge, infinite, NaN) divides. Note [Adam's bias
// corrections without the divider] in kernels/cpu/optimizer_simd_impl.h.
inline VR vs_div_scalar(VR x, VR b, VR y) {
  const VR q = _mm512_mul_ps(x, y);
  const VR c = _mm512_fmadd_ps(_mm512_fnmadd_ps(q, b, x), y, q);
  const VR aq = _mm512_abs_ps(q);
  const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);
  const __mmask16 in_range = _mm512_cmp_ps_mask(aq, _mm512_set1_ps(0x1p-100f), _CMP_GE_OQ) &
                             _mm512_cmp_ps_mask(aq, _mm512_set1_ps(0x1p100f), _CMP_LE_OQ);
  if (static_cast<__mmask16>(zero | in_range) != 0xffff) return _mm512_div_ps(x, b);
  return _mm512_mask_blend_ps(zero, c, q);
}
// 16-bit lanes in registers: kernels/cpu/simd16_avx512.h.
inline VR vs_load_f16(const uint16_t* p) { return simd16_avx512::load_f16(p); }
inline void vs_store_f16(uint16_t* p, VR v) { simd16_avx512::store_f16(p, v); }
inline VR vs_load_bf16(const uint16_t* p) { return simd16_avx512::load_bf16(p); }
inline void vs_store_bf16(uint16_t* p, VR v) { simd16_avx512::store_bf16(p, v); }
inline void vs_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail] (kernels/cpu/convert_simd.cpp)
}  // namespace hg::cpu::opt_avx512

#define HG_OPT_NS opt_avx512
#define HG_OPT_NAME "avx512"
#include "kernels/cpu/optimizer_simd_impl.h"

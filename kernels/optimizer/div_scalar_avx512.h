// x / b for a positive scalar b (the same in every lane), correctly rounded,
// without the divider: AVX-512F, included by kernels/optimizer/optimizer_avx512.cpp
// (compiled with -mavx512f) and by scripts/check-div-scalar.cpp, which checks
// it against the division for every f32 x.
//
// With y = RN(1 / b): q = x y, then one Markstein correction
// q - (q b - x) y, the residual q b - x exact through the FMA. Markstein's
// correction theorem makes that RN(x / b) wherever 2^-100 <= |q| <= 2^100
// (no underflow or overflow in the residual). A zero x keeps its sign: q b - x
// is +0 for either zero, and q - (+0) y is q. A vector with any other lane
// (tiny, subnormal, huge, infinite, NaN) divides. One compare chain and one
// KORTEST decide it: moving a mask to a general register costs a port-0 slot,
// which the Adam loop is short of. Note [Adam's bias corrections without the
// divider] in kernels/optimizer/optimizer_simd_impl.h.
#pragma once

#include <immintrin.h>

namespace hg::cpu {

inline __m512 div_scalar_avx512(__m512 x, __m512 b, __m512 y) {
  const __m512 q = _mm512_mul_ps(x, y);
  const __m512 aq = _mm512_abs_ps(q);
  const __mmask16 in_range = _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(aq, _mm512_set1_ps(0x1p-100f), _CMP_GE_OQ), aq,
                                                     _mm512_set1_ps(0x1p100f), _CMP_LE_OQ);
  const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);
  if (_kortestc_mask16_u8(in_range, zero) == 0) return _mm512_div_ps(x, b);
  return _mm512_fnmadd_ps(_mm512_fmsub_ps(q, b, x), y, q);
}

}  // namespace hg::cpu

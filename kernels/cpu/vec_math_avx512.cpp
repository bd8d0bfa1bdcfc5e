// The vector math kernels (kernels/cpu/vec_math_impl.h) for avx512, 16 floats a
// vector, with SLEEF's avx512f functions; compiled with -mavx512f -mavx2 -mfma -mf16c (kernels/cpu/sources.cmake) and called only
// when the CPU has the ISA (kernels/cpu/vec_math.cpp).
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused source
// of their masked builtins, which -Wmaybe-uninitialized reports wherever they
// are inlined (-Wuninitialized where the store is inlined into the norm
// rows' tails): a false positive, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hg::cpu::vm_avx512 {
using VR = __m512;
inline constexpr int kW = 16;
inline VR vm_exp(VR x) { return Sleef_expf16_u10avx512f(x); }
inline VR vm_log(VR x) { return Sleef_logf16_u10avx512f(x); }
inline VR vm_log1p(VR x) { return Sleef_log1pf16_u10avx512f(x); }
inline VR vm_tanh(VR x) { return Sleef_tanhf16_u10avx512f(x); }
inline VR vm_erf(VR x) { return Sleef_erff16_u10avx512f(x); }
// 16-bit lanes in registers: f16 by VCVTPH2PS / VCVTPS2PH (AVX-512F) with
// round-to-nearest-even (core/half.h's bits, NaN quieted with its payload);
// bf16 widened by a 16-bit shift and rounded as core/half.h's
// float_to_bfloat16_bits: NaN -> (x >> 16) | 0x40, else (x + 0x7fff + lsb) >> 16,
// then narrowed by VPMOVDW. (AVX512_BF16's VCVTNEPS2BF16 would flush
// subnormals to zero: not core/half.h's rounding, so not used.)
inline VR vm_load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline void vm_store_f16(uint16_t* p, VR v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline VR vm_load_bf16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline void vm_store_bf16(uint16_t* p, VR v) {
  const __m512i x = _mm512_castps_si512(v);
  const __mmask16 is_nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, nan)));
}
inline VR vm_fma(VR a, VR b, VR c) { return _mm512_fmadd_ps(a, b, c); }
using VI = int32_t __attribute__((vector_size(64)));  // the lanes as integers
inline VR vm_abs(VR a) { return reinterpret_cast<VR>(reinterpret_cast<VI>(a) & (VI{} + 0x7fffffff)); }
inline VR vm_copysign(VR a, VR b) {
  const VI magnitude = VI{} + 0x7fffffff;
  return reinterpret_cast<VR>((reinterpret_cast<VI>(a) & magnitude) | (reinterpret_cast<VI>(b) & ~magnitude));
}
inline void vm_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail]
}  // namespace hg::cpu::vm_avx512

#define HG_VM_NS vm_avx512
#define HG_VM_NAME "sleef-avx512"
#include "kernels/cpu/vec_math_impl.h"
#include "kernels/cpu/vec_norm_impl.h"  // the norm rows (kernels/cpu/vec_norm.h) of the same ISA

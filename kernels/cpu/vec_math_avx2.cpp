// The vector math kernels (kernels/cpu/vec_math_impl.h) for avx2, 8 floats a
// vector, with SLEEF's avx2 functions; compiled with -mavx2 -mfma -mf16c (kernels/cpu/sources.cmake) and called only
// when the CPU has the ISA (kernels/cpu/vec_math.cpp).
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hg::cpu::vm_avx2 {
using VR = __m256;
inline constexpr int kW = 8;
inline VR vm_exp(VR x) { return Sleef_expf8_u10avx2(x); }
inline VR vm_log(VR x) { return Sleef_logf8_u10avx2(x); }
inline VR vm_log1p(VR x) { return Sleef_log1pf8_u10avx2(x); }
inline VR vm_tanh(VR x) { return Sleef_tanhf8_u10avx2(x); }
inline VR vm_erf(VR x) { return Sleef_erff8_u10avx2(x); }
// 16-bit lanes in registers: f16 by F16C (VCVTPH2PS / VCVTPS2PH with
// round-to-nearest-even: core/half.h's bits, NaN quieted with its payload);
// bf16 widened by a 16-bit shift and rounded as core/half.h's
// float_to_bfloat16_bits: NaN -> (x >> 16) | 0x40, else (x + 0x7fff + lsb) >> 16.
inline VR vm_load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline void vm_store_f16(uint16_t* p, VR v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline VR vm_load_bf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline void vm_store_bf16(uint16_t* p, VR v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i is_nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
  // Pack the 32-bit lanes (all < 2^16) to 16 bits, undoing the lane interleave.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}
inline VR vm_fma(VR a, VR b, VR c) { return _mm256_fmadd_ps(a, b, c); }
using VI = int32_t __attribute__((vector_size(32)));  // the lanes as integers
inline VR vm_abs(VR a) { return reinterpret_cast<VR>(reinterpret_cast<VI>(a) & (VI{} + 0x7fffffff)); }
inline VR vm_copysign(VR a, VR b) {
  const VI magnitude = VI{} + 0x7fffffff;
  return reinterpret_cast<VR>((reinterpret_cast<VI>(a) & magnitude) | (reinterpret_cast<VI>(b) & ~magnitude));
}
inline void vm_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail]
}  // namespace hg::cpu::vm_avx2

#define HG_VM_NS vm_avx2
#define HG_VM_NAME "sleef-avx2"
#include "kernels/cpu/vec_math_impl.h"
#include "kernels/cpu/vec_norm_impl.h"  // the norm rows (kernels/cpu/vec_norm.h) of the same ISA

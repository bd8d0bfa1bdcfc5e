// 16-bit lanes in AVX-512 registers, shared by the per-ISA kernel files
// compiled with -mavx512f (vec_math_avx512.cpp, optimizer_avx512.cpp): f16 by
// VCVTPH2PS / VCVTPS2PH (AVX-512F) with round-to-nearest-even (core/half.h's
// bits, NaN quieted with its payload); bf16 widened by a 16-bit shift and
// rounded as core/half.h's float_to_bfloat16_bits: NaN -> (x >> 16) | 0x40,
// else (x + 0x7fff + lsb) >> 16, then narrowed by VPMOVDW. (AVX512_BF16's
// VCVTNEPS2BF16 flushes subnormals to zero: not core/half.h's rounding, so not
// used.) Include it only from a file compiled for AVX-512F; the functions have
// internal linkage, so files built with different flags each keep their own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hg::cpu::simd16_avx512 {
namespace {

inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline void store_f16(uint16_t* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline __m512 load_bf16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
// Nine uops: the rounding on every lane, then the NaN lanes replaced by
// their quieted high half in one masked OR (an UNORD compare finds them).
inline void store_bf16(uint16_t* p, __m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i out = _mm512_mask_or_epi32(rounded, is_nan, hi, _mm512_set1_epi32(0x40));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(out));
}

}  // namespace
}  // namespace hg::cpu::simd16_avx512

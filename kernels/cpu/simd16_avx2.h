// 16-bit lanes in AVX2 registers, shared by the per-ISA kernel files compiled
// with -mavx2 -mf16c (vec_math_avx2.cpp, optimizer_avx2.cpp): f16 by F16C
// (VCVTPH2PS / VCVTPS2PH with round-to-nearest-even: core/half.h's bits, NaN
// quieted with its payload); bf16 widened by a 16-bit shift and rounded as
// core/half.h's float_to_bfloat16_bits: NaN -> (x >> 16) | 0x40, else
// (x + 0x7fff + lsb) >> 16. Include it only from a file compiled for AVX2 +
// F16C; the functions have internal linkage, so files built with different
// flags each keep their own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hg::cpu::simd16_avx2 {
namespace {

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline void store_f16(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline __m256 load_bf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline void store_bf16(uint16_t* p, __m256 v) {
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

}  // namespace
}  // namespace hg::cpu::simd16_avx2

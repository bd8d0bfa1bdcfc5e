// Exhaustive check of the AVX-512 Adam kernel's division by a scalar
// (hg::cpu::div_scalar_avx512 in kernels/optimizer/div_scalar_avx512.h, the function
// the kernel calls; Note [Adam's bias corrections without the divider] in
// kernels/optimizer/optimizer_simd_impl.h): for every f32 x and each divisor b below
// (Adam's bias corrections 1 - beta^t for the usual betas, random ones, and
// edge significands), its result must equal x / b bit for bit, NaNs included.
// It also counts the x whose Markstein correction alone,
//   q = x * RN(1/b),  q' = q - (q b - x) * RN(1/b)   (two FMAs),
// would differ: all must lie outside 2^-100 <= |q| <= 2^100 (where the
// function divides instead). Run by hand on an AVX-512 machine (about 3 s per
// divisor on one core), from the repository root:
//   g++ -O2 -mavx512f -I. -o /tmp/check-div-scalar scripts/check-div-scalar.cpp && /tmp/check-div-scalar
// Prints each divisor's counts; exits 1 on any difference of the function, or
// of the correction inside the range.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/optimizer/div_scalar_avx512.h"

int main() {
  std::vector<float> divisors;
  for (int t : {1, 2, 3, 5, 10, 100, 1000}) {
    for (float beta : {0.9f, 0.999f}) divisors.push_back(1.0f - std::pow(beta, static_cast<float>(t)));
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 4; ++i) divisors.push_back(std::uniform_real_distribution<float>(1e-4f, 1.0f)(rng));
  for (float b : {1.0f - 0x1p-24f, 0.75f, 0.3f, 3.0f}) divisors.push_back(b);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  long total_bad = 0;
  for (const float b : divisors) {
    const __m512 vb = _mm512_set1_ps(b), vy = _mm512_set1_ps(1.0f / b);
    long function_differs = 0, in_range = 0, outside = 0;
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 16) {
      const __m512 x = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(u)), lane));
      const __m512i want = _mm512_castps_si512(_mm512_div_ps(x, vb));
      const __m512 got = hg::cpu::div_scalar_avx512(x, vb, vy);
      function_differs += __builtin_popcount(_mm512_cmpneq_epi32_mask(want, _mm512_castps_si512(got)));
      const __m512 q = _mm512_mul_ps(x, vy);
      const __m512 corrected = _mm512_fnmadd_ps(_mm512_fmsub_ps(q, vb, x), vy, q);
      const __mmask16 differ = _mm512_cmpneq_epi32_mask(want, _mm512_castps_si512(corrected)) &
                               _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);  // NaN inputs: the function divides
      if (differ == 0) continue;
      const __m512 aq = _mm512_abs_ps(q);
      const __mmask16 ok = _mm512_cmp_ps_mask(aq, _mm512_set1_ps(0x1p-100f), _CMP_GE_OQ) &
                           _mm512_cmp_ps_mask(aq, _mm512_set1_ps(0x1p100f), _CMP_LE_OQ);
      in_range += __builtin_popcount(differ & ok);
      outside += __builtin_popcount(differ & ~ok & 0xffff);
    }
    std::printf("b = %.9g: the function differs at %ld x; the correction differs at %ld x in range, %ld outside it\n",
                static_cast<double>(b), function_differs, in_range, outside);
    total_bad += function_differs + in_range;
  }
  return total_bad == 0 ? 0 : 1;
}

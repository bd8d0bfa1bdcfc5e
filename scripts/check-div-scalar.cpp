// Exhaustive check of the AVX-512 Adam kernel's division by a scalar
// (vs_div_scalar in kernels/cpu/optimizer_avx512.cpp; Note [Adam's bias
// corrections without the divider] in kernels/cpu/optimizer_simd_impl.h):
// for every f32 x and each divisor b below (Adam's bias corrections
// 1 - beta^t for the usual betas, random ones, and edge significands),
//   q = x * RN(1/b),  q' = q + (x - q b) * RN(1/b)   (two FMAs)
// must equal x / b bit for bit wherever 2^-100 <= |q| <= 2^100, the range in
// which the kernel uses it. Run by hand on an AVX-512 machine (about 4 s per
// divisor on one core):
//   g++ -O2 -mavx512f -mfma -o /tmp/check-div-scalar scripts/check-div-scalar.cpp && /tmp/check-div-scalar
// Prints each divisor's count of differing x in the range (must be 0) and
// outside it (where the kernel divides instead); exits 1 on a difference in
// the range.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  std::vector<float> divisors;
  for (int t : {1, 2, 3, 5, 10, 100, 1000}) {
    for (float beta : {0.9f, 0.999f}) divisors.push_back(1.0f - std::pow(beta, static_cast<float>(t)));
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 4; ++i) divisors.push_back(std::uniform_real_distribution<float>(1e-4f, 1.0f)(rng));
  for (float b : {1.0f - 0x1p-24f, 0.75f, 0.3f, 3.0f}) divisors.push_back(b);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  long total_in_range = 0;
  for (const float b : divisors) {
    const __m512 vb = _mm512_set1_ps(b), vy = _mm512_set1_ps(1.0f / b);
    long in_range = 0, outside = 0;
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 16) {
      const __m512 x = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(u)), lane));
      const __m512 want = _mm512_div_ps(x, vb);
      const __m512 q = _mm512_mul_ps(x, vy);
      const __m512 got = _mm512_fmadd_ps(_mm512_fnmadd_ps(q, vb, x), vy, q);
      const __mmask16 differ = _mm512_cmpneq_epi32_mask(_mm512_castps_si512(want), _mm512_castps_si512(got)) &
                               _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);  // NaN inputs: the kernel divides
      if (differ == 0) continue;
      const __m512 aq = _mm512_abs_ps(q);
      const __mmask16 ok = _mm512_cmp_ps_mask(aq, _mm512_set1_ps(0x1p-100f), _CMP_GE_OQ) &
                           _mm512_cmp_ps_mask(aq, _mm512_set1_ps(0x1p100f), _CMP_LE_OQ);
      in_range += __builtin_popcount(differ & ok);
      outside += __builtin_popcount(differ & ~ok & 0xffff);
    }
    std::printf("b = %.9g: %ld differ in range, %ld outside it\n", static_cast<double>(b), in_range, outside);
    total_in_range += in_range;
  }
  return total_in_range == 0 ? 0 : 1;
}

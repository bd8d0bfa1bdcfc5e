// The blocked CPU flash attention kernels (kernels/attention/flash_attention_impl.h)
// for AVX2: 8 floats a vector, a 6 x 2-vector register block (12 of the 16
// YMM registers accumulate), SLEEF's avx2 expf; compiled with -mavx2 -mfma
// (kernels/attention/sources.cmake) and called only when the vector math runs at
// this ISA (kernels/attention/flash_attention_cpu.cpp).
#include <immintrin.h>
#include <sleef.h>

namespace hg::cpu::fa_avx2 {
using VR = __m256;
inline constexpr int kW = 8;
inline constexpr int kRB = 6, kCB = 2;
inline VR fa_exp(VR x) { return Sleef_expf8_u10avx2(x); }
inline VR fa_splat(float c) { return _mm256_set1_ps(c); }
inline VR fa_fma(VR a, VR b, VR c) { return _mm256_fmadd_ps(a, b, c); }
inline void fa_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail]
}  // namespace hg::cpu::fa_avx2

#define HG_FA_NS fa_avx2
#define HG_FA_NAME "blocked-avx2"
#include "kernels/attention/flash_attention_impl.h"

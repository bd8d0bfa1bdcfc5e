// The blocked CPU flash attention kernels (kernels/attention/flash_attention_impl.h)
// for AVX-512: 16 floats a vector, a 6 x 4-vector register block (24 of the
// 32 ZMM registers accumulate), SLEEF's avx512f expf; compiled with
// -mavx512f -mfma (kernels/attention/sources.cmake) and called only when the
// vector math runs at this ISA (kernels/attention/flash_attention_cpu.cpp).
#include <immintrin.h>
#include <sleef.h>

namespace hg::cpu::fa_avx512 {
using VR = __m512;
inline constexpr int kW = 16;
inline constexpr int kRB = 6, kCB = 4;
inline VR fa_exp(VR x) { return Sleef_expf16_u10avx512f(x); }
inline VR fa_splat(float c) { return _mm512_set1_ps(c); }
inline VR fa_fma(VR a, VR b, VR c) { return _mm512_fmadd_ps(a, b, c); }
inline void fa_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail]
}  // namespace hg::cpu::fa_avx512

#define HG_FA_NS fa_avx512
#define HG_FA_NAME "blocked-avx512"
#include "kernels/attention/flash_attention_impl.h"

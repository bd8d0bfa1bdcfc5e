// The blocked CPU flash attention kernels (kernels/attention/flash_attention_impl.h)
// at the x86-64 baseline: 4 floats a vector, a 6 x 2-vector register block
// (12 of the 16 XMM registers accumulate), SLEEF's sse2 expf, no FMA
// (a multiply and an add, two roundings); compiled without extra ISA flags.
#include <immintrin.h>
#include <sleef.h>

namespace hg::cpu::fa_sse2 {
using VR = __m128;
inline constexpr int kW = 4;
inline constexpr int kRB = 6, kCB = 2;
inline VR fa_exp(VR x) { return Sleef_expf4_u10sse2(x); }
inline VR fa_splat(float c) { return _mm_set1_ps(c); }
inline VR fa_fma(VR a, VR b, VR c) { return a * b + c; }
inline void fa_leave() {}
}  // namespace hg::cpu::fa_sse2

#define HG_FA_NS fa_sse2
#define HG_FA_NAME "blocked-sse2"
#include "kernels/attention/flash_attention_impl.h"

// The vector math kernels (kernels/cpu/vec_math_impl.h) for avx2, 8 floats a
// vector, with SLEEF's avx2 functions; compiled with -mavx2 -mfma (kernels/cpu/sources.cmake) and called only
// when the CPU has the ISA (kernels/cpu/vec_math.cpp).
#include <immintrin.h>
#include <sleef.h>

namespace hg::cpu::vm_avx2 {
using VR = __m256;
inline constexpr int kW = 8;
inline VR vm_exp(VR x) { return Sleef_expf8_u10avx2(x); }
inline VR vm_log(VR x) { return Sleef_logf8_u10avx2(x); }
inline VR vm_log1p(VR x) { return Sleef_log1pf8_u10avx2(x); }
inline VR vm_tanh(VR x) { return Sleef_tanhf8_u10avx2(x); }
inline VR vm_erf(VR x) { return Sleef_erff8_u10avx2(x); }
inline void vm_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail]
}  // namespace hg::cpu::vm_avx2

#define HG_VM_NS vm_avx2
#define HG_VM_NAME "sleef-avx2"
#include "kernels/cpu/vec_math_impl.h"

// The vector math kernels (kernels/cpu/vec_math_impl.h) for avx512, 16 floats a
// vector, with SLEEF's avx512f functions; compiled with -mavx512f -mavx2 -mfma (kernels/cpu/sources.cmake) and called only
// when the CPU has the ISA (kernels/cpu/vec_math.cpp).
#include <immintrin.h>
#include <sleef.h>

namespace hg::cpu::vm_avx512 {
using VR = __m512;
inline constexpr int kW = 16;
inline VR vm_exp(VR x) { return Sleef_expf16_u10avx512f(x); }
inline VR vm_log(VR x) { return Sleef_logf16_u10avx512f(x); }
inline VR vm_log1p(VR x) { return Sleef_log1pf16_u10avx512f(x); }
inline VR vm_tanh(VR x) { return Sleef_tanhf16_u10avx512f(x); }
inline VR vm_erf(VR x) { return Sleef_erff16_u10avx512f(x); }
inline void vm_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail]
}  // namespace hg::cpu::vm_avx512

#define HG_VM_NS vm_avx512
#define HG_VM_NAME "sleef-avx512"
#include "kernels/cpu/vec_math_impl.h"

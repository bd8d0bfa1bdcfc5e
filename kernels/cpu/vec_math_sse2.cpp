// The vector math kernels (kernels/cpu/vec_math_impl.h) for sse2, 4 floats a
// vector, with SLEEF's sse2 functions; compiled with the x86-64 baseline (no extra flags) and called only
// when the CPU has the ISA (kernels/cpu/vec_math.cpp).
#include <immintrin.h>
#include <sleef.h>

namespace hg::cpu::vm_sse2 {
using VR = __m128;
inline constexpr int kW = 4;
inline VR vm_exp(VR x) { return Sleef_expf4_u10sse2(x); }
inline VR vm_log(VR x) { return Sleef_logf4_u10sse2(x); }
inline VR vm_log1p(VR x) { return Sleef_log1pf4_u10sse2(x); }
inline VR vm_tanh(VR x) { return Sleef_tanhf4_u10sse2(x); }
inline VR vm_erf(VR x) { return Sleef_erff4_u10sse2(x); }
inline void vm_leave() {}
}  // namespace hg::cpu::vm_sse2

#define HG_VM_NS vm_sse2
#define HG_VM_NAME "sleef-sse2"
#include "kernels/cpu/vec_math_impl.h"

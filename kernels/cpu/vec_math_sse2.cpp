// The vector math kernels (kernels/cpu/vec_math_impl.h) for sse2, 4 floats a
// vector, with SLEEF's sse2 functions; compiled with the x86-64 baseline (no extra flags) and called only
// when the CPU has the ISA (kernels/cpu/vec_math.cpp).
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

#include "core/half.h"

namespace hg::cpu::vm_sse2 {
using VR = __m128;
inline constexpr int kW = 4;
inline VR vm_exp(VR x) { return Sleef_expf4_u10sse2(x); }
inline VR vm_log(VR x) { return Sleef_logf4_u10sse2(x); }
inline VR vm_log1p(VR x) { return Sleef_log1pf4_u10sse2(x); }
inline VR vm_tanh(VR x) { return Sleef_tanhf4_u10sse2(x); }
inline VR vm_erf(VR x) { return Sleef_erff4_u10sse2(x); }
inline VR vm_erfc(VR x) { return Sleef_erfcf4_u15sse2(x); }  // 1.5 ulp
// Whether a < b in some lane (one compare and a mask test; NaN lanes are not less).
inline bool vm_any_lt(VR a, VR b) { return _mm_movemask_ps(_mm_cmplt_ps(a, b)) != 0; }
// 16-bit lanes: the x86-64 baseline has no conversion instructions, so each
// lane goes through core/half.h's conversions (the same bits).
inline VR vm_load_f16(const uint16_t* p) {
  VR v;
  for (int k = 0; k < kW; ++k) v[k] = detail::half_bits_to_float(p[k]);
  return v;
}
inline void vm_store_f16(uint16_t* p, VR v) {
  for (int k = 0; k < kW; ++k) p[k] = detail::float_to_half_bits(v[k]);
}
inline VR vm_load_bf16(const uint16_t* p) {
  VR v;
  for (int k = 0; k < kW; ++k) v[k] = detail::bfloat16_bits_to_float(p[k]);
  return v;
}
inline void vm_store_bf16(uint16_t* p, VR v) {
  for (int k = 0; k < kW; ++k) p[k] = detail::float_to_bfloat16_bits(v[k]);
}
inline VR vm_fma(VR a, VR b, VR c) { return a * b + c; }  // no FMA in the baseline: two roundings
using VI = int32_t __attribute__((vector_size(16)));      // the lanes as integers
inline VR vm_abs(VR a) { return reinterpret_cast<VR>(reinterpret_cast<VI>(a) & (VI{} + 0x7fffffff)); }
inline VR vm_copysign(VR a, VR b) {
  const VI magnitude = VI{} + 0x7fffffff;
  return reinterpret_cast<VR>((reinterpret_cast<VI>(a) & magnitude) | (reinterpret_cast<VI>(b) & ~magnitude));
}
inline void vm_leave() {}
}  // namespace hg::cpu::vm_sse2

#define HG_VM_NS vm_sse2
#define HG_VM_NAME "sleef-sse2"
#include "kernels/cpu/vec_math_impl.h"
#include "kernels/norm/norm_simd_impl.h"  // the norm rows (kernels/norm/norm_simd.h) of the same ISA

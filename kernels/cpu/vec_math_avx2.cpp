// The vector math kernels (kernels/cpu/vec_math_impl.h) for avx2, 8 floats a
// vector, with SLEEF's avx2 functions; compiled with -mavx2 -mfma -mf16c (kernels/cpu/sources.cmake) and called only
// when the CPU has the ISA (kernels/cpu/vec_math.cpp).
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

#include "kernels/cpu/simd16_avx2.h"

namespace hg::cpu::vm_avx2 {
using VR = __m256;
inline constexpr int kW = 8;
inline VR vm_exp(VR x) { return Sleef_expf8_u10avx2(x); }
inline VR vm_log(VR x) { return Sleef_logf8_u10avx2(x); }
inline VR vm_log1p(VR x) { return Sleef_log1pf8_u10avx2(x); }
inline VR vm_tanh(VR x) { return Sleef_tanhf8_u10avx2(x); }
inline VR vm_erf(VR x) { return Sleef_erff8_u10avx2(x); }
inline VR vm_erfc(VR x) { return Sleef_erfcf8_u15avx2(x); }  // 1.5 ulp
// Whether a < b in some lane (one compare and a mask test; NaN lanes are not less).
inline bool vm_any_lt(VR a, VR b) { return _mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ)) != 0; }
// 16-bit lanes in registers: kernels/cpu/simd16_avx2.h.
inline VR vm_load_f16(const uint16_t* p) { return simd16_avx2::load_f16(p); }
inline void vm_store_f16(uint16_t* p, VR v) { simd16_avx2::store_f16(p, v); }
inline VR vm_load_bf16(const uint16_t* p) { return simd16_avx2::load_bf16(p); }
inline void vm_store_bf16(uint16_t* p, VR v) { simd16_avx2::store_bf16(p, v); }
inline VR vm_fma(VR a, VR b, VR c) { return _mm256_fmadd_ps(a, b, c); }
using VI = int32_t __attribute__((vector_size(32)));  // the lanes as integers
inline VR vm_abs(VR a) { return reinterpret_cast<VR>(reinterpret_cast<VI>(a) & (VI{} + 0x7fffffff)); }
inline VR vm_copysign(VR a, VR b) {
  const VI magnitude = VI{} + 0x7fffffff;
  return reinterpret_cast<VR>((reinterpret_cast<VI>(a) & magnitude) | (reinterpret_cast<VI>(b) & ~magnitude));
}
inline void vm_leave() { _mm256_zeroupper(); }  // Note [vzeroupper before the tail]
}  // namespace hg::cpu::vm_avx2

#define HG_VM_NS vm_avx2
#define HG_VM_NAME "sleef-avx2"
#include "kernels/cpu/vec_math_impl.h"
#include "kernels/norm/norm_simd_impl.h"  // the norm rows (kernels/norm/norm_simd.h) of the same ISA

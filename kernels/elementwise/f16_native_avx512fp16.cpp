// The native f16 element-wise kernels (kernels/elementwise/f16_native_impl.h) for
// AVX512-FP16: compiled with -mavx512fp16 -mavx512vl -mavx512bw
// (kernels/elementwise/sources.cmake) and called only where CPUID says AVX512-FP16
// and XCR0 the ZMM state (runtime/cpu/cpu_dispatch.h). The test
// check_f16_native_asm checks that the object holds the AVX512-FP16
// instructions and no software _Float16 calls.
#include <immintrin.h>

#include "kernels/elementwise/f16_native.h"

#define HG_F16_NS f16_avx512fp16
#define HG_F16_LEAVE _mm256_zeroupper  // Note [vzeroupper before the tail] (kernels/cpu/convert_simd.cpp)
#include "kernels/elementwise/f16_native_impl.h"

namespace hg::cpu {
const F16NativeTable* f16_native_avx512fp16() { return &f16_avx512fp16::table(); }
}  // namespace hg::cpu

// The native f16 element-wise kernels (kernels/elementwise/f16_native_impl.h)
// compiled without AVX512-FP16: the same source, each _Float16 operation
// lowered by GCC to f32 arithmetic plus one rounding to _Float16, so that
// tests/kernels/test_cpu_dispatch.cpp can run it on any x86-64 CPU. Compilers
// without _Float16 on this target (clang before 15) leave it out
// (f16_native_soft_table() returns nullptr and the test says skipped).
#include <cstddef>

#include "kernels/elementwise/f16_native.h"

#if defined(__FLT16_MANT_DIG__)
// Vectors passed by value between the inlined helpers: GCC notes the AVX-512
// ABI of 64-byte vectors, irrelevant inside one file.
#pragma GCC diagnostic ignored "-Wpsabi"
#define HG_F16_NS f16_soft
#define HG_F16_LEAVE() (void)0
#include "kernels/elementwise/f16_native_impl.h"
#endif

namespace hg::cpu {
const F16NativeTable* f16_native_soft_table() {
#if defined(__FLT16_MANT_DIG__)
  return &f16_soft::table();
#else
  return nullptr;
#endif
}
}  // namespace hg::cpu

// Vector kernels of the CPU Adam/AdamW step, with run-time ISA dispatch
// (kernels/optimizer/README.md, "Optimizer step and GradScaler on the CPU").
//
// The element rule is optimizer_update's (kernels/optimizer/optimizer.h), operation for
// operation: the per-step scalars are hoisted, and the vector code does the
// same IEEE multiplies, adds, divisions and square root in the same order,
// with no fused multiply-add (the ISA files are compiled with
// -ffp-contract=off), so every ISA path is bit-identical to the scalar rule.
// The files optimizer_avx2.cpp (AVX2 + F16C, 8 lanes) and
// optimizer_avx512.cpp (AVX-512F, 16 lanes) compile
// kernels/optimizer/optimizer_simd_impl.h once each; the baseline (SSE2) loops stay
// in kernels/optimizer/optimizer_cpu.cpp. The widest the CPU supports is chosen at
// every call from CPUID and the process's switches of kernels/cpu/vec_math.h:
//   HG_CPU_MATH=scalar   the reference path: optimizer_update per element
//   HG_CPU_ISA=generic   the baseline loops (GCC's SSE2 vectorisation)
//   HG_CPU_ISA=avx2      at most AVX2
#pragma once

#include <cstdint>

#include "kernels/cpu/vec_math.h"

namespace hg::cpu {

// Adam/AdamW's per-step scalars, from step_scalars (kernels/optimizer/optimizer.h):
// one_minus_beta1 = 1 - beta1, decay = 1 - lr * weight_decay (AdamW),
// l2 = Adam with weight_decay != 0 (the decay added to the gradient).
struct AdamConstants {
  float inv_scale, beta1, beta2, one_minus_beta1, one_minus_beta2, lr, eps, bc1, bc2, weight_decay, decay;
  bool decoupled, l2;
};

// The kernels of one ISA. Arrays are n contiguous values; none aliases another.
struct OptimizerSimdTable {
  const char* name;  // "avx2", "avx512"
  // f32 weights without masters: param, m, v updated in place from grad.
  void (*adam_f32)(float* param, const float* grad, float* m, float* v, int64_t n, const AdamConstants& c);
  // 16-bit weights (t: f16 or bf16) with f32 masters: the 16-bit gradient is
  // widened in the registers, master, m and v are updated, and the weight is
  // written as the new master rounded once (round-to-nearest-even, NaN
  // quieted: core/half.h's conversions).
  void (*adam_master)(VecType t, uint16_t* param, const uint16_t* grad, float* master, float* m, float* v, int64_t n,
                      const AdamConstants& c);
};

// The table to use now, or nullptr for the baseline loops (HG_CPU_ISA=generic,
// a CPU without AVX2 + F16C, a non-x86-64 build) or the scalar reference
// (HG_CPU_MATH=scalar: see optimizer_scalar_reference()).
const OptimizerSimdTable* optimizer_simd();
// True when HG_CPU_MATH=scalar (cpu::set_cpu_math(CpuMath::scalar)) asks for
// the scalar reference loop (optimizer_update per element).
bool optimizer_scalar_reference();
// "scalar", "generic", "avx2" or "avx512": the path the Adam step takes now.
const char* optimizer_isa_name();

}  // namespace hg::cpu

// Vectorised transcendental math for the CPU hot loops (kernels/cpu/README.md,
// "CPU math: SLEEF and ISA dispatch").
//
// The element-wise ops (exp, log, tanh, sigmoid, silu, gelu, gelu_tanh, erf,
// softplus: forward and backward), softmax / log-softmax and cross-entropy
// call these array kernels on contiguous f32 or 16-bit arrays instead of
// glibc's scalar expf/erff/tanhf one value at a time; 16-bit values are
// widened and rounded back in the vector registers. The transcendental functions are
// SLEEF's 1.0-ulp (u10) vector functions; the arithmetic around them (the
// GELU polynomial, the sigmoid division, ...) is written once in
// kernels/cpu/vec_math_impl.h with GCC vector extensions and compiled once per
// ISA: SSE2 (the x86-64 baseline), AVX2+FMA and AVX-512F, each calling the
// SLEEF variant of its own width. The widest one the CPU supports is chosen
// once, at first use, from CPUID and XCR0 (cpu::best_vec_isa). The norm rows of kernels/norm/norm_simd.h
// (layer_norm, rms_norm) are compiled with them and chosen by the same switches.
//
// Switches (read once, at first use; the setters change them at run time):
//   HG_CPU_MATH=scalar   the scalar reference path: the functors of
//                        kernels/elementwise/elementwise_functors.h with glibc's libm, one
//                        value at a time (cpu::set_cpu_math(CpuMath::scalar))
//   HG_CPU_ISA=generic   the SSE2 baseline kernels (also the generic 16-bit
//                        converters and no oneDNN, kernels/cpu/convert_simd.h);
//   HG_CPU_ISA=avx2      at most AVX2 (cpu::set_cpu_isa_cap(VecIsa::...));
//   HG_CPU_ISA=avx512    at most AVX-512F: the native f16 element-wise
//                        kernels (kernels/elementwise/f16_native.h) stay off
// (runtime/cpu/cpu_dispatch.h parses the values and makes the decisions).
// A build without SLEEF (-DHG_WITH_SLEEF=OFF) or a CPU other than x86-64 has
// only the scalar path.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/half.h"
#include "runtime/cpu/cpu_dispatch.h"
#include "kernels/op_list.h"

namespace hg::cpu {

enum class CpuMath { scalar, sleef };
// VecIsa (sse2, avx2, avx512) is runtime/cpu/cpu_dispatch.h's.

// The process-wide math path; sleef falls back to scalar where the build or
// CPU has no SLEEF kernels.
void set_cpu_math(CpuMath math);
CpuMath cpu_math();
// The widest ISA the vector kernels may use (the CPU's best when not capped).
void set_cpu_isa_cap(VecIsa cap);
VecIsa cpu_isa_cap();
// "scalar", "sleef-sse2", "sleef-avx2" or "sleef-avx512": what runs now.
const char* cpu_math_name();
// The ISA of vec_math()'s kernels now (the cap and the CPU's best, the
// smaller); meaningful when vec_math() is not null. Kernels compiled per ISA
// outside this table (kernels/attention/flash_attention_tiles.h) follow it.
VecIsa vec_isa();

// The storage type of a typed kernel's arrays: f32, or a 16-bit float whose
// values the kernel widens in registers (16 lanes loaded, converted to f32 in
// the vector registers) and rounds back in registers, round-to-nearest-even,
// bit for bit as core/half.h's conversions (NaN stays NaN, quieted).
enum class VecType { f32, f16, bf16 };

// The storage type of the vector kernels for a C++ element type: f32, f16
// and bf16 have one (kHasVecType); for any other T (f64) vec_type_of is f32
// and unused, since the callers take the vector path only where kHasVecType.
template <typename T>
constexpr bool kHasVecType = std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
template <typename T>
constexpr VecType vec_type_of() {
  if constexpr (std::is_same_v<T, half>) {
    return VecType::f16;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return VecType::bf16;
  } else {
    return VecType::f32;
  }
}

// The kernels of one ISA. Every float* argument is n contiguous floats; every
// void* argument is n contiguous values of the VecType t. x and y may be the
// same array. a and b are an op's scalar arguments (softplus's beta and
// threshold), unused by the others.
struct VecMathTable {
  const char* name;
  // y = op(x) for the ops vec_unary_has(op) lists.
  void (*unary)(OpId op, VecType t, const void* x, void* y, int64_t n, float a, float b);
  // out = d * op'(saved), saved being what the op's functor saves.
  void (*unary_backward)(OpId op, VecType t, const void* d, const void* saved, void* out, int64_t n, float a, float b);
  // One row's log-sum-exp statistics (cross-entropy), every value widened in
  // the registers: *m = max x (NaN if any x is NaN), *s = sum exp(x - m), and
  // when gap is not null *gap = sum (m - x) (label smoothing's term).
  void (*lse_row)(VecType t, const void* x, int64_t n, float* m, float* s, float* gap);
  // out = (exp((x - m) - log_s) - off) * scale in f32, rounded once to t
  // (cross-entropy's gradient off the target).
  void (*exp_grad)(VecType t, const void* x, void* out, int64_t n, float m, float log_s, float off, float scale);
  // One row of softmax or log_softmax (kernels/softmax/softmax_cpu.cpp has the
  // formulas): m = max x (NaN if any x is NaN), s = sum exp(x - m), then
  // y = exp(x - m) / s or y = (x - m) - log(s). A 16-bit softmax keeps its
  // exp values in scratch (n floats, the caller's per-thread row buffer) for
  // the division pass; f32 keeps them in y, log_softmax keeps none.
  void (*softmax_row)(VecType t, bool log, const void* x, void* y, int64_t n, float* scratch);
  // One row of the backward: softmax d_x = y * (d_y - sum d_y * y),
  // log_softmax d_x = d_y - exp(y) * sum d_y.
  void (*softmax_backward_row)(VecType t, bool log, const void* d_y, const void* y, void* d_x, int64_t n);
  // The register conversions every kernel above uses, alone: y = float(x),
  // and y = x rounded to t (round-to-nearest-even).
  void (*widen)(VecType t, const void* x, float* y, int64_t n);
  void (*narrow)(VecType t, const float* x, void* y, int64_t n);
  // Batch norm's per-channel runs (kernels/conv/pool_norm_cpu.cpp), the sums in
  // double lanes (each value widened exactly to double, then added; the
  // order differs from a serial sum, the precision does not): sum x when
  // !square, else sum (x - shift)^2.
  double (*sum_f64)(VecType t, const void* x, int64_t n, double shift, bool square);
  // sum g and sum g * (x - shift), in double lanes.
  void (*dot_f64)(VecType t, const void* g, const void* x, int64_t n, double shift, double* sum_g, double* sum_gx);
  // y = (x - sub) * mul + add in f32, rounded once to t (batch norm's normalisation).
  void (*affine)(VecType t, const void* x, void* y, int64_t n, float sub, float mul, float add);
  // Batch norm's training d_x in f32, rounded once to t:
  // dx = k * (m * g - a - ((x - mean) * rstd) * b).
  void (*bn_dx)(VecType t, const void* g, const void* x, void* dx, int64_t n, float mean, float rstd, float k, float m,
                float a, float b);
};

// The kernels to use now, or nullptr for the scalar path.
const VecMathTable* vec_math();
// Whether vec_math()->unary / unary_backward take op.
bool vec_unary_has(OpId op);
bool vec_unary_backward_has(OpId op);

}  // namespace hg::cpu

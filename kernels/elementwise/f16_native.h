// Native f16 element-wise kernels for CPUs with AVX512-FP16 (kernels/elementwise/README.md,
// "Native f16 element-wise").
//
// Contiguous f16 add, sub, mul, div, maximum, minimum (tensor-tensor, or with
// a scalar that f16 holds exactly) and neg, abs, relu, sqrt run here, 32 f16
// lanes a ZMM register, instead of widening to f32 and rounding back. Each is
// a single IEEE operation on f16 values, so its correctly rounded f16 result
// is also what f32 arithmetic rounded once to f16 gives (f32 carries 24 >=
// 2 * 11 + 2 significand bits: the double rounding is innocuous), and the
// native kernel is bit-identical to the widening path (AVX512-FP16 keeps f16
// subnormals: it ignores MXCSR's DAZ/FTZ). A NaN result's sign and payload
// may differ, as between any two compilations of the float path.
//
// The kernels are written once (kernels/elementwise/f16_native_impl.h) and compiled
// for AVX512-FP16 (kernels/elementwise/f16_native_avx512fp16.cpp); the element-wise
// loop (kernels/elementwise/elementwise_cpu.cpp) calls them where
// cpu::f16_elementwise_decision() (runtime/cpu/cpu_dispatch.h) says native.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/op_list.h"

namespace hg::cpu {

enum class F16Op { add, sub, mul, div, maximum, minimum, neg, abs, relu, sqrt };

// The native op of an element-wise OpId, or nullopt.
std::optional<F16Op> f16_native_op(OpId op);

// Every pointer is n contiguous f16 values (their bits); y may alias an input.
struct F16NativeTable {
  // y = a op b (add .. minimum).
  void (*binary)(F16Op op, const uint16_t* a, const uint16_t* b, uint16_t* y, int64_t n);
  // y = a op s, s an f16 value (add .. minimum).
  void (*scalar)(F16Op op, const uint16_t* a, uint16_t s, uint16_t* y, int64_t n);
  // y = op(x) (neg .. sqrt).
  void (*unary)(F16Op op, const uint16_t* x, uint16_t* y, int64_t n);
};

// The AVX512-FP16 kernels, or nullptr where this build has none (a compiler
// without -mavx512fp16, or not x86-64). Callable only where the CPU has
// AVX512-FP16 and the OS enables the ZMM state.
const F16NativeTable* f16_native_avx512fp16();

// The kernels to use now: the AVX512-FP16 ones where the decision says
// native, else nullptr (the widening path).
const F16NativeTable* f16_native();

// Tests only: makes f16_native() return t (nullptr: the decision again), so
// that the element-wise loop's use of the kernels can be tested through the
// ops with kernels this CPU runs (tests/kernels/f16_native_soft.cpp).
void set_f16_native_for_testing(const F16NativeTable* t);

}  // namespace hg::cpu

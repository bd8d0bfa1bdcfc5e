// The backend-neutral kernel API (floor 1). Each entry checks its arguments
// once (shapes, dtypes, devices — errors name the op and the fix), allocates
// the output, and dispatches on the device to hg::cpu:: or hg::cuda:: kernels
// (kernels/backend.h). No autograd here: autograd/ wraps these.
//
// dtype rules: binary ops compute in the promoted dtype of their inputs
// (floating beats integer, wider beats narrower, f16 with bf16 gives f32);
// comparisons return bool; reductions accumulate in fp32 (f64 for f64) and
// return the input dtype (argmax returns i64); cross_entropy returns f32 (f64 for f64 logits,
// so that gradcheck in f64 is meaningful).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "kernels/op_list.h"

namespace hg {
class Generator;
}

namespace hg::ops {

// ---- type promotion -------------------------------------------------------------
DType promote_types(DType a, DType b);

// ---- unary ------------------------------------------------------------------------
// op: any op of HG_FORALL_UNARY_OPS (kernels/op_list.h); args: its scalar
// arguments, as its functor in kernels/elementwise/elementwise_functors.h names them
// (clamp: {lo, hi}, a missing bound passed as -inf/+inf; softplus: {beta,
// threshold}). Floating-only ops compute integer inputs in f32; an integer
// input with a fractional argument also computes in f32 (infinite arguments,
// such as clamp's missing bounds, keep it integer).
Tensor unary(OpId op, const Tensor& x, const ScalarArgs& args = {});
void unary_(OpId op, const Tensor& x, const ScalarArgs& args = {});  // in place, bumps the version
// d_x = d_out * op'(x) for a unary op (the derivative in its functor):
// `saved` is the forward's input x or output y, as unary_grad_from(op) says;
// it may be undefined when the derivative reads neither (neg).
Tensor unary_backward(OpId op, const Tensor& d_out, const Tensor& saved, const ScalarArgs& args = {});
GradFrom unary_grad_from(OpId op);

inline Tensor neg(const Tensor& x) { return unary(OpId::neg, x); }
inline Tensor exp(const Tensor& x) { return unary(OpId::exp, x); }
inline Tensor log(const Tensor& x) { return unary(OpId::log, x); }
inline Tensor sqrt(const Tensor& x) { return unary(OpId::sqrt, x); }
inline Tensor rsqrt(const Tensor& x) { return unary(OpId::rsqrt, x); }
inline Tensor abs(const Tensor& x) { return unary(OpId::abs, x); }
inline Tensor tanh(const Tensor& x) { return unary(OpId::tanh, x); }
inline Tensor sigmoid(const Tensor& x) { return unary(OpId::sigmoid, x); }
inline Tensor relu(const Tensor& x) { return unary(OpId::relu, x); }
inline Tensor gelu(const Tensor& x, bool tanh_approx = false) {
  return unary(tanh_approx ? OpId::gelu_tanh : OpId::gelu, x);
}
inline Tensor silu(const Tensor& x) { return unary(OpId::silu, x); }
inline Tensor round(const Tensor& x) { return unary(OpId::round, x); }
inline Tensor floor(const Tensor& x) { return unary(OpId::floor, x); }
inline Tensor trunc(const Tensor& x) { return unary(OpId::trunc, x); }

// ---- binary (NumPy broadcasting) ------------------------------------------------------
// op: add sub mul div maximum minimum pow eq ne lt le gt ge
Tensor binary(OpId op, const Tensor& a, const Tensor& b);
Tensor binary_scalar(OpId op, const Tensor& a, double b);  // a op scalar
// In place: a = a op b, b broadcast to a's shape; a's dtype is kept.
void binary_(OpId op, const Tensor& a, const Tensor& b);
void binary_scalar_(OpId op, const Tensor& a, double b);
// cond ? a : b (cond is bool; a and b promote).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

inline Tensor add(const Tensor& a, const Tensor& b) { return binary(OpId::add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(OpId::sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(OpId::mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(OpId::div, a, b); }
inline Tensor maximum(const Tensor& a, const Tensor& b) { return binary(OpId::maximum, a, b); }
inline Tensor minimum(const Tensor& a, const Tensor& b) { return binary(OpId::minimum, a, b); }
inline Tensor pow(const Tensor& a, double exponent) { return binary_scalar(OpId::pow, a, exponent); }

}  // namespace hg::ops

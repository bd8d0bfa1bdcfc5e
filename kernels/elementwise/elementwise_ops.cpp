// Argument checks, dtype promotion, output allocation and device dispatch for
// the elementwise part of the kernel API (kernels/ops.h).
#include "kernels/ops.h"

#include <cmath>

#include "kernels/backend.h"
#include "kernels/dispatch.h"
#include "kernels/elementwise/elementwise_engine.h"

namespace hg::ops {

namespace {

void check_defined(const Tensor& t, OpId op, const char* what) {
  HG_CHECK(t.defined(), op_name(op), ": ", what, " is an undefined tensor");
}

void check_same_device(OpId op, const Tensor& a, const Tensor& b) {
  HG_CHECK(a.device() == b.device(), op_name(op), ": tensors are on different devices (",
           a.device(), " and ", b.device(), "); move one with .to(device) first");
}

// The dtype an op computes in, given the promoted input dtype.
DType compute_dtype(OpId op, DType promoted) {
  if (needs_floating(op) && !is_floating(promoted)) return kF32;  // like torch: int -> float
  return promoted;
}

// A scalar an integer tensor can be combined with without going to f32.
bool is_whole(double v) { return std::isfinite(v) && v == std::trunc(v); }

// Unary ops with arguments: an integer input with a fractional argument
// computes in f32 (clamp(int, 0.5)); an infinite argument is a missing bound
// and keeps the input's dtype.
DType unary_compute_dtype(OpId op, DType in, const ScalarArgs& args) {
  DType compute = compute_dtype(op, in);
  auto fits = [](double v) { return std::isinf(v) || is_whole(v); };
  if (!is_floating(compute) && !(fits(args.a) && fits(args.b))) compute = kF32;
  return compute;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if (a == kF64 || b == kF64) return kF64;
    return kF32;  // f32 with a 16-bit type, or f16 with bf16 (neither holds the other)
  }
  if (fa) return a;
  if (fb) return b;
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool: return 0;
      case DType::U8: return 1;
      case DType::I32: return 2;
      default: return 3;  // i64
    }
  };
  return rank(a) >= rank(b) ? a : b;
}

// ---- unary ----------------------------------------------------------------------------

Tensor unary(OpId op, const Tensor& x, const ScalarArgs& args) {
  check_defined(x, op, "input");
  HG_CHECK(is_unary(op), op_name(op), " is not a unary op");
  HG_CHECK(x.dtype() != kBool, op_name(op), " does not take bool tensors; convert with .to(hg::kF32)");
  const DType compute = unary_compute_dtype(op, x.dtype(), args);
  Tensor out = empty(x.sizes(), {.dtype = compute, .device = x.device()});
  HG_BACKEND_CALL(x.device(), unary, op, out, x.to(compute), args);
  return out;
}

void unary_(OpId op, const Tensor& x, const ScalarArgs& args) {
  check_defined(x, op, "input");
  HG_CHECK(is_unary(op), op_name(op), " is not a unary op");
  HG_CHECK(unary_compute_dtype(op, x.dtype(), args) == x.dtype() && x.dtype() != kBool, op_name(op),
           "_ (in place) cannot write its result into a ", x.dtype(), " tensor; use the out-of-place form");
  HG_BACKEND_CALL(x.device(), unary, op, x, x, args);
  x.bump_version();
}

GradFrom unary_grad_from(OpId op) {
  HG_CHECK(is_unary(op), op_name(op), " is not a unary op");
  return ew::unary_grad_from(op);
}

Tensor unary_backward(OpId op, const Tensor& d_out, const Tensor& saved_in, const ScalarArgs& args) {
  check_defined(d_out, op, "d_out");
  HG_CHECK(is_unary(op) && op_info(op).grad == OpGrad::functor, op_name(op),
           " has no derivative formula to run (unary_backward takes a unary op whose grad is `functor`"
           " in kernels/op_list.h)");
  // A derivative that reads neither x nor y gets d_out in the saved slot.
  const Tensor& saved = ew::unary_grad_from(op) == GradFrom::nothing && !saved_in.defined() ? d_out : saved_in;
  check_defined(saved, op, "saved tensor");
  check_same_device(op, d_out, saved);
  HG_CHECK(d_out.sizes() == saved.sizes(), op_name(op), " backward: d_out shape ", d_out.shape_str(),
           " differs from the saved tensor's shape ", saved.shape_str());
  HG_CHECK(is_floating(d_out.dtype()) && is_floating(saved.dtype()), op_name(op),
           " backward needs floating tensors, got ", d_out.dtype(), " and ", saved.dtype());
  const DType compute = promote_types(d_out.dtype(), saved.dtype());
  Tensor out = empty(d_out.sizes(), {.dtype = compute, .device = d_out.device()});
  HG_BACKEND_CALL(d_out.device(), unary_backward, op, out, d_out.to(compute), saved.to(compute), args);
  return out;
}

// ---- binary ---------------------------------------------------------------------------

namespace {
// x.expand(shape), or x itself when it already has that shape (no view, no
// view record: one less Tensor built per small op).
Tensor expand_to(Tensor x, const Shape& shape) {
  if (x.sizes() == shape) return x;
  return x.expand(shape);
}
}  // namespace

Tensor binary(OpId op, const Tensor& a, const Tensor& b) {
  check_defined(a, op, "first input");
  check_defined(b, op, "second input");
  HG_CHECK(is_binary(op), op_name(op), " is not a binary op");
  check_same_device(op, a, b);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), op_name(op).data());
  const DType compute = compute_dtype(op, promote_types(a.dtype(), b.dtype()));
  HG_CHECK(compute != kBool || is_comparison(op), op_name(op),
           " does not take bool tensors; convert with .to(hg::kF32) or .to(hg::kI64)");
  const DType out_dtype = is_comparison(op) ? kBool : compute;
  Tensor out = empty(shape, {.dtype = out_dtype, .device = a.device()});
  HG_BACKEND_CALL(a.device(), binary, op, out, expand_to(a.to(compute), shape), expand_to(b.to(compute), shape));
  return out;
}

Tensor binary_scalar(OpId op, const Tensor& a, double b) {
  check_defined(a, op, "input");
  HG_CHECK(is_binary(op), op_name(op), " is not a binary op");
  DType compute = compute_dtype(op, a.dtype());
  // An integer tensor with a fractional (or infinite, or NaN) scalar computes in f32.
  if (!is_floating(compute) && !is_whole(b)) compute = kF32;
  HG_CHECK(compute != kBool, op_name(op), " does not take bool tensors");
  const DType out_dtype = is_comparison(op) ? kBool : compute;
  Tensor out = empty(a.sizes(), {.dtype = out_dtype, .device = a.device()});
  HG_BACKEND_CALL(a.device(), binary_scalar, op, out, a.to(compute), b);
  return out;
}

void binary_(OpId op, const Tensor& a, const Tensor& b) {
  check_defined(a, op, "first input");
  check_defined(b, op, "second input");
  HG_CHECK(is_binary(op) && !is_comparison(op), op_name(op), "_ is not an in-place op");
  check_same_device(op, a, b);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), op_name(op).data());
  HG_CHECK(shape == a.sizes(), op_name(op), "_: the result shape ", shape_to_string(shape),
           " differs from the in-place target's shape ", a.shape_str(),
           "; the second operand must broadcast to the first");
  HG_CHECK(compute_dtype(op, a.dtype()) == a.dtype() && a.dtype() != kBool, op_name(op),
           "_ cannot write its result into a ", a.dtype(), " tensor; use the out-of-place form");
  HG_BACKEND_CALL(a.device(), binary, op, a, a, expand_to(b.to(a.dtype()), shape));
  a.bump_version();
}

void binary_scalar_(OpId op, const Tensor& a, double b) {
  check_defined(a, op, "input");
  HG_CHECK(is_binary(op) && !is_comparison(op), op_name(op), "_ is not an in-place op");
  HG_CHECK(compute_dtype(op, a.dtype()) == a.dtype() && a.dtype() != kBool, op_name(op),
           "_ cannot write its result into a ", a.dtype(), " tensor; use the out-of-place form");
  HG_BACKEND_CALL(a.device(), binary_scalar, op, a, a, b);
  a.bump_version();
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const OpId op = OpId::where;
  check_defined(cond, op, "condition");
  check_defined(a, op, "first input");
  check_defined(b, op, "second input");
  HG_CHECK(cond.dtype() == kBool, "where: the condition must be a bool tensor, got ",
           cond.dtype(), "; build it with a comparison such as hg::ops::binary(OpId::gt, x, y)");
  check_same_device(op, cond, a);
  check_same_device(op, a, b);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"),
                                       b.sizes(), "where");
  const DType compute = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, {.dtype = compute, .device = a.device()});
  HG_BACKEND_CALL(a.device(), where, out, cond.expand(shape), a.to(compute).expand(shape),
                  b.to(compute).expand(shape));
  return out;
}

}  // namespace hg::ops

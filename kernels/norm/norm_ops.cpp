// Argument checks, dtype rules, output allocation and device dispatch for
// layer_norm and rms_norm (kernels/norm/norm.h). The backends get contiguous
// [rows, cols] tensors (see the preconditions there).
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/norm/norm.h"

namespace hg::ops {

namespace {

DType stats_dtype(DType x) { return x == kF64 ? kF64 : kF32; }

// The dtype the kernels see for a weight or bias: its own when it is x's dtype
// or f32, else the type both promote to (f64 for f64 x, f32 otherwise).
DType param_dtype(DType x, DType p) { return p == x || p == kF32 ? p : (x == kF64 ? kF64 : kF32); }

struct NormPlan {
  int64_t rows = 1;
  int64_t cols = 1;
  Tensor x2d;     // [rows, cols] contiguous
  Tensor weight;  // [cols] contiguous, kernel dtype, or undefined
  Tensor bias;    // same
};

NormPlan plan_norm(OpId op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias) {
  HG_CHECK(x.defined(), op_name(op), ": input is an undefined tensor");
  HG_CHECK(is_floating(x.dtype()), op_name(op), " needs a floating input (f32, f16, bf16, f64) but got ", x.dtype(),
           " ", x.shape_str(), "; convert with .to(hg::kF32) first");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  HG_CHECK(k >= 1 && k <= x.dim(), op_name(op), ": normalized_shape ", shape_to_string(normalized_shape),
           " must name 1 to ", x.dim(), " trailing dims of the input ", x.shape_str());
  for (int64_t i = 0; i < k; ++i) {
    HG_CHECK(x.size(x.dim() - k + i) == normalized_shape[static_cast<size_t>(i)], op_name(op), ": normalized_shape ",
             shape_to_string(normalized_shape), " does not match the trailing dims of input ", x.shape_str(),
             "; it must equal input.sizes()[", x.dim() - k, ":]");
  }
  NormPlan plan;
  plan.cols = numel_of(normalized_shape);
  plan.rows = plan.cols == 0 ? 0 : x.numel() / plan.cols;
  const char* names[2] = {"weight", "bias"};
  const Tensor* params[2] = {&weight, &bias};
  Tensor* outs[2] = {&plan.weight, &plan.bias};
  for (int i = 0; i < 2; ++i) {
    const Tensor& p = *params[i];
    if (!p.defined()) continue;
    HG_CHECK(p.sizes() == normalized_shape, op_name(op), ": ", names[i], " has shape ", p.shape_str(),
             " but normalized_shape is ", shape_to_string(normalized_shape), "; they must be equal");
    HG_CHECK(p.device() == x.device(), op_name(op), ": ", names[i], " is on ", p.device(), " but the input is on ",
             x.device(), "; move it with .to(device)");
    HG_CHECK(is_floating(p.dtype()), op_name(op), ": ", names[i], " must be floating, got ", p.dtype());
    *outs[i] = p.to(param_dtype(x.dtype(), p.dtype())).contiguous().view({plan.cols});
  }
  if (plan.weight.defined() && plan.bias.defined() && plan.weight.dtype() != plan.bias.dtype()) {
    plan.bias = plan.bias.to(plan.weight.dtype());  // one parameter dtype per kernel
  }
  plan.x2d = x.contiguous().view({plan.rows, plan.cols});
  return plan;
}

NormForward norm_forward(OpId op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                         const Tensor& bias, double eps) {
  HG_CHECK(std::isfinite(eps) && eps >= 0.0, op_name(op), ": eps must be finite and >= 0, got ", eps);
  const NormPlan plan = plan_norm(op, x, normalized_shape, weight, bias);
  NormForward out;
  out.y = empty(x.sizes(), {.dtype = x.dtype(), .device = x.device()});
  const TensorOptions stats{.dtype = stats_dtype(x.dtype()), .device = x.device()};
  out.rstd = empty({plan.rows}, stats);
  if (op == OpId::layer_norm) out.mean = empty({plan.rows}, stats);
  if (plan.rows == 0 || plan.cols == 0) return out;
  HG_BACKEND_CALL(x.device(), norm_forward, op, out.y.view({plan.rows, plan.cols}), out.mean, out.rstd, plan.x2d,
                  plan.weight, plan.bias, eps);
  return out;
}

NormBackward norm_backward(OpId op, const Tensor& d_y, const Tensor& x, const Shape& normalized_shape,
                           const Tensor& mean, const Tensor& rstd, const Tensor& weight, NormGradMask mask) {
  const OpId fwd = op == OpId::layer_norm_backward ? OpId::layer_norm : OpId::rms_norm;
  HG_CHECK(d_y.defined() && x.defined() && rstd.defined(), op_name(op), ": d_y, x and rstd must be defined");
  HG_CHECK(d_y.sizes() == x.sizes(), op_name(op), ": d_y shape ", d_y.shape_str(), " differs from x shape ",
           x.shape_str(), "; pass the gradient of the forward output");
  HG_CHECK(d_y.device() == x.device() && rstd.device() == x.device(), op_name(op),
           ": d_y, x and the saved statistics must be on one device");
  HG_CHECK(fwd == OpId::rms_norm || mean.defined(), op_name(op), ": layer_norm's backward needs the saved mean");
  const NormPlan plan = plan_norm(fwd, x, normalized_shape, weight, Tensor());
  HG_CHECK(rstd.numel() == plan.rows && (!mean.defined() || mean.numel() == plan.rows), op_name(op),
           ": saved statistics hold ", rstd.numel(), " rows but input ", x.shape_str(), " has ", plan.rows);
  const DType kw = plan.weight.defined() ? plan.weight.dtype() : x.dtype();
  const TensorOptions param_options{.dtype = kw, .device = x.device()};
  NormBackward out;
  if (mask[0]) out.d_x = empty(x.sizes(), {.dtype = x.dtype(), .device = x.device()});
  Tensor dw = mask[1] && weight.defined() ? empty({plan.cols}, param_options) : Tensor();
  Tensor db = mask[2] && fwd == OpId::layer_norm ? empty({plan.cols}, param_options) : Tensor();
  if (plan.rows == 0 || plan.cols == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
  } else {
    const DType sd = stats_dtype(x.dtype());
    HG_BACKEND_CALL(x.device(), norm_backward, fwd, out.d_x.defined() ? out.d_x.view({plan.rows, plan.cols}) : Tensor(),
                    dw, db, d_y.to(x.dtype()).contiguous().view({plan.rows, plan.cols}), plan.x2d,
                    mean.defined() ? mean.to(sd).contiguous() : Tensor(), rstd.to(sd).contiguous(), plan.weight);
  }
  if (dw.defined()) out.d_weight = dw.view(weight.sizes()).to(weight.dtype());
  if (db.defined()) out.d_bias = db.view(normalized_shape);
  return out;
}

}  // namespace

double dtype_epsilon(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return std::numeric_limits<float>::epsilon();
    case DType::F64:
      return std::numeric_limits<double>::epsilon();
    case DType::F16:
      return 0.0009765625;  // 2^-10
    case DType::BF16:
      return 0.0078125;  // 2^-7
    default:
      HG_FAIL("dtype_epsilon: ", dtype, " is not a floating dtype");
  }
}

NormForward layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                       double eps) {
  return norm_forward(OpId::layer_norm, x, normalized_shape, weight, bias, eps);
}

NormForward rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  HG_CHECK(x.defined() && is_floating(x.dtype()), "rms_norm needs a floating input (f32, f16, bf16, f64)",
           x.defined() ? std::string(", got ") + std::string(dtype_name(x.dtype())) : std::string());
  return norm_forward(OpId::rms_norm, x, normalized_shape, weight, Tensor(), eps.value_or(dtype_epsilon(x.dtype())));
}

NormBackward layer_norm_backward(const Tensor& d_y, const Tensor& x, const Shape& normalized_shape, const Tensor& mean,
                                 const Tensor& rstd, const Tensor& weight, NormGradMask mask) {
  return norm_backward(OpId::layer_norm_backward, d_y, x, normalized_shape, mean, rstd, weight, mask);
}

NormBackward rms_norm_backward(const Tensor& d_y, const Tensor& x, const Shape& normalized_shape, const Tensor& rstd,
                               const Tensor& weight, NormGradMask mask) {
  mask[2] = false;  // rms_norm has no bias
  return norm_backward(OpId::rms_norm_backward, d_y, x, normalized_shape, Tensor(), rstd, weight, mask);
}

}  // namespace hg::ops

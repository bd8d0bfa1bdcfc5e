// Differentiable layer_norm and rms_norm.
// Each forward is followed by its backward; closures capture only what they
// use. Kernels: kernels/norm/norm.h.
#include <cstdint>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/node.h"
#include "core/copy.h"
#include "kernels/norm/norm.h"
#include "kernels/ops.h"

namespace hg {

using autograd::any_requires_grad;
using autograd::FunctionNode;
using autograd::Grads;
using autograd::record;
using autograd::SavedTensor;

// ---- normalisation ---------------------------------------------------------------------------

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  HG_AUTOCAST(
      OpId::layer_norm,
      [&](const Tensor& p, const Tensor& w, const Tensor& b) { return layer_norm(p, normalized_shape, w, b, eps); }, x,
      weight, bias);  // Note [Autocast]
  ops::NormForward f = ops::layer_norm(x, normalized_shape, weight, bias, eps);
  if (any_requires_grad({&x, &weight, &bias})) {
    const ops::NormGradMask mask{x.requires_grad(), weight.defined() && weight.requires_grad(),
                                 bias.defined() && bias.requires_grad()};
    record("layer_norm", f.y, {&x, weight.defined() ? &weight : nullptr, bias.defined() ? &bias : nullptr},
           {SavedTensor(x), SavedTensor(f.mean), SavedTensor(f.rstd), SavedTensor(weight)},
           [normalized_shape, mask, bias_dtype = bias.defined() ? bias.dtype() : kF32](
               const Tensor& g, const FunctionNode& self) -> Grads {
             ops::NormBackward b = ops::layer_norm_backward(g, self.saved(0), normalized_shape, self.saved(1),
                                                            self.saved(2), self.saved(3), mask);
             return {b.d_x, b.d_weight, b.d_bias.defined() ? b.d_bias.to(bias_dtype) : Tensor()};
           });
  }
  return f.y;
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  HG_AUTOCAST(
      OpId::rms_norm, [&](const Tensor& p, const Tensor& w) { return rms_norm(p, normalized_shape, w, eps); }, x,
      weight);  // Note [Autocast]
  ops::NormForward f = ops::rms_norm(x, normalized_shape, weight, eps);
  if (any_requires_grad({&x, &weight})) {
    const ops::NormGradMask mask{x.requires_grad(), weight.defined() && weight.requires_grad(), false};
    record("rms_norm", f.y, {&x, weight.defined() ? &weight : nullptr},
           {SavedTensor(x), SavedTensor(f.rstd), SavedTensor(weight)},
           [normalized_shape, mask](const Tensor& g, const FunctionNode& self) -> Grads {
             ops::NormBackward b =
                 ops::rms_norm_backward(g, self.saved(0), normalized_shape, self.saved(1), self.saved(2), mask);
             return {b.d_x, b.d_weight};
           });
  }
  return f.y;
}

}  // namespace hg

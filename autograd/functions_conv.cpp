// Differentiable conv2d, pooling and batch_norm: each forward runs the kernel
// API (kernels/conv/conv.h) and records a node whose backward calls the family's
// backward kernel.
#include "autograd/functions_conv.h"

#include <array>
#include <cstdint>
#include <string>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "kernels/conv/conv.h"

namespace hg {

using autograd::any_requires_grad;
using autograd::FunctionNode;
using autograd::Grads;
using autograd::record;
using autograd::SavedTensor;

namespace {

Conv2dParams resolve(const Tensor& weight, const Conv2dOptions& o) {
  Conv2dParams p;
  p.stride = o.stride;
  p.dilation = o.dilation;
  p.groups = o.groups;
  if (o.padding_same) {
    HG_CHECK(o.stride[0] == 1 && o.stride[1] == 1, "conv2d: padding=\"same\" needs stride 1 (as torch), got stride (",
             o.stride[0], ", ", o.stride[1], "); give explicit padding instead");
    HG_CHECK(weight.defined() && weight.dim() == 4, "conv2d: weight must be 4-D [O, C/groups, KH, KW], got ",
             weight.defined() ? weight.shape_str() : std::string("(undefined)"));
    for (int d = 0; d < 2; ++d) {
      const int64_t total = o.dilation[d] * (weight.size(2 + d) - 1);
      p.pad_lo[d] = total / 2;  // torch puts the odd one on the right
      p.pad_hi[d] = total - total / 2;
    }
  } else {
    p.pad_lo = o.padding;
    p.pad_hi = o.padding;
  }
  return p;
}

Pool2dParams pool_params(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                         std::array<int64_t, 2> dilation, bool ceil_mode, bool count_include_pad) {
  Pool2dParams p;
  p.kernel = kernel;
  p.stride = (stride[0] == 0 && stride[1] == 0) ? kernel : stride;
  p.padding = padding;
  p.dilation = dilation;
  p.ceil_mode = ceil_mode;
  p.count_include_pad = count_include_pad;
  return p;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  HG_AUTOCAST(
      OpId::conv2d, [&](const Tensor& p, const Tensor& q, const Tensor& r) { return conv2d(p, q, r, options); }, x,
      weight, bias);  // Note [Autocast]
  const Conv2dParams p = resolve(weight, options);
  Tensor y = ops::conv2d(x, weight, bias, p);
  if (any_requires_grad({&x, &weight, &bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad(),
               need_b = bias.defined() && bias.requires_grad();
    record("conv2d", y, {&x, &weight, bias.defined() ? &bias : nullptr}, {SavedTensor(x), SavedTensor(weight)},
           [p, need_x, need_w, need_b](const Tensor& g, const FunctionNode& self) -> Grads {
             auto [d_x, d_w, d_b] = ops::conv2d_backward(g, self.saved(0), self.saved(1), p, {need_x, need_w, need_b});
             return {d_x, d_w, d_b};
           });
  }
  return y;
}

Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                  std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, bool ceil_mode) {
  HG_AUTOCAST(
      OpId::max_pool2d, [&](const Tensor& in) { return max_pool2d(in, kernel, stride, padding, dilation, ceil_mode); },
      x);  // Note [Autocast]
  const Pool2dParams p = pool_params(kernel, stride, padding, dilation, ceil_mode, true);
  auto [y, idx] = ops::max_pool2d(x, p);
  if (any_requires_grad({&x})) {
    record("max_pool2d", y, {&x}, {SavedTensor(x), SavedTensor(idx)},
           [p](const Tensor& g, const FunctionNode& self) -> Grads {
             return {ops::max_pool2d_backward(g, self.saved(0), self.saved(1), p)};
           });
  }
  return y;
}

Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                  std::array<int64_t, 2> padding, bool ceil_mode, bool count_include_pad) {
  HG_AUTOCAST(
      OpId::avg_pool2d,
      [&](const Tensor& in) { return avg_pool2d(in, kernel, stride, padding, ceil_mode, count_include_pad); },
      x);  // Note [Autocast]
  const Pool2dParams p = pool_params(kernel, stride, padding, {1, 1}, ceil_mode, count_include_pad);
  Tensor y = ops::avg_pool2d(x, p);
  if (any_requires_grad({&x})) {
    record("avg_pool2d", y, {&x}, {SavedTensor(x)}, [p](const Tensor& g, const FunctionNode& self) -> Grads {
      return {ops::avg_pool2d_backward(g, self.saved(0), p)};
    });
  }
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size) {
  HG_AUTOCAST(
      OpId::adaptive_avg_pool2d, [&](const Tensor& in) { return adaptive_avg_pool2d(in, output_size); },
      x);  // Note [Autocast]
  Tensor y = ops::adaptive_avg_pool2d(x, output_size);
  if (any_requires_grad({&x})) {
    record("adaptive_avg_pool2d", y, {&x}, {SavedTensor(x)}, [](const Tensor& g, const FunctionNode& self) -> Grads {
      return {ops::adaptive_avg_pool2d_backward(g, self.saved(0))};
    });
  }
  return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  HG_AUTOCAST(
      OpId::batch_norm,
      [&](const Tensor& p, const Tensor& q, const Tensor& r) {
        return batch_norm(p, running_mean, running_var, q, r, training, momentum, eps);
      },
      x, weight, bias);  // Note [Autocast]
  ops::BatchNormResult r = ops::batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps);
  if (any_requires_grad({&x, &weight, &bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.defined() && weight.requires_grad(),
               need_b = bias.defined() && bias.requires_grad();
    record("batch_norm", r.y, {&x, weight.defined() ? &weight : nullptr, bias.defined() ? &bias : nullptr},
           {SavedTensor(x), SavedTensor(weight), SavedTensor(r.save_mean), SavedTensor(r.save_rstd)},
           [training, need_x, need_w, need_b, bias_dtype = bias.defined() ? bias.dtype() : kF32](
               const Tensor& g, const FunctionNode& self) -> Grads {
             auto [d_x, d_w, d_b] = ops::batch_norm_backward(g, self.saved(0), self.saved(1), self.saved(2),
                                                             self.saved(3), training, {need_x, need_w, need_b});
             if (d_b.defined()) d_b = d_b.to(bias_dtype);
             return {d_x, d_w, d_b};
           });
  }
  return r.y;
}

}  // namespace hg

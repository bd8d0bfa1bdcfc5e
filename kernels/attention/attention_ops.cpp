// attention_softmax (fwd/bwd): argument checks, the mask in the kernel's form,
// and dispatch to the backend row kernel (kernels/attention/attention.h).
#include "kernels/attention/attention.h"

#include <algorithm>
#include <cstdint>

#include "core/copy.h"
#include "core/shape.h"

namespace hg::ops {

Tensor attention_mask_for_kernel(const Tensor& mask, const Shape& scores_shape, DType scores_dtype) {
  if (!mask.defined()) return Tensor();
  const int64_t r = static_cast<int64_t>(scores_shape.size());
  HG_CHECK(mask.dim() <= r, "scaled_dot_product_attention: attn_mask ", mask.shape_str(),
           " has more dims than the attention scores ", shape_to_string(scores_shape), " ([..., L, S])");
  bool shared = true;  // every batch index reads the same [L, S] mask
  for (int64_t i = 0; i < mask.dim(); ++i) {
    const int64_t d = scores_shape[static_cast<size_t>(r - mask.dim() + i)];
    HG_CHECK(mask.size(i) == d || mask.size(i) == 1, "scaled_dot_product_attention: attn_mask ", mask.shape_str(),
             " is not broadcastable to the attention scores ", shape_to_string(scores_shape),
             " ([..., L, S] with L queries and S keys)");
    if (i < mask.dim() - 2 && mask.size(i) != 1) shared = false;
  }
  HG_CHECK(mask.dtype() == kBool || is_floating(mask.dtype()), "scaled_dot_product_attention: attn_mask must be ",
           "bool (true = attend) or floating (added to the scores), got ", mask.dtype());
  Shape target = scores_shape;
  if (shared) target = Shape{scores_shape[static_cast<size_t>(r - 2)], scores_shape[static_cast<size_t>(r - 1)]};
  const DType add_dtype = scores_dtype == kF64 ? kF64 : kF32;
  Tensor m = mask.dtype() == kBool ? mask : mask.to(add_dtype);
  const Tensor src = shared && m.dim() > 2 ? m.reshape(Shape(m.sizes().end() - 2, m.sizes().end())) : m;
  Tensor out = empty(target, {.dtype = m.dtype(), .device = m.device()});
  copy_into(out, src.expand(target));
  return out;
}

namespace {
AttnSoftmaxParams with_shape(AttnSoftmaxParams p, const Tensor& scores, const Tensor& kernel_mask) {
  p.cols = scores.size(-1);
  p.q_len = scores.size(-2);
  p.rows = p.cols == 0 ? 0 : scores.numel() / p.cols;
  if (kernel_mask.defined()) {
    HG_CHECK(kernel_mask.device() == scores.device(), "scaled_dot_product_attention: attn_mask is on ",
             kernel_mask.device(), " but the scores are on ", scores.device());
    p.mask_kind = kernel_mask.dtype() == kBool ? AttnMaskKind::kBool : AttnMaskKind::kAdditive;
    p.mask = kernel_mask.data_ptr();
    p.mask_rows = kernel_mask.numel() / std::max<int64_t>(p.cols, 1);
    p.mask_f64 = kernel_mask.dtype() == kF64;
  } else {
    p.mask_kind = AttnMaskKind::kNone;
    p.mask = nullptr;
  }
  return p;
}
}  // namespace

Tensor attention_softmax(const Tensor& scores, const Tensor& kernel_mask, AttnSoftmaxParams params, Tensor* dropped) {
  HG_CHECK(scores.dim() >= 2 && is_floating(scores.dtype()),
           "attention_softmax: scores must be floating [..., L, S], got ", scores.shape_str(), " ", scores.dtype());
  const Tensor s = scores.contiguous();
  const AttnSoftmaxParams p = with_shape(params, s, kernel_mask);
  Tensor y = empty(s.sizes(), {.dtype = s.dtype(), .device = s.device()});
  Tensor pd;
  if (p.dropout_p > 0.0f) pd = empty(s.sizes(), {.dtype = s.dtype(), .device = s.device()});
#if defined(HG_WITH_CUDA)
  if (s.is_cuda()) {
    cuda::attention_softmax(p, s, y, pd);
  } else {
    cpu::attention_softmax(p, s, y, pd);
  }
#else
  cpu::attention_softmax(p, s, y, pd);
#endif
  if (dropped != nullptr) *dropped = pd.defined() ? pd : y;
  return y;
}

Tensor attention_softmax_backward(const Tensor& d_p, const Tensor& y, const Tensor& kernel_mask,
                                  AttnSoftmaxParams params) {
  HG_CHECK(d_p.sizes() == y.sizes() && d_p.device() == y.device(), "attention_softmax_backward: d_p ", d_p.shape_str(),
           " and y ", y.shape_str(), " differ");
  const Tensor g = d_p.dtype() == y.dtype() ? d_p.contiguous() : d_p.to(y.dtype()).contiguous();
  const Tensor yc = y.contiguous();
  const AttnSoftmaxParams p = with_shape(params, yc, kernel_mask);
  Tensor d_s = empty(yc.sizes(), {.dtype = yc.dtype(), .device = yc.device()});
#if defined(HG_WITH_CUDA)
  if (yc.is_cuda()) {
    cuda::attention_softmax_backward(p, g, yc, d_s);
  } else {
    cpu::attention_softmax_backward(p, g, yc, d_s);
  }
#else
  cpu::attention_softmax_backward(p, g, yc, d_s);
#endif
  return d_s;
}

}  // namespace hg::ops

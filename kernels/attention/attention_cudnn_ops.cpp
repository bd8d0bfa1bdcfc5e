// Support rules, output allocation and dispatch for the cuDNN attention path
// (kernels/attention/attention_cudnn.h). Forward and backward call cuDNN's fused graphs
// (kernels/attention/attention_cudnn.cpp).
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/profiler.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/dispatch.h"
#include "kernels/attention/flash_attention.h"

namespace hg::ops {

std::string cudnn_attention_unsupported_reason(const Tensor& q, const Tensor& k, const Tensor& v, bool has_mask,
                                               double dropout_p) {
  if (has_mask) return "an attention mask is not supported by the cuDNN path";
  if (dropout_p != 0.0) return "dropout is not supported by the cuDNN path";
  if (!q.defined() || !k.defined() || !v.defined()) return "q, k and v must be defined";
  if (!q.device().is_cuda()) return "the cuDNN path runs on CUDA devices, q is on " + q.device().str();
#if !defined(HG_WITH_CUDA)
  return "this build has no CUDA backend";
#else
  const std::string shapes = "q " + q.shape_str() + ", k " + k.shape_str() + ", v " + v.shape_str();
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.sizes() != v.sizes() || q.size(0) != k.size(0) ||
      q.size(1) != k.size(1) || q.size(3) != k.size(3))
    return "the cuDNN path needs q [B, H, L, D] and k, v [B, H, S, D], got " + shapes;
  if (q.size(3) != 64 && q.size(3) != 128) return "the cuDNN path supports head dims 64 and 128, got " + shapes;
  if (q.size(2) < 1 || k.size(2) < 1) return "the cuDNN path needs L, S >= 1, got " + shapes;
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype() || (q.dtype() != kF16 && q.dtype() != kBF16))
    return "the cuDNN path needs one dtype, f16 or bf16, got " + std::string(dtype_name(q.dtype())) + ", " +
           std::string(dtype_name(k.dtype())) + ", " + std::string(dtype_name(v.dtype()));
  if (q.device() != k.device() || q.device() != v.device()) return "q, k and v are on different devices";
  for (const Tensor* t : {&q, &k, &v}) {
    if (!flash_attention_rows_ok(*t))
      return "the cuDNN path reads q, k, v in place and needs the head dim contiguous and rows 16-byte aligned, got " +
             shapes;
  }
  if (q.size(0) * q.size(1) == 0) return "the cuDNN path needs B * H >= 1, got " + shapes;
  return cuda::cudnn_attention_device_reason();
#endif
}

FlashForward cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
  const std::string why = cudnn_attention_unsupported_reason(q, k, v, false, 0.0);
  HG_CHECK(why.empty(), "cudnn_attention_forward: ", why);
#if defined(HG_WITH_CUDA)
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k.size(2), d = q.size(3);
  const TensorOptions opts{.dtype = q.dtype(), .device = q.device()};
  FlashForward f;
  // heads last ([B, L, H, D] storage), as the flash path returns it: merging heads is a view
  f.out = empty({b, l, h, d}, opts).transpose(1, 2);
  f.lse = empty({b, h, l}, {.dtype = kF32, .device = q.device()});
  double pairs = 0;
  for (int64_t i = 0; i < l; ++i) pairs += static_cast<double>(causal ? std::min<int64_t>(i + 1, s) : s);
  profiler::declare_call_flops(4.0 * pairs * static_cast<double>(b * h * d));
  const profiler::BackendCallScope call(false, "cudnn_attention_forward",
                                        [&] { return detail::operand_bytes(f.out, f.lse, q, k, v); });
  cuda::cudnn_attention_forward(f.out, f.lse, q, k, v, scale, causal);
  return f;
#else
  (void)scale;
  (void)causal;
  HG_FAIL("cudnn_attention_forward: unreachable without CUDA");
#endif
}

FlashBackward cudnn_attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, double scale, bool causal) {
  const char* what = "cudnn_attention_backward";
  const std::string why = cudnn_attention_unsupported_reason(q, k, v, false, 0.0);
  HG_CHECK(why.empty(), what, ": ", why);
  HG_CHECK(d_out.defined() && out.defined() && lse.defined(), what, ": d_out, out and lse must be defined");
  HG_CHECK(d_out.sizes() == q.sizes() && out.sizes() == q.sizes(), what, ": d_out ", d_out.shape_str(), " and out ",
           out.shape_str(), " must have q's shape ", q.shape_str());
  HG_CHECK(d_out.device() == q.device() && out.device() == q.device() && lse.device() == q.device(), what,
           ": d_out, out and lse must be on q's device ", q.device());
#if defined(HG_WITH_CUDA)
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k.size(2), d = q.size(3);
  HG_CHECK(lse.sizes() == Shape({b, h, l}), what, ": lse ", lse.shape_str(), " must be [B, H, L] = [", b, ", ", h, ", ",
           l, "] (the forward's lse)");
  // d_out and out in place when the graph can read their strides, else one
  // aligned copy (clone: contiguous() keeps misaligned rows)
  const auto rows = [&](const Tensor& x) {
    const Tensor t = x.to(q.dtype());
    return flash_attention_rows_ok(t) ? t : t.clone();
  };
  const Tensor g = rows(d_out), o = rows(out), stats = lse.to(kF32).contiguous();
  const TensorOptions opts{.dtype = q.dtype(), .device = q.device()};
  // heads last ([B, N, H, D] storage), as the flash path returns them
  const auto heads_last = [&](const Tensor& x) {
    return empty({x.size(0), x.size(2), x.size(1), x.size(3)}, opts).transpose(1, 2);
  };
  FlashBackward r{heads_last(q), heads_last(k), heads_last(v)};
  double pairs = 0;
  for (int64_t i = 0; i < l; ++i) pairs += static_cast<double>(causal ? std::min<int64_t>(i + 1, s) : s);
  profiler::declare_call_flops(8.0 * pairs * static_cast<double>(b * h * d));  // dV dP dQ dK, as flash declares
  const profiler::BackendCallScope call(false, what,
                                        [&] { return detail::operand_bytes(r.dq, r.dk, r.dv, g, q, k, v, o, stats); });
  (void)cuda::cudnn_attention_backward(r.dq, r.dk, r.dv, g, q, k, v, o, stats, scale, causal);
  return r;
#else
  (void)scale;
  (void)causal;
  HG_FAIL(what, ": unreachable without CUDA");
#endif
}

}  // namespace hg::ops

// Argument checks, output allocation and device dispatch for the fused
// attention kernels (kernels/attention/flash_attention.h). The CPU backend gets
// contiguous [B*H, L or S, D] tensors; the CUDA backend gets [B, H, L or S, D]
// tensors through their strides (copied only when flash_attention_rows_ok
// fails).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/profiler.h"
#include "kernels/dispatch.h"
#include "kernels/attention/flash_attention.h"
#include "runtime/cpu/threads.h"

namespace hg::ops {

namespace {

bool supported_dtype(const Tensor& q) {
  const DType t = q.dtype();
  if (q.device().is_cpu()) return t == kF32 || t == kF64 || t == kF16 || t == kBF16;
  return t == kF16 || t == kBF16;
}

// Checks q, k, v as the kernels need them; `what` names the caller.
void check_qkv(const char* what, const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  HG_CHECK(q.defined() && k.defined() && v.defined(), what, ": q, k and v must be defined tensors");
  const std::string shapes = "q " + q.shape_str() + ", k " + k.shape_str() + ", v " + v.shape_str();
  HG_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, what, ": wants q [B, H, L, D] and k, v [B, H, S, D], got ",
           shapes);
  HG_CHECK(k.sizes() == v.sizes(), what, ": k and v must have one shape [B, H, S, D], got ", shapes);
  HG_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3), what,
           ": q [B, H, L, D] and k, v [B, H, S, D] must agree in B, H and D, got ", shapes);
  HG_CHECK(q.size(3) == 64 || q.size(3) == 128, what, ": head dim D = ", q.size(3),
           " is not supported by the fused kernel (D must be 64 or 128), got ", shapes,
           "; use the math path of scaled_dot_product_attention");
  HG_CHECK(q.size(2) >= 1 && k.size(2) >= 1, what, ": L and S must be >= 1, got ", shapes);
  HG_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), what, ": q, k, v must share one dtype, got ", q.dtype(),
           ", ", k.dtype(), ", ", v.dtype(), " (", shapes, ")");
  HG_CHECK(q.device() == k.device() && q.device() == v.device(), what, ": q, k, v must be on one device, got ",
           q.device(), ", ", k.device(), ", ", v.device());
  HG_CHECK(supported_dtype(q), what, ": dtype ", q.dtype(), " on ", q.device(),
           " is not supported (CUDA: f16, bf16; CPU: f32, f64, f16, bf16), got ", shapes,
           "; convert with .to(hg::kF16) or use the math path");
  HG_CHECK(std::isfinite(scale), what, ": scale must be finite, got ", scale);
}

DType lse_dtype(DType t) { return t == kF64 ? kF64 : kF32; }

// Query-key pairs the attention computes (the profiler's FLOPs): l x s, or
// with the causal mask (top-left aligned: query i sees keys 0..i) the lower triangle.
double attention_pairs(int64_t bh, int64_t l, int64_t s, bool causal) {
  double pairs = 0;
  if (!causal) {
    pairs = static_cast<double>(l) * static_cast<double>(s);
  } else {
    for (int64_t i = 0; i < l; ++i) pairs += static_cast<double>(std::min<int64_t>(i + 1, s));
  }
  return pairs * static_cast<double>(bh);
}

#if defined(HG_WITH_CUDA)
// A [B, H, N, D] tensor stored as [B, N, H, D] (the CUDA kernels write any
// strides): the layout the heads came from in a [B, T, H * D] projection, so
// merging heads back (transpose(1, 2) then a view) needs no copy, and the
// gradient of the split-heads view is a view too.
Tensor heads_last(const Shape& sizes, const TensorOptions& opts) {
  return empty({sizes[0], sizes[2], sizes[1], sizes[3]}, opts).transpose(1, 2);
}

// The CUDA kernels' view of x: itself when they can read its strides, else a
// fresh (aligned) contiguous copy; clone, since contiguous() returns a
// contiguous view with misaligned rows unchanged.
Tensor cuda_rows(const Tensor& x) { return flash_attention_rows_ok(x) ? x : x.clone(); }
#endif

}  // namespace

bool flash_attention_rows_ok(const Tensor& x) {
  if (!x.defined() || x.dim() != 4 || x.stride(3) != 1) return false;
  const int64_t bytes = static_cast<int64_t>(dtype_size(x.dtype()));
  if (bytes != 2 || reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0) return false;
  for (int64_t d = 0; d < 3; ++d) {
    if ((x.stride(d) * bytes) % 16 != 0 && x.size(d) > 1) return false;
  }
  return (x.size(3) * bytes) % 16 == 0;
}

bool flash_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v, bool has_mask, double dropout_p) {
  if (has_mask || dropout_p != 0.0) return false;
  if (!q.defined() || !k.defined() || !v.defined()) return false;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.sizes() != v.sizes()) return false;
  if (q.size(0) != k.size(0) || q.size(1) != k.size(1) || q.size(3) != k.size(3)) return false;
  if (q.size(3) != 64 && q.size(3) != 128) return false;
  if (q.size(2) < 1 || k.size(2) < 1) return false;
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) return false;
  if (q.device() != k.device() || q.device() != v.device()) return false;
  return supported_dtype(q);
}

FlashForward flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
  check_qkv("flash_attention_forward", q, k, v, scale);
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k.size(2), d = q.size(3);
  FlashForward f;
  f.out = empty(q.sizes(), {.dtype = q.dtype(), .device = q.device()});
  f.lse = empty({b, h, l}, {.dtype = lse_dtype(q.dtype()), .device = q.device()});
  const int64_t bh = b * h;
  if (bh == 0) return f;
  profiler::declare_call_flops(4.0 * attention_pairs(bh, l, s, causal) * static_cast<double>(d));  // QK^T, PV
  const profiler::BackendCallScope call(q.device().is_cpu(), "flash_attention_forward",
                                        [&] { return detail::operand_bytes(f.out, f.lse, q, k, v); });
#if defined(HG_WITH_CUDA)
  if (q.device().is_cuda()) {
    f.out = heads_last(q.sizes(), {.dtype = q.dtype(), .device = q.device()});
    cuda::flash_attention_forward(f.out, f.lse, cuda_rows(q), cuda_rows(k), cuda_rows(v), scale, causal);
    return f;
  }
#endif
  ::hg::detail::sync_cpu_threads();
  cpu::flash_attention_forward(f.out.view({bh, l, d}), f.lse.view({bh, l}), q.contiguous().view({bh, l, d}),
                               k.contiguous().view({bh, s, d}), v.contiguous().view({bh, s, d}), scale, causal);
  return f;
}

FlashBackward flash_attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, double scale, bool causal) {
  const char* what = "flash_attention_backward";
  check_qkv(what, q, k, v, scale);
  HG_CHECK(d_out.defined() && out.defined() && lse.defined(), what, ": d_out, out and lse must be defined");
  HG_CHECK(d_out.sizes() == q.sizes() && out.sizes() == q.sizes(), what, ": d_out ", d_out.shape_str(), " and out ",
           out.shape_str(), " must have q's shape ", q.shape_str());
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k.size(2), d = q.size(3);
  HG_CHECK(lse.sizes() == Shape({b, h, l}), what, ": lse ", lse.shape_str(), " must be [B, H, L] = [", b, ", ", h, ", ",
           l, "] (the forward's lse)");
  HG_CHECK(d_out.device() == q.device() && out.device() == q.device() && lse.device() == q.device(), what,
           ": d_out, out and lse must be on q's device ", q.device());
  FlashBackward g;
  const TensorOptions opts{.dtype = q.dtype(), .device = q.device()};
  g.dq = empty(q.sizes(), opts);
  g.dk = empty(k.sizes(), opts);
  g.dv = empty(v.sizes(), opts);
  const int64_t bh = b * h;
  if (bh == 0) return g;
  profiler::declare_call_flops(8.0 * attention_pairs(bh, l, s, causal) * static_cast<double>(d));  // dV dP dQ dK
  const profiler::BackendCallScope call(q.device().is_cpu(), "flash_attention_backward", [&] {
    return detail::operand_bytes(g.dq, g.dk, g.dv, d_out, q, k, v, out, lse);
  });
#if defined(HG_WITH_CUDA)
  if (q.device().is_cuda()) {
    g.dq = heads_last(q.sizes(), opts);
    g.dk = heads_last(k.sizes(), opts);
    g.dv = heads_last(v.sizes(), opts);
    cuda::flash_attention_backward(g.dq, g.dk, g.dv, cuda_rows(d_out.to(q.dtype())), cuda_rows(q), cuda_rows(k),
                                   cuda_rows(v), cuda_rows(out.to(q.dtype())), lse.to(kF32).contiguous(), scale,
                                   causal);
    return g;
  }
#endif
  ::hg::detail::sync_cpu_threads();
  cpu::flash_attention_backward(g.dq.view({bh, l, d}), g.dk.view({bh, s, d}), g.dv.view({bh, s, d}),
                                d_out.to(q.dtype()).contiguous().view({bh, l, d}), q.contiguous().view({bh, l, d}),
                                k.contiguous().view({bh, s, d}), v.contiguous().view({bh, s, d}),
                                out.to(q.dtype()).contiguous().view({bh, l, d}),
                                lse.to(lse_dtype(q.dtype())).contiguous().view({bh, l}), scale, causal);
  return g;
}

}  // namespace hg::ops

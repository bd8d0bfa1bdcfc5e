// LayerNorm and RMSNorm over the trailing dims, forward and backward (floor 1).
//
//   NormForward f = hg::ops::layer_norm(x, {768}, weight, bias, 1e-5);  // f.y, f.mean, f.rstd
//   NormBackward b = hg::ops::layer_norm_backward(d_y, x, {768}, f.mean, f.rstd, weight,
//                                                 {true, true, true});  // d_x, d_weight, d_bias
//   NormForward r = hg::ops::rms_norm(x, {768}, weight, std::nullopt);  // eps: finfo(x).eps
//
// x is viewed as [rows, cols] with cols = the product of normalized_shape
// (its trailing dims); weight and bias are normalized_shape (either may be
// undefined). With N = cols:
//
//   layer_norm  mean = sum_c x_c / N,  var = sum_c (x_c - mean)^2 / N (biased),
//               rstd = 1 / sqrt(var + eps),  xhat_c = (x_c - mean) * rstd,
//               y_c = xhat_c * w_c + b_c
//   rms_norm    rstd = 1 / sqrt(sum_c x_c^2 / N + eps),  xhat_c = x_c * rstd,
//               y_c = xhat_c * w_c                        (PyTorch's rms_norm)
//
//   backward, with g_c = d_y_c * w_c (d_y_c without a weight):
//   layer_norm  d_x_c = rstd * (g_c - mean_c(g) - xhat_c * mean_c(g * xhat))
//   rms_norm    d_x_c = rstd * (g_c - xhat_c * mean_c(g * xhat))
//   both        d_w_c = sum_rows d_y_c * xhat_c,  d_b_c = sum_rows d_y_c
//
// Precision contract: x, y, d_y, d_x share x's dtype (f32, f16, bf16, f64);
// weight and bias are either x's dtype or f32 (fp32 weights under 16-bit
// activations, as in AMP O2 without masters); d_w and d_b come back in the
// weight's dtype. mean and rstd are computed in fp32 (f64 for f64 inputs) with
// two passes over the row (mean first, then the centred sum of squares: no
// cancellation), kept for the backward as [rows] tensors of that dtype, and
// every output is rounded once. d_w and d_b are reduced over rows in a fixed
// order (row chunks, then the chunk partials), so they are bit-identical from
// run to run: no float atomics.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "core/macros.h"
#include "core/tensor.h"
#include "kernels/op_list.h"

namespace hg::ops {

struct NormForward {
  Tensor y;     // x's shape and dtype
  Tensor mean;  // [rows], f32 (f64 for f64 x); undefined for rms_norm
  Tensor rstd;  // [rows], f32 (f64 for f64 x)
};

struct NormBackward {
  Tensor d_x;       // x's shape and dtype (when asked for)
  Tensor d_weight;  // weight's shape and dtype (when asked for and weight is defined)
  Tensor d_bias;    // normalized_shape (layer_norm, when asked for), in the dtype the kernel
                    // used for the parameters: weight's when it is x's or f32, else f32
                    // (f64 for f64 x); x's dtype without a weight. Callers cast it to the bias's.
};

// Which gradients to compute: d_x, d_weight, d_bias.
using NormGradMask = std::array<bool, 3>;

NormForward layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                       double eps = 1e-5);
// eps defaults to the machine epsilon of x's dtype, like torch.nn.functional.rms_norm.
NormForward rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                     std::optional<double> eps = std::nullopt);

// weight is the forward's (or undefined); mean and rstd are the forward's
// statistics. The bias is not needed: d_bias = sum_rows d_y.
NormBackward layer_norm_backward(const Tensor& d_y, const Tensor& x, const Shape& normalized_shape, const Tensor& mean,
                                 const Tensor& rstd, const Tensor& weight, NormGradMask mask);
NormBackward rms_norm_backward(const Tensor& d_y, const Tensor& x, const Shape& normalized_shape, const Tensor& rstd,
                               const Tensor& weight, NormGradMask mask);

// The machine epsilon of a floating dtype (torch.finfo(dtype).eps).
double dtype_epsilon(DType dtype);

}  // namespace hg::ops

// The per-element math both backends share (in acc_t: float, double for f64).
namespace hg::norm_math {
// d_x_c from g_c = d_y_c * w_c, xhat_c and the row's rstd, mean(g), mean(g * xhat).
template <typename A>
HG_HOST_DEVICE inline A d_x(bool rms, A g, A xhat, A rstd, A mean_g, A mean_g_xhat) {
  return rms ? rstd * (g - xhat * mean_g_xhat) : rstd * ((g - mean_g) - xhat * mean_g_xhat);
}

// The row chunks of the d_weight/d_bias column reduction, shared by both
// backends: stage 1 sums each chunk of consecutive rows per column (rows in
// order), stage 2 sums the chunk partials per column (chunks in order). About
// 32 rows per chunk, at most 512 chunks, and at most 2^22 partial values per
// gradient (16 MiB of fp32 workspace), so the order depends only on the shape.
inline int64_t norm_column_chunks(int64_t rows, int64_t cols) {
  int64_t chunks = (rows + 31) / 32;
  const int64_t by_memory = (int64_t{1} << 22) / (cols > 0 ? cols : 1);
  if (chunks > by_memory) chunks = by_memory;
  if (chunks > 512) chunks = 512;
  return chunks < 1 ? 1 : chunks;
}
}  // namespace hg::norm_math

// The backend kernels (hg::cpu:: in kernels/norm/norm_cpu.cpp, hg::cuda:: in
// kernels/norm/norm.cu). Preconditions, established by kernels/norm/norm_ops.cpp:
// one device; x, y, d_y, d_x contiguous [rows, cols] of one floating dtype T
// (rows, cols >= 1); weight/bias/d_weight/d_bias contiguous [cols] of one dtype
// W in {T, f32} (undefined when absent or not wanted); mean (undefined for
// rms) and rstd contiguous [rows] in acc_t<T>'s dtype. op is layer_norm or
// rms_norm. The parameter dtype W is that of the first defined of weight,
// bias, d_weight, d_bias (norm_param_dtype).
// clang-format off
#define HG_DECLARE_NORM_KERNELS                                                                        \
  void norm_forward(OpId op, const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,  \
                    const Tensor& weight, const Tensor& bias, double eps);                             \
  /* d_x, d_weight, d_bias: each may be undefined (not wanted) */                                      \
  void norm_backward(OpId op, const Tensor& d_x, const Tensor& d_weight, const Tensor& d_bias,          \
                     const Tensor& d_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,       \
                     const Tensor& weight);
// clang-format on

namespace hg::detail {
inline DType norm_param_dtype(std::initializer_list<const Tensor*> params, DType fallback) {
  for (const Tensor* p : params) {
    if (p->defined()) return p->dtype();
  }
  return fallback;
}

// Runs fn(T{}, W{}) for x's dtype T and the parameter dtype W in {T, f32}:
// the dtype dispatch of both backends.
template <typename Fn>
void dispatch_norm(OpId op, DType x_dtype, DType w_dtype, Fn&& fn) {
  dispatch_floating(x_dtype, op_name(op), [&](auto t_tag) {
    using T = decltype(t_tag);
    if (w_dtype == x_dtype) {
      fn(t_tag, T{});
    } else {
      HG_CHECK(w_dtype == kF32, op_name(op), ": weight dtype ", w_dtype, " must be ", x_dtype, " or f32");
      fn(t_tag, float{});
    }
  });
}

// t's data as P*, or nullptr for an undefined (absent) tensor.
template <typename P>
P* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<P*>(t.data_ptr()) : nullptr;
}

// The buffer preconditions of the norm backends that guard memory, checked by
// both backends with HG_CHECK (always on): a short weight or statistics
// buffer would be read past its end.
inline void check_norm_buffers(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                               const Tensor& bias) {
  HG_CHECK(x.dim() == 2 && x.is_contiguous() && x.size(0) >= 1 && x.size(1) >= 1,
           "norm backend: wants a contiguous [rows, cols] x, got ", x.shape_str());
  const int64_t rows = x.size(0), cols = x.size(1);
  HG_CHECK(rstd.defined() && rstd.is_contiguous() && rstd.numel() == rows &&
               (!mean.defined() || (mean.is_contiguous() && mean.numel() == rows && mean.dtype() == rstd.dtype())),
           "norm backend: mean/rstd must be contiguous [", rows, "], got rstd ", rstd.shape_str());
  for (const Tensor* p : {&weight, &bias}) {
    HG_CHECK(
        !p->defined() || (p->is_contiguous() && p->numel() == cols && (p->dtype() == x.dtype() || p->dtype() == kF32)),
        "norm backend: weight/bias must be contiguous [", cols, "] in x's dtype or f32, got ",
        p->defined() ? p->shape_str() : std::string("undefined"));
  }
}
}  // namespace hg::detail

namespace hg::cpu {
HG_DECLARE_NORM_KERNELS
}  // namespace hg::cpu

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
HG_DECLARE_NORM_KERNELS
}  // namespace hg::cuda
#endif

// Softmax, log-softmax and fused cross-entropy over the last dim (floor 1).
//
//   Tensor y = hg::ops::softmax(x);                 // any rank >= 1, last dim
//   Tensor d_x = hg::ops::softmax_backward(d_y, y); // y = the forward output
//   Tensor loss = hg::ops::cross_entropy(logits /*[N, C]*/, targets /*[N] i64*/);
//   Tensor d_logits = hg::ops::cross_entropy_backward(d_loss, logits, targets);
//   // padded vocabulary: only the first 50257 of 50304 columns are classes
//   CrossEntropyOutput out = hg::ops::cross_entropy_fused(logits, targets, -100, 0.0, 50257);
//   Tensor d = hg::ops::cross_entropy_backward(d_loss, logits, targets, -100, 0.0, 50257, out.row_stats);
//
// Precision contract: 16-bit inputs are widened to float, every row runs in
// float (double for f64) with its max subtracted, so logits of +-1000 in fp16
// stay finite; outputs are rounded once to the input dtype. The loss of
// cross_entropy is f32 for f32/f16/bf16 logits and f64 for f64 logits (so
// gradcheck can run in double). NaN anywhere in a row makes that row NaN.
//
// cross_entropy follows PyTorch (reduction='mean'): with p = softmax(logits),
// eps = label_smoothing and V the rows whose target is not ignore_index,
//   loss_i = (1 - eps) * -log p[i, t_i] + eps * mean_c(-log p[i, c])
//   loss   = sum_{i in V} loss_i / |V|        (NaN when V is empty, like torch)
//   d_logits[i, c] = (p[i, c] - (1 - eps) * [c == t_i] - eps / C) * d_loss / |V|
//                    (zero rows for ignored targets)
// With `classes` = K < C (a padded vocabulary), only the first K columns are
// classes: p is the softmax over them, C reads K above (eps / K), the padding
// columns get gradient 0, and a target must be in [0, K).
// The forward reads the logits once (an online max and sum of exponentials
// per row, the logits' own dtype: a 16-bit row is widened in registers, no f32
// copy) and can return the per-row statistics (m_i, log s_i); the backward
// given them reads the logits once more and writes the gradient
// exp((x - m) - log s) - target in one pass (x - m first: exact for nearby
// values, so logits of +-1000 keep their precision).
// A target outside [0, C) other than ignore_index is an error: the CPU backend
// throws at once; the CUDA backend sets the device-side error flag
// (kernels/cuda/device_error.h), reported by hg::cuda::check_device_errors at
// the next sync point. Until then the loss (or that row's gradient) is NaN.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "kernels/op_list.h"

namespace hg::ops {

// softmax / log_softmax over `dim` (default the last), output in x's dtype.
// Rank 0 is an error (there is no dim); empty tensors give empty results. The
// last dim (or any dim after which only size-1 dims follow) runs the row
// kernels; another dim runs the column kernels over x viewed as contiguous
// [outer, n, inner] (no transpose copy).
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

// d_x = y * (d_y - sum_dim(d_y * y))    (y = softmax(x, dim))
Tensor softmax_backward(const Tensor& d_y, const Tensor& y, int64_t dim = -1);
// d_x = d_y - exp(y) * sum_dim(d_y)     (y = log_softmax(x, dim))
Tensor log_softmax_backward(const Tensor& d_y, const Tensor& y, int64_t dim = -1);

inline constexpr int64_t kDefaultIgnoreIndex = -100;

// logits [N, C] floating, targets [N] i64 (or logits [C] with a rank-0
// target); returns the rank-0 mean loss (f32, f64 for f64 logits).
// classes: the number of real classes, the first columns (0 = all C); the
// columns after them are padding (see above).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = kDefaultIgnoreIndex,
                     double label_smoothing = 0.0, int64_t classes = 0);

// The loss and the per-row statistics [N, 2] = (max m_i, log s_i) over the
// real classes (the loss dtype; 0 for ignored rows) that
// cross_entropy_backward takes to skip its statistics pass.
struct CrossEntropyOutput {
  Tensor loss;
  Tensor row_stats;
};
CrossEntropyOutput cross_entropy_fused(const Tensor& logits, const Tensor& targets,
                                       int64_t ignore_index = kDefaultIgnoreIndex, double label_smoothing = 0.0,
                                       int64_t classes = 0);

// d_loss is rank 0 (any floating dtype); returns d_logits in logits' dtype.
// row_stats: the forward's (cross_entropy_fused), or undefined to recompute them.
Tensor cross_entropy_backward(const Tensor& d_loss, const Tensor& logits, const Tensor& targets,
                              int64_t ignore_index = kDefaultIgnoreIndex, double label_smoothing = 0.0,
                              int64_t classes = 0, const Tensor& row_stats = Tensor());

}  // namespace hg::ops

// The backend kernels (hg::cpu:: in kernels/cpu/, hg::cuda:: in kernels/cuda/).
// Preconditions, established by kernels/softmax/softmax_ops.cpp: every tensor on one
// device and contiguous; x, y, d_y, d_x share a dtype and are viewed as
// [rows, cols] with cols = the last dim (softmax_dim: as [outer, n, inner]
// with outer * n * inner elements, reducing over n); logits/d_logits are [N, C] (C >= 1),
// targets [N] i64; loss and d_loss are rank 0 in the accumulation dtype (f32,
// or f64 for f64 logits); classes in [1, C] (the real classes, the first
// columns); row_stats [N, 2] in the accumulation dtype (written by the forward;
// undefined in the backward when the forward's are not at hand).
// clang-format off
#define HG_DECLARE_SOFTMAX_KERNELS                                                          \
  /* op: softmax or log_softmax */                                                         \
  void softmax(OpId op, const Tensor& y, const Tensor& x);                                 \
  /* op: softmax_backward or log_softmax_backward; y is the forward output */              \
  void softmax_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& y);   \
  void cross_entropy(const Tensor& loss, const Tensor& row_stats, const Tensor& logits,      \
                     const Tensor& targets, int64_t ignore_index, double label_smoothing,  \
                     int64_t classes);                                                     \
  void cross_entropy_backward(const Tensor& d_logits, const Tensor& d_loss,                \
                              const Tensor& logits, const Tensor& targets,                 \
                              const Tensor& row_stats, int64_t ignore_index,                 \
                              double label_smoothing, int64_t classes);                    \
  /* over the middle dim of contiguous [outer, n, inner] tensors (inner > 1): */           \
  void softmax_dim(OpId op, const Tensor& y, const Tensor& x, int64_t outer, int64_t n,     \
                   int64_t inner);                                                         \
  void softmax_dim_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& y, \
                            int64_t outer, int64_t n, int64_t inner);
// clang-format on

namespace hg::detail {
// The preconditions of the cross-entropy backends that guard memory: checked
// by both backends with HG_CHECK (always on), since a backend called with a
// short targets or d_logits buffer would read or write past it.
inline void check_cross_entropy_buffers(const Tensor& logits, const Tensor& targets, int64_t classes,
                                        const Tensor& row_stats, const Tensor& d_logits = Tensor()) {
  HG_CHECK(logits.dim() == 2 && logits.is_contiguous() && targets.dtype() == kI64 && targets.is_contiguous() &&
               targets.numel() == logits.size(0),
           "cross_entropy backend: wants contiguous logits [N, C] and contiguous i64 targets [N], got logits ",
           logits.shape_str(), " and ", targets.dtype(), " targets ", targets.shape_str());
  HG_CHECK(!d_logits.defined() || (d_logits.sizes() == logits.sizes() && d_logits.is_contiguous() &&
                                   d_logits.dtype() == logits.dtype()),
           "cross_entropy_backward backend: d_logits must be contiguous with logits' shape and dtype, got ",
           d_logits.dtype(), " ", d_logits.shape_str());
  HG_CHECK(classes >= 1 && classes <= logits.size(1), "cross_entropy backend: classes must be in [1, ", logits.size(1),
           "], got ", classes);
  HG_CHECK(
      !row_stats.defined() || (row_stats.dim() == 2 && row_stats.size(0) == logits.size(0) && row_stats.size(1) == 2 &&
                               row_stats.is_contiguous() && row_stats.device() == logits.device() &&
                               row_stats.dtype() == (logits.dtype() == kF64 ? kF64 : kF32)),
      "cross_entropy backend: row_stats must be contiguous [", logits.size(0), ", 2] in the loss dtype, got ",
      row_stats.defined() ? row_stats.shape_str() : std::string("undefined"));
}
}  // namespace hg::detail

namespace hg::cpu {
HG_DECLARE_SOFTMAX_KERNELS
}  // namespace hg::cpu

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
HG_DECLARE_SOFTMAX_KERNELS
}  // namespace hg::cuda
#endif

// Attention, math path: the fused scale-mask-softmax(-dropout) row kernel that
// sits between the two batched GEMMs of scaled_dot_product_attention
// (autograd/functions_attention.cpp), forward and backward.
//
//   scores = q @ k^T                      [batch..., L, S]   (batched GEMM, kernels/gemm/gemm.h)
//   x_ij   = scale * scores_ij + mask_ij   (-inf where causal or a bool mask forbids j)
//   y_ij   = softmax_j(x_ij)               (a fully masked row gives y = 0, see below)
//   p_ij   = y_ij * keep_ij / (1 - dropout_p)   keep_ij = philox_uniform(i*S + j) >= dropout_p
//   out    = p @ v                         (batched GEMM)
//
// Backward (d_p = d_out @ v^T from a batched GEMM):
//   d_y_ij      = d_p_ij * keep_ij / (1 - dropout_p)
//   d_scores_ij = scale * y_ij * (d_y_ij - sum_k d_y_ik * y_ik)
//
// Note [Fully masked rows]
// A row whose every key is masked (bool mask all false, float mask all -inf,
// or both) has y = p = 0, so its output row is 0 and its gradients are 0. This
// is PyTorch's math path since 2.5 (torch._safe_softmax); plain softmax would
// give NaN. The test "sdpa: fully masked row gives zeros" pins it.
//
// Note [Attention dropout]
// The keep mask is not stored: element (row r, col c) of the [rows, S] score
// matrix draws philox_uniform_at(seed, offset, r * S + c) (core/philox.h,
// Note [Philox element mapping]) with one generator offset per forward; the
// backward recomputes it from (seed, offset). CPU and CUDA give the same mask
// for the same seed (the uniform is bit-identical everywhere).
//
// Precision contract: scores, y, p and d_p are in the input dtype (f32, f16,
// bf16, f64); every row is computed in acc_t (fp32; f64 for f64), max
// subtracted before exp, one rounding on store. The scale is applied in fp32
// inside the kernel (not folded into q), so 16-bit raw scores q.k must fit
// the dtype (|q.k| < 65504 in f16).
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace hg {

enum class AttnMaskKind : uint8_t { kNone, kBool, kAdditive };

// One launch of the fused row kernel over scores viewed as [rows, cols] =
// [batch * L, S] (contiguous). Row r is query i = r % q_len.
struct AttnSoftmaxParams {
  int64_t rows = 0, cols = 0, q_len = 1;
  double scale = 1.0;   // applied in acc_t (fp32; f64 for f64 scores)
  bool causal = false;  // top-left aligned: key j is allowed iff j <= i
  AttnMaskKind mask_kind = AttnMaskKind::kNone;
  // bool (true = attend) or additive (f32; f64 when the scores are f64),
  // contiguous [mask_rows, cols] with mask_rows == q_len (one mask for every
  // batch) or == rows.
  const void* mask = nullptr;
  int64_t mask_rows = 0;
  bool mask_f64 = false;
  float dropout_p = 0.0f;
  uint64_t seed = 0, offset = 0;
};

namespace ops {

// The mask in the kernel's form: undefined, or a contiguous bool / f32 tensor
// [L, S] (when every batch shares it) or [batch..., L, S]; an additive mask
// is f32, or f64 when `scores_dtype` is f64. Checks that `mask`
// broadcasts to [batch..., L, S] and names both shapes if it does not.
Tensor attention_mask_for_kernel(const Tensor& mask, const Shape& scores_shape, DType scores_dtype);

// y = softmax(scale * scores + mask) (and p = dropout(y) into *dropped when
// params.dropout_p > 0; else p is y). scores: contiguous [..., L, S].
Tensor attention_softmax(const Tensor& scores, const Tensor& kernel_mask, AttnSoftmaxParams params, Tensor* dropped);
// d_scores from d_p and the forward's y (same params, same seed/offset).
Tensor attention_softmax_backward(const Tensor& d_p, const Tensor& y, const Tensor& kernel_mask,
                                  AttnSoftmaxParams params);

}  // namespace ops

// Backend kernels. y, p, scores, d_p, d_scores: contiguous [rows, cols], one
// dtype; p may be null (no dropout: p is y).
namespace cpu {
void attention_softmax(const AttnSoftmaxParams& params, const Tensor& scores, const Tensor& y, const Tensor& p);
void attention_softmax_backward(const AttnSoftmaxParams& params, const Tensor& d_p, const Tensor& y,
                                const Tensor& d_scores);
}  // namespace cpu
#if defined(HG_WITH_CUDA)
namespace cuda {
void attention_softmax(const AttnSoftmaxParams& params, const Tensor& scores, const Tensor& y, const Tensor& p);
void attention_softmax_backward(const AttnSoftmaxParams& params, const Tensor& d_p, const Tensor& y,
                                const Tensor& d_scores);
}  // namespace cuda
#endif

// The element rules both backends share (host and device).
HG_HOST_DEVICE inline bool attn_allowed(const AttnSoftmaxParams& p, int64_t row, int64_t col, double* add) {
  *add = 0.0;
  const int64_t i = row % p.q_len;
  if (p.causal && col > i) return false;
  if (p.mask_kind == AttnMaskKind::kNone) return true;
  const int64_t mrow = p.mask_rows == p.rows ? row : i;
  if (p.mask_kind == AttnMaskKind::kBool) return static_cast<const bool*>(p.mask)[mrow * p.cols + col];
  *add = p.mask_f64 ? static_cast<const double*>(p.mask)[mrow * p.cols + col]
                    : static_cast<double>(static_cast<const float*>(p.mask)[mrow * p.cols + col]);
  return true;
}

// keep / (1 - p) for element (row, col), or 1 without dropout.
HG_HOST_DEVICE inline float attn_dropout_factor(const AttnSoftmaxParams& p, int64_t row, int64_t col) {
  if (p.dropout_p <= 0.0f) return 1.0f;
  if (p.dropout_p >= 1.0f) return 0.0f;
  const float u = philox_uniform_at(p.seed, p.offset, static_cast<uint64_t>(row * p.cols + col));
  return u >= p.dropout_p ? 1.0f / (1.0f - p.dropout_p) : 0.0f;
}

}  // namespace hg

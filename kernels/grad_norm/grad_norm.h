// The global gradient norm and in-place rescaling behind clip_grad_norm_
// (optim/clip_grad.h), over many tensors at once.
//
//   auto [norm, coef] = hg::ops::grad_norm(grads, 2.0, /*max_norm=*/1.0);
//   hg::ops::scale_grads_(grads, coef);  // coef stays on the device
//
// Note [Global gradient norm]
//   total  = sum_i sum_k |g_i[k]|^p          (p > 0), or max_i max_k |g_i[k]| (p = inf)
//   norm   = total^(1/p)                     (norm = total for p = inf)
//   coef   = min(1, max_norm / (norm + 1e-6))   as torch.nn.utils.clip_grad_norm_
// Both results are f32 [1] tensors on the gradients' device, so a caller can
// clip without reading anything on the host. Each |g|^p is computed in acc_t
// (fp32 for f32/f16/bf16, f64 for f64). Gradients are cut into chunks of
// kGradNormChunk elements, each chunk reduced to one f64 partial; the
// partials are combined in f64 in chunk order and the norm is rounded once to
// f32. Inside a chunk, a CUDA thread sums its kGradNormChunk / 256 elements in
// acc_t before the block combines in f64; the CPU reference sums in f64
// directly. No float atomics: the order depends only on the tensor sizes, so
// results are bit-identical run to run. CPU and CUDA agree to f32 rounding
// for p-norms and exactly for p = inf.
// NaN anywhere makes the norm NaN; an inf gradient makes it inf (coef is then
// NaN or 0 and scaling turns the gradients NaN, exactly as in PyTorch).
// |g|^p is computed in the accumulation type, so a large p can overflow fp32
// (|g| = 1e4, p = 10) and give inf, as PyTorch's fp32 norms do.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/macros.h"
#include "core/tensor.h"

namespace hg {

// Elements per chunk: the unit of work of one CUDA block and of one CPU
// partial (tests size tensors around it so chunks straddle tensor ends).
inline constexpr int64_t kGradNormChunk = 8192;

enum class GradNormKind : uint8_t {
  kTwo,    // p = 2: a * a
  kPower,  // any other finite p > 0: pow(a, p)
  kInf,    // p = inf: max, propagating NaN
};

// The kind for a norm order; throws unless norm_type > 0 (inf allowed).
GradNormKind grad_norm_kind(double norm_type);

// One element's contribution, a = |g| in the accumulation type A.
template <typename A>
HG_HOST_DEVICE inline A grad_norm_term(GradNormKind kind, A p, A a) {
  if (kind == GradNormKind::kTwo) return a * a;
  if constexpr (std::is_same_v<A, float>) {
    return ::powf(a, p);
  } else {
    return ::pow(a, p);
  }
}

// Combines two partial totals (sum, or max propagating NaN for p = inf).
template <typename A>
HG_HOST_DEVICE inline A grad_norm_combine(GradNormKind kind, A x, A y) {
  if (kind != GradNormKind::kInf) return x + y;
  if (x != x) return x;
  if (y != y) return y;
  return x > y ? x : y;
}

// total -> norm, in double; rounded to f32 by the caller.
HG_HOST_DEVICE inline double grad_norm_finish(GradNormKind kind, double p, double total) {
  if (kind == GradNormKind::kInf) return total;
  if (kind == GradNormKind::kTwo) return ::sqrt(total);
  return ::pow(total, 1.0 / p);
}

// min(1, max_norm / (norm + 1e-6)) in f32, as PyTorch computes it from its
// f32 norm tensor; NaN stays NaN (torch.clamp keeps NaN).
HG_HOST_DEVICE inline float clip_coefficient(float max_norm, float norm) {
  const float coef = max_norm / (norm + 1e-6f);
  if (coef != coef) return coef;
  return coef < 1.0f ? coef : 1.0f;
}

namespace ops {

struct GradNorm {
  Tensor total_norm;  // f32 [1]
  Tensor clip_coef;   // f32 [1]
};

// Note [Global gradient norm]. grads: one or more floating tensors (f32, f16,
// bf16, f64), contiguous, all on one device. norm_type > 0 or inf; max_norm
// >= 0 (inf: coef is always 1). No host sync on CUDA.
GradNorm grad_norm(const std::vector<Tensor>& grads, double norm_type, double max_norm);

// grads[i] *= *factor in place (factor: f32 [1] on the grads' device, read on
// the device; the math runs in acc_t and rounds once). A factor of exactly 1
// leaves every element untouched without writing it.
void scale_grads_(const std::vector<Tensor>& grads, const Tensor& factor);

}  // namespace ops

// Backends: arguments checked by the ops layer; outputs are f32 [1] tensors.
namespace cpu {
void grad_norm(const std::vector<Tensor>& grads, GradNormKind kind, double p, float max_norm,
               const Tensor& total_norm, const Tensor& clip_coef);
void scale_grads_(const std::vector<Tensor>& grads, const Tensor& factor);
}  // namespace cpu
#if defined(HG_WITH_CUDA)
namespace cuda {
void grad_norm(const std::vector<Tensor>& grads, GradNormKind kind, double p, float max_norm,
               const Tensor& total_norm, const Tensor& clip_coef);
void scale_grads_(const std::vector<Tensor>& grads, const Tensor& factor);
}  // namespace cuda
#endif

}  // namespace hg

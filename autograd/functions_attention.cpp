// Differentiable scaled_dot_product_attention (math path) and
// repeat_interleave. The forward is followed by its backward; the fused row
// kernel and its rules are in kernels/attention/attention.h.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/node.h"
#include "core/generator.h"
#include "core/log.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/attention/flash_attention.h"
#include "kernels/gemm/gemm.h"

namespace hg {

using autograd::any_requires_grad;
using autograd::FunctionNode;
using autograd::Grads;
using autograd::record;
using autograd::SavedTensor;

const char* attention_path_name(AttentionPath path) {
  switch (path) {
    case AttentionPath::math:
      return "math";
    case AttentionPath::flash:
      return "flash";
    case AttentionPath::cudnn:
      return "cudnn";
  }
  return "?";
}

// ---- dispatch: the one place that picks the implementation ----------------------------------
std::string attention_path_unsupported_reason(AttentionPath path, const Tensor& q, const Tensor& k, const Tensor& v,
                                              const SdpaOptions& options) {
  const bool mask = options.attn_mask.defined();
  switch (path) {
    case AttentionPath::math:
      return {};
    case AttentionPath::flash:
      if (ops::flash_attention_supported(q, k, v, mask, options.dropout_p)) return {};
      return "the flash kernels need 4-D q [B, H, L, D] and k, v [B, H, S, D] with D 64 or 128, f16/bf16 on CUDA "
             "(f32, f64, f16, bf16 on the CPU), no mask and no dropout; got q " +
             q.shape_str() + ", k " + k.shape_str() + ", v " + v.shape_str() + ", " +
             std::string(dtype_name(q.dtype())) + (mask ? ", a mask" : "") +
             (options.dropout_p > 0.0 ? ", dropout" : "");
    case AttentionPath::cudnn:
      return ops::cudnn_attention_unsupported_reason(q, k, v, mask, options.dropout_p);
  }
  return "unknown path";
}

namespace {

// HG_ATTENTION=math|flash|cudnn (unset or empty: no forcing); read on every
// call, so tests and benchmarks may switch it.
std::optional<AttentionPath> forced_path_from_env() {
  const char* env = std::getenv("HG_ATTENTION");
  if (env == nullptr || *env == '\0') return std::nullopt;
  const std::string value(env);
  if (value == "math") return AttentionPath::math;
  if (value == "flash") return AttentionPath::flash;
  if (value == "cudnn") return AttentionPath::cudnn;
  HG_FAIL("HG_ATTENTION=", value, " is not a path: use math, flash or cudnn (or leave it unset)");
}

}  // namespace

AttentionPath choose_attention_path(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options) {
  // A forced path (the option, else the environment) runs or fails loudly.
  const std::optional<AttentionPath> forced = options.path ? options.path : forced_path_from_env();
  if (forced) {
    const std::string why = attention_path_unsupported_reason(*forced, q, k, v, options);
    HG_CHECK(why.empty(), "scaled_dot_product_attention: the ", attention_path_name(*forced), " path was forced (",
             options.path ? "SdpaOptions::path" : "HG_ATTENTION", ") but cannot run these inputs: ", why);
    return *forced;
  }
  // The fused kernel wherever it applies (4-D [B, H, L, D] without
  // broadcast, D 64 or 128, no mask, no dropout: the conditions of
  // ops::flash_attention_supported; f16/bf16 on CUDA). On the CPU, f32, f16
  // and bf16 take it where its blocked kernels run: they beat the math path's
  // two GEMMs and its L x S intermediate on every shape measured
  // (docs/bench/history.md, "CPU flash attention"); the reference row kernels
  // (HG_CPU_MATH=scalar, no SLEEF) and f64 stay on the math path. cuDNN's
  // fused graph runs the same CUDA inputs on sm_80+ but is not the default:
  // no GPU comparison of the two has been taken yet (kernels/attention/CUDNN.md, "The default stays flash").
  if (!ops::flash_attention_supported(q, k, v, options.attn_mask.defined(), options.dropout_p)) {
    return AttentionPath::math;
  }
  if (q.device().is_cuda()) return AttentionPath::flash;
  const bool blocked = std::string(cpu::flash_attention_cpu_path()) != "reference";
  return q.device().is_cpu() && q.dtype() != kF64 && blocked ? AttentionPath::flash : AttentionPath::math;
}

namespace {

void check_sdpa_args(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o) {
  HG_CHECK(q.defined() && k.defined() && v.defined(), "scaled_dot_product_attention: q, k and v must be defined");
  HG_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
           "scaled_dot_product_attention: q [..., L, E], k [..., S, E] and v [..., S, Ev] need at least 2 dims, got q ",
           q.shape_str(), ", k ", k.shape_str(), ", v ", v.shape_str());
  HG_CHECK(q.size(-1) == k.size(-1), "scaled_dot_product_attention: head dims differ: q ", q.shape_str(), " and k ",
           k.shape_str(), " must share the last dim E");
  HG_CHECK(k.size(-2) == v.size(-2), "scaled_dot_product_attention: k ", k.shape_str(), " and v ", v.shape_str(),
           " must have the same number of keys S (dim -2)");
  HG_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), "scaled_dot_product_attention: q, k, v dtypes differ (",
           q.dtype(), ", ", k.dtype(), ", ", v.dtype(), ")");
  HG_CHECK(is_floating(q.dtype()), "scaled_dot_product_attention: needs floating q, k, v, got ", q.dtype());
  HG_CHECK(q.device() == k.device() && q.device() == v.device(),
           "scaled_dot_product_attention: q, k, v are on different devices");
  HG_CHECK(o.dropout_p >= 0.0 && o.dropout_p <= 1.0, "scaled_dot_product_attention: dropout_p must be in [0, 1], got ",
           o.dropout_p);
  HG_CHECK(!o.scale || std::isfinite(*o.scale), "scaled_dot_product_attention: scale must be finite");
}

// Math path: scores = q k^T (batched GEMM, k's transpose is a flag), the fused
// row kernel, out = p v (batched GEMM).
Tensor sdpa_math(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o) {
  const Tensor scores = ops::matmul(q, k, false, true);
  const Tensor kmask = ops::attention_mask_for_kernel(o.attn_mask, scores.sizes(), scores.dtype());
  AttnSoftmaxParams prm;
  prm.scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  prm.causal = o.is_causal;
  prm.dropout_p = static_cast<float>(o.dropout_p);
  if (o.dropout_p > 0.0) {
    Generator& gen = o.generator != nullptr ? *o.generator : default_generator();
    prm.seed = gen.seed();
    prm.offset = gen.next_offset();
  }
  Tensor p;
  const Tensor y = ops::attention_softmax(scores, kmask, prm, &p);
  Tensor out = ops::matmul(p, v);
  if (any_requires_grad({&q, &k, &v})) {
    const bool dropout = o.dropout_p > 0.0;
    record("scaled_dot_product_attention", out, {&q, &k, &v},
           {SavedTensor(q), SavedTensor(k), SavedTensor(v), SavedTensor(y), SavedTensor(dropout ? p : Tensor())},
           [prm, kmask, dropout, sq = q.sizes(), sk = k.sizes(), sv = v.sizes(), nq = q.requires_grad(),
            nk = k.requires_grad(), nv = v.requires_grad()](const Tensor& g, const FunctionNode& self) -> Grads {
             const Tensor qs = self.saved(0), ks = self.saved(1), vs = self.saved(2), ys = self.saved(3);
             const Tensor ps = dropout ? self.saved(4) : ys;
             const Tensor gc = g.dtype() == ys.dtype() ? g : g.to(ys.dtype());
             Grads grads(3);
             if (nv) grads[2] = sum_to(ops::matmul(ps, gc, true, false), sv);
             if (nq || nk) {
               const Tensor d_p = ops::matmul(gc, vs, false, true);
               const Tensor d_s = ops::attention_softmax_backward(d_p, ys, kmask, prm);
               if (nq) grads[0] = sum_to(ops::matmul(d_s, ks), sq);
               if (nk) grads[1] = sum_to(ops::matmul(d_s, qs, true, false), sk);
             }
             return grads;
           });
  }
  return out;
}

// The fused paths. flash: the fused kernels (kernels/attention/flash_attention.h).
// cudnn: cuDNN's fused forward and backward graphs (kernels/attention/attention_cudnn.h).
// Either backward recomputes the probabilities from the saved log-sum-exp.
Tensor sdpa_fused(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o, bool cudnn) {
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  const bool causal = o.is_causal;
  ops::FlashForward f = cudnn ? ops::cudnn_attention_forward(q, k, v, scale, causal)
                              : ops::flash_attention_forward(q, k, v, scale, causal);
  if (any_requires_grad({&q, &k, &v})) {
    record("scaled_dot_product_attention", f.out, {&q, &k, &v},
           {SavedTensor(q), SavedTensor(k), SavedTensor(v), SavedTensor(f.out), SavedTensor(f.lse)},
           [scale, causal, cudnn](const Tensor& g, const FunctionNode& self) -> Grads {
             const Tensor qs = self.saved(0), ks = self.saved(1), vs = self.saved(2);
             const Tensor gc = g.dtype() == qs.dtype() ? g : g.to(qs.dtype());
             ops::FlashBackward b =
                 cudnn ? ops::cudnn_attention_backward(gc, qs, ks, vs, self.saved(3), self.saved(4), scale, causal)
                       : ops::flash_attention_backward(gc, qs, ks, vs, self.saved(3), self.saved(4), scale, causal);
             return {b.dq, b.dk, b.dv};
           });
  }
  return f.out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options) {
  HG_AUTOCAST(
      OpId::scaled_dot_product_attention,
      [&](const Tensor& a, const Tensor& b, const Tensor& c) { return scaled_dot_product_attention(a, b, c, options); },
      q, k, v);  // Note [Autocast]
  check_sdpa_args(q, k, v, options);
  const AttentionPath path = choose_attention_path(q, k, v, options);
  HG_LOG_DEBUG("scaled_dot_product_attention: {} path (q {}, k {}, v {}, {}, causal {}, mask {}, dropout {})",
               attention_path_name(path), q.shape_str(), k.shape_str(), v.shape_str(), dtype_name(q.dtype()),
               options.is_causal, options.attn_mask.defined(), options.dropout_p);
  switch (path) {
    case AttentionPath::math:
      return sdpa_math(q, k, v, options);
    case AttentionPath::flash:
      return sdpa_fused(q, k, v, options, /*cudnn=*/false);
    case AttentionPath::cudnn:
      return sdpa_fused(q, k, v, options, /*cudnn=*/true);
  }
  HG_FAIL("scaled_dot_product_attention: unknown path ", static_cast<int>(path));
}

// ---- repeat_interleave -----------------------------------------------------------------------
// A composition of differentiable views: unsqueeze after dim, expand the new
// dim to `repeats`, merge it into dim (one copy, by reshape). The backward is
// that of the composition (a sum over the repeats).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim) {
  HG_CHECK(x.defined() && x.dim() >= 1, "repeat_interleave: needs a tensor of rank >= 1");
  HG_CHECK(repeats >= 0, "repeat_interleave: repeats must be >= 0, got ", repeats);
  const int64_t r = x.dim();
  HG_CHECK(dim >= -r && dim < r, "repeat_interleave: dim ", dim, " out of range for ", x.shape_str());
  const int64_t d = dim < 0 ? dim + r : dim;
  Shape expanded = x.sizes();
  expanded.insert(expanded.begin() + d + 1, repeats);
  Shape out_shape = x.sizes();
  out_shape[static_cast<size_t>(d)] *= repeats;
  return reshape(expand(unsqueeze(x, d + 1), expanded), out_shape);
}

}  // namespace hg

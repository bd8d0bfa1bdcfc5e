// Differentiable attention, like torch.nn.functional.scaled_dot_product_attention:
//
//   Tensor out = hg::scaled_dot_product_attention(q, k, v, {.is_causal = true});
//   Tensor out2 = hg::scaled_dot_product_attention(q, k, v, {.attn_mask = mask, .dropout_p = 0.1});
//
// q [..., L, E], k [..., S, E], v [..., S, Ev] -> out [..., L, Ev]; the batch
// dims broadcast (torch.matmul rules). Formulas, the fully-masked-row rule and
// the dropout mapping: kernels/attention/attention.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace hg {

class Generator;

// The implementations behind scaled_dot_product_attention.
//   math:  batched GEMM + fused scale-mask-softmax(-dropout) + batched GEMM,
//          O(L * S) memory per head (every device, every floating dtype)
//   flash: the fused FlashAttention-2-style kernels (kernels/attention/flash_attention.h),
//          O(L) memory; chosen on CUDA wherever they apply
//   cudnn: cuDNN's fused flash-attention graph for the forward
//          (kernels/attention/attention_cudnn.h), the flash kernels for the backward;
//          CUDA sm_80+, chosen only when forced (flash stays the default
//          until a GPU comparison says otherwise: kernels/attention/CUDNN.md)
enum class AttentionPath : uint8_t { math, flash, cudnn };

struct SdpaOptions {
  // bool (true = attend) or floating (added to the scaled scores), broadcastable
  // to [..., L, S]; never receives a gradient.
  Tensor attn_mask{};
  // Applied whenever > 0 (there is no training flag, as in torch); Philox
  // stream from `generator` (the default generator when null).
  double dropout_p = 0.0;
  // Top-left aligned causal mask tril(ones(L, S)): query i sees keys j <= i.
  // May be combined with attn_mask (torch refuses the combination; we AND them).
  bool is_causal = false;
  std::optional<double> scale{};  // default 1 / sqrt(E)
  Generator* generator = nullptr;
  // Forces an implementation (else the environment variable
  // HG_ATTENTION=math|flash|cudnn, else choose_attention_path's default); a
  // forced path that cannot run these inputs throws hg::Error saying why.
  std::optional<AttentionPath> path{};
};

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options = {});

// THE dispatch decision, in one function: options.path, else HG_ATTENTION,
// when set (checked: a forced path that cannot run throws with the reason);
// otherwise flash for 4-D inputs with head dim 64 or 128, no mask and no
// dropout (f16/bf16 on CUDA; f32/f16/bf16 on the CPU where its blocked kernels
// run, i.e. not under HG_CPU_MATH=scalar), and math elsewhere.
// HG_LOG_LEVEL=debug logs the path of every call.
AttentionPath choose_attention_path(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options);
const char* attention_path_name(AttentionPath path);
// Empty when `path` can run these inputs, else why not (a sentence).
std::string attention_path_unsupported_reason(AttentionPath path, const Tensor& q, const Tensor& k, const Tensor& v,
                                              const SdpaOptions& options);

// torch.repeat_interleave(x, repeats, dim): each slice along dim repeated
// `repeats` times in place ([a, b] -> [a, a, b, b]); for grouped-query
// attention (k/v heads shared by query heads).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim);

}  // namespace hg

// Scaled-dot-product attention through cuDNN's fused flash-attention graph
// (the third path of hg::scaled_dot_product_attention, beside math and flash;
// docs/kernels.md "Attention: the cuDNN path").
//
//   if (ops::cudnn_attention_unsupported_reason(q, k, v, false, 0.0).empty())
//     FlashForward f = ops::cudnn_attention_forward(q, k, v, 1.0 / std::sqrt(64.0), true);
//   FlashBackward g = ops::cudnn_attention_backward(d_out, q, k, v, f.out, f.lse, scale, true);
//
// Same formulas, shapes and outputs as kernels/flash_attention.h: q [B, H, L, D],
// k and v [B, H, S, D], out [B, H, L, D] (stored heads last, [B, L, H, D]),
// lse [B, H, L] f32, the natural log-sum-exp of the scaled, causal-masked scores
// (top-left aligned). The forward is cuDNN's fused attention (one execution
// plan per shape, stride and dtype, cached); the backward runs the flash
// kernels of kernels/flash_attention.h from the cuDNN forward's out and lse
// (the cuDNN backward graph is not built: see the docs).
//
// Precision contract (the forward): f16/bf16 in and out, scores, softmax and
// accumulation in fp32 (the graph's compute type); cuDNN rounds P to the input
// dtype before the P V product, as the flash kernels do; the cuda-emu stand-in
// keeps P in fp32.
#pragma once

#include <string>

#include "core/tensor.h"
#include "kernels/flash_attention.h"

namespace hg::ops {

// Empty when the cuDNN path can run these inputs; otherwise why not, in a
// sentence. Needs: a CUDA build and a CUDA device of compute capability 8.0 or
// newer, cuDNN >= 9, 4-D q [B, H, L, D], k and v [B, H, S, D] with equal B, H,
// D, L, S >= 1, one dtype f16 or bf16, D in {64, 128}, every tensor with
// flash_attention_rows_ok (head dim contiguous, rows 16-byte aligned: no copy
// is made), no attention mask, dropout_p == 0.
std::string cudnn_attention_unsupported_reason(const Tensor& q, const Tensor& k, const Tensor& v, bool has_mask,
                                               double dropout_p);

// The forward through cuDNN; throws hg::Error with the reason when the inputs
// are not supported or cuDNN builds no plan for them.
FlashForward cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal);

// The backward of cudnn_attention_forward: the flash kernels, fed the cuDNN
// forward's out and lse (same definitions).
FlashBackward cudnn_attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, double scale, bool causal);

}  // namespace hg::ops

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
// kernels/cuda/attention_cudnn.cpp. Preconditions (checked by the ops layer):
// those of cudnn_attention_unsupported_reason; out [B, H, L, D] in q's dtype
// with rows_ok strides; lse [B, H, L] f32 contiguous.
void cudnn_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal);
// Empty when the device and the loaded cuDNN can run the fused graph, else why not.
std::string cudnn_attention_device_reason();
// Execution plans built so far (the plan cache's size; for tests).
size_t cudnn_attention_plan_count();
}  // namespace hg::cuda
#endif

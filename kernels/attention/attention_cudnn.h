// Scaled-dot-product attention through cuDNN's fused flash-attention graphs
// (the third path of hg::scaled_dot_product_attention, beside math and flash;
// kernels/attention/CUDNN.md "Attention: the cuDNN path").
//
//   if (ops::cudnn_attention_unsupported_reason(q, k, v, false, 0.0).empty())
//     FlashForward f = ops::cudnn_attention_forward(q, k, v, 1.0 / std::sqrt(64.0), true);
//   FlashBackward g = ops::cudnn_attention_backward(d_out, q, k, v, f.out, f.lse, scale, true);
//
// Same formulas, shapes and outputs as kernels/attention/flash_attention.h: q [B, H, L, D],
// k and v [B, H, S, D], out [B, H, L, D] (stored heads last, [B, L, H, D]),
// lse [B, H, L] f32, the natural log-sum-exp of the scaled, causal-masked scores
// (top-left aligned); dq, dk, dv in q's, k's, v's shapes (stored heads last).
// The forward is cuDNN's fused attention fprop graph, the backward its fused
// bprop graph fed the forward's out and lse (Stats); one execution plan per
// graph, shape, stride and dtype, cached.
//
// Precision contract: f16/bf16 in and out, scores, softmax and accumulation
// in fp32 (the graphs' compute type); cuDNN rounds P (and, in the backward,
// dS) to the input dtype before the products that take them, as the flash
// kernels do; the cuda-emu stand-in keeps P in fp32 in the forward and rounds
// P^T and dS^T where the backward graph declares them 16-bit.
#pragma once

#include <string>

#include "core/tensor.h"
#include "kernels/attention/flash_attention.h"

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

// The backward of cudnn_attention_forward through cuDNN's fused bprop graph:
// d_out and out in q's shape, lse the forward's; the same support rules (d_out
// and out are read in place when flash_attention_rows_ok holds, else copied
// once). Throws hg::Error with the reason when unsupported or when cuDNN
// builds no plan.
FlashBackward cudnn_attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, double scale, bool causal);

}  // namespace hg::ops

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
// kernels/attention/attention_cudnn.cpp. Preconditions (checked by the ops layer):
// those of cudnn_attention_unsupported_reason; out [B, H, L, D] in q's dtype
// with rows_ok strides; lse [B, H, L] f32 contiguous.
void cudnn_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal);
// Which backward graph: cuDNN's deterministic one (dQ written by the dS K
// product), or the one that accumulates dQ in an f32 buffer with atomics
// (not bit-reproducible). automatic: the deterministic graph, the
// accumulating one (with a warning) only when cuDNN has no plan for it.
enum class CudnnSdpaBackwardGraph { automatic, direct_dq, accumulate_dq };
// Preconditions (checked by the ops layer): those of the forward; d_out and
// out [B, H, L, D], dq, dk, dv in q's, k's, v's shapes, all in q's dtype with
// rows_ok strides; lse [B, H, L] f32 contiguous. Returns the graph it ran.
CudnnSdpaBackwardGraph cudnn_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                                const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                                const Tensor& out, const Tensor& lse, double scale, bool causal,
                                                CudnnSdpaBackwardGraph graph = CudnnSdpaBackwardGraph::automatic);
// Empty when the device and the loaded cuDNN can run the fused graph, else why not.
std::string cudnn_attention_device_reason();
// Execution plans built so far, forward and backward (the plan cache's size; for tests).
size_t cudnn_attention_plan_count();
}  // namespace hg::cuda
#endif

// Fused (FlashAttention-2 style) scaled dot-product attention, forward and
// backward, O(L) memory (kernels/attention/FLASH.md "Attention: the
// flash kernel").
//
//   FlashForward f = hg::ops::flash_attention_forward(q, k, v, 1.0 / std::sqrt(64.0), true);
//   FlashBackward g = hg::ops::flash_attention_backward(d_out, q, k, v, f.out, f.lse, scale, true);
//
// q [B, H, L, D], k and v [B, H, S, D], one floating dtype, one device; D in
// {64, 128}. Any strides: on CUDA the kernels read q, k, v, d_out (and out)
// through their strides, without a copy, when flash_attention_rows_ok holds
// (the head dim contiguous, rows 16-byte aligned: e.g. the [B, T, 3, H, D]
// output of a fused qkv projection viewed as [B, H, T, D]); other inputs, and
// every input on the CPU, are copied to contiguous first.
// With s_ij = scale * q_i . k_j and, when causal, s_ij = -inf for j > i
// (top-left aligned, PyTorch's is_causal: tril(ones(L, S))):
//
//   forward   m_i = max_j s_ij,  l_i = sum_j exp(s_ij - m_i),  lse_i = m_i + log l_i
//             out_i = sum_j exp(s_ij - lse_i) v_j
//   backward  P_ij = exp(s_ij - lse_i)  (recomputed from the saved lse)
//             D_i = sum_d dO_id O_id,  dP_ij = dO_i . v_j,  dS_ij = P_ij (dP_ij - D_i)
//             dq_i = scale sum_j dS_ij k_j,  dk_j = scale sum_i dS_ij q_i,  dv_j = sum_i P_ij dO_i
//
// Precision contract: out, dq, dk, dv in q's dtype; lse [B, H, L] f32 (f64 for
// f64 inputs), the natural log-sum-exp of the scaled, masked scores. Scores,
// softmax statistics and every accumulator are fp32 (f64 for f64); on CUDA the
// GEMM tiles run on tensor cores (mma.sync, 16-bit inputs, fp32 accumulation) with
// P and dS rounded to q's dtype before they enter the P V, P^T dO, dS K and
// dS^T Q products, as in FlashAttention-2. No atomics: dq and dk/dv come from
// two kernels that each own their outputs, so results are bit-identical from
// run to run.
//
// Devices and dtypes: CPU f32, f64, f16, bf16; CUDA f16 and bf16 (tensor
// cores need 16-bit inputs). L, S >= 1 (they need not be multiples of the tile
// size); B * H may be 0.
#pragma once

#include "core/tensor.h"

namespace hg::ops {

// On CUDA, out, dq, dk and dv are [B, H, N, D] views of [B, N, H, D] storage
// (heads last, as a [B, N, H * D] projection lays them out), so merging the
// heads back is a view, not a copy; on the CPU they are contiguous.
struct FlashForward {
  Tensor out;  // [B, H, L, D], q's dtype
  Tensor lse;  // [B, H, L], f32 (f64 for f64 q)
};

struct FlashBackward {
  Tensor dq;  // q's shape and dtype
  Tensor dk;  // k's shape, q's dtype
  Tensor dv;  // v's shape, q's dtype
};

FlashForward flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal);

FlashBackward flash_attention_backward(const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, double scale, bool causal);

// True when the fused kernels apply: q, k, v defined, 4-D, on one device, one
// dtype, q [B, H, L, D] and k, v [B, H, S, D] with equal B, H, D, L >= 1,
// S >= 1, D in {64, 128}, no attention mask, dropout_p == 0, and the dtype is
// f16/bf16 on CUDA (f32, f64, f16, bf16 on the CPU).
bool flash_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v, bool has_mask, double dropout_p);

// True when the CUDA kernels can read the 4-D, 16-bit tensor x in place: the
// last dim has stride 1 and the data pointer and the other strides are
// multiples of 16 bytes (so every row, and each 8-element chunk, is 16-byte
// aligned for cp.async).
bool flash_attention_rows_ok(const Tensor& x);

}  // namespace hg::ops

// The backend kernels (hg::cpu:: in kernels/attention/flash_attention_cpu.cpp, hg::cuda::
// in kernels/attention/flash_attention.cu). Preconditions, established by
// kernels/attention/flash_attention_ops.cpp: one dtype and device, L >= 1, S >= 1,
// D in {64, 128}, B * H >= 1, lse contiguous in acc_t's dtype.
//   CPU:  q, out, d_out, dq contiguous [BH, L, D]; k, v, dk, dv contiguous
//         [BH, S, D]; lse [BH, L].
//   CUDA: q, out, d_out, dq [B, H, L, D]; k, v, dk, dv [B, H, S, D], each with
//         flash_attention_rows_ok (any other strides); lse [B, H, L].
// clang-format off
#define HG_DECLARE_FLASH_ATTENTION_KERNELS                                                                 \
  void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,     \
                               const Tensor& v, double scale, bool causal);                                \
  void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_out, \
                                const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,      \
                                const Tensor& lse, double scale, bool causal);
// clang-format on

namespace hg::cpu {
HG_DECLARE_FLASH_ATTENTION_KERNELS
// What the CPU kernels run for a dtype other than f64: "blocked-avx512",
// "blocked-avx2", "blocked-sse2" (tiles in the vector math's ISA), or
// "reference" (the row kernels: HG_CPU_MATH=scalar, or no SLEEF; f64 always).
const char* flash_attention_cpu_path();
}  // namespace hg::cpu

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
HG_DECLARE_FLASH_ATTENTION_KERNELS
}  // namespace hg::cuda
#endif

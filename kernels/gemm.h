// GEMM: matmul for 2-D and batched 3-D operands, with transposes and an
// optional fused bias.
//
//   out = op(a) @ op(b) + bias      op(t) = t or t^T (last two dims)
//   a: [M, K] or [B, M, K]     b: [K, N] or [B, K, N]     bias: broadcastable to out
//   a 3-D operand with a 2-D one shares the 2-D matrix across the batch.
//
// Precision contract: f16/bf16 inputs, fp32 accumulation, one rounding to the
// input dtype on store (the bias is added in fp32 before that rounding); f32
// stays f32 (TF32 tensor cores only when allowed by set_allow_tf32(true),
// default off, as in PyTorch); f64 is f64 throughout. Integer GEMM is refused.
// CUDA: cublasGemmStridedBatchedEx (tensor cores for 16-bit). CPU: OpenBLAS
// sgemm/dgemm; bf16 through oneDNN's native bf16 matmul where the CPU has
// AVX512_BF16 or AMX; other 16-bit GEMMs (and bf16 with HG_CPU_GEMM=widen)
// widen the operands to fp32 for sgemm (docs/kernels.md, "CPU GEMM paths").
#pragma once

#include <cstdint>

#include "core/profiler.h"
#include "core/tensor.h"

namespace hg::ops {

// a [..., M, K], b [..., K, N] (rank >= 2 each; op() applies to the last two
// dims); the batch dims broadcast as in torch.matmul and the result is
// [broadcast batch..., M, N]. One strided-batched GEMM wherever the strides
// allow (Note [Batched GEMM strides] in gemm_ops.cpp): transposed views and
// broadcast operands are never copied; only a matrix that is neither row- nor
// column-major in its last two dims is made contiguous.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false,
              const Tensor& bias = Tensor());

// The broadcast batch shape of a and b (dims before the last two), or an
// hg::Error naming both shapes.
Shape matmul_batch_shape(const Tensor& a, const Tensor& b);

// TF32 for f32 GEMMs on CUDA (ignored on the CPU). Off by default.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace hg::ops

namespace hg {

// One (strided-batched) GEMM in row-major terms:
//   C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b],  b in [0, batch)
// op(A) is m x k, op(B) is k x n, C is m x n. Leading dimensions are row
// strides in elements; a batch stride of 0 broadcasts that operand.
struct GemmArgs {
  DType dtype = kF32;  // of A, B and C
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  float alpha = 1.0f, beta = 0.0f;
  bool allow_tf32 = false;
  int device_index = 0;
};

namespace cpu {
void gemm(const GemmArgs& args);
// The path a CPU GEMM of this dtype takes in this process: "onednn-bf16"
// (native bf16), "widen-sgemm" (16-bit widened to fp32 for OpenBLAS sgemm),
// "onednn-f32" (f32 on an AVX-512 CPU), "openblas" (f32 elsewhere, f64) or
// "none".
const char* gemm_path(DType dtype);
// The oneDNN path alone (bf16 or f32): runs args and returns true, or returns
// false having done nothing (another dtype, the path is off, or a shape oneDNN
// can only run on its reference kernels). cpu::gemm tries it first for bf16
// and f32.
bool gemm_native(const GemmArgs& args);
// Why bf16 widens here ("" when it takes oneDNN): HG_CPU_GEMM=widen,
// HG_CPU_ISA=generic, no AVX512_BF16/AMX, or a build without oneDNN.
const char* gemm_bf16_widen_reason();
// Why f32 takes OpenBLAS here ("" when it takes oneDNN): HG_CPU_GEMM=widen or
// openblas, HG_CPU_ISA=generic, no AVX-512, or a build without oneDNN.
const char* gemm_f32_openblas_reason();
}
#if defined(HG_WITH_CUDA)
namespace cuda {
void gemm(const GemmArgs& args);
}
#endif

namespace ops::detail {
// Observability for tests: how many backend GEMM calls ops::matmul has issued
// (process-wide) and the flags/batch of the last one, so a test can check that
// a transposed view reached the GEMM as a transpose flag, not as a copy.
struct GemmCallStats {
  int64_t calls = 0;
  bool last_trans_a = false, last_trans_b = false;
  int64_t last_batch = 0;
};
void note_gemm_call(const GemmArgs& args);
// The profiler record of one backend GEMM, with its declared work (2 m n k
// FLOPs per batch; A and B read, C written): Note [Profiler].
profiler::WorkScope profile_gemm(const GemmArgs& args, bool cuda);
GemmCallStats gemm_call_stats();
}  // namespace ops::detail

}  // namespace hg

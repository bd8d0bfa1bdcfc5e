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
// sgemm/dgemm, 16-bit operands converted to fp32 in row blocks.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hg::ops {

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false,
              const Tensor& bias = Tensor());

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
}
#if defined(HG_WITH_CUDA)
namespace cuda {
void gemm(const GemmArgs& args);
}
#endif

}  // namespace hg

// CUDA GEMM through cuBLAS (the cuda-emu build serves the same calls from a
// CPU stand-in in runtime/emu, so this file is identical in both builds).
//
// Row-major C = op(A) @ op(B) is column-major C^T = op(B)^T @ op(A)^T, so we
// call cuBLAS with the operands swapped and m/n exchanged; no data moves.
// Precision contract: f16/bf16 operands, CUBLAS_COMPUTE_32F (fp32 accumulate,
// tensor cores), output rounded once to the operand dtype; f32 uses
// CUBLAS_COMPUTE_32F, or 32F_FAST_TF32 when set_allow_tf32(true); f64 uses
// CUBLAS_COMPUTE_64F. Bytes: (m*k + k*n) * sizeof(T) read, m*n written
// (read too when beta != 0, i.e. with a fused bias).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"
#include "kernels/gemm.h"

namespace hg::cuda {

namespace {

cudaDataType data_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F64: return CUDA_R_64F;
    default: HG_FAIL("matmul: no CUDA GEMM for dtype ", t);
  }
}

cublasOperation_t op_of(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

void gemm(const GemmArgs& g) {
  HG_CHECK(g.m <= INT32_MAX && g.n <= INT32_MAX && g.k <= INT32_MAX && g.batch <= INT32_MAX &&
               g.lda <= INT32_MAX && g.ldb <= INT32_MAX && g.ldc <= INT32_MAX,
           "matmul: dimensions above 2^31 are not supported by cuBLAS (m=", g.m, " n=", g.n,
           " k=", g.k, " batch=", g.batch, "); split the product");
  DeviceGuard guard(g.device_index);
  cublasHandle_t handle = cublas_handle();
  const cudaDataType type = data_type(g.dtype);
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (g.dtype == DType::F64) compute = CUBLAS_COMPUTE_64F;
  if (g.dtype == DType::F32 && g.allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  const double alpha64 = g.alpha, beta64 = g.beta;
  const void* alpha = g.dtype == DType::F64 ? static_cast<const void*>(&alpha64) : &g.alpha;
  const void* beta = g.dtype == DType::F64 ? static_cast<const void*>(&beta64) : &g.beta;
  // Swapped operands: cuBLAS "A" is our B, "B" is our A, and (m, n) -> (n, m).
  HG_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, op_of(g.trans_b), op_of(g.trans_a), static_cast<int>(g.n), static_cast<int>(g.m),
      static_cast<int>(g.k), alpha, g.b, type, static_cast<int>(g.ldb), g.stride_b, g.a, type,
      static_cast<int>(g.lda), g.stride_a, beta, g.c, type, static_cast<int>(g.ldc), g.stride_c,
      static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace hg::cuda

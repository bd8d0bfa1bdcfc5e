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
// widen the operands to fp32 for sgemm (kernels/gemm/CPU.md, "CPU GEMM paths").
#pragma once

#include <cstdint>
#include <optional>

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

// What a CUDA GEMM can fuse after the product (cuBLASLt epilogues; kernels/
// kernels/gemm/gemm.cu maps each to its CUBLASLT_EPILOGUE_*). Row-major terms, C is
// m x n, accumulation in fp32 (f64 for f64), one rounding on store:
enum class GemmEpilogue : uint8_t {
  none,           // C = alpha op(A) op(B) + beta C
  bias,           // ... + bias[j]                       bias: [n], the operands' dtype
  gelu,           // C = gelu_tanh(alpha op(A) op(B) + beta C)
  gelu_bias,      // C = gelu_tanh(... + bias[j])
  gelu_aux,       // as gelu, and aux[i, j] = the GELU input (aux: row-major, row stride ld_aux)
  gelu_aux_bias,  // as gelu_bias, and aux[i, j] = the GELU input (bias included)
  dgelu,          // C = (alpha op(A) op(B) + beta C) * gelu_tanh'(aux[i, j])
  bgrad_a,        // C as none, and bias[i] = sum_k op(A)[i, k] (bias: [m], written): the
                  // bias gradient of a weight-gradient GEMM dW = g^T x with A = g^T
};

// One (strided-batched) GEMM in row-major terms:
//   C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b],  b in [0, batch)
// op(A) is m x k, op(B) is k x n, C is m x n. Leading dimensions are row
// strides in elements; a batch stride of 0 broadcasts that operand.
struct GemmArgs {
  DType dtype = kF32;  // of A, B and C
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  // An outer batch level around `batch`, for the CPU's oneDNN path only
  // (cpu::gemm_native): outer_batch entries at element strides
  // outer_stride_a/b/c, so a [outer, batch] pair of batch dims whose strides do
  // not collapse into one (attention's [B, H] heads read in place from the
  // fused qkv projection) is one call, not one per outer entry. Every other
  // path takes outer_batch == 1 (ops::matmul loops over the outer entries).
  int64_t outer_batch = 1, outer_stride_a = 0, outer_stride_b = 0, outer_stride_c = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  float alpha = 1.0f, beta = 0.0f;
  bool allow_tf32 = false;
  int device_index = 0;
  // CUDA only (cuda::gemm_lt): the epilogue and its vectors. bias and aux must
  // be device memory of the operands' dtype; ld_aux >= n and a multiple of 8;
  // epilogues other than none need batch == 1.
  GemmEpilogue epilogue = GemmEpilogue::none;
  void* bias = nullptr;
  void* aux = nullptr;
  int64_t ld_aux = 0;
  // Per-tensor fp32 scales in device memory (null = 1): D = scale_a * scale_b *
  // (op(A) op(B)) then * scale_d on store. For 8-bit float GEMMs; cuBLASLt
  // refuses them for the 16/32/64-bit dtypes.
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  const float* scale_d = nullptr;
  // fp8 GEMMs (cuda::gemm_lt only; Note [fp8 GEMM] in kernels/fp8/fp8.h): A's and
  // B's dtypes (kF8E4M3 / kF8E5M2) when they differ from `dtype`, which is then
  // C's (bf16, f16 or f32); the bias is then bf16 (f16 for an f16 C). Unset:
  // A and B are `dtype`.
  std::optional<DType> a_dtype, b_dtype;
};

namespace cpu {
void gemm(const GemmArgs& args);
// The path a CPU GEMM of this dtype takes in this process: "onednn-bf16"
// (native bf16), "widen-onednn-f32" / "widen-sgemm" (16-bit widened to fp32
// for oneDNN's f32 matmul / OpenBLAS sgemm),
// "onednn-f32" (f32 on an AVX-512 CPU), "openblas" (f32 elsewhere, f64) or
// "none".
const char* gemm_path(DType dtype);
// The oneDNN path alone (bf16 or f32): runs args and returns true, or returns
// false having done nothing (another dtype, the path is off, or a shape oneDNN
// can only run on its reference kernels). cpu::gemm tries it first for bf16
// and f32. The only CPU path that takes args.outer_batch > 1.
bool gemm_native(const GemmArgs& args);
// Whether gemm_native would run args (true: it will, and returns true).
bool gemm_native_takes(const GemmArgs& args);
// Why bf16 widens here ("" when it takes oneDNN): HG_CPU_GEMM=widen,
// HG_CPU_ISA=generic, no AVX512_BF16/AMX, or a build without oneDNN.
const char* gemm_bf16_widen_reason();
// Why f32 takes OpenBLAS here ("" when it takes oneDNN): HG_CPU_GEMM=widen or
// openblas, HG_CPU_ISA=generic, no AVX-512, or a build without oneDNN.
const char* gemm_f32_openblas_reason();
// Whether this build links oneDNN (CMake's HG_WITH_ONEDNN): without it every
// reason above is "this build has no oneDNN", whatever HG_CPU_GEMM says.
bool gemm_has_onednn();
}
#if defined(HG_WITH_CUDA)
namespace cuda {
// cuBLAS (cublasGemmStridedBatchedEx); args.epilogue must be none.
void gemm(const GemmArgs& args);
// cuBLASLt (Note [cuBLASLt GEMMs] in kernels/gemm/gemm.cu): runs args with its
// epilogue and returns true, or returns false having done nothing when
// cuBLASLt has no algorithm for this problem (shape, alignment, epilogue);
// the caller then takes another path. Bad arguments are an hg::Error.
bool gemm_lt(const GemmArgs& args);
// Process-wide count of cublasLtMatmul calls and of heuristic queries (the
// plan cache's misses), for tests.
struct LtStats {
  int64_t matmuls = 0;
  int64_t heuristic_queries = 0;
};
LtStats lt_stats();
}  // namespace cuda
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

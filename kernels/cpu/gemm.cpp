// CPU GEMM through OpenBLAS: sgemm for f32, dgemm for f64, and for f16/bf16
// the operands of each batch entry are widened to fp32, multiplied by sgemm
// (fp32 accumulation) and rounded once into the 16-bit output. This is the
// oracle for the CUDA GEMM, so it favours obviousness over speed.
#include <cblas.h>

#include <vector>

#include "core/half.h"
#include "kernels/gemm.h"

namespace hg::cpu {

namespace {

CBLAS_TRANSPOSE blas_trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

// Widens a stored (rows x cols, row stride ld) 16-bit matrix to dense fp32.
template <typename T>
void widen(const T* src, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
#pragma omp parallel for if (rows * cols > 65536) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[static_cast<size_t>(r * cols + c)] = static_cast<float>(src[r * ld + c]);
  }
}

template <typename T>
void gemm_16bit(const GemmArgs& g) {
  // Stored shapes: op(A) is m x k, so A is (k x m) when transposed.
  const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  std::vector<float> a32, b32, c32(static_cast<size_t>(g.m * g.n));
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  for (int64_t i = 0; i < g.batch; ++i) {
    if (i == 0 || g.stride_a != 0) widen(a + i * g.stride_a, a_rows, a_cols, g.lda, a32);
    if (i == 0 || g.stride_b != 0) widen(b + i * g.stride_b, b_rows, b_cols, g.ldb, b32);
    T* ci = c + i * g.stride_c;
    if (g.beta != 0.0f) {
      for (int64_t r = 0; r < g.m; ++r)
        for (int64_t col = 0; col < g.n; ++col)
          c32[static_cast<size_t>(r * g.n + col)] = static_cast<float>(ci[r * g.ldc + col]);
    }
    cblas_sgemm(CblasRowMajor, blas_trans(g.trans_a), blas_trans(g.trans_b), static_cast<int>(g.m),
                static_cast<int>(g.n), static_cast<int>(g.k), g.alpha, a32.data(),
                static_cast<int>(a_cols), b32.data(), static_cast<int>(b_cols), g.beta, c32.data(),
                static_cast<int>(g.n));
    for (int64_t r = 0; r < g.m; ++r)  // the one rounding
      for (int64_t col = 0; col < g.n; ++col) ci[r * g.ldc + col] = T(c32[static_cast<size_t>(r * g.n + col)]);
  }
}

}  // namespace

void gemm(const GemmArgs& g) {
  HG_CHECK(g.m <= INT32_MAX && g.n <= INT32_MAX && g.k <= INT32_MAX && g.lda <= INT32_MAX &&
               g.ldb <= INT32_MAX && g.ldc <= INT32_MAX,
           "matmul: dimensions above 2^31 are not supported by the BLAS interface (m=", g.m,
           " n=", g.n, " k=", g.k, "); split the product");
  const auto M = static_cast<int>(g.m), N = static_cast<int>(g.n), K = static_cast<int>(g.k);
  switch (g.dtype) {
    case DType::F32:
      for (int64_t i = 0; i < g.batch; ++i) {
        cblas_sgemm(CblasRowMajor, blas_trans(g.trans_a), blas_trans(g.trans_b), M, N, K, g.alpha,
                    static_cast<const float*>(g.a) + i * g.stride_a, static_cast<int>(g.lda),
                    static_cast<const float*>(g.b) + i * g.stride_b, static_cast<int>(g.ldb), g.beta,
                    static_cast<float*>(g.c) + i * g.stride_c, static_cast<int>(g.ldc));
      }
      return;
    case DType::F64:
      for (int64_t i = 0; i < g.batch; ++i) {
        cblas_dgemm(CblasRowMajor, blas_trans(g.trans_a), blas_trans(g.trans_b), M, N, K, g.alpha,
                    static_cast<const double*>(g.a) + i * g.stride_a, static_cast<int>(g.lda),
                    static_cast<const double*>(g.b) + i * g.stride_b, static_cast<int>(g.ldb), g.beta,
                    static_cast<double*>(g.c) + i * g.stride_c, static_cast<int>(g.ldc));
      }
      return;
    case DType::F16:
      return gemm_16bit<half>(g);
    case DType::BF16:
      return gemm_16bit<bfloat16>(g);
    default:
      HG_FAIL("matmul: no CPU GEMM for dtype ", g.dtype);
  }
}

}  // namespace hg::cpu

// CPU GEMM (kernels/gemm/CPU.md, "CPU GEMM paths"): f32 through oneDNN's matmul
// on AVX-512 CPUs (7-14% faster than OpenBLAS there), else OpenBLAS sgemm;
// dgemm for f64. bf16 takes oneDNN's native bf16 matmul where the CPU has
// AVX512_BF16 or AMX, and f16 oneDNN's f16 matmul where this oneDNN has one
// (kernels/gemm/gemm_onednn.h; HG_CPU_GEMM=widen forces the fallbacks:
// OpenBLAS for f32, widening for 16-bit; HG_CPU_GEMM=openblas only the f32
// one). 16-bit elsewhere widens: the operands of each batch entry
// are widened to fp32, multiplied on f32's path (oneDNN's f32 matmul on
// AVX-512 CPUs, else sgemm; fp32 accumulation either way) and rounded once
// into the 16-bit output. The widening and the rounding are vectorised
// (F16C/AVX2 with run-time dispatch, kernels/cpu/convert_simd.h) and split
// over the threads; they are exact / correctly rounded. oneDNN 2.6 has no f16
// matmul; later ones only on AVX512-FP16 CPUs (cpu::gemm_decision).
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/half.h"
#include "core/tensor.h"
#include "kernels/cpu/convert_simd.h"
#include "kernels/cpu/loops.h"
#include "kernels/gemm/gemm.h"

#if defined(HG_HAVE_ONEDNN)
#include "kernels/gemm/gemm_onednn.h"
#endif

namespace hg::cpu {

namespace {

CBLAS_TRANSPOSE blas_trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

// Below this many elements a conversion runs on one thread.
constexpr int64_t kConvertGrain = 1 << 16;

// An f32 scratch matrix from the CPU block cache (Note [CPU block cache] in
// core/allocator.cpp): a GEMM repeated at one shape reuses its blocks, with
// no page faults and no zero fill (a std::vector cost both: a third of the
// widening path's time at 1024^3).
struct Scratch {
  Tensor t;
  float* get(int64_t n) {
    if (!t.defined() || t.numel() < n) t = empty({std::max<int64_t>(n, 1)}, {.dtype = kF32});
    return t.data<float>();
  }
};

// Widens a stored (rows x cols, row stride ld) 16-bit matrix to dense fp32.
template <typename T>
float* widen(const T* src, int64_t rows, int64_t cols, int64_t ld, Scratch& dst) {
  float* d = dst.get(rows * cols);
  parallel_for(rows, rows * cols >= kConvertGrain, [&](int64_t r) { widen_row(src + r * ld, d + r * cols, cols); });
  return d;
}

template <typename T>
void gemm_16bit(const GemmArgs& g) {
  // Stored shapes: op(A) is m x k, so A is (k x m) when transposed.
  const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  Scratch as, bs, cs;
  float *a32 = nullptr, *b32 = nullptr, *c32 = nullptr;
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  for (int64_t i = 0; i < g.batch; ++i) {
    if (i == 0 || g.stride_a != 0) a32 = widen(a + i * g.stride_a, a_rows, a_cols, g.lda, as);
    if (i == 0 || g.stride_b != 0) b32 = widen(b + i * g.stride_b, b_rows, b_cols, g.ldb, bs);
    T* ci = c + i * g.stride_c;
    c32 = g.beta != 0.0f ? widen(ci, g.m, g.n, g.ldc, cs) : cs.get(g.m * g.n);
    // The f32 product on f32's own path, cpu::gemm: oneDNN's f32 matmul
    // where f32 takes it (on an AVX-512 CPU it is 5x OpenBLAS 0.3.21's sgemm
    // on a Sapphire Rapids-class Xeon, which that OpenBLAS does not
    // recognise), else sgemm.
    GemmArgs g32;
    g32.dtype = kF32;
    g32.trans_a = g.trans_a;
    g32.trans_b = g.trans_b;
    g32.m = g.m;
    g32.n = g.n;
    g32.k = g.k;
    g32.a = a32;
    g32.lda = a_cols;
    g32.b = b32;
    g32.ldb = b_cols;
    g32.c = c32;
    g32.ldc = g.n;
    g32.alpha = g.alpha;
    g32.beta = g.beta;
    gemm(g32);
    const float* c32p = c32;
    parallel_for(g.m, g.m * g.n >= kConvertGrain,
                 [&](int64_t r) { narrow_row(c32p + r * g.n, ci + r * g.ldc, g.n); });  // the one rounding
  }
}

}  // namespace

const char* gemm_bf16_widen_reason() {
#if defined(HG_HAVE_ONEDNN)
  return native_bf16_gemm_reason();
#else
  return "this build has no oneDNN";
#endif
}

bool gemm_native(const GemmArgs& g) {
#if defined(HG_HAVE_ONEDNN)
  return gemm_onednn(g);
#else
  (void)g;
  return false;
#endif
}

bool gemm_native_takes(const GemmArgs& g) {
#if defined(HG_HAVE_ONEDNN)
  return gemm_onednn_takes(g);
#else
  (void)g;
  return false;
#endif
}

const char* gemm_f32_openblas_reason() {
#if defined(HG_HAVE_ONEDNN)
  return native_f32_gemm_reason();
#else
  return "this build has no oneDNN";
#endif
}

bool gemm_has_onednn() {
#if defined(HG_HAVE_ONEDNN)
  return true;
#else
  return false;
#endif
}

const char* gemm_path(DType dtype) {
  switch (dtype) {
    case DType::F32:
#if defined(HG_HAVE_ONEDNN)
      if (native_f32_gemm()) return "onednn-f32";
#endif
      return "openblas";
    case DType::F64:
      return "openblas";
    case DType::BF16:
#if defined(HG_HAVE_ONEDNN)
      if (native_bf16_gemm()) return "onednn-bf16";
      if (native_f32_gemm()) return "widen-onednn-f32";
#endif
      return "widen-sgemm";
    case DType::F16:
#if defined(HG_HAVE_ONEDNN)
      if (native_f16_gemm()) return "onednn-f16";
      if (native_f32_gemm()) return "widen-onednn-f32";
#endif
      return "widen-sgemm";
    default:
      return "none";
  }
}

void gemm(const GemmArgs& g) {
  if (g.outer_batch != 1) {  // only oneDNN takes an outer batch level (GemmArgs)
    HG_CHECK(gemm_native(g), "matmul: an outer batch level (", g.outer_batch,
             " entries) runs only on oneDNN's matmul, which did not take this product; call cpu::gemm per outer entry");
    return;
  }
  HG_CHECK(g.m <= INT32_MAX && g.n <= INT32_MAX && g.k <= INT32_MAX && g.lda <= INT32_MAX &&
               g.ldb <= INT32_MAX && g.ldc <= INT32_MAX,
           "matmul: dimensions above 2^31 are not supported by the BLAS interface (m=", g.m,
           " n=", g.n, " k=", g.k, "); split the product");
  const auto M = static_cast<int>(g.m), N = static_cast<int>(g.n), K = static_cast<int>(g.k);
  switch (g.dtype) {
    case DType::F32:
      if (gemm_native(g)) return;
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
      if (gemm_native(g)) return;
      return gemm_16bit<half>(g);
    case DType::BF16:
      if (gemm_native(g)) return;
      return gemm_16bit<bfloat16>(g);
    default:
      HG_FAIL("matmul: no CPU GEMM for dtype ", g.dtype);
  }
}

}  // namespace hg::cpu

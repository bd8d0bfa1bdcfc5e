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
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/hash.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"
#include "kernels/gemm/gemm.h"

namespace hg::cuda {

namespace {

cudaDataType data_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F64: return CUDA_R_64F;
    case DType::F8E4M3:
      return CUDA_R_8F_E4M3;
    case DType::F8E5M2:
      return CUDA_R_8F_E5M2;
    default: HG_FAIL("matmul: no CUDA GEMM for dtype ", t);
  }
}

cublasOperation_t op_of(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

void gemm(const GemmArgs& g) {
  HG_CHECK(g.epilogue == GemmEpilogue::none && g.scale_a == nullptr && g.scale_b == nullptr && g.scale_d == nullptr &&
               !g.a_dtype && !g.b_dtype,
           "cuda::gemm: epilogues, scales and fp8 operands need cuda::gemm_lt");
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

// ---- cuBLASLt ------------------------------------------------------------------------------
//
// Note [cuBLASLt GEMMs]
// gemm_lt runs one GemmArgs through cublasLtMatmul with an epilogue.
//
// Row-major mapping. cuBLASLt is column-major. A row-major [r, c] matrix with
// row stride ld is the column-major [c, r] matrix with leading dimension ld, so
// row-major C = op(A) op(B) (m x n) is column-major C^T = op(B)^T op(A)^T
// (n x m): cuBLASLt's "A" is our B (op = trans_b), its "B" is our A (op =
// trans_a), its (m, n, k) is our (n, m, k); no data moves. In cuBLASLt's
// terms, then:
//   layout A_lt  our B: trans_b ? [k rows, n cols] : [n, k], ld = ldb
//   layout B_lt  our A: trans_a ? [m rows, k cols] : [k, m], ld = lda
//   layout C, D  [n rows, m cols], ld = ldc
//   BIAS         "length = rows of D, packed, broadcast over columns": rows of
//                D_lt are our columns, so bias[j], j < n: a per-output-feature
//                bias of a row-major [M, N] output. Its dtype is D's (the
//                cuBLASLt rule for 16/32-bit operands); with fp8 operands
//                it is bf16, or f16 for an f16 D (cuBLASLt's fp8 table).
//   GELU_AUX     aux is a D-shaped column-major matrix with leading dimension
//                ld_aux (a multiple of 8, >= rows of D = n): our row-major
//                [m, n] with row stride ld_aux. Its dtype defaults to D's.
//   DGELU        reads that aux (the GELU input) and multiplies the product by
//                gelu'(aux) elementwise.
//   BGRADB       "bias gradient from B_lt, length = columns of D, reduced over
//                k": B_lt is our A, columns of D_lt are our rows: bias[i] =
//                sum_k op(A)[i, k], i < m (our bgrad_a). For dW = g^T x (A =
//                g^T, k = the B*T rows) that is the bias gradient sum_rows g.
// The GELU of the epilogues is the tanh approximation (GPT-2's gelu).
//
// fp8. A and B of CUDA_R_8F_E4M3 / _E5M2 (a_dtype / b_dtype) with C = D of
// bf16, f16 or f32, CUBLAS_COMPUTE_32F, scales as device pointers (scale_a
// -> B_SCALE_POINTER, scale_b -> A_SCALE_POINTER: the swap again). cuBLASLt
// (on Ada and Hopper) takes only the "TN" problem: cuBLASLt's A transposed
// and B not, i.e. our trans_b = true and trans_a = false (row-major C = A
// B^T: a Linear forward y = x W^T as stored), with 16-byte aligned pointers
// and leading dimensions; kernels/fp8/fp8.h checks this before calling.
// CUBLASLT_MATMUL_DESC_FAST_ACCUM stays at its default 0 (partial sums
// promoted to fp32).
//
// Precision. f16/bf16 and f32 use CUBLAS_COMPUTE_32F (32F_FAST_TF32 when TF32
// is allowed), f64 CUBLAS_COMPUTE_64F; alpha/beta and the epilogue run in the
// compute type and D is rounded once. Split-K partial sums are reduced in
// fp32 only: the preference's reduction-scheme mask drops
// CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, the cuBLASLt form of the
// CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION the cuBLAS handles carry
// (kernels/gemm/README.md, "Reduced-precision reduction").
//
// Plans. The heuristic's first algorithm is cached per (device, dtype, shape,
// leading dims, batch strides, transposes, epilogue, TF32, whether C is read,
// pointer alignment): heuristics depend on all of them, and a problem with no
// algorithm is cached as such (gemm_lt returns false at once). Descriptors are
// built per call (host-only, no device work), so the cache holds plain algo
// structs and is safe to share across threads.
//
// Workspace. The heuristic may ask for up to kLtWorkspaceBytes (32 MiB, what
// NVIDIA recommends for Hopper); the bytes come from the caching allocator on
// the current stream, which orders their reuse after this GEMM.
namespace {

constexpr uint64_t kLtWorkspaceBytes = uint64_t{32} << 20;

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::none:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::gelu:
      return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::gelu_bias:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::gelu_aux:
      return CUBLASLT_EPILOGUE_GELU_AUX;
    case GemmEpilogue::gelu_aux_bias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case GemmEpilogue::dgelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case GemmEpilogue::bgrad_a:
      return CUBLASLT_EPILOGUE_BGRADB;
  }
  HG_FAIL("gemm_lt: unknown epilogue");
}

bool needs_bias(GemmEpilogue e) {
  return e == GemmEpilogue::bias || e == GemmEpilogue::gelu_bias || e == GemmEpilogue::gelu_aux_bias ||
         e == GemmEpilogue::bgrad_a;
}
bool needs_aux(GemmEpilogue e) {
  return e == GemmEpilogue::gelu_aux || e == GemmEpilogue::gelu_aux_bias || e == GemmEpilogue::dgelu;
}

// The largest power of two (<= 16) dividing every pointer's address.
int alignment_of(std::initializer_list<const void*> pointers) {
  int align = 16;
  for (const void* p : pointers) {
    if (p == nullptr) continue;
    const auto address = reinterpret_cast<uintptr_t>(p);
    while (align > 1 && address % static_cast<uintptr_t>(align) != 0) align /= 2;
  }
  return align;
}

struct PlanKey {
  int device;
  DType dtype;
  DType a_dtype, b_dtype;
  bool trans_a, trans_b, tf32, reads_c, scaled;
  GemmEpilogue epilogue;
  int align;
  int64_t m, n, k, batch, lda, ldb, ldc, ld_aux, stride_a, stride_b, stride_c;
  bool operator==(const PlanKey& o) const { return std::memcmp(this, &o, sizeof(PlanKey)) == 0; }
};

struct Plan {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

struct PlanCache {
  std::mutex mutex;
  std::unordered_map<PlanKey, Plan, BytesHash<PlanKey>> plans;
  int64_t matmuls = 0, queries = 0;
};

PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache;  // immortal: GEMMs may run from static destructors
  return *cache;
}

// Owners of the per-call descriptors.
struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { (void)cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { (void)cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { (void)cublasLtMatmulPreferenceDestroy(p); }
};
using DescPtr = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using LayoutPtr = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using PrefPtr = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  HG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(T)));
}

LayoutPtr make_layout(cudaDataType type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t raw = nullptr;
  HG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  LayoutPtr layout(raw);
  if (batch > 1) {
    const auto count = static_cast<int32_t>(batch);
    HG_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    const int64_t offset = stride;
    HG_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof(offset)));
  }
  return layout;
}

}  // namespace

bool gemm_lt(const GemmArgs& g) {
  HG_CHECK(g.m <= INT32_MAX && g.n <= INT32_MAX && g.k <= INT32_MAX && g.batch <= INT32_MAX,
           "gemm_lt: dimensions above 2^31 are not supported (m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch,
           ")");
  HG_CHECK(g.epilogue == GemmEpilogue::none || g.batch == 1, "gemm_lt: epilogues need batch == 1, got ", g.batch);
  HG_CHECK(!needs_bias(g.epilogue) || g.bias != nullptr, "gemm_lt: this epilogue needs a bias vector");
  HG_CHECK(!needs_aux(g.epilogue) || (g.aux != nullptr && g.ld_aux >= g.n && g.ld_aux % 8 == 0),
           "gemm_lt: this epilogue needs an aux matrix with ld_aux >= n (", g.n, ") and a multiple of 8, got ",
           g.ld_aux);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return true;
  DeviceGuard guard(g.device_index);
  const cudaDataType type = data_type(g.dtype);
  const cudaDataType type_a = data_type(g.a_dtype.value_or(g.dtype));
  const cudaDataType type_b = data_type(g.b_dtype.value_or(g.dtype));
  const bool fp8 = g.a_dtype.has_value() || g.b_dtype.has_value();
  HG_CHECK(!fp8 || (g.trans_b && !g.trans_a && g.batch == 1 && g.dtype != DType::F64),
           "gemm_lt: fp8 operands need trans_b, no trans_a, batch 1 and an f32/f16/bf16 C");
  const cudaDataType bias_type = fp8 ? (g.dtype == DType::F16 ? CUDA_R_16F : CUDA_R_16BF) : type;
  const bool f64 = g.dtype == DType::F64;
  cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  if (g.dtype == DType::F32 && g.allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool scaled = g.scale_a != nullptr || g.scale_b != nullptr || g.scale_d != nullptr;

  cublasLtMatmulDesc_t raw_desc = nullptr;
  HG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, compute, f64 ? CUDA_R_64F : CUDA_R_32F));
  DescPtr desc(raw_desc);
  // Swapped operands (the row-major mapping above).
  set_desc(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(op_of(g.trans_b)));
  set_desc(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(op_of(g.trans_a)));
  set_desc(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(lt_epilogue(g.epilogue)));
  if (needs_bias(g.epilogue)) {
    set_desc(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(g.bias));
    set_desc(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(bias_type));
  }
  if (needs_aux(g.epilogue)) {
    set_desc(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(g.aux));
    set_desc(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ld_aux);
    set_desc(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, static_cast<int32_t>(type));
  }
  if (g.scale_a != nullptr)
    set_desc(raw_desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(g.scale_a));
  if (g.scale_b != nullptr)
    set_desc(raw_desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(g.scale_b));
  if (g.scale_d != nullptr)
    set_desc(raw_desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, static_cast<const void*>(g.scale_d));

  const LayoutPtr a_lt = g.trans_b ? make_layout(type_b, g.k, g.n, g.ldb, g.batch, g.stride_b)
                                   : make_layout(type_b, g.n, g.k, g.ldb, g.batch, g.stride_b);
  const LayoutPtr b_lt = g.trans_a ? make_layout(type_a, g.m, g.k, g.lda, g.batch, g.stride_a)
                                   : make_layout(type_a, g.k, g.m, g.lda, g.batch, g.stride_a);
  const LayoutPtr c_lt = make_layout(type, g.n, g.m, g.ldc, g.batch, g.stride_c);

  PlanKey key;
  std::memset(&key, 0, sizeof(key));
  key.device = g.device_index;
  key.dtype = g.dtype;
  key.a_dtype = g.a_dtype.value_or(g.dtype);
  key.b_dtype = g.b_dtype.value_or(g.dtype);
  key.trans_a = g.trans_a;
  key.trans_b = g.trans_b;
  key.tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  key.reads_c = g.beta != 0.0f;
  key.scaled = scaled;
  key.epilogue = g.epilogue;
  key.align = alignment_of({g.a, g.b, g.c, g.bias, g.aux});
  key.m = g.m;
  key.n = g.n;
  key.k = g.k;
  key.batch = g.batch;
  key.lda = g.lda;
  key.ldb = g.ldb;
  key.ldc = g.ldc;
  key.ld_aux = g.ld_aux;
  key.stride_a = g.stride_a;
  key.stride_b = g.stride_b;
  key.stride_c = g.stride_c;
  cublasLtHandle_t handle = cublaslt_handle();
  PlanCache& cache = plan_cache();
  Plan plan;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    const auto it = cache.plans.find(key);
    if (it != cache.plans.end()) {
      plan = it->second;
    } else {
      cublasLtMatmulPreference_t raw_pref = nullptr;
      HG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
      PrefPtr pref(raw_pref);
      const uint64_t max_workspace = kLtWorkspaceBytes;
      HG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &max_workspace, sizeof(max_workspace)));
      const uint32_t schemes =
          CUBLASLT_REDUCTION_SCHEME_MASK & ~static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
      HG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                           &schemes, sizeof(schemes)));
      cublasLtMatmulHeuristicResult_t result{};
      int returned = 0;
      const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, raw_desc, a_lt.get(), b_lt.get(), c_lt.get(),
                                                                   c_lt.get(), raw_pref, 1, &result, &returned);
      ++cache.queries;
      // NOT_SUPPORTED (no heuristic for this configuration) or zero results:
      // no plan; anything else is a real failure.
      if (status != CUBLAS_STATUS_NOT_SUPPORTED) HG_CUBLAS_CHECK(status);
      plan.found = status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS;
      if (plan.found) {
        plan.algo = result.algo;
        plan.workspace = result.workspaceSize;
      }
      cache.plans.emplace(key, plan);
    }
    if (plan.found) ++cache.matmuls;
  }
  if (!plan.found) return false;
  Tensor workspace;
  if (plan.workspace > 0) {
    workspace = empty({static_cast<int64_t>(plan.workspace)}, {.dtype = kU8, .device = Device::cuda(g.device_index)});
  }
  const double alpha64 = g.alpha, beta64 = g.beta;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &g.alpha;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &g.beta;
  const cublasStatus_t run = cublasLtMatmul(
      handle, raw_desc, alpha, g.b, a_lt.get(), g.a, b_lt.get(), beta, g.c, c_lt.get(), g.c, c_lt.get(), &plan.algo,
      workspace.defined() ? workspace.data_ptr() : nullptr, plan.workspace, current_stream(g.device_index).handle());
  if (run == CUBLAS_STATUS_NOT_SUPPORTED) {
    // The heuristic offered an algorithm that the matmul then refuses (seen on
    // an H200 for a 16-bit bias GEMM whose rows are a strided view): no plan
    // for this problem from now on, and the caller falls back, having written
    // nothing (cuBLASLt checks before it launches).
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.plans[key].found = false;
    --cache.matmuls;
    return false;
  }
  HG_CUBLAS_CHECK(run);
  return true;
}

LtStats lt_stats() {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return {cache.matmuls, cache.queries};
}

}  // namespace hg::cuda

// cuda-emu stand-ins for cuBLAS and cuBLASLt: handle bookkeeping and the two
// mixed-precision GEMMs the backend calls, computed on the CPU.
//
// Precision contract (the same as the real library's on a Hopper GPU):
//   - CUBLAS_COMPUTE_32F: inputs widened to fp32 exactly, products summed in
//     fp32, alpha/beta applied in fp32, one rounding to C's type on store;
//   - CUBLAS_COMPUTE_32F_FAST_TF32 / _FAST_16F / _FAST_16BF (fp32 data): the
//     inputs are first rounded to TF32 / fp16 / bf16, as tensor cores do; a
//     handle in CUBLAS_TF32_TENSOR_OP_MATH mode turns COMPUTE_32F on fp32 data
//     into TF32 too (that is how PyTorch's allow_tf32 reaches cuBLAS);
//   - CUBLAS_COMPUTE_64F: fp64 data, fp64 accumulation;
//   - beta == 0 means C is not read (NaN in C does not leak into the result).
// Arguments are validated like the real library: bad sizes, transposes or
// leading dimensions give CUBLAS_STATUS_INVALID_VALUE, unsupported type
// combinations CUBLAS_STATUS_NOT_SUPPORTED. Beyond the real library, each
// matrix's extent must lie inside one live device allocation, so a wrong
// leading dimension or stride fails loudly (CUBLAS_STATUS_EXECUTION_FAILED and
// a sticky cudaErrorIllegalAddress, which is what the GPU would report).
//
// Napkin math: each output element reads 2k inputs; op(A) and op(B) are first
// packed into contiguous rows of widened values so the inner loop is a unit-
// stride dot product (~1 GFLOP/s on one core: fine for test-sized problems).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "core/float8.h"
#include "core/half.h"
#include "runtime/emu/runtime_internal.h"

struct cublasContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

struct cublasLtContext {
  int device = 0;
};

namespace {

// What the inputs are rounded to before the multiply (tensor-core formats).
enum class InputRounding { kNone, kTf32, kHalf, kBfloat16 };

size_t element_size(cudaDataType type) {
  switch (type) {
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2:
      return 1;
    case CUDA_R_16F:
    case CUDA_R_16BF:
      return 2;
    case CUDA_R_32F:
      return 4;
    case CUDA_R_64F:
      return 8;
    default:
      return 0;
  }
}

double load(const void* base, cudaDataType type, int64_t index) {
  switch (type) {
    case CUDA_R_8F_E4M3:
      return hg::detail::e4m3_bits_to_float(static_cast<const uint8_t*>(base)[index]);
    case CUDA_R_8F_E5M2:
      return hg::detail::e5m2_bits_to_float(static_cast<const uint8_t*>(base)[index]);
    case CUDA_R_16F:
      return hg::detail::half_bits_to_float(static_cast<const uint16_t*>(base)[index]);
    case CUDA_R_16BF:
      return hg::detail::bfloat16_bits_to_float(static_cast<const uint16_t*>(base)[index]);
    case CUDA_R_32F:
      return static_cast<const float*>(base)[index];
    case CUDA_R_64F:
      return static_cast<const double*>(base)[index];
    default:
      return 0.0;
  }
}

void store(void* base, cudaDataType type, int64_t index, double value) {
  switch (type) {
    case CUDA_R_16F:
      static_cast<uint16_t*>(base)[index] = hg::detail::float_to_half_bits(static_cast<float>(value));
      break;
    case CUDA_R_16BF:
      static_cast<uint16_t*>(base)[index] = hg::detail::float_to_bfloat16_bits(static_cast<float>(value));
      break;
    case CUDA_R_32F:
      static_cast<float*>(base)[index] = static_cast<float>(value);
      break;
    case CUDA_R_64F:
      static_cast<double*>(base)[index] = value;
      break;
    default:
      break;
  }
}

// fp32 -> TF32 (10 explicit mantissa bits), round to nearest, ties away from
// zero, as the cvt.rna.tf32.f32 instruction does. Inf/NaN pass through.
float round_to_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) {
    bits += 0x1000u;
    bits &= 0xffffe000u;
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

float apply_rounding(float x, InputRounding rounding) {
  switch (rounding) {
    case InputRounding::kTf32:
      return round_to_tf32(x);
    case InputRounding::kHalf:
      return hg::detail::half_bits_to_float(hg::detail::float_to_half_bits(x));
    case InputRounding::kBfloat16:
      return hg::detail::bfloat16_bits_to_float(hg::detail::float_to_bfloat16_bits(x));
    case InputRounding::kNone:
      return x;
  }
  return x;
}

struct GemmCall {
  cublasOperation_t transa, transb;
  int m, n, k;
  const void* alpha;
  const void* A;
  cudaDataType Atype;
  int lda;
  long long stride_a;
  const void* B;
  cudaDataType Btype;
  int ldb;
  long long stride_b;
  const void* beta;
  void* C;
  cudaDataType Ctype;
  int ldc;
  long long stride_c;
  int batch_count;
  cublasComputeType_t compute_type;
};

bool is_op(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

// Checks the type combination against cuBLAS's GemmEx table (the subset we
// emulate) and picks the accumulator and input rounding.
cublasStatus_t check_types(const GemmCall& g, const cublasContext& handle, bool* use_double, InputRounding* rounding) {
  *use_double = false;
  *rounding = InputRounding::kNone;
  if (g.Atype != g.Btype) return CUBLAS_STATUS_NOT_SUPPORTED;
  const cudaDataType ab = g.Atype;
  switch (g.compute_type) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
      if (ab == CUDA_R_32F) {
        if (g.Ctype != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
        const int mode = handle.math_mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
        if (g.compute_type == CUBLAS_COMPUTE_32F && mode == CUBLAS_TF32_TENSOR_OP_MATH) {
          *rounding = InputRounding::kTf32;
        }
        return CUBLAS_STATUS_SUCCESS;
      }
      if (ab == CUDA_R_16F || ab == CUDA_R_16BF) {
        return g.Ctype == ab || g.Ctype == CUDA_R_32F ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
      }
      return CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
      if (ab != CUDA_R_32F || g.Ctype != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
      *rounding = g.compute_type == CUBLAS_COMPUTE_32F_FAST_TF32  ? InputRounding::kTf32
                  : g.compute_type == CUBLAS_COMPUTE_32F_FAST_16F ? InputRounding::kHalf
                                                                  : InputRounding::kBfloat16;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
      if (ab != CUDA_R_64F || g.Ctype != CUDA_R_64F) return CUBLAS_STATUS_NOT_SUPPORTED;
      *use_double = true;
      return CUBLAS_STATUS_SUCCESS;
    default:
      // CUBLAS_COMPUTE_16F / 32I and friends: not emulated (halfgrad never
      // accumulates in fp16).
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// Whether a column-major rows x cols matrix with leading dimension ld, repeated
// `batch` times `stride` elements apart, lies inside one device allocation.
bool matrix_in_device_memory(const void* base, size_t elem, int rows, int cols, int ld, long long stride, int batch) {
  if (rows == 0 || cols == 0 || batch == 0) return true;
  const int64_t extent = static_cast<int64_t>(cols - 1) * ld + rows;
  if (stride < 0) return false;
  const int64_t last = static_cast<int64_t>(batch - 1) * stride + extent;
  return hg::emu::is_device_range(base, static_cast<size_t>(last) * elem);
}

// op(X)[r, c] for a column-major X: X[r + c*ld] when op is N, X[c + r*ld] else.
template <typename Acc>
void pack_rows(std::vector<Acc>& out, const void* base, cudaDataType type, int64_t offset, cublasOperation_t op, int ld,
               int rows, int depth, bool rows_are_cols, InputRounding rounding) {
  // Produces out[r * depth + p] = op(X)[r, p] (for A: r = i, p = reduction) or
  // op(X)[p, r] (for B: rows_are_cols, r = j). Either way the reduction index
  // p is contiguous in `out`.
  out.resize(static_cast<size_t>(rows) * depth);
  for (int r = 0; r < rows; ++r) {
    for (int p = 0; p < depth; ++p) {
      const int row = rows_are_cols ? p : r;  // row/col of op(X)
      const int col = rows_are_cols ? r : p;
      const int64_t index =
          op == CUBLAS_OP_N ? row + static_cast<int64_t>(col) * ld : col + static_cast<int64_t>(row) * ld;
      const double value = load(base, type, offset + index);
      out[static_cast<size_t>(r) * depth + p] =
          std::is_same_v<Acc, float> ? static_cast<Acc>(apply_rounding(static_cast<float>(value), rounding))
                                     : static_cast<Acc>(value);
    }
  }
}

template <typename Acc>
void run_gemm(const GemmCall& g, InputRounding rounding) {
  const Acc alpha = *static_cast<const Acc*>(g.alpha);
  const Acc beta = *static_cast<const Acc*>(g.beta);
  std::vector<Acc> a_rows, b_cols;  // [m, k] and [n, k], reduction index contiguous
  for (int batch = 0; batch < g.batch_count; ++batch) {
    const int64_t c_offset = batch * g.stride_c;
    if (g.k > 0) {
      pack_rows(a_rows, g.A, g.Atype, batch * g.stride_a, g.transa, g.lda, g.m, g.k, false, rounding);
      pack_rows(b_cols, g.B, g.Btype, batch * g.stride_b, g.transb, g.ldb, g.n, g.k, true, rounding);
    }
    for (int j = 0; j < g.n; ++j) {
      for (int i = 0; i < g.m; ++i) {
        Acc acc = 0;
        if (g.k > 0) {
          const Acc* a = &a_rows[static_cast<size_t>(i) * g.k];
          const Acc* b = &b_cols[static_cast<size_t>(j) * g.k];
          for (int p = 0; p < g.k; ++p) acc += a[p] * b[p];
        }
        const int64_t c_index = c_offset + i + static_cast<int64_t>(j) * g.ldc;
        Acc result = alpha * acc;
        if (beta != Acc(0)) result += beta * static_cast<Acc>(load(g.C, g.Ctype, c_index));
        store(g.C, g.Ctype, c_index, static_cast<double>(result));
      }
    }
  }
}

cublasStatus_t gemm(cublasHandle_t handle, const GemmCall& g) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!is_op(g.transa) || !is_op(g.transb) || g.m < 0 || g.n < 0 || g.k < 0 || g.batch_count < 0) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const int a_rows = g.transa == CUBLAS_OP_N ? g.m : g.k;
  const int b_rows = g.transb == CUBLAS_OP_N ? g.k : g.n;
  if (g.lda < std::max(1, a_rows) || g.ldb < std::max(1, b_rows) || g.ldc < std::max(1, g.m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (g.alpha == nullptr || g.beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  bool use_double = false;
  InputRounding rounding = InputRounding::kNone;
  if (const cublasStatus_t s = check_types(g, *handle, &use_double, &rounding); s != CUBLAS_STATUS_SUCCESS) {
    return s;
  }
  if (g.m == 0 || g.n == 0 || g.batch_count == 0) return CUBLAS_STATUS_SUCCESS;
  const int a_cols = g.transa == CUBLAS_OP_N ? g.k : g.m;
  const int b_cols = g.transb == CUBLAS_OP_N ? g.n : g.k;
  const bool in_bounds =
      (g.k == 0 ||
       (matrix_in_device_memory(g.A, element_size(g.Atype), a_rows, a_cols, g.lda, g.stride_a, g.batch_count) &&
        matrix_in_device_memory(g.B, element_size(g.Btype), b_rows, b_cols, g.ldb, g.stride_b, g.batch_count))) &&
      matrix_in_device_memory(g.C, element_size(g.Ctype), g.m, g.n, g.ldc, g.stride_c, g.batch_count);
  if (!in_bounds) {
    hg::emu::set_last_error(cudaErrorIllegalAddress);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  if (use_double) {
    run_gemm<double>(g, rounding);
  } else {
    run_gemm<float>(g, rounding);
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// ---- cuBLAS handles -------------------------------------------------------------

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // the failure is reported as the cuBLAS status
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  auto* created = new (std::nothrow) cublasContext;
  if (created == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  created->device = hg::emu::detail::current_device();
  *handle = created;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  return CUBLAS_STATUS_SUCCESS;  // the CPU stand-in needs no workspace
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!hg::emu::detail::is_valid_stream(streamId)) return CUBLAS_STATUS_INVALID_VALUE;
  handle->stream = streamId;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *streamId = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // Device memory is host memory here, so alpha/beta read the same either way.
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base < CUBLAS_DEFAULT_MATH || base > CUBLAS_TF32_TENSOR_OP_MATH) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "error detected trying to check the license";
  }
  return "unknown error";
}

// ---- GEMMs --------------------------------------------------------------------

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  const GemmCall args{transa, transb, m, n,    k, alpha, A,   Atype, lda, 0,          B,
                      Btype,  ldb,    0, beta, C, Ctype, ldc, 0,     1,   computeType};
  return gemm(handle, args);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo) {
  const GemmCall args{transa, transb, m,       n,    k, alpha, A,   Atype,   lda,        strideA,    B,
                      Btype,  ldb,    strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType};
  return gemm(handle, args);
}

// ---- cuBLASLt handles -----------------------------------------------------------

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* created = new (std::nothrow) cublasLtContext;
  if (created == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  created->device = hg::emu::detail::current_device();
  *lightHandle = created;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

// ---- cuBLASLt matmul ------------------------------------------------------------
//
// The stand-in behind halfgrad's cuBLASLt wrapper (kernels/gemm/gemm.cu). The
// product is the same CPU reference as cublasGemmEx's (inputs widened exactly,
// fp32 accumulation for the 32F compute types, fp64 for 64F), then the
// epilogue in the accumulator type, then one rounding to D's type:
//   BIAS        d = alpha*acc + beta*c + bias[row]            (bias: D's type, length = D rows)
//   GELU        d = gelu(...)                                  tanh approximation, as GPT-2's
//   GELU_AUX    aux[row + col*ld_aux] = the GELU input (rounded to the aux type), d = gelu(it)
//   *_BIAS      the bias is added before the GELU (and before aux is written)
//   DGELU       d = (alpha*acc + beta*c) * gelu'(aux[row + col*ld_aux])
//   BGRADB      d as DEFAULT; bias[col] = sum over k of op(B)[k, col] (fp32, one rounding)
// The aux type defaults to D's type; its leading dimension must be a multiple
// of 8 and at least D's rows, as the real library requires.
//
// fp8 (A and B CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2, not both E5M2), checked
// against cuBLASLt's fp8 rules: CUBLAS_COMPUTE_32F with CUDA_R_32F scales,
// the "TN" layout (transa T, transb N), 16-byte leading dimensions for A, B,
// C and D (k a multiple of 16), D = C of type bf16, f16 or f32 (fp8 D is not
// emulated), bias bf16 (f16 for an f16 D), no epilogue but DEFAULT and BIAS,
// batch 1. The A and B scale pointers (f32 in device memory, null = 1)
// multiply the product: d = alpha * scale_A * scale_B * acc + beta*c + bias,
// acc the fp32 sum of the exact products; a D scale pointer is refused (it
// applies to fp8 outputs only). Scale pointers on 16/32/64-bit GEMMs are
// refused too, as the real library does.

namespace {

struct LtLayout {
  cudaDataType type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batch_stride = 0;
};

struct LtDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale_type = CUDA_R_32F;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t aux_type = -1;
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  const float* d_scale = nullptr;
};

bool is_fp8_type(cudaDataType t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

struct LtPreference {
  uint64_t max_workspace = 0;
  uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
};

LtLayout* layout_of(cublasLtMatrixLayout_t l) { return reinterpret_cast<LtLayout*>(l); }
LtDesc* desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<LtDesc*>(d); }
LtPreference* pref_of(cublasLtMatmulPreference_t p) { return reinterpret_cast<LtPreference*>(p); }

template <typename T>
cublasStatus_t read_attr(T* out, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool has_bias(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool has_gelu(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool uses_aux(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
}
bool is_emulated_epilogue(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || has_bias(e) || has_gelu(e) || e == CUBLASLT_EPILOGUE_DGELU ||
         e == CUBLASLT_EPILOGUE_BGRADB;
}

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCoeff = 0.044715;

double gelu_tanh(double x) {
  const double u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

double gelu_tanh_grad(double x) {
  const double u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  const double t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluCoeff * x * x);
}

// The problem a descriptor set describes, checked like the real library:
// op(A) m x k, op(B) k x n, C and D m x n, one batch count.
struct LtProblem {
  GemmCall call{};
  const LtLayout* d = nullptr;
  cudaDataType aux_type = CUDA_R_32F;
  cudaDataType bias_type = CUDA_R_32F;
  bool fp8 = false;
};

// cuBLASLt's fp8 rules (the comment above); SUCCESS when the problem meets them.
cublasStatus_t check_fp8(const LtDesc& desc, const LtLayout& a, const LtLayout& b, const LtLayout& d, uint64_t k) {
  if (a.type == CUDA_R_8F_E5M2 && b.type == CUDA_R_8F_E5M2) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!is_fp8_type(a.type) || !is_fp8_type(b.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale_type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc.transa != CUBLAS_OP_T || desc.transb != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.type != CUDA_R_16BF && d.type != CUDA_R_16F && d.type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc.d_scale != nullptr || d.batch != 1) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT && desc.epilogue != CUBLASLT_EPILOGUE_BIAS)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const int64_t d_bytes = static_cast<int64_t>(element_size(d.type));
  if (k % 16 != 0 || a.ld % 16 != 0 || b.ld % 16 != 0 || (d.ld * d_bytes) % 16 != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_problem(const LtDesc& desc, const LtLayout& a, const LtLayout& b, const LtLayout& c,
                             const LtLayout& d, LtProblem* out) {
  if (!is_op(desc.transa) || !is_op(desc.transb)) return CUBLAS_STATUS_INVALID_VALUE;
  const bool fp8 = is_fp8_type(a.type) || is_fp8_type(b.type);
  const bool scaled = desc.a_scale != nullptr || desc.b_scale != nullptr || desc.d_scale != nullptr;
  if (!is_emulated_epilogue(desc.epilogue) || (scaled && !fp8)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint64_t m = d.rows, n = d.cols;
  const uint64_t k = desc.transa == CUBLAS_OP_N ? a.cols : a.rows;
  if (fp8) {
    if (const cublasStatus_t s = check_fp8(desc, a, b, d, k); s != CUBLAS_STATUS_SUCCESS) return s;
  }
  out->fp8 = fp8;
  // The bias type: D's, except bf16 for an fp8 GEMM with an f32 D.
  const cudaDataType want_bias = fp8 && d.type == CUDA_R_32F ? CUDA_R_16BF : d.type;
  out->bias_type = desc.bias_type == -1 ? want_bias : static_cast<cudaDataType>(desc.bias_type);
  const uint64_t am = desc.transa == CUBLAS_OP_N ? a.rows : a.cols;
  const uint64_t bk = desc.transb == CUBLAS_OP_N ? b.rows : b.cols;
  const uint64_t bn = desc.transb == CUBLAS_OP_N ? b.cols : b.rows;
  if (am != m || bk != k || bn != n || c.rows != m || c.cols != n || c.type != d.type)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (a.batch != b.batch || a.batch != c.batch || a.batch != d.batch || a.batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (a.ld < std::max<int64_t>(1, static_cast<int64_t>(a.rows)) ||
      b.ld < std::max<int64_t>(1, static_cast<int64_t>(b.rows)) ||
      c.ld < std::max<int64_t>(1, static_cast<int64_t>(c.rows)) ||
      d.ld < std::max<int64_t>(1, static_cast<int64_t>(d.rows)) || a.ld > INT32_MAX || b.ld > INT32_MAX ||
      c.ld > INT32_MAX || d.ld > INT32_MAX) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (has_bias(desc.epilogue) || desc.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    if (desc.bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (out->bias_type != want_bias) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (d.batch != 1) return CUBLAS_STATUS_NOT_SUPPORTED;  // no bias batch stride emulated
  }
  if (uses_aux(desc.epilogue)) {
    if (desc.aux == nullptr || desc.aux_ld < static_cast<int64_t>(m) || desc.aux_ld % 8 != 0 || d.batch != 1) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
    out->aux_type = desc.aux_type == -1 ? d.type : static_cast<cudaDataType>(desc.aux_type);
    if (out->aux_type != d.type) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  GemmCall& g = out->call;
  g.transa = desc.transa;
  g.transb = desc.transb;
  g.m = static_cast<int>(m);
  g.n = static_cast<int>(n);
  g.k = static_cast<int>(k);
  g.Atype = a.type;
  g.lda = static_cast<int>(a.ld);
  g.stride_a = a.batch_stride;
  g.Btype = b.type;
  g.ldb = static_cast<int>(b.ld);
  g.stride_b = b.batch_stride;
  g.Ctype = d.type;
  g.ldc = static_cast<int>(d.ld);
  g.stride_c = d.batch_stride;
  g.batch_count = a.batch;
  g.compute_type = desc.compute;
  out->d = &d;
  if (fp8) return CUBLAS_STATUS_SUCCESS;  // fp32 accumulation of exactly widened inputs
  bool use_double = false;
  InputRounding rounding = InputRounding::kNone;
  const cublasContext plain_math{};
  return check_types(g, plain_math, &use_double, &rounding);
}

template <typename Acc>
void run_lt(const LtDesc& desc, const LtProblem& p, const LtLayout& c_layout, const void* alpha_ptr,
            const void* beta_ptr, const void* C, void* D, InputRounding rounding) {
  const GemmCall& g = p.call;
  Acc alpha = *static_cast<const Acc*>(alpha_ptr);
  // fp8: the operand scales (device memory, which is host memory here) fold into alpha.
  if (desc.a_scale != nullptr) alpha *= static_cast<Acc>(*desc.a_scale);
  if (desc.b_scale != nullptr) alpha *= static_cast<Acc>(*desc.b_scale);
  const Acc beta = *static_cast<const Acc*>(beta_ptr);
  const uint32_t e = desc.epilogue;
  std::vector<Acc> a_rows, b_cols;
  for (int batch = 0; batch < g.batch_count; ++batch) {
    if (g.k > 0) {
      pack_rows(a_rows, g.A, g.Atype, batch * g.stride_a, g.transa, g.lda, g.m, g.k, false, rounding);
      pack_rows(b_cols, g.B, g.Btype, batch * g.stride_b, g.transb, g.ldb, g.n, g.k, true, rounding);
    }
    for (int j = 0; j < g.n; ++j) {
      if (e == CUBLASLT_EPILOGUE_BGRADB) {  // bias[j] = sum over k of op(B)[k, j]
        Acc sum = 0;
        for (int q = 0; q < g.k; ++q) sum += b_cols[static_cast<size_t>(j) * g.k + q];
        store(const_cast<void*>(desc.bias), p.bias_type, j, static_cast<double>(sum));
      }
      for (int i = 0; i < g.m; ++i) {
        Acc acc = 0;
        if (g.k > 0) {
          const Acc* a = &a_rows[static_cast<size_t>(i) * g.k];
          const Acc* b = &b_cols[static_cast<size_t>(j) * g.k];
          for (int q = 0; q < g.k; ++q) acc += a[q] * b[q];
        }
        Acc v = alpha * acc;
        if (beta != Acc(0)) {
          const int64_t c_index = batch * c_layout.batch_stride + i + static_cast<int64_t>(j) * c_layout.ld;
          v += beta * static_cast<Acc>(load(C, c_layout.type, c_index));
        }
        if (has_bias(e)) v += static_cast<Acc>(load(desc.bias, p.bias_type, i));
        const int64_t aux_index = i + static_cast<int64_t>(j) * desc.aux_ld;
        double out = static_cast<double>(v);
        if (e == CUBLASLT_EPILOGUE_DGELU) {
          out = static_cast<double>(v) * gelu_tanh_grad(load(desc.aux, p.aux_type, aux_index));
        } else if (has_gelu(e)) {
          if (uses_aux(e)) store(desc.aux, p.aux_type, aux_index, static_cast<double>(v));
          out = gelu_tanh(static_cast<double>(v));
        }
        store(D, p.d->type, batch * p.d->batch_stride + i + static_cast<int64_t>(j) * p.d->ld,
              static_cast<double>(static_cast<Acc>(out)));
      }
    }
  }
}

}  // namespace

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (matLayout == nullptr || element_size(type) == 0) return CUBLAS_STATUS_INVALID_VALUE;
  auto* l = new (std::nothrow) LtLayout;
  if (l == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  delete layout_of(matLayout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
  LtLayout* l = layout_of(matLayout);
  if (l == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return read_attr(&l->batch, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return read_attr(&l->batch_stride, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return read_attr(&l->ld, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return read_attr(&l->rows, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return read_attr(&l->cols, buf, sizeInBytes);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;  // row order and friends are not emulated
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  if (matmulDesc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* d = new (std::nothrow) LtDesc;
  if (d == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  d->compute = computeType;
  d->scale_type = scaleType;
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  delete desc_of(matmulDesc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  LtDesc* d = desc_of(matmulDesc);
  if (d == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int32_t op = 0;
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
      s = read_attr(&op, buf, sizeInBytes);
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->transa : d->transb) = static_cast<cublasOperation_t>(op);
      return s;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return read_attr(&d->epilogue, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return read_attr(&d->bias, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return read_attr(&d->bias_type, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return read_attr(&d->aux, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return read_attr(&d->aux_ld, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      return read_attr(&d->aux_type, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
      return read_attr(&d->a_scale, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
      return read_attr(&d->b_scale, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
      return read_attr(&d->d_scale, buf, sizeInBytes);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* p = new (std::nothrow) LtPreference;
  if (p == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref_of(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  LtPreference* p = pref_of(pref);
  if (p == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return read_attr(&p->max_workspace, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      return read_attr(&p->reduction_mask, buf, sizeInBytes);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requestedAlgoCount <= 0 || heuristicResultsArray == nullptr || returnAlgoCount == nullptr ||
      operationDesc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr || Ddesc == nullptr ||
      preference == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *returnAlgoCount = 0;
  LtProblem problem;
  const cublasStatus_t s = check_problem(*desc_of(operationDesc), *layout_of(Adesc), *layout_of(Bdesc),
                                         *layout_of(Cdesc), *layout_of(Ddesc), &problem);
  if (s != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[0];
  std::memset(&r, 0, sizeof(r));
  r.algo.data[0] = 1;  // the CPU reference
  r.workspaceSize = 0;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (computeDesc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr || Ddesc == nullptr ||
      alpha == nullptr || beta == nullptr || D == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!hg::emu::detail::is_valid_stream(stream)) return CUBLAS_STATUS_INVALID_VALUE;
  const LtDesc& desc = *desc_of(computeDesc);
  const LtLayout &a = *layout_of(Adesc), &b = *layout_of(Bdesc), &c = *layout_of(Cdesc), &d = *layout_of(Ddesc);
  LtProblem p;
  if (const cublasStatus_t s = check_problem(desc, a, b, c, d, &p); s != CUBLAS_STATUS_SUCCESS) return s;
  p.call.A = A;
  p.call.B = B;
  bool use_double = false;
  InputRounding rounding = InputRounding::kNone;
  const cublasContext plain_math{};
  if (!p.fp8) (void)check_types(p.call, plain_math, &use_double, &rounding);
  const int m = p.call.m, n = p.call.n, k = p.call.k, batch = p.call.batch_count;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const int a_rows = desc.transa == CUBLAS_OP_N ? m : k, a_cols = desc.transa == CUBLAS_OP_N ? k : m;
  const int b_rows = desc.transb == CUBLAS_OP_N ? k : n, b_cols = desc.transb == CUBLAS_OP_N ? n : k;
  const size_t esize = element_size(d.type);
  bool in_bounds =
      (k == 0 ||
       (matrix_in_device_memory(A, element_size(a.type), a_rows, a_cols, p.call.lda, a.batch_stride, batch) &&
        matrix_in_device_memory(B, element_size(b.type), b_rows, b_cols, p.call.ldb, b.batch_stride, batch))) &&
      matrix_in_device_memory(D, esize, m, n, static_cast<int>(d.ld), d.batch_stride, batch);
  const bool reads_c = use_double ? *static_cast<const double*>(beta) != 0.0 : *static_cast<const float*>(beta) != 0.0f;
  if (reads_c) {
    in_bounds = in_bounds && C != nullptr &&
                matrix_in_device_memory(C, esize, m, n, static_cast<int>(c.ld), c.batch_stride, batch);
  }
  const size_t bias_size = element_size(p.bias_type);
  if (has_bias(desc.epilogue)) in_bounds = in_bounds && hg::emu::is_device_range(desc.bias, bias_size * m);
  if (desc.epilogue == CUBLASLT_EPILOGUE_BGRADB)
    in_bounds = in_bounds && hg::emu::is_device_range(desc.bias, bias_size * n);
  for (const float* scale : {desc.a_scale, desc.b_scale}) {
    if (scale != nullptr) in_bounds = in_bounds && hg::emu::is_device_range(scale, sizeof(float));
  }
  if (uses_aux(desc.epilogue)) {
    in_bounds = in_bounds && matrix_in_device_memory(desc.aux, esize, m, n, static_cast<int>(desc.aux_ld), 0, 1);
  }
  if (!in_bounds) {
    hg::emu::set_last_error(cudaErrorIllegalAddress);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  if (use_double) {
    run_lt<double>(desc, p, c, alpha, beta, C, D, rounding);
  } else {
    run_lt<float>(desc, p, c, alpha, beta, C, D, rounding);
  }
  return CUBLAS_STATUS_SUCCESS;
}

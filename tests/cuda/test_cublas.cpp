// cublasGemmEx / cublasGemmStridedBatchedEx through the runtime layer's handle,
// against a double-precision reference. On the emulator this checks the CPU
// stand-in; on a GPU the same test checks our use of the real library.
#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "tests/cuda/cuda_test_util.h"

#if defined(HG_CUDA_EMU)
#include <hg_emu_runtime.h>
#endif

namespace {

using hg::test::DeviceBuffer;

size_t type_size(cudaDataType t) {
  switch (t) {
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_64F: return 8;
    default: return 4;
  }
}

// Unit roundoff of the stored type: the one rounding on store costs <= u|x|.
double unit_roundoff(cudaDataType t) {
  switch (t) {
    case CUDA_R_16F: return std::ldexp(1.0, -11);
    case CUDA_R_16BF: return std::ldexp(1.0, -8);
    case CUDA_R_64F: return std::ldexp(1.0, -53);
    default: return std::ldexp(1.0, -24);
  }
}

// Host matrices kept as doubles holding exactly representable values of the
// device type, plus their packed bytes for upload.
struct HostMatrix {
  std::vector<double> values;
  std::vector<unsigned char> bytes;
};

HostMatrix random_matrix(size_t count, cudaDataType type, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  HostMatrix m;
  m.values.resize(count);
  m.bytes.resize(count * type_size(type));
  for (size_t i = 0; i < count; ++i) {
    const float x = dist(rng);
    switch (type) {
      case CUDA_R_16F: {
        const uint16_t bits = hg::detail::float_to_half_bits(x);
        std::memcpy(&m.bytes[i * 2], &bits, 2);
        m.values[i] = hg::detail::half_bits_to_float(bits);
        break;
      }
      case CUDA_R_16BF: {
        const uint16_t bits = hg::detail::float_to_bfloat16_bits(x);
        std::memcpy(&m.bytes[i * 2], &bits, 2);
        m.values[i] = hg::detail::bfloat16_bits_to_float(bits);
        break;
      }
      case CUDA_R_64F: {
        const double d = x;
        std::memcpy(&m.bytes[i * 8], &d, 8);
        m.values[i] = d;
        break;
      }
      default:
        std::memcpy(&m.bytes[i * 4], &x, 4);
        m.values[i] = x;
    }
  }
  return m;
}

double read_value(const std::vector<unsigned char>& bytes, cudaDataType type, size_t i) {
  switch (type) {
    case CUDA_R_16F: {
      uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      return hg::detail::half_bits_to_float(bits);
    }
    case CUDA_R_16BF: {
      uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      return hg::detail::bfloat16_bits_to_float(bits);
    }
    case CUDA_R_64F: {
      double d;
      std::memcpy(&d, &bytes[i * 8], 8);
      return d;
    }
    default: {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      return f;
    }
  }
}

struct GemmCase {
  cublasOperation_t ta, tb;
  int m, n, k, batch;
  cudaDataType ab_type, c_type;
  double alpha, beta;
};

// Runs one (batched) GEMM on the device and compares every element of C with
// a double reference: |got - ref| <= u_out|ref| + k * 2^-22 * sum|a*b| (the
// fp32 accumulation bound with slack) + beta term rounding.
void check_gemm(const GemmCase& c, std::mt19937& rng) {
  const int a_rows = c.ta == CUBLAS_OP_N ? c.m : c.k, a_cols = c.ta == CUBLAS_OP_N ? c.k : c.m;
  const int b_rows = c.tb == CUBLAS_OP_N ? c.k : c.n, b_cols = c.tb == CUBLAS_OP_N ? c.n : c.k;
  // Padded leading dimensions catch mixing up ld and the logical row count.
  const int lda = a_rows + 3, ldb = b_rows + 1, ldc = c.m + 2;
  const long long stride_a = static_cast<long long>(lda) * a_cols + 5;
  const long long stride_b = static_cast<long long>(ldb) * b_cols;
  const long long stride_c = static_cast<long long>(ldc) * c.n + 7;
  const size_t a_count = static_cast<size_t>(stride_a) * c.batch;
  const size_t b_count = static_cast<size_t>(stride_b) * c.batch;
  const size_t c_count = static_cast<size_t>(stride_c) * c.batch;

  const HostMatrix a = random_matrix(a_count, c.ab_type, rng);
  const HostMatrix b = random_matrix(b_count, c.ab_type, rng);
  const HostMatrix c0 = random_matrix(c_count, c.c_type, rng);
  DeviceBuffer da(a.bytes.size()), db(b.bytes.size()), dc(c0.bytes.size());
  da.upload(a.bytes);
  db.upload(b.bytes);
  dc.upload(c0.bytes);

  const bool f64 = c.ab_type == CUDA_R_64F;
  const float alpha_f = static_cast<float>(c.alpha), beta_f = static_cast<float>(c.beta);
  const void* alpha = f64 ? static_cast<const void*>(&c.alpha) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&c.beta) : &beta_f;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  cublasHandle_t handle = hg::cuda::cublas_handle();
  if (c.batch == 1) {
    HG_CUBLAS_CHECK(cublasGemmEx(handle, c.ta, c.tb, c.m, c.n, c.k, alpha, da.get(), c.ab_type,
                                 lda, db.get(), c.ab_type, ldb, beta, dc.get(), c.c_type, ldc,
                                 compute, CUBLAS_GEMM_DEFAULT));
  } else {
    HG_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, c.ta, c.tb, c.m, c.n, c.k, alpha, da.get(), c.ab_type, lda, stride_a, db.get(),
        c.ab_type, ldb, stride_b, beta, dc.get(), c.c_type, ldc, stride_c, c.batch, compute,
        CUBLAS_GEMM_DEFAULT));
  }
  const auto got_bytes = dc.download<unsigned char>(c0.bytes.size());

  const double u_out = unit_roundoff(c.c_type);
  const double u_acc = f64 ? std::ldexp(1.0, -50) : std::ldexp(1.0, -22);
  int failures = 0;
  for (int batch = 0; batch < c.batch; ++batch) {
    for (int j = 0; j < c.n; ++j) {
      for (int i = 0; i < c.m; ++i) {
        double sum = 0.0, sum_abs = 0.0;
        for (int p = 0; p < c.k; ++p) {
          const size_t ai = batch * stride_a + (c.ta == CUBLAS_OP_N ? i + p * lda : p + i * lda);
          const size_t bi = batch * stride_b + (c.tb == CUBLAS_OP_N ? p + j * ldb : j + p * ldb);
          sum += a.values[ai] * b.values[bi];
          sum_abs += std::abs(a.values[ai] * b.values[bi]);
        }
        const size_t ci = batch * stride_c + i + static_cast<size_t>(j) * ldc;
        const double ref = c.alpha * sum + c.beta * c0.values[ci];
        const double tol = u_out * std::abs(ref) + c.k * u_acc * std::abs(c.alpha) * sum_abs +
                           u_acc * std::abs(c.beta * c0.values[ci]) + 1e-30;
        const double got = read_value(got_bytes, c.c_type, ci);
        if (!(std::abs(got - ref) <= tol) && failures++ < 5) {
          FAIL_CHECK("C[" << i << "," << j << "] batch " << batch << ": got " << got
                          << ", reference " << ref << ", tolerance " << tol);
        }
      }
    }
  }
  // Padding between columns and batches must be untouched.
  for (size_t ci = 0; ci < c_count; ++ci) {
    const size_t in_batch = ci % static_cast<size_t>(stride_c);
    const bool is_element = in_batch % ldc < static_cast<size_t>(c.m) &&
                            in_batch / ldc < static_cast<size_t>(c.n);
    if (!is_element && read_value(got_bytes, c.c_type, ci) != c0.values[ci] && failures++ < 5) {
      FAIL_CHECK("padding element " << ci << " of C was written");
    }
  }
  CHECK(failures == 0);
}

const char* type_name(cudaDataType t) {
  switch (t) {
    case CUDA_R_16F: return "f16";
    case CUDA_R_16BF: return "bf16";
    case CUDA_R_64F: return "f64";
    default: return "f32";
  }
}

}  // namespace

TEST_CASE("cublas GemmEx: N/T x f16/bf16/f32/f64 against a double reference",
          "[cuda][cublas]") {
  HG_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1234);
  const std::pair<cudaDataType, cudaDataType> types[] = {
      {CUDA_R_16F, CUDA_R_16F},   {CUDA_R_16F, CUDA_R_32F}, {CUDA_R_16BF, CUDA_R_16BF},
      {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_32F, CUDA_R_32F}, {CUDA_R_64F, CUDA_R_64F}};
  const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {16, 8, 33}, {37, 19, 64}, {4, 6, 0}};
  for (const auto& [ab, out] : types) {
    for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
        for (const auto& s : shapes) {
          for (double beta : {0.0, 0.5}) {
            INFO(type_name(ab) << "->" << type_name(out) << " op " << ta << tb << " m,n,k="
                               << s[0] << "," << s[1] << "," << s[2] << " beta " << beta);
            check_gemm({ta, tb, s[0], s[1], s[2], 1, ab, out, 1.5, beta}, rng);
          }
        }
      }
    }
  }
}

TEST_CASE("cublas GemmStridedBatchedEx matches the reference per batch", "[cuda][cublas]") {
  HG_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(99);
  for (cudaDataType t : {CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F}) {
    for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      INFO(type_name(t) << " op " << ta);
      check_gemm({ta, CUBLAS_OP_T, 9, 7, 12, 3, t, t, 1.0, 0.25}, rng);
      check_gemm({ta, CUBLAS_OP_N, 5, 4, 3, 4, t, t, -2.0, 0.0}, rng);
    }
  }
}

TEST_CASE("cublas GemmEx: beta == 0 does not read C (NaN in C stays out)", "[cuda][cublas]") {
  HG_REQUIRE_CUDA_DEVICE();
  const std::vector<float> a = {1, 2, 3, 4}, b = {1, 0, 0, 1};  // 2x2 column-major, B = I
  DeviceBuffer da(16), db(16), dc(16);
  da.upload(a);
  db.upload(b);
  HG_CUDA_CHECK(cudaMemset(dc.get(), 0xFF, 16));  // NaN
  const float alpha = 1.0f, beta = 0.0f;
  HG_CUBLAS_CHECK(cublasGemmEx(hg::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2,
                               &alpha, da.get(), CUDA_R_32F, 2, db.get(), CUDA_R_32F, 2, &beta,
                               dc.get(), CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  CHECK(dc.download<float>(4) == a);
}

TEST_CASE("cublas GemmEx: invalid arguments are refused like the real library",
          "[cuda][cublas]") {
  HG_REQUIRE_CUDA_DEVICE();
  DeviceBuffer buf(4096);
  void* p = buf.get();
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t h = hg::cuda::cublas_handle();
  auto gemm = [&](cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc,
                  cudaDataType at, cudaDataType bt, cudaDataType ct, cublasComputeType_t compute) {
    return cublasGemmEx(h, ta, CUBLAS_OP_N, m, n, k, &one, p, at, lda, p, bt, ldb, &zero, p, ct,
                        ldc, compute, CUBLAS_GEMM_DEFAULT);
  };
  const auto f32 = CUDA_R_32F;
  CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, f32, f32, f32, CUBLAS_COMPUTE_32F) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(gemm(CUBLAS_OP_N, -1, 4, 4, 4, 4, 4, f32, f32, f32, CUBLAS_COMPUTE_32F) ==
        CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 3, 4, 4, f32, f32, f32, CUBLAS_COMPUTE_32F) ==
        CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  CHECK(gemm(CUBLAS_OP_T, 8, 4, 4, 4, 4, 8, f32, f32, f32, CUBLAS_COMPUTE_32F) ==
        CUBLAS_STATUS_SUCCESS);  // op(A) = A^T: lda >= k suffices
  CHECK(gemm(CUBLAS_OP_T, 8, 4, 4, 3, 4, 8, f32, f32, f32, CUBLAS_COMPUTE_32F) ==
        CUBLAS_STATUS_INVALID_VALUE);  // lda < k
  CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 3, f32, f32, f32, CUBLAS_COMPUTE_32F) ==
        CUBLAS_STATUS_INVALID_VALUE);  // ldc < m
  // Type combinations outside cublasGemmEx's table of supported ones: the
  // reference documents CUBLAS_STATUS_NOT_SUPPORTED ("the combination of the
  // parameters Atype, Btype and Ctype ... is not supported"). The stand-in returns
  // exactly that; on a GPU we require a refusal, not the code, since the library
  // may check other parameters first.
  const cublasStatus_t mixed =
      gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_16F, CUDA_R_16BF, f32, CUBLAS_COMPUTE_32F);
  const cublasStatus_t f64_in_f32 = gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_64F, CUDA_R_64F,
                                         CUDA_R_64F, CUBLAS_COMPUTE_32F);
  CHECK(mixed != CUBLAS_STATUS_SUCCESS);
  CHECK(f64_in_f32 != CUBLAS_STATUS_SUCCESS);
#if defined(HG_CUDA_EMU)
  CHECK(mixed == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(f64_in_f32 == CUBLAS_STATUS_NOT_SUPPORTED);
#endif
  CHECK_THROWS_WITH(
      [&] {
        HG_CUBLAS_CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 3, 4, 4, f32, f32, f32, CUBLAS_COMPUTE_32F));
      }(),
      Catch::Matchers::Contains("CUBLAS_STATUS_INVALID_VALUE"));
#if defined(HG_CUDA_EMU)
  // emu only: the stand-in also names the offending parameter (the real
  // library's status carries no such detail).
  CHECK_THROWS_WITH(
      [&] {
        HG_CUBLAS_CHECK(gemm(CUBLAS_OP_N, 4, 4, 4, 3, 4, 4, f32, f32, f32, CUBLAS_COMPUTE_32F));
      }(),
      Catch::Matchers::Contains("lda"));
#endif
}

#if defined(HG_CUDA_EMU)
TEST_CASE("cublas stand-in: TF32 modes round the inputs, plain fp32 does not",
          "[cuda][cublas]") {
  // a = 1 + 2^-20 is exact in fp32 but rounds to 1 in TF32 (10 mantissa bits).
  const float a = 1.0f + std::ldexp(1.0f, -20), b = 1.0f, one = 1.0f, zero = 0.0f;
  DeviceBuffer da(4), db(4), dc(4);
  da.upload(std::vector<float>{a});
  db.upload(std::vector<float>{b});
  cublasHandle_t h = hg::cuda::cublas_handle();
  cublasMath_t saved_mode = CUBLAS_DEFAULT_MATH;
  HG_CUBLAS_CHECK(cublasGetMathMode(h, &saved_mode));
  auto run = [&](cublasComputeType_t compute) {
    HG_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, da.get(),
                                 CUDA_R_32F, 1, db.get(), CUDA_R_32F, 1, &zero, dc.get(),
                                 CUDA_R_32F, 1, compute, CUBLAS_GEMM_DEFAULT));
    return dc.download<float>(1)[0];
  };
  CHECK(run(CUBLAS_COMPUTE_32F) == a);
  CHECK(run(CUBLAS_COMPUTE_32F_FAST_TF32) == 1.0f);
  HG_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
  CHECK(run(CUBLAS_COMPUTE_32F) == 1.0f);
  CHECK(run(CUBLAS_COMPUTE_32F_PEDANTIC) == a);
  HG_CUBLAS_CHECK(cublasSetMathMode(h, saved_mode));  // the thread's handle is shared
}

TEST_CASE("cublas stand-in: a matrix extent outside its allocation fails loudly",
          "[cuda][cublas]") {
  DeviceBuffer small(4 * 4 * 4 - 4);  // one float short of 4x4
  DeviceBuffer ok(4 * 4 * 4);
  const float one = 1.0f, zero = 0.0f;
  CHECK(cublasGemmEx(hg::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one,
                     small.get(), CUDA_R_32F, 4, ok.get(), CUDA_R_32F, 4, &zero, ok.get(),
                     CUDA_R_32F, 4, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_EXECUTION_FAILED);
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
}
#endif

// matmul against a naive double-precision product of the same (rounded)
// inputs, on every device and float dtype, through every layout path:
// transposes by flag, transposed views (no copy), padded rows (ld > cols),
// strided views that need a copy, batches, a shared 2-D operand, fused bias,
// and empty dimensions.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <cstdlib>
#include <cstring>

#include "runtime/cpu/threads.h"
#include "kernels/gemm/gemm.h"
#include "kernels/ops.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

// Values in [-1, 1] keep fp32 accumulation error well inside the f32 row of
// the tolerance table for K <= 100.
Tensor operand(const Shape& shape, DType dtype, uint64_t seed) {
  return ops::binary_scalar(OpId::mul, make_input(shape, kF64, Domain::kAny, seed), 1.0 / 3.0).to(dtype);
}

// Reference: batch x m x n from logical (already transposed) host matrices.
std::vector<double> reference(const Tensor& a_logical, const Tensor& b_logical, const Tensor& bias,
                              const Shape& out_shape) {
  const bool batched = out_shape.size() == 3;
  const int64_t batch = batched ? out_shape[0] : 1, m = out_shape[batched], n = out_shape[batched + 1];
  const Tensor a = a_logical.dim() == 2 ? a_logical.unsqueeze(0).expand({batch, -1, -1}) : a_logical.expand({batch, -1, -1});
  const Tensor b = b_logical.dim() == 2 ? b_logical.unsqueeze(0).expand({batch, -1, -1}) : b_logical.expand({batch, -1, -1});
  const auto av = values_of(a.contiguous()), bv = values_of(b.contiguous());
  const int64_t k = a.size(2);
  std::vector<double> bias_v;
  if (bias.defined()) bias_v = values_of(bias.expand(out_shape).contiguous());
  std::vector<double> out(static_cast<size_t>(batch * m * n));
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = bias_v.empty() ? 0.0 : bias_v[static_cast<size_t>((t * m + i) * n + j)];
        for (int64_t p = 0; p < k; ++p) acc += av[static_cast<size_t>((t * m + i) * k + p)] * bv[static_cast<size_t>((t * k + p) * n + j)];
        out[static_cast<size_t>((t * m + i) * n + j)] = acc;
      }
  return out;
}

void check_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb, const Tensor& bias,
                  const std::string& what) {
  const Tensor out = ops::matmul(a, b, ta, tb, bias);
  const Tensor a_logical = ta ? a.transpose(-1, -2) : a;
  const Tensor b_logical = tb ? b.transpose(-1, -2) : b;
  INFO(label(a.device(), a.dtype(), what) << " out " << out.shape_str());
  CHECK(out.dtype() == a.dtype());
  const auto expected = round_to(reference(a_logical.cpu(), b_logical.cpu(), bias.defined() ? bias.cpu() : bias, out.sizes()), a.dtype());
  CHECK(compare_values(values_of(out), expected, tolerance_for(a.dtype(), OpKind::kReduction)) == "");
}

}  // namespace

TEST_CASE("matmul matches a double reference for every layout", "[kernels][gemm]") {
  for (Device dev : test_devices()) {
    for (DType dt : float_dtypes()) {
      auto in = [&](Shape s, uint64_t seed) { return operand(s, dt, seed).to(dev); };
      const Tensor none;
      check_matmul(in({13, 37}, 1), in({37, 19}, 2), false, false, none, "NN");
      check_matmul(in({37, 13}, 3), in({37, 19}, 4), true, false, none, "TN");
      check_matmul(in({13, 37}, 5), in({19, 37}, 6), false, true, none, "NT");
      check_matmul(in({37, 13}, 7), in({19, 37}, 8), true, true, none, "TT");
      check_matmul(in({37, 13}, 9).t(), in({19, 37}, 10).t(), false, false, none, "transposed views");
      check_matmul(in({13, 50}, 11).slice(1, 5, 42), in({37, 19}, 12), false, false, none, "padded rows");
      check_matmul(in({26, 37}, 13).slice(0, 0, 26, 2), in({37, 19}, 14), false, false, none, "row-strided copy");
      check_matmul(in({3, 9, 16}, 15), in({3, 16, 5}, 16), false, false, none, "batched");
      check_matmul(in({3, 9, 16}, 17), in({16, 5}, 18), false, false, none, "shared 2-D b");
      check_matmul(in({9, 16}, 19), in({3, 5, 16}, 20), false, true, none, "shared 2-D a, NT");
      check_matmul(in({3, 16, 9}, 21).transpose(1, 2), in({3, 16, 5}, 22), false, false, none, "batched transposed view");
      check_matmul(in({8, 24}, 23), in({11, 24}, 24), false, true, in({11}, 25), "linear with bias");
      check_matmul(in({2, 8, 24}, 26), in({24, 11}, 27), false, false, in({8, 1}, 28), "batched, column bias");
      check_matmul(in({0, 5}, 29), in({5, 4}, 30), false, false, none, "m = 0");
      check_matmul(in({3, 0}, 31), in({0, 4}, 32), false, false, none, "k = 0 gives zeros");
      check_matmul(in({3, 0}, 33), in({0, 4}, 34), false, false, in({4}, 35), "k = 0 with bias");
    }
  }
}

TEST_CASE("matmul: the CUDA result matches the CPU backend", "[kernels][gemm]") {
#if defined(HG_WITH_CUDA)
  for (DType dt : {kF32, kF16, kBF16}) {
    const Tensor a = operand({31, 64}, dt, 40), b = operand({64, 17}, dt, 41);
    const auto on_cpu = values_of(ops::matmul(a, b));
    const auto on_cuda = values_of(ops::matmul(a.to(Device::cuda()), b.to(Device::cuda())));
    INFO(dtype_name(dt));
    CHECK(compare_values(on_cuda, on_cpu, tolerance_for(dt, OpKind::kReduction)) == "");
  }
#else
  SUCCEED("cpu build");
#endif
}

TEST_CASE("matmul rounds 16-bit results once from fp32 accumulation", "[kernels][gemm][numerics]") {
  // 4096 products of 1 * 1: an fp16 accumulator would stall at 2048.
  for (Device dev : test_devices()) {
    const Tensor a = ones({1, 4096}, {.dtype = kF16, .device = dev});
    const Tensor b = ones({4096, 1}, {.dtype = kF16, .device = dev});
    CHECK(ops::matmul(a, b).item<float>() == 4096.0f);
    // 2049 is not representable in fp16: 2048 + 1 rounds to even (2048) once.
    const Tensor a2 = ones({1, 2049}, {.dtype = kF16, .device = dev});
    const Tensor b2 = ones({2049, 1}, {.dtype = kF16, .device = dev});
    CHECK(ops::matmul(a2, b2).item<float>() == 2048.0f);
  }
}

TEST_CASE("matmul rejects bad operands with the shapes in the message", "[kernels][gemm][errors]") {
  const Tensor a = zeros({32, 784}), b = zeros({512, 256});
  CHECK_THROWS_WITH(ops::matmul(a, b), Catch::Contains("shape mismatch in matmul: [32, 784] @ [512, 256]: inner dims 784 != 512"));
  CHECK_THROWS_WITH(ops::matmul(zeros({4}), zeros({4, 2})), Catch::Contains("2-D or batched"));
  CHECK_THROWS_WITH(ops::matmul(zeros({2, 2}), zeros({2, 2}, {.dtype = kF16})), Catch::Contains("dtypes differ"));
  CHECK_THROWS_WITH(ops::matmul(zeros({2, 2}, {.dtype = kI32}), zeros({2, 2}, {.dtype = kI32})), Catch::Contains("floating"));
  CHECK_THROWS_WITH(ops::matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), Catch::Contains("batch sizes differ"));
  CHECK_THROWS_AS(ops::matmul(zeros({2, 3}), zeros({3, 4}), false, false, zeros({5})), Error);
}

TEST_CASE("TF32 is off by default and switchable", "[kernels][gemm]") {
  CHECK_FALSE(ops::allow_tf32());
  ops::set_allow_tf32(true);
  CHECK(ops::allow_tf32());
  ops::set_allow_tf32(false);
}

// ---- CPU GEMM paths (kernels/gemm/CPU.md, "CPU GEMM paths") ---------------------

namespace {

// One bf16 (or f32) cpu::GemmArgs over freshly made operands: op(A) m x k, op(B) k x n,
// stored transposed or not with `pad` spare columns per row, `batch` entries
// (a broadcast operand has batch stride 0), C starts from seeded values.
struct NativeCase {
  bool ta = false, tb = false;
  int64_t m = 1, n = 1, k = 1, batch = 1, pad = 0;
  bool broadcast_a = false, broadcast_b = false;
  float alpha = 1.0f, beta = 0.0f;
};

// Runs the case through `run` (returns whether it ran) and checks it against
// the f64 product of the same inputs, rounded once to the dtype, with that
// dtype's row of the tolerance table.
template <typename Run>
void check_native(const NativeCase& c, Run run, const std::string& what, DType dtype = kBF16) {
  INFO(what);
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int64_t na = c.broadcast_a ? 1 : c.batch, nb = c.broadcast_b ? 1 : c.batch;
  const Tensor a = operand({na, a_rows, a_cols + c.pad}, dtype, 101);
  const Tensor b = operand({nb, b_rows, b_cols + c.pad}, dtype, 102);
  const Tensor c0 = operand({c.batch, c.m, c.n + c.pad}, dtype, 103);
  const Tensor out = c0.clone();
  GemmArgs g;
  g.dtype = dtype;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.batch = c.batch;
  g.a = a.data_ptr();
  g.lda = a_cols + c.pad;
  g.stride_a = c.broadcast_a ? 0 : a_rows * g.lda;
  g.b = b.data_ptr();
  g.ldb = b_cols + c.pad;
  g.stride_b = c.broadcast_b ? 0 : b_rows * g.ldb;
  g.c = out.data_ptr();
  g.ldc = c.n + c.pad;
  g.stride_c = c.m * g.ldc;
  g.alpha = c.alpha;
  g.beta = c.beta;
  REQUIRE(run(g));
  const auto av = values_of(a), bv = values_of(b), cv = values_of(c0), ov = values_of(out);
  std::vector<double> got, expected, abs_sum;
  for (int64_t t = 0; t < c.batch; ++t)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0.0, acc_abs = 0.0;
        for (int64_t p = 0; p < c.k; ++p) {
          const int64_t ia = (c.broadcast_a ? 0 : t) * a_rows * g.lda + (c.ta ? p * g.lda + i : i * g.lda + p);
          const int64_t ib = (c.broadcast_b ? 0 : t) * b_rows * g.ldb + (c.tb ? j * g.ldb + p : p * g.ldb + j);
          acc += av[static_cast<size_t>(ia)] * bv[static_cast<size_t>(ib)];
          acc_abs += std::fabs(av[static_cast<size_t>(ia)] * bv[static_cast<size_t>(ib)]);
        }
        const auto ic = static_cast<size_t>(t * g.stride_c + i * g.ldc + j);
        expected.push_back(c.alpha * acc + c.beta * cv[ic]);
        abs_sum.push_back(std::fabs(c.alpha) * acc_abs + std::fabs(c.beta * cv[ic]));
        got.push_back(ov[ic]);
      }
  if (dtype == kF32 && c.k > 100) {
    // Documented override: the table's f32 row holds fp32 accumulation for
    // K <= 100 (see operand()); beyond that any fp32 summation order may err
    // by up to the standard worst-case bound gamma_K * sum|a||b|, gamma_K =
    // K eps / (1 - K eps) (Higham, "Accuracy and Stability of Numerical
    // Algorithms", 3.1), plus the one rounding of the result.
    const double eps = 0x1p-24, gamma = static_cast<double>(c.k + 2) * eps / (1.0 - static_cast<double>(c.k + 2) * eps);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i << ": got " << got[i] << ", expected " << expected[i]);
      CHECK(std::fabs(got[i] - expected[i]) <= gamma * abs_sum[i]);
    }
  } else {
    CHECK(compare_values(got, round_to(expected, dtype), tolerance_for(dtype, OpKind::kReduction)) == "");
  }
  // The padding columns of C are not written.
  for (int64_t t = 0; t < c.batch; ++t)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = c.n; j < c.n + c.pad; ++j) {
        const auto ic = static_cast<size_t>(t * g.stride_c + i * g.ldc + j);
        CHECK(ov[ic] == cv[ic]);
      }
}

bool forced_widen() {
  const char* v = std::getenv("HG_CPU_GEMM");
  return v != nullptr && std::strcmp(v, "widen") == 0;
}

std::vector<std::pair<NativeCase, std::string>> native_cases() {
  std::vector<std::pair<NativeCase, std::string>> cases;
  auto add = [&](NativeCase c, const std::string& what) { cases.emplace_back(c, what); };
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      add({.ta = ta, .tb = tb, .m = 13, .n = 19, .k = 37}, std::string("small ") + (ta ? "T" : "N") + (tb ? "T" : "N"));
      add({.ta = ta, .tb = tb, .m = 67, .n = 45, .k = 1000, .pad = 3},
          std::string("K = 1000, padded rows, ") + (ta ? "T" : "N") + (tb ? "T" : "N"));
    }
  add({.m = 1, .n = 1, .k = 4096}, "dot product");
  add({.m = 130, .n = 1, .k = 77}, "matrix-vector");
  add({.m = 9, .n = 5, .k = 16, .batch = 3}, "batched");
  add({.m = 9, .n = 5, .k = 16, .batch = 3, .broadcast_b = true}, "batched, shared b");
  add({.tb = true, .m = 9, .n = 5, .k = 16, .batch = 4, .broadcast_a = true}, "batched, shared a, NT");
  add({.ta = true, .m = 32, .n = 24, .k = 40, .batch = 2, .pad = 2, .alpha = 0.5f, .beta = 0.25f},
      "alpha and beta, batched, padded");
  add({.m = 8, .n = 11, .k = 24, .beta = 1.0f}, "beta = 1 (the fused bias)");
  return cases;
}

}  // namespace

TEST_CASE("CPU GEMM paths: bf16 is native where it can be, HG_CPU_GEMM=widen forces the fallback", "[kernels][gemm]") {
  const std::string f32_path = cpu::gemm_path(kF32), f32_reason = cpu::gemm_f32_openblas_reason();
  INFO("f32 path " << f32_path << ", OpenBLAS reason '" << f32_reason << "'");
  CHECK((f32_path == "onednn-f32") == f32_reason.empty());
  CHECK((f32_path == "openblas") == !f32_reason.empty());
  // The reason a forced widen reports: the switch, or (a build with
  // -DHG_WITH_ONEDNN=OFF) the missing library, which comes first.
  const std::string widen_reason = cpu::gemm_has_onednn() ? "HG_CPU_GEMM=widen" : "this build has no oneDNN";
  if (!cpu::gemm_has_onednn()) {
    CHECK(f32_reason == widen_reason);
    CHECK(cpu::gemm_bf16_widen_reason() == widen_reason);
  }
  if (forced_widen()) CHECK(f32_reason == widen_reason);
  CHECK(std::string(cpu::gemm_path(kF64)) == "openblas");
  // f16: oneDNN only where this oneDNN has an f16 matmul (AVX512-FP16 CPUs, oneDNN after 2.6).
  const std::string f16_path = cpu::gemm_path(kF16);
  // Widening multiplies on f32's path: oneDNN's f32 matmul where f32 takes it.
  const std::string f16_widen = f32_path == "onednn-f32" ? "widen-onednn-f32" : "widen-sgemm";
  CHECK((f16_path == f16_widen || f16_path == "onednn-f16"));
  if (forced_widen() || !cpu::gemm_has_onednn()) CHECK(f16_path == "widen-sgemm");
  const std::string path = cpu::gemm_path(kBF16), reason = cpu::gemm_bf16_widen_reason();
  INFO("bf16 path " << path << ", widen reason '" << reason << "'");
  CHECK((path == "onednn-bf16") == reason.empty());
  CHECK((path == f16_widen) == !reason.empty());
  if (forced_widen()) {
    CHECK(reason == widen_reason);
    // The switch is honoured by the native entry point too; matmul still works.
    for (const auto& [c, what] : native_cases()) {
      check_native(
          c,
          [](const GemmArgs& g) {
            if (cpu::gemm_native(g)) return false;  // must not run natively
            cpu::gemm(g);
            return true;
          },
          "widened: " + what);
    }
  }
}

// Run by ctest as test_gemm_onednn_f32 (HG_TEST_REQUIRES=cpu-f32-onednn:
// skipped on CPUs without AVX-512); excluded from the plain test_kernels run,
// where every f32 GEMM test takes whichever path the machine has.
TEST_CASE("f32 CPU GEMM through oneDNN matches a double reference", "[gemm-onednn-f32]") {
  REQUIRE(std::string(cpu::gemm_path(kF32)) == "onednn-f32");
  for (const auto& [c, what] : native_cases()) check_native(c, cpu::gemm_native, "oneDNN f32: " + what, kF32);
  const int threads = get_num_threads();
  set_num_threads(1);
  check_native(native_cases()[1].first, cpu::gemm_native, "oneDNN f32, 1 thread", kF32);
  set_num_threads(threads);
  // 4097 products of 1 * 1: exact in an fp32 accumulator (a bf16 one stalls at 256).
  Tensor a = ones({1, 4097}), b = ones({4097, 1});
  CHECK(ops::matmul(a, b).item<float>() == 4097.0f);
  // Through ops::matmul, transposed views.
  const Tensor at = operand({37, 13}, kF32, 9).t(), bt = operand({19, 37}, kF32, 10).t();
  check_matmul(at, bt, false, false, Tensor(), "oneDNN f32 transposed views");
}

// Run by ctest as test_gemm_native_bf16 (HG_TEST_REQUIRES=cpu-bf16: skipped on
// CPUs without AVX512_BF16 / AMX); excluded from the plain test_kernels run.
TEST_CASE("native bf16 CPU GEMM (oneDNN) matches a double reference", "[gemm-native]") {
  REQUIRE(std::string(cpu::gemm_path(kBF16)) == "onednn-bf16");
  for (const auto& [c, what] : native_cases()) check_native(c, cpu::gemm_native, "native: " + what);
  // The primitive cache is keyed by the thread count: one thread, then back.
  const int threads = get_num_threads();
  set_num_threads(1);
  check_native(native_cases()[1].first, cpu::gemm_native, "native, 1 thread");
  set_num_threads(threads);
  check_native(native_cases()[1].first, cpu::gemm_native, "native, threads restored");
}

TEST_CASE("native bf16 CPU GEMM accumulates in fp32 and rounds once", "[gemm-native]") {
  REQUIRE(std::string(cpu::gemm_path(kBF16)) == "onednn-bf16");
  // 4096 products of 1 * 1: a bf16 accumulator would stall at 256.
  CHECK(ops::matmul(ones({1, 4096}, {.dtype = kBF16}), ones({4096, 1}, {.dtype = kBF16})).item<float>() == 4096.0f);
  // 257 is not representable in bf16: the fp32 sum rounds to even (256) once.
  CHECK(ops::matmul(ones({1, 257}, {.dtype = kBF16}), ones({257, 1}, {.dtype = kBF16})).item<float>() == 256.0f);
  // Through ops::matmul, every layout of the main test, natively.
  const Tensor a = operand({37, 13}, kBF16, 9).t(), b = operand({19, 37}, kBF16, 10).t();
  check_matmul(a, b, false, false, Tensor(), "native transposed views");
}

// matmul against a naive double-precision product of the same (rounded)
// inputs, on every device and float dtype, through every layout path:
// transposes by flag, transposed views (no copy), padded rows (ld > cols),
// strided views that need a copy, batches, a shared 2-D operand, fused bias,
// and empty dimensions.
#include <catch2/catch.hpp>

#include "kernels/gemm.h"
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

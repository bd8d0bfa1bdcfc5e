// NaN propagation across every op family, on every device and float dtype:
// a NaN input must give a NaN output wherever it contributes (frameworks
// have shipped max/relu/clamp kernels that silently dropped NaN).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/ops.h"
#include "kernels/reduce/reduce.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

// [2, 5] with a NaN at [0, 2]; every other value is an ordinary number.
Tensor with_nan(DType dt, Device dev) {
  std::vector<double> v{0.5, -1.0, NAN, 2.0, 0.25, 1.5, -0.5, 0.75, 3.0, -2.0};
  return from_vector(v, {2, 5}, {.dtype = dt}).to(dev);
}

bool is_nan_at(const Tensor& t, size_t i) { return std::isnan(values_of(t)[i]); }

}  // namespace

TEST_CASE("every op family propagates NaN", "[kernels][numerics]") {
  for (Device dev : test_devices()) {
    for (DType dt : float_dtypes()) {
      const Tensor x = with_nan(dt, dev);
      INFO(label(dev, dt, "NaN propagation"));
      for (OpId op : {OpId::neg, OpId::exp, OpId::log, OpId::sqrt, OpId::rsqrt, OpId::abs, OpId::tanh,
                      OpId::sigmoid, OpId::relu, OpId::gelu, OpId::gelu_tanh, OpId::silu}) {
        INFO(op_name(op));
        CHECK(is_nan_at(ops::unary(op, x), 2));
      }
      const Tensor other = ones({2, 5}, {.dtype = dt, .device = dev});
      for (OpId op : {OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::maximum, OpId::minimum}) {
        INFO(op_name(op));
        CHECK(is_nan_at(ops::binary(op, x, other), 2));
        CHECK(is_nan_at(ops::binary(op, other, x), 2));
      }
      for (OpId op : {OpId::sum, OpId::mean, OpId::max, OpId::min, OpId::norm}) {
        INFO(op_name(op));
        const Tensor rows = ops::reduce(op, x, {1});
        CHECK(is_nan_at(rows, 0));
        CHECK_FALSE(is_nan_at(rows, 1));  // the clean row stays clean
      }
      const Tensor sm = ops::softmax(x);
      for (size_t i = 0; i < 5; ++i) CHECK(is_nan_at(sm, i));
      for (size_t i = 5; i < 10; ++i) CHECK_FALSE(is_nan_at(sm, i));
      const Tensor targets = from_vector(std::vector<int64_t>{1, 3}).to(dev);
      CHECK(std::isnan(ops::cross_entropy(x, targets).item<double>()));
      const Tensor product = ops::matmul(x, ones({5, 3}, {.dtype = dt, .device = dev}));
      CHECK(is_nan_at(product, 0));
      CHECK_FALSE(is_nan_at(product, 3));
    }
  }
}

// Contiguous f32 <-> f16/bf16 casts take the vectorised, threaded converters
// (kernels/cpu/convert_simd.cpp through core/copy.h's CPU conversion hook);
// they must give core/half.h's bits for every value class: ties, subnormals,
// overflow, infinities and NaN, over more elements than one thread's block.
TEST_CASE("contiguous 16-bit casts on the CPU are bit-identical to core/half.h", "[numerics][convert]") {
  const int64_t n = 100003;
  std::vector<float> f(static_cast<size_t>(n));
  std::vector<uint16_t> h(static_cast<size_t>(n));
  uint32_t state = 12345;
  for (size_t i = 0; i < f.size(); ++i) {
    state = state * 1664525u + 1013904223u;  // every f32 bit pattern class, NaNs included
    f[i] = detail::bits_float(state);
    h[i] = static_cast<uint16_t>(state >> 16);
  }
  const Tensor x = from_vector(f, {n});
  for (DType dt : {kF16, kBF16}) {
    INFO(dtype_name(dt));
    // f32 -> 16 bits: compare the 16-bit patterns.
    const Tensor y = x.to(dt);
    const auto* yb = static_cast<const uint16_t*>(y.data_ptr());
    int64_t differ = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t want = dt == kF16 ? detail::float_to_half_bits(f[i]) : detail::float_to_bfloat16_bits(f[i]);
      differ += yb[i] != want;
    }
    CHECK(differ == 0);
    // 16 bits -> f32: every 16-bit pattern class, bit for bit.
    const Tensor hb = empty({n}, {.dtype = dt});
    std::memcpy(hb.data_ptr(), h.data(), h.size() * 2);
    const Tensor w = hb.to(kF32);
    const auto* wf = static_cast<const float*>(w.data_ptr());
    differ = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      const float want = dt == kF16 ? detail::half_bits_to_float(h[i]) : detail::bfloat16_bits_to_float(h[i]);
      differ += detail::float_bits(wf[i]) != detail::float_bits(want);
    }
    CHECK(differ == 0);
  }
}

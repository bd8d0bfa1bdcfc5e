// Tests for the gated linear units glu and swiglu (kernels/glu/glu.h), forward and
// backward, on every device (cpu, and cuda when built) in f32, f16, bf16 and
// f64. The reference splits the already-rounded input in halves along the dim
// by index arithmetic of its own and computes in double with the textbook
// sigmoid 1 / (1 + e^-x), then rounds once to the dtype; tolerances come from
// tests/kernels/tolerance.h (OpKind::kElementwise: each output depends on two
// inputs). The backward is checked against the closed forms in double and,
// in f64, against finite differences (gradcheck).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "kernels/glu/glu.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The element pairs of x split along dim: pair p = (index of a, index of b) in
// x's row-major order, in the order of the output's elements.
std::vector<std::pair<size_t, size_t>> halves(const Shape& shape, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) {
    if (k < dim) outer *= shape[k];
    if (k > dim) inner *= shape[k];
  }
  const int64_t h = shape[dim] / 2;
  std::vector<std::pair<size_t, size_t>> pairs;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t r = 0; r < inner; ++r) {
        const int64_t a = (o * shape[dim] + i) * inner + r;
        pairs.emplace_back(static_cast<size_t>(a), static_cast<size_t>(a + h * inner));
      }
    }
  }
  return pairs;
}

double forward_ref(bool swiglu, double a, double b) { return swiglu ? a * sigmoid_ref(a) * b : a * sigmoid_ref(b); }

// d_a and d_b of one output element.
std::pair<double, double> backward_ref(bool swiglu, double g, double a, double b) {
  if (swiglu) {
    const double s = sigmoid_ref(a);
    return {g * b * (s + a * s * (1.0 - s)), g * a * s};
  }
  const double s = sigmoid_ref(b);
  return {g * s, g * a * s * (1.0 - s)};
}

struct GluSample {
  const char* name;
  Shape shape;
  int64_t dim;
  bool noncontiguous = false;
  Domain domain = Domain::kAny;
};

const std::vector<GluSample>& glu_samples() {
  static const std::vector<GluSample> samples{
      {"last-dim", {3, 8}, -1},
      {"rank1", {2}, 0},
      {"middle-dim", {2, 6, 5}, 1},
      {"first-dim", {4, 3, 3}, 0},
      {"wide", {2, 4098}, -1},
      {"noncontiguous", {5, 6}, -1, true},
      {"empty-batch", {0, 4}, -1},
      // 0, +-1, +-60000, 65504, +-1000, +-inf and NaN as gates and values
      {"extreme", {9, 4}, -1, false, Domain::kExtreme},
  };
  return samples;
}

}  // namespace

TEST_CASE("glu and swiglu match the double reference, forward and backward", "[kernels][glu]") {
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (const GluSample& sample : glu_samples()) {
        for (OpId op : {OpId::glu, OpId::swiglu}) {
          const bool swiglu = op == OpId::swiglu;
          Tensor x = make_input(sample.shape, dtype, sample.domain, 5).to(device);
          if (sample.noncontiguous) x = make_noncontiguous(x);
          INFO(label(device, dtype, std::string(op_name(op)) + " " + sample.name));
          const Tensor y = ops::glu_forward(op, x, sample.dim);
          const int64_t dim = sample.dim < 0 ? sample.dim + x.dim() : sample.dim;
          Shape out_shape = x.sizes();
          out_shape[dim] /= 2;
          CHECK(y.dtype() == dtype);
          CHECK(y.sizes() == out_shape);

          const std::vector<double> xv = values_of(x);
          const auto pairs = halves(x.sizes(), dim);
          std::vector<double> expected;
          for (const auto& [ia, ib] : pairs) expected.push_back(forward_ref(swiglu, xv[ia], xv[ib]));
          const Tolerance tol = tolerance_for(dtype, OpKind::kElementwise);
          CHECK(compare_values(values_of(y), round_to(expected, dtype), tol) == "");

          const Tensor d_y = make_input(out_shape, dtype, Domain::kAny, 6).to(device);
          const Tensor d_x = ops::glu_backward(op, d_y, x, sample.dim);
          CHECK(d_x.dtype() == dtype);
          CHECK(d_x.sizes() == x.sizes());
          const std::vector<double> gv = values_of(d_y);
          std::vector<double> d_expected(xv.size(), 0.0);
          for (size_t e = 0; e < pairs.size(); ++e) {
            const auto [d_a, d_b] = backward_ref(swiglu, gv[e], xv[pairs[e].first], xv[pairs[e].second]);
            d_expected[pairs[e].first] = d_a;
            d_expected[pairs[e].second] = d_b;
          }
          // The backward's products of three or four rounded factors carry a
          // few ulp more than one rounding: the elementwise row plus 2 ulp in
          // 16-bit (f16 2^-10, bf16 2^-7) relative.
          Tolerance d_tol = tol;
          if (dtype == kF16) d_tol.rtol += 2e-3;
          if (dtype == kBF16) d_tol.rtol += 1.6e-2;
          CHECK(compare_values(values_of(d_x), round_to(d_expected, dtype), d_tol) == "");
        }
      }
    }
  }
}

TEST_CASE("glu and swiglu gradients match finite differences", "[kernels][glu][autograd]") {
  for (int64_t dim : {-1, 0, 1}) {
    Tensor x = make_input({4, 6, 2}, kF64, Domain::kAny, 7).requires_grad_(true);
    CHECK(gradcheck([dim](const std::vector<Tensor>& in) { return hg::glu(in[0], dim); }, {x}) == "");
    CHECK(gradcheck([dim](const std::vector<Tensor>& in) { return hg::swiglu(in[0], dim); }, {x}) == "");
  }
}

TEST_CASE("glu refuses what it cannot halve, with a clear error", "[kernels][glu]") {
  const Tensor odd = zeros({2, 5});
  CHECK_THROWS_WITH(ops::glu(odd), Catch::Contains("needs an even size"));
  CHECK_THROWS_WITH(ops::swiglu(zeros({2, 4}), 2), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(ops::glu(zeros({2, 4}, {.dtype = kI32})), Catch::Contains("needs a floating input"));
  CHECK_THROWS_WITH(ops::glu(scalar_tensor(1.0)), Catch::Contains("rank 0"));
  CHECK_THROWS_WITH(ops::glu_backward(OpId::glu, zeros({2, 3}), zeros({2, 4}), -1),
                    Catch::Contains("not the forward output's shape"));
}

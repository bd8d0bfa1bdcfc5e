// Generated tests for elementwise ops: every op in the registries below runs on
// every device (cpu, and cuda when built) in f32, f16, bf16 and f64 (and the
// integer dtypes for unary ops that take them), over
// samples that include rank 0, empty, odd sizes (vector tails), broadcasting,
// non-contiguous views and extreme values. The reference is an independent
// double-precision formula on the same (already rounded) inputs, rounded once
// to the output dtype; the tolerance comes from tests/kernels/tolerance.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "kernels/ops.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double softplus_ref(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}
double clamp_ref(double x, double lo, double hi) {
  return std::isnan(x) ? x : std::min(std::max(x, lo), hi);
}
constexpr double kInf = INFINITY;

using Ref = std::function<double(double)>;
// f'(x) given x and y = f(x) as the kernel saw them (16-bit y is rounded, so
// an op whose derivative reads y is checked against that y).
using DerivRef = std::function<double(double x, double y)>;
using Differentiable = std::function<Tensor(const Tensor&)>;

// One entry of the unary op registry. Each entry is checked for: the forward
// on every device and dtype (and integer dtypes when the op takes them)
// against `ref`; the backward kernel against `dref` (an exact formula) or,
// when dref is empty, a central difference of `ref`; and gradcheck (f64) of
// the differentiable hg:: function.
struct UnaryCase {
  OpId op;
  ScalarArgs args;
  Domain domain;
  Ref ref;
  DerivRef dref;
  Differentiable differentiable;
};

const std::vector<UnaryCase>& unary_cases() {
  // One entry per op, in the layout docs/kernels.md ("Adding an op") quotes:
  // clang-format off
  static const std::vector<UnaryCase> cases{
      {OpId::neg, {}, Domain::kAny, [](double x) { return -x; }, [](double, double) { return -1.0; },
       [](const Tensor& x) { return hg::neg(x); }},
      {OpId::abs, {}, Domain::kAny, [](double x) { return std::fabs(x); },
       [](double x, double) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, [](const Tensor& x) { return hg::abs(x); }},
      {OpId::relu, {}, Domain::kAny, [](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); },
       [](double x, double) { return x > 0 ? 1.0 : 0.0; }, [](const Tensor& x) { return hg::relu(x); }},
      {OpId::exp, {}, Domain::kAny, [](double x) { return std::exp(x); }, [](double, double y) { return y; },
       [](const Tensor& x) { return hg::exp(x); }},
      {OpId::log, {}, Domain::kPositive, [](double x) { return std::log(x); }, [](double x, double) { return 1 / x; },
       [](const Tensor& x) { return hg::log(x); }},
      {OpId::sqrt, {}, Domain::kPositive, [](double x) { return std::sqrt(x); },
       [](double, double y) { return 0.5 / y; }, [](const Tensor& x) { return hg::sqrt(x); }},
      {OpId::rsqrt, {}, Domain::kPositive, [](double x) { return 1.0 / std::sqrt(x); },
       [](double, double y) { return -0.5 * y * y * y; }, [](const Tensor& x) { return hg::rsqrt(x); }},
      {OpId::tanh, {}, Domain::kAny, [](double x) { return std::tanh(x); }, [](double, double y) { return 1 - y * y; },
       [](const Tensor& x) { return hg::tanh(x); }},
      {OpId::sigmoid, {}, Domain::kAny, sigmoid_ref, [](double, double y) { return y * (1 - y); },
       [](const Tensor& x) { return hg::sigmoid(x); }},
      {OpId::gelu, {}, Domain::kAny, gelu_ref, nullptr, [](const Tensor& x) { return hg::gelu(x); }},
      {OpId::gelu_tanh, {}, Domain::kAny, gelu_tanh_ref, nullptr, [](const Tensor& x) { return hg::gelu(x, true); }},
      {OpId::silu, {}, Domain::kAny, [](double x) { return x * sigmoid_ref(x); }, nullptr,
       [](const Tensor& x) { return hg::silu(x); }},
      {OpId::erf, {}, Domain::kAny, [](double x) { return std::erf(x); },
       [](double x, double) { return 2.0 / std::sqrt(M_PI) * std::exp(-x * x); },
       [](const Tensor& x) { return hg::erf(x); }},
      {OpId::round, {}, Domain::kAny, [](double x) { return std::nearbyint(x); },
       [](double, double) { return 0.0; }, [](const Tensor& x) { return hg::round(x); }},
      {OpId::floor, {}, Domain::kAny, [](double x) { return std::floor(x); }, [](double, double) { return 0.0; },
       [](const Tensor& x) { return hg::floor(x); }},
      {OpId::trunc, {}, Domain::kAny, [](double x) { return std::trunc(x); }, [](double, double) { return 0.0; },
       [](const Tensor& x) { return hg::trunc(x); }},
      {OpId::clamp, {-1.0, 2.0}, Domain::kAny, [](double x) { return clamp_ref(x, -1.0, 2.0); },
       [](double x, double) { return (x >= -1.0 && x <= 2.0) ? 1.0 : 0.0; },
       [](const Tensor& x) { return hg::clamp(x, -1.0, 2.0); }},
      {OpId::clamp, {0.25, kInf}, Domain::kAny, [](double x) { return clamp_ref(x, 0.25, kInf); },
       [](double x, double) { return x >= 0.25 ? 1.0 : 0.0; }, [](const Tensor& x) { return hg::clamp(x, 0.25); }},
      {OpId::softplus, {1.0, 20.0}, Domain::kAny, [](double x) { return softplus_ref(x, 1.0, 20.0); },
       [](double x, double) { return x > 20.0 ? 1.0 : sigmoid_ref(x); },
       [](const Tensor& x) { return hg::softplus(x); }},
      {OpId::softplus, {2.0, 3.0}, Domain::kAny, [](double x) { return softplus_ref(x, 2.0, 3.0); },
       [](double x, double) { return 2.0 * x > 3.0 ? 1.0 : sigmoid_ref(2.0 * x); },
       [](const Tensor& x) { return hg::softplus(x, 2.0, 3.0); }},
  };
  // clang-format on
  return cases;
}

std::string case_name(const UnaryCase& c) {
  std::string name(op_name(c.op));
  if (c.args.a != 0.0 || c.args.b != 0.0) {
    name += "{" + std::to_string(c.args.a) + ", " + std::to_string(c.args.b) + "}";
  }
  return name;
}

// Central difference of the forward in double, for derivatives with no closed
// form simpler to trust than the kernel's own (gelu, gelu_tanh, silu).
double numeric_derivative(const Ref& f, double x) {
  const double h = 1e-6 * std::max(1.0, std::fabs(x));
  return (f(x + h) - f(x - h)) / (2 * h);
}

bool whole_args(const ScalarArgs& args) {
  auto whole = [](double v) { return std::isinf(v) || v == std::trunc(v); };
  return whole(args.a) && whole(args.b);
}

struct BinaryInfo {
  OpId op;
  std::function<double(double, double)> ref;
  bool comparison = false;
};

double max_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double min_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

const std::vector<BinaryInfo>& binary_ops() {
  static const std::vector<BinaryInfo> ops{
      {OpId::add, [](double a, double b) { return a + b; }},
      {OpId::sub, [](double a, double b) { return a - b; }},
      {OpId::mul, [](double a, double b) { return a * b; }},
      {OpId::div, [](double a, double b) { return a / b; }},
      {OpId::maximum, max_nan},
      {OpId::minimum, min_nan},
      {OpId::eq, [](double a, double b) { return double(a == b); }, true},
      {OpId::ne, [](double a, double b) { return double(a != b); }, true},
      {OpId::lt, [](double a, double b) { return double(a < b); }, true},
      {OpId::le, [](double a, double b) { return double(a <= b); }, true},
      {OpId::gt, [](double a, double b) { return double(a > b); }, true},
      {OpId::ge, [](double a, double b) { return double(a >= b); }, true},
  };
  return ops;
}

struct ShapeSample {
  const char* name;
  Shape shape;
  bool noncontiguous;
};

const std::vector<ShapeSample>& shape_samples() {
  static const std::vector<ShapeSample> samples{
      {"rank0", {}, false},          {"empty", {0, 3}, false},
      {"vector", {7}, false},        {"odd-tail", {1029}, false},
      {"matrix", {5, 6}, false},     {"transposed", {6, 5}, true},
      {"strided-1d", {33}, true},    {"rank3", {2, 3, 9}, false},
  };
  return samples;
}

std::vector<double> apply_ref(const std::function<double(double)>& f, const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f(x[i]);
  return out;
}

}  // namespace

TEST_CASE("every unary op of the op list has a registry entry", "[kernels][elementwise]") {
#define HG_UNARY_ID(name, dtypes, amp, grad) OpId::name,
  for (OpId op : {HG_FORALL_UNARY_OPS(HG_UNARY_ID)}) {
#undef HG_UNARY_ID
    INFO(op_name(op));
    CHECK(std::count_if(unary_cases().begin(), unary_cases().end(),
                        [op](const UnaryCase& c) { return c.op == op; }) >= 1);
  }
}

TEST_CASE("unary ops match the double reference on every device and dtype", "[kernels][elementwise]") {
  for (const UnaryCase& c : unary_cases()) {
    for (Device device : test_devices()) {
      for (DType dtype : float_dtypes()) {
        for (const ShapeSample& sample : shape_samples()) {
          for (Domain domain : {c.domain, Domain::kExtreme}) {
            Tensor x = make_input(sample.shape, dtype, domain, 17).to(device);
            if (sample.noncontiguous) x = make_noncontiguous(x);
            const Tensor y = ops::unary(c.op, x, c.args);
            const auto expected = round_to(apply_ref(c.ref, values_of(x)), dtype);
            INFO(label(device, dtype, case_name(c) + " " + sample.name +
                                          (domain == Domain::kExtreme ? " extreme" : "")));
            CHECK(y.dtype() == dtype);
            CHECK(y.sizes() == x.sizes());
            CHECK(compare_values(values_of(y), expected, tolerance_for(dtype, OpKind::kElementwise)) == "");
          }
        }
      }
      // Ops that take integers compute in the integer type (exactly).
      if (op_info(c.op).dtypes == OpDTypes::any && whole_args(c.args)) {
        for (DType dtype : {kI32, kI64}) {
          Tensor x = make_noncontiguous(make_input({5, 7}, dtype, Domain::kAny, 23)).to(device);
          const Tensor y = ops::unary(c.op, x, c.args);
          INFO(label(device, dtype, case_name(c)));
          CHECK(y.dtype() == dtype);
          CHECK(values_of(y) == round_to(apply_ref(c.ref, values_of(x)), dtype));
        }
      }
    }
  }
}

TEST_CASE("unary backward kernels match the derivative", "[kernels][elementwise]") {
  for (const UnaryCase& c : unary_cases()) {
    const GradFrom from = ops::unary_grad_from(c.op);
    for (Device device : test_devices()) {
      for (DType dtype : float_dtypes()) {
        const Tensor x = make_input({4, 33}, dtype, c.domain, 3).to(device);
        const Tensor y = ops::unary(c.op, x, c.args);
        const Tensor d_out = make_input({4, 33}, dtype, Domain::kAny, 4).to(device);
        const Tensor saved = from == GradFrom::input ? x : from == GradFrom::output ? y : Tensor();
        const Tensor d_x = ops::unary_backward(c.op, d_out, saved, c.args);
        const auto xv = values_of(x), yv = values_of(y), d = values_of(d_out);
        std::vector<double> expected(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) {
          expected[i] = d[i] * (c.dref ? c.dref(xv[i], yv[i]) : numeric_derivative(c.ref, xv[i]));
        }
        INFO(label(device, dtype, case_name(c) + " backward"));
        CHECK(d_x.dtype() == dtype);
        // A central difference is good to ~1e-9: fine for every row but f64,
        // which is then checked to 1e-7 (exact formulas keep the f64 row).
        Tolerance tol = tolerance_for(dtype, OpKind::kElementwise);
        if (dtype == kF64 && !c.dref) tol = kNumericDerivativeF64;
        CHECK(compare_values(values_of(d_x), round_to(expected, dtype), tol) == "");
      }
    }
  }
}

// Note [16-bit element-wise blocks on the CPU]: contiguous 16-bit ops widen
// blocks with the vectorised converters and run the float adapter. Each result
// must have the bits of the per-element contract: the op computed in float on
// the widened values and rounded once, which is what the f32 kernel followed
// by a cast computes. Sizes below and above the parallel grain, not a multiple
// of the block; normal and extreme (NaN, inf, subnormal, huge) values.
//
// A NaN's sign and payload are not part of the contract ("NaN in, NaN out"):
// x86 propagates one operand's NaN, and which one depends on the operand order
// the compiler chose, so the per-element 16-bit loop (HG_CPU_EW_BLOCKS=0,
// test_elementwise_no_blocks) and the f32 kernel may disagree there (erf's
// backward of +NaN: +NaN against -NaN). Two NaNs count as the same value.
TEST_CASE("16-bit element-wise blocks are bit-identical", "[kernels][elementwise][numerics]") {
  const auto same_bits = [](const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
    const Tensor ac = a.contiguous(), bc = b.contiguous();
    const auto* pa = static_cast<const uint16_t*>(ac.data_ptr());
    const auto* pb = static_cast<const uint16_t*>(bc.data_ptr());
    const std::vector<double> va = values_of(ac), vb = values_of(bc);
    for (size_t i = 0; i < va.size(); ++i) {
      if (pa[i] != pb[i] && !(std::isnan(va[i]) && std::isnan(vb[i]))) return false;
    }
    return true;
  };
  for (DType dtype : {kF16, kBF16}) {
    for (int64_t n : {int64_t{1000}, int64_t{70001}}) {
      for (Domain domain : {Domain::kAny, Domain::kExtreme}) {
        const Tensor x = make_input({n}, dtype, domain, 51);
        const Tensor d = make_input({n}, dtype, Domain::kAny, 52);
        const Tensor xf = x.to(kF32), df = d.to(kF32);
        for (const UnaryCase& c : unary_cases()) {
          INFO(label(Device::cpu(), dtype, case_name(c))
               << " n=" << n << (domain == Domain::kExtreme ? " extreme" : ""));
          CHECK(same_bits(ops::unary(c.op, x, c.args), ops::unary(c.op, xf, c.args).to(dtype)));
          const GradFrom from = ops::unary_grad_from(c.op);
          const Tensor y = ops::unary(c.op, x, c.args);
          const Tensor saved = from == GradFrom::input ? x : from == GradFrom::output ? y : Tensor();
          const Tensor saved_f = saved.defined() ? saved.to(kF32) : Tensor();
          CHECK(same_bits(ops::unary_backward(c.op, d, saved, c.args),
                          ops::unary_backward(c.op, df, saved_f, c.args).to(dtype)));
        }
        for (OpId op : {OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::maximum, OpId::minimum, OpId::pow}) {
          INFO(label(Device::cpu(), dtype, std::string(op_name(op))) << " n=" << n);
          CHECK(same_bits(ops::binary(op, x, d), ops::binary(op, xf, df).to(dtype)));
          CHECK(same_bits(ops::binary_scalar(op, x, 0.1), ops::binary_scalar(op, xf, 0.1).to(dtype)));
        }
      }
    }
  }
}

TEST_CASE("gradcheck passes for every unary op (f64)", "[kernels][elementwise][autograd]") {
  for (const UnaryCase& c : unary_cases()) {
    const Tensor x = make_input({3, 4}, kF64, c.domain, 11).requires_grad_(true);
    INFO(case_name(c));
    CHECK(gradcheck([&c](const std::vector<Tensor>& in) { return c.differentiable(in[0]); }, {x}) == "");
  }
}

TEST_CASE("clamp: optional bounds, integer tensors and the inclusive gradient", "[kernels][elementwise]") {
  for (Device device : test_devices()) {
    const Tensor x = from_vector(std::vector<double>{-3, -1, 0, 2, 5, NAN}).to(device);
    CHECK(values_of(hg::clamp(x, 0.0))[0] == 0.0);                     // min only
    CHECK(values_of(hg::clamp(x, std::nullopt, 1.0))[4] == 1.0);       // max only
    CHECK(std::isnan(values_of(hg::clamp(x, -1.0, 2.0))[5]));          // NaN stays NaN
    // min > max gives max everywhere (torch.clamp's rule).
    CHECK(values_of(hg::clamp(x.narrow(0, 0, 5), 3.0, 1.0)) == std::vector<double>{1, 1, 1, 1, 1});
    // The gradient flows where min <= x <= max, bounds included; NaN gets 0.
    Tensor leaf = x.detach().requires_grad_(true);
    hg::sum(hg::clamp(leaf, -1.0, 2.0)).backward();
    CHECK(values_of(leaf.grad()) == std::vector<double>{0, 1, 1, 1, 0, 0});
    // Integer tensors stay integer with whole (or missing) bounds, like torch.
    const Tensor ints = from_vector(std::vector<int64_t>{-5, 0, 7}).to(device);
    CHECK(ops::unary(OpId::clamp, ints, {-2.0, kInf}).dtype() == kI64);
    CHECK(ops::unary(OpId::clamp, ints, {-2.0, kInf}).to_vector<int64_t>() == std::vector<int64_t>{-2, 0, 7});
    CHECK(ops::unary(OpId::clamp, ints, {-1e30, 3.0}).to_vector<int64_t>() == std::vector<int64_t>{-5, 0, 3});
    const Tensor frac = ops::unary(OpId::clamp, ints, {0.5, kInf});
    CHECK(frac.dtype() == kF32);
    CHECK(values_of(frac) == std::vector<double>{0.5, 0.5, 7});
  }
  CHECK_THROWS_WITH(hg::clamp(zeros({2}), std::nullopt, std::nullopt), Catch::Contains("at least one of min and max"));
}

TEST_CASE("binary ops broadcast and match the double reference", "[kernels][elementwise]") {
  struct Pair {
    const char* name;
    Shape a, b;
  };
  const std::vector<Pair> pairs{{"same", {5, 7}, {5, 7}},    {"row", {5, 7}, {7}},
                                {"col", {5, 1}, {1, 7}},     {"scalar", {5, 7}, {}},
                                {"rank0", {}, {}},           {"empty", {0, 4}, {4}},
                                {"tail", {1031}, {1031}}};
  for (const BinaryInfo& info : binary_ops()) {
    for (Device device : test_devices()) {
      for (DType dtype : float_dtypes()) {
        for (const Pair& p : pairs) {
          for (bool extreme : {false, true}) {
            const Domain domain = extreme ? Domain::kExtreme : Domain::kAny;
            Tensor a = make_input(p.a, dtype, domain, 5).to(device);
            Tensor b = make_input(p.b, dtype, domain, 9).to(device);
            if (std::string(p.name) == "same") a = make_noncontiguous(a);
            const Tensor out = ops::binary(info.op, a, b);
            const Shape shape = broadcast_shapes(p.a, p.b, "test");
            const auto av = values_of(a.expand(shape)), bv = values_of(b.expand(shape));
            std::vector<double> expected(av.size());
            for (size_t i = 0; i < av.size(); ++i) expected[i] = info.ref(av[i], bv[i]);
            INFO(label(device, dtype, std::string(op_name(info.op)) + " " + p.name + (extreme ? " extreme" : "")));
            CHECK(out.sizes() == shape);
            CHECK(out.dtype() == (info.comparison ? kBool : dtype));
            const DType rounding = info.comparison ? kF64 : dtype;
            CHECK(compare_values(values_of(out), round_to(expected, rounding),
                                 tolerance_for(info.comparison ? kBool : dtype, OpKind::kElementwise)) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("scalar ops keep the scalar in fp32 and pow works", "[kernels][elementwise]") {
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      Tensor x = make_input({3, 11}, dtype, Domain::kPositive, 21).to(device);
      const auto xv = values_of(x);
      struct Case {
        OpId op;
        double s;
      };
      for (Case c : {Case{OpId::mul, 0.1}, Case{OpId::add, -2.5}, Case{OpId::div, 3.0},
                     Case{OpId::pow, 2.0}, Case{OpId::pow, 0.5}, Case{OpId::pow, -1.5},
                     Case{OpId::maximum, 1.0}}) {
        const Tensor y = ops::binary_scalar(c.op, x, c.s);
        // The scalar is used at f32 precision (f64 for f64), not rounded to dtype.
        const double s = dtype == kF64 ? c.s : static_cast<double>(static_cast<float>(c.s));
        std::vector<double> expected(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) {
          switch (c.op) {
            case OpId::mul: expected[i] = xv[i] * s; break;
            case OpId::add: expected[i] = xv[i] + s; break;
            case OpId::div: expected[i] = xv[i] / s; break;
            case OpId::pow: expected[i] = std::pow(xv[i], s); break;
            default: expected[i] = std::max(xv[i], s); break;
          }
        }
        INFO(label(device, dtype, std::string(op_name(c.op)) + " scalar " + std::to_string(c.s)));
        CHECK(compare_values(values_of(y), round_to(expected, dtype),
                             tolerance_for(dtype, OpKind::kElementwise)) == "");
      }
      // f16 * 0.1 must multiply by 0.1f, not by half(0.1) = 0.0999755859375.
      if (dtype == kF16) {
        Tensor big = full({1}, 2048.0, {.dtype = kF16, .device = device});
        CHECK(ops::binary_scalar(OpId::mul, big, 0.1).item<float>() == static_cast<float>(half(2048.0f * 0.1f)));
      }
    }
  }
}

TEST_CASE("where selects and promotes", "[kernels][elementwise]") {
  for (Device device : test_devices()) {
    Tensor a = make_input({4, 5}, kF16, Domain::kAny, 1).to(device);
    Tensor b = make_input({5}, kF32, Domain::kAny, 2).to(device);
    Tensor cond = ops::binary_scalar(OpId::gt, a, 0.0);
    Tensor out = ops::where(cond, a, b);
    CHECK(out.dtype() == kF32);
    const auto av = values_of(a), bv = values_of(b.expand({4, 5})), cv = values_of(cond);
    std::vector<double> expected(av.size());
    for (size_t i = 0; i < av.size(); ++i) expected[i] = cv[i] != 0 ? av[i] : bv[i];
    CHECK(values_of(out) == expected);
    CHECK_THROWS_WITH(ops::where(a, a, b), Catch::Contains("must be a bool tensor"));
  }
}

TEST_CASE("in-place ops write through views and bump the version", "[kernels][elementwise]") {
  for (Device device : test_devices()) {
    Tensor a = zeros({3, 4}, {.device = device});
    Tensor col = a.select(1, 2);
    const uint64_t v0 = a.version();
    ops::binary_scalar_(OpId::add, col, 2.0);
    ops::binary_(OpId::mul, col, full({3}, 3.0, {.device = device}));
    ops::unary_(OpId::neg, col);
    CHECK(a.version() == v0 + 3);
    CHECK(values_of(a) == std::vector<double>{0, 0, -6, 0, 0, 0, -6, 0, 0, 0, -6, 0});
    CHECK_THROWS_WITH(ops::binary_(OpId::add, col, zeros({2, 3}, {.device = device})),
                      Catch::Contains("must broadcast to the first"));
    Tensor ints = zeros({3}, {.dtype = kI32, .device = device});
    CHECK_THROWS_WITH(ops::binary_scalar_(OpId::div, ints, 2.0), Catch::Contains("out-of-place"));
  }
}

TEST_CASE("dtype promotion follows the documented rules", "[kernels][elementwise]") {
  CHECK(ops::promote_types(kF16, kBF16) == kF32);
  CHECK(ops::promote_types(kF16, kF32) == kF32);
  CHECK(ops::promote_types(kI64, kF16) == kF16);
  CHECK(ops::promote_types(kI32, kI64) == kI64);
  CHECK(ops::promote_types(kBool, kU8) == kU8);
  CHECK(ops::promote_types(kF32, kF64) == kF64);
  Tensor i = arange(4, {.dtype = kI64});
  CHECK(ops::exp(i).dtype() == kF32);                      // int -> float for float math
  CHECK(ops::add(i, i).dtype() == kI64);
  CHECK(ops::binary(OpId::div, i, i).dtype() == kF32);     // true division
  CHECK(ops::binary_scalar(OpId::mul, i, 0.5).dtype() == kF32);
  CHECK(ops::binary_scalar(OpId::mul, i, 2.0).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 6});
}

TEST_CASE("elementwise ops reject bad input with clear errors", "[kernels][elementwise][errors]") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  CHECK_THROWS_WITH(ops::add(a, b), Catch::Contains("add: shapes [2, 3] and [4] cannot be broadcast"));
  CHECK_THROWS_WITH(ops::relu(zeros({2}, {.dtype = kBool})), Catch::Contains("bool"));
  CHECK_THROWS_WITH(ops::unary(OpId::add, a), Catch::Contains("not a unary op"));
  CHECK_THROWS_WITH(ops::unary_backward(OpId::relu, a, b), Catch::Contains("differs"));
  CHECK_THROWS_WITH(ops::unary_backward(OpId::add, a, a), Catch::Contains("no derivative formula"));
  CHECK_THROWS_WITH(hg::softplus(a, 0.0), Catch::Contains("beta must be finite and non-zero"));
#if defined(HG_WITH_CUDA)
  CHECK_THROWS_WITH(ops::add(a, zeros({2, 3}, {.device = Device::cuda()})),
                    Catch::Contains("different devices"));
#endif
}

TEST_CASE("casts: 70000 to fp16 is inf and every pair of dtypes converts", "[kernels][cast]") {
  for (Device device : test_devices()) {
    Tensor big = full({9}, 70000.0, {.device = device});
    for (float v : big.to(kF16).to_vector<float>()) CHECK(std::isinf(v));
    const std::vector<DType> all{kF32, kF16, kBF16, kF64, kI64, kI32, kU8, kBool};
    Tensor src = from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 100, 200}, {2, 5}).to(device);
    for (DType from : all) {
      for (DType to : all) {
        Tensor x = make_noncontiguous(src.to(from));
        Tensor y = x.to(to);
        CHECK(y.to_vector<double>() == x.cpu().to(to).to_vector<double>());  // device == cpu rule
      }
    }
  }
}

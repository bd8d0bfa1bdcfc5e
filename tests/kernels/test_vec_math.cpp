// The CPU math paths (kernels/cpu/vec_math.h): the scalar reference (glibc's
// libm through the functors) and SLEEF's vector kernels per ISA, each forced
// by its switch and compared with the f64 kernels (glibc's double libm) on
// dense sweeps. The pure functions must stay within 2 f32 ulps of the f64
// value on both paths (SLEEF's u10 bound is 1.0 ulp, glibc's expf/logf/tanhf/
// erff are below 1 ulp; the f64 reference adds at most half an ulp when
// rounded to f32); the composite ops (GELU, SiLU, softplus, their backwards,
// softmax rows, cross-entropy) are held to the f32 rows of
// tests/kernels/tolerance.h. Sizes cover one value, the vector tails (15, 17),
// the block edge (4095, 4097) and the parallel grain (70001). The 16-bit
// kernels, which widen and round in the vector registers, must give the f32
// kernel's result rounded once, bit for bit, and their conversions must be
// core/half.h's (ties to even, NaN, infinities, subnormals).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/shape.h"
#include "kernels/attention/attention.h"
#include "kernels/conv/conv.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/ops.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

// Restores the process's math path and ISA cap when a test ends.
struct MathPathGuard {
  cpu::CpuMath math = cpu::cpu_math();
  cpu::VecIsa cap = cpu::cpu_isa_cap();
  MathPathGuard() = default;
  MathPathGuard(const MathPathGuard&) = delete;
  MathPathGuard& operator=(const MathPathGuard&) = delete;
  ~MathPathGuard() {
    cpu::set_cpu_math(math);
    cpu::set_cpu_isa_cap(cap);
  }
};

bool cpu_has(cpu::VecIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case cpu::VecIsa::sse2:
      return true;
    case cpu::VecIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case cpu::VecIsa::avx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

struct Path {
  std::string name;  // what cpu_math_name() must say
  cpu::CpuMath math;
  cpu::VecIsa cap;
};

// The paths this build and CPU can run: scalar, and SLEEF at every ISA up to the CPU's.
std::vector<Path> runnable_paths() {
  std::vector<Path> paths{{"scalar", cpu::CpuMath::scalar, cpu::VecIsa::avx512}};
  const MathPathGuard guard;
  cpu::set_cpu_math(cpu::CpuMath::sleef);
  cpu::set_cpu_isa_cap(cpu::VecIsa::sse2);
  if (std::string(cpu::cpu_math_name()) == "scalar") return paths;  // built without SLEEF
  paths.push_back({"sleef-sse2", cpu::CpuMath::sleef, cpu::VecIsa::sse2});
  if (cpu_has(cpu::VecIsa::avx2)) paths.push_back({"sleef-avx2", cpu::CpuMath::sleef, cpu::VecIsa::avx2});
  if (cpu_has(cpu::VecIsa::avx512)) paths.push_back({"sleef-avx512", cpu::CpuMath::sleef, cpu::VecIsa::avx512});
  return paths;
}

// f32 values evenly spread over [lo, hi], n of them.
Tensor sweep(double lo, double hi, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] =
        lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(std::max<int64_t>(n - 1, 1));
  return from_vector(v, {n}, {.dtype = kF32});
}

// Largest error of `actual` (f32) against `expected` (f64) in ulps of f32 at
// the expected value; NaN must meet NaN and infinities must match.
double max_ulps(const std::vector<double>& actual, const std::vector<double>& expected) {
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (std::isnan(e) || std::isinf(e)) {
      if (!(std::isnan(e) ? std::isnan(a) : a == e)) return INFINITY;
      continue;
    }
    const double ef = std::max(std::fabs(e), 0x1p-126);
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(ef)) - 23);
    worst = std::max(worst, std::fabs(a - e) / ulp);
  }
  return worst;
}

struct VecCase {
  OpId op;
  double lo, hi;
  ScalarArgs args;
  bool pure;  // one libm function: held to 2 ulps
};

const std::vector<VecCase>& vec_cases() {
  static const std::vector<VecCase> cases{
      {OpId::exp, -87.0, 88.0, {}, true},
      {OpId::log, 1e-30, 1e30, {}, true},
      {OpId::tanh, -12.0, 12.0, {}, true},
      {OpId::erf, -5.0, 5.0, {}, true},
      {OpId::sigmoid, -30.0, 30.0, {}, false},
      {OpId::silu, -30.0, 30.0, {}, false},
      {OpId::gelu, -8.0, 8.0, {}, false},
      {OpId::gelu_tanh, -8.0, 8.0, {}, false},
      {OpId::softplus, -30.0, 30.0, {1.0, 20.0}, false},
      {OpId::softplus, -10.0, 10.0, {2.0, 5.0}, false},
  };
  return cases;
}

}  // namespace

TEST_CASE("CPU math switches pick the path they name", "[kernels][vec-math]") {
  const MathPathGuard guard;
  for (const Path& p : runnable_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    CHECK(std::string(cpu::cpu_math_name()) == p.name);
    CHECK((cpu::vec_math() == nullptr) == (p.math == cpu::CpuMath::scalar));
  }
  // A cap above the CPU's ISA falls back to the CPU's best.
  cpu::set_cpu_math(cpu::CpuMath::sleef);
  cpu::set_cpu_isa_cap(cpu::VecIsa::avx512);
  const std::string best = cpu::cpu_math_name();
  if (best != "scalar") {
    CHECK(best == (cpu_has(cpu::VecIsa::avx512) ? "sleef-avx512"
                   : cpu_has(cpu::VecIsa::avx2) ? "sleef-avx2"
                                                : "sleef-sse2"));
  }
}

TEST_CASE("every CPU math path matches f64 on the transcendental ops", "[kernels][vec-math]") {
  const MathPathGuard guard;
  for (const Path& p : runnable_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    for (const VecCase& c : vec_cases()) {
      for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{17}, int64_t{4097}, int64_t{70001}}) {
        const Tensor x = sweep(c.lo, c.hi, n);
        const Tensor xd = x.to(kF64);
        INFO(p.name << " " << op_name(c.op) << " n=" << n);
        const std::vector<double> y = values_of(ops::unary(c.op, x, c.args));
        const std::vector<double> yd = values_of(ops::unary(c.op, xd, c.args));
        if (c.pure) {
          const double ulps = max_ulps(y, yd);
          INFO("max ulps " << ulps);
          CHECK(ulps <= 2.0);
        }
        CHECK(compare_values(y, round_to(yd, kF32), tolerance_for(kF32, OpKind::kElementwise)) == "");
        // The backward, where it has a transcendental function.
        const GradFrom from = ops::unary_grad_from(c.op);
        const Tensor d = make_input({n}, kF32, Domain::kAny, 7);
        const Tensor saved = from == GradFrom::input ? x : ops::unary(c.op, x, c.args);
        const Tensor saved_d = from == GradFrom::input ? xd : ops::unary(c.op, xd, c.args);
        CHECK(compare_values(values_of(ops::unary_backward(c.op, d, saved, c.args)),
                             round_to(values_of(ops::unary_backward(c.op, d.to(kF64), saved_d, c.args)), kF32),
                             tolerance_for(kF32, OpKind::kElementwise)) == "");
      }
      // NaN in, NaN out; infinities as the f64 kernel gives them.
      const Tensor ext = make_input({37}, kF32, Domain::kExtreme, 5);
      INFO(p.name << " " << op_name(c.op) << " extreme");
      CHECK(compare_values(values_of(ops::unary(c.op, ext, c.args)),
                           round_to(values_of(ops::unary(c.op, ext.to(kF64), c.args)), kF32),
                           tolerance_for(kF32, OpKind::kElementwise)) == "");
    }
  }
}

// GELU far in the negative tail, against references written here in
// cancellation-free f64 forms (Phi(x) = erfc(-x / sqrt 2) / 2, and
// (1 + tanh u) / 2 = 1 / (1 + e^(-2u))): the (1 + erf) form that GELU used
// before is 0 in float below x = -5.5, where the results are not (Note [The
// normal CDF in the tail], kernels/cpu/vec_math_impl.h). The bound is the
// error of the argument's float roundings (each at most 2^-24 relative),
// which erfc and exp amplify by their logarithmic slope: a relative error e
// of a costs erfc(a) 2 a^2 e, a = x / sqrt 2 (e <= 1.2 2^-24: the product's
// rounding and the float 1/sqrt 2's 0.2), and of 2u costs e^(-2u) |2u| e
// (e <= 5 2^-24: five roundings in u); in ulps of the result (each at least
// 2^-24 of it): 1.2 x^2 for gelu, 5 |2u| for gelu_tanh; plus a few ulps for
// the function and the products. bf16 results are held to half
// a bf16 ulp (the f32 error above is below 1e-3 of a bf16 ulp).
TEST_CASE("GELU's negative tail matches f64 on every CPU math path", "[kernels][vec-math]") {
  const MathPathGuard guard;
  const Tensor x = sweep(-12.5, -3.01, 4097);
  const std::vector<double> xs = values_of(x);
  std::vector<double> gelu(xs.size()), gelu_tanh(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i], u = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
    gelu[i] = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    gelu_tanh[i] = v / (1.0 + std::exp(-2.0 * u));
  }
  for (const Path& p : runnable_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    for (const OpId op : {OpId::gelu, OpId::gelu_tanh}) {
      const std::vector<double>& ref = op == OpId::gelu ? gelu : gelu_tanh;
      const std::vector<double> y = values_of(ops::unary(op, x));
      const std::vector<double> yb = values_of(ops::unary(op, x.to(kBF16)));
      const std::vector<double> xb = values_of(x.to(kBF16));
      int bad = 0, bad_bf16 = 0;
      for (size_t i = 0; i < xs.size() && bad + bad_bf16 < 5; ++i) {
        const double v = xs[i], u = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
        const double slope = op == OpId::gelu ? 1.2 * v * v : 5.0 * std::fabs(2.0 * u);
        const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(ref[i]), 0x1p-126)) - 23);
        if (!(std::fabs(y[i] - ref[i]) <= (4.0 + slope) * ulp + 0x1p-149)) {
          ++bad;
          UNSCOPED_INFO(p.name << " " << op_name(op) << "(" << v << ") = " << y[i] << ", f64 " << ref[i]);
        }
        // bf16: the input rounded to bf16 first, the result to half a bf16 ulp.
        const double vb = xb[i], ub = std::sqrt(2.0 / M_PI) * (vb + 0.044715 * vb * vb * vb);
        const double rb =
            op == OpId::gelu ? 0.5 * vb * std::erfc(-vb / std::sqrt(2.0)) : vb / (1.0 + std::exp(-2.0 * ub));
        const double ulp_b = std::ldexp(1.0, std::ilogb(std::max(std::fabs(rb), 0x1p-126)) - 7);
        if (!(std::fabs(yb[i] - rb) <= 0.51 * ulp_b + 0x1p-133)) {
          ++bad_bf16;
          UNSCOPED_INFO(p.name << " bf16 " << op_name(op) << "(" << vb << ") = " << yb[i] << ", f64 " << rb);
        }
      }
      CHECK(bad == 0);
      CHECK(bad_bf16 == 0);
    }
  }
}

TEST_CASE("every CPU math path matches f64 on softmax rows and cross-entropy", "[kernels][vec-math]") {
  const MathPathGuard guard;
  for (const Path& p : runnable_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    for (DType dtype : {kF32, kF16, kBF16}) {
      for (int64_t cols : {int64_t{1}, int64_t{17}, int64_t{1000}}) {
        const int64_t rows = 37;
        std::vector<double> xv = values_of(make_input({rows, cols}, kF64, Domain::kAny, 11));
        for (double& v : xv) v *= 4.0;  // logits in [-12, 12)
        const Tensor x = from_vector(xv, {rows, cols}, {.dtype = dtype});
        const Tensor xd = x.to(kF64);
        const Tolerance tol = tolerance_for(dtype, OpKind::kReduction);
        INFO(p.name << " " << dtype_name(dtype) << " cols=" << cols);
        const Tensor y = ops::softmax(x), ly = ops::log_softmax(x);
        CHECK(compare_values(values_of(y), round_to(values_of(ops::softmax(xd)), dtype), tol) == "");
        CHECK(compare_values(values_of(ly), round_to(values_of(ops::log_softmax(xd)), dtype), tol) == "");
        const Tensor dy = make_input({rows, cols}, dtype, Domain::kAny, 12);
        CHECK(compare_values(values_of(ops::log_softmax_backward(dy, ly)),
                             round_to(values_of(ops::log_softmax_backward(dy.to(kF64), ly.to(kF64))), dtype),
                             tol) == "");
        std::vector<double> t(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) t[static_cast<size_t>(r)] = static_cast<double>((r * 7) % cols);
        t[3] = static_cast<double>(ops::kDefaultIgnoreIndex);
        const Tensor targets = from_vector(t, {rows}, {.dtype = kI64});
        for (double smoothing : {0.0, 0.1}) {
          INFO("label_smoothing " << smoothing);
          const Tensor loss = ops::cross_entropy(x, targets, ops::kDefaultIgnoreIndex, smoothing);
          const Tensor loss_d = ops::cross_entropy(xd, targets, ops::kDefaultIgnoreIndex, smoothing);
          CHECK(compare_values(values_of(loss), values_of(loss_d), tolerance_for(kF32, OpKind::kReduction)) == "");
          const Tensor one = scalar_tensor(1.5);
          CHECK(compare_values(
                    values_of(ops::cross_entropy_backward(one, x, targets, ops::kDefaultIgnoreIndex, smoothing)),
                    round_to(
                        values_of(ops::cross_entropy_backward(one, xd, targets, ops::kDefaultIgnoreIndex, smoothing)),
                        dtype),
                    tol) == "");
        }
      }
    }
  }
}

namespace {

// Exact equality of two value lists, NaN meeting NaN.
std::string first_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] != b[i]) return "at " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
  }
  return "";
}

float float_of_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// f32 values whose 16-bit rounding is delicate: exact ties (to even and to
// odd neighbours) and their neighbours for f16 and bf16, the overflow edge,
// subnormal results, signed zeros, infinities, NaNs with payloads (quiet and
// signalling), then pseudo-random bit patterns.
std::vector<float> rounding_cases() {
  std::vector<float> v;
  for (float base : {1.0f, 1.5f, -2.0f, 1024.0f, 3.0e-5f, -6.1e-5f, 65504.0f, 1.0e30f, -3.0e38f, 1.0e-39f}) {
    const uint32_t b = bits_of(base);
    // bf16 keeps the top 16 bits: ties at 0x8000 of the low half; f16 keeps
    // 10 mantissa bits: ties at 0x1000 of the low 13 for normal results.
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u, 0x0fffu, 0x1000u, 0x1001u, 0x3000u}) {
      v.push_back(float_of_bits((b & ~0x1ffffu) | low));
    }
  }
  for (float f : {65519.0f, 65520.0f, 65536.0f, -65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1p-14f,
                  0x1.ff8p-15f, 0.0f, -0.0f, INFINITY, -INFINITY}) {
    v.push_back(f);
  }
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u, 0xff812345u, 0x7fffffffu}) {
    v.push_back(float_of_bits(nan));
  }
  uint32_t state = 12345;
  for (int i = 0; i < 1000; ++i) {
    state = state * 1664525u + 1013904223u;
    v.push_back(float_of_bits(state));
  }
  return v;  // 1116 values: not a multiple of any vector width
}

}  // namespace

// The 16-bit cross-entropy rows widen each logit (on the vector math in the
// registers: VecMathTable::lse_row / exp_grad): on every math path the loss
// must be the f32 kernel's on the widened logits bit for bit, and the
// gradient that gradient rounded once; with label smoothing, an ignored row,
// a NaN row, +-inf logits and a row length with a partial vector.
TEST_CASE("16-bit cross-entropy rows give the f32 kernel's bits on the widened logits", "[kernels][vec-math]") {
  const MathPathGuard guard;
  for (const Path& p : runnable_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    for (DType dtype : {kF16, kBF16}) {
      const int64_t rows = 9, cols = 1037;
      std::vector<double> xv = values_of(make_input({rows, cols}, kF64, Domain::kAny, 21));
      for (double& v : xv) v *= 8.0;
      xv[static_cast<size_t>(2 * cols + 5)] = std::nan("");
      xv[static_cast<size_t>(4 * cols + 7)] = INFINITY;
      xv[static_cast<size_t>(5 * cols + 9)] = -INFINITY;
      const Tensor x = from_vector(xv, {rows, cols}, {.dtype = dtype});
      const Tensor xf = x.to(kF32);
      std::vector<double> t(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) t[static_cast<size_t>(r)] = static_cast<double>((r * 131) % cols);
      t[6] = static_cast<double>(ops::kDefaultIgnoreIndex);
      const Tensor targets = from_vector(t, {rows}, {.dtype = kI64});
      for (double smoothing : {0.0, 0.1}) {
        INFO(p.name << " " << dtype_name(dtype) << " label_smoothing " << smoothing);
        CHECK(first_difference(values_of(ops::cross_entropy(x, targets, ops::kDefaultIgnoreIndex, smoothing)),
                               values_of(ops::cross_entropy(xf, targets, ops::kDefaultIgnoreIndex, smoothing))) == "");
        const Tensor one = scalar_tensor(1.5);
        CHECK(first_difference(
                  values_of(ops::cross_entropy_backward(one, x, targets, ops::kDefaultIgnoreIndex, smoothing)),
                  values_of(
                      ops::cross_entropy_backward(one, xf, targets, ops::kDefaultIgnoreIndex, smoothing).to(dtype))) ==
              "");
      }
    }
  }
}

TEST_CASE("the vector kernels' 16-bit conversions are core/half.h's, ties to even and NaN", "[kernels][vec-math]") {
  const MathPathGuard guard;
  const std::vector<float> in = rounding_cases();
  const auto n = static_cast<int64_t>(in.size());
  for (const Path& p : runnable_paths()) {
    if (p.math == cpu::CpuMath::scalar) continue;
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    const cpu::VecMathTable* vt = cpu::vec_math();
    REQUIRE(vt != nullptr);
    for (cpu::VecType t : {cpu::VecType::f16, cpu::VecType::bf16}) {
      const bool f16 = t == cpu::VecType::f16;
      INFO(p.name << (f16 ? " f16" : " bf16"));
      for (int64_t len : {n, int64_t{1}, int64_t{7}, int64_t{33}}) {
        std::vector<uint16_t> got(static_cast<size_t>(len), 0xdead);
        vt->narrow(t, in.data(), got.data(), len);
        for (int64_t i = 0; i < len; ++i) {
          const float x = in[static_cast<size_t>(i)];
          const uint16_t want = f16 ? detail::float_to_half_bits(x) : detail::float_to_bfloat16_bits(x);
          INFO("i=" << i << " x bits 0x" << std::hex << bits_of(x) << " got 0x" << got[static_cast<size_t>(i)]
                    << " want 0x" << want);
          REQUIRE(got[static_cast<size_t>(i)] == want);
        }
      }
      // Widening every 16-bit pattern is exact.
      std::vector<uint16_t> all(65536);
      for (uint32_t b = 0; b < 65536; ++b) all[b] = static_cast<uint16_t>(b);
      std::vector<float> wide(65536);
      vt->widen(t, all.data(), wide.data(), 65535);  // a tail of 15
      for (uint32_t b = 0; b < 65535; ++b) {
        const float want = f16 ? detail::half_bits_to_float(static_cast<uint16_t>(b))
                               : detail::bfloat16_bits_to_float(static_cast<uint16_t>(b));
        INFO("bits 0x" << std::hex << b);
        REQUIRE((bits_of(wide[b]) == bits_of(want) || (std::isnan(want) && std::isnan(wide[b]))));
      }
    }
  }
}

TEST_CASE("16-bit vector kernels give the f32 kernel's result rounded once", "[kernels][vec-math]") {
  const MathPathGuard guard;
  for (const Path& p : runnable_paths()) {
    if (p.math == cpu::CpuMath::scalar) continue;
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    for (DType dtype : {kF16, kBF16}) {
      for (const VecCase& c : vec_cases()) {
        for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{4097}, int64_t{70001}}) {
          INFO(p.name << " " << dtype_name(dtype) << " " << op_name(c.op) << " n=" << n);
          const Tensor x = sweep(std::max(c.lo, -60000.0), std::min(c.hi, 60000.0), n).to(dtype);
          const Tensor xf = x.to(kF32);
          CHECK(first_difference(values_of(ops::unary(c.op, x, c.args)),
                                 round_to(values_of(ops::unary(c.op, xf, c.args)), dtype)) == "");
          const GradFrom from = ops::unary_grad_from(c.op);
          const Tensor d = make_input({n}, dtype, Domain::kAny, 7);
          const Tensor saved = from == GradFrom::input ? x : ops::unary(c.op, x, c.args);
          CHECK(first_difference(
                    values_of(ops::unary_backward(c.op, d, saved, c.args)),
                    round_to(values_of(ops::unary_backward(c.op, d.to(kF32), saved.to(kF32), c.args)), dtype)) == "");
        }
        const Tensor ext = make_input({37}, dtype, Domain::kExtreme, 5);
        INFO(p.name << " " << dtype_name(dtype) << " " << op_name(c.op) << " extreme");
        CHECK(first_difference(values_of(ops::unary(c.op, ext, c.args)),
                               round_to(values_of(ops::unary(c.op, ext.to(kF32), c.args)), dtype)) == "");
      }
      for (int64_t cols : {int64_t{1}, int64_t{15}, int64_t{17}, int64_t{4096}}) {
        const int64_t rows = 9;
        INFO(p.name << " " << dtype_name(dtype) << " softmax cols=" << cols);
        std::vector<double> xv = values_of(make_input({rows, cols}, kF64, Domain::kAny, 21));
        for (double& v : xv) v *= 6.0;
        if (cols > 1) {
          xv[3] = std::nan("");                       // row 0 becomes NaN
          xv[static_cast<size_t>(cols)] = -INFINITY;  // row 1 has a masked value
        }
        const Tensor x = from_vector(xv, {rows, cols}, {.dtype = dtype});
        const Tensor xf = x.to(kF32);
        const Tensor y = ops::softmax(x), ly = ops::log_softmax(x);
        CHECK(first_difference(values_of(y), round_to(values_of(ops::softmax(xf)), dtype)) == "");
        CHECK(first_difference(values_of(ly), round_to(values_of(ops::log_softmax(xf)), dtype)) == "");
        const Tensor dy = make_input({rows, cols}, dtype, Domain::kAny, 22);
        CHECK(first_difference(values_of(ops::softmax_backward(dy, y)),
                               round_to(values_of(ops::softmax_backward(dy.to(kF32), y.to(kF32))), dtype)) == "");
        CHECK(first_difference(values_of(ops::log_softmax_backward(dy, ly)),
                               round_to(values_of(ops::log_softmax_backward(dy.to(kF32), ly.to(kF32))), dtype)) == "");
      }
    }
  }
}

// Batch norm's dense runs (sums in double lanes, the normalisation and d_x in
// f32 lanes) and the causal attention softmax rows take the vector kernels on
// the SLEEF paths and the scalar loops on the scalar path: both against the
// f64 kernels. Runs of 35 values (two AVX-512 vectors and a tail) and of 256,
// NCHW and channels-last (strided runs: the scalar loops on every path).
TEST_CASE("every CPU math path matches f64 on batch norm and the causal attention softmax", "[kernels][vec-math]") {
  const MathPathGuard guard;
  for (const Path& p : runnable_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    for (DType dtype : {kF32, kF16, kBF16}) {
      const Tolerance tol = tolerance_for(dtype, OpKind::kReduction);
      for (const Shape& shape : {Shape{3, 4, 5, 7}, Shape{2, 3, 16, 16}}) {
        for (bool cl : {false, true}) {
          INFO(p.name << " " << dtype_name(dtype) << " batch_norm " << shape_to_string(shape)
                      << (cl ? " channels-last" : " NCHW"));
          std::vector<double> xv = values_of(make_input(shape, kF64, Domain::kAny, 41));
          for (double& v : xv) v = 3.0 * v + 1.5;  // a mean far from 0
          Tensor x = from_vector(xv, shape, {.dtype = dtype});
          Tensor dy = make_input(shape, dtype, Domain::kAny, 42);
          if (cl) {
            x = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
            dy = dy.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
          }
          std::vector<double> wv = values_of(make_input({shape[1]}, kF64, Domain::kAny, 43));
          for (double& v : wv) v += 1.0;  // weights away from 0
          const Tensor w = from_vector(wv, {shape[1]}, {.dtype = kF32});
          const Tensor b = make_input({shape[1]}, kF32, Domain::kAny, 44);
          const ops::BatchNormResult r = ops::batch_norm(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5);
          const ops::BatchNormResult rd =
              ops::batch_norm(x.to(kF64), w.to(kF64), b.to(kF64), Tensor(), Tensor(), true, 0.1, 1e-5);
          CHECK(compare_values(values_of(r.y.contiguous()), round_to(values_of(rd.y.contiguous()), dtype), tol) == "");
          CHECK(compare_values(values_of(r.save_mean), values_of(rd.save_mean),
                               tolerance_for(kF32, OpKind::kReduction)) == "");
          CHECK(compare_values(values_of(r.save_rstd), values_of(rd.save_rstd),
                               tolerance_for(kF32, OpKind::kReduction)) == "");
          const auto [dx, dw, db] =
              ops::batch_norm_backward(dy, x, w, r.save_mean, r.save_rstd, true, {true, true, true});
          const auto [dxd, dwd, dbd] = ops::batch_norm_backward(dy.to(kF64), x.to(kF64), w.to(kF64), rd.save_mean,
                                                                rd.save_rstd, true, {true, true, true});
          CHECK(compare_values(values_of(dx.contiguous()), round_to(values_of(dxd.contiguous()), dtype), tol) == "");
          CHECK(compare_values(values_of(dw), values_of(dwd), tolerance_for(kF32, OpKind::kReduction)) == "");
          CHECK(compare_values(values_of(db), values_of(dbd), tolerance_for(kF32, OpKind::kReduction)) == "");
        }
      }
      for (bool causal : {true, false}) {
        for (int64_t q_len : {int64_t{1}, int64_t{37}}) {
          INFO(p.name << " " << dtype_name(dtype) << " attention softmax " << (causal ? "causal" : "full")
                      << " q_len=" << q_len);
          std::vector<double> sv = values_of(make_input({2, 3, q_len, 37}, kF64, Domain::kAny, 45));
          for (double& v : sv) v *= 40.0;  // scores of a few units after the scale
          const Tensor s = from_vector(sv, {2, 3, q_len, 37}, {.dtype = dtype});
          AttnSoftmaxParams prm;
          prm.scale = 0.125;
          prm.causal = causal;
          const Tensor y = ops::attention_softmax(s, Tensor(), prm, nullptr);
          const Tensor yd = ops::attention_softmax(s.to(kF64), Tensor(), prm, nullptr);
          CHECK(compare_values(values_of(y), round_to(values_of(yd), dtype), tol) == "");
          if (dtype != kF32 && p.math != cpu::CpuMath::scalar) {  // the f32 row kernel's result, rounded once
            CHECK(first_difference(
                      values_of(y),
                      round_to(values_of(ops::attention_softmax(s.to(kF32), Tensor(), prm, nullptr)), dtype)) == "");
          }
        }
      }
    }
  }
}

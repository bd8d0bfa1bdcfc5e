// The CPU math paths (kernels/cpu/vec_math.h): the scalar reference (glibc's
// libm through the functors) and SLEEF's vector kernels per ISA, each forced
// by its switch and compared with the f64 kernels (glibc's double libm) on
// dense sweeps. The pure functions must stay within 2 f32 ulps of the f64
// value on both paths (SLEEF's u10 bound is 1.0 ulp, glibc's expf/logf/tanhf/
// erff are below 1 ulp; the f64 reference adds at most half an ulp when
// rounded to f32); the composite ops (GELU, SiLU, softplus, their backwards,
// softmax rows, cross-entropy) are held to the f32 rows of
// tests/kernels/tolerance.h. Sizes cover one value, the vector tails (15, 17),
// the block edge (4095, 4097) and the parallel grain (70001).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/vec_math.h"
#include "kernels/ops.h"
#include "kernels/softmax.h"
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

TEST_CASE("every CPU math path matches f64 on softmax rows and cross-entropy", "[kernels][vec-math]") {
  const MathPathGuard guard;
  for (const Path& p : runnable_paths()) {
    cpu::set_cpu_math(p.math);
    cpu::set_cpu_isa_cap(p.cap);
    for (DType dtype : {kF32, kBF16}) {
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

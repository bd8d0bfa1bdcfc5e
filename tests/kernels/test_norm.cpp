// LayerNorm and RMSNorm (kernels/norm/norm.h, autograd/functions_norm.cpp,
// nn::LayerNorm / nn::RMSNorm): forward and backward against an f64 reference
// on every device and dtype, deterministic parameter gradients, bad input,
// gradcheck (f64), PyTorch's values (fixtures/make_seq_fixture.py), the
// 16-bit kernels bit for bit against the f32 ones, and every CPU row path
// (the scalar reference rows and the vector rows of kernels/norm/norm_simd.h at
// each ISA this CPU runs, forced). References are computed in
// double from the already-rounded inputs; tolerances come from
// tests/kernels/tolerance.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "runtime/cpu/threads.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/norm/norm_simd.h"
#include "kernels/norm/norm.h"
#include "nn/layers.h"
#include "tests/kernels/seq_support.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;

namespace {

// y = layer_norm / rms_norm of each row of `cols` values, in double.
std::vector<double> norm_ref(const std::vector<double>& x, int64_t cols, const std::vector<double>& w,
                             const std::vector<double>& b, double eps, bool rms) {
  std::vector<double> y(x.size());
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(cols)) {
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t c = 0; c < cols; ++c) mean += x[base + c];
      mean /= static_cast<double>(cols);
    }
    for (int64_t c = 0; c < cols; ++c) var += (x[base + c] - mean) * (x[base + c] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) {
      double v = (x[base + c] - mean) * rstd;
      if (!w.empty()) v *= w[c];
      if (!b.empty()) v += b[c];
      y[base + c] = v;
    }
  }
  return y;
}

// Restores the process's math path and ISA cap when a test ends.
struct CpuPathGuard {
  cpu::CpuMath math = cpu::cpu_math();
  cpu::VecIsa cap = cpu::cpu_isa_cap();
  CpuPathGuard() = default;
  CpuPathGuard(const CpuPathGuard&) = delete;
  CpuPathGuard& operator=(const CpuPathGuard&) = delete;
  ~CpuPathGuard() {
    cpu::set_cpu_math(math);
    cpu::set_cpu_isa_cap(cap);
  }
};

struct NormPath {
  std::string name;  // "scalar", or the vector table's name
  cpu::CpuMath math;
  cpu::VecIsa cap;
};

// The CPU norm paths this build and CPU run: the scalar rows, and the vector
// rows at every ISA up to the CPU's widest (each forced by the cap).
std::vector<NormPath> norm_paths() {
  std::vector<NormPath> paths{{"scalar", cpu::CpuMath::scalar, cpu::VecIsa::avx512}};
  const CpuPathGuard guard;
  cpu::set_cpu_math(cpu::CpuMath::scalar);
  CHECK(cpu::vec_norm() == nullptr);
  for (cpu::VecIsa cap : {cpu::VecIsa::sse2, cpu::VecIsa::avx2, cpu::VecIsa::avx512}) {
    cpu::set_cpu_math(cpu::CpuMath::sleef);
    cpu::set_cpu_isa_cap(cap);
    const cpu::VecNormTable* t = cpu::vec_norm();
    if (t == nullptr) break;                  // built without SLEEF: scalar only
    if (paths.back().name == t->name) break;  // the cap is above the CPU's widest
    CHECK(std::string(t->name) == cpu::cpu_math_name());
    paths.push_back({t->name, cpu::CpuMath::sleef, cap});
  }
  return paths;
}

void use_path(const NormPath& p) {
  cpu::set_cpu_math(p.math);
  cpu::set_cpu_isa_cap(p.cap);
}

// max over rows of max |x| / std(x) (at least 1): how many ulps of |x| an
// error of one ulp in a row's mean moves xhat by (the centring's condition
// number). The f32 statistics carry about one f32 ulp of |x|.
double centring_condition(const std::vector<double>& x, int64_t cols) {
  double kappa = 1;
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(cols)) {
    double mean = 0, var = 0, big = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x[base + c];
    mean /= static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) {
      var += (x[base + c] - mean) * (x[base + c] - mean);
      big = std::max(big, std::fabs(x[base + c]));
    }
    const double sd = std::sqrt(var / static_cast<double>(cols));
    if (sd > 0) kappa = std::max(kappa, big / sd);
  }
  return kappa;
}

}  // namespace

// ---- LayerNorm / RMSNorm ---------------------------------------------------------------------

TEST_CASE("layer_norm and rms_norm forward match the f64 reference", "[kernels][norm]") {
  struct Case {
    int64_t rows, cols;
  };
  const std::vector<Case> cases{{3, 1}, {5, 31}, {4, 768}, {2, 4096}, {2, 50257}};
  for (Device dev : test_devices()) {
    for (DType dtype : float_dtypes()) {
      for (const Case& c : cases) {
        for (bool rms : {false, true}) {
          for (bool f32_params : {false, true}) {
            if (f32_params && (dtype == kF32 || dtype == kF64)) continue;
            const DType pdt = f32_params ? kF32 : dtype;
            const Tensor x = make_input({c.rows, c.cols}, dtype, Domain::kAny, 3).to(dev);
            const Tensor w = make_input({c.cols}, pdt, Domain::kAny, 4).to(dev);
            const Tensor b = make_input({c.cols}, pdt, Domain::kAny, 5).to(dev);
            const double eps = 1e-5;
            ops::NormForward f = rms ? ops::rms_norm(x, {c.cols}, w, eps) : ops::layer_norm(x, {c.cols}, w, b, eps);
            const std::vector<double> ref =
                norm_ref(values_of(x), c.cols, values_of(w), rms ? std::vector<double>{} : values_of(b), eps, rms);
            INFO(label(dev, dtype,
                       (rms ? "rms_norm cols " : "layer_norm cols ") + std::to_string(c.cols) +
                           (f32_params ? " f32 params" : "")));
            CHECK(f.y.dtype() == dtype);
            CHECK(f.rstd.dtype() == (dtype == kF64 ? kF64 : kF32));
            CHECK(compare_values(values_of(f.y), round_to(ref, dtype), tolerance_for(dtype, OpKind::kReduction)) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("layer_norm and rms_norm backward match the f64 CPU gradients", "[kernels][norm][autograd]") {
  // The f64 CPU gradients are checked against finite differences below; here
  // every device and dtype reproduces them from the same rounded inputs.
  for (Device dev : test_devices()) {
    for (DType dtype : {kF32, kF16, kBF16}) {
      for (int64_t cols : {1, 31, 768}) {
        for (bool rms : {false, true}) {
          const int64_t rows = 6;
          auto run = [&](DType dt, Device d) {
            Tensor x = make_input({rows, cols}, dtype, Domain::kAny, 7).to(dt).to(d).requires_grad_(true);
            Tensor w = make_input({cols}, dtype, Domain::kAny, 8).to(dt).to(d).requires_grad_(true);
            Tensor b = make_input({cols}, dtype, Domain::kAny, 9).to(dt).to(d).requires_grad_(true);
            const Tensor dy = make_input({rows, cols}, dtype, Domain::kAny, 10).to(dt).to(d);
            Tensor y = rms ? hg::rms_norm(x, {cols}, w, 1e-5) : hg::layer_norm(x, {cols}, w, b, 1e-5);
            y.backward(dy);
            std::vector<std::vector<double>> g{values_of(x.grad()), values_of(w.grad())};
            if (!rms) g.push_back(values_of(b.grad()));
            return g;
          };
          const auto ref = run(kF64, Device::cpu());
          const auto got = run(dtype, dev);
          INFO(label(dev, dtype, (rms ? "rms_norm cols " : "layer_norm cols ") + std::to_string(cols)));
          // d_x cancels (g - mean(g) - xhat * mean(g xhat)): judge it on the row's scale.
          Tolerance tol = tolerance_for(dtype, OpKind::kReduction);
          for (size_t i = 0; i < got.size(); ++i) {
            double scale = 1;
            for (double v : ref[i]) scale = std::max(scale, std::fabs(v));
            INFO("gradient " << i);
            CHECK(compare_values(got[i], round_to(ref[i], dtype), {tol.rtol, tol.atol + tol.rtol * scale}) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("norm parameter gradients are bit-identical from run to run", "[kernels][norm]") {
  for (Device dev : test_devices()) {
    const int64_t rows = 700, cols = 96;  // several row chunks
    const Tensor x = make_input({rows, cols}, kF32, Domain::kAny, 1).to(dev);
    const Tensor w = make_input({cols}, kF32, Domain::kAny, 2).to(dev);
    const Tensor dy = make_input({rows, cols}, kF32, Domain::kAny, 3).to(dev);
    const ops::NormForward f = ops::layer_norm(x, {cols}, w, Tensor(), 1e-5);
    const ops::NormBackward a = ops::layer_norm_backward(dy, x, {cols}, f.mean, f.rstd, w, {true, true, true});
    const ops::NormBackward b = ops::layer_norm_backward(dy, x, {cols}, f.mean, f.rstd, w, {true, true, true});
    INFO(dev.str());
    CHECK(same_bits(a.d_weight, b.d_weight));
    CHECK(same_bits(a.d_bias, b.d_bias));
    CHECK(same_bits(a.d_x, b.d_x));
  }
}

TEST_CASE("norm bad input names the shapes", "[kernels][norm]") {
  const Tensor x = zeros({2, 5});
  CHECK_THROWS_AS(ops::layer_norm(x, {4}, Tensor(), Tensor()), Error);
  CHECK_THROWS_WITH(ops::layer_norm(x, {4}, Tensor(), Tensor()), Contains("[2, 5]"));
  CHECK_THROWS_WITH(ops::layer_norm(x, {5}, zeros({4}), Tensor()), Contains("[4]"));
}

// ---- autograd --------------------------------------------------------------------------------

TEST_CASE("gradcheck passes for layer_norm and rms_norm (f64, cpu)", "[autograd][gradcheck]") {
  check_gradcheck({
      {"layer_norm affine", {{3, 7}, {7}, {7}}, [](V x) { return hg::layer_norm(x[0], {7}, x[1], x[2], 1e-5); }},
      {"layer_norm 2 dims, no affine",
       {{2, 3, 4}},
       [](V x) {
         return hg::layer_norm(x[0], {3, 4});
       }},
      {"layer_norm cols 1", {{3, 1}, {1}, {1}}, [](V x) { return hg::layer_norm(x[0], {1}, x[1], x[2], 1e-5); }},
      {"rms_norm affine", {{3, 7}, {7}}, [](V x) { return hg::rms_norm(x[0], {7}, x[1], 1e-6); }},
      {"rms_norm of a transposed view", {{7, 3}}, [](V x) { return hg::rms_norm(x[0].t(), {7}); }},
  });
}

// ---- layers ----------------------------------------------------------------------------------

TEST_CASE("nn::LayerNorm and nn::RMSNorm", "[nn][norm]") {
  nn::LayerNorm ln({4});
  CHECK(values_of(ln.weight) == std::vector<double>(4, 1.0));
  CHECK(values_of(ln.bias) == std::vector<double>(4, 0.0));
  const Tensor x = make_input({2, 4}, kF32, Domain::kAny, 61);
  const Tensor y = ln.forward(x);
  CHECK(compare_values(values_of(y), round_to(norm_ref(values_of(x), 4, {}, {}, 1e-5, false), kF32),
                       tolerance_for(kF32, OpKind::kReduction)) == "");
  hg::sum(y * y).backward();
  CHECK(ln.weight.grad().defined());
  CHECK(ln.bias.grad().defined());
  CHECK(ln.parameters().size() == 2);

  nn::RMSNorm rn({4}, 1e-6);
  CHECK(rn.parameters().size() == 1);
  CHECK(compare_values(values_of(rn.forward(x)), round_to(norm_ref(values_of(x), 4, {}, {}, 1e-6, true), kF32),
                       tolerance_for(kF32, OpKind::kReduction)) == "");
}

// ---- PyTorch fixture ---------------------------------------------------------------------------

TEST_CASE("layer_norm and rms_norm match PyTorch", "[kernels][torch]") {
  check_seq_fixture({
      {"layer_norm", [](auto& in, auto&) { return hg::layer_norm(in["x"], {6}, in["w"], in["b"], 1e-5); }},
      {"rms_norm",
       [](auto& in, auto&) {
         return hg::rms_norm(in["x"], {2, 5}, in["w"], 1e-6);
       }},
  });
}

// Note [16-bit norm rows on the CPU] and Note [vector norm rows]: a 16-bit
// norm is the f32 kernel on the widened inputs with its outputs rounded once,
// bit for bit, on every CPU path.
TEST_CASE("16-bit norms are bit-identical to the f32 kernels", "[kernels][norm][numerics]") {
  const auto same_bits = [](const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
           std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
  };
  const auto f32 = [](const Tensor& t) { return t.defined() ? t.to(kF32) : Tensor(); };
  const CpuPathGuard guard;
  for (const NormPath& path : norm_paths()) {
    use_path(path);
    INFO(path.name);
    for (DType dtype : {kF16, kBF16}) {
      for (DType w_dtype : {dtype, kF32}) {
        for (const Shape& shape : {Shape{5, 40}, Shape{300, 257}}) {
          INFO(dtype << " weights " << w_dtype << " " << shape_to_string(shape));
          const int64_t cols = shape[1];
          const Tensor x = make_input(shape, dtype, Domain::kAny, 81);
          const Tensor d = make_input(shape, dtype, Domain::kAny, 82);
          const Tensor w = make_input({cols}, w_dtype, Domain::kAny, 83);
          const Tensor b = make_input({cols}, w_dtype, Domain::kAny, 84);
          const ops::NormForward ln = ops::layer_norm(x, {cols}, w, b, 1e-5);
          const ops::NormForward ln32 = ops::layer_norm(f32(x), {cols}, f32(w), f32(b), 1e-5);
          CHECK(same_bits(ln.y, ln32.y.to(dtype)));
          CHECK(same_bits(ln.mean, ln32.mean));
          CHECK(same_bits(ln.rstd, ln32.rstd));
          const ops::NormBackward g = ops::layer_norm_backward(d, x, {cols}, ln.mean, ln.rstd, w, {true, true, true});
          const ops::NormBackward g32 =
              ops::layer_norm_backward(f32(d), f32(x), {cols}, ln32.mean, ln32.rstd, f32(w), {true, true, true});
          CHECK(same_bits(g.d_x, g32.d_x.to(dtype)));
          CHECK(same_bits(g.d_weight, g32.d_weight.to(g.d_weight.dtype())));
          CHECK(same_bits(g.d_bias, g32.d_bias.to(g.d_bias.dtype())));
          const ops::NormForward rn = ops::rms_norm(x, {cols}, w, 1e-6);
          const ops::NormForward rn32 = ops::rms_norm(f32(x), {cols}, f32(w), 1e-6);
          CHECK(same_bits(rn.y, rn32.y.to(dtype)));
          const ops::NormBackward rg = ops::rms_norm_backward(d, x, {cols}, rn.rstd, w, {true, true, false});
          const ops::NormBackward rg32 =
              ops::rms_norm_backward(f32(d), f32(x), {cols}, rn32.rstd, f32(w), {true, true, false});
          CHECK(same_bits(rg.d_x, rg32.d_x.to(dtype)));
          CHECK(same_bits(rg.d_weight, rg32.d_weight.to(rg.d_weight.dtype())));
        }
      }
    }
  }
}

// The vector rows (kernels/norm/norm_simd.h) and the scalar rows against f64 on
// every path: row lengths around the vector widths (4, 8, 16 lanes) and the
// 256-value sum leaves, one-value rows, rows far from zero (the two-pass
// statistics must not cancel), with and without weight and bias, forward and
// backward; and the backward's fused and separate d_x (Note [fused norm
// backward]) give the same bits.
TEST_CASE("every CPU norm path matches f64: vector tails, one-value rows, large offsets", "[kernels][norm][numerics]") {
  struct Case {
    int64_t rows, cols;
    double offset, spread;  // x = offset + spread * U(-3, 3)
  };
  const std::vector<Case> cases{{3, 1, 0, 1},    {4, 3, 0, 1},      {4, 15, 0, 1},     {4, 17, 0, 1},
                                {3, 33, 0, 1},   {2, 255, 0, 1},    {3, 257, 0, 1},    {2, 4097, 0, 1},
                                {64, 600, 0, 1}, {3, 768, 4096, 8}, {5, 40, -4096, 8}, {4, 17, 60000, 300}};
  const CpuPathGuard guard;
  for (const NormPath& path : norm_paths()) {
    use_path(path);
    for (DType dtype : {kF32, kF16, kBF16}) {
      for (const Case& c : cases) {
        for (bool rms : {false, true}) {
          for (bool affine : {true, false}) {
            INFO(path.name << " " << dtype << " " << (rms ? "rms_norm " : "layer_norm ") << c.rows << "x" << c.cols
                           << " offset " << c.offset << (affine ? " affine" : ""));
            std::vector<double> xv = values_of(make_input({c.rows, c.cols}, kF64, Domain::kAny, 91));
            for (double& v : xv) v = c.offset + c.spread * v;
            const Tensor x = from_vector(xv, {c.rows, c.cols}, {.dtype = dtype});
            const Tensor dy = make_input({c.rows, c.cols}, dtype, Domain::kAny, 92);
            const Tensor w = affine ? make_input({c.cols}, dtype, Domain::kAny, 93) : Tensor();
            const Tensor b = affine && !rms ? make_input({c.cols}, dtype, Domain::kAny, 94) : Tensor();
            const auto f64 = [](const Tensor& t) { return t.defined() ? t.to(kF64) : Tensor(); };
            const double eps = 1e-5;
            const auto forward = [&](const Tensor& xs, const Tensor& ws, const Tensor& bs) {
              return rms ? ops::rms_norm(xs, {c.cols}, ws, eps) : ops::layer_norm(xs, {c.cols}, ws, bs, eps);
            };
            const auto backward = [&](const Tensor& d, const Tensor& xs, const ops::NormForward& f, const Tensor& ws) {
              return rms ? ops::rms_norm_backward(d, xs, {c.cols}, f.rstd, ws, {true, true, false})
                         : ops::layer_norm_backward(d, xs, {c.cols}, f.mean, f.rstd, ws, {true, true, true});
            };
            const ops::NormForward f = forward(x, w, b);
            const ops::NormForward ref = forward(f64(x), f64(w), f64(b));
            const ops::NormBackward g = backward(dy, x, f, w);
            const ops::NormBackward gref = backward(f64(dy), f64(x), ref, f64(w));
            // The statistics are f32 on every path: an error of about one f32
            // ulp of |x| in the mean, times the centring's condition number,
            // on top of the dtype's tolerance (which covers the rest).
            const Tolerance tol = tolerance_for(dtype, OpKind::kReduction);
            const double stats = tolerance_for(kF32, OpKind::kReduction).rtol * centring_condition(xv, c.cols);
            const auto check = [&](const Tensor& got, const Tensor& want, double rtol_on_scale, const char* what) {
              INFO(what);
              REQUIRE(got.defined() == want.defined());
              if (!got.defined()) return;
              const std::vector<double> r = values_of(want);
              double scale = 1;
              for (double v : r) scale = std::max(scale, std::fabs(v));
              CHECK(compare_values(values_of(got), round_to(r, got.dtype()),
                                   {tol.rtol, tol.atol + (rtol_on_scale + stats) * scale}) == "");
            };
            check(f.y, ref.y, 0, "y");
            check(f.rstd, ref.rstd, 0, "rstd");
            if (!rms) check(f.mean, ref.mean, 0, "mean");
            // d_x cancels (g - mean(g) - xhat * mean(g xhat)): judged on the gradient's scale, as above.
            check(g.d_x, gref.d_x, tol.rtol, "d_x");
            check(g.d_weight, gref.d_weight, tol.rtol, "d_weight");
            check(g.d_bias, gref.d_bias, tol.rtol, "d_bias");
          }
        }
      }
    }
  }
  // The fused backward (one thread: every chunk count is enough) and the
  // separate d_x pass (4 threads: 22 chunks < 8 per thread) give the same bits.
  const int threads = get_num_threads();
  for (const NormPath& path : norm_paths()) {
    use_path(path);
    INFO(path.name);
    const int64_t rows = 700, cols = 96;
    const Tensor x = make_input({rows, cols}, kBF16, Domain::kAny, 95);
    const Tensor dy = make_input({rows, cols}, kBF16, Domain::kAny, 96);
    const Tensor w = make_input({cols}, kBF16, Domain::kAny, 97);
    const ops::NormForward f = ops::layer_norm(x, {cols}, w, Tensor(), 1e-5);
    set_num_threads(1);
    const ops::NormBackward one = ops::layer_norm_backward(dy, x, {cols}, f.mean, f.rstd, w, {true, true, true});
    set_num_threads(4);
    const ops::NormBackward many = ops::layer_norm_backward(dy, x, {cols}, f.mean, f.rstd, w, {true, true, true});
    set_num_threads(threads);
    CHECK(same_bits(one.d_x, many.d_x));
    CHECK(same_bits(one.d_weight, many.d_weight));
    CHECK(same_bits(one.d_bias, many.d_bias));
  }
}

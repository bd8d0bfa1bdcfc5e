// clip_grad_norm_ against a double-precision reference written here, on every
// device and gradient dtype, with tensors sized so that chunks straddle
// tensor ends (Note [Global gradient norm] in kernels/grad_norm/grad_norm.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "kernels/grad_norm/grad_norm.h"
#include "nn/functional.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The norm of every value of every tensor, in double.
double reference_norm(const std::vector<std::vector<double>>& grads, double p) {
  double total = 0.0;
  for (const auto& g : grads) {
    for (double v : g) total = std::isinf(p) ? std::max(total, std::fabs(v)) : total + std::pow(std::fabs(v), p);
  }
  return std::isinf(p) ? total : std::pow(total, 1.0 / p);
}

// Sizes around the chunk length: a single element, a tiny tensor, sizes
// that end just past one chunk and mid-way through the next, three chunks.
const std::vector<int64_t>& sizes() {
  static const std::vector<int64_t> s{1, 7, 2049, 5000, kGradNormChunk + 1, 2 * kGradNormChunk + 777};
  return s;
}

// Parameters (f32 placeholders; clipping reads only .grad) with seeded grads.
std::vector<Tensor> make_params(DType grad_dtype, Device dev, uint64_t seed) {
  std::vector<Tensor> params;
  for (size_t i = 0; i < sizes().size(); ++i) {
    Tensor p = zeros({sizes()[i]}, {.device = dev}).requires_grad_(true);
    p.set_grad(make_input({sizes()[i]}, grad_dtype, Domain::kAny, seed + i).to(dev));
    params.push_back(p);
  }
  return params;
}

std::vector<std::vector<double>> grad_values(const std::vector<Tensor>& params) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : params) out.push_back(p.grad().defined() ? values_of(p.grad()) : std::vector<double>{});
  return out;
}

float float_of(const Tensor& t) { return t.cpu().item<float>(); }

[[maybe_unused]] uint32_t bits_of(float f) {  // used by the CUDA test only
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// The gradient values are exact inputs to the double reference and the norm
// is an f32 result accumulated in fp32 (combined in f64), so the f32
// reduction row applies whatever the gradient dtype.
const Tolerance kNormTol = tolerance_for(kF32, OpKind::kReduction);

}  // namespace

TEST_CASE("clip_grad_norm_ computes the global norm", "[optim][clip]") {
  for (Device dev : test_devices()) {
    for (DType dt : float_dtypes()) {
      for (double p : {2.0, 1.0, 3.5, kInf}) {
        std::vector<Tensor> params = make_params(dt, dev, 40);
        const auto before = grad_values(params);
        const Tensor norm = optim::clip_grad_norm_(params, /*max_norm=*/1e9, p);
        INFO(label(dev, dt, "p = " + std::to_string(p)));
        CHECK(norm.device() == dev);
        CHECK(norm.dtype() == kF32);
        CHECK(norm.sizes() == Shape{1});
        CHECK(compare_values(values_of(norm), {reference_norm(before, p)}, kNormTol) == "");
        CHECK(grad_values(params) == before);  // norm < max_norm: untouched
      }
    }
  }
}

TEST_CASE("clip_grad_norm_ scales every gradient by the clip coefficient", "[optim][clip]") {
  for (Device dev : test_devices()) {
    for (DType dt : float_dtypes()) {
      for (double p : {2.0, kInf}) {
        std::vector<Tensor> params = make_params(dt, dev, 70);
        const auto before = grad_values(params);
        const double max_norm = 0.5;
        const float norm = float_of(optim::clip_grad_norm_(params, max_norm, p));
        const float coef = static_cast<float>(max_norm) / (norm + 1e-6f);  // PyTorch's f32 arithmetic
        REQUIRE(coef < 1.0f);
        INFO(label(dev, dt, "p = " + std::to_string(p)));
        const auto after = grad_values(params);
        for (size_t i = 0; i < before.size(); ++i) {
          std::vector<double> expected(before[i].size());
          for (size_t k = 0; k < expected.size(); ++k) expected[k] = before[i][k] * coef;
          CHECK(compare_values(after[i], round_to(expected, dt), tolerance_for(dt, OpKind::kElementwise)) == "");
        }
        // The clipped gradients' norm is coef * norm (just under max_norm),
        // up to the rounding of each product to the gradient dtype.
        CHECK(compare_values({reference_norm(after, p)}, {reference_norm(before, p) * coef},
                             tolerance_for(dt, OpKind::kElementwise)) == "");
        // coef is an f32 (as in PyTorch), so even f64 gradients may end up an
        // f32 rounding above max_norm: allow the larger of the two rows.
        const double slack = std::max(tolerance_for(dt, OpKind::kElementwise).rtol,
                                      tolerance_for(kF32, OpKind::kElementwise).rtol);
        CHECK(reference_norm(after, p) <= max_norm * (1 + slack));
      }
    }
  }
}

TEST_CASE("clip_grad_norm_ on CUDA agrees with the CPU and is deterministic", "[optim][clip][cuda]") {
#if defined(HG_WITH_CUDA)
  for (DType dt : float_dtypes()) {
    for (double p : {2.0, 3.5, kInf}) {
      INFO(dtype_name(dt) << " p = " << p);
      const float cpu_norm = float_of(optim::clip_grad_norm_(make_params(dt, Device::cpu(), 90), 1e9, p));
      const float cuda_norm = float_of(optim::clip_grad_norm_(make_params(dt, Device::cuda(), 90), 1e9, p));
      const float again = float_of(optim::clip_grad_norm_(make_params(dt, Device::cuda(), 90), 1e9, p));
      CHECK(bits_of(cuda_norm) == bits_of(again));  // no atomics: same bits every run
      if (std::isinf(p)) {
        CHECK(bits_of(cuda_norm) == bits_of(cpu_norm));  // max is order-free
      } else {
        CHECK(compare_values({cuda_norm}, {cpu_norm}, kNormTol) == "");
      }
      // And the clipped gradients agree too.
      std::vector<Tensor> on_cpu = make_params(dt, Device::cpu(), 91), on_cuda = make_params(dt, Device::cuda(), 91);
      optim::clip_grad_norm_(on_cpu, 0.25, p);
      optim::clip_grad_norm_(on_cuda, 0.25, p);
      const auto a = grad_values(on_cuda), b = grad_values(on_cpu);
      for (size_t i = 0; i < a.size(); ++i) {
        CHECK(compare_values(a[i], b[i], tolerance_for(dt, OpKind::kElementwise)) == "");
      }
    }
  }
#else
  SUCCEED("cpu build");
#endif
}

TEST_CASE("clip_grad_norm_ mixes gradient dtypes in one call", "[optim][clip]") {
  for (Device dev : test_devices()) {
    std::vector<Tensor> params;
    const std::vector<DType> dtypes{kF32, kF16, kBF16, kF64, kF16};
    for (size_t i = 0; i < dtypes.size(); ++i) {
      Tensor p = zeros({sizes()[i + 1]}, {.device = dev}).requires_grad_(true);
      p.set_grad(make_input({sizes()[i + 1]}, dtypes[i], Domain::kAny, 5 + i).to(dev));
      params.push_back(p);
    }
    const auto before = grad_values(params);
    INFO(dev);
    CHECK(compare_values(values_of(optim::clip_grad_norm_(params, 1e9)), {reference_norm(before, 2.0)}, kNormTol) == "");
  }
}

TEST_CASE("clip_grad_norm_ with non-finite gradients", "[optim][clip]") {
  for (Device dev : test_devices()) {
    for (DType dt : {kF32, kF16, kBF16}) {
      INFO(label(dev, dt, ""));
      for (double bad : {std::nan(""), kInf}) {
        for (double p : {2.0, kInf}) {
          std::vector<Tensor> params = make_params(dt, dev, 11);
          std::vector<double> g = values_of(params[3].grad());
          g[4000] = bad;
          params[3].set_grad(from_vector(g, {static_cast<int64_t>(g.size())}, {.dtype = dt}).to(dev));
          const auto before = grad_values(params);
          // error_if_nonfinite: throws before any gradient changes.
          CHECK_THROWS_WITH(optim::clip_grad_norm_(params, 1.0, p, true), Catch::Contains("error_if_nonfinite"));
          CHECK(grad_values(params).back() == before.back());
          // Otherwise: the norm says so and the gradients turn NaN, as in PyTorch
          // (coef = 1 / (inf + 1e-6) = 0 and inf * 0 = NaN; or NaN throughout).
          const float norm = float_of(optim::clip_grad_norm_(params, 1.0, p));
          if (std::isnan(bad)) {
            CHECK(std::isnan(norm));
          } else {
            CHECK(norm == INFINITY);
          }
          const auto after = grad_values(params);
          CHECK(std::isnan(after[3][4000]));
          if (std::isnan(bad)) CHECK(std::isnan(after[0][0]));  // coef NaN
          if (!std::isnan(bad)) CHECK(after[0][0] == 0.0);      // coef 0
        }
      }
    }
  }
}

TEST_CASE("clip_grad_norm_ skips parameters without gradients; empty lists give 0", "[optim][clip]") {
  for (Device dev : test_devices()) {
    INFO(dev);
    Tensor a = zeros({3}, {.device = dev}).requires_grad_(true);
    Tensor b = zeros({5}, {.device = dev}).requires_grad_(true);
    Tensor c = zeros({2}, {.device = dev}).requires_grad_(true);
    a.set_grad(from_vector(std::vector<double>{3.0, 0.0, 0.0}, {3}, {.device = Device::cpu()}).to(dev));
    c.set_grad(from_vector(std::vector<double>{0.0, 4.0}, {2}, {.device = Device::cpu()}).to(dev));
    const Tensor norm = optim::clip_grad_norm_({a, b, c}, 1.0);
    CHECK(values_of(norm) == std::vector<double>{5.0});  // 3-4-5, exact in fp32
    CHECK_FALSE(b.grad().defined());
    // coef = 1 / (5 + 1e-6) in f32.
    const float coef = 1.0f / (5.0f + 1e-6f);
    CHECK(values_of(a.grad()) == std::vector<double>{static_cast<double>(3.0f * coef), 0.0, 0.0});
    CHECK(values_of(c.grad()) == std::vector<double>{0.0, static_cast<double>(4.0f * coef)});

    const Tensor none = optim::clip_grad_norm_({b}, 1.0);
    CHECK(none.device() == dev);
    CHECK(values_of(none) == std::vector<double>{0.0});
    // Zero-element gradients contribute nothing.
    Tensor e = zeros({0}, {.device = dev}).requires_grad_(true);
    e.set_grad(zeros({0}, {.device = dev}));
    CHECK(values_of(optim::clip_grad_norm_({e}, 1.0)) == std::vector<double>{0.0});
  }
  const Tensor empty_list = optim::clip_grad_norm_({}, 1.0);
  CHECK(empty_list.device() == Device::cpu());
  CHECK(empty_list.sizes() == Shape{1});
  CHECK(values_of(empty_list) == std::vector<double>{0.0});
}

TEST_CASE("clip_grad_norm_ with max_norm inf or a norm already small leaves gradients alone", "[optim][clip]") {
  for (Device dev : test_devices()) {
    std::vector<Tensor> params = make_params(kF16, dev, 3);
    const auto before = grad_values(params);
    const float norm = float_of(optim::clip_grad_norm_(params, kInf));
    CHECK(norm > 1.0f);
    CHECK(grad_values(params) == before);
    optim::clip_grad_norm_(params, norm * 2.0);
    CHECK(grad_values(params) == before);
  }
}

TEST_CASE("clip_grad_norm_ rejects bad arguments", "[optim][clip][errors]") {
  Tensor a = zeros({3}).requires_grad_(true);
  a.set_grad(ones({3}));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({a}, -1.0), Catch::Contains("max_norm must be >= 0"));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({a}, 1.0, 0.0), Catch::Contains("norm_type must be > 0"));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({a}, 1.0, std::nan("")), Catch::Contains("norm_type must be > 0"));
  Tensor strided = zeros({3, 4}).requires_grad_(true);
  strided.set_grad(zeros({4, 3}).t());
  CHECK_THROWS_WITH(optim::clip_grad_norm_({strided}, 1.0), Catch::Contains("not contiguous"));
  Tensor ints = zeros({3}).requires_grad_(true);
  ints.set_grad(zeros({3}, {.dtype = kI32}));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({ints}, 1.0), Catch::Contains("f32, f16, bf16 or f64"));
#if defined(HG_WITH_CUDA)
  Tensor b = zeros({3}, {.device = Device::cuda()}).requires_grad_(true);
  b.set_grad(ones({3}, {.device = Device::cuda()}));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({a, b}, 1.0), Catch::Contains("move the model to one device"));
#endif
}

TEST_CASE("the docs/optim.md example compiles and trains", "[optim][clip][docs]") {
  // ---- begin docs/optim.md snippet ----
  hg::Tensor x = hg::randn({64, 8});
  hg::Tensor y = hg::randn({64, 1});
  hg::Tensor w = hg::zeros({8, 1}).requires_grad_(true);

  hg::optim::AdamW opt({w}, {.lr = 1e-2, .weight_decay = 1e-4});
  hg::optim::WarmupCosineLR sched(opt, {.warmup_steps = 10, .total_steps = 200, .min_lr_ratio = 0.1});
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    hg::Tensor loss = hg::nn::functional::mse_loss(hg::matmul(x, w), y);
    loss.backward();
    hg::Tensor grad_norm = hg::optim::clip_grad_norm_({w}, /*max_norm=*/1.0);  // f32 [1], not read
    opt.step();
    sched.step();  // after the optimizer step, as in PyTorch
  }
  // ---- end docs/optim.md snippet ----
  CHECK(sched.last_step() == 200);
  CHECK(sched.last_lr() == Approx(1e-3).epsilon(1e-6));  // min_lr_ratio * lr
  CHECK(opt.steps_applied() == 200);
  const Tensor final_loss = hg::nn::functional::mse_loss(hg::matmul(x, w), y);
  const Tensor start_loss = hg::nn::functional::mse_loss(zeros({64, 1}), y);  // w = 0
  CHECK(final_loss.item<float>() < start_loss.item<float>());
}

// GradScaler (amp/grad_scaler.h): PyTorch's scaler scenarios on every device,
// against runs without a scaler written here. Scaling by a power of two and
// unscaling by its exact reciprocal changes no bit of an f32 gradient (barring
// overflow), so "same parameters as the unscaled run" is checked bitwise.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/layers.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"
#include "tests/test_files.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A tiny model: loss = sum((x @ W + b)^2) / 8 with seeded x.
struct Tiny {
  Tensor w, b, x;
  Tiny(Device dev, uint64_t seed, DType dtype = kF32) {
    w = make_input({4, 3}, dtype, Domain::kAny, seed).to(dev).requires_grad_(true);
    b = make_input({3}, dtype, Domain::kAny, seed + 1).to(dev).requires_grad_(true);
    x = make_input({5, 4}, dtype, Domain::kAny, seed + 2).to(dev);
  }
  std::vector<Tensor> params() const { return {w, b}; }
  Tensor loss() const {
    const Tensor y = add(matmul(x, w), b);
    return mul(sum(mul(y, y)), 0.125);
  }
};

// Replaces one gradient element with `value` (on the device, no host copy).
void inject(const Tensor& param, int64_t flat_index, float value) {
  NoGradGuard no_grad;
  Tensor g = param.grad().view({-1}).narrow(0, flat_index, 1);
  g.fill_(value);
}

std::vector<float> values(const Tensor& t) { return t.detach().cpu().to(kF32).to_vector<float>(); }

// One scaler iteration; overflow injected into params[0].grad()[0] if asked.
void scaled_step(amp::GradScaler& scaler, optim::Optimizer& opt, const Tiny& m, bool overflow) {
  opt.zero_grad();
  scaler.scale(m.loss()).backward();
  if (overflow) inject(m.w, 0, kInf);
  scaler.step(opt);
  scaler.update();
}

}  // namespace

TEST_CASE("GradScaler: unscale_ of 4.0 gradients with inv_scale 0.25 gives 1.0", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    for (DType dt : {kF32, kF16, kBF16}) {
      INFO(label(dev, dt, ""));
      Tensor p = zeros({3000}, {.dtype = dt, .device = dev}).requires_grad_(true);
      p.set_grad(full({3000}, 4.0, {.dtype = dt, .device = dev}));
      optim::SGD opt({p}, {.lr = 0.0});
      amp::GradScaler scaler({.init_scale = 4.0});
      scaler.unscale_(opt);
      for (float v : values(p.grad())) REQUIRE(v == 1.0f);
      scaler.step(opt);
      scaler.update();
      const amp::GradScalerStats s = scaler.stats();
      CHECK(s.steps_skipped == 0);
      CHECK(s.steps_applied == 1);
      CHECK(scaler.last_overflow().empty());
    }
  }
}

TEST_CASE("GradScaler: inf/NaN in one element of one tensor is found and named", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    for (const char* layout : {"contiguous", "transposed", "sliced"}) {
      for (float bad : {kInf, -kInf, std::nanf("")}) {
        INFO(label(dev, kF32, std::string(layout) + " " + std::to_string(bad)));
        std::vector<Tensor> params;
        for (int i = 0; i < 3; ++i) params.push_back(zeros({40, 30}, {.device = dev}).requires_grad_(true));
        for (int i = 0; i < 3; ++i) {
          Tensor g = full({40, 30}, 8.0, {.device = dev});
          if (std::string(layout) == "transposed") g = full({30, 40}, 8.0, {.device = dev}).t();
          if (std::string(layout) == "sliced") g = full({40, 60}, 8.0, {.device = dev}).slice(1, 0, 60, 2);
          REQUIRE((std::string(layout) == "contiguous") == g.is_contiguous());
          params[i].set_grad(g);
        }
        {  // element (17, 5) of parameter 1
          NoGradGuard no_grad;
          Tensor e = params[1].grad().select(0, 17).narrow(0, 5, 1);
          e.fill_(bad);
        }
        optim::SGD opt(params, {.lr = 1.0});
        amp::GradScaler scaler({.init_scale = 8.0});
        scaler.set_parameter_names({{"first", params[0]}, {"second", params[1]}, {"third", params[2]}});
        scaler.unscale_(opt);
        // The clean tensors are unscaled through their strides.
        for (float v : values(params[0].grad())) REQUIRE(v == 1.0f);
        for (float v : values(params[2].grad())) REQUIRE(v == 1.0f);
        scaler.step(opt);
        scaler.update();
        for (const Tensor& p : params) {
          for (float v : values(p)) REQUIRE(v == 0.0f);  // skipped: nothing written
        }
        CHECK(scaler.stats().steps_skipped == 1);
        CHECK(scaler.last_overflow() == std::vector<std::string>{"second"});
        CHECK(scaler.get_scale() == 4.0);
      }
    }
  }
}

TEST_CASE("GradScaler: update state machine (growth 2, backoff 0.25, interval 2)", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    Tiny m(dev, 1);
    optim::SGD opt(m.params(), {.lr = 0.0});
    amp::GradScaler scaler({.init_scale = 4.0, .growth_factor = 2.0, .backoff_factor = 0.25, .growth_interval = 2});
    scaled_step(scaler, opt, m, false);
    CHECK(scaler.get_scale() == 4.0);
    CHECK(scaler.stats().growth_tracker == 1);
    scaled_step(scaler, opt, m, false);
    CHECK(scaler.get_scale() == 8.0);
    CHECK(scaler.stats().growth_tracker == 0);
    scaled_step(scaler, opt, m, true);
    CHECK(scaler.get_scale() == 2.0);
    CHECK(scaler.stats().growth_tracker == 0);
    CHECK(scaler.stats().steps_skipped == 1);
    CHECK(scaler.stats().steps_applied == 2);
    CHECK(scaler.stats().iterations == 3);
  }
}

TEST_CASE("GradScaler: init 1e38 with growth 16 never becomes inf", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    Tensor p = zeros({4}, {.device = dev}).requires_grad_(true);
    optim::SGD opt({p}, {.lr = 0.0});
    amp::GradScaler scaler({.init_scale = 1e38, .growth_factor = 16.0, .growth_interval = 1, .max_scale = kInf});
    for (int i = 0; i < 4; ++i) {
      p.set_grad(zeros({4}, {.device = dev}));
      scaler.step(opt);
      scaler.update();
      CHECK(std::isfinite(scaler.get_scale()));
      CHECK(scaler.get_scale() == static_cast<double>(1e38f));
    }
  }
}

TEST_CASE("GradScaler: min/max clamps, hysteresis and the collapse error", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    Tiny m(dev, 2);
    optim::SGD opt(m.params(), {.lr = 0.0});
    {
      amp::GradScaler scaler({.init_scale = 4.0, .growth_factor = 4.0, .growth_interval = 1, .max_scale = 8.0});
      scaled_step(scaler, opt, m, false);
      CHECK(scaler.get_scale() == 8.0);  // 16 clamped
      scaled_step(scaler, opt, m, false);
      CHECK(scaler.get_scale() == 8.0);
    }
    {
      amp::GradScaler scaler({.init_scale = 4.0, .backoff_factor = 0.25, .min_scale = 2.0});
      scaled_step(scaler, opt, m, true);
      CHECK(scaler.get_scale() == 2.0);  // 1 clamped
    }
    {
      amp::GradScaler scaler({.init_scale = 64.0, .hysteresis = 3});
      scaled_step(scaler, opt, m, true);
      scaled_step(scaler, opt, m, true);
      CHECK(scaler.get_scale() == 64.0);
      scaled_step(scaler, opt, m, true);
      CHECK(scaler.get_scale() == 32.0);
      CHECK(scaler.stats().steps_skipped == 3);
    }
    {
      amp::GradScaler scaler({.init_scale = 2.0, .min_scale = 1.0, .collapse_steps = 3});
      scaler.set_parameter_names({{"fc.weight", m.w}, {"fc.bias", m.b}});
      for (int i = 0; i < 3; ++i) scaled_step(scaler, opt, m, true);  // 2 -> 1, then 2 overflows at 1
      CHECK(scaler.stats().steps_skipped == 3);
      scaled_step(scaler, opt, m, true);  // the third overflow at min_scale
      CHECK_THROWS_WITH(scaler.get_scale(), Contains("non-finite gradients at any scale") && Contains("fc.weight"));
      CHECK_THROWS_WITH(scaler.stats(), Contains("min_scale"));
    }
    {
      amp::GradScaler scaler({.init_scale = 1.0, .collapse_steps = 2, .check_every = 1});
      scaled_step(scaler, opt, m, true);
      CHECK_THROWS_WITH(scaled_step(scaler, opt, m, true), Contains("at any scale"));
    }
  }
}

// Scaled run with an overflow at step k vs a plain run that skips step k.
TEST_CASE("GradScaler: an overflow skips exactly that step; final scale follows the rule", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    for (bool adam : {false, true}) {
      INFO(label(dev, kF32, adam ? "adam" : "sgd"));
      constexpr int kSteps = 9, kOverflowAt = 4;
      Tiny scaled(dev, 3), plain(dev, 3);
      auto make_opt = [&](const Tiny& m) -> std::unique_ptr<optim::Optimizer> {
        if (adam) return std::make_unique<optim::Adam>(m.params(), optim::AdamOptions{.lr = 0.01});
        return std::make_unique<optim::SGD>(m.params(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
      };
      auto opt_s = make_opt(scaled), opt_p = make_opt(plain);
      amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 3});
      for (int k = 0; k < kSteps; ++k) {
        scaled_step(scaler, *opt_s, scaled, k == kOverflowAt);
        if (k == kOverflowAt) continue;
        opt_p->zero_grad();
        plain.loss().backward();
        opt_p->step();
      }
      CHECK(values(scaled.w) == values(plain.w));
      CHECK(values(scaled.b) == values(plain.b));
      // 4 clean steps (one growth: x2), overflow (x0.5), 4 clean (one growth: x2).
      CHECK(scaler.get_scale() == 1024.0 * 2 * 0.5 * 2);
      CHECK(scaler.stats().steps_skipped == 1);
      CHECK(opt_s->steps_applied() == kSteps - 1);
    }
  }
}

TEST_CASE("GradScaler: clip_grad_norm_ after unscale_, and accumulation over micro-batches", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    Tiny scaled(dev, 5), plain(dev, 5), second(dev, 6);
    optim::SGD opt_s(scaled.params(), {.lr = 0.05}), opt_p(plain.params(), {.lr = 0.05});
    amp::GradScaler scaler({.init_scale = 256.0});
    for (int k = 0; k < 3; ++k) {
      opt_s.zero_grad();
      // Two micro-batches: the same weights on two inputs.
      scaler.scale(scaled.loss()).backward();
      const Tensor loss2 = mul(sum(mul(add(matmul(second.x, scaled.w), scaled.b), add(matmul(second.x, scaled.w), scaled.b))), 0.125);
      scaler.scale(loss2).backward();
      scaler.unscale_(opt_s);
      const Tensor norm_s = optim::clip_grad_norm_(scaled.params(), 0.5);
      scaler.step(opt_s);
      scaler.update();

      opt_p.zero_grad();
      plain.loss().backward();
      mul(sum(mul(add(matmul(second.x, plain.w), plain.b), add(matmul(second.x, plain.w), plain.b))), 0.125).backward();
      const Tensor norm_p = optim::clip_grad_norm_(plain.params(), 0.5);
      opt_p.step();
      CHECK(values(norm_s) == values(norm_p));
    }
    CHECK(values(scaled.w) == values(plain.w));
    CHECK(values(scaled.b) == values(plain.b));
  }
}

TEST_CASE("GradScaler: two models and two optimizers under one scaler", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    Tiny a(dev, 7), b(dev, 8), ref_a(dev, 7), ref_b(dev, 8);
    optim::SGD opt_a(a.params(), {.lr = 0.02}), opt_b(b.params(), {.lr = 0.02});
    optim::SGD ref_opt_a(ref_a.params(), {.lr = 0.02}), ref_opt_b(ref_b.params(), {.lr = 0.02});
    amp::GradScaler scaler({.init_scale = 512.0});
    scaler.set_parameter_names({{"b.w", b.w}, {"b.b", b.b}});
    for (int k = 0; k < 3; ++k) {
      opt_a.zero_grad();
      opt_b.zero_grad();
      scaler.scale(add(a.loss(), b.loss())).backward();
      if (k == 1) inject(b.b, 2, std::nanf(""));
      scaler.unscale_(opt_a);  // only one of them unscaled, as in PyTorch's example
      scaler.step(opt_a);
      scaler.step(opt_b);
      scaler.update();
      ref_opt_a.zero_grad();
      ref_opt_b.zero_grad();
      add(ref_a.loss(), ref_b.loss()).backward();
      ref_opt_a.step();
      if (k != 1) ref_opt_b.step();  // an overflow skips only the optimizer that saw it
    }
    CHECK(values(a.w) == values(ref_a.w));
    CHECK(values(b.w) == values(ref_b.w));
    CHECK(values(b.b) == values(ref_b.b));
    CHECK(scaler.get_scale() == 256.0);
    CHECK(scaler.last_overflow() == std::vector<std::string>{"b.b"});
  }
}

TEST_CASE("GradScaler: misuse raises as in PyTorch", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    Tiny m(dev, 9);
    optim::SGD opt(m.params(), {.lr = 0.0});
    amp::GradScaler scaler;
    CHECK_THROWS_WITH(scaler.update(), Contains("no inf checks were recorded prior to update()"));
    CHECK_THROWS_WITH(scaler.step(opt), Contains("none of its parameters has a gradient"));
    scaler.scale(m.loss()).backward();
    scaler.unscale_(opt);
    CHECK_THROWS_WITH(scaler.unscale_(opt), Contains("already been called"));
    scaler.step(opt);
    CHECK_THROWS_WITH(scaler.unscale_(opt), Contains("after step()"));
    CHECK_THROWS_WITH(scaler.step(opt), Contains("already been called"));
    scaler.update();
    CHECK_THROWS_WITH(amp::GradScaler({.init_scale = 1e9}), Contains("max_scale"));
    CHECK_THROWS_WITH(amp::GradScaler({.backoff_factor = 1.5}), Contains("backoff_factor"));
    CHECK_THROWS_WITH(scaler.scale(zeros({1}, {.dtype = kI64, .device = dev})), Contains("floating"));
  }
}

TEST_CASE("GradScaler: disabled scaler is a pass-through", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    Tiny a(dev, 10), b(dev, 10);
    optim::SGD opt_a(a.params(), {.lr = 0.1}), opt_b(b.params(), {.lr = 0.1});
    amp::GradScaler scaler({.enabled = false});
    const Tensor loss = a.loss();
    CHECK(scaler.scale(loss).impl_ptr() == loss.impl_ptr());
    loss.backward();
    scaler.unscale_(opt_a);
    scaler.step(opt_a);
    scaler.update();
    b.loss().backward();
    opt_b.step();
    CHECK(values(a.w) == values(b.w));
    CHECK(scaler.get_scale() == 1.0);
  }
}

TEST_CASE("GradScaler: fp16 parameters with fp32 masters; an fp16 gradient overflow is caught", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    for (DType dt : {kF16, kBF16}) {
      INFO(label(dev, dt, ""));
      Tiny m(dev, 11, dt);
      optim::Adam opt(m.params(), {.lr = 0.01});
      amp::GradScaler scaler({.init_scale = 65536.0});
      // A 16-bit loss times 65536: the f16 gradients overflow (65536 > 65504)
      // on the first step, the scale backs off, later steps apply.
      for (int k = 0; k < 6; ++k) {
        const std::vector<float> before = values(m.w);
        const int64_t skipped_before = scaler.stats().steps_skipped;
        opt.zero_grad();
        const Tensor scaled = scaler.scale(m.loss());
        CHECK(scaled.dtype() == kF32);  // the product is promoted: it cannot overflow itself
        scaled.backward();
        CHECK(m.w.grad().dtype() == dt);
        scaler.step(opt);
        scaler.update();
        if (scaler.stats().steps_skipped > skipped_before) CHECK(values(m.w) == before);  // skipped: untouched
        for (float v : values(m.w)) REQUIRE(std::isfinite(v));
      }
      const amp::GradScalerStats s = scaler.stats();
      if (dt == kF16) CHECK(s.steps_skipped >= 1);  // 65536 itself is inf in f16
      CHECK(s.steps_applied >= 1);
      CHECK(s.steps_applied + s.steps_skipped == 6);
      // A finite f16 gradient near the f16 maximum is unscaled, never made inf.
      Tensor p = zeros({2}, {.dtype = kF16, .device = dev}).requires_grad_(true);
      p.set_grad(full({2}, 60000.0, {.dtype = kF16, .device = dev}));
      optim::SGD opt2({p}, {.lr = 0.0});
      amp::GradScaler s2({.init_scale = 2.0});
      s2.unscale_(opt2);
      CHECK(values(p.grad()) == std::vector<float>{30000.0f, 30000.0f});
      s2.step(opt2);
      s2.update();
      CHECK(s2.stats().steps_skipped == 0);
    }
  }
}

TEST_CASE("GradScaler: state_dict round trip continues bit-exactly", "[amp][scaler]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    Tiny m(dev, 12);
    optim::SGD opt(m.params(), {.lr = 0.0});
    amp::GradScaler a({.init_scale = 32.0, .growth_interval = 2, .hysteresis = 2});
    for (int k = 0; k < 5; ++k) scaled_step(a, opt, m, k == 3);
    amp::GradScaler b;  // default options: load_state_dict restores a's
    b.load_state_dict(a.state_dict());
    CHECK(b.options().growth_interval == 2);
    CHECK(b.options().hysteresis == 2);
    CHECK(b.stats().steps_skipped == a.stats().steps_skipped);
    for (int k = 0; k < 6; ++k) {
      scaled_step(a, opt, m, k % 3 == 1);
      scaled_step(b, opt, m, k % 3 == 1);
      CHECK(a.get_scale() == b.get_scale());
      CHECK(a.stats().growth_tracker == b.stats().growth_tracker);
    }
    const auto sa = a.state_dict(), sb = b.state_dict();
    for (size_t i = 0; i < sa.size(); ++i) CHECK(values(sa[i].second.to(kF64)) == values(sb[i].second.to(kF64)));
  }
}

TEST_CASE("GradScaler: 300-step soak with an overflow every 10 steps", "[amp][scaler][soak]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    Tiny m(dev, 13);
    optim::AdamW opt(m.params(), {.lr = 1e-3});
    amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 4, .min_scale = 1.0, .max_scale = 4096.0});
#if defined(HG_WITH_CUDA)
    const bool on_cuda = dev.is_cuda();
    size_t allocated_after_warmup = 0;
#endif
    for (int k = 0; k < 300; ++k) {
      scaled_step(scaler, opt, m, k % 10 == 9);
      if (k % 50 == 49) {
        const amp::GradScalerStats s = scaler.stats();
        CHECK(s.scale >= 1.0);
        CHECK(s.scale <= 4096.0);
        for (float v : values(m.w)) REQUIRE(std::isfinite(v));
      }
#if defined(HG_WITH_CUDA)
      if (on_cuda && k == 20) allocated_after_warmup = cuda::memory_stats(dev.index).allocated_bytes;
#endif
    }
    const amp::GradScalerStats s = scaler.stats();
    CHECK(s.steps_skipped == 30);
    CHECK(s.steps_applied == 270);
    CHECK(opt.steps_applied() == 270);
    // 1024 grows to the 4096 cap within 9 clean steps, and every tenth step
    // (the last one too) backs off to 2048.
    CHECK(s.scale == 2048.0);
#if defined(HG_WITH_CUDA)
    if (on_cuda) CHECK(cuda::memory_stats(dev.index).allocated_bytes == allocated_after_warmup);
#endif
  }
}

// Note [GradScaler across ranks] with a fake second rank: the reducer takes
// the maximum with the other rank's flag (a device tensor), as an
// all_reduce(kMax) would. Overflows only on "the other rank" skip the step
// here too; found_inf and found_any are each reduced once per iteration.
TEST_CASE("GradScaler: a found_inf reducer makes another rank's overflow skip the step", "[amp][scaler][distributed]") {
  for (Device dev : test_devices()) {
    INFO(dev.str());
    Tiny m(dev, 21), plain(dev, 21);
    optim::SGD opt(m.params(), {.lr = 0.01}), opt_p(plain.params(), {.lr = 0.01});
    amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 3});
    Tensor other = zeros({1}, {.device = dev});  // the other rank's found_inf
    int calls = 0;
    scaler.set_found_inf_reducer([&](Tensor& f) {
      NoGradGuard no_grad;
      f.copy_(maximum(f, other));
      ++calls;
    });
    REQUIRE(scaler.has_found_inf_reducer());
    for (int k = 0; k < 6; ++k) {
      other.fill_(k == 2 || k == 3 ? 1.0 : 0.0);
      for (int unscale = 0; unscale < 2; ++unscale) {
        if (unscale == 1 && k != 4) continue;
        opt.zero_grad();
        scaler.scale(m.loss()).backward();
        if (unscale == 1) scaler.unscale_(opt);
        scaler.step(opt);
        scaler.update();
      }
      if (k == 2 || k == 3) continue;  // skipped on every rank
      for (int reps = 0; reps < (k == 4 ? 2 : 1); ++reps) {
        opt_p.zero_grad();
        plain.loss().backward();
        opt_p.step();
      }
    }
    CHECK(calls == 2 * 7);
    CHECK(scaler.stats().steps_skipped == 2);
    CHECK(opt.steps_applied() == 5);
    CHECK(values(m.w) == values(plain.w));
    // growth_interval 3: clean iterations at k = 0, 1, overflows at 2 (512)
    // and 3 (256), then 3 clean ones (k = 4 twice, 5): growth to 512.
    CHECK(scaler.get_scale() == 512.0);
#if defined(HG_WITH_CUDA)
    if (dev.is_cuda()) {  // the reducer adds no host read or sync
      opt.zero_grad();
      scaler.scale(m.loss()).backward();
      const auto before = cuda::host_sync_counts();
      scaler.step(opt);
      scaler.update();
      const auto after = cuda::host_sync_counts();
      CHECK(after.device_to_host_copies == before.device_to_host_copies);
      CHECK(after.synchronizations == before.synchronizations);
    }
#endif
    scaler.set_found_inf_reducer({});
    CHECK_FALSE(scaler.has_found_inf_reducer());
  }
}

#if defined(HG_WITH_CUDA)
TEST_CASE("GradScaler: scale, unscale_, step and update never wait for the device", "[amp][scaler][cuda]") {
  const Device dev = Device::cuda(0);
  Tiny m(dev, 14);
  optim::AdamW opt(m.params(), {.lr = 1e-3});
  amp::GradScaler scaler;
  for (int k = 0; k < 4; ++k) {
    for (bool unscale : {false, true}) {
      opt.zero_grad();
      const Tensor loss = m.loss();
      const auto before_scale = cuda::host_sync_counts();
      const Tensor scaled = scaler.scale(loss);
      const auto after_scale = cuda::host_sync_counts();
      scaled.backward();
      if (k == 2) inject(m.w, 1, kInf);
      const auto before = cuda::host_sync_counts();
      if (unscale) scaler.unscale_(opt);
      scaler.step(opt);
      scaler.update();
      const auto after = cuda::host_sync_counts();
      if (k == 0 && !unscale) continue;  // the first use uploads the initial state once
      CHECK(after_scale.device_to_host_copies == before_scale.device_to_host_copies);
      CHECK(after_scale.synchronizations == before_scale.synchronizations);
      CHECK(after.device_to_host_copies == before.device_to_host_copies);
      CHECK(after.synchronizations == before.synchronizations);
    }
  }
  CHECK(scaler.stats().steps_skipped == 2);
}
#endif

// The training checkpoint carries the scaler (optim/checkpoint.h): a run
// resumed from it continues with the same scale, counters and parameters.
TEST_CASE("GradScaler: saved in the training checkpoint, resume is bit-exact", "[amp][scaler][checkpoint]") {
  test::TempDir dir;
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    auto model = std::make_shared<nn::Linear>(4, 3);
    model->to(dev);
    optim::Adam opt(model->parameters(), {.lr = 0.01});
    const Tensor x = make_input({5, 4}, kF32, Domain::kAny, 20).to(dev);
    auto run = [&](amp::GradScaler& scaler, optim::Optimizer& o, nn::Linear& mdl, int k) {
      o.zero_grad();
      const Tensor y = mdl.forward(x);
      scaler.scale(sum(mul(y, y))).backward();
      if (k % 4 == 2) inject(mdl.weight, 0, kInf);
      scaler.step(o);
      scaler.update();
    };
    amp::GradScaler scaler({.init_scale = 128.0, .growth_interval = 3});
    for (int k = 0; k < 5; ++k) run(scaler, opt, *model, k);
    const std::string path = (dir.path / ("ckpt_" + std::to_string(dev.index) + ".safetensors")).string();
    optim::save_training_checkpoint(path, *model, opt, {}, scaler.state_dict());

    auto resumed = std::make_shared<nn::Linear>(4, 3);
    resumed->to(dev);
    optim::Adam opt2(resumed->parameters(), {.lr = 0.01});
    CHECK_THROWS_WITH(optim::load_training_checkpoint(path, *resumed, opt2), Contains("GradScaler"));
    optim::NamedTensors scaler_state;
    optim::load_training_checkpoint(path, *resumed, opt2, &scaler_state);
    amp::GradScaler scaler2;
    scaler2.load_state_dict(scaler_state);
    for (int k = 5; k < 12; ++k) {
      run(scaler, opt, *model, k);
      run(scaler2, opt2, *resumed, k);
    }
    CHECK(values(model->weight) == values(resumed->weight));
    CHECK(scaler.get_scale() == scaler2.get_scale());
    CHECK(scaler.stats().steps_skipped == scaler2.stats().steps_skipped);
  }
}

TEST_CASE("GradScaler: LR schedules count applied steps by default under a scaler", "[amp][scaler][lr]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF32, ""));
    auto run = [&](std::optional<optim::ScheduleClock> clock) {
      Tiny m(dev, 30);
      optim::SGD opt(m.params(), {.lr = 0.1});
      optim::StepLROptions o{.step_size = 1, .gamma = 0.5};
      if (clock) o.clock = *clock;
      optim::StepLR sched(opt, o);
      amp::GradScaler scaler({.init_scale = 64.0});
      for (int k = 0; k < 5; ++k) {
        scaled_step(scaler, opt, m, k == 1);
        sched.step();
      }
      return values(m.w);
    };
    const std::vector<float> by_default = run(std::nullopt);
    CHECK(by_default == run(optim::ScheduleClock::kAppliedSteps));
    CHECK(by_default != run(optim::ScheduleClock::kCalls));
  }
}

// The CPU check and unscale loops (kernels/amp_scale/amp_scale_cpu.cpp: bit tests on
// the exponent field, OR-ed over the lanes; 16-bit gradients through an f32
// block, rounded once; all gradients' blocks in one parallel region) against
// the element rule written out here: for each gradient, "non-finite" is any
// inf/NaN before the multiply or after it and the rounding to the dtype, and
// the unscaled value is dtype(float(g) * inv_scale). Bad values sit at the
// first, last and block-boundary positions of tensors of several sizes, and
// one finite value overflows only after the multiply (inv_scale 4).
TEST_CASE("GradScaler: the CPU check and unscale loops follow the element rule", "[amp][scaler]") {
  const int64_t sizes[] = {7, 8192, 8193, 70001};
  for (DType dt : {kF32, kF16, kBF16}) {
    const double big = dt == kF16 ? 60000.0 : 3.0e38;  // finite, but not after * 4
    for (bool check_only : {true, false}) {
      for (size_t bad_tensor = 0; bad_tensor <= std::size(sizes); ++bad_tensor) {  // == size: none bad
        for (int64_t where : {int64_t{0}, int64_t{8191}, int64_t{8192}, int64_t{-1}}) {
          for (double bad : {double(kInf), double(std::nanf("")), big}) {
            if (check_only && bad == big) continue;  // only the multiply overflows it
            INFO(dtype_name(dt) << (check_only ? " check" : " unscale") << " bad tensor " << bad_tensor << " at "
                                << where << " value " << bad);
            std::vector<Tensor> grads;
            std::vector<std::vector<float>> before;
            for (size_t k = 0; k < std::size(sizes); ++k) {
              Tensor g = make_input({sizes[k]}, dt, Domain::kAny, 40 + k);
              if (k == bad_tensor) {
                const int64_t at = where < 0 ? sizes[k] - 1 : std::min(where, sizes[k] - 1);
                NoGradGuard no_grad;
                g.narrow(0, at, 1).fill_(bad);
              }
              before.push_back(values(g));
              grads.push_back(g);
            }
            const Tensor inv = full({1}, 4.0), found = zeros({1}), any = zeros({1});
            const Tensor stamps = zeros({static_cast<int64_t>(grads.size())}, {.dtype = kI64});
            const Tensor state = zeros({kAmpStateSize}, {.dtype = kI64});
            ops::amp_unscale_(grads, {0, 1, 2, 3}, inv, found, any, stamps, state, check_only);
            const std::vector<int64_t> got_stamps = stamps.to_vector<int64_t>();
            bool any_bad = false;
            for (size_t k = 0; k < grads.size(); ++k) {
              // The rule, element by element: widened value, product, rounding.
              std::vector<float> want = before[k];
              bool tensor_bad = false;
              for (float x : want) tensor_bad = tensor_bad || !std::isfinite(x);
              if (!check_only) {
                for (float& x : want) x *= 4.0f;  // exact in f32 for finite 16-bit values
                want = from_vector(want, {sizes[k]}).to(dt).to_vector<float>();
                for (float x : want) tensor_bad = tensor_bad || !std::isfinite(x);
              }
              any_bad = any_bad || tensor_bad;
              INFO("tensor " << k);
              CHECK(got_stamps[k] == (tensor_bad ? 1 : 0));
              const std::vector<float> got = values(grads[k]);
              int64_t differ = 0;
              for (size_t i = 0; i < want.size(); ++i) differ += std::memcmp(&got[i], &want[i], 4) != 0;
              CHECK(differ == 0);
            }
            CHECK(any_bad == (bad_tensor < std::size(sizes)));
            CHECK(found.to_vector<float>()[0] == (any_bad ? 1.0f : 0.0f));
            CHECK(any.to_vector<float>()[0] == (any_bad ? 1.0f : 0.0f));
          }
        }
      }
    }
  }
}

// Not run by default ("[.]"): the cost of the read-only check pass that
// scaler.step runs when unscale_ was not called, next to the fused Adam step
// it guards (docs/amp.md quotes the numbers). Run: test_amp "[.bench]".
TEST_CASE("GradScaler: cost of the check pass vs the fused step", "[.bench][amp]") {
  for (Device dev : test_devices()) {
    constexpr int64_t kN = 4 << 20;
    constexpr int kReps = 20;
    for (DType dt : {kF32, kF16}) {
      Tensor p = zeros({kN}, {.dtype = dt, .device = dev}).requires_grad_(true);
      p.set_grad(full({kN}, 0.5, {.dtype = dt, .device = dev}));
      optim::Adam opt({p}, {.lr = 1e-3});
      amp::GradScaler scaler;
      scaler.step(opt);
      scaler.update();
      auto time_ms = [&](auto&& fn) {
        fn();
        (void)p.grad().cpu();  // waits for the device
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kReps; ++i) fn();
        (void)p.grad().cpu();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kReps;
      };
      const Tensor found = zeros({1}, {.device = dev}), any = zeros({1}, {.device = dev});
      const Tensor stamps = zeros({1}, {.dtype = kI64, .device = dev});
      const Tensor state = zeros({kAmpStateSize}, {.dtype = kI64, .device = dev});
      const double check = time_ms([&] {
        ops::amp_unscale_({p.grad()}, {0}, Tensor(), found, any, stamps, state, /*check_only=*/true);
      });
      const double step = time_ms([&] { opt.step(scaler.inv_scale_tensor(), found); });
      WARN(label(dev, dt, "") << ": check pass " << check << " ms, fused Adam step " << step << " ms for " << kN
                              << " elements (" << 100.0 * check / step << "%)");
    }
  }
}

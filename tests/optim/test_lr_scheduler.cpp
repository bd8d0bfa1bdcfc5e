// LR schedules against closed forms written out here in double, a few values
// worked by hand (and known from PyTorch's LinearLR / CosineAnnealingLR /
// StepLR), resuming with set_last_step, and the lr reaching the optimizer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "optim/lr_scheduler.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

constexpr double kPi = 3.14159265358979323846;

Tensor make_param(double value = 0.0) { return full({2}, value).requires_grad_(true); }

// PyTorch's LinearLR(start_factor = 1 / (W + 1), end_factor = 1, total_iters = W)
// followed (SequentialLR, milestone W) by CosineAnnealingLR(T_max = T - W,
// eta_min = r), both in their closed forms, as a multiplier of the base lr.
double torch_warmup_cosine(int64_t step, int64_t warmup, int64_t total, double r) {
  if (step < warmup) {
    const double start = 1.0 / (warmup + 1);
    return start + (1.0 - start) * static_cast<double>(step) / warmup;
  }
  const int64_t t = std::min(step, total) - warmup;
  const int64_t t_max = total - warmup;
  return r + (1.0 - r) * (1.0 + std::cos(kPi * t / t_max)) / 2.0;
}

}  // namespace

TEST_CASE("WarmupCosineLR matches LinearLR then CosineAnnealingLR", "[optim][lr]") {
  struct Case {
    int64_t warmup, total;
    double r;
  };
  for (const Case c : {Case{5, 20, 0.0}, Case{5, 20, 0.1}, Case{0, 7, 0.0}, Case{1, 2, 0.25}, Case{100, 1000, 0.01}}) {
    Tensor w = make_param();
    optim::SGD opt({w}, {.lr = 0.5});
    optim::WarmupCosineLR sched(opt, {.warmup_steps = c.warmup, .total_steps = c.total, .min_lr_ratio = c.r});
    INFO("warmup " << c.warmup << " total " << c.total << " r " << c.r);
    for (int64_t s = 0; s <= c.total + 5; ++s) {
      INFO("step " << s);
      const double expected = torch_warmup_cosine(s, c.warmup, c.total, c.r);
      CHECK(sched.factor(s) == Approx(expected).epsilon(1e-12).margin(1e-15));
      CHECK(sched.last_step() == s);
      // The optimizer keeps its lr in f32: one rounding of base * factor.
      CHECK(sched.last_lr() == Approx(0.5 * expected).epsilon(1e-7).margin(1e-12));
      sched.step();
    }
  }
}

TEST_CASE("WarmupCosineLR hand-computed values", "[optim][lr]") {
  Tensor w = make_param();
  optim::SGD opt({w}, {.lr = 1.0});
  optim::WarmupCosineLR sched(opt, {.warmup_steps = 4, .total_steps = 12});
  CHECK(sched.factor(0) == Approx(0.2));   // 1/5: the first step is not wasted at lr 0
  CHECK(sched.factor(3) == Approx(0.8));   // 4/5
  CHECK(sched.factor(4) == Approx(1.0));   // peak
  CHECK(sched.factor(8) == Approx(0.5));   // half way down the cosine
  CHECK(sched.factor(6) == Approx((1.0 + std::sqrt(0.5)) / 2));  // a quarter: cos(pi/4)
  CHECK(sched.factor(12) == Approx(0.0).margin(1e-15));
  CHECK(sched.factor(1000) == 0.0);
  CHECK(sched.last_lr() == Approx(0.2));  // the constructor applied factor(0)

  optim::WarmupCosineLR floor(opt, {.warmup_steps = 4, .total_steps = 12, .min_lr_ratio = 0.1});
  CHECK(floor.factor(8) == Approx(0.55));  // 0.1 + 0.9 * 0.5
  CHECK(floor.factor(12) == Approx(0.1));
  CHECK(floor.factor(50) == Approx(0.1));
}

TEST_CASE("StepLR matches torch.optim.lr_scheduler.StepLR", "[optim][lr]") {
  Tensor w = make_param();
  optim::SGD opt({w}, {.lr = 0.1});
  optim::StepLR sched(opt, {.step_size = 30, .gamma = 0.1});
  // PyTorch: lr = 0.1 for epochs 0-29, 0.01 for 30-59, 0.001 for 60-89.
  for (int64_t s = 0; s < 100; ++s) {
    INFO("step " << s);
    const double expected = std::pow(0.1, static_cast<double>(s / 30));
    CHECK(sched.factor(s) == Approx(expected).epsilon(1e-12));
    CHECK(sched.last_lr() == Approx(0.1 * expected).epsilon(1e-7));
    sched.step();
  }
  CHECK(sched.factor(29) == 1.0);
  CHECK(sched.factor(30) == Approx(0.1).epsilon(1e-12));
  CHECK(sched.factor(60) == Approx(0.01).epsilon(1e-12));
  CHECK(sched.factor(90) == Approx(0.001).epsilon(1e-12));

  optim::StepLR halving(opt, {.step_size = 2, .gamma = 0.5});
  CHECK(halving.factor(1) == 1.0);
  CHECK(halving.factor(2) == 0.5);
  CHECK(halving.factor(7) == 0.125);
}

TEST_CASE("set_last_step resumes the exact lr sequence", "[optim][lr]") {
  auto run = [](int64_t stop_at, int64_t steps) {
    std::vector<double> lrs;
    Tensor w = make_param();
    optim::AdamW opt({w}, {.lr = 3e-3});
    auto sched = std::make_unique<optim::WarmupCosineLR>(
        opt, optim::WarmupCosineOptions{.warmup_steps = 10, .total_steps = 40, .min_lr_ratio = 0.05});
    for (int64_t s = 0; s < steps; ++s) {
      if (s == stop_at) {  // "restart": a fresh optimizer and scheduler, resumed
        const int64_t saved = sched->last_step();
        Tensor w2 = make_param();
        optim::AdamW opt2({w2}, {.lr = 3e-3});
        optim::WarmupCosineLR resumed(opt2, {.warmup_steps = 10, .total_steps = 40, .min_lr_ratio = 0.05});
        resumed.set_last_step(saved);
        CHECK(resumed.last_step() == stop_at);
        for (; s < steps; ++s) {
          lrs.push_back(resumed.last_lr());
          resumed.step();
        }
        return lrs;
      }
      lrs.push_back(sched->last_lr());
      sched->step();
    }
    return lrs;
  };
  const std::vector<double> straight = run(-1, 50);
  for (int64_t stop : {0, 1, 9, 10, 25, 40, 45}) {
    INFO("resumed at " << stop);
    CHECK(run(stop, 50) == straight);  // bit for bit
  }
  // set_last_step also rewinds.
  Tensor w = make_param();
  optim::SGD opt({w}, {.lr = 1.0});
  optim::StepLR sched(opt, {.step_size = 3, .gamma = 0.5});
  for (int i = 0; i < 7; ++i) sched.step();
  CHECK(sched.last_lr() == 0.25);
  sched.set_last_step(0);
  CHECK(sched.last_lr() == 1.0);
  CHECK(sched.last_step() == 0);
}

TEST_CASE("schedulers scale every group from its own base lr", "[optim][lr]") {
  Tensor a = make_param(), b = make_param();
  optim::SGD opt({a}, {.lr = 0.2});
  opt.add_param_group({b}, optim::SGDOptions{.lr = 0.05f});
  optim::StepLR sched(opt, {.step_size = 1, .gamma = 0.5});
  sched.step();
  sched.step();
  CHECK(sched.base_lr(0) == Approx(0.2).epsilon(1e-7));
  CHECK(sched.base_lr(1) == Approx(0.05).epsilon(1e-7));
  CHECK(sched.last_lr(0) == Approx(0.05).epsilon(1e-7));
  CHECK(sched.last_lr(1) == Approx(0.0125).epsilon(1e-7));
  CHECK(opt.lr(1) == sched.last_lr(1));
}

TEST_CASE("the scheduled lr is the one the optimizer applies", "[optim][lr]") {
  for (Device dev : test_devices()) {
    // SGD with gradient 1: each step moves w by exactly the lr in use.
    Tensor w = zeros({3}, {.device = dev}).requires_grad_(true);
    optim::SGD opt({w}, {.lr = 0.25});
    optim::StepLR sched(opt, {.step_size = 2, .gamma = 0.5});
    double expected = 0.0;
    for (int64_t s = 0; s < 6; ++s) {
      w.set_grad(ones({3}, {.device = dev}));
      opt.step();
      expected -= 0.25 * std::pow(0.5, static_cast<double>(s / 2));  // lr of step s = base * factor(s)
      sched.step();
    }
    INFO(dev);
    // Sums of powers of two: exact in f32.
    CHECK(values_of(w) == std::vector<double>(3, expected));
  }
}

TEST_CASE("kAppliedSteps: the device clock equals the host clock while nothing is skipped", "[optim][lr]") {
  for (Device dev : test_devices()) {
    for (DType dtype : {kF32, kF16}) {
      for (bool cosine : {true, false}) {
        INFO(dev << " " << dtype << (cosine ? " cosine" : " step"));
        auto run = [&](optim::ScheduleClock clock) {
          Tensor w = make_input({37}, dtype, Domain::kAny, 3).to(dev).requires_grad_(true);
          optim::AdamW opt({w}, {.lr = 0.01});
          std::unique_ptr<optim::LRScheduler> sched;
          if (cosine) {
            sched = std::make_unique<optim::WarmupCosineLR>(
                opt, optim::WarmupCosineOptions{.warmup_steps = 3, .total_steps = 9, .min_lr_ratio = 0.1,
                                                .clock = clock});
          } else {
            sched = std::make_unique<optim::StepLR>(opt, optim::StepLROptions{.step_size = 2, .gamma = 0.5,
                                                                              .clock = clock});
          }
          for (int s = 0; s < 12; ++s) {
            w.set_grad(make_input({37}, dtype, Domain::kAny, 100 + s).to(dev));
            opt.step();
            sched->step();
          }
          return values_of(w);
        };
        // Bit-identical: both evaluate lr_schedule_factor and round base * factor to f32 once.
        CHECK(run(optim::ScheduleClock::kAppliedSteps) == run(optim::ScheduleClock::kCalls));
      }
    }
  }
}

TEST_CASE("kAppliedSteps: skipped steps do not advance the schedule, with no host read", "[optim][lr]") {
  for (Device dev : test_devices()) {
    INFO(dev);
    // SGD with gradient 1 moves w by exactly the lr in use; steps 1 and 4 (of
    // 8 calls) are skipped through found_inf, as a GradScaler would.
    const std::vector<bool> skip = {false, true, false, false, true, false, false, false};
    auto run = [&](optim::ScheduleClock clock) {
      Tensor w = zeros({3}, {.device = dev}).requires_grad_(true);
      optim::SGD opt({w}, {.lr = 0.25});
      optim::StepLR sched(opt, {.step_size = 2, .gamma = 0.5, .clock = clock});
      for (bool s : skip) {
        w.set_grad(ones({3}, {.device = dev}));
        opt.step(Tensor(), full({1}, s ? 1.0 : 0.0, {.device = dev}));
        sched.step();
      }
      CHECK(opt.steps_applied() == 6);
      CHECK(sched.last_step() == 8);
      return values_of(w)[0];
    };
    // The reference in the kernel's own f32 arithmetic: w -= lr_k for applied steps k = 0..5.
    float applied = 0.0f, by_calls = 0.0f;
    int64_t k = 0;
    for (size_t call = 0; call < skip.size(); ++call) {
      if (skip[call]) continue;
      applied -= static_cast<float>(0.25 * std::pow(0.5, static_cast<double>(k / 2)));
      by_calls -= static_cast<float>(0.25 * std::pow(0.5, static_cast<double>(call / 2)));
      ++k;
    }
    REQUIRE(applied != by_calls);  // the two clocks really differ on this sequence
    CHECK(run(optim::ScheduleClock::kAppliedSteps) == static_cast<double>(applied));
    CHECK(run(optim::ScheduleClock::kCalls) == static_cast<double>(by_calls));
  }
}

TEST_CASE("kAppliedSteps: the schedule resumes from the optimizer's restored step counter", "[optim][lr]") {
  // Six uninterrupted steps vs three, state_dict round trip into a fresh
  // optimizer + scheduler, three more: the device counter carries the schedule.
  auto make = [](Tensor& w, std::unique_ptr<optim::AdamW>& opt, std::unique_ptr<optim::WarmupCosineLR>& sched) {
    w = full({5}, 0.5).requires_grad_(true);
    opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{w}, optim::AdamWOptions{.lr = 0.05});
    sched = std::make_unique<optim::WarmupCosineLR>(
        *opt, optim::WarmupCosineOptions{.warmup_steps = 2, .total_steps = 6,
                                         .clock = optim::ScheduleClock::kAppliedSteps});
  };
  auto train = [](Tensor& w, optim::AdamW& opt, int steps, int first) {
    for (int s = first; s < first + steps; ++s) {
      w.set_grad(full({5}, 0.1 * (s + 1)));
      opt.step();
    }
  };
  Tensor a, b;
  std::unique_ptr<optim::AdamW> opt_a, opt_b;
  std::unique_ptr<optim::WarmupCosineLR> sched_a, sched_b;
  make(a, opt_a, sched_a);
  train(a, *opt_a, 6, 0);
  make(b, opt_b, sched_b);
  train(b, *opt_b, 3, 0);
  const auto state = opt_b->state_dict();
  const std::vector<double> w_mid = values_of(b);
  make(b, opt_b, sched_b);
  b.set_data(from_vector(std::vector<float>(w_mid.begin(), w_mid.end())));
  opt_b->load_state_dict(state);
  train(b, *opt_b, 3, 3);
  CHECK(values_of(b) == values_of(a));
}

TEST_CASE("schedulers reject bad options with a fix", "[optim][lr][errors]") {
  Tensor w = make_param();
  optim::SGD opt({w}, {.lr = 0.1});
  CHECK_THROWS_WITH(optim::WarmupCosineLR(opt, {.warmup_steps = 10}), Catch::Contains("total_steps (0)"));
  CHECK_THROWS_WITH(optim::WarmupCosineLR(opt, {.warmup_steps = 10, .total_steps = 10}),
                    Catch::Contains("warmup included"));
  CHECK_THROWS_WITH(optim::WarmupCosineLR(opt, {.warmup_steps = -1, .total_steps = 10}),
                    Catch::Contains("warmup_steps must be >= 0"));
  CHECK_THROWS_WITH(optim::WarmupCosineLR(opt, {.total_steps = 10, .min_lr_ratio = 1.5}),
                    Catch::Contains("[0, 1]"));
  CHECK_THROWS_WITH(optim::StepLR(opt, {.step_size = 0}), Catch::Contains("step_size"));
  CHECK_THROWS_WITH(optim::StepLR(opt, {.step_size = 1, .gamma = -0.5}), Catch::Contains("gamma"));
  optim::StepLR sched(opt, {.step_size = 1});
  CHECK_THROWS_WITH(sched.set_last_step(-1), Catch::Contains(">= 0"));
  opt.add_param_group({make_param()});
  CHECK_THROWS_WITH(sched.step(), Catch::Contains("after the last add_param_group"));
}

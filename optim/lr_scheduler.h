// Learning-rate schedules: each group's lr = its base lr * factor(step).
//
//   hg::optim::AdamW opt(model->parameters(), {.lr = 1e-3});
//   hg::optim::WarmupCosineLR sched(opt, {.warmup_steps = 100, .total_steps = 5000});
//   for (...) {
//     ...
//     scaler.step(opt);  // or opt.step()
//     sched.step();      // after the optimizer step, as in PyTorch
//   }
//
// Counting: like torch.optim.lr_scheduler, a schedule counts its own step()
// calls, not the updates the optimizer applied. A step that a GradScaler
// skipped on the device (found_inf) still advances the schedule, exactly as
// in PyTorch, and nothing here reads device memory, so scheduling never
// syncs. To follow applied steps instead, build the schedule with
// .clock = ScheduleClock::kAppliedSteps: it is then installed in the
// optimizer and evaluated by the fused step from the device step counter
// (Note [Schedules on the device] in kernels/optimizer/optimizer.h), still without a
// sync; step() then only counts calls for last_lr(). Without skipped steps
// both clocks give bit-identical lrs.
//
// Invariants: after construction and after every step() / set_last_step(n),
// every group's lr equals base_lr(group) * factor(last_step()) (rounded to the
// optimizer's f32 hyperparameter, as the optimizer stores it). The base lrs
// are the groups' lrs when the scheduler was built; build the scheduler after
// the last add_param_group. The lr used by the k-th optimizer step (k = 0,
// 1, ...) is base * factor(k) when step() follows each optimizer step.
//
// Resuming: store last_step() in the checkpoint, build the optimizer and the
// scheduler as before, then set_last_step(saved): the lr sequence continues
// as if training had never stopped. Under a GradScaler, build it with
// kAppliedSteps: kAuto switches clocks only after the first scaled step, so
// after a resume that first step would use the call clock's lr, which differs
// once a step was skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "optim/optimizer.h"

namespace hg::optim {

// What a schedule counts: its own step() calls (PyTorch's rule, host side) or
// the optimizer steps actually applied (device side, skips excluded).
// kAuto (the default): kCalls, until the optimizer is stepped by a GradScaler
// (amp/grad_scaler.h), which can skip steps on the device; the schedule then
// switches to kAppliedSteps at its next step() (or at construction, if the
// scaler came first). The switch happens after the first scaled step, whose
// lr is base * factor(0) under both clocks, so the lr sequence is exactly
// that of kAppliedSteps from the start.
enum class ScheduleClock : uint8_t { kCalls, kAppliedSteps, kAuto };

class LRScheduler {
 public:
  virtual ~LRScheduler();
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances by one optimizer step and sets every group's lr.
  void step();
  // Number of step() calls so far (0 right after construction).
  int64_t last_step() const { return last_step_; }
  // For resuming from a checkpoint: sets the counter (>= 0) and re-applies the lr.
  void set_last_step(int64_t n);
  // The lr currently set on `group` (read from the optimizer). With the
  // kAppliedSteps clock: base_lr * factor(last_step()), the lr of the next
  // step if none was skipped (the device knows the exact one).
  double last_lr(size_t group = 0) const;
  ScheduleClock clock() const { return clock_; }
  // The lr of `group` when the scheduler was built.
  double base_lr(size_t group = 0) const;
  // The lr multiplier after `step` scheduler steps (lr = base lr * factor).
  virtual double factor(int64_t step) const = 0;

 protected:
  // Captures each group's base lr. A base constructor cannot call the
  // derived factor(), so every subclass constructor ends with start(), which
  // sets lr = base * factor(0) (kCalls) or installs `schedule` in every
  // group's hyperparameters (kAppliedSteps).
  LRScheduler(Optimizer& opt, ScheduleClock clock);
  void start(const LrSchedule& schedule);
  void apply_lr();
  bool host_clock() const;  // kCalls, or kAuto not switched yet

 private:
  Optimizer& opt_;
  ScheduleClock clock_;
  std::vector<double> base_lrs_;  // [group]
  int64_t last_step_ = 0;
  LrSchedule schedule_;  // installed on the optimizer under kAppliedSteps
};

// Linear warmup, then a half cosine down to min_lr_ratio, then constant:
//   step <  W:      factor = (step + 1) / (W + 1)
//   W <= step < T:  factor = r + (1 - r) * (1 + cos(pi * (step - W) / (T - W))) / 2
//   step >= T:      factor = r
// (W = warmup_steps, T = total_steps, r = min_lr_ratio). The warmup never
// runs a zero-lr step: it is PyTorch's LinearLR(start_factor = 1 / (W + 1),
// total_iters = W), and the decay is CosineAnnealingLR(T_max = T - W,
// eta_min = r * base_lr) started at step W (their SequentialLR). W = 0 starts
// the cosine at once.
struct WarmupCosineOptions {
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // every optimizer step of the run, warmup included
  double min_lr_ratio = 0.0;
  ScheduleClock clock = ScheduleClock::kAuto;
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): WarmupCosineOptions{}.set_clock(...).set_warmup_steps(...).
  // clang-format off
  constexpr WarmupCosineOptions& set_warmup_steps(int64_t v) { warmup_steps = v; return *this; }
  constexpr WarmupCosineOptions& set_total_steps(int64_t v) { total_steps = v; return *this; }
  constexpr WarmupCosineOptions& set_min_lr_ratio(double v) { min_lr_ratio = v; return *this; }
  constexpr WarmupCosineOptions& set_clock(ScheduleClock v) { clock = v; return *this; }
  // clang-format on
};

class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& opt, WarmupCosineOptions options);
  double factor(int64_t step) const override;
  const WarmupCosineOptions& options() const { return options_; }

 private:
  WarmupCosineOptions options_;
  LrSchedule schedule_;
};

// factor = gamma ^ floor(step / step_size): torch.optim.lr_scheduler.StepLR
// (gamma 0.1, step_size 30: lr * 1 for steps 0-29, * 0.1 for 30-59, ...).
struct StepLROptions {
  int64_t step_size = 1;
  double gamma = 0.1;
  ScheduleClock clock = ScheduleClock::kAuto;
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): StepLROptions{}.set_clock(...).set_step_size(...).
  // clang-format off
  constexpr StepLROptions& set_step_size(int64_t v) { step_size = v; return *this; }
  constexpr StepLROptions& set_gamma(double v) { gamma = v; return *this; }
  constexpr StepLROptions& set_clock(ScheduleClock v) { clock = v; return *this; }
  // clang-format on
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, StepLROptions options);
  double factor(int64_t step) const override;
  const StepLROptions& options() const { return options_; }

 private:
  StepLROptions options_;
  LrSchedule schedule_;
};

// A user-defined schedule: factor(k) = fn(k) for the k-th step (from 0), on
// the same clocks as the built-in schedules. Under kAppliedSteps (or kAuto
// after a GradScaler step) the device needs the factor of an applied-step
// count it alone knows, and a C++ function cannot run there: fn is tabulated
// once, at construction, for k = 0 .. total_steps - 1 into an f64 tensor on
// the parameters' device (8 bytes per step: 0.8 MB for 100k steps), which the
// fused step and Foreach::lr() read with no host sync; steps past the table
// use fn(total_steps - 1). Under kCalls fn is called on the host at each
// step() and total_steps only bounds nothing (any k works). fn must be a pure
// function of k returning a finite value >= 0.
struct LambdaLROptions {
  std::function<double(int64_t)> fn{};
  int64_t total_steps = 0;  // every optimizer step of the run (the table's length)
  ScheduleClock clock = ScheduleClock::kAuto;
};

class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& opt, LambdaLROptions options);
  double factor(int64_t step) const override;

 private:
  LambdaLROptions options_;
  Tensor table_;  // f64 [total_steps] on the parameters' device
  LrSchedule schedule_;
};

}  // namespace hg::optim

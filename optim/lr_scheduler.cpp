#include "optim/lr_scheduler.h"

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace hg::optim {

LRScheduler::LRScheduler(Optimizer& opt, ScheduleClock clock) : opt_(opt), clock_(clock) {
  const size_t groups = opt.param_groups().size();
  for (size_t g = 0; g < groups; ++g) base_lrs_.push_back(opt.lr(g));
}

LRScheduler::~LRScheduler() = default;

bool LRScheduler::host_clock() const {
  return clock_ == ScheduleClock::kCalls || clock_ == ScheduleClock::kAuto;
}

void LRScheduler::start(const LrSchedule& schedule) {
  schedule_ = schedule;
  if (clock_ == ScheduleClock::kAuto && opt_.stepped_by_scaler()) clock_ = ScheduleClock::kAppliedSteps;
  if (host_clock()) {
    for (auto& group : opt_.param_groups()) group.hyper_.schedule = LrSchedule{};  // no device schedule too
    apply_lr();
    return;
  }
  // The optimizer's lr stays the base lr; the fused step applies the factor.
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    opt_.set_lr(g, base_lrs_[g]);
    opt_.param_groups()[g].hyper_.schedule = schedule;
  }
}

void LRScheduler::step() {
  ++last_step_;
  if (clock_ == ScheduleClock::kAuto && opt_.stepped_by_scaler()) {
    start(schedule_);  // switches to kAppliedSteps (see ScheduleClock)
    return;
  }
  if (host_clock()) apply_lr();
}

void LRScheduler::set_last_step(int64_t n) {
  HG_CHECK(n >= 0, "lr scheduler: set_last_step needs a step count >= 0, got ", n);
  last_step_ = n;
  if (host_clock()) apply_lr();
}

double LRScheduler::last_lr(size_t group) const {
  if (host_clock()) return opt_.lr(group);
  return static_cast<double>(static_cast<float>(base_lr(group) * factor(last_step_)));
}

double LRScheduler::base_lr(size_t group) const {
  HG_CHECK(group < base_lrs_.size(), "lr scheduler: no parameter group ", group, " (the scheduler has ",
           base_lrs_.size(), ")");
  return base_lrs_[group];
}

void LRScheduler::apply_lr() {
  HG_CHECK(opt_.param_groups().size() == base_lrs_.size(), "lr scheduler: the optimizer has ",
           opt_.param_groups().size(), " parameter groups but the scheduler was built for ", base_lrs_.size(),
           "; create the scheduler after the last add_param_group");
  const double f = factor(last_step_);
  for (size_t g = 0; g < base_lrs_.size(); ++g) opt_.set_lr(g, base_lrs_[g] * f);
}

// ---- WarmupCosineLR --------------------------------------------------------

WarmupCosineLR::WarmupCosineLR(Optimizer& opt, WarmupCosineOptions options)
    : LRScheduler(opt, options.clock), options_(options) {
  const WarmupCosineOptions& o = options_;
  HG_CHECK(o.warmup_steps >= 0, "WarmupCosineLR: warmup_steps must be >= 0 (0: no warmup), got ", o.warmup_steps);
  HG_CHECK(o.total_steps > o.warmup_steps, "WarmupCosineLR: total_steps (", o.total_steps,
           ") must be greater than warmup_steps (", o.warmup_steps,
           "); set total_steps to the number of optimizer steps in the whole run, warmup included");
  HG_CHECK(o.min_lr_ratio >= 0.0 && o.min_lr_ratio <= 1.0,
           "WarmupCosineLR: min_lr_ratio is the final lr as a fraction of the base lr and must be in [0, 1], got ",
           o.min_lr_ratio);
  schedule_ = {.kind = LrScheduleKind::kWarmupCosine,
               .warmup_steps = o.warmup_steps,
               .total_steps = o.total_steps,
               .min_lr_ratio = o.min_lr_ratio};
  start(schedule_);
}

double WarmupCosineLR::factor(int64_t step) const {
  HG_CHECK(step >= 0, "WarmupCosineLR: factor of a negative step ", step);
  return lr_schedule_factor(schedule_, step);  // the formula the fused step uses on the device
}

// ---- StepLR ----------------------------------------------------------------

StepLR::StepLR(Optimizer& opt, StepLROptions options) : LRScheduler(opt, options.clock), options_(options) {
  HG_CHECK(options_.step_size >= 1, "StepLR: step_size (steps between decays) must be >= 1, got ",
           options_.step_size);
  HG_CHECK(options_.gamma >= 0.0 && std::isfinite(options_.gamma),
           "StepLR: gamma (the decay multiplier, e.g. 0.1) must be finite and >= 0, got ", options_.gamma);
  schedule_ = {.kind = LrScheduleKind::kStep, .step_size = options_.step_size, .gamma = options_.gamma};
  start(schedule_);
}

double StepLR::factor(int64_t step) const {
  HG_CHECK(step >= 0, "StepLR: factor of a negative step ", step);
  return lr_schedule_factor(schedule_, step);
}

// ---- LambdaLR --------------------------------------------------------------

LambdaLR::LambdaLR(Optimizer& opt, LambdaLROptions options)
    : LRScheduler(opt, options.clock), options_(std::move(options)) {
  HG_CHECK(static_cast<bool>(options_.fn), "LambdaLR: needs a schedule function fn(step) -> factor");
  HG_CHECK(options_.total_steps >= 1,
           "LambdaLR: total_steps (the run's optimizer steps, the length of the "
           "device table) must be >= 1, got ",
           options_.total_steps);
  const auto& groups = opt.param_groups();
  const Device device = groups[0].params[0].device();
  for (const auto& g : groups) {
    HG_CHECK(g.params[0].device() == device, "LambdaLR: the parameter groups span ", device, " and ",
             g.params[0].device(), "; one table serves one device");
  }
  std::vector<double> values(static_cast<size_t>(options_.total_steps));
  for (int64_t k = 0; k < options_.total_steps; ++k) values[static_cast<size_t>(k)] = factor(k);
  table_ = from_vector(values, {options_.total_steps}).to(device);
  schedule_ = {.kind = LrScheduleKind::kTable,
               .table = static_cast<const double*>(table_.data_ptr()),
               .table_size = options_.total_steps};
  start(schedule_);
}

double LambdaLR::factor(int64_t step) const {
  HG_CHECK(step >= 0, "LambdaLR: factor of a negative step ", step);
  const double f = options_.fn(step);
  HG_CHECK(std::isfinite(f) && f >= 0.0, "LambdaLR: fn(", step, ") = ", f, "; a factor must be finite and >= 0");
  return f;
}

}  // namespace hg::optim

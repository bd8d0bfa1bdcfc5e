#include "amp/grad_scaler.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/profiler.h"
#include "optim/state_check.h"

namespace hg::amp {

namespace {

constexpr int64_t kNumOptionValues = kAmpOptionCount;

std::vector<double> option_values(const GradScalerOptions& o) {
  return {o.init_scale,     o.growth_factor,  o.backoff_factor,
          static_cast<double>(o.growth_interval), o.min_scale, o.max_scale,
          static_cast<double>(o.hysteresis), static_cast<double>(o.collapse_steps),
          static_cast<double>(o.check_every)};
}

GradScalerOptions options_from(const std::vector<double>& v, bool enabled) {
  GradScalerOptions o;
  o.init_scale = v[0];
  o.growth_factor = v[1];
  o.backoff_factor = v[2];
  o.growth_interval = static_cast<int64_t>(v[3]);
  o.min_scale = v[4];
  o.max_scale = v[5];
  o.hysteresis = static_cast<int64_t>(v[6]);
  o.collapse_steps = static_cast<int64_t>(v[7]);
  o.check_every = static_cast<int64_t>(v[8]);
  o.enabled = enabled;
  return o;
}

void validate(const GradScalerOptions& o) {
  HG_CHECK(o.growth_factor > 1.0, "GradScaler: growth_factor must be > 1, got ", o.growth_factor);
  HG_CHECK(o.backoff_factor > 0.0 && o.backoff_factor < 1.0, "GradScaler: backoff_factor must be in (0, 1), got ",
           o.backoff_factor);
  HG_CHECK(o.growth_interval >= 1, "GradScaler: growth_interval must be >= 1, got ", o.growth_interval);
  HG_CHECK(o.min_scale > 0.0 && std::isfinite(o.min_scale) && o.min_scale <= o.max_scale,
           "GradScaler: need 0 < min_scale <= max_scale with a finite min_scale, got min_scale ", o.min_scale,
           " and max_scale ", o.max_scale);
  HG_CHECK(std::isfinite(o.init_scale) && static_cast<float>(o.init_scale) <= 3.4028234663852886e38 &&
               o.init_scale >= o.min_scale && o.init_scale <= o.max_scale,
           "GradScaler: init_scale ", o.init_scale, " must be a finite f32 in [min_scale, max_scale] = [",
           o.min_scale, ", ", o.max_scale, "]; raise max_scale (it may be inf) or lower init_scale");
  HG_CHECK(o.hysteresis >= 1, "GradScaler: hysteresis must be >= 1 (1: back off at every overflow), got ",
           o.hysteresis);
  HG_CHECK(o.collapse_steps >= 1, "GradScaler: collapse_steps must be >= 1, got ", o.collapse_steps);
  HG_CHECK(o.check_every >= 0, "GradScaler: check_every must be >= 0 (0: never), got ", o.check_every);
}

float bits_to_float(int64_t bits) {
  const auto b = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (options_.enabled) validate(options_);
}

AmpScaleOptions GradScaler::kernel_options() const {
  return {static_cast<float>(options_.growth_factor), static_cast<float>(options_.backoff_factor),
          options_.growth_interval,                    static_cast<float>(options_.min_scale),
          static_cast<float>(options_.max_scale),      options_.hysteresis,
          options_.collapse_steps};
}

void GradScaler::ensure_state(Device device) {
  if (initialized_) {
    HG_CHECK(device == device_, "GradScaler: its state is on ", device_, " but this tensor is on ", device,
             "; use one GradScaler per device");
    return;
  }
  NoGradGuard no_grad;
  // Host-built, then one copy each: this runs once, at the first use.
  float scale = static_cast<float>(options_.init_scale);
  std::vector<int64_t> state(kAmpStateSize, 0);
  if (!pending_.empty()) {
    for (const auto& [name, t] : pending_) {
      if (name == "scale") scale = t.cpu().to_vector<float>()[0];
      if (name == "state") state = t.cpu().to_vector<int64_t>();
    }
    pending_.clear();
  }
  state[kAmpScaleBits] = amp_float_bits(scale);
  const auto inv = static_cast<float>(1.0 / static_cast<double>(scale));
  scale_ = from_vector(std::vector<float>{scale}, {1}).to(device);
  inv_scale_ = from_vector(std::vector<float>{inv}, {1}).to(device);
  found_any_ = zeros({1}, {.device = device});
  state_ = from_vector(state, {kAmpStateSize}).to(device);
  device_ = device;
  initialized_ = true;
}

Tensor GradScaler::scale(const Tensor& loss) {
  const profiler::Range profiled("grad_scaler.scale");  // Note [Profiler]
  if (!options_.enabled) return loss;
  HG_CHECK(loss.defined() && is_floating(loss.dtype()), "GradScaler::scale: the loss must be a floating tensor, got ",
           loss.defined() ? std::string(dtype_name(loss.dtype())) : std::string("an undefined tensor"));
  ensure_state(loss.device());
  // [1] broadcasts against any shape; a 0-dim loss stays 0-dim.
  const Tensor factor = loss.dim() == 0 ? scale_.view(Shape{}) : scale_;
  return mul(loss, factor);
}

GradScaler::OptState& GradScaler::opt_state(optim::Optimizer& opt) {
  OptState& st = opts_[&opt];
  std::vector<Tensor> params;
  std::vector<std::string> names;
  auto& groups = opt.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      params.push_back(groups[g].params[i]);
      names.push_back("group " + std::to_string(g) + " param " + std::to_string(i) + " " +
                      groups[g].params[i].shape_str());
    }
  }
  if (params.size() != st.params.size()) st.stamps = Tensor();  // groups were added
  st.params = std::move(params);
  st.default_names = std::move(names);
  return st;
}

void GradScaler::check_grads(OptState& st, bool check_only) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  std::vector<int64_t> index;
  for (size_t i = 0; i < st.params.size(); ++i) {
    const Tensor g = st.params[i].grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    index.push_back(static_cast<int64_t>(i));
  }
  st.had_grads = !grads.empty();
  if (!st.had_grads) return;
  ensure_state(grads[0].device());
  if (!st.stamps.defined()) st.stamps = zeros({static_cast<int64_t>(st.params.size())}, {.dtype = kI64, .device = device_});
  st.found_inf = zeros({1}, {.device = device_});
  ops::amp_unscale_(grads, index, inv_scale_, st.found_inf, found_any_, st.stamps, state_, check_only);
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  const profiler::Range profiled("grad_scaler.unscale_");  // Note [Profiler]
  if (!options_.enabled) return;
  OptState& st = opt_state(opt);
  HG_CHECK(st.stage != Stage::kUnscaled,
           "GradScaler::unscale_() has already been called on this optimizer since the last update(); call it once "
           "per optimizer and iteration (before clipping), then step() and update()");
  HG_CHECK(st.stage != Stage::kStepped,
           "GradScaler::unscale_() is being called after step() for this optimizer; unscale before stepping, and "
           "call update() to start the next iteration");
  check_grads(st, /*check_only=*/false);
  st.stage = Stage::kUnscaled;
}

void GradScaler::step(optim::Optimizer& opt) {
  if (!options_.enabled) {
    opt.step();
    return;
  }
  OptState& st = opt_state(opt);
  HG_CHECK(st.stage != Stage::kStepped,
           "GradScaler::step() has already been called on this optimizer since the last update(); call update() "
           "once per iteration after all step() calls");
  const bool unscaled = st.stage == Stage::kUnscaled;
  // Not unscaled: the read-only check runs over every gradient before the
  // optimizer writes any parameter; the step multiplies by 1/S itself.
  if (!unscaled) check_grads(st, /*check_only=*/true);
  HG_CHECK(st.had_grads,
           "GradScaler::step(): no inf checks were recorded for this optimizer: none of its parameters has a "
           "gradient. Call scaler.scale(loss).backward() before step()");
  if (reducer_) reducer_(st.found_inf);  // Note [GradScaler across ranks]
  opt.set_stepped_by_scaler();  // LR schedules with ScheduleClock::kAuto now count applied steps
  opt.step(unscaled ? Tensor() : inv_scale_, st.found_inf);
  st.stage = Stage::kStepped;
}

void GradScaler::update() {
  const profiler::Range profiled("grad_scaler.update");  // Note [Profiler]
  if (!options_.enabled) return;
  bool any = false;
  for (auto& [opt, st] : opts_) any = any || (st.stage != Stage::kReady && st.had_grads);
  HG_CHECK(any && initialized_,
           "GradScaler::update(): no inf checks were recorded prior to update(); call scaler.step(opt) (or "
           "unscale_(opt)) after backward() in this iteration first");
  if (reducer_) reducer_(found_any_);  // Note [GradScaler across ranks]
  ops::amp_update_scale_(scale_, inv_scale_, state_, found_any_, kernel_options());
  for (auto& [opt, st] : opts_) {
    st.stage = Stage::kReady;
    st.found_inf = Tensor();
    st.had_grads = false;
  }
  ++updates_;
  if (options_.check_every > 0 && updates_ % options_.check_every == 0) check();
}

void GradScaler::set_parameter_names(const std::vector<std::pair<std::string, Tensor>>& named) {
  for (const auto& [name, t] : named) {
    if (t.defined()) names_[t.impl_ptr()] = name;
  }
}

std::vector<int64_t> GradScaler::read_state() const {
  if (!initialized_) {
    std::vector<int64_t> state(kAmpStateSize, 0);
    state[kAmpScaleBits] = amp_float_bits(static_cast<float>(options_.init_scale));
    for (const auto& [name, t] : pending_) {
      if (name == "state") state = t.cpu().to_vector<int64_t>();
    }
    return state;
  }
  return state_.cpu().to_vector<int64_t>();
}

std::vector<std::string> GradScaler::overflow_names(int64_t iteration_stamp) const {
  std::vector<std::string> out;
  if (iteration_stamp == 0) return out;
  for (const auto& [opt, st] : opts_) {
    if (!st.stamps.defined()) continue;
    const std::vector<int64_t> stamps = st.stamps.cpu().to_vector<int64_t>();
    for (size_t i = 0; i < stamps.size() && i < st.params.size(); ++i) {
      if (stamps[i] != iteration_stamp) continue;
      auto it = names_.find(st.params[i].impl_ptr());
      out.push_back(it != names_.end() ? it->second : st.default_names[i]);
    }
  }
  return out;
}

void GradScaler::raise_if_collapsed(const std::vector<int64_t>& state) const {
  if (state[kAmpCollapsed] == 0) return;
  std::string names;
  for (const std::string& n : overflow_names(state[kAmpLastOverflow])) names += (names.empty() ? "" : ", ") + n;
  HG_FAIL("GradScaler: the loss scale sat at min_scale (", options_.min_scale, ") and still overflowed ",
          options_.collapse_steps,
          " times in a row: the model produces non-finite gradients at any scale, so no step is being applied. "
          "Parameters whose gradients were non-finite at the last overflow: ",
          names.empty() ? std::string("(none recorded)") : names,
          ". Look for the op that overflows before them (keep it in fp32 with an autocast policy override), "
          "lower the learning rate, or train in fp32");
}

void GradScaler::check() const {
  if (!options_.enabled) return;
  raise_if_collapsed(read_state());
}

GradScalerStats GradScaler::decode(const std::vector<int64_t>& state) const {
  raise_if_collapsed(state);
  GradScalerStats s;
  s.scale = bits_to_float(state[kAmpScaleBits]);
  s.iterations = state[kAmpIteration];
  s.steps_applied = state[kAmpApplied];
  s.steps_skipped = state[kAmpSkipped];
  s.growth_tracker = state[kAmpGrowthTracker];
  s.overflows_in_row = state[kAmpOverflowsInRow];
  return s;
}

GradScalerStats GradScaler::stats() const {
  if (!options_.enabled) {
    GradScalerStats s;
    s.scale = 1.0;
    return s;
  }
  return decode(read_state());
}

Tensor GradScaler::snapshot() const {
  if (!options_.enabled) return Tensor();
  if (!initialized_) return from_vector(read_state(), {kAmpStateSize});  // host values, nothing queued yet
  NoGradGuard no_grad;
  return state_.clone();
}

GradScalerStats GradScaler::stats_of(const Tensor& snapshot) const {
  if (!options_.enabled) return stats();
  HG_CHECK(snapshot.defined() && snapshot.dtype() == kI64 && snapshot.numel() == kAmpStateSize,
           "GradScaler::stats_of: expects a tensor from snapshot() of this (enabled) scaler");
  return decode(snapshot.cpu().to_vector<int64_t>());
}

double GradScaler::get_scale() const { return stats().scale; }

std::vector<std::string> GradScaler::last_overflow() const {
  if (!options_.enabled || !initialized_) return {};
  return overflow_names(read_state()[kAmpLastOverflow]);
}

std::vector<std::pair<std::string, Tensor>> GradScaler::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  const std::vector<int64_t> state = read_state();
  out.emplace_back("scale", from_vector(std::vector<float>{bits_to_float(state[kAmpScaleBits])}, {1}));
  out.emplace_back("state", from_vector(state, {kAmpStateSize}));
  out.emplace_back("options", from_vector(option_values(options_), {kNumOptionValues}));
  return out;
}

void GradScaler::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::map<std::string, Tensor> given(state.begin(), state.end());
  auto get = [&](const char* key, DType dtype, int64_t numel) {
    auto it = given.find(key);
    HG_CHECK(it != given.end(), "GradScaler::load_state_dict: entry '", key,
             "' is missing; the state was not written by GradScaler::state_dict");
    HG_CHECK(it->second.dtype() == dtype && it->second.numel() == numel, "GradScaler::load_state_dict: '", key,
             "' must be ", dtype, " with ", numel, " elements, got ", it->second.dtype(), " ",
             it->second.shape_str());
    return it->second.cpu().contiguous();
  };
  const Tensor scale = get("scale", kF32, 1);
  const Tensor st = get("state", kI64, kAmpStateSize);
  const Tensor opts = get("options", kF64, kNumOptionValues);
  HG_CHECK(given.size() == 3, "GradScaler::load_state_dict: expected 'scale', 'state' and 'options', got ",
           given.size(), " entries");
  optim::check_scaler_state_values(state, {});  // Note [Training-state rules]; before any value is used
  GradScalerOptions loaded = options_from(opts.to_vector<double>(), options_.enabled);
  validate(loaded);
  options_ = loaded;
  NoGradGuard no_grad;
  if (initialized_) {
    const float s = scale.to_vector<float>()[0];
    std::vector<int64_t> values = st.to_vector<int64_t>();
    values[kAmpScaleBits] = amp_float_bits(s);
    scale_.copy_(scale.to(device_));
    inv_scale_.copy_(from_vector(std::vector<float>{static_cast<float>(1.0 / static_cast<double>(s))}, {1}).to(device_));
    state_.copy_(from_vector(values, {kAmpStateSize}).to(device_));
    found_any_.zero_();
  } else {
    pending_ = {{"scale", scale.clone()}, {"state", st.clone()}};
  }
}

}  // namespace hg::amp

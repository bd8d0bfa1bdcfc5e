#include "optim/optimizer.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/profiler.h"
#include "optim/state_check.h"

namespace hg::optim {

Optimizer::Optimizer(std::vector<Tensor> params, OptimizerHyper defaults) : defaults_(defaults) {
  HG_CHECK(defaults.lr >= 0.0f, "optimizer: learning rate must be >= 0, got ", defaults.lr);
  add_param_group(std::move(params));
}

Optimizer::Optimizer(std::vector<Tensor> params, double lr, OptimizerOptions defaults)
    : custom_(true), custom_defaults_(std::move(defaults)) {
  HG_CHECK(lr >= 0.0, "optimizer: learning rate must be >= 0, got ", lr);
  HG_CHECK(!custom_defaults_.count("lr"), "optimizer: give the learning rate as the lr argument, not as an option");
  defaults_.lr = static_cast<float>(lr);
  add_param_group(std::move(params));
}

void Optimizer::add_param_group(std::vector<Tensor> params) { add_hyper_group(std::move(params), defaults_); }

void Optimizer::add_param_group(std::vector<Tensor> params, const OptimizerOptions& overrides) {
  HG_CHECK(custom_,
           "optimizer: named group options are for user-written optimizers; SGD, Adam and AdamW take their "
           "typed options, e.g. opt.add_param_group(params, opt.defaults().set_weight_decay(0.0)) or "
           "hg::optim::AdamWOptions{...}");
  OptimizerHyper hyper = defaults_;
  for (const auto& [name, value] : overrides) {
    if (name == "lr") {
      HG_CHECK(value >= 0.0, "optimizer: learning rate must be >= 0, got ", value);
      hyper.lr = static_cast<float>(value);
    } else {
      HG_CHECK(custom_defaults_.count(name), "optimizer: unknown option '", name,
               "' for a parameter group (the optimizer's options are its constructor's)");
    }
  }
  add_hyper_group(std::move(params), hyper);
  for (const auto& [name, value] : overrides) {
    if (name != "lr") groups_.back().options[name] = value;
  }
}

double Optimizer::ParamGroup::option(const std::string& name) const {
  auto it = options.find(name);
  HG_CHECK(it != options.end(), "optimizer: no option '", name, "' in this parameter group");
  return it->second;
}

std::vector<Optimizer::StateSpec> Optimizer::state_spec(const ParamGroup& /*group*/, const Tensor& /*param*/) const {
  return {};
}

void Optimizer::update(OptimizerStep& /*step*/) {
  HG_FAIL("optimizer: a user-written optimizer must override update() (Note [Writing an optimizer])");
}

void Optimizer::add_hyper_group(std::vector<Tensor> params, OptimizerHyper hyper) {
  HG_CHECK(!params.empty(), "optimizer: a parameter group needs at least one parameter");
  for (size_t i = 0; i < params.size(); ++i) {
    // A parameter listed twice would be stepped twice per step().
    auto same_param = [&](const Tensor& q) { return same(q, params[i]); };
    HG_CHECK(std::none_of(params.begin(), params.begin() + static_cast<std::ptrdiff_t>(i), same_param),
             "optimizer: parameter ", i, " (shape ", params[i].shape_str(),
             ") appears twice in one parameter group; list each parameter once");
    for (size_t g = 0; g < groups_.size(); ++g) {
      HG_CHECK(std::none_of(groups_[g].params.begin(), groups_[g].params.end(), same_param), "optimizer: parameter ",
               i, " (shape ", params[i].shape_str(), ") is already in parameter group ", g,
               "; a parameter can belong to one group only");
    }
  }
  for (const Tensor& p : params) {
    HG_CHECK(p.defined() && p.requires_grad() && p.is_leaf(),
             "optimizer: parameters must be defined leaf tensors with requires_grad (use model->parameters())");
    HG_CHECK(p.dtype() == kF32 || is_16bit_float(p.dtype()), "optimizer: parameters must be f32, f16 or bf16, got ",
             p.dtype(), "; f16/bf16 get fp32 master copies automatically");
    HG_CHECK(p.device() == params[0].device(), "optimizer: a parameter group spans ", params[0].device(), " and ",
             p.device(), "; move the model to one device first");
  }
  groups_.push_back(ParamGroup(std::move(params), hyper, custom_defaults_));
  state_.emplace_back();
  steps_.emplace_back();
}

void Optimizer::zero_grad(bool set_to_none) {
  const profiler::Range profiled("optimizer.zero_grad");  // Note [Profiler]
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) {
      if (set_to_none) {
        p.impl_ptr()->grad.reset();
      } else if (p.grad().defined()) {
        p.grad().zero_();
      }
    }
  }
}

void Optimizer::set_lr(double lr) {
  HG_CHECK(lr >= 0.0, "optimizer: learning rate must be >= 0, got ", lr);
  for (ParamGroup& g : groups_) g.hyper_.lr = static_cast<float>(lr);
}

double Optimizer::lr(size_t group) const {
  HG_CHECK(group < groups_.size(), "optimizer: no parameter group ", group, " (it has ", groups_.size(), ")");
  return groups_[group].hyper_.lr;
}

void Optimizer::set_lr(size_t group, double lr) {
  HG_CHECK(group < groups_.size(), "optimizer: no parameter group ", group, " (it has ", groups_.size(), ")");
  HG_CHECK(lr >= 0.0, "optimizer: learning rate must be >= 0, got ", lr);
  groups_[group].hyper_.lr = static_cast<float>(lr);
}

void Optimizer::ensure_state(size_t g) {
  const ParamGroup& group = groups_[g];
  const Device device = group.params[0].device();
  if (!steps_[g].defined()) steps_[g] = zeros({1}, {.dtype = kI64, .device = device});
  if (!state_[g].empty()) return;
  const bool adam = group.hyper_.kind != OptimizerKind::kSgd;
  std::vector<ParamState> made;
  for (const Tensor& p : group.params) {
    ParamState s;
    if (is_16bit_float(p.dtype())) s.master = p.detach().to(kF32).contiguous().clone();
    if (custom_) {
      std::set<std::string> seen;
      for (const StateSpec& spec : state_spec(group, p)) {
        const std::string& n = spec.name;
        const bool identifier = !n.empty() && !std::isdigit(static_cast<unsigned char>(n[0])) &&
                                std::all_of(n.begin(), n.end(), [](char c) {
                                  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                                });
        HG_CHECK(identifier && n != "master" && n != "step" && n != "state1" && n != "state2",
                 "optimizer: state name '", n, "' must be a C identifier other than master, step, state1 and state2");
        HG_CHECK(seen.insert(n).second, "optimizer: state_spec names '", n, "' twice");
        s.named.emplace_back(
            n, full(spec.shape ? *spec.shape : p.sizes(), spec.fill, {.dtype = spec.dtype, .device = device}));
      }
    } else {
      if (adam || group.hyper_.momentum != 0.0f) s.state1 = zeros(p.sizes(), {.device = device});
      if (adam) s.state2 = zeros(p.sizes(), {.device = device});
    }
    made.push_back(std::move(s));
  }
  state_[g] = std::move(made);
}

void Optimizer::step(const Tensor& inv_scale, const Tensor& found_inf) {
  const profiler::Range profiled("optimizer.step");  // Note [Profiler]
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ensure_state(g);
    if (custom_) {
      custom_step(g, inv_scale, found_inf);
      continue;
    }
    std::vector<OptimizerSlot> slots;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& p = groups_[g].params[i];
      if (!p.grad().defined()) continue;  // like PyTorch: no gradient, no update
      HG_CHECK(p.is_contiguous(), "optimizer: parameter ", i, " of group ", g, " is not contiguous");
      const ParamState& s = state_[g][i];
      slots.push_back({p.detach(), p.grad().contiguous(), s.master, s.state1, s.state2});
    }
    if (slots.empty()) continue;
    ops::fused_optimizer_step(slots, groups_[g].hyper_, steps_[g], inv_scale, found_inf);
  }
}

// Note [Writing an optimizer]: the base class's part of a user-written step.
void Optimizer::custom_step(size_t g, const Tensor& inv_scale, const Tensor& found_inf) {
  const ParamGroup& group = groups_[g];
  OptimizerStep step;
  step.group_ = &group;
  step.group_index_ = g;
  step.step_ = steps_[g];
  step.found_inf_ = found_inf;
  std::vector<Tensor> masters, params16, grads_in, grads_out;
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    if (!p.grad().defined()) continue;  // like PyTorch: no gradient, no update
    HG_CHECK(p.is_contiguous(), "optimizer: parameter ", i, " of group ", g, " is not contiguous");
    HG_CHECK(p.grad().sizes() == p.sizes(), "optimizer: the gradient of parameter ", i, " of group ", g, " has shape ",
             p.grad().shape_str(), ", the parameter ", p.shape_str());
    const ParamState& s = state_[g][i];
    step.indices_.push_back(i);
    if (s.master.defined()) {
      step.params_.push_back(s.master);
      masters.push_back(s.master);
      params16.push_back(p.detach());
    } else {
      step.params_.push_back(p.detach());
    }
    const Tensor grad = p.grad().detach().contiguous();
    HG_CHECK(grad.dtype() == kF32 || is_16bit_float(grad.dtype()), "optimizer: the gradient of parameter ", i,
             " of group ", g, " is ", grad.dtype(), "; expected f32, f16 or bf16");
    if (grad.dtype() == kF32 && !inv_scale.defined()) {
      step.grads_.push_back(grad);
    } else {
      grads_in.push_back(grad);
      grads_out.push_back(empty(grad.sizes(), {.device = grad.device()}));
      step.grads_.push_back(grads_out.back());
    }
    step.state_.push_back(s.named);
  }
  if (step.indices_.empty()) return;
  if (!grads_in.empty()) {  // f32, times 1/S: one launch (written even on a skipped step: a temporary)
    Foreach unscale(2);
    const ForeachValue v = unscale.load(0);
    unscale.store(1, inv_scale.defined() ? v * unscale.inv_scale() : v);
    unscale.apply({grads_in, grads_out}, {.inv_scale = inv_scale, .masked = false});
  }
  // The counter first (one launch; not on a skipped step), so that update()
  // sees the number of the step it applies, as the fused step does.
  ops::fused_optimizer_step({}, group.hyper_, steps_[g], Tensor(), found_inf);

  // SkipMode::kCommit: snapshot what update() may write, restore it on the
  // device if found_inf is set.
  std::vector<Tensor> targets, snaps, other_targets, other_snaps;
  const bool commit = found_inf.defined() && skip_mode() == SkipMode::kCommit;
  if (commit) {
    for (const Tensor& t : step.params_) targets.push_back(t);
    for (const NamedTensors& slot_state : step.state_) {
      for (const auto& [name, t] : slot_state) {
        if (t.dtype() == kF32 || is_16bit_float(t.dtype())) {
          targets.push_back(t);
        } else {
          other_targets.push_back(t);
        }
      }
    }
    for (const Tensor& t : targets) snaps.push_back(empty(t.sizes(), {.dtype = t.dtype(), .device = t.device()}));
    Foreach copy(2);
    copy.store(1, copy.load(0));
    copy.apply({targets, snaps}, {.masked = false});
    for (const Tensor& t : other_targets) other_snaps.push_back(t.clone());
  }

  update(step);

  if (commit) {
    Foreach restore(2);
    restore.store(0, restore.select(restore.found_inf(), restore.load(1), restore.load(0)));
    restore.apply({targets, snaps}, {.found_inf = found_inf, .masked = false});
    const Tensor skip = found_inf != 0.0;
    for (size_t k = 0; k < other_targets.size(); ++k) {
      const Tensor cond = other_targets[k].dim() == 0 ? skip.view(Shape{}) : skip;  // [1] broadcasts, except to 0-dim
      other_targets[k].copy_(where(cond, other_snaps[k], other_targets[k]));
    }
  }
  // The 16-bit parameters: their masters rounded once (nothing on a skipped step).
  if (!masters.empty()) {
    Foreach refresh(2);
    refresh.store(1, refresh.load(0));
    refresh.apply({masters, params16}, {.found_inf = found_inf, .masked = true});
  }
  for (const Tensor& p : step.params_) p.bump_version();
}

const Tensor& OptimizerStep::state(size_t slot, const std::string& name) const {
  HG_CHECK(slot < state_.size(), "optimizer: no slot ", slot, " (this step has ", state_.size(), ")");
  for (const auto& [n, t] : state_[slot]) {
    if (n == name) return t;
  }
  HG_FAIL("optimizer: parameter ", indices_[slot], " of group ", group_index_, " has no state named '", name,
          "' (state_spec declares the names)");
}

std::vector<Tensor> OptimizerStep::state(const std::string& name) const {
  std::vector<Tensor> out;
  for (size_t k = 0; k < state_.size(); ++k) out.push_back(state(k, name));
  return out;
}

void OptimizerStep::apply(const Foreach& program, const std::vector<std::vector<Tensor>>& lists, bool masked) const {
  ForeachArgs args;
  args.lr = group_->hyper_.lr;
  args.schedule = group_->hyper_.schedule;
  args.step = step_;
  args.found_inf = found_inf_;
  args.masked = masked;
  program.apply(lists, args);
}

int64_t Optimizer::steps_applied(size_t group) const {
  HG_CHECK(group < groups_.size(), "optimizer: no parameter group ", group);
  return steps_[group].defined() ? steps_[group].item<int64_t>() : 0;
}

NamedTensors Optimizer::state_dict() const {
  NamedTensors out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!steps_[g].defined()) continue;
    out.emplace_back("step." + std::to_string(g), steps_[g]);
    for (size_t i = 0; i < state_[g].size(); ++i) {
      const std::string key = std::to_string(g) + "." + std::to_string(i);
      const ParamState& s = state_[g][i];
      if (s.master.defined()) out.emplace_back("master." + key, s.master);
      if (s.state1.defined()) out.emplace_back("state1." + key, s.state1);
      if (s.state2.defined()) out.emplace_back("state2." + key, s.state2);
      for (const auto& [name, t] : s.named) out.emplace_back(name + "." + key, t);
    }
  }
  return out;
}

void Optimizer::check_state_dict(const NamedTensors& state) {
  std::map<std::string, Tensor> given(state.begin(), state.end());
  HG_CHECK(given.size() == state.size(), "optimizer load_state_dict: an entry name appears twice");
  check_optimizer_state_values(state, {});  // Note [Training-state rules]
  // The targets of groups without state yet are made here (as a first step
  // would) and dropped again below, so the check sees the real shapes and
  // dtypes but leaves the optimizer as it was.
  const auto saved_state = state_;
  const auto saved_steps = steps_;
  try {
    NoGradGuard no_grad;
    auto check = [&](const std::string& name, const Tensor& target, std::optional<DType> also_accepted = std::nullopt) {
      auto it = given.find(name);
      if (!target.defined()) {
        HG_CHECK(it == given.end(), "optimizer load_state_dict: unexpected entry '", name,
                 "'; this optimizer keeps no such state (a different optimizer type or options?)");
        return;
      }
      HG_CHECK(it != given.end(), "optimizer load_state_dict: missing entry '", name,
               "'; the checkpoint was written by a different optimizer or model");
      HG_CHECK(it->second.sizes() == target.sizes(), "optimizer load_state_dict: '", name, "' has shape ",
               it->second.shape_str(), " but the optimizer expects ", target.shape_str());
      HG_CHECK(it->second.dtype() == target.dtype() || it->second.dtype() == also_accepted,
               "optimizer load_state_dict: '", name, "' has dtype ",
               it->second.dtype(), " but the optimizer keeps it in ", target.dtype(),
               "; the checkpoint was written by a different optimizer setup");
      given.erase(it);
    };
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (!given.count("step." + std::to_string(g))) continue;
      ensure_state(g);
      // The counter is i64; checkpoints written before it was hold an f32
      // counter (exact below 2^24, the only values one could hold), which
      // load_state_dict converts. Anything else is refused here.
      const Tensor& saved_step = given.at("step." + std::to_string(g));
      HG_CHECK(saved_step.dtype() == kI64 || saved_step.dtype() == kF32, "optimizer load_state_dict: 'step.", g,
               "' is ", saved_step.dtype(), "; the step counter must be i64 (or f32 from an older checkpoint)");
      check("step." + std::to_string(g), steps_[g], kF32);
      for (size_t i = 0; i < state_[g].size(); ++i) {
        const std::string key = std::to_string(g) + "." + std::to_string(i);
        check("master." + key, state_[g][i].master);
        check("state1." + key, state_[g][i].state1);
        check("state2." + key, state_[g][i].state2);
        for (const auto& [name, t] : state_[g][i].named) check(name + "." + key, t);
      }
    }
    HG_CHECK(given.empty(), "optimizer load_state_dict: unexpected entry '", given.begin()->first,
             "'; this optimizer has no such group or parameter (different parameter groups or optimizer type)");
  } catch (...) {
    state_ = saved_state;
    steps_ = saved_steps;
    throw;
  }
  state_ = saved_state;
  steps_ = saved_steps;
}

void Optimizer::load_state_dict(const NamedTensors& state) {
  check_state_dict(state);
  std::map<std::string, Tensor> given(state.begin(), state.end());
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!given.count("step." + std::to_string(g))) {
      // The state replaces the whole optimizer state: a group it has nothing
      // for (a checkpoint from before the first step) starts afresh.
      steps_[g] = Tensor();
      state_[g].clear();
      continue;
    }
    ensure_state(g);
    auto load = [&](const std::string& name, Tensor& target) {
      if (target.defined()) target.copy_(given.at(name));
    };
    // An f32 counter from an older checkpoint converts (check_state_dict).
    load("step." + std::to_string(g), steps_[g]);
    for (size_t i = 0; i < state_[g].size(); ++i) {
      const std::string key = std::to_string(g) + "." + std::to_string(i);
      load("master." + key, state_[g][i].master);
      load("state1." + key, state_[g][i].state1);
      load("state2." + key, state_[g][i].state2);
      for (auto& [name, t] : state_[g][i].named) load(name + "." + key, t);
    }
  }
}

namespace {
OptimizerHyper sgd_hyper(const SGDOptions& o) {
  HG_CHECK(o.momentum >= 0.0 && o.weight_decay >= 0.0, "SGD: momentum and weight_decay must be >= 0");
  HG_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
           "SGD: nesterov needs momentum > 0 and dampening = 0");
  OptimizerHyper h;
  h.kind = OptimizerKind::kSgd;
  h.lr = static_cast<float>(o.lr);
  h.momentum = static_cast<float>(o.momentum);
  h.dampening = static_cast<float>(o.dampening);
  h.weight_decay = static_cast<float>(o.weight_decay);
  h.nesterov = o.nesterov;
  return h;
}

OptimizerHyper adam_hyper(OptimizerKind kind, double lr, double b1, double b2, double eps, double wd) {
  HG_CHECK(b1 >= 0.0 && b1 < 1.0 && b2 >= 0.0 && b2 < 1.0, "Adam: betas must be in [0, 1), got ", b1, ", ", b2);
  HG_CHECK(eps >= 0.0 && wd >= 0.0, "Adam: eps and weight_decay must be >= 0");
  OptimizerHyper h;
  h.kind = kind;
  h.lr = static_cast<float>(lr);
  h.beta1 = static_cast<float>(b1);
  h.beta2 = static_cast<float>(b2);
  h.eps = static_cast<float>(eps);
  h.weight_decay = static_cast<float>(wd);
  return h;
}

OptimizerHyper adam_hyper(const AdamOptions& o) {
  return adam_hyper(OptimizerKind::kAdam, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
}

OptimizerHyper adam_hyper(const AdamWOptions& o) {
  return adam_hyper(OptimizerKind::kAdamW, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
}

void check_group_lr(double lr) { HG_CHECK(lr >= 0.0, "optimizer: learning rate must be >= 0, got ", lr); }
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params), sgd_hyper(o)), defaults_(o) {}

void SGD::add_param_group(std::vector<Tensor> params, const SGDOptions& o) {
  check_group_lr(o.lr);
  add_hyper_group(std::move(params), sgd_hyper(o));
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Optimizer(std::move(params), adam_hyper(o)), defaults_(o) {}

void Adam::add_param_group(std::vector<Tensor> params, const AdamOptions& o) {
  check_group_lr(o.lr);
  add_hyper_group(std::move(params), adam_hyper(o));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o) : Optimizer(std::move(params), adam_hyper(o)), defaults_(o) {}

void AdamW::add_param_group(std::vector<Tensor> params, const AdamWOptions& o) {
  check_group_lr(o.lr);
  add_hyper_group(std::move(params), adam_hyper(o));
}

WeightDecayGroups param_groups_for_weight_decay(const std::vector<Tensor>& params) {
  WeightDecayGroups out;
  for (const Tensor& p : params) (p.dim() >= 2 ? out.decay : out.no_decay).push_back(p);
  return out;
}

}  // namespace hg::optim

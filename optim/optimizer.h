// Optimizers: SGD (momentum, nesterov, weight decay), Adam, AdamW — with fp32
// master weights for f16/bf16 parameters (Note [Fused optimizer step] in
// kernels/optimizer/optimizer.h): one fused pass per step updates masters, moments and
// the rounded 16-bit parameters; on CUDA one multi-tensor launch per dtype
// pair. step() takes the GradScaler's inv_scale and found_inf device tensors
// and then skips itself on the device, with no host sync.
//
//   hg::optim::AdamW opt(model->parameters(), {.lr = 1e-3});
//   opt.zero_grad();  loss.backward();  opt.step();
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/optimizer/optimizer.h"
#include "optim/foreach.h"

namespace hg::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): SGDOptions{}.set_nesterov(...).set_lr(...).
  // clang-format off
  constexpr SGDOptions& set_lr(double v) { lr = v; return *this; }
  constexpr SGDOptions& set_momentum(double v) { momentum = v; return *this; }
  constexpr SGDOptions& set_dampening(double v) { dampening = v; return *this; }
  constexpr SGDOptions& set_weight_decay(double v) { weight_decay = v; return *this; }
  constexpr SGDOptions& set_nesterov(bool v) { nesterov = v; return *this; }
  // clang-format on
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2, added to the gradient
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): AdamOptions{}.set_weight_decay(...).set_lr(...).
  // clang-format off
  constexpr AdamOptions& set_lr(double v) { lr = v; return *this; }
  constexpr AdamOptions& set_beta1(double v) { beta1 = v; return *this; }
  constexpr AdamOptions& set_beta2(double v) { beta2 = v; return *this; }
  constexpr AdamOptions& set_eps(double v) { eps = v; return *this; }
  constexpr AdamOptions& set_weight_decay(double v) { weight_decay = v; return *this; }
  constexpr AdamOptions& set_betas(double b1, double b2) { beta1 = b1; beta2 = b2; return *this; }
  // clang-format on
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): AdamWOptions{}.set_weight_decay(...).set_lr(...).
  // clang-format off
  constexpr AdamWOptions& set_lr(double v) { lr = v; return *this; }
  constexpr AdamWOptions& set_beta1(double v) { beta1 = v; return *this; }
  constexpr AdamWOptions& set_beta2(double v) { beta2 = v; return *this; }
  constexpr AdamWOptions& set_eps(double v) { eps = v; return *this; }
  constexpr AdamWOptions& set_weight_decay(double v) { weight_decay = v; return *this; }
  constexpr AdamWOptions& set_betas(double b1, double b2) { beta1 = b1; beta2 = b2; return *this; }
  // clang-format on
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// The named hyperparameters of a user-written optimizer ("beta1" -> 0.9).
using OptimizerOptions = std::map<std::string, double>;

class OptimizerStep;

// Note [Writing an optimizer]
// A user-written optimizer derives from Optimizer, calls the protected
// constructor Optimizer(params, lr, options) and overrides
//   state_spec(group, param)  the named state tensors of one parameter
//                             (StateSpec: name, dtype, shape, fill);
//   update(step)              one step over the parameters of one group that
//                             have a gradient (OptimizerStep below);
//   skip_mode()               how a step skipped by a GradScaler is made a
//                             no-op (SkipMode).
// The base class keeps the rest, as for SGD/Adam/AdamW: fp32 masters for
// f16/bf16 parameters (update sees f32 parameters and f32 unscaled
// gradients; the 16-bit parameter is rewritten from its master once, after
// update), parameter groups with per-group options, zero_grad, the i64
// device step counter (advanced before update unless found_inf is set),
// LR schedules (Foreach::lr() is the scheduled lr of this step, read on the
// device), and state_dict/load_state_dict with entries "step.<g>",
// "master.<g>.<i>" and "<state name>.<g>.<i>". docs/optim.md has the worked
// example (Lion).
class LRScheduler;
namespace detail {
struct ParamGroupAccess;
}  // namespace detail

class Optimizer {
 public:
  // A group's parameters and options. A built-in optimizer's options are the
  // typed ones it was given (add_param_group(params, AdamWOptions{...})),
  // kept in the kernel's form, which is not part of the API; every optimizer
  // has lr() (set with Optimizer::set_lr(g, lr)).
  class ParamGroup {
   public:
    std::vector<Tensor> params;
    OptimizerOptions options;  // a user-written optimizer's named per-group options
    // options.at(name) with an hg::Error naming the option when it is missing.
    double option(const std::string& name) const;
    double lr() const { return hyper_.lr; }

   private:
    friend class Optimizer;
    friend class OptimizerStep;
    friend class LRScheduler;
    friend struct detail::ParamGroupAccess;
    ParamGroup(std::vector<Tensor> p, const OptimizerHyper& hyper, OptimizerOptions o)
        : params(std::move(p)), options(std::move(o)), hyper_(hyper) {}
    OptimizerHyper hyper_;  // the kernel's per-group hyperparameters (lr, decay, betas, schedule)
  };

  // How a user-written optimizer's step is skipped when found_inf is set.
  //   kCommit        the base class snapshots every f32 parameter (master)
  //                  and every state tensor before update() and restores
  //                  them on the device afterwards (where(found_inf, old,
  //                  new), one multi-tensor launch): any update code is safe.
  //                  Costs one copy and one select pass over the state.
  //   kMaskedWrites  the optimizer promises that update() writes parameters
  //                  and state only through OptimizerStep::apply with
  //                  masked = true (which writes nothing when found_inf is
  //                  set): no extra pass. Lion and Muon use this.
  enum class SkipMode : uint8_t { kCommit, kMaskedWrites };

  // One state tensor of one parameter.
  struct StateSpec {
    std::string name;  // a C identifier; not "master", "step", "state1", "state2"
    DType dtype = kF32;
    std::optional<Shape> shape{};  // none: the parameter's shape
    double fill = 0.0;             // the initial value of every element
  };

  virtual ~Optimizer() = default;

  // A group with the optimizer's defaults (its constructor's options). The
  // built-in optimizers add a typed overload, as libtorch's
  // OptimizerParamGroup: opt.add_param_group(params, AdamWOptions{...}), or
  // opt.add_param_group(params, opt.defaults().set_weight_decay(0.0)) to
  // change one field of the constructor's options.
  void add_param_group(std::vector<Tensor> params);
  // A user-written optimizer's group: the defaults with `overrides` replacing
  // some of them ("lr" sets the group's lr). SGD, Adam and AdamW refuse it
  // (they take their typed options).
  void add_param_group(std::vector<Tensor> params, const OptimizerOptions& overrides);
  std::vector<ParamGroup>& param_groups() { return groups_; }

  // Sets every parameter's gradient to none (or zero in place).
  void zero_grad(bool set_to_none = true);
  // One step over all parameters that have a gradient. inv_scale multiplies
  // gradients; found_inf != 0 skips the step on the device (both f32 [1]).
  void step(const Tensor& inv_scale = Tensor(), const Tensor& found_inf = Tensor());

  double lr() const { return groups_.empty() ? defaults_.lr : groups_[0].hyper_.lr; }
  double lr(size_t group) const;
  void set_lr(double lr);                // every group
  void set_lr(size_t group, double lr);  // one group (LR schedulers)
  // Applied steps of group g (reads the device counter: a sync on CUDA).
  int64_t steps_applied(size_t group = 0) const;

  // Set by amp::GradScaler::step: this optimizer's steps may be skipped on
  // the device, so LR schedules with ScheduleClock::kAuto count applied steps.
  bool stepped_by_scaler() const { return stepped_by_scaler_; }
  void set_stepped_by_scaler() { stepped_by_scaler_ = true; }

  // "step.<g>", "master.<g>.<i>", "state1.<g>.<i>", "state2.<g>.<i>" (and a
  // user-written optimizer's "<state name>.<g>.<i>").
  NamedTensors state_dict() const;
  // Atomic: check_state_dict runs first, so a state that does not fit throws
  // hg::Error and leaves the optimizer exactly as it was.
  void load_state_dict(const NamedTensors& state);
  // Throws hg::Error unless every entry of `state` fits this optimizer (names,
  // shapes, dtypes; nothing unexpected); changes nothing either way.
  void check_state_dict(const NamedTensors& state);

 protected:
  Optimizer(std::vector<Tensor> params, OptimizerHyper defaults);
  // A user-written optimizer (Note [Writing an optimizer]): lr >= 0 and the
  // named defaults of every group.
  Optimizer(std::vector<Tensor> params, double lr, OptimizerOptions defaults);
  // A built-in optimizer's typed group: the kernel-level hyperparameters.
  void add_hyper_group(std::vector<Tensor> params, OptimizerHyper hyper);

  virtual std::vector<StateSpec> state_spec(const ParamGroup& group, const Tensor& param) const;
  virtual void update(OptimizerStep& step);
  virtual SkipMode skip_mode() const { return SkipMode::kCommit; }

 private:
  struct ParamState {
    Tensor master, state1, state2;
    NamedTensors named;  // a user-written optimizer's state_spec
  };
  void ensure_state(size_t g);
  void custom_step(size_t g, const Tensor& inv_scale, const Tensor& found_inf);

  bool custom_ = false;
  OptimizerOptions custom_defaults_;
  OptimizerHyper defaults_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
  std::vector<Tensor> steps_;                   // [group], i64 [1] on the group's device
  bool stepped_by_scaler_ = false;
};

// What update() gets: the parameters of one group that have a gradient, as
// parallel lists (slot k is parameter index(k) of the group).
class OptimizerStep {
 public:
  const Optimizer::ParamGroup& group() const { return *group_; }
  size_t group_index() const { return group_index_; }
  size_t size() const { return params_.size(); }
  size_t index(size_t slot) const { return indices_.at(slot); }
  // f32 parameters to update in place: the fp32 master of a 16-bit parameter
  // or the f32 parameter itself (detached).
  const std::vector<Tensor>& params() const { return params_; }
  // f32 gradients, already multiplied by inv_scale. Read-only (an f32
  // gradient without a scale is the parameter's .grad itself).
  const std::vector<Tensor>& grads() const { return grads_; }
  // The state tensors named `name` over all slots (each slot must have one).
  std::vector<Tensor> state(const std::string& name) const;
  // The state tensor `name` of one slot.
  const Tensor& state(size_t slot, const std::string& name) const;
  // The i64 [1] device step counter, already counting this step (1 for the
  // first applied step); unchanged by a skipped step.
  const Tensor& step() const { return step_; }
  // f32 [1], nonzero when this step is to be skipped; undefined without a scaler.
  const Tensor& found_inf() const { return found_inf_; }
  double option(const std::string& name) const { return group_->option(name); }
  // Runs a Foreach program with this step's clock: the group's lr and device
  // schedule, the step counter and found_inf. masked = true: nothing is
  // written on a skipped step (the way to write parameters and state under
  // SkipMode::kMaskedWrites); false: for temporaries.
  void apply(const Foreach& program, const std::vector<std::vector<Tensor>>& lists, bool masked = true) const;

 private:
  friend class Optimizer;
  const Optimizer::ParamGroup* group_ = nullptr;
  size_t group_index_ = 0;
  std::vector<size_t> indices_;
  std::vector<Tensor> params_, grads_;
  std::vector<NamedTensors> state_;  // [slot]
  Tensor step_, found_inf_;
};

// The built-in optimizers. add_param_group(params, options) gives a group
// its own typed options, every field as given (libtorch's rule: an unset
// field is the struct's default, not the constructor's; start from
// defaults() to keep those). The kernel-level OptimizerHyper is not accepted.
class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  // The optimizer's defaults (the named-options overload of Optimizer is hidden: a typed option or nothing).
  void add_param_group(std::vector<Tensor> params) { Optimizer::add_param_group(std::move(params)); }
  void add_param_group(std::vector<Tensor> params, const SGDOptions& options);
  // The constructor's options.
  SGDOptions defaults() const { return defaults_; }

 private:
  SGDOptions defaults_;
};

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  // The optimizer's defaults (the named-options overload of Optimizer is hidden: a typed option or nothing).
  void add_param_group(std::vector<Tensor> params) { Optimizer::add_param_group(std::move(params)); }
  void add_param_group(std::vector<Tensor> params, const AdamOptions& options);
  AdamOptions defaults() const { return defaults_; }

 private:
  AdamOptions defaults_;
};

class AdamW : public Optimizer {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  // The optimizer's defaults (the named-options overload of Optimizer is hidden: a typed option or nothing).
  void add_param_group(std::vector<Tensor> params) { Optimizer::add_param_group(std::move(params)); }
  void add_param_group(std::vector<Tensor> params, const AdamWOptions& options);
  AdamWOptions defaults() const { return defaults_; }

 private:
  AdamWOptions defaults_;
};

// The nanoGPT / transformers rule for "no weight decay on biases and norms":
// parameters with 2 or more dims (weights of Linear, Embedding, Conv) decay,
// the rest (biases, LayerNorm/RMSNorm gains) do not. In the given order.
//   auto [decay, no_decay] = hg::optim::param_groups_for_weight_decay(model->parameters());
//   hg::optim::AdamW opt(decay, {.lr = 3e-4, .weight_decay = 0.1});
//   opt.add_param_group(no_decay, opt.defaults().set_weight_decay(0.0));
struct WeightDecayGroups {
  std::vector<Tensor> decay, no_decay;
};
WeightDecayGroups param_groups_for_weight_decay(const std::vector<Tensor>& params);

namespace detail {
// The kernel-level hyperparameters of a group (kernels/optimizer/optimizer.h),
// for the library's tests; not part of the API.
struct ParamGroupAccess {
  static OptimizerHyper& hyper(Optimizer::ParamGroup& group) { return group.hyper_; }
};
}  // namespace detail

}  // namespace hg::optim

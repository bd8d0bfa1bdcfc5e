// Optimizers: SGD (momentum, nesterov, weight decay), Adam, AdamW — with fp32
// master weights for f16/bf16 parameters (Note [Fused optimizer step] in
// kernels/optimizer.h): one fused pass per step updates masters, moments and
// the rounded 16-bit parameters; on CUDA one multi-tensor launch per dtype
// pair. step() takes the GradScaler's inv_scale and found_inf device tensors
// and then skips itself on the device, with no host sync.
//
//   hg::optim::AdamW opt(model->parameters(), {.lr = 1e-3});
//   opt.zero_grad();  loss.backward();  opt.step();
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/optimizer.h"

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

class Optimizer {
 public:
  struct ParamGroup {
    std::vector<Tensor> params;
    OptimizerHyper hyper;  // per-group options (lr, decay, betas, ...)
  };

  virtual ~Optimizer() = default;

  // A group with its own options (defaults: the optimizer's).
  void add_param_group(std::vector<Tensor> params);
  void add_param_group(std::vector<Tensor> params, OptimizerHyper hyper);
  std::vector<ParamGroup>& param_groups() { return groups_; }

  // Sets every parameter's gradient to none (or zero in place).
  void zero_grad(bool set_to_none = true);
  // One step over all parameters that have a gradient. inv_scale multiplies
  // gradients; found_inf != 0 skips the step on the device (both f32 [1]).
  void step(const Tensor& inv_scale = Tensor(), const Tensor& found_inf = Tensor());

  double lr() const { return groups_.empty() ? defaults_.lr : groups_[0].hyper.lr; }
  double lr(size_t group) const;
  void set_lr(double lr);                // every group
  void set_lr(size_t group, double lr);  // one group (LR schedulers)
  // Applied steps of group g (reads the device counter: a sync on CUDA).
  int64_t steps_applied(size_t group = 0) const;

  // Set by amp::GradScaler::step: this optimizer's steps may be skipped on
  // the device, so LR schedules with ScheduleClock::kAuto count applied steps.
  bool stepped_by_scaler() const { return stepped_by_scaler_; }
  void set_stepped_by_scaler() { stepped_by_scaler_ = true; }

  // "step.<g>", "master.<g>.<i>", "state1.<g>.<i>", "state2.<g>.<i>".
  NamedTensors state_dict() const;
  // Atomic: check_state_dict runs first, so a state that does not fit throws
  // hg::Error and leaves the optimizer exactly as it was.
  void load_state_dict(const NamedTensors& state);
  // Throws hg::Error unless every entry of `state` fits this optimizer (names,
  // shapes, dtypes; nothing unexpected); changes nothing either way.
  void check_state_dict(const NamedTensors& state);

 protected:
  Optimizer(std::vector<Tensor> params, OptimizerHyper defaults);

 private:
  struct ParamState {
    Tensor master, state1, state2;
  };
  void ensure_state(size_t g);

  OptimizerHyper defaults_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
  std::vector<Tensor> steps_;                   // [group], i64 [1] on the group's device
  bool stepped_by_scaler_ = false;
};

class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
};

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
};

class AdamW : public Optimizer {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
};

}  // namespace hg::optim

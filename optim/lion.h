// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"):
// a sign update with one state tensor per parameter, written against the
// public optimizer API (Note [Writing an optimizer] in optim/optimizer.h;
// docs/optim.md walks through it). Per element, with lr the scheduled lr:
//   c  = beta1 * m + (1 - beta1) * g
//   p  = p * (1 - lr * weight_decay) - lr * sign(c)
//   m  = beta2 * m + (1 - beta2) * g
// One Foreach launch per group; a GradScaler's skipped step writes nothing.
#pragma once

#include <vector>

#include "optim/optimizer.h"

namespace hg::optim {

struct LionOptions {
  double lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double weight_decay = 0.0;
};

class Lion : public Optimizer {
 public:
  explicit Lion(std::vector<Tensor> params, LionOptions options = {});
  // The optimizer's defaults (the named-options overload of Optimizer is hidden: a typed option or nothing).
  void add_param_group(std::vector<Tensor> params) { Optimizer::add_param_group(std::move(params)); }
  // A group with its own options, every field as given (start from
  // defaults() to keep the constructor's).
  void add_param_group(std::vector<Tensor> params, const LionOptions& options);
  LionOptions defaults() const { return defaults_; }

 protected:
  std::vector<StateSpec> state_spec(const ParamGroup& group, const Tensor& param) const override;
  void update(OptimizerStep& step) override;
  SkipMode skip_mode() const override { return SkipMode::kMaskedWrites; }

 private:
  LionOptions defaults_;
};

}  // namespace hg::optim

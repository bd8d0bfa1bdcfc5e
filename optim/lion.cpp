// Lion, written only against the public optimizer API (optim/optimizer.h).
#include "optim/lion.h"

#include <utility>
#include <vector>

#include "core/error.h"

namespace hg::optim {

namespace {
OptimizerOptions lion_options(const LionOptions& o) {
  HG_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0, "Lion: betas must be in [0, 1), got ",
           o.beta1, ", ", o.beta2);
  HG_CHECK(o.weight_decay >= 0.0, "Lion: weight_decay must be >= 0, got ", o.weight_decay);
  return {{"beta1", o.beta1}, {"beta2", o.beta2}, {"weight_decay", o.weight_decay}};
}
}  // namespace

Lion::Lion(std::vector<Tensor> params, LionOptions o)
    : Optimizer(std::move(params), o.lr, lion_options(o)), defaults_(o) {}

void Lion::add_param_group(std::vector<Tensor> params, const LionOptions& o) {
  OptimizerOptions overrides = lion_options(o);
  overrides["lr"] = o.lr;
  Optimizer::add_param_group(std::move(params), overrides);
}

std::vector<Optimizer::StateSpec> Lion::state_spec(const ParamGroup& /*group*/, const Tensor& /*param*/) const {
  return {{.name = "exp_avg"}};  // f32, the parameter's shape, zeros
}

void Lion::update(OptimizerStep& step) {
  const double beta1 = step.option("beta1"), beta2 = step.option("beta2"), wd = step.option("weight_decay");
  Foreach f(3);  // parameter (f32), gradient (f32), exp_avg
  const ForeachValue p = f.load(0), g = f.load(1), m = f.load(2), lr = f.lr();
  const ForeachValue c = m * beta1 + g * (1.0 - beta1);
  f.store(0, p * (1.0 - lr * wd) - lr * sign(c));
  f.store(2, m * beta2 + g * (1.0 - beta2));
  step.apply(f, {step.params(), step.grads(), step.state("exp_avg")});  // masked: nothing on a skipped step
}

}  // namespace hg::optim

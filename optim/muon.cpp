// Muon, written only against the public optimizer API (optim/optimizer.h).
#include "optim/muon.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "core/error.h"

namespace hg::optim {

namespace {
bool muon_param(const Optimizer::ParamGroup& group, const Tensor& p) {
  return group.option("use_muon") != 0.0 && p.dim() == 2;
}
}  // namespace

namespace {
OptimizerOptions muon_options(const MuonOptions& o) {
  HG_CHECK(o.momentum >= 0.0 && o.momentum < 1.0, "Muon: momentum must be in [0, 1), got ", o.momentum);
  HG_CHECK(o.ns_steps >= 1, "Muon: ns_steps must be >= 1, got ", o.ns_steps);
  HG_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0, "Muon: AdamW betas must be in [0, 1)");
  HG_CHECK(o.weight_decay >= 0.0 && o.eps >= 0.0 && o.adamw_lr_scale >= 0.0,
           "Muon: weight_decay, eps and adamw_lr_scale must be >= 0");
  return {{"momentum", o.momentum},
          {"nesterov", o.nesterov ? 1.0 : 0.0},
          {"ns_steps", static_cast<double>(o.ns_steps)},
          {"ns_bf16", o.ns_bf16 ? 1.0 : 0.0},
          {"weight_decay", o.weight_decay},
          {"adamw_lr_scale", o.adamw_lr_scale},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"use_muon", o.use_muon ? 1.0 : 0.0}};
}
}  // namespace

Muon::Muon(std::vector<Tensor> params, MuonOptions o)
    : Optimizer(std::move(params), o.lr, muon_options(o)), defaults_(o) {}

void Muon::add_param_group(std::vector<Tensor> params, const MuonOptions& o) {
  OptimizerOptions overrides = muon_options(o);
  overrides["lr"] = o.lr;
  Optimizer::add_param_group(std::move(params), overrides);
}

std::vector<Optimizer::StateSpec> Muon::state_spec(const ParamGroup& group, const Tensor& param) const {
  if (muon_param(group, param)) return {{.name = "momentum_buffer"}};
  return {{.name = "exp_avg"}, {.name = "exp_avg_sq"}};
}

Tensor newton_schulz5(const Tensor& g, int64_t steps, bool bf16) {
  HG_CHECK(g.dim() == 2, "newton_schulz5: expects a 2-D tensor, got ", g.shape_str());
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  Tensor x = g.to(bf16 ? kBF16 : kF32);
  const bool tall = g.size(0) > g.size(1);
  if (tall) x = x.t();
  x = div(x, add(norm(x), 1e-7));
  for (int64_t k = 0; k < steps; ++k) {
    const Tensor A = matmul(x, x.t());
    const Tensor B = add(mul(A, b), mul(matmul(A, A), c));
    x = add(mul(x, a), matmul(B, x));
  }
  if (tall) x = x.t();
  return x.to(kF32).contiguous();
}

void Muon::update(OptimizerStep& step) {
  const Optimizer::ParamGroup& group = step.group();
  const double momentum = step.option("momentum"), wd = step.option("weight_decay");
  const bool nesterov = step.option("nesterov") != 0.0, bf16 = step.option("ns_bf16") != 0.0;
  const auto ns_steps = static_cast<int64_t>(step.option("ns_steps"));
  std::vector<Tensor> mp, mg, mb, ap, ag, am, av;
  for (size_t k = 0; k < step.size(); ++k) {
    if (muon_param(group, group.params[step.index(k)])) {
      mp.push_back(step.params()[k]);
      mg.push_back(step.grads()[k]);
      mb.push_back(step.state(k, "momentum_buffer"));
    } else {
      ap.push_back(step.params()[k]);
      ag.push_back(step.grads()[k]);
      am.push_back(step.state(k, "exp_avg"));
      av.push_back(step.state(k, "exp_avg_sq"));
    }
  }
  if (!mp.empty()) {
    Foreach momentum_update(2);  // b = lerp(b, g, 1 - momentum): masked (state)
    momentum_update.store(1, lerp(momentum_update.load(1), momentum_update.load(0), 1.0 - momentum));
    step.apply(momentum_update, {mg, mb});
    std::vector<Tensor> us;
    for (const Tensor& g : mg) us.push_back(empty(g.sizes(), {.device = g.device()}));
    Foreach nesterov_update(3);  // u: a temporary, written on every step
    const ForeachValue g = nesterov_update.load(0), buf = nesterov_update.load(1);
    nesterov_update.store(2, nesterov ? lerp(g, buf, momentum) : buf);
    step.apply(nesterov_update, {mg, mb, us}, /*masked=*/false);
    // One masked launch per distinct shape scale sqrt(max(1, rows / cols)).
    std::map<double, std::vector<std::vector<Tensor>>> by_scale;
    for (size_t k = 0; k < mp.size(); ++k) {
      const double scale =
          std::sqrt(std::max(1.0, static_cast<double>(mp[k].size(0)) / static_cast<double>(mp[k].size(1))));
      auto& lists = by_scale[scale];
      if (lists.empty()) lists.resize(2);
      lists[0].push_back(mp[k]);
      lists[1].push_back(newton_schulz5(us[k], ns_steps, bf16));
    }
    for (const auto& [scale, lists] : by_scale) {
      Foreach apply_update(2);
      const ForeachValue p = apply_update.load(0), o = apply_update.load(1), lr = apply_update.lr();
      apply_update.store(0, p * (1.0 - lr * wd) - (lr * scale) * o);
      step.apply(apply_update, lists);
    }
  }
  if (!ap.empty()) {
    const double beta1 = step.option("beta1"), beta2 = step.option("beta2"), eps = step.option("eps");
    const double lr_scale = step.option("use_muon") != 0.0 ? step.option("adamw_lr_scale") : 1.0;
    Foreach adamw(4);  // p, g, m, v: AdamW as torch.optim.AdamW computes it
    const ForeachValue p0 = adamw.load(0), g = adamw.load(1), m0 = adamw.load(2), v0 = adamw.load(3);
    const ForeachValue lr = adamw.lr() * lr_scale;
    const ForeachValue p = p0 * (1.0 - lr * wd);
    const ForeachValue m = lerp(m0, g, 1.0 - beta1);
    const ForeachValue v = v0 * beta2 + (g * g) * (1.0 - beta2);
    const ForeachValue denom = sqrt(v) / sqrt(adamw.bias_correction(beta2)) + eps;
    adamw.store(0, p - (lr / adamw.bias_correction(beta1)) * (m / denom));
    adamw.store(2, m);
    adamw.store(3, v);
    step.apply(adamw, {ap, ag, am, av});
  }
}

}  // namespace hg::optim

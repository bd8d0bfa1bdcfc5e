#include "optim/make_optimizer.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "optim/lion.h"
#include "optim/muon.h"

namespace hg::optim {

namespace {
bool is_embedding_or_head(const std::string& name) {
  for (const char* key : {"wte", "wpe", "embed", "lm_head"}) {
    if (name.find(key) != std::string::npos) return true;
  }
  return false;
}
}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const std::string& kind,
                                          const std::vector<std::pair<std::string, Tensor>>& named_params, double lr,
                                          double weight_decay, double beta2) {
  HG_CHECK(kind == "adamw" || kind == "lion" || kind == "muon", "make_optimizer: unknown optimizer '", kind,
           "'; choose adamw, lion or muon");
  std::vector<Tensor> matrices, hidden, special, rest;
  for (const auto& [name, p] : named_params) {
    (p.dim() >= 2 ? matrices : rest).push_back(p);
    if (p.dim() == 2 && !is_embedding_or_head(name)) {
      hidden.push_back(p);
    } else if (p.dim() >= 2) {
      special.push_back(p);
    }
  }
  if (kind == "adamw" || kind == "lion") {
    std::unique_ptr<Optimizer> opt;
    std::vector<Tensor> first = matrices.empty() ? rest : matrices;
    const double decay = matrices.empty() ? 0.0 : weight_decay;
    if (kind == "adamw") {
      auto adamw =
          std::make_unique<AdamW>(first, AdamWOptions{}.set_lr(lr).set_betas(0.9, beta2).set_weight_decay(decay));
      if (!matrices.empty() && !rest.empty()) adamw->add_param_group(rest, adamw->defaults().set_weight_decay(0.0));
      opt = std::move(adamw);
    } else {
      auto lion = std::make_unique<Lion>(first, LionOptions{.lr = lr / 3.0, .weight_decay = 3.0 * decay});
      LionOptions no_decay = lion->defaults();
      no_decay.weight_decay = 0.0;
      if (!matrices.empty() && !rest.empty()) lion->add_param_group(rest, no_decay);
      opt = std::move(lion);
    }
    return opt;
  }
  // muon: the hidden matrices first (group 0), then AdamW groups.
  std::vector<Tensor> first = !hidden.empty() ? hidden : (!special.empty() ? special : rest);
  auto opt = std::make_unique<Muon>(first, MuonOptions{.lr = 20.0 * lr, .ns_bf16 = true});
  auto adamw_group = [&](const std::vector<Tensor>& params, double decay) {
    if (params.empty()) return;
    MuonOptions adamw = opt->defaults();
    adamw.lr = lr;
    adamw.use_muon = false;
    adamw.weight_decay = decay;
    opt->add_param_group(params, adamw);
  };
  if (hidden.empty()) {
    // No hidden matrix: group 0 holds the first AdamW group's parameters.
    opt->param_groups()[0].options["use_muon"] = 0.0;
    opt->param_groups()[0].options["weight_decay"] = special.empty() ? 0.0 : weight_decay;
    opt->set_lr(0, lr);
    if (!special.empty()) adamw_group(rest, 0.0);
  } else {
    adamw_group(special, weight_decay);
    adamw_group(rest, 0.0);
  }
  return opt;
}

}  // namespace hg::optim

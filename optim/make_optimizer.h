// make_optimizer: AdamW, Lion or Muon by name over a model's named
// parameters, with the usual grouping (hg-train's --optimizer).
//   adamw  AdamW(lr, betas (0.9, beta2)); matrices (dim >= 2) decay by
//          weight_decay, the rest (biases, norms) do not
//   lion   Lion with lr / 3 and 3 x weight_decay (the paper's advice: Lion's
//          sign update is larger than AdamW's), betas (0.9, 0.99); the same
//          decay split
//   muon   Muon (lr 20 x lr, momentum 0.95, nesterov, 5 Newton–Schulz steps
//          in bf16) for the hidden matrices; AdamW (lr, betas (0.9, 0.95))
//          with use_muon = 0 for embeddings and output heads (names holding
//          "wte", "wpe", "embed" or "lm_head"; decay) and for every other
//          parameter (no decay)
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace hg::optim {

std::unique_ptr<Optimizer> make_optimizer(const std::string& kind,
                                          const std::vector<std::pair<std::string, Tensor>>& named_params, double lr,
                                          double weight_decay, double beta2 = 0.999);

}  // namespace hg::optim

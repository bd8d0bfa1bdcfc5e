// Muon (Jordan et al. 2024, as in modded-nanogpt): momentum, then the update
// of each 2-D parameter orthogonalised by a quintic Newton–Schulz iteration;
// AdamW for the other parameters. Written against the public optimizer API
// (Note [Writing an optimizer] in optim/optimizer.h).
//
// 2-D parameter p (rows x cols), gradient g, momentum buffer b:
//   b = lerp(b, g, 1 - momentum)                 (= momentum b + (1 - momentum) g)
//   u = nesterov ? lerp(g, b, momentum) : b
//   O = newton_schulz5(u, ns_steps)              (~ U V^T of u = U S V^T)
//   p = p * (1 - lr * weight_decay) - lr * sqrt(max(1, rows / cols)) * O
// newton_schulz5: X = u / (||u||_F + 1e-7), transposed to wide if tall, then
// ns_steps times  A = X X^T;  B = b A + c A A;  X = a X + B X  with
// (a, b, c) = (3.4445, -4.7750, 2.0315); in bf16 when ns_bf16 is set (as in
// modded-nanogpt), else f32.
// Other parameters (and every parameter of a group with use_muon = 0): AdamW
// with beta1, beta2, eps, weight_decay; its lr is the group's lr times
// adamw_lr_scale in a use_muon group, the group's lr otherwise. Give
// embeddings and output heads their own group with use_muon = 0, as
// modded-nanogpt does.
// Skipped steps (GradScaler): every write to parameters and state is a
// masked Foreach launch (SkipMode::kMaskedWrites); the Newton–Schulz matmuls
// only make temporaries. No host sync.
#pragma once

#include <cstdint>
#include <vector>

#include "optim/optimizer.h"

namespace hg::optim {

struct MuonOptions {
  double lr = 0.02;
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  bool ns_bf16 = false;
  double weight_decay = 0.0;
  double adamw_lr_scale = 0.015;                 // AdamW lr / Muon lr for the non-2-D parameters of a use_muon group
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;  // AdamW
  bool use_muon = true;  // false: every parameter of the group steps as AdamW (embeddings, heads, gains)
};

class Muon : public Optimizer {
 public:
  explicit Muon(std::vector<Tensor> params, MuonOptions options = {});
  // The optimizer's defaults (the named-options overload of Optimizer is hidden: a typed option or nothing).
  void add_param_group(std::vector<Tensor> params) { Optimizer::add_param_group(std::move(params)); }
  // A group with its own options, every field as given (start from
  // defaults() to keep the constructor's).
  void add_param_group(std::vector<Tensor> params, const MuonOptions& options);
  MuonOptions defaults() const { return defaults_; }

 protected:
  std::vector<StateSpec> state_spec(const ParamGroup& group, const Tensor& param) const override;
  void update(OptimizerStep& step) override;
  SkipMode skip_mode() const override { return SkipMode::kMaskedWrites; }

 private:
  MuonOptions defaults_;
};

// The quintic Newton–Schulz orthogonalisation of a 2-D f32 tensor (returns
// f32; the iteration runs in bf16 when bf16 is set). Muon's inner step.
Tensor newton_schulz5(const Tensor& g, int64_t steps = 5, bool bf16 = false);

}  // namespace hg::optim

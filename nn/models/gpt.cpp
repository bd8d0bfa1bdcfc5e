// nanoGPT's model.py in halfgrad (nn/models/gpt.h has the map).
#include "nn/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "autograd/functions_attention.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "nn/init.h"

namespace hg::nn {

namespace {

void check_config(const GPTConfig& c) {
  HG_CHECK(c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1 && c.block_size >= 1 && c.vocab_size >= 1,
           "GPT: n_layer, n_head, n_embd, block_size and vocab_size must be >= 1, got n_layer=", c.n_layer,
           " n_head=", c.n_head, " n_embd=", c.n_embd, " block_size=", c.block_size, " vocab_size=", c.vocab_size);
  HG_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd (", c.n_embd, ") must be a multiple of n_head (", c.n_head, ")");
  HG_CHECK(c.dropout >= 0.0 && c.dropout < 1.0, "GPT: dropout must be in [0, 1), got ", c.dropout);
  HG_CHECK(c.padded_vocab_size >= -1 && (c.padded_vocab_size <= 0 || c.padded_vocab_size >= c.vocab_size),
           "GPT: padded_vocab_size must be -1 (round vocab_size up to a multiple of 64), 0 (no padding) or >= "
           "vocab_size (",
           c.vocab_size, "), got ", c.padded_vocab_size);
}

// GPT-2's init for a Linear: weight ~ N(0, std), bias 0.
std::shared_ptr<Linear> make_linear(int64_t in, int64_t out, bool bias, double std, Generator* gen) {
  auto l = std::make_shared<Linear>(in, out, bias, gen);
  init::normal_(l->weight, 0.0, std, gen);
  if (l->bias.defined()) init::zeros_(l->bias);
  return l;
}

// GPT-2's scaled init of the residual projections (attn.c_proj, mlp.c_proj).
double residual_proj_std(const GPTConfig& c) { return 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer)); }

}  // namespace

// ---- attention --------------------------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(const GPTConfig& c, Generator* gen)
    : n_head_(c.n_head), n_embd_(c.n_embd), dropout_(c.dropout), gen_(gen) {
  const double proj_std = residual_proj_std(c);
  c_attn = register_module("c_attn", make_linear(c.n_embd, 3 * c.n_embd, c.bias, 0.02, gen));
  c_proj = register_module("c_proj", make_linear(c.n_embd, c.n_embd, c.bias, proj_std, gen));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(c.dropout, gen));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  HG_CHECK(x.dim() == 3 && x.size(2) == n_embd_, "CausalSelfAttention: expected [B, T, ", n_embd_, "], got ",
           x.shape_str());
  const int64_t b = x.size(0), t = x.size(1), hd = n_embd_ / n_head_;
  // [B, T, 3C] -> q, k, v, each [B, T, C] -> [B, H, T, D] (views, no copies).
  std::vector<Tensor> qkv = split(c_attn->forward(x), n_embd_, 2);
  auto heads = [&](const Tensor& z) { return transpose(view(z, {b, t, n_head_, hd}), 1, 2); };
  // Causal attention, softmax(q k^T / sqrt(D)) v with dropout on the
  // probabilities: the fused kernel on CUDA, the math path elsewhere.
  Tensor y =
      scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]),
                                   {.dropout_p = is_training() ? dropout_ : 0.0, .is_causal = true, .generator = gen_});
  // Merge the heads, [B, H, T, D] -> [B, T, C]: a view when y is stored heads
  // last (the CUDA flash kernel writes it so), one copy otherwise.
  y = reshape(transpose(y, 1, 2), {b, t, n_embd_});
  return resid_dropout->forward(c_proj->forward(y));
}

// ---- MLP and block ----------------------------------------------------------------------

MLP::MLP(const GPTConfig& c, Generator* gen) {
  const double proj_std = residual_proj_std(c);
  c_fc = register_module("c_fc", make_linear(c.n_embd, 4 * c.n_embd, c.bias, 0.02, gen));
  gelu = register_module("gelu", std::make_shared<GELU>(c.gelu_tanh));
  c_proj = register_module("c_proj", make_linear(4 * c.n_embd, c.n_embd, c.bias, proj_std, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout, gen));
}

Tensor MLP::forward(const Tensor& x) { return dropout->forward(c_proj->forward(gelu->forward(c_fc->forward(x)))); }

Block::Block(const GPTConfig& c, Generator* gen) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(Shape{c.n_embd}, 1e-5, true, c.bias));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(c, gen));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(Shape{c.n_embd}, 1e-5, true, c.bias));
  mlp = register_module("mlp", std::make_shared<MLP>(c, gen));
}

Tensor Block::forward(const Tensor& x) {
  Tensor y = add(x, attn->forward(ln_1->forward(x)));
  return add(y, mlp->forward(ln_2->forward(y)));
}

// ---- GPT ----------------------------------------------------------------------------------

GPT::GPT(GPTConfig config, Generator* gen) : config_(config) {
  check_config(config_);
  const GPTConfig& c = config_;
  // nanoGPT's transformer = nn.ModuleDict(wte, wpe, drop, h = nn.ModuleList(blocks), ln_f).
  auto dict = std::make_shared<ModuleDict>();
  transformer = register_module("transformer", dict);
  wte = std::make_shared<Embedding>(c.padded_vocab(), c.n_embd, std::nullopt, gen);
  wpe = std::make_shared<Embedding>(c.block_size, c.n_embd, std::nullopt, gen);
  dict->insert("wte", wte);
  dict->insert("wpe", wpe);
  init::normal_(wte->weight, 0.0, 0.02, gen);
  init::normal_(wpe->weight, 0.0, 0.02, gen);
  drop = std::make_shared<Dropout>(c.dropout, gen);
  dict->insert("drop", drop);
  auto blocks = std::make_shared<ModuleList>();
  dict->insert("h", blocks);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    h.push_back(std::make_shared<Block>(c, gen));
    blocks->push_back(h.back());
  }
  ln_f = std::make_shared<LayerNorm>(Shape{c.n_embd}, 1e-5, true, c.bias);
  dict->insert("ln_f", ln_f);
}

Tensor GPT::forward(const Tensor& idx) {
  const Tensor logits = forward_padded(idx);
  const int64_t v = config_.vocab_size;
  return v == logits.size(2) ? logits : narrow(logits, 2, 0, v);
}

Tensor GPT::forward_padded(const Tensor& idx) {
  HG_CHECK(idx.defined() && idx.dim() == 2 && (idx.dtype() == kI64 || idx.dtype() == kI32),
           "GPT: idx must be [B, T] integer tokens, got ", idx.defined() ? idx.shape_str() : "an undefined tensor");
  const int64_t t = idx.size(1);
  HG_CHECK(t >= 1 && t <= config_.block_size, "GPT: cannot forward a sequence of length ", t, ", block_size is only ",
           config_.block_size);
  const Tensor pos = arange(static_cast<double>(t), {.dtype = kI64, .device = idx.device()});
  Tensor x = drop->forward(add(wte->forward(idx), wpe->forward(pos)));  // [B, T, C] + [T, C]
  for (const auto& block : h) x = block->forward(x);
  x = ln_f->forward(x);
  return linear(x, wte->weight, Tensor());  // the tied lm_head
}

Tensor GPT::loss(const Tensor& idx, const Tensor& targets) {
  HG_CHECK(targets.defined() && targets.sizes() == idx.sizes(), "GPT::loss: targets must have idx's shape ",
           idx.shape_str(), ", got ", targets.defined() ? targets.shape_str() : "an undefined tensor");
  const Tensor logits = forward_padded(idx);
  // The padding columns are outside the softmax (classes = vocab_size) and get gradient 0.
  return cross_entropy(reshape(logits, {-1, logits.size(2)}), reshape(targets, {-1}), -1, 0.0, config_.vocab_size);
}

std::unique_ptr<optim::AdamW> GPT::configure_optimizers(double weight_decay, double lr, double beta1, double beta2) {
  auto [decay, no_decay] = optim::param_groups_for_weight_decay(parameters());
  const optim::AdamWOptions options =
      optim::AdamWOptions{}.set_lr(lr).set_betas(beta1, beta2).set_weight_decay(weight_decay);
  auto opt = std::make_unique<optim::AdamW>(decay, options);
  if (!no_decay.empty()) opt->add_param_group(no_decay, opt->defaults().set_weight_decay(0.0));
  return opt;
}

Tensor GPT::generate(Tensor idx, int64_t max_new_tokens, double temperature, int64_t top_k, Generator* gen) {
  HG_CHECK(temperature > 0.0, "GPT::generate: temperature must be > 0, got ", temperature);
  HG_CHECK(max_new_tokens >= 0 && top_k >= 0, "GPT::generate: max_new_tokens and top_k must be >= 0");
  NoGradGuard no_grad;
  // Eval mode for the sampling, and the caller's mode back afterwards, also
  // when a forward throws.
  struct RestoreMode {
    GPT& model;
    bool was_training;
    ~RestoreMode() { model.train(was_training); }
  } restore{*this, is_training()};
  train(false);
  const int64_t b = idx.size(0), v = config_.vocab_size;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    const int64_t t = idx.size(1);
    const Tensor cond = t <= config_.block_size ? idx : narrow(idx, 1, t - config_.block_size, config_.block_size);
    // The last position's logits, on the host in f32.
    const Tensor last = contiguous(select(forward(cond), 1, cond.size(1) - 1)).to(Device::cpu(), kF32);
    const Tensor u = rand({b}, {}, gen);  // one uniform draw per row
    std::vector<int64_t> next(static_cast<size_t>(b));
    for (int64_t r = 0; r < b; ++r) {
      const float* row = last.data<float>() + r * v;
      std::vector<double> p(row, row + v);
      for (double& z : p) z /= temperature;
      if (top_k > 0 && top_k < v) {  // logits below the k-th largest get probability 0
        std::vector<double> sorted = p;
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
        const double kth = sorted[static_cast<size_t>(top_k - 1)];
        for (double& z : p) z = z < kth ? -INFINITY : z;
      }
      const double m = *std::max_element(p.begin(), p.end());
      double s = 0.0;
      for (double& z : p) s += (z = std::exp(z - m));
      // Inverse CDF: the first token whose cumulative probability exceeds u.
      const double target = static_cast<double>(u.data<float>()[r]) * s;
      double acc = 0.0;
      int64_t pick = v - 1;
      for (int64_t j = 0; j < v; ++j) {
        acc += p[static_cast<size_t>(j)];
        if (acc > target && p[static_cast<size_t>(j)] > 0.0) {
          pick = j;
          break;
        }
      }
      next[static_cast<size_t>(r)] = pick;
    }
    Tensor col = empty({b, 1}, {.dtype = kI64});
    std::copy(next.begin(), next.end(), col.data<int64_t>());
    col = col.to(idx.device(), idx.dtype());
    idx = cat({idx, col}, 1);
  }
  return idx;
}

void GPT::load_state_dict(const NamedTensors& state, bool strict) {
  const int64_t v = config_.vocab_size, padded = config_.padded_vocab();
  if (padded == v) return Module::load_state_dict(state, strict);
  NoGradGuard no_grad;
  NamedTensors adjusted = state;
  for (auto& [name, t] : adjusted) {
    if (name != "transformer.wte.weight" || !t.defined() || t.dim() != 2 || t.size(0) != v) continue;
    // An unpadded checkpoint: its rows, then this model's own padding rows.
    const Tensor own = wte->weight.detach();
    t = cat({t.to(own.device(), own.dtype()), own.narrow(0, v, padded - v)}, 0);
  }
  Module::load_state_dict(adjusted, strict);
}

int64_t GPT::num_params(bool non_embedding) const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return non_embedding ? n - wpe->weight.numel() : n;
}

}  // namespace hg::nn

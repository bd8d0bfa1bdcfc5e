// A GPT in the shape of nanoGPT's model.py, module for module and name for
// name, so that a PyTorch user can read it side by side and a state_dict moves
// between the two (docs/gpt.md):
//
//   GPT                      transformer.wte  Embedding(padded_vocab_size, n_embd)
//                            transformer.wpe  Embedding(block_size, n_embd)
//                            transformer.drop Dropout(dropout)
//                            transformer.h.i  Block   (i < n_layer)
//                            transformer.ln_f LayerNorm(n_embd)
//                            lm_head          x @ wte.weight^T (tied, no bias)
//   Block                    x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
//   CausalSelfAttention      c_attn Linear(C, 3C) -> q, k, v [B, H, T, C/H];
//                            causal softmax(q k^T / sqrt(C/H)) v; c_proj Linear(C, C)
//   MLP                      c_fc Linear(C, 4C), GELU (erf), c_proj Linear(4C, C)
//
// The vocabulary is padded like nanoGPT's (50304 rows for GPT-2's 50257
// tokens): wte has padded_vocab() rows, so the lm_head GEMMs see a leading
// dimension that is a multiple of 64 (the fast tensor-core kernels need 16-byte
// aligned rows). The padding rows are never a class: forward() returns the
// vocab_size real columns, the loss's softmax runs over those only (the
// padding columns get gradient 0) and generate() cannot pick them. A
// checkpoint saves the padded wte, as nanoGPT's does; load_state_dict also
// takes an unpadded one (vocab_size rows) and keeps the padding rows.
//
// Initialisation is GPT-2's: every Linear and Embedding weight ~ N(0, 0.02),
// biases 0, LayerNorms 1 and 0, and the two residual projections (attn.c_proj,
// mlp.c_proj) ~ N(0, 0.02 / sqrt(2 n_layer)).
//
//   hg::nn::GPTConfig cfg{.n_layer = 4, .n_head = 4, .n_embd = 128, .block_size = 64, .vocab_size = 65};
//   auto model = std::make_shared<hg::nn::GPT>(cfg);
//   hg::Tensor logits = model->forward(idx);            // idx [B, T] i64 -> [B, T, vocab]
//   hg::Tensor loss = model->loss(idx, targets);         // mean cross-entropy over B*T
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace hg {
class Generator;
}

namespace hg::nn {

struct GPTConfig {
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  int64_t block_size = 1024;
  int64_t vocab_size = 50257;
  // Rows of wte (the lm_head's output columns): -1 = vocab_size rounded up to
  // a multiple of 64 (nanoGPT's 50304 for 50257), 0 = vocab_size (no
  // padding), else a size >= vocab_size.
  int64_t padded_vocab_size = -1;
  double dropout = 0.0;
  bool bias = true;  // biases in the Linears and LayerNorms, like GPT-2
  // The MLP's GELU: erf (nanoGPT's nn.GELU()) or its tanh approximation
  // (Hugging Face GPT-2's "gelu_new", which OpenAI's weights were trained with).
  bool gelu_tanh = false;

  // The resolved padded size (>= vocab_size).
  int64_t padded_vocab() const {
    if (padded_vocab_size < 0) return (vocab_size + 63) / 64 * 64;
    return padded_vocab_size == 0 ? vocab_size : padded_vocab_size;
  }
};

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator* gen);
  Tensor forward(const Tensor& x) override;  // [B, T, C] -> [B, T, C]

  std::shared_ptr<Linear> c_attn, c_proj;
  std::shared_ptr<Dropout> resid_dropout;

 private:
  int64_t n_head_, n_embd_;
  double dropout_;
  Generator* gen_;
};

class MLP : public Module {
 public:
  MLP(const GPTConfig& config, Generator* gen);
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<Linear> c_fc, c_proj;
  std::shared_ptr<GELU> gelu;
  std::shared_ptr<Dropout> dropout;
};

class Block : public Module {
 public:
  Block(const GPTConfig& config, Generator* gen);
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<MLP> mlp;
};

class GPT : public Module {
 public:
  // gen seeds the initialisation and dropout (hg::default_generator() when null).
  explicit GPT(GPTConfig config, Generator* gen = nullptr);

  // idx [B, T] integer tokens, T <= block_size -> logits [B, T, vocab_size]
  // (a view of the real columns of forward_padded's).
  Tensor forward(const Tensor& idx) override;
  // The lm_head's output as computed: [B, T, padded_vocab()], contiguous; the
  // columns from vocab_size on are padding.
  Tensor forward_padded(const Tensor& idx);
  // Mean cross-entropy of forward(idx) against targets [B, T] (ignore_index -1).
  Tensor loss(const Tensor& idx, const Tensor& targets);

  // nanoGPT's configure_optimizers: AdamW with parameters of rank >= 2
  // (matrices, embeddings) under weight_decay and the rest (biases, norms)
  // in a second group without.
  std::unique_ptr<optim::AdamW> configure_optimizers(double weight_decay, double lr, double beta1, double beta2);

  // Appends max_new_tokens sampled tokens to idx [B, T] (eval mode, no grad):
  // the last block_size tokens are fed, the last position's logits divided
  // by temperature, cut to the top_k (0 = all) and sampled from gen.
  Tensor generate(Tensor idx, int64_t max_new_tokens, double temperature = 1.0, int64_t top_k = 0,
                  Generator* gen = nullptr);

  // Parameters, with the tied lm_head counted once; without the position
  // embedding when non_embedding (nanoGPT's get_num_params).
  int64_t num_params(bool non_embedding = true) const;

  // Module::load_state_dict, and a transformer.wte.weight of vocab_size rows
  // (an unpadded checkpoint) fills the real rows of a padded model's wte.
  void load_state_dict(const NamedTensors& state, bool strict = true);
  const GPTConfig& config() const { return config_; }

  // Hugging Face GPT-2 checkpoints (nn/models/gpt_hf.cpp, docs/interop.md): a
  // folder with config.json and model.safetensors as transformers'
  // save_pretrained writes them (GPT2LMHeadModel's "transformer.h.0.attn.
  // c_attn.weight" names or GPT2Model's "h.0.attn.c_attn.weight"; Conv1D
  // weights stored [in, out], transposed here; the attn.bias / masked_bias
  // buffers skipped; a tied lm_head). Reads the local folder only, never the
  // network. Throws hg::Error naming the file and the key or config field that
  // halfgrad's GPT cannot represent.
  struct HFOptions {
    double dropout = 0.0;            // the config's *_pdrop are ignored
    int64_t padded_vocab_size = -1;  // as GPTConfig's (the file's wte is unpadded)
  };
  static std::shared_ptr<GPT> from_pretrained_hf(const std::string& dir, const HFOptions& options);
  static std::shared_ptr<GPT> from_pretrained_hf(const std::string& dir) { return from_pretrained_hf(dir, {}); }
  // Writes config.json and model.safetensors in GPT2LMHeadModel's layout
  // (f32, unpadded wte, no lm_head.weight: tied), which
  // transformers.GPT2LMHeadModel.from_pretrained(dir) loads with no missing
  // or unexpected keys. The folder must exist. Needs bias (GPT-2 has biases).
  void save_pretrained_hf(const std::string& dir) const;

  std::shared_ptr<Module> transformer;  // wte, wpe, drop, h, ln_f (nanoGPT's ModuleDict)
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<Dropout> drop;
  std::vector<std::shared_ptr<Block>> h;
  std::shared_ptr<LayerNorm> ln_f;

 private:
  GPTConfig config_;
};

}  // namespace hg::nn

// Transformer building blocks with torch.nn's names, parameters and math:
// MultiheadAttention, TransformerEncoderLayer / TransformerDecoderLayer and
// their stacks TransformerEncoder / TransformerDecoder.
//
//   hg::nn::TransformerEncoderLayer layer({.d_model = 64, .nhead = 4, .dim_feedforward = 128});
//   hg::Tensor pad = tokens == 0;                               // bool [B, T], true = padding
//   hg::Tensor h = layer.forward(x, {.src_key_padding_mask = pad});  // x [B, T, 64]
//
// Masks follow torch.nn.MultiheadAttention: a bool mask is true where a
// position may NOT be attended (padding, the future); a floating mask is added
// to the scaled scores (-inf blocks). key_padding_mask is [B, S];
// attn_mask is [L, S] or [B * nhead, L, S]. (hg::scaled_dot_product_attention,
// like torch's F.scaled_dot_product_attention, takes the opposite bool
// convention: true = attend.) A query row with every key blocked gives NaN,
// as in PyTorch.
//
// Inputs are batch-first, [B, T, E], unless batch_first is false ([T, B, E]).
// Difference from torch.nn: batch_first defaults to true here (torch: False;
// libtorch has only the sequence-first layout).
//
// Several inputs: these modules have typed forward overloads (query, key,
// value and masks), as libtorch's; Module::forward(x) runs the one-input case
// (self-attention without masks), so they also fit in a Sequential or
// ModuleList. The paths: with need_weights false, attention runs through
// hg::scaled_dot_product_attention (the fused flash kernels where they apply:
// no mask, no dropout; the math path otherwise); need_weights true computes
// softmax(q k^T / sqrt(d) + mask) explicitly to return it.
//
// Parameter names are torch's (state_dicts load across): in_proj_weight
// [3E, E] and in_proj_bias [3E] (or q_proj_weight, k_proj_weight,
// v_proj_weight when kdim or vdim differ from E), out_proj.weight/.bias;
// the layers' self_attn, multihead_attn, linear1, linear2, norm1..3; the
// stacks' layers.0..., norm. Initialisation is torch's: xavier_uniform_ for
// the input projection, zero biases for it and out_proj, Linear's default
// elsewhere; a stack builds each layer afresh (torch deep-copies one layer, so
// its layers start equal; load a state_dict to reproduce that).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "nn/layers.h"
#include "nn/module.h"

namespace hg {
class Generator;
}

namespace hg::nn {

struct MultiheadAttentionOptions {
  int64_t embed_dim = 0;
  int64_t num_heads = 1;
  double dropout = 0.0;  // on the attention weights, in training mode
  bool bias = true;
  int64_t kdim = 0;  // 0 = embed_dim
  int64_t vdim = 0;  // 0 = embed_dim
  bool batch_first = true;
  Generator* generator = nullptr;  // initial weights and dropout
};

struct AttentionMasks {
  Tensor key_padding_mask{};         // [B, S]: bool (true = padding) or floating (added)
  bool need_weights = true;          // also return the attention weights
  Tensor attn_mask{};                // [L, S] or [B * num_heads, L, S]: bool (true = blocked) or floating
  bool average_attn_weights = true;  // weights [B, L, S] (mean over heads), else [B, H, L, S]
  bool is_causal = false;            // query i sees keys j <= i (ANDed with the masks)
};

class MultiheadAttention : public Module {
 public:
  explicit MultiheadAttention(const MultiheadAttentionOptions& options);
  // (attn_output [B, L, E], attn_weights or an undefined tensor when !need_weights)
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const AttentionMasks& masks = {});
  // Self-attention without masks: forward(x, x, x, {.need_weights = false}).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const MultiheadAttentionOptions& options() const { return options_; }

  Tensor in_proj_weight;                               // [3E, E] when packed, else undefined
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;  // [E, E], [E, kdim], [E, vdim] when not packed
  Tensor in_proj_bias;                                 // [3E] or undefined
  std::shared_ptr<Linear> out_proj;

 private:
  MultiheadAttentionOptions options_;
  bool packed_ = true;
};

struct TransformerLayerOptions {
  int64_t d_model = 0;
  int64_t nhead = 1;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = true;
  bool norm_first = false;  // pre-norm (x + f(norm(x))) instead of post-norm (norm(x + f(x)))
  bool bias = true;
  Generator* generator = nullptr;
};

struct EncoderMasks {
  Tensor src_mask{};              // attn_mask of the self-attention
  Tensor src_key_padding_mask{};  // [B, S]
  bool is_causal = false;
};

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerLayerOptions& options);
  Tensor forward(const Tensor& src, const EncoderMasks& masks);
  Tensor forward(const Tensor& src) override { return forward(src, EncoderMasks{}); }
  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;

 private:
  Tensor feed_forward(const Tensor& x);
  TransformerLayerOptions options_;
};

struct DecoderMasks {
  Tensor tgt_mask{};
  Tensor memory_mask{};
  Tensor tgt_key_padding_mask{};
  Tensor memory_key_padding_mask{};
  bool tgt_is_causal = false;
  bool memory_is_causal = false;
};

class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerLayerOptions& options);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {});
  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;

 private:
  Tensor feed_forward(const Tensor& x);
  TransformerLayerOptions options_;
};

// num_layers encoder layers (registered as layers.0, layers.1, ...) and, when
// final_norm, a LayerNorm "norm" after them (torch's `norm` argument).
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers, bool final_norm = false);
  Tensor forward(const Tensor& src, const EncoderMasks& masks);
  Tensor forward(const Tensor& src) override { return forward(src, EncoderMasks{}); }

  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;  // or null
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers, bool final_norm = false);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {});

  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;  // or null
};

}  // namespace hg::nn

// MultiheadAttention and the Transformer layers (nn/transformer.h): torch.nn's
// math written with halfgrad's differentiable ops.
#include "nn/transformer.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>

#include "autograd/functions.h"
#include "autograd/functions_attention.h"
#include "core/error.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace hg::nn {
namespace {

// A torch.nn mask (bool: true = blocked; floating: added) as an additive
// floating mask of dtype `dt`.
Tensor additive(const Tensor& mask, DType dt) {
  if (mask.dtype() == kBool) {
    return masked_fill(zeros(mask.sizes(), {.dtype = dt, .device = mask.device()}), mask,
                       -std::numeric_limits<double>::infinity());
  }
  HG_CHECK(is_floating(mask.dtype()), "MultiheadAttention: a mask must be bool or floating, got ",
           dtype_name(mask.dtype()));
  return mask.to(dt);
}

// x [B, T, E] -> [B, H, T, D]
Tensor split_heads(const Tensor& x, int64_t heads) {
  const int64_t b = x.size(0), t = x.size(1), e = x.size(2);
  return x.view({b, t, heads, e / heads}).transpose(1, 2);
}

Tensor activate(const std::string& activation, const Tensor& x) { return activation == "gelu" ? gelu(x) : relu(x); }

void check_layer_options(const char* who, const TransformerLayerOptions& o) {
  HG_CHECK(o.d_model > 0 && o.nhead > 0 && o.d_model % o.nhead == 0, who,
           ": d_model must be a positive multiple of nhead, got d_model ", o.d_model, " nhead ", o.nhead);
  HG_CHECK(o.dim_feedforward > 0, who, ": dim_feedforward must be > 0, got ", o.dim_feedforward);
  HG_CHECK(o.activation == "relu" || o.activation == "gelu", who, ": activation must be \"relu\" or \"gelu\", got \"",
           o.activation, "\"");
  HG_CHECK(o.dropout >= 0.0 && o.dropout < 1.0, who, ": dropout must be in [0, 1), got ", o.dropout);
}

MultiheadAttentionOptions attention_options(const TransformerLayerOptions& o) {
  return {.embed_dim = o.d_model,
          .num_heads = o.nhead,
          .dropout = o.dropout,
          .bias = o.bias,
          .batch_first = true,  // the layer transposes once for the whole block
          .generator = o.generator};
}

}  // namespace

// ---- MultiheadAttention ----------------------------------------------------------------

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& options) : options_(options) {
  const int64_t e = options_.embed_dim, h = options_.num_heads;
  HG_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadAttention: embed_dim must be a positive multiple of num_heads, ",
           "got embed_dim ", e, " num_heads ", h);
  HG_CHECK(options_.dropout >= 0.0 && options_.dropout < 1.0, "MultiheadAttention: dropout must be in [0, 1), got ",
           options_.dropout);
  HG_CHECK(options_.kdim >= 0 && options_.vdim >= 0, "MultiheadAttention: kdim and vdim must be >= 0 (0 = embed_dim)");
  if (options_.kdim == 0) options_.kdim = e;
  if (options_.vdim == 0) options_.vdim = e;
  packed_ = options_.kdim == e && options_.vdim == e;
  Generator* gen = options_.generator;
  if (packed_) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
    init::xavier_uniform_(in_proj_weight, 1.0, gen);
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({e, e}));
    k_proj_weight = register_parameter("k_proj_weight", empty({e, options_.kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({e, options_.vdim}));
    for (const Tensor& w : {q_proj_weight, k_proj_weight, v_proj_weight}) init::xavier_uniform_(w, 1.0, gen);
  }
  if (options_.bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * e}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, options_.bias, gen));
  if (options_.bias) init::zeros_(out_proj->bias);
}

std::string MultiheadAttention::extra_repr() const {
  std::ostringstream os;
  os << "embed_dim=" << options_.embed_dim << ", num_heads=" << options_.num_heads;
  if (!packed_) os << ", kdim=" << options_.kdim << ", vdim=" << options_.vdim;
  if (options_.dropout > 0) os << ", dropout=" << options_.dropout;
  return os.str();
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  return std::get<0>(forward(x, x, x, AttentionMasks{.need_weights = false}));
}

std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query_in, const Tensor& key_in,
                                                       const Tensor& value_in, const AttentionMasks& masks) {
  const int64_t e = options_.embed_dim, h = options_.num_heads;
  HG_CHECK(query_in.defined() && key_in.defined() && value_in.defined() && query_in.dim() == 3 && key_in.dim() == 3 &&
               value_in.dim() == 3,
           "MultiheadAttention: query, key and value must be 3-D (", options_.batch_first ? "[B, T, E]" : "[T, B, E]",
           "; batched only)");
  const Tensor query = options_.batch_first ? query_in : query_in.transpose(0, 1);
  const Tensor key = options_.batch_first ? key_in : key_in.transpose(0, 1);
  const Tensor value = options_.batch_first ? value_in : value_in.transpose(0, 1);
  const int64_t b = query.size(0), l = query.size(1), s = key.size(1);
  HG_CHECK(query.size(2) == e && key.size(2) == options_.kdim && value.size(2) == options_.vdim, "MultiheadAttention(",
           "embed_dim ", e, ", kdim ", options_.kdim, ", vdim ", options_.vdim, "): got query ", query_in.shape_str(),
           ", key ", key_in.shape_str(), ", value ", value_in.shape_str());
  HG_CHECK(key.size(0) == b && value.size(0) == b && value.size(1) == s,
           "MultiheadAttention: key and value must have query's batch and the same length, got query ",
           query_in.shape_str(), ", key ", key_in.shape_str(), ", value ", value_in.shape_str());

  // The input projection: one GEMM for self-attention with packed weights.
  Tensor q, k, v;
  const auto bias_part = [&](int64_t i) {
    return in_proj_bias.defined() ? in_proj_bias.narrow(0, i * e, e) : Tensor();
  };
  if (packed_ && same(query, key) && same(key, value)) {
    const Tensor qkv = linear(query, in_proj_weight, in_proj_bias);  // [B, L, 3E]
    q = qkv.narrow(2, 0, e);
    k = qkv.narrow(2, e, e);
    v = qkv.narrow(2, 2 * e, e);
  } else {
    q = linear(query, packed_ ? in_proj_weight.narrow(0, 0, e) : q_proj_weight, bias_part(0));
    k = linear(key, packed_ ? in_proj_weight.narrow(0, e, e) : k_proj_weight, bias_part(1));
    v = linear(value, packed_ ? in_proj_weight.narrow(0, 2 * e, e) : v_proj_weight, bias_part(2));
  }
  const Tensor qh = split_heads(q, h), kh = split_heads(k, h), vh = split_heads(v, h);  // [B, H, T, D]

  // One additive mask [B or 1, H or 1, L, S] from the two torch-convention masks.
  Tensor mask;
  if (masks.key_padding_mask.defined()) {
    const Tensor& m = masks.key_padding_mask;
    HG_CHECK(m.dim() == 2 && m.size(0) == b && m.size(1) == s,
             "MultiheadAttention: key_padding_mask must be [B, S] = [", b, ", ", s, "], got ", m.shape_str());
    mask = additive(m, q.dtype()).view({b, 1, 1, s});
  }
  if (masks.attn_mask.defined()) {
    const Tensor& m = masks.attn_mask;
    Tensor a;
    if (m.dim() == 2) {
      HG_CHECK(m.size(0) == l && m.size(1) == s, "MultiheadAttention: a 2-D attn_mask must be [L, S] = [", l, ", ", s,
               "], got ", m.shape_str());
      a = additive(m, q.dtype()).view({1, 1, l, s});
    } else {
      HG_CHECK(m.dim() == 3 && m.size(0) == b * h && m.size(1) == l && m.size(2) == s,
               "MultiheadAttention: a 3-D attn_mask must be [B * num_heads, L, S] = [", b * h, ", ", l, ", ", s,
               "], got ", m.shape_str());
      a = additive(m, q.dtype()).view({b, h, l, s});
    }
    mask = mask.defined() ? mask + a : a;
  }
  const double p = is_training() ? options_.dropout : 0.0;
  Tensor out, weights;
  if (!masks.need_weights) {
    out = scaled_dot_product_attention(
        qh, kh, vh, {.attn_mask = mask, .dropout_p = p, .is_causal = masks.is_causal, .generator = options_.generator});
  } else {
    Tensor scores = matmul(qh, kh.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(e / h)));
    if (mask.defined()) scores = scores + mask;
    if (masks.is_causal) {
      const Tensor future = arange(static_cast<double>(s), {.device = q.device()}).view({1, s}) >
                            arange(static_cast<double>(l), {.device = q.device()}).view({l, 1});  // j > i
      scores = masked_fill(scores, future, -std::numeric_limits<double>::infinity());
    }
    weights = softmax(scores, -1);  // [B, H, L, S]
    out = matmul(functional::dropout(weights, p, p > 0.0, options_.generator), vh);
    if (masks.average_attn_weights) weights = mean(weights, {1});
  }
  Tensor y = out_proj->forward(out.transpose(1, 2).contiguous().view({b, l, e}));
  if (!options_.batch_first) y = y.transpose(0, 1);
  return {y, weights};
}

// ---- TransformerEncoderLayer / TransformerDecoderLayer ---------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& options) : options_(options) {
  check_layer_options("TransformerEncoderLayer", options_);
  const TransformerLayerOptions& o = options_;
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(attention_options(o)));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias, o.generator));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout, o.generator));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias, o.generator));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps, true, o.bias));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps, true, o.bias));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout, o.generator));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout, o.generator));
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  return dropout2->forward(linear2->forward(dropout->forward(activate(options_.activation, linear1->forward(x)))));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const EncoderMasks& masks) {
  HG_CHECK(src.defined() && src.dim() == 3, "TransformerEncoderLayer: src must be 3-D (batched), got ",
           src.defined() ? src.shape_str() : "an undefined tensor");
  Tensor x = options_.batch_first ? src : src.transpose(0, 1);
  const auto sa = [&](const Tensor& t) {
    const AttentionMasks m{.key_padding_mask = masks.src_key_padding_mask,
                           .need_weights = false,
                           .attn_mask = masks.src_mask,
                           .is_causal = masks.is_causal};
    return dropout1->forward(std::get<0>(self_attn->forward(t, t, t, m)));
  };
  if (options_.norm_first) {
    x = x + sa(norm1->forward(x));
    x = x + feed_forward(norm2->forward(x));
  } else {
    x = norm1->forward(x + sa(x));
    x = norm2->forward(x + feed_forward(x));
  }
  return options_.batch_first ? x : x.transpose(0, 1);
}

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& options) : options_(options) {
  check_layer_options("TransformerDecoderLayer", options_);
  const TransformerLayerOptions& o = options_;
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(attention_options(o)));
  multihead_attn = register_module("multihead_attn", std::make_shared<MultiheadAttention>(attention_options(o)));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias, o.generator));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout, o.generator));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias, o.generator));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps, true, o.bias));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps, true, o.bias));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps, true, o.bias));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout, o.generator));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout, o.generator));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout, o.generator));
}

Tensor TransformerDecoderLayer::feed_forward(const Tensor& x) {
  return dropout3->forward(linear2->forward(dropout->forward(activate(options_.activation, linear1->forward(x)))));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory_in, const DecoderMasks& masks) {
  HG_CHECK(tgt.defined() && tgt.dim() == 3 && memory_in.defined() && memory_in.dim() == 3,
           "TransformerDecoderLayer: tgt and memory must be 3-D (batched)");
  Tensor x = options_.batch_first ? tgt : tgt.transpose(0, 1);
  const Tensor memory = options_.batch_first ? memory_in : memory_in.transpose(0, 1);
  const auto sa = [&](const Tensor& t) {
    const AttentionMasks m{.key_padding_mask = masks.tgt_key_padding_mask,
                           .need_weights = false,
                           .attn_mask = masks.tgt_mask,
                           .is_causal = masks.tgt_is_causal};
    return dropout1->forward(std::get<0>(self_attn->forward(t, t, t, m)));
  };
  const auto mha = [&](const Tensor& t) {
    const AttentionMasks m{.key_padding_mask = masks.memory_key_padding_mask,
                           .need_weights = false,
                           .attn_mask = masks.memory_mask,
                           .is_causal = masks.memory_is_causal};
    return dropout2->forward(std::get<0>(multihead_attn->forward(t, memory, memory, m)));
  };
  if (options_.norm_first) {
    x = x + sa(norm1->forward(x));
    x = x + mha(norm2->forward(x));
    x = x + feed_forward(norm3->forward(x));
  } else {
    x = norm1->forward(x + sa(x));
    x = norm2->forward(x + mha(x));
    x = norm3->forward(x + feed_forward(x));
  }
  return options_.batch_first ? x : x.transpose(0, 1);
}

// ---- the stacks ------------------------------------------------------------------------

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers, bool final_norm) {
  HG_CHECK(num_layers >= 1, "TransformerEncoder: num_layers must be >= 1, got ", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerEncoderLayer>(layer));
  if (final_norm)
    norm = register_module("norm", std::make_shared<LayerNorm>(Shape{layer.d_model}, layer.layer_norm_eps));
}

Tensor TransformerEncoder::forward(const Tensor& src, const EncoderMasks& masks) {
  Tensor x = src;
  for (size_t i = 0; i < layers->size(); ++i) x = layers->at<TransformerEncoderLayer>(i)->forward(x, masks);
  return norm ? norm->forward(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers, bool final_norm) {
  HG_CHECK(num_layers >= 1, "TransformerDecoder: num_layers must be >= 1, got ", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerDecoderLayer>(layer));
  if (final_norm)
    norm = register_module("norm", std::make_shared<LayerNorm>(Shape{layer.d_model}, layer.layer_norm_eps));
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks) {
  Tensor x = tgt;
  for (size_t i = 0; i < layers->size(); ++i) x = layers->at<TransformerDecoderLayer>(i)->forward(x, memory, masks);
  return norm ? norm->forward(x) : x;
}

}  // namespace hg::nn

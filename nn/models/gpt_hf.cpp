// Hugging Face GPT-2 checkpoints in and out of nn::GPT (nn/models/gpt.h).
//
// The two layouts, name for name (HF's GPT2LMHeadModel prefixes each key with
// "transformer."; GPT2Model, as in the hub's gpt2 repository, does not):
//
//   HF                                  halfgrad (nanoGPT)
//   wte.weight [V, C]                   transformer.wte.weight [padded V, C]
//   wpe.weight, ln_f.*, h.N.ln_{1,2}.*  transformer.<same>
//   h.N.attn.c_attn.weight [C, 3C]      transformer.h.N.attn.c_attn.weight [3C, C]   (transposed)
//   h.N.attn.c_proj.weight [C, C]       transformer.h.N.attn.c_proj.weight [C, C]    (transposed)
//   h.N.mlp.c_fc.weight [C, 4C]         transformer.h.N.mlp.c_fc.weight [4C, C]      (transposed)
//   h.N.mlp.c_proj.weight [4C, C]       transformer.h.N.mlp.c_proj.weight [C, 4C]    (transposed)
//   h.N.*.bias (the Linears')           the same, untransposed
//   h.N.attn.bias, h.N.attn.masked_bias the causal-mask buffers: skipped
//   lm_head.weight (if present)         must equal wte.weight (tied)
//
// HF's Conv1D computes x @ W + b with W stored [in, out]; torch.nn.Linear and
// halfgrad's Linear compute x @ W^T + b with W stored [out, in]: the four
// projection weights are the transposes of each other.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/atomic_file.h"
#include "nn/models/gpt.h"
#include "nn/serialize.h"

namespace hg::nn {

namespace {

bool is_conv1d_weight(const std::string& name) {
  for (const char* suffix : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

bool ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

nlohmann::json read_config(const std::string& path) {
  std::ifstream in(path);
  HG_CHECK(in.good(), "GPT::from_pretrained_hf: cannot open ", path,
           " (a Hugging Face GPT-2 folder has config.json and model.safetensors)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    HG_FAIL("GPT::from_pretrained_hf: ", path, " is not valid JSON: ", e.what());
  }
}

// config[key] as an integer >= 1 (or `fallback` when absent and fallback > 0).
int64_t config_int(const nlohmann::json& config, const std::string& path, const char* key, int64_t fallback = 0) {
  if (!config.contains(key) || config[key].is_null()) {
    HG_CHECK(fallback > 0, "GPT::from_pretrained_hf: ", path, " has no \"", key, "\"");
    return fallback;
  }
  HG_CHECK(config[key].is_number_integer() && config[key].get<int64_t>() >= 1, "GPT::from_pretrained_hf: ", path,
           ": \"", key, "\" must be an integer >= 1, got ", config[key].dump());
  return config[key].get<int64_t>();
}

// config[key] (when present) must equal `expected`: a GPT-2 option halfgrad's GPT does not have.
template <typename T>
void config_must_be(const nlohmann::json& config, const std::string& path, const char* key, const T& expected) {
  if (!config.contains(key) || config[key].is_null()) return;
  HG_CHECK(config[key] == expected, "GPT::from_pretrained_hf: ", path, ": \"", key, "\" is ", config[key].dump(),
           "; halfgrad's GPT supports only ", nlohmann::json(expected).dump());
}

}  // namespace

std::shared_ptr<GPT> GPT::from_pretrained_hf(const std::string& dir, const HFOptions& options) {
  const std::string config_path = dir + "/config.json", weights_path = dir + "/model.safetensors";
  const nlohmann::json config = read_config(config_path);
  if (config.contains("model_type")) config_must_be(config, config_path, "model_type", std::string("gpt2"));

  GPTConfig c;
  c.n_layer = config_int(config, config_path, "n_layer");
  c.n_head = config_int(config, config_path, "n_head");
  c.n_embd = config_int(config, config_path, "n_embd");
  c.block_size = config_int(config, config_path, "n_positions");
  c.vocab_size = config_int(config, config_path, "vocab_size");
  c.padded_vocab_size = options.padded_vocab_size;
  c.dropout = options.dropout;
  c.bias = true;
  const std::string activation = config.value("activation_function", std::string("gelu_new"));
  HG_CHECK(activation == "gelu_new" || activation == "gelu_pytorch_tanh" || activation == "gelu",
           "GPT::from_pretrained_hf: ", config_path, ": activation_function \"", activation,
           "\" is not supported (gelu_new, gelu_pytorch_tanh: GELU's tanh form; gelu: erf)");
  c.gelu_tanh = activation != "gelu";
  HG_CHECK(config_int(config, config_path, "n_inner", 4 * c.n_embd) == 4 * c.n_embd,
           "GPT::from_pretrained_hf: ", config_path, ": n_inner must be 4 * n_embd (", 4 * c.n_embd, ") or null");
  if (config.contains("layer_norm_epsilon")) {
    HG_CHECK(config["layer_norm_epsilon"].is_number() &&
                 std::fabs(config["layer_norm_epsilon"].get<double>() - 1e-5) <= 1e-12,
             "GPT::from_pretrained_hf: ", config_path, ": layer_norm_epsilon ", config["layer_norm_epsilon"].dump(),
             " is not supported (halfgrad's GPT uses 1e-5, as GPT-2)");
  }
  config_must_be(config, config_path, "scale_attn_weights", true);
  config_must_be(config, config_path, "scale_attn_by_inverse_layer_idx", false);
  config_must_be(config, config_path, "add_cross_attention", false);
  config_must_be(config, config_path, "tie_word_embeddings", true);

  const SafetensorsFile file = load_safetensors(weights_path);
  auto model = std::make_shared<GPT>(c);
  NamedTensors state;
  const Tensor* wte = nullptr;
  const Tensor* lm_head = nullptr;
  for (const auto& [key, tensor] : file.tensors) {
    std::string name = key.rfind("transformer.", 0) == 0 ? key.substr(12) : key;
    if (name == "lm_head.weight") {
      lm_head = &tensor;
      continue;
    }
    // The causal-mask buffers older transformers versions saved.
    if (name.rfind("h.", 0) == 0 && (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"))) {
      continue;
    }
    if (name == "wte.weight") wte = &tensor;
    Tensor t = tensor.to(kF32);
    if (is_conv1d_weight(name)) {
      HG_CHECK(t.dim() == 2, "GPT::from_pretrained_hf: ", weights_path, ": ", key, " is ", t.shape_str(),
               ", a Conv1D weight must be 2-d [in, out]");
      t = t.t().contiguous();  // Conv1D [in, out] -> Linear [out, in]
    }
    state.emplace_back("transformer." + name, t);
  }
  HG_CHECK(wte != nullptr, "GPT::from_pretrained_hf: ", weights_path,
           " has no wte.weight (nor transformer.wte.weight)");
  if (lm_head != nullptr) {
    const bool tied =
        lm_head->sizes() == wte->sizes() && lm_head->to(kF32).sub(wte->to(kF32)).abs().max().item<float>() == 0.0f;
    HG_CHECK(tied, "GPT::from_pretrained_hf: ", weights_path,
             ": lm_head.weight differs from wte.weight; halfgrad's GPT ties them (an untied head is not supported)");
  }
  NoGradGuard no_grad;
  model->load_state_dict(state, /*strict=*/true);
  return model;
}

void GPT::save_pretrained_hf(const std::string& dir) const {
  const GPTConfig& c = config_;
  HG_CHECK(c.bias, "GPT::save_pretrained_hf: GPT-2 has biases in its Linears and LayerNorms; this model has none");
  NoGradGuard no_grad;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, p] : named_parameters()) {
    // Parameters are "transformer.<...>" (the lm_head is wte itself).
    const std::string inner = name.substr(12);
    Tensor t = p.detach().to(Device::cpu(), kF32);
    if (inner == "wte.weight" && t.size(0) != c.vocab_size) t = t.narrow(0, 0, c.vocab_size);  // drop the padding
    if (is_conv1d_weight(inner)) t = t.t();  // Linear [out, in] -> Conv1D [in, out] (saved contiguous)
    tensors.emplace_back(name, t);
  }
  save_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});

  const nlohmann::json config = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_embd", c.n_embd},
      {"n_positions", c.block_size},
      {"n_ctx", c.block_size},
      {"vocab_size", c.vocab_size},
      {"n_inner", nullptr},
      {"activation_function", c.gelu_tanh ? "gelu_new" : "gelu"},
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", c.dropout},
      {"embd_pdrop", c.dropout},
      {"attn_pdrop", c.dropout},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", true},
      {"torch_dtype", "float32"},
  };
  AtomicFile out(dir + "/config.json", "GPT::save_pretrained_hf");
  out.write(config.dump(2) + "\n");
  out.commit();
}

}  // namespace hg::nn

#include "nn/layers.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace hg::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator* gen)
    : in_features_(in_features), out_features_(out_features) {
  HG_CHECK(in_features > 0 && out_features > 0, "Linear: in_features and out_features must be > 0, got ",
           in_features, " and ", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  init::kaiming_uniform_(weight, std::sqrt(5.0), gen);
  if (with_bias) {
    bias = register_parameter("bias", empty({out_features}));
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) {
  HG_CHECK(x.dim() >= 1 && x.size(-1) == in_features_, "Linear(", in_features_, " -> ", out_features_,
           "): input's last dim must be ", in_features_, ", got shape ", x.shape_str());
  if (route_) {
    Tensor y = route_(*this, x);
    if (y.defined()) return y;
  }
  return functional::linear(x, weight, bias);
}

std::string Linear::type_name() const {
  std::ostringstream os;
  os << "Linear(in_features=" << in_features_ << ", out_features=" << out_features_
     << ", bias=" << (bias.defined() ? "true" : "false") << ")";
  return os.str();
}

Tensor ReLU::forward(const Tensor& x) { return hg::relu(x); }
Tensor GELU::forward(const Tensor& x) { return hg::gelu(x, tanh_approx_); }
Tensor SiLU::forward(const Tensor& x) { return hg::silu(x); }
Tensor Tanh::forward(const Tensor& x) { return hg::tanh(x); }

Dropout::Dropout(double p, Generator* gen) : p_(p), gen_(gen) {
  HG_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p_, is_training(), gen_); }

std::string Dropout::type_name() const {
  std::ostringstream os;
  os << "Dropout(p=" << p_ << ")";
  return os.str();
}

Tensor Flatten::forward(const Tensor& x) { return hg::flatten(x, start_, end_); }

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& m : modules_) h = m->forward(h);
  return h;
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  HG_CHECK(module != nullptr, "ModuleList::push_back: a null module");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  HG_CHECK(i < modules_.size(), "ModuleList: index ", i, " out of range (", modules_.size(), " modules)");
  return modules_[i];
}

void ModuleList::wrong_type(size_t i, const char* wanted) const {
  HG_FAIL("ModuleList::at(", i, "): module ", i, " is a ", modules_[i]->type_name(), ", not a ",
          autograd::FunctionRecorder::demangle(wanted));
}

ModuleDict::ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> modules) {
  for (const auto& [k, m] : modules) insert(k, m);
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> module) {
  HG_CHECK(module != nullptr, "ModuleDict::insert: a null module for key '", key, "'");
  HG_CHECK(!contains(key), "ModuleDict::insert: key '", key, "' is already there");
  register_module(key, module);
  items_.emplace_back(key, std::move(module));
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, m] : items_) {
    if (k == key) return true;
  }
  return false;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, m] : items_) out.push_back(k);
  return out;
}

const std::shared_ptr<Module>& ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, m] : items_) {
    if (k == key) return m;
  }
  HG_FAIL("ModuleDict: no module under key '", key, "'");
}

void ModuleDict::wrong_type(const std::string& key, const char* wanted) const {
  HG_FAIL("ModuleDict::at(\"", key, "\"): the module is a ", (*this)[key]->type_name(), ", not a ",
          autograd::FunctionRecorder::demangle(wanted));
}

// ---- sequence-model layers: LayerNorm, RMSNorm, Embedding ---------------------------

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool with_bias)
    : normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  HG_CHECK(!normalized_shape_.empty(), "LayerNorm: normalized_shape must name at least one dim");
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape_));
    if (with_bias) bias = register_parameter("bias", zeros(normalized_shape_));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return hg::layer_norm(x, normalized_shape_, weight, bias, eps_); }

std::string LayerNorm::type_name() const {
  std::ostringstream os;
  os << "LayerNorm(" << shape_to_string(normalized_shape_) << ", eps=" << eps_
     << ", elementwise_affine=" << (weight.defined() ? "true" : "false") << ")";
  return os.str();
}

RMSNorm::RMSNorm(Shape normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  HG_CHECK(!normalized_shape_.empty(), "RMSNorm: normalized_shape must name at least one dim");
  if (elementwise_affine) weight = register_parameter("weight", ones(normalized_shape_));
}

Tensor RMSNorm::forward(const Tensor& x) { return hg::rms_norm(x, normalized_shape_, weight, eps_); }

std::string RMSNorm::type_name() const {
  std::ostringstream os;
  os << "RMSNorm(" << shape_to_string(normalized_shape_);
  if (eps_) os << ", eps=" << *eps_;
  os << ", elementwise_affine=" << (weight.defined() ? "true" : "false") << ")";
  return os.str();
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx, Generator* gen)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim), padding_idx_(padding_idx) {
  HG_CHECK(num_embeddings > 0 && embedding_dim > 0, "Embedding: num_embeddings and embedding_dim must be > 0, got ",
           num_embeddings, " and ", embedding_dim);
  if (padding_idx_) {
    HG_CHECK(*padding_idx_ >= -num_embeddings && *padding_idx_ < num_embeddings, "Embedding: padding_idx ",
             *padding_idx_, " is out of range for ", num_embeddings, " embeddings");
    if (*padding_idx_ < 0) *padding_idx_ += num_embeddings;  // as torch
  }
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  init::normal_(weight, 0.0, 1.0, gen);
  if (padding_idx_) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx_).zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) { return hg::embedding(indices, weight, padding_idx_); }

std::string Embedding::type_name() const {
  std::ostringstream os;
  os << "Embedding(" << num_embeddings_ << ", " << embedding_dim_;
  if (padding_idx_) os << ", padding_idx=" << *padding_idx_;
  os << ")";
  return os.str();
}

}  // namespace hg::nn

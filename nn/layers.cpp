#include "nn/layers.h"

#include <cmath>
#include <sstream>

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
  return functional::linear(x, weight, bias);
}

std::string Linear::type_name() const {
  std::ostringstream os;
  os << "Linear(in_features=" << in_features_ << ", out_features=" << out_features_
     << ", bias=" << (bias.defined() ? "true" : "false") << ")";
  return os.str();
}

Tensor ReLU::forward(const Tensor& x) { return hg::relu(x); }
Tensor GELU::forward(const Tensor& x) { return hg::gelu(x, tanh_); }
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

}  // namespace hg::nn

// Layers: Linear, activations, Dropout, Flatten, Sequential, LayerNorm, RMSNorm, Embedding.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <optional>
#include <vector>

#include "nn/module.h"

namespace hg {
class Generator;
}

namespace hg::nn {

// y = x @ weight^T + bias; weight [out, in], bias [out]. Initialised like
// torch.nn.Linear: U(-1/sqrt(in), 1/sqrt(in)) for both.
// A forward route may be installed from a higher floor (amp::Fp8Training
// sends eligible layers through the fp8 GEMM): forward() calls it first and
// uses its result when defined, else the ordinary path (an undefined result
// means "not here", e.g. outside an fp8 autocast region).
class Linear : public Module {
 public:
  using Route = std::function<Tensor(Linear& self, const Tensor& x)>;

  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  // An empty function removes the route.
  void set_route(Route route) { route_ = std::move(route); }
  bool has_route() const { return static_cast<bool>(route_); }

  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features] or undefined

 private:
  int64_t in_features_, out_features_;
  Route route_;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

class GELU : public Module {
 public:
  explicit GELU(bool tanh_approx = false) : tanh_approx_(tanh_approx) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return tanh_approx_ ? "GELU(tanh)" : "GELU"; }

 private:
  bool tanh_approx_;
};

class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SiLU"; }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Tanh"; }
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;

 private:
  double p_;
  Generator* gen_;
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }

 private:
  int64_t start_, end_;
};

// (clang-format 14 mangles requires-expressions and requires-clauses)
// clang-format off
namespace detail {
// A module value (Linear(784, 256)) or a shared_ptr to one.
template <typename M>
concept ModuleArg = std::derived_from<std::remove_cvref_t<M>, Module> ||
                    requires(const std::remove_cvref_t<M>& p) {
                      { std::shared_ptr<Module>(p) };
                    };
template <typename M>
std::shared_ptr<Module> to_module_ptr(M&& m) {
  if constexpr (std::derived_from<std::remove_cvref_t<M>, Module>) {
    return std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(m));
  } else {
    return std::shared_ptr<Module>(std::forward<M>(m));
  }
}
}  // namespace detail
// clang-format on

// Runs its modules in order; they are registered as "0", "1", ... (PyTorch's
// state_dict names). Built like libtorch's, from module values or shared_ptrs:
//   auto model = std::make_shared<hg::nn::Sequential>(
//       hg::nn::Linear(784, 256), hg::nn::ReLU(), hg::nn::Linear(256, 10));
//   hg::nn::Sequential model{hg::nn::Linear(784, 256), hg::nn::ReLU(), hg::nn::Linear(256, 10)};
// A module value is moved into a new shared_ptr (its tensors are shared handles).
// Braces construct the layers left to right; in parentheses C++ leaves the
// order unspecified (GCC: right to left), which matters only when the layers
// draw their initial weights from one generator and the values must repeat.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  // clang-format off
  template <typename... Ms>
    requires(sizeof...(Ms) > 0 && (detail::ModuleArg<Ms> && ...) &&
             !(sizeof...(Ms) == 1 && (std::is_same_v<std::remove_cvref_t<Ms>, Sequential> && ...)))
  Sequential(Ms&&... modules) {  // NOLINT(google-explicit-constructor): reads like libtorch
    (push_back(detail::to_module_ptr(std::forward<Ms>(modules))), ...);
  }
  void push_back(std::shared_ptr<Module> module);
  template <typename M>
    requires std::derived_from<std::remove_cvref_t<M>, Module>
  void push_back(M&& module) {
    push_back(detail::to_module_ptr(std::forward<M>(module)));
  }
  // clang-format on
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return modules_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// A list of modules, registered as "0", "1", ... like torch.nn.ModuleList:
// it holds and names them (parameters, state_dict, to(), printing) but has no
// forward; the owner calls them, with whatever inputs they take:
//   hg::nn::ModuleList layers;
//   for (int i = 0; i < 4; ++i) layers.push_back(std::make_shared<Block>());
//   for (auto& m : layers) x = m->forward(x);              // one-tensor forward
//   x = layers.at<Block>(0)->forward(x, mask);            // the typed one
class ModuleList : public Module {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  // clang-format off
  template <typename M>
    requires std::derived_from<std::remove_cvref_t<M>, Module>
  void push_back(M&& module) {
    push_back(detail::to_module_ptr(std::forward<M>(module)));
  }
  // clang-format on
  std::string type_name() const override { return "ModuleList"; }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  // Module i as its own type (throws naming both types when it is not a T).
  template <typename T>
  std::shared_ptr<T> at(size_t i) const {
    auto t = std::dynamic_pointer_cast<T>((*this)[i]);
    if (t == nullptr) wrong_type(i, typeid(T).name());
    return t;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  [[noreturn]] void wrong_type(size_t i, const char* wanted) const;
  std::vector<std::shared_ptr<Module>> modules_;
};

// Modules by name in insertion order, like torch.nn.ModuleDict (each
// registered under its key); no forward.
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> modules);
  // Adds `module` under `key` (a new key: replacing a registered module is refused).
  void insert(const std::string& key, std::shared_ptr<Module> module);
  std::string type_name() const override { return "ModuleDict"; }
  size_t size() const { return items_.size(); }
  bool contains(const std::string& key) const;
  std::vector<std::string> keys() const;
  const std::shared_ptr<Module>& operator[](const std::string& key) const;
  template <typename T>
  std::shared_ptr<T> at(const std::string& key) const {
    auto t = std::dynamic_pointer_cast<T>((*this)[key]);
    if (t == nullptr) wrong_type(key, typeid(T).name());
    return t;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  [[noreturn]] void wrong_type(const std::string& key, const char* wanted) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> items_;
};

// ---- sequence-model layers: LayerNorm, RMSNorm, Embedding ---------------------------

// torch.nn.LayerNorm: normalises over the trailing normalized_shape, then
// weight (ones) and bias (zeros) when elementwise_affine (kernels/norm/norm.h).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;

  Tensor weight;  // normalized_shape, or undefined
  Tensor bias;    // normalized_shape, or undefined

 private:
  Shape normalized_shape_;
  double eps_;
};

// torch.nn.RMSNorm: x / sqrt(mean(x^2) + eps) * weight; eps defaults to the
// machine epsilon of the input's dtype, as torch's.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;

  Tensor weight;  // normalized_shape, or undefined

 private:
  Shape normalized_shape_;
  std::optional<double> eps_;
};

// torch.nn.Embedding: weight [num_embeddings, embedding_dim] ~ N(0, 1), the
// padding_idx row zeroed and given no gradient. forward takes i64/i32 indices of
// any shape and returns indices.shape + [embedding_dim].
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            Generator* gen = nullptr);
  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override;

  Tensor weight;  // [num_embeddings, embedding_dim]

 private:
  int64_t num_embeddings_, embedding_dim_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace hg::nn

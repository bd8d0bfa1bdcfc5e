// hg::nn::Module — the base of every layer, like torch::nn::Module.
//
//   struct Mlp : hg::nn::Module {
//     std::shared_ptr<hg::nn::Linear> fc1, fc2;
//     Mlp() {
//       fc1 = register_module("fc1", std::make_shared<hg::nn::Linear>(784, 256));
//       fc2 = register_module("fc2", std::make_shared<hg::nn::Linear>(256, 10));
//     }
//     hg::Tensor forward(const hg::Tensor& x) override { return fc2->forward(hg::relu(fc1->forward(x))); }
//   };
//
// Parameters and buffers are kept in registration order under dotted names
// ("fc1.weight"). to(Device)/to(DType) convert them in place (Tensor::set_data),
// so handles a layer holds stay valid; to(DType) converts floating tensors only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace hg::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  virtual ~Module() = default;

  // Single-input forward; layers override it (Sequential chains it).
  virtual Tensor forward(const Tensor& x);
  // Type name for printing and errors: the class name without namespaces
  // ("Linear", "Mlp"), unless a layer overrides it.
  virtual std::string type_name() const;
  // What the module prints inside its parentheses, like PyTorch's extra_repr
  // ("in_features=784, out_features=256"); empty by default.
  virtual std::string extra_repr() const { return {}; }

  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  std::vector<Tensor> parameters(bool recurse = true) const;
  // The number of parameter elements (each shared parameter once), e.g. for
  // "124.4M parameters"; trainable_only counts those that require grad.
  int64_t num_parameters(bool trainable_only = false) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }

  // Every module of the tree, depth first in registration order, under dotted
  // names; this module first (name `prefix`) when include_self. A module that is
  // not owned by a shared_ptr appears as a non-owning pointer to itself.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(const std::string& prefix = "",
                                                                             bool include_self = true);
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);
  // Calls fn on this module, then on every descendant (libtorch's order):
  //   model->apply([](hg::nn::Module& m) { if (auto* l = dynamic_cast<hg::nn::Linear*>(&m)) ...; });
  void apply(const std::function<void(Module&)>& fn);
  void apply(const std::function<void(const std::string& name, Module&)>& fn, const std::string& prefix = "");

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void to(Device device);
  void to(DType dtype);  // floating parameters and buffers only
  void to(Device device, DType dtype) {
    to(dtype);
    to(device);
  }
  // to(dtype) except for the submodules `keep` selects, which (with all their
  // descendants) stay as they are: choose which parts of a model run in
  // 16 bits (Apex's keep_batchnorm_fp32), by dotted name or by type, e.g.
  //   model->to(hg::kF16, [](const std::string& name, const Module& m) { return m.type_name() == "LayerNorm"; });
  void to(DType dtype, const std::function<bool(const std::string& name, const Module& m)>& keep);
  // Sets every parameter's .grad to none (or to zeros in place).
  void zero_grad(bool set_to_none = true);

  // Parameters then buffers, dotted names, in registration order.
  NamedTensors state_dict() const;
  // Copies values in place. strict: names must match exactly; shapes and
  // dtypes always must. Errors list every missing, unexpected or mismatched key.
  void load_state_dict(const NamedTensors& state, bool strict = true);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect(NamedTensors& out, const std::string& prefix, bool params, bool recurse) const;

  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Prints the module tree like PyTorch's repr:
//   Sequential(
//     (0): Linear(in_features=784, out_features=256, bias=true)
//     (1): ReLU()
//   )
std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace hg::nn

#include "nn/module.h"

#include <map>
#include <ostream>
#include <sstream>

#include "autograd/grad_mode.h"

namespace hg::nn {

Tensor Module::forward(const Tensor&) {
  HG_FAIL(type_name(), " has no single-input forward(); call its own forward method");
}

void Module::check_new_name(const std::string& name) const {
  HG_CHECK(!name.empty() && name.find('.') == std::string::npos, "module member name '", name,
           "' must be non-empty and contain no '.'");
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list) {
      if (n == name) return true;
    }
    return false;
  };
  HG_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), type_name(), ": the name '", name,
           "' is already registered; every parameter, buffer and submodule needs its own name");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name);
  HG_CHECK(t.defined(), "register_parameter('", name, "'): the tensor is undefined");
  if (requires_grad) t.requires_grad_(true);
  parameters_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(name);
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  HG_CHECK(module != nullptr, "register_module('", name, "'): the module is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(NamedTensors& out, const std::string& prefix, bool params, bool recurse) const {
  for (const auto& [name, t] : params ? parameters_ : buffers_) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(out, prefix + name + ".", params, true);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect(out, "", true, recurse);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect(out, "", false, recurse);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (const Tensor& t : parameters()) t.set_data(t.to(device));
  for (const Tensor& t : buffers()) t.set_data(t.to(device));
}

void Module::to(DType dtype) {
  HG_CHECK(is_floating(dtype), "Module::to(", dtype, "): modules convert to floating dtypes only");
  NoGradGuard no_grad;
  for (const Tensor& t : parameters()) {
    if (is_floating(t.dtype())) t.set_data(t.to(dtype));
  }
  for (const Tensor& t : buffers()) {
    if (is_floating(t.dtype())) t.set_data(t.to(dtype));
  }
}

void Module::to(DType dtype, const std::function<bool(const std::string& name, const Module& m)>& keep) {
  HG_CHECK(is_floating(dtype), "Module::to(", dtype, "): modules convert to floating dtypes only");
  NoGradGuard no_grad;
  // This module's own tensors, then each child unless kept (with its subtree).
  std::function<void(Module&, const std::string&)> convert = [&](Module& m, const std::string& prefix) {
    for (const Tensor& t : m.parameters(/*recurse=*/false)) {
      if (is_floating(t.dtype())) t.set_data(t.to(dtype));
    }
    for (const Tensor& t : m.buffers(/*recurse=*/false)) {
      if (is_floating(t.dtype())) t.set_data(t.to(dtype));
    }
    for (const auto& [name, child] : m.children_) {
      const std::string full = prefix.empty() ? name : prefix + "." + name;
      if (!keep || !keep(full, *child)) convert(*child, full);
    }
  };
  convert(*this, "");
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) {
    if (set_to_none) {
      p.impl_ptr()->grad.reset();
    } else if (p.grad().defined()) {
      p.grad().zero_();
    }
  }
}

NamedTensors Module::state_dict() const {
  NamedTensors out = named_parameters();
  for (auto& entry : named_buffers()) out.push_back(std::move(entry));
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::map<std::string, Tensor> given;
  for (const auto& [name, t] : state) given[name] = t;
  std::vector<std::string> missing, unexpected, mismatched;
  const NamedTensors own = state_dict();
  std::map<std::string, bool> own_names;
  for (const auto& [name, t] : own) {
    own_names[name] = true;
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
      continue;
    }
    if (it->second.sizes() != t.sizes() || it->second.dtype() != t.dtype()) {
      std::ostringstream os;
      os << name << " (expected " << t.dtype() << " " << t.shape_str() << ", got " << it->second.dtype() << " "
         << it->second.shape_str() << ")";
      mismatched.push_back(os.str());
    }
  }
  for (const auto& [name, _] : state) {
    if (!own_names.count(name)) unexpected.push_back(name);
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  HG_CHECK(mismatched.empty(), "load_state_dict: shape or dtype mismatch for ", join(mismatched),
           "; convert the model (to(dtype)) or the checkpoint first");
  HG_CHECK(!strict || (missing.empty() && unexpected.empty()), "load_state_dict: ",
           missing.empty() ? "" : "missing keys: " + join(missing) + "; ",
           unexpected.empty() ? "" : "unexpected keys: " + join(unexpected) + "; ",
           "pass strict=false to load a partial state");
  NoGradGuard no_grad;
  for (const auto& [name, t] : own) {
    auto it = given.find(name);
    if (it != given.end()) {
      Tensor target = t;
      target.copy_(it->second);
    }
  }
}

namespace {
void print_module(std::ostream& os, const Module& m, int indent) {
  os << m.type_name();
  const auto children = m.named_children();
  if (children.empty()) return;
  os << "(\n";
  for (const auto& [name, child] : children) {
    os << std::string(static_cast<size_t>(indent + 2), ' ') << "(" << name << "): ";
    print_module(os, *child, indent + 2);
    os << "\n";
  }
  os << std::string(static_cast<size_t>(indent), ' ') << ")";
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Module& m) {
  print_module(os, m, 0);
  return os;
}

}  // namespace hg::nn

#include "nn/module.h"

#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

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

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) {
    if (!trainable_only || p.requires_grad()) n += p.numel();
  }
  return n;
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
  for (const auto& [name, t] : state) {
    // Two entries for one name would make the result depend on their order.
    HG_CHECK(given.emplace(name, t).second, "load_state_dict: the key '", name,
             "' appears twice in the state; each parameter or buffer may be given once");
  }
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

std::string Module::type_name() const {
  // The dynamic class name without namespaces: "hg::nn::ReLU" -> "ReLU".
  const char* mangled = typeid(*this).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::string full = (status == 0 && demangled) ? demangled.get() : mangled;
  // The last "::" outside template arguments.
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i + 1 < full.size(); ++i) {
    if (full[i] == '<') ++depth;
    if (full[i] == '>') --depth;
    if (depth == 0 && full[i] == ':' && full[i + 1] == ':') start = i + 2;
  }
  return full.substr(start);
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules(const std::string& prefix,
                                                                                   bool include_self) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  if (include_self) {
    std::shared_ptr<Module> self = weak_from_this().lock();
    // Not owned by a shared_ptr (a module on the stack): a non-owning handle.
    if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
    out.emplace_back(prefix, std::move(self));
  }
  for (const auto& [name, child] : children_) {
    const std::string child_name = prefix.empty() ? name : prefix + "." + name;
    auto sub = child->named_modules(child_name, true);
    out.insert(out.end(), std::make_move_iterator(sub.begin()), std::make_move_iterator(sub.end()));
  }
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, m] : named_modules("", include_self)) out.push_back(std::move(m));
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (const auto& [name, child] : children_) child->apply(fn);
}

void Module::apply(const std::function<void(const std::string& name, Module&)>& fn, const std::string& prefix) {
  fn(prefix, *this);
  for (const auto& [name, child] : children_) child->apply(fn, prefix.empty() ? name : prefix + "." + name);
}

namespace {
// PyTorch's repr: "Name(extra)" for a leaf; otherwise the extra_repr line and
// "(child): ..." lines indented inside "Name(" ... ")". A layer whose
// type_name() already carries its arguments ("Linear(in_features=...)") prints
// that name as it is.
void print_module(std::ostream& os, const Module& m, int indent) {
  const std::string name = m.type_name();
  const bool has_args = name.find('(') != std::string::npos;
  const std::string extra = m.extra_repr();
  const auto children = m.named_children();
  if (children.empty()) {
    os << name;
    if (!has_args) os << "(" << extra << ")";
    return;
  }
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  os << name << "(\n";
  if (!extra.empty()) os << pad << extra << "\n";
  for (const auto& [child_name, child] : children) {
    os << pad << "(" << child_name << "): ";
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

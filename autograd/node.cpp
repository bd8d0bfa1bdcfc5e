#include "autograd/node.h"

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/hooks.h"
#include "kernels/ops.h"

namespace hg::autograd {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  for (Edge& e : next_edges) pending.push_back(std::move(e.node));
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    // If we hold the last reference, take its children before it dies so its
    // own destructor finds nothing to recurse into.
    if (node && node.use_count() == 1) {
      for (Edge& e : node->next_edges) pending.push_back(std::move(e.node));
    }
  }
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  tensor_ = t.detach();
  version_ = t.version();
}

Tensor SavedTensor::unpack(const Node& owner) const {
  HG_CHECK(!released_, "trying to backward through the graph a second time (", owner.name(),
           " already freed its saved tensors); call backward(grad, /*retain_graph=*/true) the "
           "first time if you need to backward twice");
  if (!tensor_.defined()) return tensor_;
  HG_CHECK(tensor_.version() == version_, "one of the tensors needed for gradient computation ",
           "has been modified by an in-place operation: it was saved by ", owner.name(),
           " at version ", version_, " and is now at version ", tensor_.version(),
           "; use an out-of-place op (or clone() before modifying)");
  return tensor_;
}

FunctionNode::FunctionNode(std::string op_name, std::vector<SavedTensor> saved, Backward backward)
    : op_name_(std::move(op_name)), saved_(std::move(saved)), backward_(std::move(backward)) {
  sequence_nr = g_next_sequence_nr.fetch_add(1);
}

Grads FunctionNode::apply(const Tensor& grad_output) {
  HG_CHECK(!released_, "trying to backward through the graph a second time (", op_name_,
           " already freed its saved tensors); call backward(grad, /*retain_graph=*/true) the "
           "first time if you need to backward twice");
  return backward_(grad_output, *this);
}

void FunctionNode::release_saved() {
  for (SavedTensor& s : saved_) s.release();
  released_ = true;
}

Tensor FunctionNode::saved(size_t i) const { return saved_.at(i).unpack(*this); }

Grads AccumulateGrad::apply(const Tensor& grad_output) {
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (leaf == nullptr || !grad_output.defined()) return {};
  Tensor leaf_tensor(leaf);
  HG_CHECK(grad_output.sizes() == leaf->sizes, "gradient of shape ", grad_output.shape_str(),
           " does not match its leaf of shape ", leaf_tensor.shape_str());
  // Gradients accumulate in the leaf's dtype and device; a 16-bit leaf adds in
  // fp32 and rounds once per accumulation. A fresh tensor every time, so a
  // gradient shared by two leaves (e.g. from add) is never aliased.
  //
  // Note [Stealing the incoming gradient]
  // As in PyTorch's AccumulateGrad, the first gradient of a leaf is the
  // incoming buffer itself, not a copy, when nothing else can see it: the
  // engine's slot and `incoming` are the tensor's only owners, no other tensor
  // (no view) shares its storage, it covers that storage densely, and it is no
  // graph's output. A weight gradient of a Linear is then never copied (a
  // memmove of every parameter each step, 1% of a 4x4096 bf16 MLP step).
  const Tensor incoming = grad_output.to(leaf_tensor.device(), leaf->dtype);
  if (leaf->grad == nullptr) {
    const bool converted = !same(incoming, grad_output);
    const TensorImpl* in = incoming.impl_ptr();
    const bool sole_owner = incoming.impl_shared().use_count() == 2 && in->storage != nullptr &&
                            in->storage.use_count() == 1 && in->autograd_meta == nullptr && !in->requires_grad &&
                            in->offset == 0 && incoming.is_contiguous() && incoming.nbytes() == in->storage->nbytes();
    leaf_tensor.set_grad(converted ? incoming.contiguous() : sole_owner ? incoming : incoming.clone());
  } else {
    leaf_tensor.set_grad(ops::add(leaf_tensor.grad(), incoming));
  }
  detail::run_post_accumulate_grad_hooks(leaf_tensor);  // Note [Backward hooks]
  return {};
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->defined() && t->requires_grad()) return true;
  }
  return false;
}

std::shared_ptr<Node> grad_fn_of(const Tensor& t) {
  if (!t.defined() || t.impl_ptr()->autograd_meta == nullptr) return nullptr;
  return t.impl_ptr()->autograd_meta->grad_fn;
}

Edge edge_to(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl* impl = t.impl_ptr();
  if (impl->autograd_meta == nullptr) impl->autograd_meta = std::make_shared<AutogradMeta>();
  AutogradMeta& meta = *impl->autograd_meta;
  if (meta.grad_fn) return {meta.grad_fn, true, t.sizes(), t.dtype(), t.device()};
  // A leaf: reuse its accumulator while any graph still holds it.
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    // Recover the owning shared_ptr through a fresh handle sharing this impl.
    acc = std::make_shared<AccumulateGrad>(std::shared_ptr<TensorImpl>(t.impl_shared()));
    meta.grad_accumulator = acc;
  }
  return {acc, true, t.sizes(), t.dtype(), t.device()};
}

void set_history(const Tensor& output, const std::shared_ptr<Node>& node) {
  TensorImpl* impl = output.impl_ptr();
  if (impl->autograd_meta == nullptr) impl->autograd_meta = std::make_shared<AutogradMeta>();
  impl->autograd_meta->grad_fn = node;
  impl->requires_grad = true;
}

void record(const char* op_name, const Tensor& output, std::initializer_list<const Tensor*> inputs,
            std::vector<SavedTensor> saved, FunctionNode::Backward backward) {
  auto node = std::make_shared<FunctionNode>(op_name, std::move(saved), std::move(backward));
  node->next_edges.reserve(inputs.size());
  for (const Tensor* t : inputs) node->next_edges.push_back(t != nullptr ? edge_to(*t) : Edge{});
  set_history(output, node);
}

}  // namespace hg::autograd

// The autograd graph: nodes, edges and saved tensors.
//
// Note [Autograd graph]
// Every op output that requires grad points (TensorImpl::autograd_meta->grad_fn)
// at the Node that made it. A Node holds one backward closure, which maps the
// gradient of its single output to gradients of its inputs, and one Edge per
// input: the input's own grad_fn, or for a leaf that requires grad its
// AccumulateGrad node (cached weakly in the leaf's meta), or nothing for
// inputs that do not require grad. Saved tensors are stored detached (no
// grad_fn), so an op that saves its own output creates no reference cycle;
// each remembers the storage version at save time and refuses to unpack after
// an in-place write.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hg::autograd {

class Node;

// Note [Gradient metadata]
// An edge remembers its input's shape, dtype and device (PyTorch's
// InputMetadata). The engine checks each gradient a node returns against
// them: a gradient of another shape or device is an error naming the node
// and the input; one of another dtype is converted to the input's, as
// PyTorch's validate_outputs does (an f32 gradient a custom function returns
// for an f16 input becomes f16 there, not a dtype error in a later op).
struct Edge {
  std::shared_ptr<Node> node;  // null: the input needs no gradient
  bool has_meta = false;       // false for internal edges (split's gather): not checked
  Shape sizes{};
  DType dtype = kF32;
  Device device = Device::cpu();
};

// A tensor kept for the backward pass.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  // The saved value; throws if it was released (backward ran without
  // retain_graph) or modified in place since it was saved.
  Tensor unpack(const Node& owner) const;
  void release() { tensor_ = Tensor(); released_ = true; }
  bool defined() const { return tensor_.defined(); }

 private:
  Tensor tensor_;            // detached view of the saved tensor
  uint64_t version_ = 0;
  bool released_ = false;
};

using Grads = std::vector<Tensor>;  // one per input; undefined = no gradient

class Node {
 public:
  // Releases the graph behind this node iteratively, so dropping a
  // 100,000-op chain does not recurse 100,000 destructors deep.
  virtual ~Node();
  // Gradients for each input edge, given the gradient of this node's output.
  virtual Grads apply(const Tensor& grad_output) = 0;
  // Frees saved tensors (after a backward pass without retain_graph).
  virtual void release_saved() {}
  virtual std::string name() const = 0;

  std::vector<Edge> next_edges;
  uint64_t sequence_nr = 0;  // creation order; the engine runs newer nodes first
};

// An op's backward: a closure over its saved tensors.
class FunctionNode final : public Node {
 public:
  using Backward = std::function<Grads(const Tensor& grad_output, const FunctionNode& self)>;
  FunctionNode(std::string op_name, std::vector<SavedTensor> saved, Backward backward);
  Grads apply(const Tensor& grad_output) override;
  void release_saved() override;
  std::string name() const override { return op_name_; }
  // The i-th saved tensor, checked (see SavedTensor::unpack).
  Tensor saved(size_t i) const;

 private:
  std::string op_name_;
  std::vector<SavedTensor> saved_;
  Backward backward_;
  bool released_ = false;
};

// Writes the incoming gradient into a leaf's .grad (summing across calls).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : leaf_(leaf) {}
  Grads apply(const Tensor& grad_output) override;
  std::string name() const override { return "AccumulateGrad"; }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// ---- helpers for writing differentiable ops ------------------------------------------

// True when grad mode is on and any input requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
// The edge a gradient for `t` should flow into (empty when t needs none).
Edge edge_to(const Tensor& t);
std::shared_ptr<Node> grad_fn_of(const Tensor& t);
// Makes `node` the grad_fn of `output` and marks it as requiring grad.
void set_history(const Tensor& output, const std::shared_ptr<Node>& node);
// Builds a FunctionNode with edges to `inputs` and attaches it to `output`.
void record(const char* op_name, const Tensor& output, std::initializer_list<const Tensor*> inputs,
            std::vector<SavedTensor> saved, FunctionNode::Backward backward);

}  // namespace hg::autograd

// Note [Engine order]
// 1. Walk the graph from the root's node (iteratively) and count, for every
//    node, how many edges point at it.
// 2. Run nodes from a max-heap on sequence_nr (a node created later runs
//    first, which is a valid topological order since inputs exist before the
//    ops that use them). A node runs when every edge into it has delivered,
//    with the sum of the gradients it received.
// 3. Each node's outputs are added into its children's buffers; children
//    whose count drops to zero join the heap.
#include "autograd/engine.h"

#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/hooks.h"
#include "autograd/node.h"
#include "core/profiler.h"
#include "kernels/ops.h"

namespace hg::autograd {

namespace {

struct NewerFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Note [Gradient metadata] in autograd/node.h: the gradient `node` returned
// for its input edge i, checked against that input and converted to its dtype.
Tensor checked_grad(const Node& node, size_t i, Tensor g) {
  const Edge& e = node.next_edges[i];
  if (!e.has_meta) return g;
  HG_CHECK(g.sizes() == e.sizes, "backward of ", node.name(), ": the gradient for input ", i, " has shape ",
           g.shape_str(), ", but that input has shape ", shape_to_string(e.sizes),
           "; a backward must return one gradient per input, shaped like it");
  HG_CHECK(g.device() == e.device, "backward of ", node.name(), ": the gradient for input ", i, " is on ", g.device(),
           ", but that input is on ", e.device);
  if (g.dtype() != e.dtype) g = g.to(e.dtype);
  return g;
}
}  // namespace

void backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  HG_CHECK(root.defined(), "backward: called on an undefined tensor");
  HG_CHECK(root.requires_grad(), "backward: the tensor does not require grad and has no grad_fn; ",
           "mark the inputs with requires_grad_() before computing it");
  Tensor seed = grad;
  if (!seed.defined()) {
    HG_CHECK(root.numel() == 1, "backward: grad can be created implicitly only for one-element ",
             "outputs, but this tensor has shape ", root.shape_str(),
             "; pass backward(grad) with a gradient of the same shape");
    seed = ones(root.sizes(), {.dtype = root.dtype(), .device = root.device()});
  }
  HG_CHECK(seed.sizes() == root.sizes(), "backward: grad has shape ", seed.shape_str(),
           " but the tensor has shape ", root.shape_str());

  NoGradGuard no_grad;  // the backward pass itself records nothing
  detail::BackwardScope callbacks;  // queue_callback (Note [Backward hooks])
  const std::shared_ptr<Node> root_node = edge_to(root).node;

  // 1. dependency counts
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root_node.get()};
  std::unordered_map<Node*, bool> seen{{root_node.get(), true}};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges) {
      if (!e.node) continue;
      ++dependencies[e.node.get()];
      if (!seen[e.node.get()]) {
        seen[e.node.get()] = true;
        stack.push_back(e.node.get());
      }
    }
  }

  // 2-3. run in order
  std::unordered_map<Node*, Tensor> buffers{{root_node.get(), seed}};
  std::priority_queue<Node*, std::vector<Node*>, NewerFirst> ready;
  ready.push(root_node.get());
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Tensor grad_in = std::move(buffers[node]);
    buffers.erase(node);
    Grads grads_out;
    if (grad_in.defined()) {
      // Note [Profiler]: each backward node is a row of the profile.
      const profiler::OpScope profiled(profiler::Kind::backward, profiler::active() ? node->name() : std::string(),
                                       {&grad_in});
      grads_out = node->apply(grad_in);
    }
    if (!retain_graph) node->release_saved();
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      Node* child = node->next_edges[i].node.get();
      if (child == nullptr) continue;
      if (i < grads_out.size() && grads_out[i].defined()) {
        const Tensor g = checked_grad(*node, i, std::move(grads_out[i]));
        Tensor& buffer = buffers[child];
        if (buffer.defined()) {
          const profiler::Range profiled("autograd.accumulate");  // a tensor used twice: grads summed
          buffer = ops::add(buffer, g);
        } else {
          buffer = g;
        }
      }
      if (--dependencies[child] == 0) ready.push(child);
    }
  }
  callbacks.finish();
}

namespace {
// Tensor::backward (core) forwards here.
const bool kHookInstalled = [] {
  register_backward_hook(&backward);
  return true;
}();
}  // namespace

}  // namespace hg::autograd

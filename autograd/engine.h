// The backward engine: runs the graph behind a tensor in dependency order
// with an explicit worklist (no recursion, so a 10,000-op chain is fine).
#pragma once

#include "core/tensor.h"

namespace hg::autograd {

// Accumulates d(root)/d(leaf) * grad into every reachable leaf's .grad.
// `grad` may be undefined only for a one-element root (it defaults to 1).
// Without retain_graph, the saved tensors of every node that ran are freed.
void backward(const Tensor& root, const Tensor& grad = Tensor(), bool retain_graph = false);

}  // namespace hg::autograd

// Differentiable embedding, indexing and shape ops (index_select, gather,
// scatter_add, cat, stack, split, chunk, masked_fill, tril/triu). Each forward
// is followed by its backward; closures capture only what they use. Kernels:
// kernels/index/index.h.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/copy.h"
#include "kernels/index/index.h"
#include "kernels/ops.h"

namespace hg {

using autograd::any_requires_grad;
using autograd::FunctionNode;
using autograd::Grads;
using autograd::record;
using autograd::SavedTensor;

// ---- embedding and indexing ------------------------------------------------------------------

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  HG_AUTOCAST(
      OpId::embedding, [&](const Tensor& i, const Tensor& w) { return embedding(i, w, padding_idx); }, indices,
      weight);  // Note [Autocast]
  Tensor y = ops::embedding(weight, indices);
  if (any_requires_grad({&weight})) {
    record("embedding", y, {&weight}, {SavedTensor(indices)},
           [padding_idx, rows = weight.size(0), dtype = weight.dtype()](const Tensor& g, const FunctionNode& self)
               -> Grads { return {ops::embedding_backward(g, self.saved(0), rows, padding_idx).to(dtype)}; });
  }
  return y;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  HG_AUTOCAST(
      OpId::index_select, [&](const Tensor& p, const Tensor& i) { return index_select(p, dim, i); }, x,
      index);  // Note [Autocast]
  Tensor y = ops::index_select(x, dim, index);
  if (any_requires_grad({&x})) {
    record("index_select", y, {&x}, {SavedTensor(index)},
           [dim, shape = x.sizes(), dtype = x.dtype()](const Tensor& g, const FunctionNode& self) -> Grads {
             const Tensor zero = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
             return {ops::index_add(zero, dim, self.saved(0).reshape({-1}), g).to(dtype)};
           });
  }
  return y;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  HG_AUTOCAST(
      OpId::gather, [&](const Tensor& p, const Tensor& i) { return gather(p, dim, i); }, x, index);  // Note [Autocast]
  Tensor y = ops::gather(x, dim, index);
  if (any_requires_grad({&x})) {
    record("gather", y, {&x}, {SavedTensor(index)},
           [dim, shape = x.sizes(), dtype = x.dtype()](const Tensor& g, const FunctionNode& self) -> Grads {
             const Tensor zero = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
             return {ops::scatter_add(zero, dim, self.saved(0), g).to(dtype)};
           });
  }
  return y;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  HG_AUTOCAST(
      OpId::scatter_add, [&](const Tensor& p, const Tensor& i, const Tensor& s) { return scatter_add(p, dim, i, s); },
      x, index, src);  // Note [Autocast]
  Tensor y = ops::scatter_add(x, dim, index, src);
  if (any_requires_grad({&x, &src})) {
    record("scatter_add", y, {&x, &src}, {SavedTensor(index)},
           [dim, dx = x.dtype(), src_shape = src.sizes(), ds = src.dtype(), need_src = src.requires_grad()](
               const Tensor& g, const FunctionNode& self) -> Grads {
             Grads out(2);
             out[0] = g.to(dx);
             if (need_src) {
               const Tensor saved_index = self.saved(0);
               Tensor picked = ops::gather(g, dim, saved_index);
               if (picked.sizes() != src_shape) {  // src larger than index: zeros elsewhere
                 Tensor full_grad = zeros(src_shape, {.dtype = picked.dtype(), .device = picked.device()});
                 Tensor region = full_grad;
                 for (int64_t d = 0; d < picked.dim(); ++d) region = region.narrow(d, 0, picked.size(d));
                 copy_into(region, picked);
                 picked = full_grad;
               }
               out[1] = picked.to(ds);
             }
             return out;
           });
  }
  return y;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (amp::autocast_active()) {  // Note [Autocast], for a list of inputs
    const std::vector<Tensor> cast = amp::autocast_inputs(OpId::cat, tensors);
    amp::AutocastExcluded excluded;
    return cat(cast, dim);
  }
  Tensor y = ops::cat(tensors, dim);
  bool any = false;
  for (const Tensor& t : tensors) any = any || any_requires_grad({&t});
  if (any) {
    const int64_t d = wrap_dim(dim, y.dim(), "cat");
    std::vector<int64_t> lengths;
    std::vector<DType> dtypes;
    for (const Tensor& t : tensors) {
      lengths.push_back(t.size(d));
      dtypes.push_back(t.dtype());
    }
    // A node with one edge per input (autograd::record takes a fixed list).
    auto node = std::make_shared<FunctionNode>("cat", std::vector<SavedTensor>{},
                                               [d, lengths, dtypes](const Tensor& g, const FunctionNode&) -> Grads {
                                                 Grads out;
                                                 int64_t offset = 0;
                                                 for (size_t i = 0; i < lengths.size(); ++i) {
                                                   out.push_back(g.narrow(d, offset, lengths[i]).to(dtypes[i]));
                                                   offset += lengths[i];
                                                 }
                                                 return out;
                                               });
    for (const Tensor& t : tensors) node->next_edges.push_back(autograd::edge_to(t));
    autograd::set_history(y, node);
  }
  return y;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (amp::autocast_active()) {  // Note [Autocast], for a list of inputs
    const std::vector<Tensor> cast = amp::autocast_inputs(OpId::stack, tensors);
    amp::AutocastExcluded excluded;
    return stack(cast, dim);
  }
  HG_CHECK(!tensors.empty(), "stack: needs at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    HG_CHECK(tensors[i].defined() && tensors[i].sizes() == tensors[0].sizes(), "stack: tensor ", i, " has shape ",
             tensors[i].defined() ? tensors[i].shape_str() : std::string("(undefined)"), " but tensor 0 has shape ",
             tensors[0].shape_str(), "; stack needs equal shapes");
  }
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> unsqueezed;
  for (const Tensor& t : tensors) unsqueezed.push_back(t.unsqueeze(d));  // records through the view hook
  return cat(unsqueezed, d);
}

namespace {

// Note [Split backward]
// The gradient of x from the gradients of its pieces, in one buffer: each
// piece's node copies its gradient into its slice of a buffer shaped like x
// (allocated, not zeroed, by the first piece to run), and a gather node
// between the pieces and x zero-fills only the slices no piece wrote, then
// passes the buffer on. One copy per piece that receives a gradient, no
// zero fill of the whole of x and no adds (recording each piece as a narrow
// view costs, per piece, a zero fill of x's size and a copy, plus an add per
// extra piece when the engine sums them).
//   The engine runs the gather node after every piece node of the pass
//   (dependency counts) and gives it the sum of what they returned: only the
//   first piece returns the buffer, the others return nothing, so that sum is
//   the buffer itself. The engine runs nodes newest first, so the pieces'
//   nodes and then the gather node run back to back. The shared state holds
//   the buffer weakly (the engine's gradient buffer owns it): if a pass
//   throws between them (a piece's copy failing), the buffer dies with the
//   engine's state and the next pass starts afresh.
struct SplitGradState {
  std::weak_ptr<TensorImpl> buffer;  // x's gradient under assembly in this pass
  std::vector<char> written;         // per piece: its slice holds its gradient
};

// The gather node: a Node of its own rather than a FunctionNode, because it
// holds no saved tensors and stays runnable after a pass without
// retain_graph, so that a later pass through other pieces of the same split
// still works (each piece's own node is a FunctionNode, freed like any op's).
class SplitGatherNode final : public autograd::Node {
 public:
  SplitGatherNode(std::shared_ptr<SplitGradState> state, int64_t d, std::vector<int64_t> offsets,
                  std::vector<int64_t> lengths)
      : state_(std::move(state)), d_(d), offsets_(std::move(offsets)), lengths_(std::move(lengths)) {}
  Grads apply(const Tensor& g) override {
    for (size_t i = 0; i < lengths_.size(); ++i) {
      if (!state_->written[i] && lengths_[i] > 0) g.narrow(d_, offsets_[i], lengths_[i]).zero_();
    }
    state_->buffer.reset();
    state_->written.assign(lengths_.size(), 0);
    return {g};
  }
  std::string name() const override { return "split"; }

 private:
  std::shared_ptr<SplitGradState> state_;
  int64_t d_;
  std::vector<int64_t> offsets_, lengths_;
};

void record_split(const Tensor& x, const std::vector<Tensor>& pieces, int64_t d, const std::vector<int64_t>& offsets) {
  auto state = std::make_shared<SplitGradState>();
  state->written.assign(pieces.size(), 0);
  std::vector<int64_t> lengths;
  for (const Tensor& p : pieces) lengths.push_back(p.size(d));
  auto gather = std::make_shared<SplitGatherNode>(state, d, offsets, lengths);
  gather->next_edges.push_back(autograd::edge_to(x));
  for (size_t i = 0; i < pieces.size(); ++i) {
    auto node = std::make_shared<FunctionNode>("split_piece", std::vector<SavedTensor>{},
                                               [state, i, d, off = offsets[i], len = lengths[i], base_shape = x.sizes(),
                                                dtype = x.dtype()](const Tensor& g, const FunctionNode&) -> Grads {
                                                 std::shared_ptr<TensorImpl> live = state->buffer.lock();
                                                 const bool first = live == nullptr;
                                                 Tensor base;
                                                 if (first) {
                                                   base = empty(base_shape, {.dtype = dtype, .device = g.device()});
                                                   state->buffer = base.impl_shared();
                                                   state->written.assign(state->written.size(), 0);
                                                 } else {
                                                   base = Tensor(std::move(live));
                                                 }
                                                 copy_into(base.narrow(d, off, len), g);
                                                 state->written[i] = 1;
                                                 return {first ? base : Tensor()};
                                               });
    // The gather node runs after every piece's (the engine's dependency
    // counts); its place in the creation order is just before the pieces.
    if (i == 0) gather->sequence_nr = node->sequence_nr;
    node->next_edges.push_back(autograd::Edge{gather});
    autograd::set_history(pieces[i], node);
  }
}

}  // namespace

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  HG_CHECK(x.dim() >= 1, "split: cannot split a rank-0 tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    HG_CHECK(s >= 0, "split: sizes must be >= 0, got ", shape_to_string(Shape(sizes.begin(), sizes.end())));
    total += s;
  }
  HG_CHECK(total == x.size(d), "split: sizes ", shape_to_string(Shape(sizes.begin(), sizes.end())), " sum to ", total,
           " but dim ", d, " of ", x.shape_str(), " has size ", x.size(d));
  std::vector<Tensor> out;
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  {
    NoGradGuard no_grad;  // the pieces record below, all together, not each as a narrow
    for (int64_t s : sizes) {
      out.push_back(x.narrow(d, offset, s));
      offsets.push_back(offset);
      offset += s;
    }
  }
  if (any_requires_grad({&x})) record_split(x, out, d, offsets);
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  HG_CHECK(x.dim() >= 1, "split: cannot split a rank-0 tensor");
  HG_CHECK(split_size > 0, "split: split_size must be > 0, got ", split_size);
  const int64_t n = x.size(wrap_dim(dim, x.dim(), "split"));
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += split_size) sizes.push_back(std::min(split_size, n - start));
  if (sizes.empty()) sizes.push_back(0);  // torch returns one empty piece for an empty dim
  return split_with_sizes(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  HG_CHECK(x.dim() >= 1, "chunk: cannot chunk a rank-0 tensor");
  HG_CHECK(chunks > 0, "chunk: chunks must be > 0, got ", chunks);
  const int64_t n = x.size(wrap_dim(dim, x.dim(), "chunk"));
  const int64_t size = std::max<int64_t>(1, (n + chunks - 1) / chunks);  // torch.chunk's rule
  return split(x, size, dim);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  HG_AUTOCAST(
      OpId::masked_fill, [&](const Tensor& p, const Tensor& m) { return masked_fill(p, m, value); }, x,
      mask);  // Note [Autocast]
  Tensor y = ops::masked_fill(x, mask, value);
  if (any_requires_grad({&x})) {
    record("masked_fill", y, {&x}, {SavedTensor(mask)}, [](const Tensor& g, const FunctionNode& self) -> Grads {
      return {ops::masked_fill(g, self.saved(0), 0.0)};
    });
  }
  return y;
}

namespace {
Tensor trilu(OpId op, const Tensor& x, int64_t diagonal) {
  HG_AUTOCAST(
      op, [&](const Tensor& p) { return trilu(op, p, diagonal); }, x);  // Note [Autocast]
  const bool upper = op == OpId::triu;
  Tensor y = upper ? ops::triu(x, diagonal) : ops::tril(x, diagonal);
  if (any_requires_grad({&x})) {
    record(op_name(op).data(), y, {&x}, {}, [upper, diagonal](const Tensor& g, const FunctionNode&) -> Grads {
      return {upper ? ops::triu(g, diagonal) : ops::tril(g, diagonal)};
    });
  }
  return y;
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return trilu(OpId::tril, x, diagonal); }
Tensor triu(const Tensor& x, int64_t diagonal) { return trilu(OpId::triu, x, diagonal); }

}  // namespace hg

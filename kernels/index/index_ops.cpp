// Argument checks, dtype rules, output allocation and device dispatch for the
// gather/scatter and shape ops (kernels/index/index.h). cat, stack and masked_fill
// are built from the copy and where kernels; the rest call the backends.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/copy.h"
#include "kernels/dispatch.h"
#include "kernels/index/index.h"
#include "kernels/ops.h"

namespace hg::ops {

namespace {

// The [outer, n, inner] split of `shape` around `dim`.
struct Split3 {
  int64_t outer = 1, n = 1, inner = 1;
};

Split3 split3(const Shape& shape, int64_t dim) {
  Split3 s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) s.outer *= shape[static_cast<size_t>(d)];
    if (d > dim) s.inner *= shape[static_cast<size_t>(d)];
  }
  s.n = shape[static_cast<size_t>(dim)];
  return s;
}

// i64 contiguous indices on x's device, checked for dtype and device.
Tensor checked_index(OpId op, const Tensor& index, const Tensor& x, const char* what = "index") {
  HG_CHECK(index.defined(), op_name(op), ": ", what, " is an undefined tensor");
  HG_CHECK(index.dtype() == kI64 || index.dtype() == kI32, op_name(op), ": ", what, " must be i64 or i32, got ",
           index.dtype(), " ", index.shape_str(), "; convert with .to(hg::kI64)");
  HG_CHECK(index.device() == x.device(), op_name(op), ": ", what, " is on ", index.device(), " but the input is on ",
           x.device(), "; move it with .to(", x.device(), ")");
  return index.to(kI64).contiguous();
}

// Host indices are checked here, where the user's shapes are known; CUDA
// kernels report through the device error flag instead (kernels/index/index.h).
void check_host_indices(OpId op, const Tensor& idx, int64_t n, const Tensor& indexed, int64_t dim, const char* what) {
  if (!idx.is_cpu()) return;
  const int64_t* p = static_cast<const int64_t*>(idx.data_ptr());
  for (int64_t i = 0; i < idx.numel(); ++i) {
    HG_CHECK(p[i] >= 0 && p[i] < n, op_name(op), ": index ", p[i], " at position ", i, " is out of range for dim ", dim,
             " of ", what, " ", indexed.shape_str(), " (size ", n, "); indices must be in [0, ", n, ")");
  }
}

void check_defined(OpId op, const Tensor& t, const char* what) {
  HG_CHECK(t.defined(), op_name(op), ": ", what, " is an undefined tensor");
}

IndexGeometry geometry_of(const Tensor& index, int64_t dim) {
  HG_CHECK(index.dim() <= kIndexMaxDims, "gather/scatter: tensors of rank ", index.dim(), " (shape ", index.shape_str(),
           ") exceed the supported ", kIndexMaxDims, " dims");
  IndexGeometry g;
  g.rank = static_cast<int>(index.dim());
  g.dim = static_cast<int>(dim);
  for (int d = 0; d < g.rank; ++d) g.sizes[d] = index.size(d);
  return g;
}

// gather/scatter_add: index has x's rank, and index.size(d) <= x.size(d) for
// every d != dim (and <= src.size(d) for every d when src is given).
void check_gather_shapes(OpId op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src) {
  HG_CHECK(index.dim() == x.dim(), op_name(op), ": index ", index.shape_str(), " must have the input's rank (input ",
           x.shape_str(), ")");
  for (int64_t d = 0; d < x.dim(); ++d) {
    HG_CHECK(d == dim || index.size(d) <= x.size(d), op_name(op), ": index ", index.shape_str(),
             " is larger than input ", x.shape_str(), " in dim ", d, "; index.size(d) <= input.size(d) for d != ", dim);
    if (src != nullptr) {
      HG_CHECK(src->dim() == x.dim() && index.size(d) <= src->size(d), op_name(op), ": index ", index.shape_str(),
               " is larger than src ", src->shape_str(), " in dim ", d, "; index.size(d) <= src.size(d)");
    }
  }
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  const OpId op = OpId::index_select;
  check_defined(op, x, "input");
  HG_CHECK(x.dim() >= 1, op_name(op), ": the input is rank 0; reshape it to [1] first");
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  const Tensor idx = checked_index(op, index, x);
  HG_CHECK(idx.dim() <= 1, op_name(op), ": index must be 1-D (or rank 0), got ", index.shape_str());
  const int64_t k = idx.numel();
  Shape out_shape = x.sizes();
  out_shape[static_cast<size_t>(d)] = k;
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  const Split3 s = split3(x.sizes(), d);
  HG_CHECK(k == 0 || s.n > 0, op_name(op), ": cannot select ", k, " entries from dim ", d, " of size 0 (input ",
           x.shape_str(), ")");
  check_host_indices(op, idx, s.n, x, d, "input");
  if (k == 0 || out.numel() == 0) return out;
  HG_BACKEND_CALL(x.device(), index_select, op, out.view({s.outer, k, s.inner}),
                  x.contiguous().view({s.outer, s.n, s.inner}), idx.view({k}));
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                 std::optional<int64_t> skip_index) {
  const OpId op = OpId::index_add;
  check_defined(op, x, "input");
  check_defined(op, src, "src");
  HG_CHECK(x.dim() >= 1, op_name(op), ": the input is rank 0; reshape it to [1] first");
  const int64_t d = wrap_dim(dim, x.dim(), "index_add");
  const Tensor idx = checked_index(op, index, x);
  HG_CHECK(idx.dim() <= 1, op_name(op), ": index must be 1-D, got ", index.shape_str());
  const int64_t k = idx.numel();
  Shape want = x.sizes();
  want[static_cast<size_t>(d)] = k;
  HG_CHECK(src.sizes() == want, op_name(op), ": src ", src.shape_str(), " must be ", shape_to_string(want),
           " (the input ", x.shape_str(), " with dim ", d, " of the index's length ", k, ")");
  HG_CHECK(src.device() == x.device(), op_name(op), ": src is on ", src.device(), " but the input is on ", x.device());
  Tensor out = x.clone();
  const Split3 s = split3(x.sizes(), d);
  check_host_indices(op, idx, s.n, x, d, "input");
  if (k == 0 || s.outer * s.inner == 0) return out;
  HG_CHECK(s.n > 0, op_name(op), ": cannot add into dim ", d, " of size 0 (input ", x.shape_str(), ")");
  HG_BACKEND_CALL(x.device(), index_add, op, out.view({s.outer, s.n, s.inner}), idx.view({k}),
                  src.to(x.dtype()).contiguous().view({s.outer, k, s.inner}), skip_index.value_or(kNoSkipIndex));
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  const OpId op = OpId::embedding;
  check_defined(op, weight, "weight");
  HG_CHECK(weight.dim() == 2, op_name(op), ": weight must be [num_embeddings, embedding_dim], got ",
           weight.shape_str());
  const Tensor idx = checked_index(op, indices, weight, "indices");
  const int64_t v = weight.size(0), c = weight.size(1), k = idx.numel();
  Shape out_shape = idx.sizes();
  out_shape.push_back(c);
  Tensor out = empty(out_shape, {.dtype = weight.dtype(), .device = weight.device()});
  check_host_indices(op, idx, v, weight, 0, "weight");
  if (k == 0 || c == 0) return out;
  HG_BACKEND_CALL(weight.device(), index_select, op, out.view({1, k, c}), weight.contiguous().view({1, v, c}),
                  idx.view({k}));
  return out;
}

Tensor embedding_backward(const Tensor& d_out, const Tensor& indices, int64_t num_weights,
                          std::optional<int64_t> padding_idx) {
  const OpId op = OpId::index_add;
  check_defined(op, d_out, "d_out");
  const Tensor idx = checked_index(op, indices, d_out, "indices");
  HG_CHECK(d_out.dim() == idx.dim() + 1 && Shape(d_out.sizes().begin(), d_out.sizes().end() - 1) == idx.sizes(),
           "embedding_backward: d_out ", d_out.shape_str(), " must be the indices' shape ", idx.shape_str(),
           " plus the embedding dim");
  HG_CHECK(num_weights >= 0, "embedding_backward: num_weights must be >= 0, got ", num_weights);
  std::optional<int64_t> skip;
  if (padding_idx) {
    const int64_t p = *padding_idx < 0 ? *padding_idx + num_weights : *padding_idx;
    HG_CHECK(p >= 0 && p < num_weights, "embedding: padding_idx ", *padding_idx, " is out of range for ", num_weights,
             " embeddings");
    skip = p;
  }
  const int64_t c = d_out.size(-1);
  const Tensor zero = zeros({num_weights, c}, {.dtype = d_out.dtype(), .device = d_out.device()});
  return index_add(zero, 0, idx.reshape({-1}), d_out.reshape({-1, c}), skip);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const OpId op = OpId::gather;
  check_defined(op, x, "input");
  HG_CHECK(x.dim() >= 1, op_name(op), ": the input is rank 0; reshape it to [1] first");
  const int64_t d = wrap_dim(dim, x.dim(), "gather");
  const Tensor idx = checked_index(op, index, x);
  check_gather_shapes(op, x, d, idx, nullptr);
  Tensor out = empty(idx.sizes(), {.dtype = x.dtype(), .device = x.device()});
  check_host_indices(op, idx, x.size(d), x, d, "input");
  if (out.numel() == 0) return out;
  HG_CHECK(x.size(d) > 0, op_name(op), ": cannot gather from dim ", d, " of size 0 (input ", x.shape_str(), ")");
  const Tensor xc = x.contiguous();
  IndexGeometry g = geometry_of(idx, d);
  for (int i = 0; i < g.rank; ++i) g.strides[0][i] = xc.stride(i);
  HG_BACKEND_CALL(x.device(), gather, out, xc, idx, g);
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const OpId op = OpId::scatter_add;
  check_defined(op, x, "input");
  check_defined(op, src, "src");
  HG_CHECK(x.dim() >= 1, op_name(op), ": the input is rank 0; reshape it to [1] first");
  HG_CHECK(src.device() == x.device(), op_name(op), ": src is on ", src.device(), " but the input is on ", x.device());
  const int64_t d = wrap_dim(dim, x.dim(), "scatter_add");
  const Tensor idx = checked_index(op, index, x);
  check_gather_shapes(op, x, d, idx, &src);
  const DType dtype = promote_types(x.dtype(), src.dtype());
  Tensor out = x.to(dtype).clone();
  check_host_indices(op, idx, x.size(d), x, d, "input");
  if (idx.numel() == 0) return out;
  HG_CHECK(x.size(d) > 0, op_name(op), ": cannot scatter into dim ", d, " of size 0 (input ", x.shape_str(), ")");
  const Tensor s = src.to(dtype);
  IndexGeometry g = geometry_of(idx, d);
  for (int i = 0; i < g.rank; ++i) {
    g.strides[0][i] = out.stride(i);
    g.strides[1][i] = s.stride(i);
    g.strides[2][i] = idx.stride(i);
  }
  HG_BACKEND_CALL(x.device(), scatter_add, out, idx, s, g);
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  HG_CHECK(!tensors.empty(), "cat: needs at least one tensor");
  const Tensor& first = tensors[0];
  for (size_t i = 0; i < tensors.size(); ++i) {
    HG_CHECK(tensors[i].defined(), "cat: tensor ", i, " is undefined");
  }
  HG_CHECK(first.dim() >= 1, "cat: zero-dimensional tensor ", first.shape_str(),
           " cannot be concatenated; use stack, or unsqueeze it first");
  const int64_t d = wrap_dim(dim, first.dim(), "cat");
  DType dtype = first.dtype();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    HG_CHECK(t.device() == first.device(), "cat: tensor ", i, " is on ", t.device(), " but tensor 0 is on ",
             first.device(), "; move them to one device");
    bool match = t.dim() == first.dim();
    for (int64_t k = 0; match && k < t.dim(); ++k) match = k == d || t.size(k) == first.size(k);
    HG_CHECK(match, "cat: tensor ", i, " has shape ", t.shape_str(), " but tensor 0 has shape ", first.shape_str(),
             "; sizes must match except in dim ", d);
    dtype = promote_types(dtype, t.dtype());
    total += t.size(d);
  }
  Shape out_shape = first.sizes();
  out_shape[static_cast<size_t>(d)] = total;
  Tensor out = empty(out_shape, {.dtype = dtype, .device = first.device()});
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    const int64_t n = t.size(d);
    if (n > 0) copy_into(out.narrow(d, offset, n), t);  // the device's copy/cast kernel
    offset += n;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  HG_CHECK(!tensors.empty(), "stack: needs at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    HG_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    HG_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: tensor ", i, " has shape ", tensors[i].shape_str(),
             " but tensor 0 has shape ", tensors[0].shape_str(), "; stack needs equal shapes");
  }
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (const Tensor& t : tensors) expanded.push_back(t.detach().unsqueeze(d));
  return cat(expanded, d);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  const OpId op = OpId::masked_fill;
  check_defined(op, x, "input");
  check_defined(op, mask, "mask");
  HG_CHECK(mask.dtype() == kBool, op_name(op), ": mask must be bool, got ", mask.dtype(), " ", mask.shape_str(),
           "; build it with a comparison (hg::ops::binary_scalar(OpId::gt, ...)) or .to(hg::kBool)");
  HG_CHECK(mask.device() == x.device(), op_name(op), ": mask is on ", mask.device(), " but the input is on ",
           x.device());
  HG_CHECK(broadcast_shapes(mask.sizes(), x.sizes(), "masked_fill") == x.sizes(), op_name(op), ": mask ",
           mask.shape_str(), " does not broadcast to the input's shape ", x.shape_str());
  return where(mask, full({}, value, {.dtype = x.dtype(), .device = x.device()}), x);
}

namespace {
Tensor trilu(OpId op, const Tensor& x, int64_t diagonal) {
  check_defined(op, x, "input");
  HG_CHECK(x.dim() >= 2, op_name(op), ": needs a tensor of rank >= 2 (a matrix or a batch of them), got ",
           x.shape_str());
  Tensor out = empty(x.sizes(), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() == 0) return out;
  HG_BACKEND_CALL(x.device(), trilu, out, x.contiguous(), diagonal, op == OpId::triu);
  return out;
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return trilu(OpId::tril, x, diagonal); }
Tensor triu(const Tensor& x, int64_t diagonal) { return trilu(OpId::triu, x, diagonal); }

}  // namespace hg::ops

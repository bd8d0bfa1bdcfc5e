// Differentiable views and conversions, and sum_to (undoing broadcasting).
// A view's backward maps the gradient back onto the base's shape: reshape for
// view/reshape/squeeze/unsqueeze, the inverse permutation for
// transpose/permute, a scatter into zeros for slice/narrow/select, and a sum
// over the broadcast dims for expand.
#include <numeric>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "core/copy.h"
#include "kernels/reduce.h"

namespace hg {

using autograd::any_requires_grad;
using autograd::FunctionNode;
using autograd::Grads;
using autograd::record;

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  HG_CHECK(lead >= 0, "sum_to: gradient of shape ", grad.shape_str(), " cannot reduce to ",
           shape_to_string(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[static_cast<size_t>(d - lead)] == 1 && grad.size(d) != 1)) dims.push_back(d);
  }
  Tensor reduced = dims.empty() ? grad : ops::sum(grad, dims, /*keepdim=*/true);
  return reduced.reshape(shape);
}

namespace {

// Records a view-like op whose backward only needs the base's shape.
template <typename Backward>
Tensor record_view(const char* name, const Tensor& x, Tensor y, Backward backward) {
  if (any_requires_grad({&x})) {
    record(name, y, {&x}, {}, [backward](const Tensor& g, const FunctionNode&) -> Grads { return {backward(g)}; });
  }
  return y;
}

// Scatter: a zero tensor shaped like the base with `g` written into the view
// that `make_view` selects.
template <typename MakeView>
Tensor scatter_into_zeros(const Tensor& g, const Shape& base_shape, MakeView make_view) {
  Tensor base = zeros(base_shape, {.dtype = g.dtype(), .device = g.device()});
  copy_into(make_view(base), g);
  return base;
}

}  // namespace

Tensor view(const Tensor& x, Shape shape) {
  return record_view("view", x, x.view(std::move(shape)), [s = x.sizes()](const Tensor& g) { return g.reshape(s); });
}

Tensor reshape(const Tensor& x, Shape shape) {
  return record_view("reshape", x, x.reshape(std::move(shape)), [s = x.sizes()](const Tensor& g) { return g.reshape(s); });
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return record_view("flatten", x, x.flatten(start_dim, end_dim), [s = x.sizes()](const Tensor& g) { return g.reshape(s); });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  return record_view("transpose", x, x.transpose(dim0, dim1),
                     [dim0, dim1](const Tensor& g) { return g.transpose(dim0, dim1); });
}

Tensor permute(const Tensor& x, const Shape& dims) {
  Tensor y = x.permute(dims);
  Shape inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[static_cast<size_t>(wrap_dim(dims[i], x.dim(), "permute"))] = static_cast<int64_t>(i);
  return record_view("permute", x, y, [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return record_view("slice", x, x.slice(dim, start, end, step), [s = x.sizes(), dim, start, end, step](const Tensor& g) {
    return scatter_into_zeros(g, s, [&](const Tensor& base) { return base.slice(dim, start, end, step); });
  });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  return record_view("narrow", x, x.narrow(dim, start, length), [s = x.sizes(), dim, start, length](const Tensor& g) {
    return scatter_into_zeros(g, s, [&](const Tensor& base) { return base.narrow(dim, start, length); });
  });
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  return record_view("select", x, x.select(dim, index), [s = x.sizes(), dim, index](const Tensor& g) {
    return scatter_into_zeros(g, s, [&](const Tensor& base) { return base.select(dim, index); });
  });
}

Tensor expand(const Tensor& x, Shape shape) {
  return record_view("expand", x, x.expand(std::move(shape)), [s = x.sizes()](const Tensor& g) { return sum_to(g, s); });
}

Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) {
  return record_view("squeeze", x, dim ? x.squeeze(*dim) : x.squeeze(), [s = x.sizes()](const Tensor& g) { return g.reshape(s); });
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  return record_view("unsqueeze", x, x.unsqueeze(dim), [s = x.sizes()](const Tensor& g) { return g.reshape(s); });
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  return record_view("contiguous", x, x.contiguous(), [](const Tensor& g) { return g; });
}

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return record_view("to_dtype", x, x.to(dtype), [d = x.dtype()](const Tensor& g) { return g.to(d); });
}

Tensor to(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  return record_view("to_device", x, x.to(device), [d = x.device()](const Tensor& g) { return g.to(d); });
}

}  // namespace hg

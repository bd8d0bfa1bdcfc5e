// Differentiable views and conversions, and sum_to (undoing broadcasting).
// The Tensor view members record autograd through the hook installed here
// (Note [View autograd hook] in core/tensor.h), so hg::view(x, s) and
// x.view(s) are the same op. A view's backward maps the gradient back onto
// the base's shape: reshape for view/reshape/squeeze/unsqueeze, the inverse
// permutation for transpose/permute, a scatter into zeros for
// slice/narrow/select, and a sum over the broadcast dims for expand.
#include <cstdint>
#include <numeric>
#include <optional>
#include <string_view>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/copy.h"
#include "core/copy_autograd.h"
#include "kernels/reduce/reduce.h"

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

// The view autograd hook (Note [View autograd hook] in core/tensor.h): every
// view member of a tensor that requires grad calls it, and it records the
// view's backward when grad mode is on.
void record_member_view(const Tensor& base, const Tensor& view, const ViewRecord& r) {
  using Kind = ViewRecord::Kind;
  const Shape s = base.sizes();
  switch (r.kind) {
    case Kind::kReshape:
      record_view(r.name, base, view, [s](const Tensor& g) { return g.reshape(s); });
      return;
    case Kind::kTranspose:
      record_view(r.name, base, view, [a = r.dim, b = r.dim1](const Tensor& g) { return g.transpose(a, b); });
      return;
    case Kind::kPermute: {
      Shape inverse(r.dims.size());
      for (size_t i = 0; i < r.dims.size(); ++i) inverse[static_cast<size_t>(r.dims[i])] = static_cast<int64_t>(i);
      record_view(r.name, base, view, [inverse](const Tensor& g) { return g.permute(inverse); });
      return;
    }
    case Kind::kSlice:
      record_view(r.name, base, view, [s, d = r.dim, start = r.start, end = r.end, step = r.step](const Tensor& g) {
        return scatter_into_zeros(g, s, [&](const Tensor& b) { return b.slice(d, start, end, step); });
      });
      return;
    case Kind::kSelect:
      record_view(r.name, base, view, [s, d = r.dim, index = r.start](const Tensor& g) {
        return scatter_into_zeros(g, s, [&](const Tensor& b) { return b.select(d, index); });
      });
      return;
    case Kind::kExpand:
      record_view(r.name, base, view, [s](const Tensor& g) { return sum_to(g, s); });
      return;
  }
}

// The copy autograd hook (Note [Copy autograd hook] in core/copy_autograd.h):
// contiguous and clone pass the gradient through; to() converts it back to
// the source's dtype and device.
void record_member_copy(const Tensor& x, const Tensor& y, const char* name) {
  if (x.dtype() == y.dtype() && x.device() == y.device()) {
    record_view(name, x, y, [](const Tensor& g) { return g; });
  } else {
    record_view(name, x, y, [d = x.device(), t = x.dtype()](const Tensor& g) { return g.to(d, t); });
  }
}

// The check of the unrecorded members (Note [In-place members and autograd]
// in core/copy_autograd.h): called when self or src requires grad.
void check_member_unrecorded(const Tensor& self, const Tensor* src, const char* name) {
  if (!is_grad_enabled()) return;
  if (std::string_view(name) == "as_strided") {
    HG_FAIL("as_strided: this tensor (shape ", self.shape_str(),
            ") requires grad, and as_strided records no "
            "backward, so the gradient would stop here; use the recorded views (view, slice, narrow, expand, "
            "transpose, ...), or call it on x.detach() (or under hg::NoGradGuard) if no gradient should flow");
  }
  if (self.requires_grad() && self.is_leaf()) {
    HG_FAIL(name, ": this tensor (shape ", self.shape_str(),
            ") is a leaf that requires grad, and grad mode is on; "
            "an in-place write would change it behind autograd's back (PyTorch refuses it too). Write it under "
            "hg::NoGradGuard (as initialisers and optimizers do), or make a new tensor with an out-of-place op");
  }
  if (self.requires_grad()) {
    HG_FAIL(name, ": this tensor (shape ", self.shape_str(), ") was made by a recorded op (",
            self.impl_ptr()->autograd_meta->grad_fn->name(),
            "), and halfgrad does not record in-place writes, so its gradient would be wrong; use an out-of-place "
            "op (e.g. hg::where, x * 0.0, hg::cat) or write it under hg::NoGradGuard if no gradient should flow");
  }
  if (src != nullptr && src->requires_grad()) {
    HG_FAIL(name, ": the source (shape ", src->shape_str(),
            ") requires grad, and halfgrad does not record "
            "copy_, so the gradient would stop here; use dst = src.clone() (or src.to(dtype)) to keep it, or "
            "copy src.detach() if no gradient should flow");
  }
}

const bool kViewHookInstalled = [] {
  register_view_autograd_hook(&record_member_view);
  register_copy_autograd_hook(&record_member_copy);
  register_unrecorded_autograd_hook(&check_member_unrecorded);
  return true;
}();

}  // namespace

// The free functions are the members, which record through the hook above.
Tensor view(const Tensor& x, Shape shape) { return x.view(std::move(shape)); }
Tensor reshape(const Tensor& x, Shape shape) { return x.reshape(std::move(shape)); }
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) { return x.flatten(start_dim, end_dim); }
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) { return x.transpose(dim0, dim1); }
Tensor permute(const Tensor& x, const Shape& dims) { return x.permute(dims); }
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return x.slice(dim, start, end, step);
}
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) { return x.narrow(dim, start, length); }
Tensor select(const Tensor& x, int64_t dim, int64_t index) { return x.select(dim, index); }
Tensor expand(const Tensor& x, Shape shape) { return x.expand(std::move(shape)); }
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) { return dim ? x.squeeze(*dim) : x.squeeze(); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { return x.unsqueeze(dim); }

// The conversions are the members too, which record through the copy hook.
Tensor contiguous(const Tensor& x) { return x.contiguous(); }
Tensor to(const Tensor& x, DType dtype) { return x.to(dtype); }
Tensor to(const Tensor& x, Device device) { return x.to(device); }

}  // namespace hg

// View operations: new sizes/strides/offset over the same storage, no copies.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "core/copy_autograd.h"
#include "core/tensor.h"

namespace hg {

namespace {

// Replaces one -1 in `shape` so that it holds `numel` elements.
Shape infer_size(Shape shape, int64_t numel, const Tensor& self, const char* op) {
  int64_t known = 1;
  std::optional<size_t> infer_at;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      HG_CHECK(!infer_at, op, ": only one dimension can be -1, got ", shape_to_string(shape));
      infer_at = i;
    } else {
      HG_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in ", shape_to_string(shape),
               "; sizes must be >= 0 (or -1 to infer one)");
      known = checked_mul(known, shape[i], op, "the number of elements");
    }
  }
  if (infer_at) {
    HG_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_to_string(shape),
             " is invalid for a tensor of ", numel, " elements (shape ", self.shape_str(), ")");
    shape[*infer_at] = numel / known;
    known = numel;
  }
  HG_CHECK(known == numel, op, ": shape ", shape_to_string(shape), " has ", known,
           " elements but the tensor (shape ", self.shape_str(), ") has ", numel,
           "; the total number of elements must stay the same");
  return shape;
}

// Strides that let `new_sizes` view memory laid out as (old_sizes, old_strides),
// or nullopt when no such view exists (then reshape must copy). Groups of old
// dims that are contiguous with each other can be split or merged freely.
std::optional<Shape> view_strides(const Shape& old_sizes, const Shape& old_strides,
                                  const Shape& new_sizes) {
  Shape new_strides(new_sizes.size(), 1);
  if (old_sizes.empty()) return new_strides;  // rank 0: every new size is 1
  if (numel_of(old_sizes) == 0) return contiguous_strides(new_sizes);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];  // <= numel_of(old_sizes), which fits
    // End of a contiguous chunk of old dims: assign strides to the new dims in it.
    // (Size-1 dims may carry any stride, so the stride products are checked.)
    if (tensor_d == 0 ||
        (old_sizes[tensor_d - 1] != 1 &&
         old_strides[tensor_d - 1] != checked_mul(tensor_numel, chunk_base_stride, "view", "a stride"))) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = checked_mul(view_numel, chunk_base_stride, "view", "a stride");
        view_numel *= new_sizes[view_d];  // <= tensor_numel
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// The invariant of every view (Note [Checked shape arithmetic]): a view with
// elements reaches no element past the end of its storage.
void check_in_storage(const Tensor& self, const Shape& sizes, const Shape& strides, int64_t offset, const char* op) {
  const int64_t extent = view_extent(sizes, strides, offset, op);
  const int64_t capacity = static_cast<int64_t>(self.storage()->nbytes() / self.element_size());
  HG_CHECK(numel_of(sizes) == 0 || extent <= capacity, op, ": sizes ", shape_to_string(sizes), " strides ",
           shape_to_string(strides), " offset ", offset, " reach element ", extent - 1, " but the storage holds ",
           capacity, " elements");
}

ViewAutogradHook g_view_hook = nullptr;

}  // namespace

void register_view_autograd_hook(ViewAutogradHook hook) { g_view_hook = hook; }

template <typename Describe>
Tensor Tensor::recorded(Tensor view, Describe describe) const {
  if (g_view_hook != nullptr && requires_grad()) g_view_hook(*this, view, describe());
  return view;
}

namespace {
ViewRecord reshape_record(const char* name) {
  ViewRecord r;
  r.kind = ViewRecord::Kind::kReshape;
  r.name = name;
  return r;
}
}  // namespace

Tensor Tensor::make_view(Shape new_sizes, Shape new_strides, int64_t new_offset) const {
  // Every view op ends here, so this is where a view is proven to stay inside its storage.
  check_in_storage(*this, new_sizes, new_strides, new_offset, "view");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage();
  impl->sizes = std::move(new_sizes);
  impl->strides = std::move(new_strides);
  impl->offset = new_offset;
  impl->dtype = dtype();
  return Tensor(std::move(impl));
}

Tensor Tensor::view(Shape shape) const {
  shape = infer_size(std::move(shape), numel(), *this, "view");
  auto strides_for_view = view_strides(sizes(), strides(), shape);
  HG_CHECK(strides_for_view.has_value(), "view: cannot view a tensor of shape ", shape_str(),
           " and strides ", shape_to_string(strides()), " as ", shape_to_string(shape),
           " without copying; use reshape() (copies when needed) or call contiguous() first");
  return recorded(make_view(std::move(shape), std::move(*strides_for_view), offset()),
                  [] { return reshape_record("view"); });
}

Tensor Tensor::reshape(Shape shape) const {
  shape = infer_size(std::move(shape), numel(), *this, "reshape");
  if (auto s = view_strides(sizes(), strides(), shape)) {
    return recorded(make_view(std::move(shape), std::move(*s), offset()), [] { return reshape_record("reshape"); });
  }
  return recorded(clone().view(std::move(shape)), [] { return reshape_record("reshape"); });
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t start = wrap_dim(start_dim, dim(), "flatten");
  const int64_t end = wrap_dim(end_dim, dim(), "flatten");
  HG_CHECK(start <= end, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape shape(sizes().begin(), sizes().begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged = checked_mul(merged, sizes()[d], "flatten", "the merged size");
  shape.push_back(merged);
  shape.insert(shape.end(), sizes().begin() + end + 1, sizes().end());
  return reshape(std::move(shape));
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  if (dim() == 0) {
    wrap_dim(dim0, 0, "transpose");
    wrap_dim(dim1, 0, "transpose");
    return recorded(make_view(sizes(), strides(), offset()), [] { return reshape_record("transpose"); });
  }
  const int64_t a = wrap_dim(dim0, dim(), "transpose");
  const int64_t b = wrap_dim(dim1, dim(), "transpose");
  Shape new_sizes = sizes(), new_strides = strides();
  std::swap(new_sizes[a], new_sizes[b]);
  std::swap(new_strides[a], new_strides[b]);
  return recorded(make_view(std::move(new_sizes), std::move(new_strides), offset()), [a, b] {
    ViewRecord r;
    r.kind = ViewRecord::Kind::kTranspose;
    r.name = "transpose";
    r.dim = a;
    r.dim1 = b;
    return r;
  });
}

Tensor Tensor::t() const {
  HG_CHECK(dim() <= 2, "t() expects a tensor with at most 2 dims, got shape ", shape_str(),
           "; use transpose(dim0, dim1) for higher ranks");
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  HG_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(),
           " dims ", shape_to_string(dims), " for a tensor of rank ", dim(), " (shape ",
           shape_str(), "); give each dimension exactly once");
  Shape new_sizes(dims.size()), new_strides(dims.size()), wrapped(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    HG_CHECK(!seen[d], "permute: dimension ", d, " appears twice in ", shape_to_string(dims));
    seen[d] = true;
    wrapped[i] = d;
    new_sizes[i] = sizes()[d];
    new_strides[i] = strides()[d];
  }
  return recorded(make_view(std::move(new_sizes), std::move(new_strides), offset()), [&wrapped] {
    ViewRecord r;
    r.kind = ViewRecord::Kind::kPermute;
    r.name = "permute";
    r.dims = wrapped;
    return r;
  });
}

Tensor Tensor::slice(int64_t dim_arg, int64_t start, int64_t end, int64_t step) const {
  HG_CHECK(dim() > 0, "slice: cannot slice a rank-0 tensor");
  const int64_t d = wrap_dim(dim_arg, dim(), "slice");
  const int64_t n = sizes()[d];
  HG_CHECK(step >= 1, "slice: step must be >= 1, got ", step);
  const int64_t s = start < 0 ? start + n : start;
  const int64_t e = end < 0 ? end + n : end;
  HG_CHECK(s >= 0 && e <= n && s <= e, "slice: range [", start, ", ", end,
           ") is out of bounds for dim ", d, " of size ", n, " (shape ", shape_str(),
           "); need -size <= start <= end <= size");
  Shape new_sizes = sizes(), new_strides = strides();
  new_sizes[d] = e == s ? 0 : (e - s - 1) / step + 1;  // ceil((e - s) / step) without overflow
  // A step past the end is never taken: keep the stride then (any step works for one element).
  new_strides[d] = new_sizes[d] > 1 ? checked_mul(strides()[d], step, "slice", "stride x step") : strides()[d];
  const int64_t new_offset = checked_add(offset(), checked_mul(s, strides()[d], "slice", "start x stride"), "slice",
                                         "the offset");
  return recorded(make_view(std::move(new_sizes), std::move(new_strides), new_offset), [d, s, e, step] {
    ViewRecord r;
    r.kind = ViewRecord::Kind::kSlice;
    r.name = "slice";
    r.dim = d;
    r.start = s;
    r.end = e;
    r.step = step;
    return r;
  });
}

Tensor Tensor::narrow(int64_t dim_arg, int64_t start, int64_t length) const {
  HG_CHECK(dim() > 0, "narrow: cannot narrow a rank-0 tensor");
  const int64_t d = wrap_dim(dim_arg, dim(), "narrow");
  const int64_t n = sizes()[d];
  const int64_t s = start < 0 ? start + n : start;
  HG_CHECK(length >= 0 && s >= 0 && s <= n && length <= n - s, "narrow: start ", start, " length ", length,
           " is out of bounds for dim ", d, " of size ", n, " (shape ", shape_str(), ")");
  return slice(d, s, s + length);
}

Tensor Tensor::select(int64_t dim_arg, int64_t index) const {
  HG_CHECK(dim() > 0, "select: cannot index a rank-0 tensor");
  const int64_t d = wrap_dim(dim_arg, dim(), "select");
  const int64_t n = sizes()[d];
  const int64_t i = index < 0 ? index + n : index;
  HG_CHECK(i >= 0 && i < n, "select: index ", index, " is out of bounds for dim ", d,
           " of size ", n, " (shape ", shape_str(), ")");
  Shape new_sizes = sizes(), new_strides = strides();
  new_sizes.erase(new_sizes.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return recorded(make_view(std::move(new_sizes), std::move(new_strides),
                            checked_add(offset(), checked_mul(i, strides()[d], "select", "index x stride"), "select",
                                        "the offset")),
                  [d, i] {
                    ViewRecord r;
                    r.kind = ViewRecord::Kind::kSelect;
                    r.name = "select";
                    r.dim = d;
                    r.start = i;
                    return r;
                  });
}

Tensor Tensor::expand(Shape shape) const {
  HG_CHECK(static_cast<int64_t>(shape.size()) >= dim(), "expand: target ",
           shape_to_string(shape), " has fewer dims than the tensor (shape ", shape_str(),
           "); expand can only add leading dims");
  const size_t lead = shape.size() - sizes().size();
  Shape new_strides(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      HG_CHECK(shape[i] >= 0, "expand: new leading dim ", i, " must have a size >= 0, got ",
               shape[i], " in ", shape_to_string(shape));
      continue;  // stride 0
    }
    const int64_t old = sizes()[i - lead];
    if (shape[i] == -1) shape[i] = old;
    if (shape[i] == old) {
      new_strides[i] = strides()[i - lead];
    } else {
      HG_CHECK(old == 1 && shape[i] >= 0, "expand: cannot expand dim ", i - lead, " of size ",
               old, " to ", shape[i], " (shape ", shape_str(), " -> ", shape_to_string(shape),
               "); only size-1 dims can be expanded");
    }
  }
  return recorded(make_view(std::move(shape), std::move(new_strides), offset()), [] {
    ViewRecord r;
    r.kind = ViewRecord::Kind::kExpand;
    r.name = "expand";
    return r;
  });
}

Tensor Tensor::squeeze() const {
  Shape new_sizes, new_strides;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] == 1) continue;
    new_sizes.push_back(sizes()[i]);
    new_strides.push_back(strides()[i]);
  }
  return recorded(make_view(std::move(new_sizes), std::move(new_strides), offset()),
                  [] { return reshape_record("squeeze"); });
}

Tensor Tensor::squeeze(int64_t dim_arg) const {
  const int64_t d = wrap_dim(dim_arg, dim(), "squeeze");
  if (dim() == 0 || sizes()[d] != 1) {
    return recorded(make_view(sizes(), strides(), offset()), [] { return reshape_record("squeeze"); });
  }
  Shape new_sizes = sizes(), new_strides = strides();
  new_sizes.erase(new_sizes.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return recorded(make_view(std::move(new_sizes), std::move(new_strides), offset()),
                  [] { return reshape_record("squeeze"); });
}

Tensor Tensor::unsqueeze(int64_t dim_arg) const {
  const int64_t d = wrap_dim(dim_arg, dim() + 1, "unsqueeze");
  Shape new_sizes = sizes(), new_strides = strides();
  // The new dim's stride is irrelevant for indexing; pick the contiguous value.
  const int64_t stride = d < dim() ? checked_mul(sizes()[d], strides()[d], "unsqueeze", "size x stride") : 1;
  new_sizes.insert(new_sizes.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, stride);
  return recorded(make_view(std::move(new_sizes), std::move(new_strides), offset()),
                  [] { return reshape_record("unsqueeze"); });
}

Tensor Tensor::as_strided(Shape new_sizes, Shape new_strides, int64_t new_offset) const {
  check_in_storage(*this, new_sizes, new_strides, new_offset, "as_strided");  // named in its own messages
  check_unrecorded_member(*this, nullptr, "as_strided");
  return make_view(std::move(new_sizes), std::move(new_strides), new_offset);
}

}  // namespace hg

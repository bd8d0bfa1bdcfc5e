#include "core/tensor.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/copy_autograd.h"
#include "core/copy.h"

namespace hg {

// ---- shape helpers ----------------------------------------------------------------

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  const int64_t lo = rank == 0 ? -1 : -rank;
  const int64_t hi = rank == 0 ? 0 : rank - 1;
  HG_CHECK(dim >= lo && dim <= hi, op, ": dimension ", dim, " is out of range for a tensor of rank ",
           rank, " (valid: ", lo, " to ", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t sa = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t sb = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    HG_CHECK(sa == sb || sa == 1 || sb == 1, op, ": shapes ", shape_to_string(a), " and ",
             shape_to_string(b), " cannot be broadcast (dim ", i, ": ", sa, " vs ", sb,
             "); sizes must match or be 1");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

// ---- metadata ---------------------------------------------------------------------

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

int64_t Tensor::numel() const {
  // Fits int64 (every view passed numel_of); a 0 anywhere makes it 0, even
  // after sizes whose product alone would not fit.
  for (int64_t s : sizes()) {
    if (s == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t s : sizes()) n *= s;
  return n;
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    const int64_t s = sizes()[i];
    if (s == 0) return true;
    if (s != 1 && strides()[i] != expected) return false;
    expected *= s;
  }
  return true;
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return defined() && other.defined() && storage() == other.storage();
}

std::string Tensor::shape_str() const { return shape_to_string(sizes()); }

void* Tensor::data_ptr() const {
  char* base = static_cast<char*>(storage()->data());
  return base == nullptr ? nullptr : base + offset() * static_cast<int64_t>(element_size());
}

Tensor& Tensor::requires_grad_(bool enabled) {
  HG_CHECK(!enabled || is_floating(dtype()), "requires_grad needs a floating dtype, but this ",
           "tensor is ", dtype_name(dtype()), "; convert with .to(hg::kF32) first");
  impl().requires_grad = enabled;
  return *this;
}

void Tensor::set_data(const Tensor& other) const {
  HG_CHECK(other.defined(), "set_data: the new data is an undefined tensor");
  TensorImpl& self = impl();
  const bool moved = self.dtype != other.dtype() || self.storage->device() != other.device();
  self.storage = other.storage();
  self.sizes = other.sizes();
  self.strides = other.strides();
  self.offset = other.offset();
  self.dtype = other.dtype();
  if (moved) self.grad.reset();
}

bool Tensor::is_leaf() const {
  return impl().autograd_meta == nullptr || impl().autograd_meta->grad_fn == nullptr;
}

Tensor Tensor::detach() const {
  auto impl_copy = std::make_shared<TensorImpl>();
  impl_copy->storage = storage();
  impl_copy->sizes = sizes();
  impl_copy->strides = strides();
  impl_copy->offset = offset();
  impl_copy->dtype = dtype();
  return Tensor(std::move(impl_copy));
}

namespace {
BackwardHook g_backward_hook = nullptr;
}

void register_backward_hook(BackwardHook hook) { g_backward_hook = hook; }

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  HG_CHECK(g_backward_hook != nullptr, "backward() needs the autograd engine, which registers itself "
           "when libhalfgrad loads; this build has none");
  g_backward_hook(*this, grad, retain_graph);
}

// ---- copies -----------------------------------------------------------------------

namespace {
CopyAutogradHook g_copy_hook = nullptr;

// Hands a copy to the copy autograd hook (Note [Copy autograd hook]).
Tensor recorded_copy(const Tensor& source, Tensor copy, const char* name) {
  if (g_copy_hook != nullptr && source.requires_grad()) g_copy_hook(source, copy, name);
  return copy;
}

Tensor raw_clone(const Tensor& t) {
  Tensor out = empty(t.sizes(), {.dtype = t.dtype(), .device = t.device()});
  copy_into(out, t);
  return out;
}
}  // namespace

void register_copy_autograd_hook(CopyAutogradHook hook) { g_copy_hook = hook; }

namespace {
UnrecordedAutogradHook g_unrecorded_hook = nullptr;
}  // namespace

void check_unrecorded_member(const Tensor& self, const Tensor* src, const char* name) {
  if (g_unrecorded_hook != nullptr && (self.requires_grad() || (src != nullptr && src->requires_grad()))) {
    g_unrecorded_hook(self, src, name);
  }
}

void register_unrecorded_autograd_hook(UnrecordedAutogradHook hook) { g_unrecorded_hook = hook; }

Tensor Tensor::contiguous() const {
  return is_contiguous() ? *this : recorded_copy(*this, raw_clone(*this), "contiguous");
}

Tensor Tensor::clone() const { return recorded_copy(*this, raw_clone(*this), "clone"); }

Tensor Tensor::to(DType target) const { return to(device(), target); }
Tensor Tensor::to(Device target) const { return to(target, dtype()); }

Tensor Tensor::to(Device target, DType target_dtype) const {
  if (target == device() && target_dtype == dtype()) return *this;
  Tensor out = empty(sizes(), {.dtype = target_dtype, .device = target});
  copy_into(out, *this);
  return recorded_copy(*this, out, target == device() ? "to_dtype" : "to_device");
}

namespace {

// True when two different indices of the view surely reach one element: a dim
// of size > 1 with stride 0 (an expanded view), or two such dims with equal
// strides. Other as_strided layouts may overlap too, but proving it is a
// search; like PyTorch, those are let through.
bool surely_self_overlapping(const Tensor& t) {
  std::vector<int64_t> strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] <= 1) continue;
    if (t.strides()[d] == 0) return true;
    strides.push_back(t.strides()[d]);
  }
  std::sort(strides.begin(), strides.end());
  return std::adjacent_find(strides.begin(), strides.end()) != strides.end();
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  check_unrecorded_member(*this, &src, "copy_");
  HG_CHECK(numel() == 0 || !surely_self_overlapping(*this), "copy_: the destination (shape ", shape_str(),
           ", strides ", shape_to_string(strides()),
           ") has elements that share memory (an expanded view), so the result would depend on the copy order; "
           "copy into a contiguous tensor, e.g. dst.contiguous() or clone(), instead");
  copy_into(*this, src);
  bump_version();
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_unrecorded_member(*this, nullptr, "fill_");
  fill(*this, value);
  bump_version();
  return *this;
}

// ---- reading values ---------------------------------------------------------------

template <typename T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = to(Device::cpu()).contiguous();
  std::vector<T> out(static_cast<size_t>(host.numel()));
  dispatch_dtype(host.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* in = static_cast<const S*>(host.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert_value<T>(in[i]);
  });
  return out;
}

template <typename T>
T Tensor::item() const {
  HG_CHECK(numel() == 1, "item() needs a tensor with exactly one element, got shape ",
           shape_str(), " (", numel(), " elements); use to_vector<T>() to read many");
  return to_vector<T>()[0];
}

#define HG_INSTANTIATE_READERS(name, type, str, fp)             \
  template std::vector<type> Tensor::to_vector<type>() const; \
  template type Tensor::item<type>() const;
HG_FORALL_DTYPES(HG_INSTANTIATE_READERS)
#undef HG_INSTANTIATE_READERS

}  // namespace hg

// hg::Tensor — a cheap, shared handle to a strided view of a Storage.
//
// Like torch::Tensor: copying a Tensor copies the handle, not the data; views
// (view, reshape, transpose, permute, slice, narrow, expand, squeeze,
// unsqueeze, select) share storage and differ only in sizes/strides/offset;
// on a tensor that requires grad they record autograd when grad mode is on
// (Note [View autograd hook]).
// Sizes and strides count elements; offset is in elements from the storage
// start. A default-constructed Tensor is undefined (defined() == false).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace hg {

class Generator;
class Tensor;

namespace autograd {
class Node;
}

// Graph bookkeeping for autograd (floor 2). Core only stores it; the types it
// points to are defined, created and read in autograd/.
struct AutogradMeta {
  std::shared_ptr<autograd::Node> grad_fn;          // the op that made this tensor; null for leaves
  std::weak_ptr<autograd::Node> grad_accumulator;   // leaves: the node that writes .grad
};

// Options for factories: hg::zeros({2, 3}, {.dtype = hg::kF16, .device = Device::cuda()}).
struct TensorOptions {
  DType dtype = kF32;
  Device device = Device::cpu();
  bool requires_grad = false;
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): TensorOptions{}.set_requires_grad(...).set_dtype(...).
  // clang-format off
  constexpr TensorOptions& set_dtype(DType v) { dtype = v; return *this; }
  constexpr TensorOptions& set_device(Device v) { device = v; return *this; }
  constexpr TensorOptions& set_requires_grad(bool v) { requires_grad = v; return *this; }
  // clang-format on
};

struct TensorImpl {
  Storage storage;
  Shape sizes;    // [d0, d1, ...]; empty for a rank-0 tensor
  Shape strides;  // elements to step per index along each dim
  int64_t offset = 0;
  DType dtype = kF32;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;               // accumulated gradient (leaf tensors)
  std::shared_ptr<AutogradMeta> autograd_meta;    // set by autograd/ for graph outputs and leaves
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ---------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  int64_t size(int64_t d) const;    // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t offset() const { return impl().offset; }
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  const Storage& storage() const { return impl().storage; }
  bool shares_storage_with(const Tensor& other) const;
  std::string shape_str() const;  // "[2, 3]"
  TensorImpl* impl_ptr() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_shared() const { return impl_; }

  // Pointer to the first element (storage data + offset). On CUDA tensors this
  // is a device pointer.
  void* data_ptr() const;
  // Typed pointer; throws if T does not match dtype().
  template <typename T>
  T* data() const {
    HG_CHECK(dtype_of<T>() == dtype(), "data<", dtype_name(dtype_of<T>()),
             ">() called on a tensor of dtype ", dtype_name(dtype()),
             "; use data<T>() with the tensor's own type or convert with .to(dtype)");
    return static_cast<T*>(data_ptr());
  }

  // ---- version counter (shared by all views of a storage) ---------------------
  uint64_t version() const { return impl().storage->version(); }
  void bump_version() const { impl().storage->bump_version(); }

  // ---- views (share storage) --------------------------------------------------
  Tensor view(Shape shape) const;          // one -1 allowed; needs compatible strides
  Tensor reshape(Shape shape) const;       // a view when possible, else a copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;                        // 2-D transpose
  Tensor permute(const Shape& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`
  Tensor expand(Shape shape) const;        // -1 keeps a size; new leading dims allowed
  Tensor squeeze() const;                  // drops every size-1 dim
  Tensor squeeze(int64_t dim) const;       // drops `dim` if its size is 1
  Tensor unsqueeze(int64_t dim) const;
  Tensor as_strided(Shape sizes, Shape strides, int64_t offset) const;  // checked bounds

  // ---- copies -----------------------------------------------------------------
  Tensor contiguous() const;               // self if already contiguous
  Tensor clone() const;                    // always a fresh contiguous copy
  Tensor to(DType dtype) const;            // self if already that dtype
  Tensor to(Device device) const;          // self if already there
  Tensor to(Device device, DType dtype) const;
  Tensor cpu() const { return to(Device::cpu()); }
  // In-place: copies (broadcasting and converting) src into this tensor.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

  // ---- reading values (copies to the host when needed) ------------------------
  template <typename T>
  T item() const;
  template <typename T>
  std::vector<T> to_vector() const;        // row-major order of the logical view

  // ---- autograd bookkeeping (the engine lives in autograd/) -------------------
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool enabled = true);
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& g) { impl().grad = g.impl_; }
  // Makes this handle (and every handle sharing its TensorImpl) refer to
  // other's data: storage, sizes, strides, offset and dtype. Used by
  // Module::to() so that layers keep their parameter handles. The gradient is
  // dropped when the dtype or device changes.
  void set_data(const Tensor& other) const;
  // A leaf has no grad_fn: created by the user (or by detach), not by an op.
  bool is_leaf() const;
  // A view of the same storage that is cut off from the graph (requires_grad false).
  Tensor detach() const;
  // Runs the backward pass from this tensor (autograd/engine.cpp). `grad`
  // defaults to 1 for a one-element tensor; retain_graph keeps saved tensors
  // so backward can run through the same graph again.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;

  // ---- libtorch-style methods ----------------------------------------------------
  // x.sum(), x.mean({0}, true), x.argmax(1), x.relu(), a.matmul(b): the same ops
  // as the free functions hg::sum(x), hg::relu(x), ... of autograd/functions.h
  // (differentiable; argmax is not). Declared here, defined on the autograd
  // floor (autograd/tensor_methods.cpp): core includes nothing above it, the
  // one library links them (docs/architecture.md, "Tensor methods").
  // The dtype, device (requires_grad false), for factories: hg::zeros({2}, x.options()).
  TensorOptions options() const { return TensorOptions{.dtype = dtype(), .device = device()}; }
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  // Over dims (or all): the values. Over one dim, as libtorch: (values,
  // indices), auto [v, i] = x.max(1); the values carry the gradient, the
  // indices (i64) are the first extreme of each slice (NaN counts as the
  // extreme, as in PyTorch).
  Tensor max(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;  // i64
  Tensor relu() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor round() const;  // half to even, like torch.round; zero gradient
  Tensor floor() const;
  Tensor trunc() const;
  Tensor pow(double exponent) const;
  Tensor softmax() const;      // over the last dim
  Tensor log_softmax() const;  // over the last dim
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  // x[i]: select(0, i), as libtorch's x[i] (negative i counts from the end).
  Tensor operator[](int64_t index) const;
  Tensor matmul(const Tensor& other) const;
  Tensor add(const Tensor& other) const;
  Tensor sub(const Tensor& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;

  friend bool same(const Tensor& a, const Tensor& b) { return a.impl_ == b.impl_; }

 private:
  TensorImpl& impl() const {
    HG_CHECK(impl_ != nullptr,
             "use of an undefined hg::Tensor (default-constructed); create it with a factory "
             "such as hg::zeros or check defined() first");
    return *impl_;
  }
  Tensor make_view(Shape sizes, Shape strides, int64_t offset) const;
  // Hands `view` to the view autograd hook when this tensor requires grad
  // (Note [View autograd hook]); `describe` builds the ViewRecord only then.
  template <typename Describe>
  Tensor recorded(Tensor view, Describe describe) const;

  std::shared_ptr<TensorImpl> impl_;
};

// ---- factories ------------------------------------------------------------------
Tensor empty(Shape shape, TensorOptions options = {});
Tensor zeros(Shape shape, TensorOptions options = {});
Tensor ones(Shape shape, TensorOptions options = {});
Tensor full(Shape shape, double value, TensorOptions options = {});
Tensor arange(double end, TensorOptions options = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
// Uniform in [0, 1) and standard normal, from the Philox generator
// (hg::default_generator() unless one is given). The same seed gives the same
// numbers on every device.
Tensor rand(Shape shape, TensorOptions options = {}, Generator* generator = nullptr);
Tensor randn(Shape shape, TensorOptions options = {}, Generator* generator = nullptr);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);

// From host values; T is converted to options.dtype (default: the dtype of T).
template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape, TensorOptions options);
template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape) {
  return from_vector(values, std::move(shape), TensorOptions{.dtype = dtype_of<T>()});
}
template <typename T>
Tensor from_vector(const std::vector<T>& values) {
  return from_vector(values, Shape{static_cast<int64_t>(values.size())});
}
// A rank-0 tensor.
Tensor scalar_tensor(double value, TensorOptions options = {});

// ---- shape helpers (plus the checked arithmetic of core/shape.h) ----------------
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);  // -1 -> rank-1, checked
// NumPy broadcasting of two shapes; throws naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// ---- comparisons (element-wise, broadcasting; a bool tensor, not differentiable) -
// (x == y).sum(), logits.argmax(1) == labels, x < 0.5. Defined with the methods
// above (autograd/tensor_methods.cpp). The arithmetic operators (+ - * /) are
// the differentiable ones of autograd/functions.h (<halfgrad/halfgrad.h> has both).
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
inline Tensor operator==(double a, const Tensor& b) { return b == a; }
inline Tensor operator!=(double a, const Tensor& b) { return b != a; }
inline Tensor operator<(double a, const Tensor& b) { return b > a; }
inline Tensor operator<=(double a, const Tensor& b) { return b >= a; }
inline Tensor operator>(double a, const Tensor& b) { return b < a; }
inline Tensor operator>=(double a, const Tensor& b) { return b <= a; }

// ---- hg::tensor: a tensor from (nested) braces, like torch::tensor ---------------
//   hg::tensor({1.0, 2.0})            f32 [2]       (floating literals: f32, as in PyTorch)
//   hg::tensor({{1, 2}, {3, 4}})      i64 [2, 2]    (integers: i64; bool: bool)
//   hg::tensor({0.5, 1.5}, hg::kF16)  that dtype;   hg::tensor(3.0) is rank 0
//   hg::tensor({1, 2}, {.dtype = hg::kF32, .device = hg::Device::cuda()})  options as given
// Up to four levels of braces; every row of a level must have the same length
// (a ragged list throws hg::Error naming the level).
namespace detail {
template <typename T>
using literal_value_t =
    std::conditional_t<std::is_same_v<T, bool>, bool, std::conditional_t<std::is_integral_v<T>, int64_t, double>>;
template <typename T>
constexpr DType literal_dtype() {
  if constexpr (std::is_same_v<T, bool>) {
    return kBool;
  } else if constexpr (std::is_integral_v<T>) {
    return kI64;
  } else if constexpr (std::is_same_v<T, half>) {
    return kF16;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return kBF16;
  } else {
    return kF32;
  }
}
template <typename T>
struct is_init_list : std::false_type {};
template <typename T>
struct is_init_list<std::initializer_list<T>> : std::true_type {};
template <typename V, typename T>
void append_literal(std::vector<V>& out, Shape& shape, size_t depth, std::initializer_list<T> list) {
  const auto n = static_cast<int64_t>(list.size());
  if (shape.size() <= depth) {
    shape.push_back(n);
  } else {
    HG_CHECK(shape[depth] == n, "hg::tensor: ragged nested list: a row at level ", depth, " has ", n,
             " elements where an earlier one has ", shape[depth], "; every row of a level needs the same length");
  }
  for (const T& e : list) {
    if constexpr (is_init_list<T>::value) {
      append_literal(out, shape, depth + 1, e);
    } else {
      out.push_back(static_cast<V>(e));
    }
  }
}
template <typename T, typename L>
Tensor tensor_from_literal(const L& list, std::optional<TensorOptions> options) {
  using V = literal_value_t<T>;
  std::vector<V> values;
  Shape shape;
  append_literal(values, shape, 0, list);
  return from_vector(values, std::move(shape), options.value_or(TensorOptions{.dtype = literal_dtype<T>()}));
}
}  // namespace detail

template <typename T>
concept TensorLiteral = std::is_arithmetic_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
template <TensorLiteral T>
Tensor tensor(T value, TensorOptions options) {
  using V = detail::literal_value_t<T>;
  return from_vector(std::vector<V>{static_cast<V>(value)}, Shape{}, options);
}
template <TensorLiteral T>
Tensor tensor(T value) {
  return tensor(value, TensorOptions{.dtype = detail::literal_dtype<T>()});
}
template <TensorLiteral T>
Tensor tensor(T value, DType dtype) {
  return tensor(value, TensorOptions{.dtype = dtype});
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<T> v) {
  return detail::tensor_from_literal<T>(v, std::nullopt);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<T> v, TensorOptions options) {
  return detail::tensor_from_literal<T>(v, options);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<T> v, DType dtype) {
  return detail::tensor_from_literal<T>(v, TensorOptions{.dtype = dtype});
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> v) {
  return detail::tensor_from_literal<T>(v, std::nullopt);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> v, TensorOptions options) {
  return detail::tensor_from_literal<T>(v, options);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> v, DType dtype) {
  return detail::tensor_from_literal<T>(v, TensorOptions{.dtype = dtype});
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v) {
  return detail::tensor_from_literal<T>(v, std::nullopt);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v, TensorOptions options) {
  return detail::tensor_from_literal<T>(v, options);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v, DType dtype) {
  return detail::tensor_from_literal<T>(v, TensorOptions{.dtype = dtype});
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> v) {
  return detail::tensor_from_literal<T>(v, std::nullopt);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> v,
              TensorOptions options) {
  return detail::tensor_from_literal<T>(v, options);
}
template <TensorLiteral T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> v,
              DType dtype) {
  return detail::tensor_from_literal<T>(v, TensorOptions{.dtype = dtype});
}

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Installed by autograd/ at start-up; Tensor::backward forwards to it.
using BackwardHook = void (*)(const Tensor& root, const Tensor& grad, bool retain_graph);
void register_backward_hook(BackwardHook hook);

// Note [View autograd hook]
// The view members (view, reshape, flatten, transpose, t, permute, slice,
// narrow, select, expand, squeeze, unsqueeze) record autograd like the free
// functions hg::view, hg::transpose, ...: core cannot include autograd (floor
// 2), so autograd registers one hook at load time and every view member of a
// tensor that requires grad hands it a ViewRecord saying which view it made.
// The hook records the node when grad mode is on (autograd/functions_views.cpp
// holds the backward of each kind). as_strided and detach record nothing.
struct ViewRecord {
  enum class Kind : uint8_t {
    kReshape,    // view, reshape, flatten, squeeze, unsqueeze: d_base = d_view.reshape(base sizes)
    kTranspose,  // d_base = d_view.transpose(dim, dim1)
    kPermute,    // d_base = d_view.permute(inverse of dims)
    kSlice,      // d_base = zeros with d_view written at slice(dim, start, end, step)
    kSelect,     // d_base = zeros with d_view written at select(dim, start)
    kExpand,     // d_base = d_view summed over the expanded dims
  };
  Kind kind = Kind::kReshape;
  const char* name = "view";  // the member that made the view (the node's name)
  int64_t dim = 0, dim1 = 0;
  int64_t start = 0, end = 0, step = 1;
  Shape dims;  // permute's order (wrapped)
};
using ViewAutogradHook = void (*)(const Tensor& base, const Tensor& view, const ViewRecord& record);
void register_view_autograd_hook(ViewAutogradHook hook);

}  // namespace hg

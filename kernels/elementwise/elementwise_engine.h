// The element-wise engine both backends instantiate: dtype dispatch, the
// functor of each op chosen by code generated from the op list
// (kernels/op_list.h), and the per-element adapters that load T, compute in
// acc_t<T> and round once on store. A backend supplies only its loop:
//
//   struct Backend {
//     // out = fn(ins...) element by element; Out and In... are the C++
//     // element types of out and of each input; all share out's sizes.
//     template <typename Out, typename... In, typename Fn, typename... Tensors>
//     static void map(const char* name, const Fn& fn, const Tensor& out, const Tensors&... ins);
//   };
//
// kernels/elementwise/elementwise_cpu.cpp plugs in cpu::map_typed (OpenMP loops) and
// kernels/elementwise/elementwise.cu plugs in launch_map (map_kernel, with its
// 128-bit vector path). Preconditions are those of kernels/backend.h.
#pragma once

#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/elementwise/elementwise_functors.h"

namespace hg::ew {

// ---- per-element adapters (what the backend's loop calls) ----------------------------------

template <typename T, typename F>
struct ForwardOf {
  F f;
  HG_HOST_DEVICE T operator()(T x) const { return static_cast<T>(f.forward(static_cast<acc_t<T>>(x))); }
};

template <typename T, typename F>
struct BackwardOf {
  F f;
  HG_HOST_DEVICE T operator()(T d_out, T saved) const {
    return static_cast<T>(f.backward(static_cast<acc_t<T>>(d_out), static_cast<acc_t<T>>(saved)));
  }
};

// Out is T for arithmetic and bool for comparisons (whatever forward returns).
template <typename T, typename F>
using binary_out_t =
    std::conditional_t<std::is_same_v<decltype(std::declval<const F&>().forward(
                                          std::declval<acc_t<T>>(), std::declval<acc_t<T>>())),
                                      bool>,
                       bool, T>;

template <typename T, typename F>
struct BinaryOf {
  F f;
  HG_HOST_DEVICE binary_out_t<T, F> operator()(T a, T b) const {
    return static_cast<binary_out_t<T, F>>(f.forward(static_cast<acc_t<T>>(a), static_cast<acc_t<T>>(b)));
  }
};

// The scalar stays in the math type, not rounded to T first: f16 * 0.1
// multiplies by 0.1f, like PyTorch's opmath.
template <typename T, typename F>
struct ScalarOf {
  F f;
  acc_t<T> scalar;
  HG_HOST_DEVICE binary_out_t<T, F> operator()(T a) const {
    return static_cast<binary_out_t<T, F>>(f.forward(static_cast<acc_t<T>>(a), scalar));
  }
};

template <typename T>
struct WhereOf {
  HG_HOST_DEVICE T operator()(bool c, T a, T b) const { return c ? a : b; }
};

// ---- functor selection, generated from the op list -------------------------------------------

template <typename F>
F make_functor(const ScalarArgs& args) {
  if constexpr (std::is_constructible_v<F, const ScalarArgs&>) {
    return F(args);
  } else {
    return F{};
  }
}

// Math type A can run an op: floating A runs everything, integer A only ops
// whose dtypes are `any` (ops.cpp computes the others in f32).
template <typename A>
constexpr bool runs_on(OpDTypes dtypes) {
  return std::is_floating_point_v<A> || dtypes == OpDTypes::any;
}

// Calls k(functor) with the functor of unary op `op` in math type A, built
// from args; for_backward also requires the op's grad to be `functor`.
// Returns false when there is no such functor.
template <typename A, bool for_backward, typename K>
bool visit_unary(OpId op, const ScalarArgs& args, K&& k) {
  switch (op) {
#define HG_UNARY_CASE(name, dtypes, amp, grad)                                                           \
  case OpId::name:                                                                                       \
    if constexpr (runs_on<A>(OpDTypes::dtypes) && !std::is_same_v<A, bool> &&                            \
                  (!for_backward || (OpGrad::grad == OpGrad::functor && std::is_floating_point_v<A>))) { \
      k(make_functor<Unary<OpId::name, A>>(args));                                                       \
      return true;                                                                                       \
    } else {                                                                                             \
      return false;                                                                                      \
    }
    HG_FORALL_UNARY_OPS(HG_UNARY_CASE)
#undef HG_UNARY_CASE
    default:
      return false;
  }
}

// Same for binary ops and comparisons (only comparisons take bool).
template <typename A, typename K>
bool visit_binary(OpId op, K&& k) {
  switch (op) {
#define HG_BINARY_CASE(name, dtypes, amp, grad)                                 \
  case OpId::name:                                                             \
    if constexpr (runs_on<A>(OpDTypes::dtypes) && !std::is_same_v<A, bool>) {  \
      k(Binary<OpId::name, A>{});                                              \
      return true;                                                             \
    } else {                                                                   \
      return false;                                                            \
    }
#define HG_COMPARISON_CASE(name, dtypes, amp, grad) \
  case OpId::name:                                 \
    if constexpr (runs_on<A>(OpDTypes::dtypes)) {  \
      k(Binary<OpId::name, A>{});                  \
      return true;                                 \
    } else {                                       \
      return false;                                \
    }
    HG_FORALL_BINARY_OPS(HG_BINARY_CASE)
    HG_FORALL_COMPARISON_OPS(HG_COMPARISON_CASE)
#undef HG_BINARY_CASE
#undef HG_COMPARISON_CASE
    default:
      return false;
  }
}

// What the derivative of unary op `op` reads besides d_out.
inline GradFrom unary_grad_from(OpId op) {
  switch (op) {
#define HG_GRAD_FROM_CASE(name, dtypes, amp, grad) \
  case OpId::name:                                \
    return Unary<OpId::name, float>::kGradFrom;
    HG_FORALL_UNARY_OPS(HG_GRAD_FROM_CASE)
#undef HG_GRAD_FROM_CASE
    default:
      HG_FAIL(op_name(op), " is not a unary op");
  }
}

// The kernel name of unary op `op`'s backward ("tanh_backward").
inline const char* backward_name(OpId op) {
  switch (op) {
#define HG_BACKWARD_NAME_CASE(name, dtypes, amp, grad) \
  case OpId::name:                                    \
    return #name "_backward";
    HG_FORALL_UNARY_OPS(HG_BACKWARD_NAME_CASE)
#undef HG_BACKWARD_NAME_CASE
    default:
      return "?";
  }
}

// ---- the engine ------------------------------------------------------------------------------

template <typename Backend>
struct Engine {
  // out = op(x)
  static void unary(OpId op, const Tensor& out, const Tensor& x, const ScalarArgs& args) {
    dispatch_compute_dtype(out.dtype(), op_name(op), [&](auto tag) {
      using T = decltype(tag);
      const bool ran = visit_unary<acc_t<T>, false>(op, args, [&](auto f) {
        Backend::template map<T, T>(op_name(op).data(), ForwardOf<T, decltype(f)>{f}, out, x);
      });
      HG_CHECK(ran, op_name(op), " is not a unary op for ", dtype_of<T>(), " tensors");
    });
  }

  // out = d_out * op'(saved)
  static void unary_backward(OpId op, const Tensor& out, const Tensor& d_out, const Tensor& saved,
                             const ScalarArgs& args) {
    dispatch_floating(out.dtype(), op_name(op), [&](auto tag) {
      using T = decltype(tag);
      const bool ran = visit_unary<acc_t<T>, true>(op, args, [&](auto f) {
        Backend::template map<T, T, T>(backward_name(op), BackwardOf<T, decltype(f)>{f}, out, d_out, saved);
      });
      HG_CHECK(ran, op_name(op), " has no derivative formula (its grad is not `functor` in the op list)");
    });
  }

  // out = a op b; a and b share the compute dtype, out is bool for comparisons
  static void binary(OpId op, const Tensor& out, const Tensor& a, const Tensor& b) {
    dispatch_compute_dtype(a.dtype(), op_name(op), [&](auto tag) {
      using T = decltype(tag);
      const bool ran = visit_binary<acc_t<T>>(op, [&](auto f) {
        using F = decltype(f);
        Backend::template map<binary_out_t<T, F>, T, T>(op_name(op).data(), BinaryOf<T, F>{f}, out, a, b);
      });
      HG_CHECK(ran, op_name(op), " is not a binary op for ", dtype_of<T>(), " tensors");
    });
  }

  // out = a op scalar
  static void binary_scalar(OpId op, const Tensor& out, const Tensor& a, double b) {
    dispatch_compute_dtype(a.dtype(), op_name(op), [&](auto tag) {
      using T = decltype(tag);
      bool ran = false;
      if constexpr (!std::is_same_v<T, bool>) {
        ran = visit_binary<acc_t<T>>(op, [&](auto f) {
          using F = decltype(f);
          Backend::template map<binary_out_t<T, F>, T>(op_name(op).data(),
                                                       ScalarOf<T, F>{f, convert_value<acc_t<T>>(b)}, out, a);
        });
      }
      HG_CHECK(ran, op_name(op), " with a scalar is not defined for ", dtype_of<T>(), " tensors");
    });
  }

  // out = cond ? a : b
  static void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
    dispatch_compute_dtype(out.dtype(), "where", [&](auto tag) {
      using T = decltype(tag);
      Backend::template map<T, bool, T, T>("where", WhereOf<T>{}, out, cond, a, b);
    });
  }
};

}  // namespace hg::ew

// The backend's element-wise entry points (kernels/backend.h), each handing
// its arguments to the engine E; expanded once in each backend's namespace
// (the CUDA backend expands the two halves in two files, compiled in parallel).
#define HG_ELEMENTWISE_UNARY_ENTRIES(E)                                                                               \
  void unary(OpId op, const Tensor& out, const Tensor& x, const ScalarArgs& args) { E::unary(op, out, x, args); }     \
  void unary_backward(OpId op, const Tensor& out, const Tensor& d_out, const Tensor& saved, const ScalarArgs& args) { \
    E::unary_backward(op, out, d_out, saved, args);                                                                   \
  }
#define HG_ELEMENTWISE_BINARY_ENTRIES(E)                                                                         \
  void binary(OpId op, const Tensor& out, const Tensor& a, const Tensor& b) { E::binary(op, out, a, b); }        \
  void binary_scalar(OpId op, const Tensor& out, const Tensor& a, double b) { E::binary_scalar(op, out, a, b); } \
  void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) { E::where(out, cond, a, b); }
#define HG_ELEMENTWISE_BACKEND_ENTRIES(E) \
  HG_ELEMENTWISE_UNARY_ENTRIES(E)         \
  HG_ELEMENTWISE_BINARY_ENTRIES(E)

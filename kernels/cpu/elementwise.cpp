// CPU reference kernels for elementwise ops: unary, unary backward, binary,
// scalar, where, copy and fill. The numerical oracle for the CUDA kernels.
//
// Precision contract: 16-bit values are widened to float, the math runs in
// float (double for f64), and the result is rounded once on store. Integer
// ops run in the integer type. NaN in, NaN out for every floating op.
#include <cmath>
#include <type_traits>

#include "core/convert.h"
#include "core/copy.h"
#include "kernels/backend.h"
#include "kernels/cpu/loops.h"

namespace hg::cpu {

namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2*pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluTanhCoeff = 0.044715;

template <typename A>
A sigmoid_of(A x) {
  if (x >= A(0)) return A(1) / (A(1) + std::exp(-x));
  const A e = std::exp(x);  // x < 0: avoids exp overflow for very negative x
  return e / (A(1) + e);
}

template <typename A>
A gelu_tanh_inner(A x) {
  return A(kSqrt2OverPi) * (x + A(kGeluTanhCoeff) * x * x * x);
}

// Runs `fn(A)` over out = fn(x) for one op; T is the storage type.
template <typename T, typename Fn>
void apply_unary(const Tensor& out, const Tensor& x, Fn fn) {
  using A = acc_t<T>;
  map<T>(out, [fn](T v) { return static_cast<T>(fn(static_cast<A>(v))); }, x);
}

template <typename T>
void unary_floating(OpId op, const Tensor& out, const Tensor& x) {
  using A = acc_t<T>;
  switch (op) {
    case OpId::exp: return apply_unary<T>(out, x, [](A v) { return std::exp(v); });
    case OpId::log: return apply_unary<T>(out, x, [](A v) { return std::log(v); });
    case OpId::sqrt: return apply_unary<T>(out, x, [](A v) { return std::sqrt(v); });
    case OpId::rsqrt: return apply_unary<T>(out, x, [](A v) { return A(1) / std::sqrt(v); });
    case OpId::tanh: return apply_unary<T>(out, x, [](A v) { return std::tanh(v); });
    case OpId::sigmoid: return apply_unary<T>(out, x, [](A v) { return sigmoid_of(v); });
    case OpId::gelu:
      return apply_unary<T>(out, x, [](A v) { return A(0.5) * v * (A(1) + std::erf(v * A(kSqrt1_2))); });
    case OpId::gelu_tanh:
      return apply_unary<T>(out, x, [](A v) { return A(0.5) * v * (A(1) + std::tanh(gelu_tanh_inner(v))); });
    case OpId::silu: return apply_unary<T>(out, x, [](A v) { return v * sigmoid_of(v); });
    default: HG_FAIL("cpu::unary: ", op_name(op), " is not a unary op");
  }
}

template <typename T>
void unary_any(OpId op, const Tensor& out, const Tensor& x) {
  using A = acc_t<T>;
  switch (op) {
    case OpId::neg: return apply_unary<T>(out, x, [](A v) { return static_cast<A>(-v); });
    case OpId::abs: return apply_unary<T>(out, x, [](A v) { return v < A(0) ? static_cast<A>(-v) : v; });
    case OpId::relu:  // NaN stays NaN (v > 0 is false, v != v is true)
      return apply_unary<T>(out, x, [](A v) { return (v > A(0) || v != v) ? v : A(0); });
    default:
      if constexpr (std::is_floating_point_v<A>) {
        return unary_floating<T>(op, out, x);
      } else {
        HG_FAIL("cpu::unary: ", op_name(op), " needs a floating tensor");
      }
  }
}

template <typename T>
void unary_backward_typed(OpId op, const Tensor& out, const Tensor& d_out, const Tensor& saved) {
  using A = acc_t<T>;
  auto run = [&](auto fn) {
    map<T>(out, [fn](T d, T s) { return static_cast<T>(fn(static_cast<A>(d), static_cast<A>(s))); },
           d_out, saved);
  };
  switch (op) {
    case OpId::tanh_backward: return run([](A d, A y) { return d * (A(1) - y * y); });
    case OpId::sigmoid_backward: return run([](A d, A y) { return d * y * (A(1) - y); });
    case OpId::relu_backward: return run([](A d, A x) { return x > A(0) ? d : (x != x ? x : A(0)); });
    case OpId::gelu_backward:
      return run([](A d, A x) {
        const A cdf = A(0.5) * (A(1) + std::erf(x * A(kSqrt1_2)));
        const A pdf = A(kInvSqrt2Pi) * std::exp(A(-0.5) * x * x);
        return d * (cdf + x * pdf);
      });
    case OpId::gelu_tanh_backward:
      return run([](A d, A x) {
        const A t = std::tanh(gelu_tanh_inner(x));
        const A d_inner = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluTanhCoeff) * x * x);
        return d * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * d_inner);
      });
    case OpId::silu_backward:
      return run([](A d, A x) {
        const A s = sigmoid_of(x);
        return d * s * (A(1) + x * (A(1) - s));
      });
    default: HG_FAIL("cpu::unary_backward: ", op_name(op), " is not a unary backward op");
  }
}

// Calls k(fn, is_comparison) with the math of a binary op in type A.
template <typename A, typename K>
void with_binary_fn(OpId op, K&& k) {
  switch (op) {
    case OpId::add: return k([](A x, A y) { return static_cast<A>(x + y); }, std::false_type{});
    case OpId::sub: return k([](A x, A y) { return static_cast<A>(x - y); }, std::false_type{});
    case OpId::mul: return k([](A x, A y) { return static_cast<A>(x * y); }, std::false_type{});
    case OpId::div: return k([](A x, A y) { return static_cast<A>(x / y); }, std::false_type{});
    case OpId::maximum: return k([](A x, A y) { return max_nan(x, y); }, std::false_type{});
    case OpId::minimum: return k([](A x, A y) { return min_nan(x, y); }, std::false_type{});
    case OpId::pow: return k([](A x, A y) { return static_cast<A>(std::pow(x, y)); }, std::false_type{});
    case OpId::eq: return k([](A x, A y) { return x == y; }, std::true_type{});
    case OpId::ne: return k([](A x, A y) { return x != y; }, std::true_type{});
    case OpId::lt: return k([](A x, A y) { return x < y; }, std::true_type{});
    case OpId::le: return k([](A x, A y) { return x <= y; }, std::true_type{});
    case OpId::gt: return k([](A x, A y) { return x > y; }, std::true_type{});
    case OpId::ge: return k([](A x, A y) { return x >= y; }, std::true_type{});
    default: HG_FAIL("cpu::binary: ", op_name(op), " is not a binary op");
  }
}

template <typename T>
void binary_typed(OpId op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using A = acc_t<T>;
  with_binary_fn<A>(op, [&](auto fn, auto is_comparison) {
    if constexpr (decltype(is_comparison)::value) {
      map_typed<bool, T, T>(out, [fn](T x, T y) { return fn(static_cast<A>(x), static_cast<A>(y)); }, a, b);
    } else {
      map<T>(out, [fn](T x, T y) { return static_cast<T>(fn(static_cast<A>(x), static_cast<A>(y))); }, a, b);
    }
  });
}

// The scalar stays in the accumulation type (not rounded to T first), so
// f16 * 0.1 multiplies by 0.1f, like PyTorch's opmath.
template <typename T>
void binary_scalar_typed(OpId op, const Tensor& out, const Tensor& a, double b) {
  using A = acc_t<T>;
  const A s = convert_value<A>(b);
  with_binary_fn<A>(op, [&](auto fn, auto is_comparison) {
    if constexpr (decltype(is_comparison)::value) {
      map_typed<bool, T>(out, [fn, s](T x) { return fn(static_cast<A>(x), s); }, a);
    } else {
      map<T>(out, [fn, s](T x) { return static_cast<T>(fn(static_cast<A>(x), s)); }, a);
    }
  });
}

}  // namespace

void unary(OpId op, const Tensor& out, const Tensor& x) {
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      HG_FAIL("cpu::unary: ", op_name(op), " does not take bool tensors");
    } else {
      unary_any<T>(op, out, x);
    }
  });
}

void unary_backward(OpId op, const Tensor& out, const Tensor& d_out, const Tensor& saved) {
  dispatch_floating(out.dtype(), op_name(op), [&](auto tag) {
    unary_backward_typed<decltype(tag)>(op, out, d_out, saved);
  });
}

void binary(OpId op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      // bool tensors: comparisons only (as integers 0/1).
      HG_CHECK(out.dtype() == kBool, "cpu::binary: ", op_name(op), " on bool tensors");
      map_typed<bool, bool, bool>(out, [op](bool x, bool y) {
        switch (op) {
          case OpId::eq: return x == y;
          case OpId::ne: return x != y;
          case OpId::lt: return !x && y;
          case OpId::le: return !x || y;
          case OpId::gt: return x && !y;
          case OpId::ge: return x || !y;
          default: return false;
        }
      }, a, b);
    } else {
      binary_typed<T>(op, out, a, b);
    }
  });
}

void binary_scalar(OpId op, const Tensor& out, const Tensor& a, double b) {
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      HG_FAIL("cpu::binary_scalar: ", op_name(op), " does not take bool tensors");
    } else {
      binary_scalar_typed<T>(op, out, a, b);
    }
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    map_typed<T, bool, T, T>(out, [](bool c, T x, T y) { return c ? x : y; }, cond, a, b);
  });
}

void copy(const Tensor& dst, const Tensor& src) { copy_strided(dst, src); }
void fill(const Tensor& dst, double value) { fill_strided(dst, value); }

}  // namespace hg::cpu

// The math of every element-wise op, written once: one functor per op holding
// its forward formula and (unary ops) its derivative. The CPU engine
// (kernels/elementwise/elementwise_cpu.cpp) and the CUDA engine (kernels/elementwise/elementwise.cu,
// also built by g++ as cuda-emu) both instantiate these through
// kernels/elementwise/elementwise_engine.h, which picks the functor from the op list.
//
// Functor contract. A is the math type, acc_t<T> (kernels/scalar_math.h):
// float for f32/f16/bf16, double for f64, the integer type itself for
// integer tensors of ops whose dtypes are `any` in kernels/op_list.h.
//   Unary<op, A>   A forward(A x) const;
//                  A backward(A d_out, A saved) const;   // d_x = d_out * f'(x)
//                  kGradFrom: what `saved` is (the input x, the output y, or
//                  nothing), inherited from SavesInput/SavesOutput/SavesNothing
//   Binary<op, A>  A forward(A a, A b) const;   // bool for comparisons
// An op with scalar arguments (clamp, softplus) takes them in a constructor
// from ScalarArgs (kernels/op_list.h) and keeps them in A. Functors are plain
// structs copied by value into CUDA kernels; their methods are HG_HOST_DEVICE
// and use only smath:: (never std::, which is host-only under nvcc).
//
// Precision contract: the engine widens 16-bit values to A, the functor
// computes in A, and the engine rounds the result once on store. NaN in, NaN
// out for every floating op (relu, maximum, minimum, clamp included).
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/convert.h"
#include "core/macros.h"
#include "kernels/op_list.h"
#include "kernels/scalar_math.h"

namespace hg::ew {

struct SavesInput {
  static constexpr GradFrom kGradFrom = GradFrom::input;
};
struct SavesOutput {
  static constexpr GradFrom kGradFrom = GradFrom::output;
};
struct SavesNothing {
  static constexpr GradFrom kGradFrom = GradFrom::nothing;
};

template <OpId op, typename A>
struct Unary;
template <OpId op, typename A>
struct Binary;

// ---- constants and helpers shared by several ops ------------------------------------------
inline constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
inline constexpr double k2OverSqrtPi = 1.12837916709551257390;  // 2/sqrt(pi)
inline constexpr double kGeluTanhCoeff = 0.044715;

// 1 / (1 + exp(-x)), without overflowing exp for very negative x.
template <typename A>
HG_HOST_DEVICE inline A sigmoid_of(A x) {
  if (x >= A(0)) return A(1) / (A(1) + smath::exp(-x));
  const A e = smath::exp(x);
  return e / (A(1) + e);
}
// Phi(x) and phi(x): the standard normal CDF and density. Phi is
// (1 + erf(x / sqrt 2)) / 2 from kCdfTail up and erfc(-x / sqrt 2) / 2 below,
// where the erf form cancels (Note [The normal CDF in the tail],
// kernels/cpu/vec_math_impl.h).
inline constexpr double kCdfTail = -3.0;
template <typename A>
HG_HOST_DEVICE inline A normal_cdf(A x) {
  if (x < A(kCdfTail)) return A(0.5) * smath::erfc(-x * A(kSqrt1_2));
  return A(0.5) * (A(1) + smath::erf(x * A(kSqrt1_2)));
}
template <typename A>
HG_HOST_DEVICE inline A normal_pdf(A x) {
  return A(kInvSqrt2Pi) * smath::exp(A(-0.5) * x * x);
}
// sqrt(2/pi) (x + 0.044715 x^3): the argument of tanh in the tanh GELU.
template <typename A>
HG_HOST_DEVICE inline A gelu_tanh_inner(A x) {
  return A(kSqrt2OverPi) * (x + A(kGeluTanhCoeff) * x * x * x);
}

// ---- unary: out = f(x), d_x = d_out * f'(x) -------------------------------------------------

// -x; f' = -1.
template <typename A>
struct Unary<OpId::neg, A> : SavesNothing {
  HG_HOST_DEVICE A forward(A x) const { return static_cast<A>(-x); }
  HG_HOST_DEVICE A backward(A d, A) const { return -d; }
};

// e^x; f' = e^x = y.
template <typename A>
struct Unary<OpId::exp, A> : SavesOutput {
  HG_HOST_DEVICE A forward(A x) const { return smath::exp(x); }
  HG_HOST_DEVICE A backward(A d, A y) const { return d * y; }
};

// ln x; f' = 1/x.
template <typename A>
struct Unary<OpId::log, A> : SavesInput {
  HG_HOST_DEVICE A forward(A x) const { return smath::log(x); }
  HG_HOST_DEVICE A backward(A d, A x) const { return d / x; }
};

// sqrt(x); f' = 1 / (2 y).
template <typename A>
struct Unary<OpId::sqrt, A> : SavesOutput {
  HG_HOST_DEVICE A forward(A x) const { return smath::sqrt(x); }
  HG_HOST_DEVICE A backward(A d, A y) const { return d / (A(2) * y); }
};

// x^-1/2; f' = -1/2 x^-3/2 = -y^3 / 2.
template <typename A>
struct Unary<OpId::rsqrt, A> : SavesOutput {
  HG_HOST_DEVICE A forward(A x) const { return smath::rsqrt(x); }
  HG_HOST_DEVICE A backward(A d, A y) const { return A(-0.5) * d * y * y * y; }
};

// |x|; f' = sign(x), 0 at 0 (like torch).
template <typename A>
struct Unary<OpId::abs, A> : SavesInput {
  HG_HOST_DEVICE A forward(A x) const {
    if constexpr (std::is_unsigned_v<A>) {
      return x;  // u8: already non-negative (and `x < 0` warns)
    } else {
      return x < A(0) ? static_cast<A>(-x) : x;
    }
  }
  HG_HOST_DEVICE A backward(A d, A x) const { return x > A(0) ? d : (x < A(0) ? -d : A(0)); }
};

// tanh x; f' = 1 - y^2.
template <typename A>
struct Unary<OpId::tanh, A> : SavesOutput {
  HG_HOST_DEVICE A forward(A x) const { return smath::tanh(x); }
  HG_HOST_DEVICE A backward(A d, A y) const { return d * (A(1) - y * y); }
};

// 1 / (1 + e^-x); f' = y (1 - y).
template <typename A>
struct Unary<OpId::sigmoid, A> : SavesOutput {
  HG_HOST_DEVICE A forward(A x) const { return sigmoid_of(x); }
  HG_HOST_DEVICE A backward(A d, A y) const { return d * y * (A(1) - y); }
};

// max(x, 0), NaN stays NaN; f' = 1 for x > 0, else 0 (NaN for NaN).
template <typename A>
struct Unary<OpId::relu, A> : SavesInput {
  HG_HOST_DEVICE A forward(A x) const { return (x > A(0) || x != x) ? x : A(0); }
  HG_HOST_DEVICE A backward(A d, A x) const { return x > A(0) ? d : (x != x ? x : A(0)); }
};

// x Phi(x); f' = Phi(x) + x phi(x).
template <typename A>
struct Unary<OpId::gelu, A> : SavesInput {
  HG_HOST_DEVICE A forward(A x) const { return x * normal_cdf(x); }
  HG_HOST_DEVICE A backward(A d, A x) const { return d * (normal_cdf(x) + x * normal_pdf(x)); }
};

// x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
// x sigmoid(2u) (the same function: (1 + tanh u) / 2 = sigmoid(2u)), which
// does not cancel for negative x as 1 + tanh(u) does;
// f' = s + 2 x s (1 - s) u', s = sigmoid(2u), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// (the tanh form's (1 + t)/2 + x/2 (1 - t^2) u' with t = 2s - 1).
template <typename A>
struct Unary<OpId::gelu_tanh, A> : SavesInput {
  HG_HOST_DEVICE A forward(A x) const { return x * sigmoid_of(A(2) * gelu_tanh_inner(x)); }
  HG_HOST_DEVICE A backward(A d, A x) const {
    const A s = sigmoid_of(A(2) * gelu_tanh_inner(x));
    const A d_inner = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluTanhCoeff) * x * x);
    return d * (s + A(2) * x * s * (A(1) - s) * d_inner);
  }
};

// x sigmoid(x); f' = s (1 + x (1 - s)), s = sigmoid(x).
template <typename A>
struct Unary<OpId::silu, A> : SavesInput {
  HG_HOST_DEVICE A forward(A x) const { return x * sigmoid_of(x); }
  HG_HOST_DEVICE A backward(A d, A x) const {
    const A s = sigmoid_of(x);
    return d * s * (A(1) + x * (A(1) - s));
  }
};

// erf x; f' = 2/sqrt(pi) e^(-x^2).
template <typename A>
struct Unary<OpId::erf, A> : SavesInput {
  HG_HOST_DEVICE A forward(A x) const { return smath::erf(x); }
  HG_HOST_DEVICE A backward(A d, A x) const { return d * A(k2OverSqrtPi) * smath::exp(-x * x); }
};

// min(max(x, lo), hi) with args {a = lo, b = hi}; a missing bound is -inf/+inf
// (saturated to the type's range for integers); lo > hi gives hi everywhere,
// NaN in gives NaN out (like torch.clamp).
// f' = 1 where lo <= x <= hi, else 0 (torch's rule: bounds included, NaN gets 0).
template <typename A>
struct Unary<OpId::clamp, A> : SavesInput {
  A lo, hi;
  explicit Unary(const ScalarArgs& args) : lo(convert_value<A>(args.a)), hi(convert_value<A>(args.b)) {}
  HG_HOST_DEVICE A forward(A x) const { return min_nan(max_nan(x, lo), hi); }
  HG_HOST_DEVICE A backward(A d, A x) const { return (lo <= x && x <= hi) ? d : A(0); }
};

// log(1 + e^(beta x)) / beta with args {a = beta, b = threshold}, and x itself
// where beta x > threshold (torch.nn.functional.softplus's rule and defaults
// beta = 1, threshold = 20); f' = sigmoid(beta x), 1 above the threshold.
template <typename A>
struct Unary<OpId::softplus, A> : SavesInput {
  A beta, threshold;
  explicit Unary(const ScalarArgs& args) : beta(static_cast<A>(args.a)), threshold(static_cast<A>(args.b)) {}
  HG_HOST_DEVICE A forward(A x) const {
    const A bx = beta * x;
    return bx > threshold ? x : smath::log1p(smath::exp(bx)) / beta;
  }
  HG_HOST_DEVICE A backward(A d, A x) const {
    const A bx = beta * x;
    return bx > threshold ? d : d * sigmoid_of(bx);
  }
};

// Rounding to an integer value: round (half to even, like torch.round and
// numpy), floor, trunc (toward zero). Integer tensors are returned as they are
// (torch's rule for integer inputs). f' = 0 wherever it exists; the backward is
// 0 everywhere (torch's zeros_like(grad): not d * 0, which is NaN for an
// infinite d). One functor, IntegerValued, with the rounding as its R.
template <typename A, typename R>
struct IntegerValued : SavesNothing {
  HG_HOST_DEVICE A forward(A x) const {
    if constexpr (std::is_integral_v<A>) {
      return x;
    } else {
      return R::apply(x);
    }
  }
  HG_HOST_DEVICE A backward(A, A) const { return A(0); }
};
struct RoundHalfEven {
  template <typename A>
  HG_HOST_DEVICE static A apply(A x) {
    return smath::rint(x);
  }
};
struct RoundDown {
  template <typename A>
  HG_HOST_DEVICE static A apply(A x) {
    return smath::floor(x);
  }
};
struct RoundTowardZero {
  template <typename A>
  HG_HOST_DEVICE static A apply(A x) {
    return smath::trunc(x);
  }
};
template <typename A>
struct Unary<OpId::round, A> : IntegerValued<A, RoundHalfEven> {};
template <typename A>
struct Unary<OpId::floor, A> : IntegerValued<A, RoundDown> {};
template <typename A>
struct Unary<OpId::trunc, A> : IntegerValued<A, RoundTowardZero> {};

// ---- binary: out = f(a, b); derivatives are autograd rules (autograd/functions.cpp) -------
// clang-format off
template <typename A> struct Binary<OpId::add, A> { HG_HOST_DEVICE A forward(A a, A b) const { return static_cast<A>(a + b); } };
template <typename A> struct Binary<OpId::sub, A> { HG_HOST_DEVICE A forward(A a, A b) const { return static_cast<A>(a - b); } };
template <typename A> struct Binary<OpId::mul, A> { HG_HOST_DEVICE A forward(A a, A b) const { return static_cast<A>(a * b); } };
template <typename A> struct Binary<OpId::div, A> { HG_HOST_DEVICE A forward(A a, A b) const { return a / b; } };
template <typename A> struct Binary<OpId::maximum, A> { HG_HOST_DEVICE A forward(A a, A b) const { return max_nan(a, b); } };
template <typename A> struct Binary<OpId::minimum, A> { HG_HOST_DEVICE A forward(A a, A b) const { return min_nan(a, b); } };
template <typename A> struct Binary<OpId::pow, A> { HG_HOST_DEVICE A forward(A a, A b) const { return smath::pow(a, b); } };
template <typename A> struct Binary<OpId::eq, A> { HG_HOST_DEVICE bool forward(A a, A b) const { return a == b; } };
template <typename A> struct Binary<OpId::ne, A> { HG_HOST_DEVICE bool forward(A a, A b) const { return a != b; } };
template <typename A> struct Binary<OpId::lt, A> { HG_HOST_DEVICE bool forward(A a, A b) const { return a < b; } };
template <typename A> struct Binary<OpId::le, A> { HG_HOST_DEVICE bool forward(A a, A b) const { return a <= b; } };
template <typename A> struct Binary<OpId::gt, A> { HG_HOST_DEVICE bool forward(A a, A b) const { return a > b; } };
template <typename A> struct Binary<OpId::ge, A> { HG_HOST_DEVICE bool forward(A a, A b) const { return a >= b; } };
// clang-format on

}  // namespace hg::ew

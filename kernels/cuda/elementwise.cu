// CUDA elementwise ops: unary, unary backward, binary (+ scalar), where, and
// the copy/cast/fill kernels core/ uses for every device copy. Each family is
// a functor run by map_kernel (kernels/cuda/elementwise.cuh: split, launch
// shape and bytes moved are described there).
//
// Precision contract: 16-bit inputs are widened to float, the math runs in
// acc_t (float; double for f64), one rounding on store. NaN propagates through
// every floating op (relu, maximum and minimum included). The CPU reference is
// kernels/cpu/elementwise.cpp; the formulas match it line for line.
#include <cuda_runtime.h>

#include "core/convert.h"
#include "core/copy.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise.cuh"

namespace hg::cuda {

namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluTanhCoeff = 0.044715;

template <typename A>
__device__ __forceinline__ A sigmoid_of(A x) {
  if (x >= A(0)) return A(1) / (A(1) + dmath::exp(-x));
  const A e = dmath::exp(x);
  return e / (A(1) + e);
}

template <typename A>
__device__ __forceinline__ A gelu_tanh_inner(A x) {
  return A(kSqrt2OverPi) * (x + A(kGeluTanhCoeff) * x * x * x);
}

// ---- unary: out = f(x) -------------------------------------------------------------------
// One functor per op; T is the storage type, A the math type.
#define HG_UNARY_FUNCTOR(Name, expr)                                  \
  template <typename T>                                               \
  struct Name {                                                       \
    __device__ __forceinline__ T operator()(T in) const {             \
      using A = acc_t<T>;                                             \
      const A v = static_cast<A>(in);                                 \
      return static_cast<T>(expr);                                    \
    }                                                                 \
  };
HG_UNARY_FUNCTOR(NegOp, static_cast<A>(-v))
HG_UNARY_FUNCTOR(ReluOp, (v > A(0) || v != v) ? v : A(0))
HG_UNARY_FUNCTOR(ExpOp, dmath::exp(v))
HG_UNARY_FUNCTOR(LogOp, dmath::log(v))
HG_UNARY_FUNCTOR(SqrtOp, dmath::sqrt(v))
HG_UNARY_FUNCTOR(RsqrtOp, dmath::rsqrt(v))
HG_UNARY_FUNCTOR(TanhOp, dmath::tanh(v))
HG_UNARY_FUNCTOR(SigmoidOp, sigmoid_of(v))
HG_UNARY_FUNCTOR(GeluOp, A(0.5) * v * (A(1) + dmath::erf(v * A(kSqrt1_2))))
HG_UNARY_FUNCTOR(GeluTanhOp, A(0.5) * v * (A(1) + dmath::tanh(gelu_tanh_inner(v))))
HG_UNARY_FUNCTOR(SiluOp, v * sigmoid_of(v))
#undef HG_UNARY_FUNCTOR

template <typename T>
struct AbsOp {
  __device__ __forceinline__ T operator()(T in) const {
    using A = acc_t<T>;
    if constexpr (std::is_unsigned_v<A>) {
      return in;  // u8: already non-negative (and nvcc warns on `v < 0`)
    } else {
      const A v = static_cast<A>(in);
      return static_cast<T>(v < A(0) ? static_cast<A>(-v) : v);
    }
  }
};

// ---- unary backward: out = g(d_out, saved) --------------------------------------------------
#define HG_BACKWARD_FUNCTOR(Name, expr)                                      \
  template <typename T>                                                      \
  struct Name {                                                              \
    __device__ __forceinline__ T operator()(T d_in, T s_in) const {          \
      using A = acc_t<T>;                                                    \
      const A d = static_cast<A>(d_in);                                      \
      const A s = static_cast<A>(s_in);                                      \
      return static_cast<T>(expr);                                           \
    }                                                                        \
  };
HG_BACKWARD_FUNCTOR(TanhBackwardOp, d * (A(1) - s * s))  // s = y
HG_BACKWARD_FUNCTOR(SigmoidBackwardOp, d * s * (A(1) - s))  // s = y
HG_BACKWARD_FUNCTOR(ReluBackwardOp, s > A(0) ? d : (s != s ? s : A(0)))
HG_BACKWARD_FUNCTOR(GeluBackwardOp,
                    d * (A(0.5) * (A(1) + dmath::erf(s * A(kSqrt1_2))) +
                         s * A(kInvSqrt2Pi) * dmath::exp(A(-0.5) * s * s)))
HG_BACKWARD_FUNCTOR(SiluBackwardOp,
                    d * sigmoid_of(s) * (A(1) + s * (A(1) - sigmoid_of(s))))
#undef HG_BACKWARD_FUNCTOR

template <typename T>
struct GeluTanhBackwardOp {
  __device__ __forceinline__ T operator()(T d_in, T x_in) const {
    using A = acc_t<T>;
    const A d = static_cast<A>(d_in), x = static_cast<A>(x_in);
    const A t = dmath::tanh(gelu_tanh_inner(x));
    const A d_inner = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluTanhCoeff) * x * x);
    return static_cast<T>(d * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * d_inner));
  }
};

// ---- binary: out = a op b (or a op scalar) --------------------------------------------------

// The binary math, selected at run time inside the functor would cost a switch
// per element; instead each op is its own functor type.
#define HG_BINARY_MATH(Name, expr)                                          \
  struct Name {                                                             \
    template <typename A>                                                   \
    __device__ __forceinline__ auto operator()(A x, A y) const {            \
      return expr;                                                          \
    }                                                                       \
  };
HG_BINARY_MATH(AddMath, static_cast<A>(x + y))
HG_BINARY_MATH(SubMath, static_cast<A>(x - y))
HG_BINARY_MATH(MulMath, static_cast<A>(x * y))
HG_BINARY_MATH(DivMath, static_cast<A>(x / y))
HG_BINARY_MATH(MaxMath, max_nan(x, y))
HG_BINARY_MATH(MinMath, min_nan(x, y))
// pow on integers never runs (ops.cpp computes it in f32) but must compile.
HG_BINARY_MATH(PowMath, static_cast<A>(dmath::pow(
                            static_cast<std::conditional_t<std::is_same_v<A, double>, double, float>>(x),
                            static_cast<std::conditional_t<std::is_same_v<A, double>, double, float>>(y))))
HG_BINARY_MATH(EqMath, x == y)
HG_BINARY_MATH(NeMath, x != y)
HG_BINARY_MATH(LtMath, x < y)
HG_BINARY_MATH(LeMath, x <= y)
HG_BINARY_MATH(GtMath, x > y)
HG_BINARY_MATH(GeMath, x >= y)
#undef HG_BINARY_MATH

// Out is T for arithmetic and bool for comparisons.
template <typename T, typename Out, typename Math>
struct BinaryOp {
  Math math;
  __device__ __forceinline__ Out operator()(T a, T b) const {
    using A = acc_t<T>;
    return static_cast<Out>(math(static_cast<A>(a), static_cast<A>(b)));
  }
};

// The scalar stays in the math type (f16 * 0.1 multiplies by 0.1f).
template <typename T, typename Out, typename Math>
struct ScalarOp {
  Math math;
  acc_t<T> scalar;
  __device__ __forceinline__ Out operator()(T a) const {
    return static_cast<Out>(math(static_cast<acc_t<T>>(a), scalar));
  }
};

template <typename T>
struct WhereOp {
  __device__ __forceinline__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

template <typename To, typename From>
struct CastOp {
  __device__ __forceinline__ To operator()(From v) const { return convert_value<To>(v); }
};

template <typename T>
struct FillOp {
  T value;
  __device__ __forceinline__ T operator()() const { return value; }
};

// Calls k(Math{}, is_comparison) for a binary op.
template <typename K>
void with_binary_math(OpId op, K&& k) {
  switch (op) {
    case OpId::add: return k(AddMath{}, std::false_type{});
    case OpId::sub: return k(SubMath{}, std::false_type{});
    case OpId::mul: return k(MulMath{}, std::false_type{});
    case OpId::div: return k(DivMath{}, std::false_type{});
    case OpId::maximum: return k(MaxMath{}, std::false_type{});
    case OpId::minimum: return k(MinMath{}, std::false_type{});
    case OpId::pow: return k(PowMath{}, std::false_type{});
    case OpId::eq: return k(EqMath{}, std::true_type{});
    case OpId::ne: return k(NeMath{}, std::true_type{});
    case OpId::lt: return k(LtMath{}, std::true_type{});
    case OpId::le: return k(LeMath{}, std::true_type{});
    case OpId::gt: return k(GtMath{}, std::true_type{});
    case OpId::ge: return k(GeMath{}, std::true_type{});
    default: HG_FAIL("cuda::binary: ", op_name(op), " is not a binary op");
  }
}

template <typename T>
void unary_typed(OpId op, const Tensor& out, const Tensor& x) {
  const char* name = op_name(op).data();
  switch (op) {
    case OpId::neg: return launch_map<T, T>(name, NegOp<T>{}, out, x);
    case OpId::abs: return launch_map<T, T>(name, AbsOp<T>{}, out, x);
    case OpId::relu: return launch_map<T, T>(name, ReluOp<T>{}, out, x);
    default: break;
  }
  if constexpr (std::is_floating_point_v<acc_t<T>>) {
    switch (op) {
      case OpId::exp: return launch_map<T, T>(name, ExpOp<T>{}, out, x);
      case OpId::log: return launch_map<T, T>(name, LogOp<T>{}, out, x);
      case OpId::sqrt: return launch_map<T, T>(name, SqrtOp<T>{}, out, x);
      case OpId::rsqrt: return launch_map<T, T>(name, RsqrtOp<T>{}, out, x);
      case OpId::tanh: return launch_map<T, T>(name, TanhOp<T>{}, out, x);
      case OpId::sigmoid: return launch_map<T, T>(name, SigmoidOp<T>{}, out, x);
      case OpId::gelu: return launch_map<T, T>(name, GeluOp<T>{}, out, x);
      case OpId::gelu_tanh: return launch_map<T, T>(name, GeluTanhOp<T>{}, out, x);
      case OpId::silu: return launch_map<T, T>(name, SiluOp<T>{}, out, x);
      default: break;
    }
  }
  HG_FAIL("cuda::unary: ", op_name(op), " is not a unary op for dtype ", dtype_of<T>());
}

}  // namespace

void unary(OpId op, const Tensor& out, const Tensor& x) {
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      HG_FAIL("cuda::unary: ", op_name(op), " does not take bool tensors");
    } else {
      unary_typed<T>(op, out, x);
    }
  });
}

void unary_backward(OpId op, const Tensor& out, const Tensor& d_out, const Tensor& saved) {
  dispatch_floating(out.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    const char* name = op_name(op).data();
    switch (op) {
      case OpId::tanh_backward: return launch_map<T, T, T>(name, TanhBackwardOp<T>{}, out, d_out, saved);
      case OpId::sigmoid_backward: return launch_map<T, T, T>(name, SigmoidBackwardOp<T>{}, out, d_out, saved);
      case OpId::relu_backward: return launch_map<T, T, T>(name, ReluBackwardOp<T>{}, out, d_out, saved);
      case OpId::gelu_backward: return launch_map<T, T, T>(name, GeluBackwardOp<T>{}, out, d_out, saved);
      case OpId::gelu_tanh_backward: return launch_map<T, T, T>(name, GeluTanhBackwardOp<T>{}, out, d_out, saved);
      case OpId::silu_backward: return launch_map<T, T, T>(name, SiluBackwardOp<T>{}, out, d_out, saved);
      default: HG_FAIL("cuda::unary_backward: ", op_name(op), " is not a unary backward op");
    }
  });
}

void binary(OpId op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    with_binary_math(op, [&](auto math, auto is_comparison) {
      using Math = decltype(math);
      using Out = std::conditional_t<decltype(is_comparison)::value, bool, T>;
      if constexpr (std::is_same_v<T, bool> && !decltype(is_comparison)::value) {
        HG_FAIL("cuda::binary: ", op_name(op), " does not take bool tensors");
      } else {
        launch_map<Out, T, T>(op_name(op).data(), BinaryOp<T, Out, Math>{math}, out, a, b);
      }
    });
  });
}

void binary_scalar(OpId op, const Tensor& out, const Tensor& a, double b) {
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      HG_FAIL("cuda::binary_scalar: ", op_name(op), " does not take bool tensors");
    } else {
      with_binary_math(op, [&](auto math, auto is_comparison) {
        using Math = decltype(math);
        using Out = std::conditional_t<decltype(is_comparison)::value, bool, T>;
        const ScalarOp<T, Out, Math> functor{math, convert_value<acc_t<T>>(b)};
        launch_map<Out, T>(op_name(op).data(), functor, out, a);
      });
    }
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_map<T, bool, T, T>("where", WhereOp<T>{}, out, cond, a, b);
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  dispatch_dtype(dst.dtype(), [&](auto dst_tag) {
    using To = decltype(dst_tag);
    dispatch_dtype(src.dtype(), [&](auto src_tag) {
      using From = decltype(src_tag);
      launch_map<To, From>("cast", CastOp<To, From>{}, dst, src);
    });
  });
}

void fill(const Tensor& dst, double value) {
  dispatch_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_map<T>("fill", FillOp<T>{convert_value<T>(value)}, dst);
  });
}

namespace {
// Core's copy_/fill_/contiguous/to(dtype) on CUDA tensors use these kernels
// (Note [Copy kernels] in core/copy.h).
const bool kRegistered = [] {
  register_copy_kernel(DeviceType::CUDA, &copy);
  register_fill_kernel(DeviceType::CUDA, &fill);
  return true;
}();
}  // namespace

}  // namespace hg::cuda

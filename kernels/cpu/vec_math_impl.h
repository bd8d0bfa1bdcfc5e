// The array kernels of kernels/cpu/vec_math.h, written once over a GCC vector
// type and compiled once per ISA. Included only by vec_math_sse2.cpp,
// vec_math_avx2.cpp and vec_math_avx512.cpp, each of which first defines
//   HG_VM_NS            the namespace of its table (hg::cpu::HG_VM_NS::table())
//   HG_VM_NAME          the table's name ("sleef-avx2", ...)
//   VR, kW              the vector type (__m128 / __m256 / __m512) and its lanes
//   vm_exp, vm_log, vm_log1p, vm_tanh, vm_erf   SLEEF's u10 functions of that width
//   vm_leave()          what to run before returning to baseline code
//                       (_mm256_zeroupper(), Note [vzeroupper before the tail])
//
// The formulas are the functors' of kernels/elementwise_functors.h, in the
// same association order; only the transcendental function differs (SLEEF's
// 1.0-ulp result against glibc's), so results agree with the scalar path to
// a few float ulps, not bit for bit. A tail shorter than a vector is copied
// into a zero-padded vector and back; the padding lanes are never stored or
// summed. NaN in, NaN out, as in the functors.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/vec_math.h"
#include "kernels/elementwise_functors.h"

namespace hg::cpu::HG_VM_NS {

namespace {

using V = VR;

inline V splat(float c) { return V{} + c; }
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
inline float hsum(V v) {
  float s = 0;
  for (int k = 0; k < kW; ++k) s += v[k];
  return s;
}

// Runs vm_leave() when the entry point returns (after any tail call).
struct Leave {
  Leave() = default;
  Leave(const Leave&) = delete;
  Leave& operator=(const Leave&) = delete;
  ~Leave() { vm_leave(); }
};

// y[i] = f(x[i]) over n values, vector by vector, the tail through a padded vector.
template <typename F>
void map1(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store(y + i, f(load(x + i)));
  if (i < n) {
    float bx[kW] = {}, by[kW];
    const auto bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(bx, x + i, bytes);
    store(by, f(load(bx)));
    std::memcpy(y + i, by, bytes);
  }
}
// out[i] = f(a[i], b[i]).
template <typename F>
void map2(const float* a, const float* b, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) store(out + i, f(load(a + i), load(b + i)));
  if (i < n) {
    float ba[kW] = {}, bb[kW] = {}, bo[kW];
    const auto bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(ba, a + i, bytes);
    std::memcpy(bb, b + i, bytes);
    store(bo, f(load(ba), load(bb)));
    std::memcpy(out + i, bo, bytes);
  }
}

// 1 / (1 + e^-x) as the functor's sigmoid_of: e^x / (1 + e^x) for x < 0,
// so exp never overflows; one exp of -|x| serves both branches.
inline V sigmoid(V x) {
  const auto nonneg = x >= splat(0.0f);
  const V e = vm_exp(nonneg ? -x : x);
  return (nonneg ? splat(1.0f) : e) / (splat(1.0f) + e);
}
inline V normal_cdf(V x) { return splat(0.5f) * (splat(1.0f) + vm_erf(x * splat(static_cast<float>(ew::kSqrt1_2)))); }
inline V gelu_tanh_inner(V x) {
  return splat(static_cast<float>(ew::kSqrt2OverPi)) * (x + splat(static_cast<float>(ew::kGeluTanhCoeff)) * x * x * x);
}

void unary(OpId op, const float* x, float* y, int64_t n, float a, float b) {
  const Leave leave;
  switch (op) {
    case OpId::exp:
      map1(x, y, n, [](V v) { return vm_exp(v); });
      break;
    case OpId::log:
      map1(x, y, n, [](V v) { return vm_log(v); });
      break;
    case OpId::tanh:
      map1(x, y, n, [](V v) { return vm_tanh(v); });
      break;
    case OpId::erf:
      map1(x, y, n, [](V v) { return vm_erf(v); });
      break;
    case OpId::sigmoid:
      map1(x, y, n, [](V v) { return sigmoid(v); });
      break;
    case OpId::silu:
      map1(x, y, n, [](V v) { return v * sigmoid(v); });
      break;
    case OpId::gelu:
      map1(x, y, n, [](V v) { return v * normal_cdf(v); });
      break;
    case OpId::gelu_tanh:
      map1(x, y, n, [](V v) { return splat(0.5f) * v * (splat(1.0f) + vm_tanh(gelu_tanh_inner(v))); });
      break;
    case OpId::softplus: {
      const V beta = splat(a), threshold = splat(b);
      map1(x, y, n, [&](V v) {
        const V bx = beta * v;
        return bx > threshold ? v : vm_log1p(vm_exp(bx)) / beta;
      });
      break;
    }
    default:
      break;  // vec_unary_has(op) is false: the caller never comes here
  }
}

void unary_backward(OpId op, const float* d, const float* s, float* out, int64_t n, float a, float b) {
  const Leave leave;
  switch (op) {
    case OpId::silu:
      map2(d, s, out, n, [](V dv, V x) {
        const V sg = sigmoid(x);
        return dv * sg * (splat(1.0f) + x * (splat(1.0f) - sg));
      });
      break;
    case OpId::gelu:
      map2(d, s, out, n, [](V dv, V x) {
        const V pdf = splat(static_cast<float>(ew::kInvSqrt2Pi)) * vm_exp(splat(-0.5f) * x * x);
        return dv * (normal_cdf(x) + x * pdf);
      });
      break;
    case OpId::gelu_tanh:
      map2(d, s, out, n, [](V dv, V x) {
        const V t = vm_tanh(gelu_tanh_inner(x));
        const V d_inner = splat(static_cast<float>(ew::kSqrt2OverPi)) *
                          (splat(1.0f) + splat(static_cast<float>(3 * ew::kGeluTanhCoeff)) * x * x);
        return dv * (splat(0.5f) * (splat(1.0f) + t) + splat(0.5f) * x * (splat(1.0f) - t * t) * d_inner);
      });
      break;
    case OpId::erf:
      map2(d, s, out, n, [](V dv, V x) { return dv * splat(static_cast<float>(ew::k2OverSqrtPi)) * vm_exp(-x * x); });
      break;
    case OpId::softplus: {
      const V beta = splat(a), threshold = splat(b);
      map2(d, s, out, n, [&](V dv, V x) {
        const V bx = beta * x;
        return bx > threshold ? dv : dv * sigmoid(bx);
      });
      break;
    }
    default:
      break;
  }
}

float exp_sum(const float* x, float* y, int64_t n, float shift) {
  const Leave leave;
  const V sh = splat(shift);
  V acc = V{};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const V e = vm_exp(load(x + i) - sh);
    if (y != nullptr) store(y + i, e);
    acc += e;
  }
  float total = hsum(acc);
  if (i < n) {
    float bx[kW] = {}, by[kW];
    const auto rest = n - i;
    std::memcpy(bx, x + i, static_cast<size_t>(rest) * sizeof(float));
    store(by, vm_exp(load(bx) - sh));
    for (int64_t k = 0; k < rest; ++k) total += by[k];  // the padding lanes are not summed
    if (y != nullptr) std::memcpy(y + i, by, static_cast<size_t>(rest) * sizeof(float));
  }
  return total;
}

void exp_mul_sub(const float* d, const float* y, float* out, int64_t n, float dot) {
  const Leave leave;
  const V dt = splat(dot);
  map2(d, y, out, n, [&](V dv, V yv) { return dv - vm_exp(yv) * dt; });
}

void exp_grad(const float* x, float* out, int64_t n, float m, float log_s, float off, float scale) {
  const Leave leave;
  const V mv = splat(m), lv = splat(log_s), ov = splat(off), sv = splat(scale);
  map1(x, out, n, [&](V v) { return (vm_exp((v - mv) - lv) - ov) * sv; });
}

}  // namespace

const VecMathTable& table() {
  static const VecMathTable t{HG_VM_NAME, unary, unary_backward, exp_sum, exp_mul_sub, exp_grad};
  return t;
}

}  // namespace hg::cpu::HG_VM_NS

// The native f16 element-wise kernels (kernels/elementwise/f16_native.h), written
// once with GCC vector extensions over _Float16 and compiled twice:
//   kernels/elementwise/f16_native_avx512fp16.cpp  with -mavx512fp16 -mavx512vl
//     -mavx512bw: each operation is one AVX512-FP16 instruction on 32 lanes
//     (vaddph, vsubph, vmulph, vdivph, vsqrtph; vcmpph and a masked blend
//     for the selects);
//   tests/kernels/f16_native_soft.cpp      without them: GCC lowers each
//     _Float16 operation to f32 arithmetic and one rounding to _Float16
//     (libgcc's __truncsfhf2, round-to-nearest-even); the tests run it
//     against the widening path on every machine.
// Define HG_F16_NS (this instantiation's namespace inside hg::cpu) and
// HG_F16_LEAVE (what runs before returning: vzeroupper in the AVX-512 build)
// before including.
//
// Each kernel applies exactly one IEEE operation per element and stores it:
// no expression chains, so no value can skip a rounding through excess
// precision. sqrt is written as the f32 square root rounded to _Float16
// (the same value, see kernels/elementwise/f16_native.h), which GCC compiles to
// vsqrtph under AVX512-FP16. The last n % 32 values go through a zero-padded
// vector, so the same code handles them.
#if !defined(HG_F16_NS) || !defined(HG_F16_LEAVE)
#error "define HG_F16_NS and HG_F16_LEAVE before including kernels/elementwise/f16_native_impl.h"
#endif

#include <cstdint>
#include <cstring>

#include "kernels/elementwise/f16_native.h"

namespace hg::cpu::HG_F16_NS {

namespace {

using hv = _Float16 __attribute__((vector_size(64)));  // 32 lanes
using mv = int16_t __attribute__((vector_size(64)));   // a comparison's lanes
constexpr int64_t kLanes = 32;

// Runs y[i0..] = f(inputs...) over n values, 32 at a time, the tail through a
// zero-padded vector.
template <typename F>
inline __attribute__((always_inline)) void for_vectors(int64_t n, const F& f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) f(i, kLanes);
  if (i < n) f(i, n - i);
}

inline __attribute__((always_inline)) hv load(const uint16_t* p, int64_t len) {
  hv v{};
  std::memcpy(&v, p, static_cast<size_t>(len) * 2);
  return v;
}
inline __attribute__((always_inline)) void store(uint16_t* p, const hv& v, int64_t len) {
  std::memcpy(p, &v, static_cast<size_t>(len) * 2);
}

// The NaN rules of kernels/scalar_math.h's max_nan / min_nan: a NaN operand
// is the result (a's first).
inline __attribute__((always_inline)) hv select_nan(const mv& pick_a, const hv& a, const hv& b) {
  hv r = pick_a ? a : b;
  r = (b != b) ? b : r;
  return (a != a) ? a : r;
}

template <F16Op kOp>
inline __attribute__((always_inline)) hv binary_op(const hv& a, const hv& b) {
  if constexpr (kOp == F16Op::add) return a + b;
  if constexpr (kOp == F16Op::sub) return a - b;
  if constexpr (kOp == F16Op::mul) return a * b;
  if constexpr (kOp == F16Op::div) return a / b;
  if constexpr (kOp == F16Op::maximum) return select_nan(a > b, a, b);
  if constexpr (kOp == F16Op::minimum) return select_nan(a < b, a, b);
}

// The functors' rules (kernels/elementwise/elementwise_functors.h): abs(-0) = -0 (x < 0
// is false), relu keeps NaN.
template <F16Op kOp>
inline __attribute__((always_inline)) hv unary_op(const hv& x) {
  const hv zero{};
  if constexpr (kOp == F16Op::neg) return -x;
  if constexpr (kOp == F16Op::abs) return (x < zero) ? -x : x;
  if constexpr (kOp == F16Op::relu) return (x > zero || x != x) ? x : zero;
  if constexpr (kOp == F16Op::sqrt) {
    hv r;
    for (int l = 0; l < kLanes; ++l) r[l] = static_cast<_Float16>(__builtin_sqrtf(static_cast<float>(x[l])));
    return r;
  }
}

template <F16Op kOp>
void binary_kernel(const uint16_t* a, const uint16_t* b, uint16_t* y, int64_t n) {
  for_vectors(n,
              [&](int64_t i, int64_t len) { store(y + i, binary_op<kOp>(load(a + i, len), load(b + i, len)), len); });
  HG_F16_LEAVE();
}

template <F16Op kOp>
void scalar_kernel(const uint16_t* a, uint16_t s, uint16_t* y, int64_t n) {
  _Float16 sv;
  std::memcpy(&sv, &s, 2);
  hv b;  // a broadcast by assignment: 0 + s would turn -0 into +0
  for (int l = 0; l < kLanes; ++l) b[l] = sv;
  for_vectors(n, [&](int64_t i, int64_t len) { store(y + i, binary_op<kOp>(load(a + i, len), b), len); });
  HG_F16_LEAVE();
}

template <F16Op kOp>
void unary_kernel(const uint16_t* x, uint16_t* y, int64_t n) {
  for_vectors(n, [&](int64_t i, int64_t len) { store(y + i, unary_op<kOp>(load(x + i, len)), len); });
  HG_F16_LEAVE();
}

void binary(F16Op op, const uint16_t* a, const uint16_t* b, uint16_t* y, int64_t n) {
  switch (op) {
    case F16Op::add:
      return binary_kernel<F16Op::add>(a, b, y, n);
    case F16Op::sub:
      return binary_kernel<F16Op::sub>(a, b, y, n);
    case F16Op::mul:
      return binary_kernel<F16Op::mul>(a, b, y, n);
    case F16Op::div:
      return binary_kernel<F16Op::div>(a, b, y, n);
    case F16Op::maximum:
      return binary_kernel<F16Op::maximum>(a, b, y, n);
    case F16Op::minimum:
      return binary_kernel<F16Op::minimum>(a, b, y, n);
    default:
      return;
  }
}

void scalar(F16Op op, const uint16_t* a, uint16_t s, uint16_t* y, int64_t n) {
  switch (op) {
    case F16Op::add:
      return scalar_kernel<F16Op::add>(a, s, y, n);
    case F16Op::sub:
      return scalar_kernel<F16Op::sub>(a, s, y, n);
    case F16Op::mul:
      return scalar_kernel<F16Op::mul>(a, s, y, n);
    case F16Op::div:
      return scalar_kernel<F16Op::div>(a, s, y, n);
    case F16Op::maximum:
      return scalar_kernel<F16Op::maximum>(a, s, y, n);
    case F16Op::minimum:
      return scalar_kernel<F16Op::minimum>(a, s, y, n);
    default:
      return;
  }
}

void unary(F16Op op, const uint16_t* x, uint16_t* y, int64_t n) {
  switch (op) {
    case F16Op::neg:
      return unary_kernel<F16Op::neg>(x, y, n);
    case F16Op::abs:
      return unary_kernel<F16Op::abs>(x, y, n);
    case F16Op::relu:
      return unary_kernel<F16Op::relu>(x, y, n);
    case F16Op::sqrt:
      return unary_kernel<F16Op::sqrt>(x, y, n);
    default:
      return;
  }
}

}  // namespace

const F16NativeTable& table() {
  static const F16NativeTable t{binary, scalar, unary};
  return t;
}

}  // namespace hg::cpu::HG_F16_NS

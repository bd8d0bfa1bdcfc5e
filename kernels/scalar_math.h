// Per-element math shared by the CPU and CUDA kernels: the accumulation type,
// NaN-propagating max/min, and float/double overloads of the libm functions
// the kernels use. Everything is HG_HOST_DEVICE, so one definition serves the
// host build (g++, glibc), the cuda-emu build (g++, glibc) and nvcc device
// code (the CUDA math library, whose ::expf, ::erf, ... are __host__ __device__).
#pragma once

#include <cmath>
#include <type_traits>

#include "core/macros.h"

namespace hg {

// The type the math runs in: float for f32/f16/bf16, double for f64, the
// type itself for integers and bool. 16-bit values are widened on load and
// rounded once on store.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double,
                                 std::conditional_t<std::is_integral_v<T>, T, float>>;

// max/min that propagate NaN (std::max, fmaxf and fminf drop it); for
// integers the NaN tests fold away.
template <typename A>
HG_HOST_DEVICE inline A max_nan(A a, A b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
template <typename A>
HG_HOST_DEVICE inline A min_nan(A a, A b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

// Overloads that pick the float or double libm function by argument type
// (the C names, because std:: functions are host-only under nvcc).
namespace smath {
// clang-format off
HG_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
HG_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
HG_HOST_DEVICE inline float log(float x) { return ::logf(x); }
HG_HOST_DEVICE inline double log(double x) { return ::log(x); }
HG_HOST_DEVICE inline float log1p(float x) { return ::log1pf(x); }
HG_HOST_DEVICE inline double log1p(double x) { return ::log1p(x); }
HG_HOST_DEVICE inline float sqrt(float x) { return ::sqrtf(x); }
HG_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
HG_HOST_DEVICE inline float tanh(float x) { return ::tanhf(x); }
HG_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }
HG_HOST_DEVICE inline float erf(float x) { return ::erff(x); }
HG_HOST_DEVICE inline double erf(double x) { return ::erf(x); }
HG_HOST_DEVICE inline float erfc(float x) { return ::erfcf(x); }
HG_HOST_DEVICE inline double erfc(double x) { return ::erfc(x); }
// Rounding to an integer value: rint rounds half to even (the current
// rounding mode, round-to-nearest-even by default: torch.round's rule).
HG_HOST_DEVICE inline float rint(float x) { return ::rintf(x); }
HG_HOST_DEVICE inline double rint(double x) { return ::rint(x); }
HG_HOST_DEVICE inline float floor(float x) { return ::floorf(x); }
HG_HOST_DEVICE inline double floor(double x) { return ::floor(x); }
HG_HOST_DEVICE inline float trunc(float x) { return ::truncf(x); }
HG_HOST_DEVICE inline double trunc(double x) { return ::trunc(x); }
HG_HOST_DEVICE inline float pow(float x, float y) { return ::powf(x, y); }
HG_HOST_DEVICE inline double pow(double x, double y) { return ::pow(x, y); }
// clang-format on
// 1/sqrt(x): the GPU's rsqrtf (2 ulp) on the device, 1/sqrtf elsewhere; there
// is no double rsqrt worth using, so f64 divides.
HG_HOST_DEVICE inline float rsqrt(float x) {
#if HG_ON_DEVICE
  return ::rsqrtf(x);
#else
  return 1.0f / ::sqrtf(x);
#endif
}
HG_HOST_DEVICE inline double rsqrt(double x) { return 1.0 / ::sqrt(x); }
}  // namespace smath

}  // namespace hg

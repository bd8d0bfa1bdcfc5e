// Device math in the accumulation type: acc_t<T> is float for f32/f16/bf16,
// double for f64, the type itself for integers; and float/double overloads of
// the libm functions the kernels use (the CUDA math library on the GPU,
// glibc's in the emu build).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace hg::cuda {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double,
                                 std::conditional_t<std::is_integral_v<T>, T, float>>;

// max/min that propagate NaN (fmaxf/fminf drop it).
template <typename A>
__device__ __forceinline__ A max_nan(A a, A b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
template <typename A>
__device__ __forceinline__ A min_nan(A a, A b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

namespace dmath {
// clang-format off
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float rsqrt(float x) { return ::rsqrtf(x); }
__device__ __forceinline__ double rsqrt(double x) { return 1.0 / ::sqrt(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float erf(float x) { return ::erff(x); }
__device__ __forceinline__ double erf(double x) { return ::erf(x); }
__device__ __forceinline__ float pow(float x, float y) { return ::powf(x, y); }
__device__ __forceinline__ double pow(double x, double y) { return ::pow(x, y); }
__device__ __forceinline__ float log1p(float x) { return ::log1pf(x); }
__device__ __forceinline__ double log1p(double x) { return ::log1p(x); }
// clang-format on
}  // namespace dmath

}  // namespace hg::cuda

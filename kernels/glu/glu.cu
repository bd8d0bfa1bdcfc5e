// CUDA gated linear units (kernels/glu/glu.h); the CPU reference is
// kernels/glu/glu_cpu.cpp, and both call hg::glu_math for the element math.
//
// glu_kernel<T>
//   formula    y[r, j] = glu_math::forward(a = x[r, j], b = x[r, half + j])
//              (glu: a sigmoid(b); swiglu: a sigmoid(a) b)
//   split      one thread per output element e = r * half + j, grid-stride
//   launch     kMapThreads (256) threads per block, map_grid(outer * half) blocks
//   bytes      2 elements read + 1 written per output element: 3 * sizeof(T)
//              per element, the op's minimum (no statistics, no staging)
//   FLOPs      ~5 plus one exp per element; memory-bound at every size
//   precision  each element widened to acc_t (f32; f64 for f64), the
//              overflow-safe sigmoid, one rounding on store
//
// glu_backward_kernel<T>
//   formula    (d_a, d_b) = glu_math::backward(d_y[r, j], a, b), written to
//              d_x[r, j] and d_x[r, half + j]
//   split      one thread per output element (both input gradients of it)
//   launch     as glu_kernel
//   bytes      3 elements read (d_y, a, b) + 2 written per output element
//   precision  as the forward
#include <cuda_runtime.h>

#include <cstdint>

#include "core/convert.h"
#include "kernels/elementwise/elementwise.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/glu/glu.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

template <typename T>
__global__ void glu_kernel(T* __restrict__ y, const T* __restrict__ x, int64_t total, int64_t half, bool swiglu) {
  using A = acc_t<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t r = e / half, j = e - r * half;
    const T* a = x + r * 2 * half + j;
    y[e] = convert_value<T>(glu_math::forward(swiglu, convert_value<A>(a[0]), convert_value<A>(a[half])));
  }
}

template <typename T>
__global__ void glu_backward_kernel(T* __restrict__ d_x, const T* __restrict__ d_y, const T* __restrict__ x,
                                    int64_t total, int64_t half, bool swiglu) {
  using A = acc_t<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t r = e / half, j = e - r * half;
    const int64_t at = r * 2 * half + j;
    A d_a, d_b;
    glu_math::backward(swiglu, convert_value<A>(d_y[e]), convert_value<A>(x[at]), convert_value<A>(x[at + half]), &d_a,
                       &d_b);
    d_x[at] = convert_value<T>(d_a);
    d_x[at + half] = convert_value<T>(d_b);
  }
}

}  // namespace

void glu(OpId op, const Tensor& y, const Tensor& x) {
  const int64_t total = y.numel(), half = y.size(1);
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(glu_kernel<T>, dim3(map_grid(total)), dim3(kMapThreads), 0, current_stream().handle(),
              static_cast<T*>(y.data_ptr()), static_cast<const T*>(x.data_ptr()), total, half, op == OpId::swiglu);
  });
}

void glu_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& x) {
  const int64_t total = d_y.numel(), half = d_y.size(1);
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(glu_backward_kernel<T>, dim3(map_grid(total)), dim3(kMapThreads), 0, current_stream().handle(),
              static_cast<T*>(d_x.data_ptr()), static_cast<const T*>(d_y.data_ptr()),
              static_cast<const T*>(x.data_ptr()), total, half, op == OpId::swiglu);
  });
}

}  // namespace hg::cuda

// CUDA elementwise ops: unary, unary backward, binary (+ scalar), where, and
// the copy/cast/fill kernels core/ uses for every device copy. Every family is
// a functor run by map_kernel (kernels/cuda/elementwise.cuh: split, launch
// shape and bytes moved are described there).
//
// The math of every op is its functor in kernels/elementwise_functors.h and
// the dispatch is kernels/elementwise_engine.h, shared with the CPU reference
// (kernels/cpu/elementwise.cpp); this file plugs in launch_map.
//
// Precision contract: 16-bit inputs are widened to float, the math runs in
// acc_t (float; double for f64), one rounding on store. NaN propagates through
// every floating op (relu, maximum, minimum and clamp included).
#include <cuda_runtime.h>

#include "core/convert.h"
#include "core/copy.h"
#include "kernels/backend.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/elementwise_engine.h"

namespace hg::cuda {

namespace {

struct CudaLoop {
  template <typename Out, typename... In, typename Fn, typename... Tensors>
  static void map(const char* name, const Fn& fn, const Tensor& out, const Tensors&... ins) {
    launch_map<Out, In...>(name, fn, out, ins...);
  }
};
using Engine = ew::Engine<CudaLoop>;

template <typename To, typename From>
struct CastOp {
  __device__ __forceinline__ To operator()(From v) const { return convert_value<To>(v); }
};

template <typename T>
struct FillOp {
  T value;
  __device__ __forceinline__ T operator()() const { return value; }
};

}  // namespace

HG_ELEMENTWISE_BACKEND_ENTRIES(Engine)  // unary, unary_backward, binary, binary_scalar, where

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

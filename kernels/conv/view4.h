// 4-D strided views for the CPU kernels of kernels/conv/conv_cpu.cpp and
// kernels/conv/pool_norm_cpu.cpp: NCHW and channels-last are both just strides.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hg::cpu {

// A 4-D strided view with typed loads and stores.
template <typename T>
struct View4 {
  T* p;
  int64_t s0, s1, s2, s3;
  explicit View4(const Tensor& t)
      : p(static_cast<T*>(t.data_ptr())), s0(t.stride(0)), s1(t.stride(1)), s2(t.stride(2)), s3(t.stride(3)) {}
  T& at(int64_t n, int64_t c, int64_t h, int64_t w) const { return p[n * s0 + c * s1 + h * s2 + w * s3]; }
};

}  // namespace hg::cpu

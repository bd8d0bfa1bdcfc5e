// The kernel interface each backend implements: hg::cpu:: (kernels/cpu/) and
// hg::cuda:: (kernels/cuda/). kernels/elementwise/elementwise_ops.cpp checks arguments and calls these.
//
// Preconditions (established by ops.cpp, checked only with HG_DCHECK here):
// every tensor is on the same device; inputs are already expanded to the
// output's sizes (broadcast dims have stride 0) and converted to the compute
// dtype, which is out's dtype except where noted; inputs may be strided.
#pragma once

#include "core/tensor.h"
#include "kernels/op_list.h"

// clang-format off
#define HG_DECLARE_BACKEND_KERNELS                                                        \
  /* out = op(x); args: the op's scalar arguments (clamp's bounds, ...) */             \
  void unary(OpId op, const Tensor& out, const Tensor& x, const ScalarArgs& args);       \
  /* out = d_out times the derivative; saved is x or y, as the op's functor says */  \
  void unary_backward(OpId op, const Tensor& out, const Tensor& d_out, const Tensor& saved, \
                      const ScalarArgs& args);                                           \
  /* out = a op b; comparisons: out is bool, a and b share the compute dtype */          \
  void binary(OpId op, const Tensor& out, const Tensor& a, const Tensor& b);             \
  void binary_scalar(OpId op, const Tensor& out, const Tensor& a, double b);             \
  /* out = cond ? a : b, cond bool */                                                    \
  void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);   \
  /* dst = convert(src), any two dtypes (registered as core's copy kernel) */            \
  void copy(const Tensor& dst, const Tensor& src);                                       \
  void fill(const Tensor& dst, double value);
// clang-format on

namespace hg::cpu {
HG_DECLARE_BACKEND_KERNELS
}  // namespace hg::cpu

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
HG_DECLARE_BACKEND_KERNELS
}  // namespace hg::cuda
#endif

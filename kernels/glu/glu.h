// Gated linear units: the input split in halves along a dim, one half gating
// the other (floor 1).
//
//   Tensor y = hg::ops::glu(x);            // x [..., 2H] -> y [..., H], like torch F.glu(x, -1)
//   Tensor s = hg::ops::swiglu(x, 1);      // split along dim 1
//   Tensor d_x = hg::ops::glu_backward(OpId::swiglu, d_y, x, -1);
//
// With x split along `dim` into a (the first half) and b (the second half):
//
//   glu     y = a * sigmoid(b)                        (torch.nn.functional.glu)
//           d_a = d_y * sigmoid(b)
//           d_b = d_y * a * s (1 - s),            s = sigmoid(b)
//   swiglu  y = silu(a) * b = a * sigmoid(a) * b      (Shazeer's SwiGLU on a fused
//           d_a = d_y * b * s (1 + a (1 - s)),        [gate | up] projection:
//           d_b = d_y * a * s,                    s = sigmoid(a)   F.silu(a) * b)
//
// Layout: x viewed as [outer, 2, half] with outer = the product of the dims
// before `dim` and half = (size(dim) / 2) * (the product of the dims after),
// so a and b are two contiguous runs per outer index and any dim costs the
// same as the last one.
//
// Precision contract: x, y, d_y and d_x share x's dtype (f32, f16, bf16, f64);
// each element is widened to acc_t (f32; f64 for f64), computed there with
// the overflow-safe sigmoid of kernels/elementwise/elementwise_functors.h, and rounded
// once. Bytes: the forward reads 2 and writes 1 element per output element,
// the backward reads 3 and writes 2; no statistics are kept.
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"
#include "kernels/elementwise/elementwise_functors.h"
#include "kernels/op_list.h"

namespace hg::ops {

// op is OpId::glu or OpId::swiglu; size(dim) must be even.
Tensor glu(const Tensor& x, int64_t dim = -1);
Tensor swiglu(const Tensor& x, int64_t dim = -1);
Tensor glu_forward(OpId op, const Tensor& x, int64_t dim);
// d_x for d_y (the gradient of the forward's output) and the forward's input x.
Tensor glu_backward(OpId op, const Tensor& d_y, const Tensor& x, int64_t dim);

}  // namespace hg::ops

// The per-element math both backends share (A = acc_t: float, double for f64).
namespace hg::glu_math {
template <typename A>
HG_HOST_DEVICE inline A forward(bool swiglu, A a, A b) {
  return swiglu ? a * ew::sigmoid_of(a) * b : a * ew::sigmoid_of(b);
}
// The two input gradients of one output element.
template <typename A>
HG_HOST_DEVICE inline void backward(bool swiglu, A d_y, A a, A b, A* d_a, A* d_b) {
  if (swiglu) {
    const A s = ew::sigmoid_of(a);
    *d_a = d_y * b * s * (A(1) + a * (A(1) - s));
    *d_b = d_y * a * s;
  } else {
    const A s = ew::sigmoid_of(b);
    *d_a = d_y * s;
    *d_b = d_y * a * s * (A(1) - s);
  }
}
}  // namespace hg::glu_math

// The backend kernels (hg::cpu:: in kernels/glu/glu_cpu.cpp, hg::cuda:: in
// kernels/glu/glu.cu). Preconditions, established by kernels/glu/glu_ops.cpp: one
// device; x and d_x contiguous [outer, 2 * half], y and d_y contiguous
// [outer, half], all of one floating dtype; op is glu or swiglu.
// clang-format off
#define HG_DECLARE_GLU_KERNELS                                                              \
  void glu(OpId op, const Tensor& y, const Tensor& x);                                      \
  void glu_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& x);
// clang-format on

namespace hg::cpu {
HG_DECLARE_GLU_KERNELS
}  // namespace hg::cpu

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
HG_DECLARE_GLU_KERNELS
}  // namespace hg::cuda
#endif

// Argument checks, output allocation and device dispatch for the gated linear
// units (kernels/glu/glu.h). The backends get contiguous tensors viewed as
// [outer, 2 * half] (x, d_x) and [outer, half] (y, d_y).
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/glu/glu.h"
#include "kernels/ops.h"

namespace hg::ops {

namespace {

struct GluSplit {
  int64_t dim = 0;    // non-negative
  int64_t outer = 1;  // product of the dims before dim
  int64_t half = 1;   // (size(dim) / 2) * product of the dims after dim
};

GluSplit check_glu(OpId op, const Tensor& x, int64_t dim) {
  HG_CHECK(op == OpId::glu || op == OpId::swiglu, "glu: op must be glu or swiglu, got ", op_name(op));
  HG_CHECK(x.defined(), op_name(op), ": the input is an undefined tensor");
  HG_CHECK(is_floating(x.dtype()), op_name(op), " needs a floating input (f32, f16, bf16, f64) but got ", x.dtype(),
           " ", x.shape_str(), "; convert with .to(hg::kF32) first");
  HG_CHECK(x.dim() >= 1, op_name(op), " splits a dim in halves, but the input is rank 0; reshape it to [2] first");
  HG_CHECK(dim >= -x.dim() && dim < x.dim(), op_name(op), ": dim ", dim, " is out of range for a tensor of shape ",
           x.shape_str(), " (valid dims: ", -x.dim(), " to ", x.dim() - 1, ")");
  GluSplit s;
  s.dim = dim < 0 ? dim + x.dim() : dim;
  HG_CHECK(x.size(s.dim) % 2 == 0, op_name(op), ": halving dim ", s.dim, " of ", x.shape_str(),
           " needs an even size, got ", x.size(s.dim));
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k < s.dim) s.outer *= x.size(k);
    if (k > s.dim) s.half *= x.size(k);
  }
  s.half *= x.size(s.dim) / 2;
  return s;
}

Shape halved(const Tensor& x, int64_t dim) {
  Shape sizes = x.sizes();
  sizes[dim] /= 2;
  return sizes;
}

}  // namespace

Tensor glu_forward(OpId op, const Tensor& x, int64_t dim) {
  const GluSplit s = check_glu(op, x, dim);
  Tensor y = empty(halved(x, s.dim), {.dtype = x.dtype(), .device = x.device()});
  if (y.numel() == 0) return y;
  HG_BACKEND_CALL(x.device(), glu, op, y.view({s.outer, s.half}), x.contiguous().view({s.outer, 2 * s.half}));
  return y;
}

Tensor glu(const Tensor& x, int64_t dim) { return glu_forward(OpId::glu, x, dim); }
Tensor swiglu(const Tensor& x, int64_t dim) { return glu_forward(OpId::swiglu, x, dim); }

Tensor glu_backward(OpId op, const Tensor& d_y, const Tensor& x, int64_t dim) {
  const GluSplit s = check_glu(op, x, dim);
  HG_CHECK(d_y.defined(), op_name(op), "_backward: d_y is an undefined tensor");
  HG_CHECK(d_y.device() == x.device(), op_name(op), "_backward: d_y and x are on different devices (", d_y.device(),
           " and ", x.device(), "); move one with .to(device) first");
  HG_CHECK(d_y.sizes() == halved(x, s.dim), op_name(op), "_backward: d_y shape ", d_y.shape_str(),
           " is not the forward output's shape for input ", x.shape_str(), " and dim ", s.dim);
  Tensor d_x = empty(x.sizes(), {.dtype = x.dtype(), .device = x.device()});
  if (x.numel() == 0) return d_x;
  HG_BACKEND_CALL(x.device(), glu_backward, op, d_x.view({s.outer, 2 * s.half}),
                  d_y.to(x.dtype()).contiguous().view({s.outer, s.half}), x.contiguous().view({s.outer, 2 * s.half}));
  return d_x;
}

}  // namespace hg::ops

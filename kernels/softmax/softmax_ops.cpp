// Argument checks, dtype rules, output allocation and device dispatch for the
// softmax family and fused cross-entropy (kernels/softmax/softmax.h). The backends get
// contiguous tensors (see the preconditions there).
#include <cstdint>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/softmax/softmax.h"

#include "kernels/ops.h"

namespace hg::ops {

namespace {


void check_floating_input(OpId op, const Tensor& t, const char* what) {
  HG_CHECK(t.defined(), op_name(op), ": ", what, " is an undefined tensor");
  HG_CHECK(is_floating(t.dtype()), op_name(op), " needs a floating ", what,
           " (f32, f16, bf16, f64) but got ", t.dtype(), " ", t.shape_str(),
           "; convert with .to(hg::kF32) first");
}

// The [outer, n, inner] split around the softmax dim; inner == 1 means the
// row kernels apply (n is then the row length).
struct DimSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

DimSplit split_at(OpId op, const Tensor& x, int64_t dim) {
  HG_CHECK(x.dim() >= 1, op_name(op), " runs over a dim, but the input is rank 0 ", x.shape_str(),
           "; reshape it to [1] first");
  HG_CHECK(dim >= -x.dim() && dim < x.dim(), op_name(op), ": dim ", dim, " is out of range for a tensor of shape ",
           x.shape_str(), " (valid dims: ", -x.dim(), " to ", x.dim() - 1, ")");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  DimSplit s;
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k < d) s.outer *= x.size(k);
    if (k > d) s.inner *= x.size(k);
  }
  s.n = x.size(d);
  return s;
}

Tensor softmax_forward(OpId op, const Tensor& x, int64_t dim) {
  check_floating_input(op, x, "input");
  const DimSplit s = split_at(op, x, dim);
  Tensor y = empty(x.sizes(), {.dtype = x.dtype(), .device = x.device()});
  if (x.numel() == 0) return y;
  if (s.inner == 1) {
    HG_BACKEND_CALL(x.device(), softmax, op, y.view({s.outer, s.n}), x.contiguous().view({s.outer, s.n}));
  } else {
    HG_BACKEND_CALL(x.device(), softmax_dim, op, y, x.contiguous(), s.outer, s.n, s.inner);
  }
  return y;
}

Tensor softmax_backward_impl(OpId op, const Tensor& d_y, const Tensor& y, int64_t dim) {
  check_floating_input(op, d_y, "d_y");
  check_floating_input(op, y, "forward output y");
  HG_CHECK(d_y.device() == y.device(), op_name(op), ": d_y and y are on different devices (",
           d_y.device(), " and ", y.device(), "); move one with .to(device) first");
  HG_CHECK(d_y.sizes() == y.sizes(), op_name(op), ": d_y shape ", d_y.shape_str(),
           " differs from the forward output's shape ", y.shape_str(),
           "; pass the gradient of the forward output");
  const DimSplit s = split_at(op, y, dim);
  const DType compute = promote_types(d_y.dtype(), y.dtype());
  Tensor d_x = empty(y.sizes(), {.dtype = compute, .device = y.device()});
  if (y.numel() == 0) return d_x;
  if (s.inner == 1) {
    HG_BACKEND_CALL(y.device(), softmax_backward, op, d_x.view({s.outer, s.n}),
                    d_y.to(compute).contiguous().view({s.outer, s.n}), y.to(compute).contiguous().view({s.outer, s.n}));
  } else {
    HG_BACKEND_CALL(y.device(), softmax_dim_backward, op, d_x, d_y.to(compute).contiguous(), y.to(compute).contiguous(),
                    s.outer, s.n, s.inner);
  }
  return d_x;
}

// The dtype of the loss and of d_loss inside the kernels.
DType loss_dtype(DType logits_dtype) { return logits_dtype == kF64 ? kF64 : kF32; }

struct CrossEntropyArgs {
  Tensor logits;    // [N, C], contiguous
  Tensor targets;   // [N] i64, contiguous
  int64_t classes;  // in [1, C]
};

CrossEntropyArgs check_cross_entropy(OpId op, const Tensor& logits, const Tensor& targets, double label_smoothing,
                                     int64_t classes) {
  check_floating_input(op, logits, "logits tensor");
  HG_CHECK(targets.defined(), op_name(op), ": targets is an undefined tensor");
  HG_CHECK(logits.device() == targets.device(), op_name(op),
           ": logits and targets are on different devices (", logits.device(), " and ",
           targets.device(), "); move the targets with .to(logits.device())");
  HG_CHECK(targets.dtype() == kI64, op_name(op), ": targets must be i64 class indices, got ",
           targets.dtype(), " ", targets.shape_str(), "; convert with .to(hg::kI64)");
  Tensor l = logits, t = targets;
  if (l.dim() == 1 && t.dim() == 0) {  // one sample: logits [C], target []
    l = l.unsqueeze(0);
    t = t.unsqueeze(0);
  }
  HG_CHECK(l.dim() == 2, op_name(op), ": logits must be [N, C] (or [C] with a rank-0 target), got ",
           logits.shape_str(), "; flatten the leading dims with .reshape({-1, C})");
  HG_CHECK(t.dim() == 1 && t.size(0) == l.size(0), op_name(op), ": targets ", targets.shape_str(),
           " do not match logits ", logits.shape_str(), "; targets must be [N] = [", l.size(0),
           "], one class index per row");
  HG_CHECK(l.size(1) >= 1, op_name(op), ": logits ", logits.shape_str(),
           " have no classes; C must be at least 1");
  HG_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op_name(op),
           ": label_smoothing must be in [0, 1], got ", label_smoothing);
  HG_CHECK(classes >= 0 && classes <= l.size(1), op_name(op), ": classes must be in [0, C = ", l.size(1),
           "] (0: every column is a class), got ", classes);
  return {l.contiguous(), t.contiguous(), classes == 0 ? l.size(1) : classes};
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_forward(OpId::softmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_forward(OpId::log_softmax, x, dim); }

Tensor softmax_backward(const Tensor& d_y, const Tensor& y, int64_t dim) {
  return softmax_backward_impl(OpId::softmax_backward, d_y, y, dim);
}
Tensor log_softmax_backward(const Tensor& d_y, const Tensor& y, int64_t dim) {
  return softmax_backward_impl(OpId::log_softmax_backward, d_y, y, dim);
}

CrossEntropyOutput cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                       double label_smoothing, int64_t classes) {
  const CrossEntropyArgs args = check_cross_entropy(OpId::cross_entropy, logits, targets, label_smoothing, classes);
  const TensorOptions acc{.dtype = loss_dtype(logits.dtype()), .device = logits.device()};
  CrossEntropyOutput out{empty({}, acc), empty({args.logits.size(0), 2}, acc)};
  HG_BACKEND_CALL(logits.device(), cross_entropy, out.loss, out.row_stats, args.logits, args.targets, ignore_index,
                  label_smoothing, args.classes);
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                     int64_t classes) {
  return cross_entropy_fused(logits, targets, ignore_index, label_smoothing, classes).loss;
}

Tensor cross_entropy_backward(const Tensor& d_loss, const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                              double label_smoothing, int64_t classes, const Tensor& row_stats) {
  const OpId op = OpId::cross_entropy_backward;
  const CrossEntropyArgs args = check_cross_entropy(op, logits, targets, label_smoothing, classes);
  check_floating_input(op, d_loss, "d_loss");
  HG_CHECK(d_loss.numel() == 1 && d_loss.dim() == 0, op_name(op),
           ": d_loss must be rank 0 (the loss is a mean), got ", d_loss.shape_str());
  HG_CHECK(d_loss.device() == logits.device(), op_name(op), ": d_loss and logits are on different devices (",
           d_loss.device(), " and ", logits.device(), "); move d_loss with .to(logits.device())");
  HG_CHECK(!row_stats.defined() ||
               (row_stats.dim() == 2 && row_stats.size(0) == args.logits.size(0) && row_stats.size(1) == 2 &&
                row_stats.dtype() == loss_dtype(logits.dtype()) && row_stats.device() == logits.device()),
           op_name(op), ": row_stats must be the forward's [", args.logits.size(0), ", 2] ", loss_dtype(logits.dtype()),
           " per-row (max, log sum exp) (cross_entropy_fused), got ",
           row_stats.defined() ? row_stats.shape_str() : std::string("undefined"));
  Tensor d_logits = empty(logits.sizes(), {.dtype = logits.dtype(), .device = logits.device()});
  if (d_logits.numel() == 0) return d_logits;
  HG_BACKEND_CALL(logits.device(), cross_entropy_backward, d_logits.view(args.logits.sizes()),
                  d_loss.to(loss_dtype(logits.dtype())).contiguous(), args.logits, args.targets,
                  row_stats.defined() ? row_stats.contiguous() : row_stats, ignore_index, label_smoothing,
                  args.classes);
  return d_logits;
}

}  // namespace hg::ops

// Argument checks, dtype rules, output allocation and device dispatch for the
// reductions (kernels/reduce/reduce.h).
//
// Every reduction becomes a row reduction: the input is permuted so the kept
// dims come first and the reduced dims last (each group in its original
// order), then viewed as [rows = prod(kept), cols = prod(reduced)]. When the
// reduced dims are dense in memory (a last-dim reduction, or any reduction of
// a contiguous tensor over trailing dims) that view costs nothing; otherwise
// (a column reduction, a middle dim) the permuted tensor is first copied with
// contiguous(), one extra read and write of x; except for a reduction over the
// leading dims of a contiguous tensor (a bias gradient), which both backends'
// reduce_cols take as it lies (Note [Column reductions on the CPU], kernels/
// kernels/reduce/reduce_cpu.cpp; Note [Column reductions on CUDA], kernels/reduce/reduce.cu). Because the reduced dims keep
// their order, a column index of the row view is the row-major index within
// the reduced slice, which is what argmax returns.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/reduce/reduce.h"

namespace hg::ops {

namespace {


std::string dims_to_string(const std::vector<int64_t>& dims) {
  return shape_to_string(Shape(dims.begin(), dims.end()));
}

// What a reduction computes over: the [rows, cols] view and the output shape.
struct RowPlan {
  Shape out_shape;
  int64_t rows = 1;
  int64_t cols = 1;
  Tensor permuted;  // x with the kept dims first, the reduced dims last
  int64_t n_kept = 0;
};

RowPlan plan_rows(OpId op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t rank = x.dim();
  std::vector<bool> reduced(static_cast<size_t>(rank), dims.empty());
  for (int64_t d : dims) {
    // A rank-0 tensor has one (implicit) dim, addressed as 0 or -1, like torch.
    const int64_t lo = rank == 0 ? -1 : -rank;
    const int64_t hi = rank == 0 ? 0 : rank - 1;
    HG_CHECK(d >= lo && d <= hi, op_name(op), ": dim ", d, " is out of range for a tensor of shape ",
             x.shape_str(), " (valid dims: ", lo, " to ", hi, "); dims were ", dims_to_string(dims));
    if (rank == 0) continue;
    const int64_t w = d < 0 ? d + rank : d;
    HG_CHECK(!reduced[w], op_name(op), ": dim ", w, " appears more than once in dims ",
             dims_to_string(dims), " for shape ", x.shape_str(), "; list each dim once");
    reduced[w] = true;
  }
  RowPlan plan;
  Shape perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      perm.push_back(d);
      plan.rows *= x.sizes()[d];
      plan.out_shape.push_back(x.sizes()[d]);
    } else if (keepdim) {
      plan.out_shape.push_back(1);
    }
  }
  plan.n_kept = static_cast<int64_t>(perm.size());
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      perm.push_back(d);
      plan.cols *= x.sizes()[d];
    }
  }
  plan.permuted = rank == 0 ? x : x.permute(perm);
  return plan;
}

// The [rows, cols] view of plan.permuted with dense rows (stride(1) == 1),
// without a copy when the layout allows, else of a contiguous copy.
// Dims [lo, hi) of t, walked innermost first, seen as one dim: its stride
// when they merge (each dim's stride is the stride times the size of the one
// inside it; size-1 dims are skipped), `all_ones` when every one has size 1,
// and -1 when they do not merge.
int64_t merged_stride(const Tensor& t, int64_t lo, int64_t hi, int64_t all_ones) {
  int64_t stride = -1, expected = 0;
  for (int64_t d = hi - 1; d >= lo; --d) {
    if (t.sizes()[d] == 1) continue;
    if (stride < 0) {
      stride = t.strides()[d];
    } else if (t.strides()[d] != expected) {
      return -1;
    }
    expected = t.strides()[d] * t.sizes()[d];
  }
  return stride < 0 ? all_ones : stride;
}

Tensor rows_view(const RowPlan& plan) {
  const Tensor& p = plan.permuted;
  // The reduced dims must tile [0, cols) with unit stride, the kept dims merge
  // into one strided dim.
  if (!p.is_contiguous() && plan.rows > 0 && plan.cols > 0 && merged_stride(p, plan.n_kept, p.dim(), 1) == 1) {
    const int64_t row_stride = merged_stride(p, 0, plan.n_kept, plan.cols);
    if (row_stride >= 0) return p.detach().as_strided({plan.rows, plan.cols}, {row_stride, 1}, p.offset());
  }
  const Tensor c = p.contiguous();
  return c.detach().as_strided({plan.rows, plan.cols}, {plan.cols, 1}, c.offset());
}

// The [rows, cols] view of plan.permuted with dense columns (stride(0) == 1):
// the kept dims tile [0, rows) with unit stride and the reduced dims merge
// into one dim with a stride of at least rows (a reduction over the leading
// dims of a contiguous tensor, as a bias gradient's sum over the batch). An
// undefined tensor when the layout is otherwise.
Tensor cols_view(const RowPlan& plan) {
  const Tensor& p = plan.permuted;
  if (plan.rows <= 1 || plan.cols <= 1 || merged_stride(p, 0, plan.n_kept, 1) != 1) return Tensor();
  const int64_t col_stride = merged_stride(p, plan.n_kept, p.dim(), -1);
  if (col_stride < plan.rows) return Tensor();
  return p.detach().as_strided({plan.rows, plan.cols}, {1, col_stride}, p.offset());
}

bool is_value_reduction(OpId op) {
  switch (op) {
    case OpId::sum: case OpId::mean: case OpId::max: case OpId::min: case OpId::norm:
      return true;
    default:
      return false;
  }
}

}  // namespace

Tensor reduce(OpId op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  HG_CHECK(is_value_reduction(op), op_name(op),
           " is not a value reduction (sum, mean, max, min, norm); argmax has its own entry");
  HG_CHECK(x.defined(), op_name(op), ": input is an undefined tensor");
  const bool floating = is_floating(x.dtype());
  HG_CHECK(floating || (op != OpId::mean && op != OpId::norm), op_name(op), " of a ", x.dtype(),
           " tensor of shape ", x.shape_str(), " is not defined (it needs a floating dtype); convert first: ",
           op_name(op), "(x.to(hg::kF32))");
  RowPlan plan = plan_rows(op, x, dims, keepdim);
  HG_CHECK(plan.cols > 0 || (op != OpId::max && op != OpId::min), op_name(op),
           ": cannot reduce over an empty slice (input shape ", x.shape_str(), ", dims ",
           dims.empty() ? std::string("all") : dims_to_string(dims),
           " hold 0 elements) because the result has no identity; check numel() first or reduce over "
           "other dims");
  // Integer and bool sums accumulate and return in i64 (like torch).
  const DType out_dtype = (op == OpId::sum && !floating) ? kI64 : x.dtype();
  Tensor out = empty(plan.out_shape, {.dtype = out_dtype, .device = x.device()});
  if (plan.rows == 0) return out;
  if (plan.cols == 0) {  // the empty sum is 0 and the empty mean 0/0
    out.fill_(op == OpId::mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return out;
  }
  if (out_dtype != x.dtype()) plan.permuted = plan.permuted.to(out_dtype);
  const Tensor out_rows = out.detach().as_strided({plan.rows}, {1}, out.offset());
  // A reduction over the leading dims of a contiguous tensor needs no
  // transposing copy (Note [Column reductions on the CPU], kernels/cpu/
  // reduce.cpp; Note [Column reductions on CUDA], kernels/reduce/reduce.cu).
  if (const Tensor cols = cols_view(plan); cols.defined()) {
    HG_BACKEND_CALL(x.device(), reduce_cols, op, out_rows, cols);
    return out;
  }
  const Tensor rows = rows_view(plan);
  HG_BACKEND_CALL(x.device(), reduce_rows, op, out_rows, rows);
  return out;
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  const OpId op = OpId::argmax;
  HG_CHECK(x.defined(), "argmax: input is an undefined tensor");
  const std::vector<int64_t> dims = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
  const RowPlan plan = plan_rows(op, x, dims, keepdim);
  HG_CHECK(plan.cols > 0, "argmax: cannot take the argmax of an empty slice (input shape ", x.shape_str(),
           dim ? ", dim " + std::to_string(*dim) : std::string(", flattened"),
           " holds 0 elements); check numel() first or pick a non-empty dim");
  Tensor out = empty(plan.out_shape, {.dtype = kI64, .device = x.device()});
  if (plan.rows == 0) return out;
  const Tensor rows = rows_view(plan);
  const Tensor out_rows = out.detach().as_strided({plan.rows}, {1}, out.offset());
  HG_BACKEND_CALL(x.device(), argmax_rows, out_rows, rows);
  return out;
}

}  // namespace hg::ops

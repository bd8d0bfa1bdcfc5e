// Reductions over all elements or chosen dims (floor 1): sum, mean, max, min,
// argmax and the L2 norm.
//
//   Tensor total = hg::ops::sum(x);                    // all elements, rank 0
//   Tensor rows  = hg::ops::mean(x, {-1}, true);       // [N, C] -> [N, 1]
//   Tensor peak  = hg::ops::max(x, {0, 2});            // [A, B, C] -> [B]
//   Tensor label = hg::ops::argmax(logits, 1);         // [N, C] -> [N] i64
//   Tensor scale = hg::ops::norm(grad);                // sqrt(sum(x^2)), rank 0
//
// dims: empty = every dim; negative dims wrap (-1 is the last); a dim listed
// twice or out of range is an hg::Error. A rank-0 tensor accepts dims {0} or
// {-1} and reduces over its one element. keepdim keeps each reduced dim as 1.
//
// dtypes: the output has the input's dtype, except sum of an integer or bool
// tensor (i64) and argmax (always i64). mean and norm need a floating input
// (the error says to convert with .to(hg::kF32)).
//
// Precision contract: every reduction accumulates in fp32 for f32/f16/bf16
// inputs (f64 for f64, i64 for integer sums) and rounds once to the output
// dtype, so the sum of 4,096 fp16 ones is exactly 4,096 and row sums of
// +32,000/-32,000 fp16 pairs are 0, not inf. A result outside the output
// dtype's range (an fp16 sum above 65,504) is inf, as the rounding dictates.
// mean = fp32 sum / n, rounded once; norm = sqrt(fp32 sum of x^2), rounded
// once (an f32 input whose squares overflow fp32 gives inf, as in PyTorch).
// NaN propagates: any NaN in a reduced slice makes sum/mean/max/min/norm NaN,
// and argmax returns the index of the first NaN (NaN counts as the maximum,
// as in PyTorch). Ties in argmax go to the first index.
//
// Empty reductions: sum -> 0, norm -> 0, mean -> NaN (0/0, as in PyTorch);
// max, min and argmax over an empty slice are an hg::Error.
//
// Determinism: both backends use a fixed summation order that depends only on
// the shape (and, on CUDA, on the device's SM count), never on timing: no
// float atomics, so the same input gives bit-identical output run to run.
// CPU and CUDA orders differ, so their results agree to the reduction
// tolerance, not bit for bit (max/min/argmax agree exactly).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "kernels/op_list.h"

namespace hg::ops {

// op: sum mean max min norm (argmax has its own entry below).
Tensor reduce(OpId op, const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

inline Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(OpId::sum, x, dims, keepdim);
}
inline Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(OpId::mean, x, dims, keepdim);
}
inline Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(OpId::max, x, dims, keepdim);
}
inline Tensor min(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(OpId::min, x, dims, keepdim);
}
// L2 norm: sqrt(sum(x^2)) over dims.
inline Tensor norm(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(OpId::norm, x, dims, keepdim);
}

// Index (i64) of the first maximum along `dim`; nullopt = over the flattened
// tensor (row-major index). keepdim without a dim keeps every dim as 1.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

}  // namespace hg::ops

// The backend kernels (hg::cpu:: in kernels/reduce/reduce_cpu.cpp, hg::cuda:: in
// kernels/reduce/reduce.cu). kernels/reduce/reduce_ops.cpp permutes the reduced dims
// innermost and hands the backends a row view. Preconditions (HG_CHECK: they guard memory):
//   x    [rows, cols], 2-D, on out's device; stride(1) == 1 (rows are dense;
//        stride(0) may be anything, so sliced row blocks need no copy)
//   out  [rows], contiguous; dtype == x's (i64 for argmax_rows); for sum of
//        integers x is already i64
//   op   sum mean max min norm; mean/norm only for floating dtypes;
//        cols >= 1 for max, min and argmax (ops.cpp reports empty slices)
// clang-format off
#define HG_DECLARE_REDUCE_KERNELS                                                  \
  /* out[r] = op(x[r, 0..cols)) */                                                 \
  void reduce_rows(OpId op, const Tensor& out, const Tensor& x);                   \
  /* out[r] = first c with x[r, c] maximal (NaN counts as the maximum) */          \
  void argmax_rows(const Tensor& out, const Tensor& x);
// clang-format on

namespace hg::detail {
// The preconditions of reduce_rows that guard memory, checked by both backends
// with HG_CHECK (always on): dense rows in, one contiguous output per row.
inline void check_reduce_rows_buffers(const Tensor& out, const Tensor& x) {
  HG_CHECK(x.dim() == 2 && (x.sizes()[1] <= 1 || x.strides()[1] == 1), "reduce_rows wants dense rows, got ",
           x.shape_str());
  HG_CHECK(out.is_contiguous() && out.numel() == x.sizes()[0] && out.dtype() == x.dtype(),
           "reduce_rows: bad output ", out.shape_str());
}
// The preconditions of reduce_cols (both backends): dense columns in (element
// (r, c) at r + c * stride(1), stride(1) >= rows so columns do not overlap),
// one contiguous output per r.
inline void check_reduce_cols_buffers(const Tensor& out, const Tensor& x) {
  HG_CHECK(x.dim() == 2 && (x.sizes()[0] <= 1 || x.strides()[0] == 1) &&
               (x.sizes()[1] <= 1 || x.strides()[1] >= x.sizes()[0]),
           "reduce_cols wants dense columns, got ", x.shape_str());
  HG_CHECK(out.is_contiguous() && out.numel() == x.sizes()[0] && out.dtype() == x.dtype(), "reduce_cols: bad output ",
           out.shape_str());
}
}  // namespace hg::detail

namespace hg::cpu {
HG_DECLARE_REDUCE_KERNELS
// CPU only (Note [Column reductions on the CPU], kernels/reduce/reduce_cpu.cpp):
// out[r] = op(x[r, 0..cols)) for a view with dense columns (stride(0) == 1,
// stride(1) >= rows), bit-identical to reduce_rows on the copied rows.
void reduce_cols(OpId op, const Tensor& out, const Tensor& x);
}  // namespace hg::cpu

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
HG_DECLARE_REDUCE_KERNELS
// The CUDA column path (Note [Column reductions on CUDA], kernels/cuda/
// reduce.cu): out[r] = op(x[r, 0..cols)) for a view with dense columns
// (stride(0) == 1, stride(1) >= rows), no copy; value reductions only.
void reduce_cols(OpId op, const Tensor& out, const Tensor& x);
}  // namespace hg::cuda
#endif

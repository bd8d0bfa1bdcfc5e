// CPU reference kernels for the row reductions (kernels/reduce.h): sum, mean,
// max, min, norm and argmax over each row of a [rows, cols] view with dense
// rows. The numerical oracle for kernels/cuda/reduce.cu.
//
// Formula     out[r] = op(x[r, 0..cols))
// Split       rows in parallel (OpenMP, static schedule) when the tensor is
//             large; each row is reduced by one thread
// Order       sums (sum, mean, norm) are blocked pairwise: consecutive blocks
//             of kSumBlock elements are summed left to right, and block sums
//             are combined by recursive halving, so the error grows like
//             (kSumBlock + log2(cols / kSumBlock)) * eps instead of cols * eps;
//             max/min/argmax scan left to right (their result does not depend
//             on the order)
// Bytes       each element read once; one write per row
// Precision   16-bit and f32 values widened to float, f64 stays double,
//             integer sums in i64; one rounding to the output dtype on store
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cpu/loops.h"
#include "kernels/reduce.h"

namespace hg::cpu {

namespace {

// Elements summed left to right before pairwise combining takes over.
constexpr int64_t kSumBlock = 128;

// What a row accumulates in: float for f32/f16/bf16, double for f64, i64 for
// integers and bool.
template <typename T>
using row_acc_t = std::conditional_t<std::is_same_v<T, double>, double,
                                     std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

// sum over i in [0, n) of load(x[i]), blocked pairwise (see Order above).
template <typename T, typename Load>
row_acc_t<T> pairwise_sum(const T* x, int64_t n, Load load) {
  using A = row_acc_t<T>;
  if (n <= kSumBlock) {
    A acc = A(0);
    for (int64_t i = 0; i < n; ++i) acc += load(x[i]);
    return acc;
  }
  // Split at a block boundary so the blocks are the same whatever the depth.
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  const int64_t half = (blocks / 2) * kSumBlock;
  return pairwise_sum<T>(x, half, load) + pairwise_sum<T>(x + half, n - half, load);
}

// Runs row_fn(r, row_pointer) for every row, in parallel when it pays.
template <typename T, typename RowFn>
void for_each_row(const Tensor& x, RowFn row_fn) {
  const int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  const int64_t row_stride = x.strides()[0];
  const T* base = static_cast<const T*>(x.data_ptr());
  const bool parallel = rows > 1 && rows * cols >= kParallelGrain;
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t r = 0; r < rows; ++r) row_fn(r, base + r * row_stride);
}

template <typename T>
void reduce_rows_typed(OpId op, const Tensor& out, const Tensor& x) {
  using A = row_acc_t<T>;
  const int64_t cols = x.sizes()[1];
  T* o = static_cast<T*>(out.data_ptr());
  const auto widen = [](T v) { return static_cast<A>(v); };
  switch (op) {
    case OpId::sum:
      return for_each_row<T>(x, [&](int64_t r, const T* row) {
        o[r] = static_cast<T>(pairwise_sum<T>(row, cols, widen));
      });
    case OpId::max:
      return for_each_row<T>(x, [&](int64_t r, const T* row) {
        A best = widen(row[0]);
        for (int64_t c = 1; c < cols; ++c) best = max_nan(best, widen(row[c]));
        o[r] = static_cast<T>(best);
      });
    case OpId::min:
      return for_each_row<T>(x, [&](int64_t r, const T* row) {
        A best = widen(row[0]);
        for (int64_t c = 1; c < cols; ++c) best = min_nan(best, widen(row[c]));
        o[r] = static_cast<T>(best);
      });
    default:
      break;
  }
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case OpId::mean:  // 0 / 0 = NaN for an empty row, like torch
        return for_each_row<T>(x, [&](int64_t r, const T* row) {
          o[r] = static_cast<T>(pairwise_sum<T>(row, cols, widen) / static_cast<A>(cols));
        });
      case OpId::norm:
        return for_each_row<T>(x, [&](int64_t r, const T* row) {
          const A sum_sq = pairwise_sum<T>(row, cols, [](T v) {
            const A a = static_cast<A>(v);
            return a * a;
          });
          o[r] = static_cast<T>(std::sqrt(sum_sq));
        });
      default:
        break;
    }
  }
  HG_FAIL("cpu::reduce_rows: ", op_name(op), " is not a reduction for dtype ", dtype_of<T>());
}

}  // namespace

void reduce_rows(OpId op, const Tensor& out, const Tensor& x) {
  hg::detail::check_reduce_rows_buffers(out, x);
  HG_CHECK(x.sizes()[1] > 0 || (op != OpId::max && op != OpId::min), "empty max/min row");
  if (out.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&](auto tag) { reduce_rows_typed<decltype(tag)>(op, out, x); });
}

void argmax_rows(const Tensor& out, const Tensor& x) {
  HG_CHECK(x.dim() == 2 && (x.sizes()[1] <= 1 || x.strides()[1] == 1), "argmax_rows wants dense rows, got ",
            x.shape_str());
  HG_CHECK(out.is_contiguous() && out.dtype() == kI64 && out.numel() == x.sizes()[0],
            "argmax_rows: bad output ", out.shape_str());
  HG_CHECK(x.sizes()[1] > 0, "empty argmax row");
  if (out.numel() == 0) return;
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  const int64_t cols = x.sizes()[1];
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = row_acc_t<T>;
    for_each_row<T>(x, [&](int64_t r, const T* row) {
      // Strict > keeps the first of equal maxima; the first NaN wins and stops the scan.
      int64_t best_index = 0;
      A best = static_cast<A>(row[0]);
      for (int64_t c = 1; c < cols && best == best; ++c) {
        const A v = static_cast<A>(row[c]);
        if (v != v || v > best) {
          best = v;
          best_index = c;
        }
      }
      o[r] = best_index;
    });
  });
}

}  // namespace hg::cpu

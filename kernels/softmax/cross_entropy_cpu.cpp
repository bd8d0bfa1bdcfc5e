// CPU reference kernels for fused cross-entropy (log-softmax + NLL, mean over
// the non-ignored rows, optional label smoothing) and its fused backward. The
// numerical oracle for kernels/softmax/cross_entropy.cu; formulas in
// kernels/softmax/softmax.h.
//
// Shapes: logits [N, C] contiguous, targets [N] i64, loss / d_loss rank 0 in
// the accumulation dtype A (float; double for f64 logits), row_stats [N, 2]
// = (m, log s) in A.
// Only the first K = classes columns are classes; columns K..C-1 (a padded
// vocabulary) are outside every sum and get gradient 0.
// Split: targets validated first (serially, so the error names the first bad
// row), then one row per loop iteration, rows in parallel when large; the
// per-row losses are summed serially in row order (deterministic).
// Precision: every row in A with its max subtracted:
//   -log p_c = (m - x_c) + log(s),  m = max_c x_c,  s = sum_c exp(x_c - m)
// so logits of +-1000 lose nothing to cancellation against log-sum-exp. The
// statistics are two plain passes (max, then the sum) here, an independent
// check of the CUDA kernel's online one-pass form; the backward uses the
// forward's (m, log s) when given them, p_c = exp((x_c - m) - log s).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/convert_simd.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/softmax/softmax.h"

namespace hg::cpu {

namespace {

void check_targets(OpId op, const int64_t* targets, int64_t n, int64_t classes, int64_t ignore_index) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[i];
    HG_CHECK(t == ignore_index || (t >= 0 && t < classes), op_name(op), ": target ", t, " at row ", i,
             " is out of range [0, ", classes, "); targets must be class indices or ignore_index (",
             ignore_index, ")");
  }
}

// Row statistics: m = max, s = sum exp(x - m), and sum (m - x) for smoothing.
template <typename A>
struct RowStats {
  A m;
  A s;
  A sum_gap;  // sum_c (m - x_c) >= 0
};

// The scalar statistics: the reference path (HG_CPU_MATH=scalar) and f64.
template <typename T, typename A>
RowStats<A> compute_row_stats(const T* x, int64_t cols, bool need_gap) {
  RowStats<A> st{-std::numeric_limits<A>::infinity(), A(0), A(0)};
  for (int64_t c = 0; c < cols; ++c) st.m = max_nan(st.m, static_cast<A>(x[c]));
  for (int64_t c = 0; c < cols; ++c) {
    const A gap = st.m - static_cast<A>(x[c]);
    st.s += std::exp(-gap);
    if (need_gap) st.sum_gap += gap;
  }
  return st;
}

// With the vector math (kernels/cpu/vec_math.h) an f32, f16 or bf16 row's
// statistics come from one kernel that widens each value in the registers
// (the max, then sum exp(x - m) through SLEEF, vectorised): the same results
// for a 16-bit row as for its f32 copy.
RowStats<float> vec_row_stats(const VecMathTable* vt, VecType type, const void* x, int64_t cols, bool need_gap) {
  RowStats<float> st{0.0f, 0.0f, 0.0f};
  vt->lse_row(type, x, cols, &st.m, &st.s, need_gap ? &st.sum_gap : nullptr);
  return st;
}

template <typename T>
void cross_entropy_typed(const Tensor& loss, const Tensor& row_stats, const Tensor& logits, const Tensor& targets,
                         int64_t ignore_index, double label_smoothing, int64_t classes) {
  using A = acc_t<T>;
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const T* x = static_cast<const T*>(logits.data_ptr());
  const int64_t* t = static_cast<const int64_t*>(targets.data_ptr());
  check_targets(OpId::cross_entropy, t, rows, classes, ignore_index);
  const A eps = static_cast<A>(label_smoothing);
  std::vector<A> row_loss(static_cast<size_t>(rows), A(0));
  A* stats = row_stats.defined() ? static_cast<A*>(row_stats.data_ptr()) : nullptr;
  const VecMathTable* vt = kHasVecType<T> ? vec_math() : nullptr;
  parallel_for(rows, rows * classes >= kParallelGrain, [&](int64_t r) {
    if (t[r] == ignore_index) {
      if (stats != nullptr) stats[2 * r] = stats[2 * r + 1] = A(0);
      return;
    }
    const T* x_row = x + r * cols;
    RowStats<A> st;
    if constexpr (kHasVecType<T>) {
      st = vt != nullptr ? vec_row_stats(vt, vec_type_of<T>(), x_row, classes, eps > A(0))
                         : compute_row_stats<T, A>(x_row, classes, eps > A(0));
    } else {
      st = compute_row_stats<T, A>(x_row, classes, eps > A(0));
    }
    const A log_s = std::log(st.s);
    A l = (A(1) - eps) * ((st.m - static_cast<A>(x_row[t[r]])) + log_s);
    if (eps > A(0)) l += eps * (st.sum_gap / static_cast<A>(classes) + log_s);
    row_loss[static_cast<size_t>(r)] = l;
    if (stats != nullptr) {
      stats[2 * r] = st.m;
      stats[2 * r + 1] = log_s;
    }
  });
  A total = 0;
  int64_t valid = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore_index) continue;
    total += row_loss[static_cast<size_t>(r)];
    ++valid;
  }
  *static_cast<A*>(loss.data_ptr()) = total / static_cast<A>(valid);  // 0/0 = NaN when none valid
}

template <typename T>
void cross_entropy_backward_typed(const Tensor& d_logits, const Tensor& d_loss, const Tensor& logits,
                                  const Tensor& targets, const Tensor& row_stats, int64_t ignore_index,
                                  double label_smoothing, int64_t classes) {
  using A = acc_t<T>;
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const T* x = static_cast<const T*>(logits.data_ptr());
  T* d_x = static_cast<T*>(d_logits.data_ptr());
  const int64_t* t = static_cast<const int64_t*>(targets.data_ptr());
  const A* stats = row_stats.defined() ? static_cast<const A*>(row_stats.data_ptr()) : nullptr;
  check_targets(OpId::cross_entropy_backward, t, rows, classes, ignore_index);
  int64_t valid = 0;
  for (int64_t r = 0; r < rows; ++r) valid += t[r] != ignore_index;
  const A eps = static_cast<A>(label_smoothing);
  const A off_target = eps / static_cast<A>(classes);  // the smoothed one-hot off the target
  const A scale = *static_cast<const A*>(d_loss.data_ptr()) / static_cast<A>(valid);
  const VecMathTable* vt = kHasVecType<T> ? vec_math() : nullptr;
  parallel_for(rows, rows * cols >= kParallelGrain, [&](int64_t r) {
    T* d_row = d_x + r * cols;
    for (int64_t c = classes; c < cols; ++c) d_row[c] = static_cast<T>(A(0));  // padding columns
    if (t[r] == ignore_index) {
      for (int64_t c = 0; c < classes; ++c) d_row[c] = static_cast<T>(A(0));
      return;
    }
    const T* x_row = x + r * cols;
    if constexpr (kHasVecType<T>) {
      if (vt != nullptr) {
        float m, log_s;
        if (stats != nullptr) {
          m = stats[2 * r];
          log_s = stats[2 * r + 1];
        } else {
          const RowStats<float> st = vec_row_stats(vt, vec_type_of<T>(), x_row, classes, false);
          m = st.m;
          log_s = std::log(st.s);
        }
        vt->exp_grad(vec_type_of<T>(), x_row, d_row, classes, m, log_s, off_target, scale);
        // The target column: p - (off_target + 1 - eps) in f32, p from the same
        // kernel, rounded once.
        const float x_t = static_cast<float>(x_row[t[r]]);
        float p_t = 0;
        vt->exp_grad(VecType::f32, &x_t, &p_t, 1, m, log_s, 0.0f, 1.0f);
        d_row[t[r]] = static_cast<T>((p_t - (off_target + (A(1) - eps))) * scale);
        return;
      }
    }
    A m, log_s;
    if (stats != nullptr) {
      m = stats[2 * r];
      log_s = stats[2 * r + 1];
    } else {
      const RowStats<A> st = compute_row_stats<T, A>(x_row, classes, false);
      m = st.m;
      log_s = std::log(st.s);
    }
    for (int64_t c = 0; c < classes; ++c) {
      const A p = std::exp((static_cast<A>(x_row[c]) - m) - log_s);
      const A target = off_target + (c == t[r] ? A(1) - eps : A(0));
      d_row[c] = static_cast<T>((p - target) * scale);
    }
  });
}

}  // namespace

void cross_entropy(const Tensor& loss, const Tensor& row_stats, const Tensor& logits, const Tensor& targets,
                   int64_t ignore_index, double label_smoothing, int64_t classes) {
  ::hg::detail::check_cross_entropy_buffers(logits, targets, classes, row_stats);
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    cross_entropy_typed<decltype(tag)>(loss, row_stats, logits, targets, ignore_index, label_smoothing, classes);
  });
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& d_loss, const Tensor& logits, const Tensor& targets,
                            const Tensor& row_stats, int64_t ignore_index, double label_smoothing, int64_t classes) {
  ::hg::detail::check_cross_entropy_buffers(logits, targets, classes, row_stats, d_logits);
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    cross_entropy_backward_typed<decltype(tag)>(d_logits, d_loss, logits, targets, row_stats, ignore_index,
                                                label_smoothing, classes);
  });
}

}  // namespace hg::cpu

// CPU reference kernels for softmax and log-softmax over the last dim, forward
// and backward. The numerical oracle for kernels/softmax/softmax.cu.
//
// Shapes: contiguous [rows, cols] (the ops layer flattens the leading dims).
// Split: one row per loop iteration, rows in parallel (OpenMP) when large.
// Precision: 16-bit values widened to float (double for f64), max subtracted
// before exp, one rounding on store. A NaN in a row makes the row NaN.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/copy.h"
#include "kernels/cpu/convert_simd.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/softmax/softmax.h"

namespace hg::cpu {

namespace {

// y = softmax(x) or log_softmax(x), row by row:
//   m = max_c x_c,  s = sum_c exp(x_c - m)
//   softmax: y_c = exp(x_c - m) / s      log_softmax: y_c = (x_c - m) - log(s)
// With the vector math (kernels/cpu/vec_math.h) every f32, f16 and bf16 row
// runs the table's softmax_row: SLEEF's exp, the 16-bit values widened and
// rounded back (RNE) in the vector registers. A 16-bit softmax keeps the
// row's exp values in this thread's f32 row buffer between the sum and the
// division (cheaper than a second exp); nothing else is staged.
template <typename T>
void softmax_rows_vec(bool log, const T* x, T* y, int64_t rows, int64_t cols, VecType t, const VecMathTable* vt) {
  parallel_for(rows, rows * cols >= kParallelGrain, [&](int64_t r) {
    float* scratch = nullptr;
    if (t != VecType::f32 && !log) {
      thread_local std::vector<float> buf;
      buf.resize(static_cast<size_t>(cols));
      scratch = buf.data();
    }
    vt->softmax_row(t, log, x + r * cols, y + r * cols, cols, scratch);
  });
}

template <typename T>
void softmax_backward_rows_vec(bool log, const T* d_y, const T* y, T* d_x, int64_t rows, int64_t cols, VecType t,
                               const VecMathTable* vt) {
  parallel_for(rows, rows * cols >= kParallelGrain, [&](int64_t r) {
    vt->softmax_backward_row(t, log, d_y + r * cols, y + r * cols, d_x + r * cols, cols);
  });
}

// Runs body(T{}, VecType) for f32, f16 and bf16 on the vector path; false
// (nothing run) for f64 or on the scalar path.
template <typename Body>
bool with_vec_type(DType dtype, const Body& body) {
  if (vec_math() == nullptr) return false;
  if (dtype == kF32) {
    body(float{}, VecType::f32);
  } else if (dtype == kF16) {
    body(half::from_bits(0), VecType::f16);
  } else if (dtype == kBF16) {
    body(bfloat16::from_bits(0), VecType::bf16);
  } else {
    return false;
  }
  return true;
}

// The scalar reference path (HG_CPU_MATH=scalar, and f64).
template <typename T>
void softmax_rows(bool log, const T* x, T* y, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  parallel_for(rows, rows * cols >= kParallelGrain, [&](int64_t r) {
    const T* x_row = x + r * cols;
    T* y_row = y + r * cols;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t c = 0; c < cols; ++c) m = max_nan(m, static_cast<A>(x_row[c]));
    A s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<A>(x_row[c]) - m);
    if (log) {
      const A log_s = std::log(s);
      for (int64_t c = 0; c < cols; ++c) y_row[c] = static_cast<T>((static_cast<A>(x_row[c]) - m) - log_s);
    } else {
      for (int64_t c = 0; c < cols; ++c) y_row[c] = static_cast<T>(std::exp(static_cast<A>(x_row[c]) - m) / s);
    }
  });
}

// softmax:      d_x_c = y_c * (d_y_c - sum_k d_y_k * y_k)
// log_softmax:  d_x_c = d_y_c - exp(y_c) * sum_k d_y_k
template <typename T>
void softmax_backward_rows(bool log, const T* d_y, const T* y, T* d_x, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  parallel_for(rows, rows * cols >= kParallelGrain, [&](int64_t r) {
    const T* d_y_row = d_y + r * cols;
    const T* y_row = y + r * cols;
    T* d_x_row = d_x + r * cols;
    A dot = 0;
    for (int64_t c = 0; c < cols; ++c) {
      dot += log ? static_cast<A>(d_y_row[c]) : static_cast<A>(d_y_row[c]) * static_cast<A>(y_row[c]);
    }
    for (int64_t c = 0; c < cols; ++c) {
      const A dy = static_cast<A>(d_y_row[c]), yc = static_cast<A>(y_row[c]);
      d_x_row[c] = static_cast<T>(log ? dy - std::exp(yc) * dot : yc * (dy - dot));
    }
  });
}

}  // namespace

void softmax(OpId op, const Tensor& y, const Tensor& x) {
  HG_CHECK(x.is_contiguous() && y.is_contiguous() && x.dim() >= 1 && y.numel() == x.numel() &&
               y.dtype() == x.dtype(),
           "cpu::softmax needs contiguous tensors of one shape and dtype, got ", x.shape_str(), " -> ",
           y.shape_str());
  HG_CHECK(op == OpId::softmax || op == OpId::log_softmax, "cpu::softmax: ", op_name(op),
           " is not softmax or log_softmax");
  if (x.numel() == 0) return;
  const int64_t cols = x.size(-1);
  const int64_t rows = x.numel() / cols;
  const bool log = op == OpId::log_softmax;
  if (with_vec_type(x.dtype(), [&](auto tag, VecType t) {
        using T = decltype(tag);
        softmax_rows_vec<T>(log, static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), rows, cols, t,
                            vec_math());
      })) {
    return;
  }
  if (x.dtype() == kF16 || x.dtype() == kBF16) {  // Note [16-bit kernels through f32 on the CPU]
    const Tensor yf = f32_buffer_like(y);
    softmax(op, yf, widened_f32(x));
    copy_into(y, yf);
    return;
  }
  dispatch_floating(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    softmax_rows<T>(log, static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), rows, cols);
  });
}

void softmax_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& y) {
  HG_CHECK(d_x.is_contiguous() && d_y.is_contiguous() && y.is_contiguous() && y.dim() >= 1 &&
               d_x.numel() == y.numel() && d_y.numel() == y.numel() && d_x.dtype() == y.dtype() &&
               d_y.dtype() == y.dtype(),
           "cpu::softmax_backward needs contiguous tensors of one shape and dtype, got ", d_y.shape_str(), " and ",
           y.shape_str());
  HG_CHECK(op == OpId::softmax_backward || op == OpId::log_softmax_backward,
           "cpu::softmax_backward: ", op_name(op), " is not a softmax backward op");
  if (y.numel() == 0) return;
  const int64_t cols = y.size(-1);
  const int64_t rows = y.numel() / cols;
  const bool log = op == OpId::log_softmax_backward;
  if (with_vec_type(y.dtype(), [&](auto tag, VecType t) {
        using T = decltype(tag);
        softmax_backward_rows_vec<T>(log, static_cast<const T*>(d_y.data_ptr()), static_cast<const T*>(y.data_ptr()),
                                     static_cast<T*>(d_x.data_ptr()), rows, cols, t, vec_math());
      })) {
    return;
  }
  if (y.dtype() == kF16 || y.dtype() == kBF16) {  // Note [16-bit kernels through f32 on the CPU]
    const Tensor d_xf = f32_buffer_like(d_x);
    softmax_backward(op, d_xf, widened_f32(d_y), widened_f32(y));
    copy_into(d_x, d_xf);
    return;
  }
  dispatch_floating(y.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_rows<T>(log, static_cast<const T*>(d_y.data_ptr()), static_cast<const T*>(y.data_ptr()),
                             static_cast<T*>(d_x.data_ptr()), rows, cols);
  });
}

// ---- softmax over a middle dim ----------------------------------------------------------
// x, y contiguous [outer, n, inner]; the softmax runs over n for each (o, i)
// column, with the formulas of softmax_rows / softmax_backward_rows. Columns
// in parallel; each column reads its n values with stride inner.

namespace {

template <typename T>
void softmax_columns(bool log, const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using A = acc_t<T>;
  parallel_for(outer * inner, outer * n * inner >= kParallelGrain, [&](int64_t col) {
    const int64_t base = (col / inner) * n * inner + col % inner;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t k = 0; k < n; ++k) m = max_nan(m, static_cast<A>(x[base + k * inner]));
    A s = 0;
    for (int64_t k = 0; k < n; ++k) s += std::exp(static_cast<A>(x[base + k * inner]) - m);
    const A log_s = std::log(s);
    for (int64_t k = 0; k < n; ++k) {
      const A shifted = static_cast<A>(x[base + k * inner]) - m;
      y[base + k * inner] = static_cast<T>(log ? shifted - log_s : std::exp(shifted) / s);
    }
  });
}

template <typename T>
void softmax_columns_backward(bool log, const T* d_y, const T* y, T* d_x, int64_t outer, int64_t n, int64_t inner) {
  using A = acc_t<T>;
  parallel_for(outer * inner, outer * n * inner >= kParallelGrain, [&](int64_t col) {
    const int64_t base = (col / inner) * n * inner + col % inner;
    A dot = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t e = base + k * inner;
      dot += log ? static_cast<A>(d_y[e]) : static_cast<A>(d_y[e]) * static_cast<A>(y[e]);
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t e = base + k * inner;
      const A dy = static_cast<A>(d_y[e]), yc = static_cast<A>(y[e]);
      d_x[e] = static_cast<T>(log ? dy - std::exp(yc) * dot : yc * (dy - dot));
    }
  });
}

}  // namespace

void softmax_dim(OpId op, const Tensor& y, const Tensor& x, int64_t outer, int64_t n, int64_t inner) {
  HG_CHECK(x.is_contiguous() && y.is_contiguous() && x.numel() == outer * n * inner && y.numel() == x.numel() &&
               y.dtype() == x.dtype(),
           "cpu::softmax_dim needs contiguous tensors of ", outer, " x ", n, " x ", inner, " elements, got ",
           x.shape_str(), " -> ", y.shape_str());
  HG_CHECK(op == OpId::softmax || op == OpId::log_softmax, "cpu::softmax_dim: ", op_name(op),
           " is not softmax or log_softmax");
  if (x.numel() == 0) return;
  dispatch_floating(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    softmax_columns<T>(op == OpId::log_softmax, static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()),
                       outer, n, inner);
  });
}

void softmax_dim_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& y, int64_t outer, int64_t n,
                          int64_t inner) {
  HG_CHECK(d_x.is_contiguous() && d_y.is_contiguous() && y.is_contiguous() && y.numel() == outer * n * inner &&
               d_x.numel() == y.numel() && d_y.numel() == y.numel() && d_x.dtype() == y.dtype() &&
               d_y.dtype() == y.dtype(),
           "cpu::softmax_dim_backward needs contiguous tensors of ", outer, " x ", n, " x ", inner, " elements");
  HG_CHECK(op == OpId::softmax_backward || op == OpId::log_softmax_backward, "cpu::softmax_dim_backward: ", op_name(op),
           " is not a softmax backward op");
  if (y.numel() == 0) return;
  dispatch_floating(y.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    softmax_columns_backward<T>(op == OpId::log_softmax_backward, static_cast<const T*>(d_y.data_ptr()),
                                static_cast<const T*>(y.data_ptr()), static_cast<T*>(d_x.data_ptr()), outer, n, inner);
  });
}

}  // namespace hg::cpu

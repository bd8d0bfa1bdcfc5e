// CPU counterpart of kernels/attention/attention.cu: the fused scale-mask-softmax
// (-dropout) row kernel of the attention math path, forward and backward
// (formulas, mask and dropout rules: kernels/attention/attention.h).
//
// Split: one row of the [rows, S] score matrix per loop iteration, rows in
// parallel (OpenMP) when large. Precision: acc_t<T> (fp32, f64 for f64) per
// row, max subtracted before exp, one rounding on store.
//
// Without a mask tensor and without dropout (the causal GPT's case), f32 and
// 16-bit rows take the vector kernels of kernels/cpu/vec_math.h: the row's
// allowed prefix (j <= i when causal, else the whole row) is scaled in f32
// lanes (scale * s, the scalar value() with its + 0), run through the vector
// softmax row (SLEEF's exp, kernels/cpu/vec_math.h) and rounded once to T; the
// columns a causal row may not see are 0. The scalar loop below stays the
// reference (HG_CPU_MATH=scalar) and serves masks, dropout and f64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "kernels/attention/attention.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vec_math.h"

namespace hg::cpu {

namespace {

// The vector path's forward (above): false when it does not apply.
template <typename T>
bool forward_rows_vec(const AttnSoftmaxParams& prm, const T* s, T* y) {
  constexpr bool f32 = std::is_same_v<T, float>;
  if constexpr (!kHasVecType<T>) {
    return false;
  } else {
    const VecMathTable* vt = vec_math();
    if (vt == nullptr || prm.mask_kind != AttnMaskKind::kNone || prm.dropout_p > 0.0f) return false;
    constexpr VecType t = vec_type_of<T>();
    const int64_t cols = prm.cols;
    const float scale = static_cast<float>(prm.scale);
    parallel_for(prm.rows, prm.rows * cols >= kParallelGrain, [&](int64_t r) {
      const int64_t allowed = prm.causal ? std::min(r % prm.q_len + 1, cols) : cols;
      const T* s_row = s + r * cols;
      T* y_row = y + r * cols;
      if constexpr (f32) {
        vt->affine(t, s_row, y_row, allowed, 0.0f, scale, 0.0f);
        vt->softmax_row(t, false, y_row, y_row, allowed, nullptr);
      } else {
        thread_local std::vector<float> row;
        if (row.size() < static_cast<size_t>(allowed)) row.resize(static_cast<size_t>(allowed));
        vt->widen(t, s_row, row.data(), allowed);
        vt->affine(VecType::f32, row.data(), row.data(), allowed, 0.0f, scale, 0.0f);
        vt->softmax_row(VecType::f32, false, row.data(), row.data(), allowed, nullptr);
        vt->narrow(t, row.data(), y_row, allowed);
      }
      std::fill(y_row + allowed, y_row + cols, static_cast<T>(0.0f));
    });
    return true;
  }
}

template <typename T>
void forward_rows(const AttnSoftmaxParams& prm, const T* s, T* y, T* p) {
  using A = acc_t<T>;
  const int64_t cols = prm.cols;
  if (p == nullptr && forward_rows_vec(prm, s, y)) return;
  parallel_for(prm.rows, prm.rows * cols >= kParallelGrain, [&](int64_t r) {
    const T* s_row = s + r * cols;
    T* y_row = y + r * cols;
    A m = -std::numeric_limits<A>::infinity();
    auto value = [&](int64_t c) {  // scale * s + mask, or -inf
      double add = 0.0;
      if (!attn_allowed(prm, r, c, &add)) return -std::numeric_limits<A>::infinity();
      return static_cast<A>(prm.scale) * static_cast<A>(s_row[c]) + static_cast<A>(add);
    };
    for (int64_t c = 0; c < cols; ++c) m = max_nan(m, value(c));
    A sum = 0;
    if (m != -std::numeric_limits<A>::infinity()) {
      for (int64_t c = 0; c < cols; ++c) {
        const A x = value(c);
        if (x != -std::numeric_limits<A>::infinity()) sum += std::exp(x - m);
      }
    }
    for (int64_t c = 0; c < cols; ++c) {
      const A x = value(c);
      // Note [Fully masked rows]: m = -inf -> y = 0.
      const A yc = (m == -std::numeric_limits<A>::infinity() || x == -std::numeric_limits<A>::infinity())
                       ? A(0)
                       : std::exp(x - m) / sum;
      y_row[c] = static_cast<T>(yc);
      if (p != nullptr) p[r * cols + c] = static_cast<T>(yc * static_cast<A>(attn_dropout_factor(prm, r, c)));
    }
  });
}

template <typename T>
void backward_rows(const AttnSoftmaxParams& prm, const T* d_p, const T* y, T* d_s) {
  using A = acc_t<T>;
  const int64_t cols = prm.cols;
  parallel_for(prm.rows, prm.rows * cols >= kParallelGrain, [&](int64_t r) {
    const int64_t base = r * cols;
    A dot = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const A dy = static_cast<A>(d_p[base + c]) * static_cast<A>(attn_dropout_factor(prm, r, c));
      dot += dy * static_cast<A>(y[base + c]);
    }
    for (int64_t c = 0; c < cols; ++c) {
      const A dy = static_cast<A>(d_p[base + c]) * static_cast<A>(attn_dropout_factor(prm, r, c));
      d_s[base + c] = static_cast<T>(static_cast<A>(prm.scale) * static_cast<A>(y[base + c]) * (dy - dot));
    }
  });
}

}  // namespace

void attention_softmax(const AttnSoftmaxParams& params, const Tensor& scores, const Tensor& y, const Tensor& p) {
  HG_CHECK(scores.is_contiguous() && y.is_contiguous() && (!p.defined() || p.is_contiguous()) &&
               scores.numel() == params.rows * params.cols && y.numel() == scores.numel(),
           "cpu::attention_softmax needs contiguous [rows, cols] tensors, got ", scores.shape_str());
  if (scores.numel() == 0) return;
  dispatch_floating(scores.dtype(), "attention_softmax", [&](auto tag) {
    using T = decltype(tag);
    forward_rows<T>(params, static_cast<const T*>(scores.data_ptr()), static_cast<T*>(y.data_ptr()),
                    p.defined() ? static_cast<T*>(p.data_ptr()) : nullptr);
  });
}

void attention_softmax_backward(const AttnSoftmaxParams& params, const Tensor& d_p, const Tensor& y,
                                const Tensor& d_scores) {
  HG_CHECK(d_p.is_contiguous() && y.is_contiguous() && d_scores.is_contiguous() &&
               y.numel() == params.rows * params.cols && d_p.numel() == y.numel() && d_scores.numel() == y.numel(),
           "cpu::attention_softmax_backward needs contiguous [rows, cols] tensors, got ", y.shape_str());
  if (y.numel() == 0) return;
  dispatch_floating(y.dtype(), "attention_softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    backward_rows<T>(params, static_cast<const T*>(d_p.data_ptr()), static_cast<const T*>(y.data_ptr()),
                     static_cast<T*>(d_scores.data_ptr()));
  });
}

}  // namespace hg::cpu

// CPU reference kernels for layer_norm and rms_norm, forward and backward
// (kernels/norm/norm.h has the formulas). The numerical oracle for
// kernels/norm/norm.cu.
//
// Two paths: the vector row kernels of kernels/norm/norm_simd.h (f32, f16,
// bf16 on the vector math path; Note [vector norm rows] in
// kernels/norm/norm_simd_impl.h), and the scalar rows below (f64, and every
// dtype under HG_CPU_MATH=scalar or without SLEEF): the reference.
//
// Shapes     x, y, d_y, d_x: contiguous [rows, cols]; weight, bias: [cols]
// Split      forward and d_x: blocks of rows in parallel (OpenMP) when large;
//            d_weight/d_bias: the two-stage column reduction of
//            norm_math::norm_column_chunks (chunks of rows in parallel, then
//            blocks of columns in parallel over the chunk partials). The
//            vector path computes d_x inside the chunk loop when there are
//            enough chunks to share out (Note [fused norm backward])
// Order      row sums are blocked pairwise (scalar: blocks of 128 in 8
//            interleaved lanes; vector: Note [vector norm rows]); column sums
//            go row by row within a chunk, then chunk by chunk from +0, so
//            the result depends only on the shape (and the path)
// Precision  acc_t (float; double for f64), two passes for mean and variance,
//            one rounding on store
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/copy.h"
#include "kernels/cpu/convert_simd.h"
#include "kernels/cpu/loops.h"
#include "runtime/cpu/threads.h"
#include "kernels/norm/norm_simd.h"
#include "kernels/norm/norm.h"

namespace hg::cpu {

using ::hg::detail::dispatch_norm;
using ::hg::detail::ptr_or_null;

namespace {

constexpr int64_t kSumBlock = 128;
constexpr int64_t kLanes = 8;

// sum over c in [0, n) of term(c), blocked pairwise. Within a block, element
// begin + i goes to lane i % kLanes, each lane summed left to right and the
// lanes combined by the fixed tree ((0+1)+(2+3))+((4+5)+(6+7)), as in
// kernels/reduce/reduce_cpu.cpp: eight independent chains, which vectorise, where
// one serial chain waited an add's latency per element.
template <typename A, typename Term>
A pairwise_sum(int64_t begin, int64_t n, const Term& term) {
  if (n <= kSumBlock) {
    A lane[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) lane[l] += term(begin + i + l);
    }
    for (; i < n; ++i) lane[i % kLanes] += term(begin + i);
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
  const int64_t half = ((n + kSumBlock - 1) / kSumBlock / 2) * kSumBlock;
  return pairwise_sum<A>(begin, half, term) + pairwise_sum<A>(begin + half, n - half, term);
}

// Note [16-bit norm rows on the CPU]
// The scalar path's 16-bit rows (the vector path converts in registers, Note
// [vector norm rows]). A norm reads each value of a row two or three times.
// A 16-bit row is widened once into this thread's f32 row buffer by the vectorised converters
// (kernels/cpu/convert_simd.h: L1-resident for rows up to a few thousand
// values), the f32 row code runs on it, and a 16-bit output row is written
// into a second buffer and rounded once (RNE) into the tensor. The weights
// are widened once per call. The float values are the f32 kernel's on the
// widened tensor, so the results are bit-identical to it (test "16-bit norms
// are bit-identical to the f32 kernels"), without whole-tensor f32 copies.

// fn(T{}) for the 16-bit dtype t (kF16 or kBF16).
template <typename Fn>
void dispatch_16bit(DType t, const Fn& fn) {
  if (t == kF16) {
    fn(half::from_bits(0));
  } else {
    fn(bfloat16::from_bits(0));
  }
}

// The row at p as floats: p itself for f32 / f64, else widened into buf.
template <typename T>
const acc_t<T>* row_in(const T* p, int64_t cols, std::vector<float>& buf) {
  if constexpr (is_16bit_float_v<T>) {
    buf.resize(static_cast<size_t>(cols));
    widen_row<T>(p, buf.data(), cols);
    return buf.data();
  } else {
    (void)cols;
    (void)buf;
    return p;
  }
}
// Where a row's outputs go before row_out: p itself, or buf for 16-bit.
template <typename T>
acc_t<T>* row_out_buffer(T* p, int64_t cols, std::vector<float>& buf) {
  if constexpr (is_16bit_float_v<T>) {
    buf.resize(static_cast<size_t>(cols));
    return buf.data();
  } else {
    (void)cols;
    (void)buf;
    return p;
  }
}
// Rounds a 16-bit row's buffer into the tensor (nothing to do otherwise).
template <typename T>
void row_out(T* p, int64_t cols, const std::vector<float>& buf) {
  if constexpr (is_16bit_float_v<T>) narrow_row<T>(buf.data(), p, cols);
}

template <typename T, typename W>
void forward_rows(bool rms, const T* x, T* y, acc_t<T>* mean_out, acc_t<T>* rstd_out, const W* w, const W* b,
                  int64_t rows, int64_t cols, double eps) {
  using A = acc_t<T>;
  const A n = static_cast<A>(cols);
  parallel_for(rows, rows * cols >= kParallelGrain, [&](int64_t r) {
    thread_local std::vector<float> x_buf, y_buf;  // 16-bit rows only
    const A* xr = row_in(x + r * cols, cols, x_buf);
    A* yr = row_out_buffer(y + r * cols, cols, y_buf);
    const A mean = rms ? A(0) : pairwise_sum<A>(0, cols, [&](int64_t c) { return static_cast<A>(xr[c]); }) / n;
    const A sq = pairwise_sum<A>(0, cols, [&](int64_t c) {
      const A d = static_cast<A>(xr[c]) - mean;
      return d * d;
    });
    const A rstd = A(1) / std::sqrt(sq / n + static_cast<A>(eps));
    if (!rms) mean_out[r] = mean;
    rstd_out[r] = rstd;
    for (int64_t c = 0; c < cols; ++c) {
      A v = (static_cast<A>(xr[c]) - mean) * rstd;
      if (w != nullptr) v *= static_cast<A>(w[c]);
      if (b != nullptr) v += static_cast<A>(b[c]);
      yr[c] = v;
    }
    row_out(y + r * cols, cols, y_buf);
  });
}

template <typename T, typename W>
void backward_dx_rows(bool rms, const T* d_y, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd, const W* w,
                      T* d_x, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  const A n = static_cast<A>(cols);
  parallel_for(rows, rows * cols >= kParallelGrain, [&](int64_t r) {
    thread_local std::vector<float> dy_buf, x_buf, dx_buf;  // 16-bit rows only
    const A* dyr = row_in(d_y + r * cols, cols, dy_buf);
    const A* xr = row_in(x + r * cols, cols, x_buf);
    const A mu = rms ? A(0) : mean[r];
    const A rs = rstd[r];
    auto g = [&](int64_t c) {
      return w != nullptr ? static_cast<A>(dyr[c]) * static_cast<A>(w[c]) : static_cast<A>(dyr[c]);
    };
    auto xhat = [&](int64_t c) { return (static_cast<A>(xr[c]) - mu) * rs; };
    const A mean_g = rms ? A(0) : pairwise_sum<A>(0, cols, g) / n;
    const A mean_gx = pairwise_sum<A>(0, cols, [&](int64_t c) { return g(c) * xhat(c); }) / n;
    A* dxr = row_out_buffer(d_x + r * cols, cols, dx_buf);
    for (int64_t c = 0; c < cols; ++c) dxr[c] = norm_math::d_x(rms, g(c), xhat(c), rs, mean_g, mean_gx);
    row_out(d_x + r * cols, cols, dx_buf);
  });
}

// Stage 2 of the column reduction: out[c] = the sum over k of part[k, c]
// (part: [chunks, cols]), chunks in order from +0, rounded once, for d_w and
// d_b (each skipped when its out is null) in one parallel region (one
// fork and join per backward, not two). Blocks of columns in parallel;
// within a block, a chunk's partial row at a time (contiguous: vectorised),
// each column still summed in chunk order.
template <typename A, typename W>
void column_totals(const A* part_w, W* out_w, const A* part_b, W* out_b, int64_t chunks, int64_t cols) {
  constexpr int64_t kColumns = 64;
  const int64_t blocks = (cols + kColumns - 1) / kColumns;
  const int64_t sums = (out_w != nullptr ? 1 : 0) + (out_b != nullptr ? 1 : 0);
  parallel_for(sums * blocks, sums * chunks * cols >= kParallelGrain, [&](int64_t job) {
    const bool w_job = out_w != nullptr && job < blocks;
    const A* part = w_job ? part_w : part_b;
    W* out = w_job ? out_w : out_b;
    const int64_t j = job % blocks;
    const int64_t c0 = j * kColumns, nc = std::min(kColumns, cols - c0);
    A total[kColumns] = {};
    for (int64_t k = 0; k < chunks; ++k) {
      const A* p = part + k * cols + c0;
      for (int64_t c = 0; c < nc; ++c) total[c] += p[c];
    }
    for (int64_t c = 0; c < nc; ++c) out[c0 + c] = static_cast<W>(total[c]);
  });
}

// d_w[c] = sum_r d_y[r, c] * xhat[r, c], d_b[c] = sum_r d_y[r, c], in two stages.
template <typename T, typename W>
void backward_params(bool rms, const T* d_y, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd, W* d_w, W* d_b,
                     int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  const int64_t chunks = norm_math::norm_column_chunks(rows, cols);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  std::vector<A> part_w(d_w != nullptr ? static_cast<size_t>(chunks * cols) : 0);
  std::vector<A> part_b(d_b != nullptr ? static_cast<size_t>(chunks * cols) : 0);
  parallel_for(chunks, rows * cols >= kParallelGrain, [&](int64_t k) {
    A* pw = d_w != nullptr ? part_w.data() + k * cols : nullptr;
    A* pb = d_b != nullptr ? part_b.data() + k * cols : nullptr;
    for (int64_t c = 0; c < cols; ++c) {
      if (pw) pw[c] = A(0);
      if (pb) pb[c] = A(0);
    }
    const int64_t end = std::min(rows, (k + 1) * rows_per_chunk);
    thread_local std::vector<float> dy_buf, x_buf;  // 16-bit rows only
    for (int64_t r = k * rows_per_chunk; r < end; ++r) {
      const A mu = rms ? A(0) : mean[r];
      const A rs = rstd[r];
      const A* dyr = row_in(d_y + r * cols, cols, dy_buf);
      const A* xr = pw != nullptr ? row_in(x + r * cols, cols, x_buf) : nullptr;
      for (int64_t c = 0; c < cols; ++c) {
        const A dy = dyr[c];
        if (pw) pw[c] += dy * ((xr[c] - mu) * rs);
        if (pb) pb[c] += dy;
      }
    }
  });
  column_totals(part_w.data(), d_w, part_b.data(), d_b, chunks, cols);
}

// ---- the vector path (kernels/norm/norm_simd.h) ----------------------------------------------

// Rows go to the kernels in blocks of about 16384 values: one call (one
// dtype dispatch, one vzeroupper) for many short rows, and blocks enough to
// share out.
inline int64_t rows_per_block(int64_t cols) { return std::max<int64_t>(1, 16384 / cols); }

// body(first row, row count) for every block of rows, blocks in parallel when large.
template <typename Body>
void for_row_blocks(int64_t rows, int64_t cols, const Body& body) {
  const int64_t per = rows_per_block(cols), blocks = (rows + per - 1) / per;
  parallel_for(blocks, rows * cols >= kParallelGrain, [&](int64_t k) {
    const int64_t r0 = k * per;
    body(r0, std::min(per, rows - r0));
  });
}

template <typename T>
void vec_forward(const VecNormTable& vn, bool rms, const T* x, T* y, float* mean, float* rstd, const float* w,
                 const float* b, int64_t rows, int64_t cols, double eps) {
  for_row_blocks(rows, cols, [&](int64_t r0, int64_t n) {
    vn.forward_rows(vec_type_of<T>(), rms, x + r0 * cols, y + r0 * cols, mean != nullptr ? mean + r0 : nullptr,
                    rstd + r0, w, b, n, cols, static_cast<float>(eps));
  });
}

// Note [fused norm backward]
// d_x needs each row's d_y and x, and so do the stage-1 partials of d_w and
// d_b (norm_math::norm_column_chunks). When there are chunks enough to keep
// every thread busy (8 per thread, or one thread), the chunk loop computes
// both from one read of the row: the kernel's d_x pass adds d_y * xhat and
// d_y into the chunk's partial rows (f32, L1-resident for GPT-sized rows).
// With fewer chunks, d_x runs on its own over blocks of rows in parallel
// and the chunk loop only accumulates. Both give the same bits: the
// per-element values and the partials' order are the same.
template <typename T, typename W>
void vec_backward(const VecNormTable& vn, bool rms, const T* d_y, const T* x, const float* mean, const float* rstd,
                  const float* w, T* d_x, W* d_w, W* d_b, int64_t rows, int64_t cols) {
  const VecType t = vec_type_of<T>();
  const bool parallel = rows * cols >= kParallelGrain;
  const auto dx_rows = [&] {
    for_row_blocks(rows, cols, [&](int64_t r0, int64_t n) {
      vn.backward_rows(t, rms, d_y + r0 * cols, x + r0 * cols, mean != nullptr ? mean + r0 : nullptr, rstd + r0, w,
                       d_x + r0 * cols, nullptr, nullptr, n, cols);
    });
  };
  if (d_w == nullptr && d_b == nullptr) {
    if (d_x != nullptr) dx_rows();
    return;
  }
  const int64_t chunks = norm_math::norm_column_chunks(rows, cols);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const bool fuse = d_x != nullptr && (!parallel || chunks >= 8 * static_cast<int64_t>(get_num_threads()));
  const auto partials = [&](bool wanted) {
    return std::unique_ptr<float[]>(wanted ? new float[static_cast<size_t>(chunks * cols)] : nullptr);
  };
  const std::unique_ptr<float[]> part_w = partials(d_w != nullptr), part_b = partials(d_b != nullptr);
  parallel_for(chunks, parallel, [&](int64_t k) {
    float* pw = part_w ? part_w.get() + k * cols : nullptr;
    float* pb = part_b ? part_b.get() + k * cols : nullptr;
    if (pw != nullptr) std::fill_n(pw, cols, 0.0f);
    if (pb != nullptr) std::fill_n(pb, cols, 0.0f);
    const int64_t r0 = k * rows_per_chunk, n = std::min(rows, r0 + rows_per_chunk) - r0;
    if (n <= 0) return;
    vn.backward_rows(t, rms, d_y + r0 * cols, x + r0 * cols, mean != nullptr ? mean + r0 : nullptr, rstd + r0, w,
                     fuse ? d_x + r0 * cols : nullptr, pw, pb, n, cols);
  });
  if (d_x != nullptr && !fuse) dx_rows();
  column_totals(part_w.get(), d_w, part_b.get(), d_b, chunks, cols);
}

// fn(T{}) for x's dtype T in {f32, f16, bf16}.
template <typename Fn>
void dispatch_vec(DType t, const Fn& fn) {
  if (t == kF32) {
    fn(float{});
  } else {
    dispatch_16bit(t, fn);
  }
}

}  // namespace

void norm_forward(OpId op, const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                  const Tensor& weight, const Tensor& bias, double eps) {
  HG_CHECK(op == OpId::layer_norm || op == OpId::rms_norm, "cpu::norm_forward: ", op_name(op), " is not a norm");
  detail::check_norm_buffers(x, mean, rstd, weight, bias);
  HG_CHECK(y.is_contiguous() && y.sizes() == x.sizes() && y.dtype() == x.dtype(), "cpu::norm_forward: bad y");
  const bool rms = op == OpId::rms_norm;
  HG_CHECK(rms || mean.defined(), "cpu::norm_forward: layer_norm needs a mean buffer");
  const int64_t rows = x.size(0), cols = x.size(1);
  const VecNormTable* vn = vec_norm();
  if (vn != nullptr && x.dtype() != kF64) {  // Note [vector norm rows]
    const Tensor wf = widened_f32(weight), bf = widened_f32(bias);
    dispatch_vec(x.dtype(), [&](auto t_tag) {
      using T = decltype(t_tag);
      vec_forward<T>(*vn, rms, static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()),
                     ptr_or_null<float>(mean), static_cast<float*>(rstd.data_ptr()), ptr_or_null<const float>(wf),
                     ptr_or_null<const float>(bf), rows, cols, eps);
    });
    return;
  }
  if (x.dtype() == kF16 || x.dtype() == kBF16) {  // Note [16-bit norm rows on the CPU]
    const Tensor wf = widened_f32(weight), bf = widened_f32(bias);
    dispatch_16bit(x.dtype(), [&](auto t_tag) {
      using T = decltype(t_tag);
      forward_rows<T, float>(rms, static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()),
                             ptr_or_null<float>(mean), static_cast<float*>(rstd.data_ptr()),
                             ptr_or_null<const float>(wf), ptr_or_null<const float>(bf), rows, cols, eps);
    });
    return;
  }
  dispatch_norm(op, x.dtype(), detail::norm_param_dtype({&weight, &bias}, x.dtype()), [&](auto t_tag, auto w_tag) {
    using T = decltype(t_tag);
    using W = decltype(w_tag);
    using A = acc_t<T>;
    forward_rows<T, W>(rms, static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), ptr_or_null<A>(mean),
                       static_cast<A*>(rstd.data_ptr()), ptr_or_null<const W>(weight), ptr_or_null<const W>(bias), rows,
                       cols, eps);
  });
}

void norm_backward(OpId op, const Tensor& d_x, const Tensor& d_weight, const Tensor& d_bias, const Tensor& d_y,
                   const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  HG_CHECK(op == OpId::layer_norm || op == OpId::rms_norm, "cpu::norm_backward: ", op_name(op), " is not a norm");
  detail::check_norm_buffers(x, mean, rstd, weight, Tensor());
  detail::check_norm_buffers(x, mean, rstd, d_weight, d_bias);
  HG_CHECK(d_y.is_contiguous() && d_y.sizes() == x.sizes() && d_y.dtype() == x.dtype() &&
               (!d_x.defined() || (d_x.is_contiguous() && d_x.sizes() == x.sizes() && d_x.dtype() == x.dtype())),
           "cpu::norm_backward: d_y and d_x must be contiguous like x ", x.shape_str());
  const bool rms = op == OpId::rms_norm;
  const int64_t rows = x.size(0), cols = x.size(1);
  const DType w_dtype = detail::norm_param_dtype({&weight, &d_weight, &d_bias}, x.dtype());
  const VecNormTable* vn = vec_norm();
  if (vn != nullptr && x.dtype() != kF64) {  // Note [vector norm rows]
    const Tensor wf = widened_f32(weight);
    dispatch_norm(op, x.dtype(), w_dtype, [&](auto t_tag, auto w_tag) {
      using T = decltype(t_tag);
      using W = decltype(w_tag);
      if constexpr (!std::is_same_v<T, double>) {
        vec_backward<T, W>(*vn, rms, static_cast<const T*>(d_y.data_ptr()), static_cast<const T*>(x.data_ptr()),
                           ptr_or_null<const float>(mean), static_cast<const float*>(rstd.data_ptr()),
                           ptr_or_null<const float>(wf), d_x.defined() ? static_cast<T*>(d_x.data_ptr()) : nullptr,
                           ptr_or_null<W>(d_weight), ptr_or_null<W>(d_bias), rows, cols);
      }
    });
    return;
  }
  if (x.dtype() == kF16 || x.dtype() == kBF16) {  // Note [16-bit norm rows on the CPU]
    const Tensor wf = widened_f32(weight);
    dispatch_norm(op, x.dtype(), w_dtype, [&](auto t_tag, auto w_tag) {
      using T = decltype(t_tag);
      using W = decltype(w_tag);
      if constexpr (is_16bit_float_v<T>) {
        const T* dy = static_cast<const T*>(d_y.data_ptr());
        const T* xs = static_cast<const T*>(x.data_ptr());
        const float* mu = ptr_or_null<const float>(mean);
        const float* rs = static_cast<const float*>(rstd.data_ptr());
        if (d_x.defined()) {
          backward_dx_rows<T, float>(rms, dy, xs, mu, rs, ptr_or_null<const float>(wf), static_cast<T*>(d_x.data_ptr()),
                                     rows, cols);
        }
        if (d_weight.defined() || d_bias.defined()) {
          backward_params<T, W>(rms, dy, xs, mu, rs, ptr_or_null<W>(d_weight), ptr_or_null<W>(d_bias), rows, cols);
        }
      }
    });
    return;
  }
  dispatch_norm(op, x.dtype(), w_dtype, [&](auto t_tag, auto w_tag) {
    using T = decltype(t_tag);
    using W = decltype(w_tag);
    using A = acc_t<T>;
    const T* dy = static_cast<const T*>(d_y.data_ptr());
    const T* xs = static_cast<const T*>(x.data_ptr());
    const A* mu = ptr_or_null<const A>(mean);
    const A* rs = static_cast<const A*>(rstd.data_ptr());
    if (d_x.defined()) {
      backward_dx_rows<T, W>(rms, dy, xs, mu, rs, ptr_or_null<const W>(weight), static_cast<T*>(d_x.data_ptr()), rows,
                             cols);
    }
    if (d_weight.defined() || d_bias.defined()) {
      backward_params<T, W>(rms, dy, xs, mu, rs, ptr_or_null<W>(d_weight), ptr_or_null<W>(d_bias), rows, cols);
    }
  });
}

}  // namespace hg::cpu

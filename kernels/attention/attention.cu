// CUDA kernels of the attention math path: the fused scale-mask-softmax
// (-dropout) row kernel between the two batched GEMMs, forward and backward
// side by side, then the launchers. CPU counterpart: kernels/attention/attention_cpu.cpp.
// Formulas, the fully-masked-row rule and the dropout mapping:
// kernels/attention/attention.h.
//
// Split: the row split of the softmax kernels (kernels/cuda/row_reduce.cuh):
// one warp per score row when S <= 1024 (4 rows per 128-thread block), else one
// block of 256-1024 threads per row; grid-stride over rows. Reductions are
// shuffles (+ one 32-entry shared array per block), fixed order: deterministic.
//
// Precision contract: T in {f32, f16, bf16, f64} in and out; acc_t<T> math
// (fp32, f64 for f64); the scale is applied in fp32; max subtracted before
// exp; one rounding on store. The dropout uniform is the bit-exact Philox value
// (core/philox.h), so the keep mask equals the CPU one.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention/attention.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

template <typename A>
__device__ __forceinline__ A attn_value(const AttnSoftmaxParams& prm, int64_t row, int64_t col, A s) {
  double add = 0.0;
  if (!attn_allowed(prm, row, col, &add)) return A(-INFINITY);
  return static_cast<A>(prm.scale) * s + static_cast<A>(add);
}

// attention_softmax_forward_kernel<T, kBlockPerRow>
//   formula    x_c = scale * s_c + mask_c (-inf where masked), m = max_c x_c,
//              z = sum_c exp(x_c - m), y_c = exp(x_c - m) / z (0 if m = -inf),
//              p_c = y_c * keep_c / (1 - dropout_p)      (kernels/attention/attention.h)
//   shapes     s, y, p: [rows, S] contiguous; mask [L or rows, S] bool/f32
//   split      one warp (or block) per row, each thread strides over the row
//   launch     launch_row_kernel: 128-thread blocks of 4 warp-rows (S <= 1024),
//              else one 256-1024-thread block per row; grid <= 2^20 blocks
//   bytes      per element: 3 reads of s (2 from L1/L2), 1-3 mask reads, 1
//              write of y (+1 of p with dropout)
//   precision  acc_t<T> math, one rounding on store
// attention_softmax_backward_kernel<T, kBlockPerRow>
//   formula    d_y_c = d_p_c * keep_c / (1 - dropout_p),
//              d_s_c = scale * y_c * (d_y_c - sum_k d_y_k y_k)
//   shapes     d_p, y, d_s: [rows, S] contiguous
//   split      launch as the forward
//   bytes      per element: 2 reads of d_p and y, 1 write of d_s
//   precision  acc_t<T> math, one rounding on store
template <typename T, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    attention_softmax_forward_kernel(AttnSoftmaxParams prm, const T* __restrict__ s, T* __restrict__ y,
                                     T* __restrict__ p) {
  using A = acc_t<T>;
  __shared__ A partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  const int64_t cols = prm.cols;
  for (int64_t row = split.first_row; row < prm.rows; row += split.row_step) {
    const T* s_row = s + row * cols;
    A m = A(-INFINITY);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      m = max_nan(m, attn_value<A>(prm, row, c, static_cast<A>(s_row[c])));
    }
    m = row_allreduce<kBlockPerRow>(
        m, [](A a, A b) { return max_nan(a, b); }, partials);
    A z = A(0);
    if (m != A(-INFINITY)) {
      for (int64_t c = split.lane; c < cols; c += split.threads) {
        const A x = attn_value<A>(prm, row, c, static_cast<A>(s_row[c]));
        if (x != A(-INFINITY)) z += dmath::exp(x - m);
      }
    }
    z = row_allreduce<kBlockPerRow>(
        z, [](A a, A b) { return a + b; }, partials);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A x = attn_value<A>(prm, row, c, static_cast<A>(s_row[c]));
      const A yc = (m == A(-INFINITY) || x == A(-INFINITY)) ? A(0) : dmath::exp(x - m) / z;
      y[row * cols + c] = static_cast<T>(yc);
      if (p != nullptr) p[row * cols + c] = static_cast<T>(yc * static_cast<A>(attn_dropout_factor(prm, row, c)));
    }
  }
}

template <typename T, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    attention_softmax_backward_kernel(AttnSoftmaxParams prm, const T* __restrict__ d_p, const T* __restrict__ y,
                                      T* __restrict__ d_s) {
  using A = acc_t<T>;
  __shared__ A partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  const int64_t cols = prm.cols;
  for (int64_t row = split.first_row; row < prm.rows; row += split.row_step) {
    const int64_t base = row * cols;
    A dot = A(0);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A dy = static_cast<A>(d_p[base + c]) * static_cast<A>(attn_dropout_factor(prm, row, c));
      dot += dy * static_cast<A>(y[base + c]);
    }
    dot = row_allreduce<kBlockPerRow>(
        dot, [](A a, A b) { return a + b; }, partials);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A dy = static_cast<A>(d_p[base + c]) * static_cast<A>(attn_dropout_factor(prm, row, c));
      d_s[base + c] = static_cast<T>(static_cast<A>(prm.scale) * static_cast<A>(y[base + c]) * (dy - dot));
    }
  }
}

}  // namespace

void attention_softmax(const AttnSoftmaxParams& params, const Tensor& scores, const Tensor& y, const Tensor& p) {
  HG_CHECK(scores.is_contiguous() && y.is_contiguous() && (!p.defined() || p.is_contiguous()) &&
               scores.numel() == params.rows * params.cols && y.numel() == scores.numel(),
           "cuda::attention_softmax needs contiguous [rows, cols] tensors, got ", scores.shape_str());
  if (scores.numel() == 0) return;
  DeviceGuard guard(scores.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_floating(scores.dtype(), "attention_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(scores.data_ptr());
    T* out_y = static_cast<T*>(y.data_ptr());
    T* out_p = p.defined() ? static_cast<T*>(p.data_ptr()) : nullptr;
    launch_row_kernel(
        "attention_softmax_forward_kernel", __FILE__, __LINE__,
        [](auto block_per_row) { return attention_softmax_forward_kernel<T, decltype(block_per_row)::value>; },
        params.rows, params.cols, stream, params, in, out_y, out_p);
  });
}

void attention_softmax_backward(const AttnSoftmaxParams& params, const Tensor& d_p, const Tensor& y,
                                const Tensor& d_scores) {
  HG_CHECK(d_p.is_contiguous() && y.is_contiguous() && d_scores.is_contiguous() &&
               y.numel() == params.rows * params.cols && d_p.numel() == y.numel() && d_scores.numel() == y.numel(),
           "cuda::attention_softmax_backward needs contiguous [rows, cols] tensors, got ", y.shape_str());
  if (y.numel() == 0) return;
  DeviceGuard guard(y.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_floating(y.dtype(), "attention_softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* dp = static_cast<const T*>(d_p.data_ptr());
    const T* yy = static_cast<const T*>(y.data_ptr());
    T* ds = static_cast<T*>(d_scores.data_ptr());
    launch_row_kernel(
        "attention_softmax_backward_kernel", __FILE__, __LINE__,
        [](auto block_per_row) { return attention_softmax_backward_kernel<T, decltype(block_per_row)::value>; },
        params.rows, params.cols, stream, params, dp, yy, ds);
  });
}

}  // namespace hg::cuda

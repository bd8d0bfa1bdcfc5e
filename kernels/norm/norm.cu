// CUDA layer_norm and rms_norm, forward and backward side by side, then the
// launchers. Formulas: kernels/norm/norm.h. CPU reference: kernels/norm/norm_cpu.cpp.
//
// Rows are contiguous [rows, cols]; a row is one warp (cols <= 1024, 4 rows
// per 128-thread block) or one block (longer rows, 256-1024 threads), picked
// by launch_row_kernel (kernels/cuda/row_reduce.cuh). Row statistics reduce
// with row_allreduce (fixed order, no atomics). The weight/bias gradients are
// a two-stage column reduction (norm_math::norm_column_chunks): stage 1 sums
// the rows of one chunk per column into an fp32 workspace, stage 2 sums the
// chunk partials per column in chunk order. Nothing here uses atomics, so
// every output is bit-identical from run to run.
//
// Precision contract: 16-bit (or f32) activations and weights are widened to
// float (double for f64), mean and rstd are fp32 (f64) and computed in two
// passes, every output rounded once on store.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/norm/norm.h"

namespace hg::cuda {

using ::hg::detail::dispatch_norm;
using ::hg::detail::ptr_or_null;

namespace {

// norm_forward_kernel<T, W, kRms, kBlockPerRow>
//   formula    layer_norm: mean = sum x / N, rstd = 1/sqrt(sum (x - mean)^2 / N + eps)
//              rms_norm:   rstd = 1/sqrt(sum x^2 / N + eps)
//              y = (x - mean) * rstd * w + b      (mean = 0, no b for rms_norm)
//   shapes     x, y [rows, cols]; w, b [cols] (nullptr when absent); mean, rstd [rows]
//   split      one warp (or block) per row; each thread strides over the row
//              three times (sum, centred sum of squares, output)
//   launch     launch_row_kernel: 128-thread blocks of 4 warp rows, or one
//              256-1024-thread block per row; grid-stride over rows
//   bytes      per element 3 reads of T (the 2nd and 3rd mostly from L1/L2)
//              + 1 write of T; per row reads of w, b (cached) and 2 (1 for
//              rms) writes of acc_t
//   precision  acc_t math, mean and rstd kept in acc_t, one rounding on store
template <typename T, typename W, bool kRms, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    norm_forward_kernel(const T* __restrict__ x, const W* __restrict__ w, const W* __restrict__ b, T* __restrict__ y,
                        acc_t<T>* __restrict__ mean_out, acc_t<T>* __restrict__ rstd_out, int64_t rows, int64_t cols,
                        acc_t<T> eps) {
  using A = acc_t<T>;
  __shared__ A partials[kMaxWarpsPerBlock];  // block rows: one value per warp
  const RowSplit split = row_split<kBlockPerRow>();
  const A n = static_cast<A>(cols);
  for (int64_t row = split.first_row; row < rows; row += split.row_step) {
    const T* x_row = x + row * cols;
    A mean = A(0);
    if constexpr (!kRms) {
      A sum = A(0);
      for (int64_t c = split.lane; c < cols; c += split.threads) sum += static_cast<A>(x_row[c]);
      mean = row_allreduce<kBlockPerRow>(
                 sum, [](A lhs, A rhs) { return lhs + rhs; }, partials) /
             n;
    }
    A sq = A(0);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A d = static_cast<A>(x_row[c]) - mean;
      sq += d * d;
    }
    sq = row_allreduce<kBlockPerRow>(
        sq, [](A lhs, A rhs) { return lhs + rhs; }, partials);
    const A rstd = A(1) / dmath::sqrt(sq / n + eps);
    if (split.lane == 0) {
      if constexpr (!kRms) mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
    T* y_row = y + row * cols;
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      A v = (static_cast<A>(x_row[c]) - mean) * rstd;
      if (w != nullptr) v *= static_cast<A>(w[c]);
      if (b != nullptr) v += static_cast<A>(b[c]);
      y_row[c] = static_cast<T>(v);
    }
  }
}

// norm_backward_dx_kernel<T, W, kRms, kBlockPerRow>
//   formula    g = d_y * w, xhat = (x - mean) * rstd,
//              d_x = rstd * (g - mean(g) - xhat * mean(g * xhat))  (no mean(g) for rms_norm)
//   shapes     d_y, x, d_x [rows, cols]; w [cols] or nullptr; mean, rstd [rows]
//   split      one warp (or block) per row, as the forward; two strides over
//              the row (the two row means, then d_x)
//   launch     launch_row_kernel, as the forward
//   bytes      per element 2 reads of d_y and x (the 2nd mostly cached) + 1
//              write of d_x; per row 2 reads of acc_t
//   precision  acc_t math, one rounding on store
template <typename T, typename W, bool kRms, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    norm_backward_dx_kernel(const T* __restrict__ d_y, const T* __restrict__ x, const acc_t<T>* __restrict__ mean,
                            const acc_t<T>* __restrict__ rstd, const W* __restrict__ w, T* __restrict__ d_x,
                            int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  __shared__ A partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  const A n = static_cast<A>(cols);
  for (int64_t row = split.first_row; row < rows; row += split.row_step) {
    const int64_t base = row * cols;
    const A mu = kRms ? A(0) : mean[row];
    const A rs = rstd[row];
    A sum_g = A(0), sum_gx = A(0);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A g = w != nullptr ? static_cast<A>(d_y[base + c]) * static_cast<A>(w[c]) : static_cast<A>(d_y[base + c]);
      sum_g += g;
      sum_gx += g * ((static_cast<A>(x[base + c]) - mu) * rs);
    }
    const A mean_g = kRms ? A(0)
                          : row_allreduce<kBlockPerRow>(
                                sum_g, [](A lhs, A rhs) { return lhs + rhs; }, partials) /
                                n;
    const A mean_gx = row_allreduce<kBlockPerRow>(
                          sum_gx, [](A lhs, A rhs) { return lhs + rhs; }, partials) /
                      n;
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A g = w != nullptr ? static_cast<A>(d_y[base + c]) * static_cast<A>(w[c]) : static_cast<A>(d_y[base + c]);
      const A xhat = (static_cast<A>(x[base + c]) - mu) * rs;
      d_x[base + c] = static_cast<T>(norm_math::d_x(kRms, g, xhat, rs, mean_g, mean_gx));
    }
  }
}

inline constexpr int kColumnThreads = 256;

// norm_params_partial_kernel<T, kRms>  (stage 1 of d_w / d_b)
//   formula    part_w[k, c] = sum_{r in chunk k} d_y[r, c] * xhat[r, c]
//              part_b[k, c] = sum_{r in chunk k} d_y[r, c]      (rows in order)
//   shapes     d_y, x [rows, cols]; mean, rstd [rows]; part_w, part_b [chunks, cols]
//              (either may be nullptr)
//   split      one thread per (column, chunk): blockIdx.x picks 256 columns,
//              blockIdx.y the chunk of rows_per_chunk rows
//   launch     256 threads, grid (ceil(cols / 256), chunks)
//   bytes      per element 1 read of d_y and x (coalesced across the columns
//              of a warp); per chunk and column 1-2 writes of acc_t
//   precision  acc_t sums in row order: deterministic
template <typename T, bool kRms>
__global__ void norm_params_partial_kernel(const T* __restrict__ d_y, const T* __restrict__ x,
                                           const acc_t<T>* __restrict__ mean, const acc_t<T>* __restrict__ rstd,
                                           acc_t<T>* __restrict__ part_w, acc_t<T>* __restrict__ part_b, int64_t rows,
                                           int64_t cols, int64_t rows_per_chunk) {
  using A = acc_t<T>;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  if (col >= cols) return;
  const int64_t begin = chunk * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  A sw = A(0), sb = A(0);
  for (int64_t r = begin; r < end; ++r) {
    const A dy = static_cast<A>(d_y[r * cols + col]);
    const A mu = kRms ? A(0) : mean[r];
    sw += dy * ((static_cast<A>(x[r * cols + col]) - mu) * rstd[r]);
    sb += dy;
  }
  if (part_w != nullptr) part_w[chunk * cols + col] = sw;
  if (part_b != nullptr) part_b[chunk * cols + col] = sb;
}

// norm_params_final_kernel<A, W>  (stage 2 of d_w / d_b)
//   formula    d_w[c] = sum_k part_w[k, c], d_b[c] = sum_k part_b[k, c]  (chunks in order)
//   split      one thread per column
//   launch     256 threads, ceil(cols / 256) blocks
//   bytes      per column chunks reads of acc_t per gradient + 1 write of W
//   precision  acc_t sums, one rounding to W
template <typename A, typename W>
__global__ void norm_params_final_kernel(const A* __restrict__ part_w, const A* __restrict__ part_b,
                                         W* __restrict__ d_w, W* __restrict__ d_b, int64_t chunks, int64_t cols) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  A sw = A(0), sb = A(0);
  for (int64_t k = 0; k < chunks; ++k) {
    if (part_w != nullptr) sw += part_w[k * cols + col];
    if (part_b != nullptr) sb += part_b[k * cols + col];
  }
  if (d_w != nullptr) d_w[col] = static_cast<W>(sw);
  if (d_b != nullptr) d_b[col] = static_cast<W>(sb);
}

template <typename T, typename W, bool kRms>
void launch_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                    const Tensor& bias, double eps, cudaStream_t stream) {
  using A = acc_t<T>;
  const int64_t rows = x.size(0), cols = x.size(1);
  launch_row_kernel(
      "norm_forward_kernel", __FILE__, __LINE__,
      [](auto block_per_row) { return norm_forward_kernel<T, W, kRms, decltype(block_per_row)::value>; }, rows, cols,
      stream, static_cast<const T*>(x.data_ptr()), ptr_or_null<const W>(weight), ptr_or_null<const W>(bias),
      static_cast<T*>(y.data_ptr()), ptr_or_null<A>(mean), static_cast<A*>(rstd.data_ptr()), rows, cols,
      static_cast<A>(eps));
}

template <typename T, typename W, bool kRms>
void launch_backward(const Tensor& d_x, const Tensor& d_weight, const Tensor& d_bias, const Tensor& d_y,
                     const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                     cudaStream_t stream) {
  using A = acc_t<T>;
  const int64_t rows = x.size(0), cols = x.size(1);
  const T* dy = static_cast<const T*>(d_y.data_ptr());
  const T* xs = static_cast<const T*>(x.data_ptr());
  const A* mu = ptr_or_null<const A>(mean);
  const A* rs = static_cast<const A*>(rstd.data_ptr());
  if (d_x.defined()) {
    launch_row_kernel(
        "norm_backward_dx_kernel", __FILE__, __LINE__,
        [](auto block_per_row) { return norm_backward_dx_kernel<T, W, kRms, decltype(block_per_row)::value>; }, rows,
        cols, stream, dy, xs, mu, rs, ptr_or_null<const W>(weight), static_cast<T*>(d_x.data_ptr()), rows, cols);
  }
  if (!d_weight.defined() && !d_bias.defined()) return;
  const int64_t chunks = norm_math::norm_column_chunks(rows, cols);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const TensorOptions ws{.dtype = dtype_of<A>(), .device = x.device()};
  const Tensor part_w = d_weight.defined() ? empty({chunks, cols}, ws) : Tensor();
  const Tensor part_b = d_bias.defined() ? empty({chunks, cols}, ws) : Tensor();
  const unsigned col_blocks = static_cast<unsigned>((cols + kColumnThreads - 1) / kColumnThreads);
  // rms_norm has no bias: its partials are undefined and count no bytes.
  const double part_bytes =
      static_cast<double>((part_w.defined() ? part_w.nbytes() : 0) + (part_b.defined() ? part_b.nbytes() : 0));
  profiler::declare_work(static_cast<double>(2 * rows * cols) * sizeof(T) + part_bytes);
  HG_LAUNCH((norm_params_partial_kernel<T, kRms>), dim3(col_blocks, static_cast<unsigned>(chunks)),
            dim3(kColumnThreads), 0, stream, dy, xs, mu, rs, ptr_or_null<A>(part_w), ptr_or_null<A>(part_b), rows, cols,
            rows_per_chunk);
  profiler::declare_work(
      part_bytes + static_cast<double>((d_weight.defined() ? cols : 0) + (d_bias.defined() ? cols : 0)) * sizeof(W));
  HG_LAUNCH((norm_params_final_kernel<A, W>), dim3(col_blocks), dim3(kColumnThreads), 0, stream,
            ptr_or_null<const A>(part_w), ptr_or_null<const A>(part_b), ptr_or_null<W>(d_weight),
            ptr_or_null<W>(d_bias), chunks, cols);
}

}  // namespace

void norm_forward(OpId op, const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                  const Tensor& weight, const Tensor& bias, double eps) {
  HG_CHECK(op == OpId::layer_norm || op == OpId::rms_norm, "cuda::norm_forward: ", op_name(op), " is not a norm");
  ::hg::detail::check_norm_buffers(x, mean, rstd, weight, bias);
  HG_CHECK(y.is_contiguous() && y.sizes() == x.sizes() && y.dtype() == x.dtype(), "cuda::norm_forward: bad y");
  const bool rms = op == OpId::rms_norm;
  HG_CHECK(rms || mean.defined(), "cuda::norm_forward: layer_norm needs a mean buffer");
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_norm(op, x.dtype(), ::hg::detail::norm_param_dtype({&weight, &bias}, x.dtype()),
                [&](auto t_tag, auto w_tag) {
                  using T = decltype(t_tag);
                  using W = decltype(w_tag);
                  with_bool(rms, [&](auto rms_c) {
                    launch_forward<T, W, decltype(rms_c)::value>(y, mean, rstd, x, weight, bias, eps, stream);
                  });
                });
}

void norm_backward(OpId op, const Tensor& d_x, const Tensor& d_weight, const Tensor& d_bias, const Tensor& d_y,
                   const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  HG_CHECK(op == OpId::layer_norm || op == OpId::rms_norm, "cuda::norm_backward: ", op_name(op), " is not a norm");
  ::hg::detail::check_norm_buffers(x, mean, rstd, weight, Tensor());
  ::hg::detail::check_norm_buffers(x, mean, rstd, d_weight, d_bias);
  HG_CHECK(d_y.is_contiguous() && d_y.sizes() == x.sizes() && d_y.dtype() == x.dtype() &&
               (!d_x.defined() || (d_x.is_contiguous() && d_x.sizes() == x.sizes() && d_x.dtype() == x.dtype())),
           "cuda::norm_backward: d_y and d_x must be contiguous like x ", x.shape_str());
  const bool rms = op == OpId::rms_norm;
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream().handle();
  const DType w_dtype = ::hg::detail::norm_param_dtype({&weight, &d_weight, &d_bias}, x.dtype());
  dispatch_norm(op, x.dtype(), w_dtype, [&](auto t_tag, auto w_tag) {
    using T = decltype(t_tag);
    using W = decltype(w_tag);
    with_bool(rms, [&](auto rms_c) {
      launch_backward<T, W, decltype(rms_c)::value>(d_x, d_weight, d_bias, d_y, x, mean, rstd, weight, stream);
    });
  });
}

}  // namespace hg::cuda

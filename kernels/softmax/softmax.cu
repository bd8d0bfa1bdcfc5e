// CUDA softmax and log-softmax over the last dim, forward and backward, side
// by side, then the launchers. CPU reference: kernels/softmax/softmax_cpu.cpp.
//
// Rows are contiguous [rows, cols] (the ops layer flattens leading dims). Two
// splits, picked by the row length:
//   cols <= kWarpRowMax (1024): one warp per row, kWarpRowsPerBlock rows per
//     128-thread block; the row reduction is 5 xor-shuffles, no shared memory.
//   longer rows: one block per row (256-1024 threads, __launch_bounds__(1024));
//     warps reduce with shuffles, then across warps through a 32-entry shared
//     array, read back in warp order (fixed order: deterministic, no atomics).
// Both loop grid-stride over rows, so any row count fits a capped grid. The
// split and the reductions: kernels/cuda/row_reduce.cuh, block_reduce.cuh.
//
// Precision contract: 16-bit in/out, fp32 math (f64 for f64), max subtracted
// before exp, one rounding on store; NaN anywhere in a row makes the row NaN.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/softmax/online_softmax.cuh"
#include "kernels/softmax/softmax.h"

namespace hg::cuda {

namespace {

template <typename A>
__device__ __forceinline__ A merge_sum(A a, A b) {
  return a + b;
}

// softmax_forward_kernel<T, kLog, kBlockPerRow>
//   formula    m = max_c x_c, s = sum_c exp(x_c - m) (online: one pass)
//              softmax y_c = exp(x_c - m) / s;  log_softmax y_c = (x_c - m) - log(s)
//   shapes     x, y: [rows, cols] contiguous, T in {f32, f16, bf16, f64}
//   split      one warp (or block) per row, each thread strides over the row
//   launch     see the top of the file
//   bytes      per element: 2 reads of T (the second mostly from L1/L2) + 1 write
//   precision  acc_t<T> math, one rounding on store
template <typename T, bool kLog, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    softmax_forward_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  __shared__ MaxSum<A> partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  for (int64_t row = split.first_row; row < rows; row += split.row_step) {
    const T* x_row = x + row * cols;
    T* y_row = y + row * cols;
    MaxSum<A> st{A(-INFINITY), A(0)};
    for (int64_t c = split.lane; c < cols; c += split.threads) st = online_add(st, static_cast<A>(x_row[c]));
    st = row_allreduce<kBlockPerRow>(st, [](MaxSum<A> a, MaxSum<A> b) { return merge(a, b); }, partials);
    const A log_s = kLog ? dmath::log(st.s) : A(0);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A shifted = static_cast<A>(x_row[c]) - st.m;
      y_row[c] = static_cast<T>(kLog ? shifted - log_s : dmath::exp(shifted) / st.s);
    }
  }
}

// softmax_backward_kernel<T, kLog, kBlockPerRow>
//   formula    softmax:     d_x_c = y_c * (d_y_c - sum_k d_y_k * y_k)
//              log_softmax: d_x_c = d_y_c - exp(y_c) * sum_k d_y_k
//   shapes     d_y, y, d_x: [rows, cols] contiguous
//   split      as the forward: one warp (or block) per row
//   bytes      per element: 2 reads of d_y and (softmax) y, 1 read of y, 1 write
//   precision  acc_t<T> math, one rounding on store
template <typename T, bool kLog, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    softmax_backward_kernel(const T* __restrict__ d_y, const T* __restrict__ y, T* __restrict__ d_x, int64_t rows,
                            int64_t cols) {
  using A = acc_t<T>;
  __shared__ A partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  for (int64_t row = split.first_row; row < rows; row += split.row_step) {
    const int64_t base = row * cols;
    A dot = A(0);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A dy = static_cast<A>(d_y[base + c]);
      dot += kLog ? dy : dy * static_cast<A>(y[base + c]);
    }
    dot = row_allreduce<kBlockPerRow>(dot, [](A a, A b) { return merge_sum(a, b); }, partials);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A dy = static_cast<A>(d_y[base + c]), yc = static_cast<A>(y[base + c]);
      d_x[base + c] = static_cast<T>(kLog ? dy - dmath::exp(yc) * dot : yc * (dy - dot));
    }
  }
}


template <typename T, bool kLog>
void launch_forward(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  launch_row_kernel(
      "softmax_forward_kernel", __FILE__, __LINE__,
      [](auto block_per_row) { return softmax_forward_kernel<T, kLog, decltype(block_per_row)::value>; }, rows,
      cols, stream, x, y, rows, cols);
}

template <typename T, bool kLog>
void launch_backward(const T* d_y, const T* y, T* d_x, int64_t rows, int64_t cols, cudaStream_t stream) {
  launch_row_kernel(
      "softmax_backward_kernel", __FILE__, __LINE__,
      [](auto block_per_row) { return softmax_backward_kernel<T, kLog, decltype(block_per_row)::value>; }, rows,
      cols, stream, d_y, y, d_x, rows, cols);
}

}  // namespace

void softmax(OpId op, const Tensor& y, const Tensor& x) {
  HG_CHECK(op == OpId::softmax || op == OpId::log_softmax, "cuda::softmax: ", op_name(op),
           " is not softmax or log_softmax");
  HG_CHECK(x.is_contiguous() && y.is_contiguous() && x.dim() >= 1 && y.numel() == x.numel() &&
               y.dtype() == x.dtype(),
           "cuda::softmax needs contiguous tensors of one shape and dtype, got ", x.shape_str(), " -> ",
           y.shape_str());
  if (x.numel() == 0) return;
  const int64_t cols = x.size(-1);
  const int64_t rows = x.numel() / cols;
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_floating(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x.data_ptr());
    T* out = static_cast<T*>(y.data_ptr());
    with_bool(op == OpId::log_softmax,
              [&](auto log) { launch_forward<T, decltype(log)::value>(in, out, rows, cols, stream); });
  });
}

void softmax_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& y) {
  HG_CHECK(op == OpId::softmax_backward || op == OpId::log_softmax_backward,
           "cuda::softmax_backward: ", op_name(op), " is not a softmax backward op");
  HG_CHECK(d_x.is_contiguous() && d_y.is_contiguous() && y.is_contiguous() && y.dim() >= 1 &&
               d_x.numel() == y.numel() && d_y.numel() == y.numel() && d_x.dtype() == y.dtype() &&
               d_y.dtype() == y.dtype(),
           "cuda::softmax_backward needs contiguous tensors of one shape and dtype, got ", d_y.shape_str(), " and ",
           y.shape_str());
  if (y.numel() == 0) return;
  const int64_t cols = y.size(-1);
  const int64_t rows = y.numel() / cols;
  DeviceGuard guard(y.device().index);
  const cudaStream_t stream = current_stream().handle();
  dispatch_floating(y.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(d_y.data_ptr());
    const T* yy = static_cast<const T*>(y.data_ptr());
    T* dx = static_cast<T*>(d_x.data_ptr());
    with_bool(op == OpId::log_softmax_backward,
              [&](auto log) { launch_backward<T, decltype(log)::value>(dy, yy, dx, rows, cols, stream); });
  });
}

// ---- softmax over a middle dim ----------------------------------------------------------

namespace {

inline constexpr int kColumnThreads = 256;

// softmax_columns_kernel<T, kLog>
//   formula    as softmax_forward_kernel, over n for each column (o, i) of
//              x viewed as contiguous [outer, n, inner]
//   split      one thread per column, grid-stride; the thread walks its n
//              values with stride inner (online max/sum, then the output), so
//              a warp reads 32 consecutive inner positions: coalesced
//   launch     256 threads, blocks = min(ceil(outer x inner / 256), 32 x SMs)
//   bytes      per element 2 reads of T + 1 write of T
//   precision  acc_t math, max subtracted before exp, one rounding on store.
//              Parallelism is outer x inner: a long dim with few columns
//              (softmax over dim 0 of [100000, 2]) runs on few threads
template <typename T, bool kLog>
__global__ void softmax_columns_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n,
                                       int64_t inner) {
  using A = acc_t<T>;
  const int64_t columns = outer * inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < columns; col += stride) {
    const int64_t base = (col / inner) * n * inner + col % inner;
    MaxSum<A> st{A(-INFINITY), A(0)};
    for (int64_t k = 0; k < n; ++k) st = online_add(st, static_cast<A>(x[base + k * inner]));
    const A log_s = kLog ? dmath::log(st.s) : A(0);
    for (int64_t k = 0; k < n; ++k) {
      const A shifted = static_cast<A>(x[base + k * inner]) - st.m;
      y[base + k * inner] = static_cast<T>(kLog ? shifted - log_s : dmath::exp(shifted) / st.s);
    }
  }
}

// softmax_columns_backward_kernel<T, kLog>
//   formula    as softmax_backward_kernel, over n for each column (o, i)
//   split      one thread per column, as the forward
//   bytes      per element 2 reads of d_y and (softmax) y, 1 read of y, 1 write
template <typename T, bool kLog>
__global__ void softmax_columns_backward_kernel(const T* __restrict__ d_y, const T* __restrict__ y, T* __restrict__ d_x,
                                                int64_t outer, int64_t n, int64_t inner) {
  using A = acc_t<T>;
  const int64_t columns = outer * inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < columns; col += stride) {
    const int64_t base = (col / inner) * n * inner + col % inner;
    A dot = A(0);
    for (int64_t k = 0; k < n; ++k) {
      const A dy = static_cast<A>(d_y[base + k * inner]);
      dot += kLog ? dy : dy * static_cast<A>(y[base + k * inner]);
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t e = base + k * inner;
      const A dy = static_cast<A>(d_y[e]), yc = static_cast<A>(y[e]);
      d_x[e] = static_cast<T>(kLog ? dy - dmath::exp(yc) * dot : yc * (dy - dot));
    }
  }
}

unsigned column_grid(int64_t columns) {
  const int64_t max_blocks = 32LL * device_properties().multiProcessorCount;
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min((columns + kColumnThreads - 1) / kColumnThreads, max_blocks)));
}

}  // namespace

void softmax_dim(OpId op, const Tensor& y, const Tensor& x, int64_t outer, int64_t n, int64_t inner) {
  HG_CHECK(op == OpId::softmax || op == OpId::log_softmax, "cuda::softmax_dim: ", op_name(op),
           " is not softmax or log_softmax");
  HG_CHECK(x.is_contiguous() && y.is_contiguous() && x.numel() == outer * n * inner && y.numel() == x.numel() &&
               y.dtype() == x.dtype(),
           "cuda::softmax_dim needs contiguous tensors of ", outer, " x ", n, " x ", inner, " elements, got ",
           x.shape_str(), " -> ", y.shape_str());
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream().handle();
  const dim3 grid(column_grid(outer * inner));
  dispatch_floating(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x.data_ptr());
    T* out = static_cast<T*>(y.data_ptr());
    if (op == OpId::log_softmax) {
      HG_LAUNCH((softmax_columns_kernel<T, true>), grid, dim3(kColumnThreads), 0, stream, in, out, outer, n, inner);
    } else {
      HG_LAUNCH((softmax_columns_kernel<T, false>), grid, dim3(kColumnThreads), 0, stream, in, out, outer, n, inner);
    }
  });
}

void softmax_dim_backward(OpId op, const Tensor& d_x, const Tensor& d_y, const Tensor& y, int64_t outer, int64_t n,
                          int64_t inner) {
  HG_CHECK(op == OpId::softmax_backward || op == OpId::log_softmax_backward,
           "cuda::softmax_dim_backward: ", op_name(op), " is not a softmax backward op");
  HG_CHECK(d_x.is_contiguous() && d_y.is_contiguous() && y.is_contiguous() && y.numel() == outer * n * inner &&
               d_x.numel() == y.numel() && d_y.numel() == y.numel() && d_x.dtype() == y.dtype() &&
               d_y.dtype() == y.dtype(),
           "cuda::softmax_dim_backward needs contiguous tensors of ", outer, " x ", n, " x ", inner, " elements");
  if (y.numel() == 0) return;
  DeviceGuard guard(y.device().index);
  const cudaStream_t stream = current_stream().handle();
  const dim3 grid(column_grid(outer * inner));
  dispatch_floating(y.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(d_y.data_ptr());
    const T* yy = static_cast<const T*>(y.data_ptr());
    T* dx = static_cast<T*>(d_x.data_ptr());
    if (op == OpId::log_softmax_backward) {
      HG_LAUNCH((softmax_columns_backward_kernel<T, true>), grid, dim3(kColumnThreads), 0, stream, dy, yy, dx, outer, n,
                inner);
    } else {
      HG_LAUNCH((softmax_columns_backward_kernel<T, false>), grid, dim3(kColumnThreads), 0, stream, dy, yy, dx, outer,
                n, inner);
    }
  });
}

}  // namespace hg::cuda

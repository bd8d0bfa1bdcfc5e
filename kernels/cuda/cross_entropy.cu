// CUDA fused cross-entropy (log-softmax + NLL, mean over non-ignored rows,
// optional label smoothing) and its fused backward, then the launchers.
// Formulas in kernels/softmax.h; CPU reference kernels/cpu/cross_entropy.cpp.
//
// Rows use the split of kernels/cuda/softmax.cu: one warp per row up to 1024
// classes (4 rows per 128-thread block), else one block per row (256-1024
// threads, __launch_bounds__(1024)), grid-stride over rows
// (kernels/cuda/row_reduce.cuh). The mean over rows is deterministic: the row
// kernel writes one loss per row to a scratch buffer and a single 256-thread
// block sums it in a fixed order (block_allreduce; no float atomics).
//
// Bad targets (outside [0, C), not ignore_index) set the device error flag
// (kernels/cuda/device_error.h) and make the row NaN; the host sees the error
// at the next hg::cuda::check_device_errors.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_error.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/softmax.h"

namespace hg::cuda {

namespace {

constexpr int kSumThreads = kBlockThreads;  // the single block of the row-sum kernels

// Two sums reduced together: s = sum exp(x - m), gap = sum (m - x).
template <typename A>
struct SumPair {
  A s;
  A gap;
};

template <typename A>
__device__ __forceinline__ SumPair<A> shuffle_xor(SumPair<A> v, int lane_mask) {
  return {::hg::cuda::shuffle_xor(v.s, lane_mask), ::hg::cuda::shuffle_xor(v.gap, lane_mask)};
}

// A partial sum of row losses and the count of rows it covers.
template <typename A>
struct SumCount {
  A sum;
  long long count;
};

template <typename A>
__device__ __forceinline__ SumCount<A> shuffle_xor(SumCount<A> v, int lane_mask) {
  return {::hg::cuda::shuffle_xor(v.sum, lane_mask), ::hg::cuda::shuffle_xor(v.count, lane_mask)};
}

// Row statistics shared by forward and backward: m = max_c x_c (NaN-propagating),
// s = sum_c exp(x_c - m), and (need_gap) gap = sum_c (m - x_c).
template <bool kBlockPerRow, typename T, typename A>
__device__ __forceinline__ void row_stats(const T* x_row, int64_t cols, const RowSplit& split,
                                          bool need_gap, A* max_partials, SumPair<A>* sum_partials,
                                          A& m, A& s, A& gap) {
  A local_max = A(-INFINITY);
  for (int64_t c = split.lane; c < cols; c += split.threads) {
    local_max = max_nan(local_max, static_cast<A>(x_row[c]));
  }
  m = row_allreduce<kBlockPerRow>(local_max, [](A a, A b) { return max_nan(a, b); }, max_partials);
  SumPair<A> sums{A(0), A(0)};
  for (int64_t c = split.lane; c < cols; c += split.threads) {
    const A g = m - static_cast<A>(x_row[c]);
    sums.s += dmath::exp(-g);
    if (need_gap) sums.gap += g;
  }
  sums = row_allreduce<kBlockPerRow>(
      sums, [](SumPair<A> a, SumPair<A> b) { return SumPair<A>{a.s + b.s, a.gap + b.gap}; },
      sum_partials);
  s = sums.s;
  gap = sums.gap;
}

// cross_entropy_rows_kernel<T, kBlockPerRow>
//   formula    row_loss_i = (1 - eps) * ((m - x_t) + log s) + eps * (gap / C + log s)
//              (0 for ignored rows, NaN + error flag for out-of-range targets)
//   shapes     logits [N, C] contiguous T, targets [N] i64, row_loss [N] acc_t<T>
//   split      one warp (or block) per row
//   bytes      per element: 2 reads of T (the second mostly from L1/L2); per row
//              one i64 read and one acc_t write
//   precision  acc_t<T> math; m - x stays exact for nearby values, so logits of
//              +-1000 lose nothing to cancellation against log-sum-exp
template <typename T, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    cross_entropy_rows_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                              acc_t<T>* __restrict__ row_loss, int64_t rows, int64_t cols, int64_t ignore_index,
                              acc_t<T> eps, DeviceError* error) {
  using A = acc_t<T>;
  __shared__ A max_partials[kMaxWarpsPerBlock];
  __shared__ SumPair<A> sum_partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  for (int64_t row = split.first_row; row < rows; row += split.row_step) {
    const int64_t t = targets[row];  // the same for every thread of the row
    if (t == ignore_index) {
      if (split.lane == 0) row_loss[row] = A(0);
      continue;
    }
    if (t < 0 || t >= cols) {
      if (split.lane == 0) {
        report_device_error(error, DeviceErrorCode::kTargetOutOfRange, OpId::cross_entropy, t, row,
                            cols, ignore_index);
        row_loss[row] = A(NAN);
      }
      continue;
    }
    const T* x_row = logits + row * cols;
    A m, s, gap;
    row_stats<kBlockPerRow>(x_row, cols, split, eps > A(0), max_partials, sum_partials, m, s, gap);
    if (split.lane == 0) {
      const A log_s = dmath::log(s);
      A loss = (A(1) - eps) * ((m - static_cast<A>(x_row[t])) + log_s);
      if (eps > A(0)) loss += eps * (gap / static_cast<A>(cols) + log_s);
      row_loss[row] = loss;
    }
  }
}

// Sums per-row values in a fixed order: thread k takes rows k, k + 256, ...
// (serially), then block_allreduce (kernels/cuda/block_reduce.cuh); also
// counts the non-ignored rows. Every thread of the (single) block gets the
// totals. row_values == nullptr: count only.
template <typename A>
__device__ __forceinline__ void block_sum_rows(const A* row_values, const int64_t* targets, int64_t rows,
                                               int64_t ignore_index, A& total, long long& valid) {
  __shared__ SumCount<A> partials[kSumThreads / kWarpSize];  // shared: one per warp
  SumCount<A> mine{A(0), 0};
  for (int64_t r = threadIdx.x; r < rows; r += kSumThreads) {
    if (targets[r] == ignore_index) continue;
    if (row_values != nullptr) mine.sum += row_values[r];
    ++mine.count;
  }
  mine = block_allreduce(
      mine, [](SumCount<A> a, SumCount<A> b) { return SumCount<A>{a.sum + b.sum, a.count + b.count}; },
      partials);
  total = mine.sum;
  valid = mine.count;
}

// cross_entropy_mean_kernel<A>
//   formula    loss = sum_{i valid} row_loss_i / |valid|   (0/0 = NaN when none)
//   shapes     row_loss [N], targets [N] -> loss []
//   launch     one block of kSumThreads (256) threads
//   bytes      N * (sizeof(A) + 8) read, sizeof(A) written
//   precision  acc_t sums in a fixed order: bit-identical run to run
template <typename A>
__global__ void cross_entropy_mean_kernel(const A* __restrict__ row_loss, const int64_t* __restrict__ targets,
                                          int64_t rows, int64_t ignore_index, A* __restrict__ loss) {
  A total;
  long long valid;
  block_sum_rows(row_loss, targets, rows, ignore_index, total, valid);
  if (threadIdx.x == 0) loss[0] = total / static_cast<A>(valid);
}

// cross_entropy_scale_kernel<A>: scale = d_loss / |valid| for the backward.
//   launch one block of kSumThreads (256) threads; bytes N * 8 read
template <typename A>
__global__ void cross_entropy_scale_kernel(const A* __restrict__ d_loss, const int64_t* __restrict__ targets,
                                           int64_t rows, int64_t ignore_index, A* __restrict__ scale) {
  A unused;
  long long valid;
  block_sum_rows<A>(nullptr, targets, rows, ignore_index, unused, valid);
  if (threadIdx.x == 0) scale[0] = d_loss[0] / static_cast<A>(valid);
}

// cross_entropy_backward_rows_kernel<T, kBlockPerRow>
//   formula    d_x_c = (exp(x_c - m) / s - eps / C - (1 - eps) [c == t]) * scale
//              scale = d_loss / |valid|; zero rows for ignored targets, NaN rows
//              (+ error flag) for out-of-range targets
//   shapes     logits, d_logits [N, C] contiguous T; targets [N]; scale []
//   split      one warp (or block) per row
//   bytes      per element: 3 reads of T (2 mostly cached) + 1 write
//   precision  acc_t<T> math, one rounding on store
template <typename T, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    cross_entropy_backward_rows_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                                       const acc_t<T>* __restrict__ scale, T* __restrict__ d_logits, int64_t rows,
                                       int64_t cols, int64_t ignore_index, acc_t<T> eps, DeviceError* error) {
  using A = acc_t<T>;
  __shared__ A max_partials[kMaxWarpsPerBlock];
  __shared__ SumPair<A> sum_partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  const A g = scale[0];
  const A off_target = eps / static_cast<A>(cols);
  for (int64_t row = split.first_row; row < rows; row += split.row_step) {
    const int64_t t = targets[row];
    T* d_row = d_logits + row * cols;
    const bool ignored = t == ignore_index;
    if (ignored || t < 0 || t >= cols) {
      if (!ignored && split.lane == 0) {
        report_device_error(error, DeviceErrorCode::kTargetOutOfRange, OpId::cross_entropy_backward, t,
                            row, cols, ignore_index);
      }
      const A fill = ignored ? A(0) : A(NAN);
      for (int64_t c = split.lane; c < cols; c += split.threads) d_row[c] = static_cast<T>(fill);
      continue;
    }
    const T* x_row = logits + row * cols;
    A m, s, gap;
    row_stats<kBlockPerRow>(x_row, cols, split, false, max_partials, sum_partials, m, s, gap);
    for (int64_t c = split.lane; c < cols; c += split.threads) {
      const A p = dmath::exp(static_cast<A>(x_row[c]) - m) / s;
      const A target = off_target + (c == t ? A(1) - eps : A(0));
      d_row[c] = static_cast<T>((p - target) * g);
    }
  }
}

}  // namespace

void cross_entropy(const Tensor& loss, const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                   double label_smoothing) {
  ::hg::detail::check_cross_entropy_buffers(logits, targets);
  const int64_t rows = logits.size(0), cols = logits.size(1);
  DeviceGuard guard(logits.device().index);
  const Stream launch_stream = current_stream();
  const cudaStream_t stream = launch_stream.handle();
  DeviceError* error = device_error_slot(launch_stream);  // notes the stream for the next check
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor row_loss = empty({rows}, {.dtype = dtype_of<A>(), .device = logits.device()});
    const T* x = static_cast<const T*>(logits.data_ptr());
    const int64_t* t = static_cast<const int64_t*>(targets.data_ptr());
    A* per_row = static_cast<A*>(row_loss.data_ptr());
    const A eps = static_cast<A>(label_smoothing);
    launch_row_kernel(
        "cross_entropy_rows_kernel", __FILE__, __LINE__,
        [](auto block_per_row) { return cross_entropy_rows_kernel<T, decltype(block_per_row)::value>; }, rows,
        cols, stream, x, t, per_row, rows, cols, ignore_index, eps, error);
    launch_kernel("cross_entropy_mean_kernel", __FILE__, __LINE__, cross_entropy_mean_kernel<A>, dim3(1),
                  dim3(kSumThreads), 0, stream, static_cast<const A*>(per_row), t, rows, ignore_index,
                  static_cast<A*>(loss.data_ptr()));
  });
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& d_loss, const Tensor& logits,
                            const Tensor& targets, int64_t ignore_index, double label_smoothing) {
  ::hg::detail::check_cross_entropy_buffers(logits, targets, d_logits);
  const int64_t rows = logits.size(0), cols = logits.size(1);
  if (rows == 0) return;
  DeviceGuard guard(logits.device().index);
  const Stream launch_stream = current_stream();
  const cudaStream_t stream = launch_stream.handle();
  DeviceError* error = device_error_slot(launch_stream);  // notes the stream for the next check
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor scale = empty({}, {.dtype = dtype_of<A>(), .device = logits.device()});
    const int64_t* t = static_cast<const int64_t*>(targets.data_ptr());
    A* scale_ptr = static_cast<A*>(scale.data_ptr());
    launch_kernel("cross_entropy_scale_kernel", __FILE__, __LINE__, cross_entropy_scale_kernel<A>, dim3(1),
                  dim3(kSumThreads), 0, stream, static_cast<const A*>(d_loss.data_ptr()), t, rows,
                  ignore_index, scale_ptr);
    const T* x = static_cast<const T*>(logits.data_ptr());
    T* d_x = static_cast<T*>(d_logits.data_ptr());
    const A eps = static_cast<A>(label_smoothing);
    launch_row_kernel(
        "cross_entropy_backward_rows_kernel", __FILE__, __LINE__,
        [](auto block_per_row) {
          return cross_entropy_backward_rows_kernel<T, decltype(block_per_row)::value>;
        },
        rows, cols, stream, x, t, static_cast<const A*>(scale_ptr), d_x, rows, cols, ignore_index, eps, error);
  });
}

}  // namespace hg::cuda

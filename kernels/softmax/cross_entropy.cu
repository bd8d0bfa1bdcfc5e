// CUDA fused cross-entropy (log-softmax + NLL, mean over non-ignored rows,
// optional label smoothing, padding columns after the first `classes`) and its
// fused backward, then the launchers. Formulas in kernels/softmax/softmax.h; CPU
// reference kernels/softmax/cross_entropy_cpu.cpp.
//
// The logits are read in their own dtype (16-bit rows are widened in
// registers). The forward reads a row once: an online (max, sum exp) pair per
// thread (kernels/softmax/online_softmax.cuh), merged across the row, and writes
// the row's loss and statistics (m, log s); the backward given them reads the
// row once and writes exp((x - m) - log s) - target, scaled, in one pass
// (without them it recomputes them first). Rows whose length is a multiple of 8 elements on a
// 16-byte aligned base are read and written in 8-element chunks (128-bit
// accesses).
//
// Rows use the split of kernels/softmax/softmax.cu: one warp per row up to 1024
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
#include "kernels/softmax/online_softmax.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/softmax/softmax.h"

namespace hg::cuda {

namespace {

constexpr int kSumThreads = kBlockThreads;  // the single block of the row-sum kernels

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

// A chunk of 8 consecutive elements read or written at once: one 16-byte
// access for 16-bit T, two for f32, four for f64. The width is the same for
// every dtype, so a row's columns fall to the same threads in the same order
// whatever T is (an f16 row and its exact f32 copy give bit-identical sums).
template <typename T>
inline constexpr int kRowVec = 8;

template <typename T>
struct alignas(16) RowVec {
  T v[kRowVec<T>];
};

// Calls f(c, x_c) for this thread's columns c < n of the row: chunks of
// kRowVec when `vec` (the row length is a multiple of kRowVec and the base
// 16-byte aligned; a chunk's columns past n are skipped), else one element
// per step.
template <typename T, typename F>
__device__ __forceinline__ void for_row(const T* row, int64_t n, bool vec, const RowSplit& split, F&& f) {
  if (vec) {
    constexpr int kVec = kRowVec<T>;
    const RowVec<T>* vrow = reinterpret_cast<const RowVec<T>*>(row);
    const int64_t chunks = (n + kVec - 1) / kVec;
    for (int64_t k = split.lane; k < chunks; k += split.threads) {
      const RowVec<T> chunk = vrow[k];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const int64_t c = k * kVec + j;
        if (c < n) f(c, chunk.v[j]);
      }
    }
  } else {
    for (int64_t c = split.lane; c < n; c += split.threads) f(c, row[c]);
  }
}

// The row's online (max, sum exp) over its first `classes` columns, merged
// across the row's threads (NaN-propagating; see online_add).
template <bool kBlockPerRow, typename T, typename A>
__device__ __forceinline__ MaxSum<A> row_max_sum(const T* x_row, int64_t classes, bool vec, const RowSplit& split,
                                                 MaxSum<A>* partials) {
  MaxSum<A> st{A(-INFINITY), A(0)};
  for_row(x_row, classes, vec, split, [&](int64_t, T x) { st = online_add(st, static_cast<A>(x)); });
  return row_allreduce<kBlockPerRow>(
      st, [](MaxSum<A> a, MaxSum<A> b) { return merge(a, b); }, partials);
}

// cross_entropy_rows_kernel<T, kBlockPerRow>
//   formula    row_loss_i = (1 - eps) * ((m - x_t) + log s) + eps * (gap / K + log s)
//              row_stats_i = (m, log s), over the first K = classes columns
//              (m = max, s = sum exp(x - m), gap = sum (m - x));
//              ignored rows: loss 0, stats 0; out-of-range targets: NaN + error flag
//   shapes     logits [N, C] contiguous T, targets [N] i64, row_loss [N], row_stats [N, 2] acc_t<T>
//   split      one warp (or block) per row; each thread folds its columns into an
//              online (max, sum) pair, one merge across the row
//   bytes      per row: K reads of T (once; a second pass only for eps > 0), one
//              i64 read, two acc_t writes
//   precision  acc_t<T> math; m - x stays exact for nearby values, so logits of
//              +-1000 lose nothing to cancellation against log-sum-exp
template <typename T, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    cross_entropy_rows_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                              acc_t<T>* __restrict__ row_loss, acc_t<T>* __restrict__ row_stats, int64_t rows,
                              int64_t cols, int64_t classes, bool vec, int64_t ignore_index, acc_t<T> eps,
                              DeviceError* error) {
  using A = acc_t<T>;
  __shared__ MaxSum<A> partials[kMaxWarpsPerBlock];
  __shared__ A gap_partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  for (int64_t row = split.first_row; row < rows; row += split.row_step) {
    const int64_t t = targets[row];  // the same for every thread of the row
    if (t == ignore_index) {
      if (split.lane == 0) row_loss[row] = row_stats[2 * row] = row_stats[2 * row + 1] = A(0);
      continue;
    }
    if (t < 0 || t >= classes) {
      if (split.lane == 0) {
        report_device_error(error, DeviceErrorCode::kTargetOutOfRange, OpId::cross_entropy, t, row, classes,
                            ignore_index);
        row_loss[row] = row_stats[2 * row] = row_stats[2 * row + 1] = A(NAN);
      }
      continue;
    }
    const T* x_row = logits + row * cols;
    const MaxSum<A> st = row_max_sum<kBlockPerRow>(x_row, classes, vec, split, partials);
    A gap = A(0);
    if (eps > A(0)) {  // label smoothing: sum (m - x) against the final max
      A mine = A(0);
      for_row(x_row, classes, vec, split, [&](int64_t, T x) { mine += st.m - static_cast<A>(x); });
      gap = row_allreduce<kBlockPerRow>(
          mine, [](A a, A b) { return a + b; }, gap_partials);
    }
    if (split.lane == 0) {
      const A log_s = dmath::log(st.s);
      A loss = (A(1) - eps) * ((st.m - static_cast<A>(x_row[t])) + log_s);
      if (eps > A(0)) loss += eps * (gap / static_cast<A>(classes) + log_s);
      row_loss[row] = loss;
      row_stats[2 * row] = st.m;
      row_stats[2 * row + 1] = log_s;
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
//   formula    d_x_c = (exp((x_c - m) - log s) - eps / K - (1 - eps) [c == t]) * scale  (c < K)
//              d_x_c = 0 for the padding columns c >= K
//              scale = d_loss / |valid|; (m, log s) = the forward's row_stats
//              (or, when row_stats is null, recomputed by one online pass);
//              zero rows for ignored targets, NaN rows (+ error flag) for
//              out-of-range targets
//   shapes     logits, d_logits [N, C] contiguous T; targets [N]; row_stats [N, 2] or
//              null; scale []
//   split      one warp (or block) per row
//   bytes      per element: 1 read of T (2 without row_stats) + 1 write of T;
//              per row one i64 and one acc_t read
//   precision  acc_t<T> math, one rounding on store
template <typename T, bool kBlockPerRow>
__global__ void __launch_bounds__(kRowMaxThreads)
    cross_entropy_backward_rows_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                                       const acc_t<T>* __restrict__ row_stats, const acc_t<T>* __restrict__ scale,
                                       T* __restrict__ d_logits, int64_t rows, int64_t cols, int64_t classes, bool vec,
                                       int64_t ignore_index, acc_t<T> eps, DeviceError* error) {
  using A = acc_t<T>;
  constexpr int kVec = kRowVec<T>;
  __shared__ MaxSum<A> partials[kMaxWarpsPerBlock];
  const RowSplit split = row_split<kBlockPerRow>();
  const A g = scale[0];
  const A off_target = eps / static_cast<A>(classes);
  for (int64_t row = split.first_row; row < rows; row += split.row_step) {
    const int64_t t = targets[row];
    T* d_row = d_logits + row * cols;
    const bool ignored = t == ignore_index;
    const T* x_row = logits + row * cols;
    A m = A(0), log_s = A(0);
    if (ignored || t < 0 || t >= classes) {
      if (!ignored && split.lane == 0) {
        report_device_error(error, DeviceErrorCode::kTargetOutOfRange, OpId::cross_entropy_backward, t, row, classes,
                            ignore_index);
      }
    } else if (row_stats != nullptr) {
      m = row_stats[2 * row];
      log_s = row_stats[2 * row + 1];
    } else {
      const MaxSum<A> st = row_max_sum<kBlockPerRow>(x_row, classes, vec, split, partials);
      m = st.m;
      log_s = dmath::log(st.s);
    }
    // The gradient of column c (padding and ignored rows: 0, bad targets: NaN).
    auto grad = [&](int64_t c, T x) -> T {
      if (c >= classes || ignored) return static_cast<T>(A(0));
      if (t < 0 || t >= classes) return static_cast<T>(A(NAN));
      const A p = dmath::exp((static_cast<A>(x) - m) - log_s);
      const A target = off_target + (c == t ? A(1) - eps : A(0));
      return static_cast<T>((p - target) * g);
    };
    if (vec) {  // whole 16-byte chunks, padding columns included
      const RowVec<T>* vx = reinterpret_cast<const RowVec<T>*>(x_row);
      RowVec<T>* vd = reinterpret_cast<RowVec<T>*>(d_row);
      for (int64_t k = split.lane; k < cols / kVec; k += split.threads) {
        const RowVec<T> in = vx[k];
        RowVec<T> out;
#pragma unroll
        for (int j = 0; j < kVec; ++j) out.v[j] = grad(k * kVec + j, in.v[j]);
        vd[k] = out;
      }
    } else {
      for (int64_t c = split.lane; c < cols; c += split.threads) d_row[c] = grad(c, x_row[c]);
    }
  }
}

// Whether rows of `cols` T starting at `base` can be read in 16-byte vectors.
template <typename T>
bool rows_vectorizable(const void* base, int64_t cols) {
  return cols % kRowVec<T> == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0;
}

}  // namespace

void cross_entropy(const Tensor& loss, const Tensor& row_stats, const Tensor& logits, const Tensor& targets,
                   int64_t ignore_index, double label_smoothing, int64_t classes) {
  ::hg::detail::check_cross_entropy_buffers(logits, targets, classes, row_stats);
  const int64_t rows = logits.size(0), cols = logits.size(1);
  DeviceGuard guard(logits.device().index);
  const Stream launch_stream = current_stream();
  const cudaStream_t stream = launch_stream.handle();
  DeviceError* error = device_error_slot(launch_stream);  // notes the stream for the next check
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor row_loss = empty({rows}, {.dtype = dtype_of<A>(), .device = logits.device()});
    const Tensor stats =
        row_stats.defined() ? row_stats : empty({rows, 2}, {.dtype = dtype_of<A>(), .device = logits.device()});
    const T* x = static_cast<const T*>(logits.data_ptr());
    const int64_t* t = static_cast<const int64_t*>(targets.data_ptr());
    A* per_row = static_cast<A*>(row_loss.data_ptr());
    const A eps = static_cast<A>(label_smoothing);
    const bool vec = rows_vectorizable<T>(x, cols);
    launch_row_kernel(
        "cross_entropy_rows_kernel", __FILE__, __LINE__,
        [](auto block_per_row) { return cross_entropy_rows_kernel<T, decltype(block_per_row)::value>; }, rows, classes,
        stream, x, t, per_row, static_cast<A*>(stats.data_ptr()), rows, cols, classes, vec, ignore_index, eps, error);
    HG_LAUNCH(cross_entropy_mean_kernel<A>, dim3(1), dim3(kSumThreads), 0, stream, static_cast<const A*>(per_row), t,
              rows, ignore_index, static_cast<A*>(loss.data_ptr()));
  });
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& d_loss, const Tensor& logits, const Tensor& targets,
                            const Tensor& row_stats, int64_t ignore_index, double label_smoothing, int64_t classes) {
  ::hg::detail::check_cross_entropy_buffers(logits, targets, classes, row_stats, d_logits);
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
    HG_LAUNCH(cross_entropy_scale_kernel<A>, dim3(1), dim3(kSumThreads), 0, stream,
              static_cast<const A*>(d_loss.data_ptr()), t, rows, ignore_index, scale_ptr);
    const T* x = static_cast<const T*>(logits.data_ptr());
    T* d_x = static_cast<T*>(d_logits.data_ptr());
    const A eps = static_cast<A>(label_smoothing);
    const bool vec = rows_vectorizable<T>(x, cols) && rows_vectorizable<T>(d_x, cols);
    const A* stats = row_stats.defined() ? static_cast<const A*>(row_stats.data_ptr()) : nullptr;
    launch_row_kernel(
        "cross_entropy_backward_rows_kernel", __FILE__, __LINE__,
        [](auto block_per_row) { return cross_entropy_backward_rows_kernel<T, decltype(block_per_row)::value>; }, rows,
        cols, stream, x, t, stats, static_cast<const A*>(scale_ptr), d_x, rows, cols, classes, vec, ignore_index, eps,
        error);
  });
}

}  // namespace hg::cuda

// CUDA row reductions (kernels/reduce/reduce.h): sum, mean, max, min, norm and argmax
// over each row of a [rows, cols] view with dense rows; and the value
// reductions over a view with dense columns (reduce_cols, below), which takes a
// reduction over the leading dims of a contiguous tensor without a copy. One kernel template
// does all of them; each op is a functor over an accumulator (Acc):
//   load(x, c)     the Acc of one element at column c
//   combine(a, b)  merges two Accs (associative; for argmax also commutative)
//   finish(a, n)   the output value from the row's Acc and the row length n
// The CPU reference is kernels/reduce/reduce_cpu.cpp.
//
// reduce_rows_kernel<Op, In, kLoadRaw, kWritePartial>
//   formula     out[r] = finish(combine_{c in [0, cols)} load(x[r, c], c), cols)
//   shapes      x [rows, cols] (row stride any, column stride 1); out [rows]
//   split       a row group of G threads per row: G = 32 (one warp, rows
//               shorter than kBlockRowCols, 8 rows per block) or G = 256 (the
//               whole block). Thread `lane` of the group accumulates columns
//               lane, lane + G, lane + 2G, ... into a register Acc; the group
//               then combines with warp_allreduce (G = 32) or block_allreduce
//               (G = 256: the 8 warp results through shared memory, folded in
//               warp order), kernels/cuda/block_reduce.cuh. No atomics.
//   two-pass    a few very long rows (rows * cols large, rows < the SM count
//               would leave most of the GPU idle) are cut into `splits`
//               column chunks: pass 1 (grid.y = splits) writes one partial
//               Acc per (row, chunk) to a workspace [rows, splits]; pass 2 runs
//               the same kernel over the workspace (kLoadRaw = false) and
//               applies finish with the original cols.
//   launch      kBlockThreads (256) threads per block;
//               grid.x = ceil(rows / (256 / G)), grid.y = splits (1 when single-pass)
//   bytes       each element of x read once (sizeof(T)); one write per row
//               (sizeof(T), 8 for argmax); two-pass adds rows * splits
//               * sizeof(Acc) written and read back
//   precision   16-bit and f32 inputs accumulate in float, f64 in double,
//               integers in i64; one rounding to the output dtype on store
//   determinism the combination order is a function of (rows, cols, the SM
//               count) only, so results are bit-identical run to run; argmax's
//               combine is a total order (value, then lowest index; NaN above
//               everything), so its result does not depend on the order at all;
//               every combine is commutative, as the xor butterfly needs
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/tensor.h"
#include "kernels/cuda/block_reduce.cuh"
#include "runtime/cuda/device_limits.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/reduce/reduce.h"

namespace hg::cuda {

namespace {

constexpr int kWarpsPerBlock = kBlockThreads / kWarpSize;
constexpr int64_t kBlockRowCols = 512;              // rows this long get a whole block
constexpr int64_t kSplitMinCols = 16384;            // rows this long may be split (two-pass)
constexpr int64_t kColsPerSplit = 8192;             // target columns per pass-1 block

// The accumulator of a value reduction: float for f32/f16/bf16, double for
// f64, i64 for integers and bool.
template <typename T>
using value_acc_t = std::conditional_t<std::is_integral_v<T>, int64_t, acc_t<T>>;

// argmax's accumulator: the best value so far and its column (-1: none yet).
template <typename A>
struct ArgAcc {
  A value;
  int64_t index;
};

// The warp shuffle of argmax's accumulator (block_reduce.cuh shuffles scalars).
template <typename A>
__device__ __forceinline__ ArgAcc<A> shuffle_xor(ArgAcc<A> v, int lane_mask) {
  return {::hg::cuda::shuffle_xor(v.value, lane_mask), ::hg::cuda::shuffle_xor(v.index, lane_mask)};
}

template <typename A>
__device__ __forceinline__ bool is_nan(A v) {
  return v != v;  // false for integers
}

// ---- the ops ----------------------------------------------------------------------------
template <typename T>
struct SumOp {
  using Acc = value_acc_t<T>;
  __device__ __forceinline__ Acc identity() const { return Acc(0); }
  __device__ __forceinline__ Acc load(T v, int64_t) const { return static_cast<Acc>(v); }
  __device__ __forceinline__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ __forceinline__ T finish(Acc a, int64_t) const { return static_cast<T>(a); }
};

template <typename T>
struct MeanOp : SumOp<T> {
  using Acc = value_acc_t<T>;
  // An empty row gives 0 / 0 = NaN, like torch.
  __device__ __forceinline__ T finish(Acc a, int64_t n) const {
    return static_cast<T>(a / static_cast<Acc>(n));
  }
};

template <typename T>
struct NormOp : SumOp<T> {
  using Acc = value_acc_t<T>;
  __device__ __forceinline__ Acc load(T v, int64_t) const {
    const Acc a = static_cast<Acc>(v);
    return a * a;
  }
  __device__ __forceinline__ T finish(Acc a, int64_t) const { return static_cast<T>(dmath::sqrt(a)); }
};

// max (kMax) or min; NaN wins, so it propagates.
template <typename T, bool kMax>
struct ExtremumOp {
  using Acc = value_acc_t<T>;
  __device__ __forceinline__ Acc identity() const {
    if constexpr (std::is_integral_v<Acc>) {
      return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    } else {
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    }
  }
  __device__ __forceinline__ Acc load(T v, int64_t) const { return static_cast<Acc>(v); }
  __device__ __forceinline__ Acc combine(Acc a, Acc b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return (kMax ? a > b : a < b) ? a : b;
  }
  __device__ __forceinline__ T finish(Acc a, int64_t) const { return static_cast<T>(a); }
};

template <typename T>
struct ArgmaxOp {
  using Acc = ArgAcc<value_acc_t<T>>;
  __device__ __forceinline__ Acc identity() const { return {value_acc_t<T>(0), -1}; }
  __device__ __forceinline__ Acc load(T v, int64_t c) const { return {static_cast<value_acc_t<T>>(v), c}; }
  // The better of two candidates: NaN above every number, then the larger
  // value, then the lower index.
  __device__ __forceinline__ Acc combine(Acc a, Acc b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
    return a.index < b.index ? a : b;
  }
  __device__ __forceinline__ int64_t finish(Acc a, int64_t) const { return a.index; }
};

// ---- the kernel ---------------------------------------------------------------------------
struct RowArgs {
  const void* in;      // [rows, in_cols] of In, row stride in_row_stride, column stride 1
  void* out;           // [rows] of Out (final pass) or [rows, gridDim.y] of Acc (pass 1)
  int64_t rows;
  int64_t in_cols;     // columns of `in` (the split count in pass 2)
  int64_t in_row_stride;
  int64_t chunk;       // columns per grid.y slice (in_cols when single-pass)
  int64_t count;       // the n handed to finish: the original cols
  int group;           // threads per row: 32 or 256
};

// Combines the Accs of the `group` threads of each row; every thread of the
// group gets the result. Every thread of the block must call it (`group` is
// the same for the whole block, so the branch is uniform).
template <typename Op>
__device__ typename Op::Acc group_allreduce(const Op& op, typename Op::Acc acc, int group) {
  using Acc = typename Op::Acc;
  __shared__ Acc warp_results[kWarpsPerBlock];  // shared, one per warp
  const auto combine = [&op](Acc a, Acc b) { return op.combine(a, b); };
  if (group == kWarpSize) return warp_allreduce(acc, combine);
  return block_allreduce(acc, combine, warp_results);
}

// kLoadRaw: `in` holds input values T (load each); otherwise Accs of pass 1.
// kWritePartial: write the Acc of (row, blockIdx.y) instead of finishing.
template <typename Op, typename In, bool kLoadRaw, bool kWritePartial>
__global__ void __launch_bounds__(kBlockThreads) reduce_rows_kernel(RowArgs args, Op op) {
  using Acc = typename Op::Acc;
  // registers: acc (this thread's slice); global: in (read once), out
  const int thread_id = static_cast<int>(threadIdx.x);
  const int lane_in_row = thread_id % args.group;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kBlockThreads / args.group) +
                      thread_id / args.group;
  const int64_t col_begin = static_cast<int64_t>(blockIdx.y) * args.chunk;
  const int64_t col_end = col_begin + args.chunk < args.in_cols ? col_begin + args.chunk : args.in_cols;
  Acc acc = op.identity();
  if (row < args.rows) {  // rows past the end still join the shuffles below
    const In* in = static_cast<const In*>(args.in) + row * args.in_row_stride;
    for (int64_t c = col_begin + lane_in_row; c < col_end; c += args.group) {
      if constexpr (kLoadRaw) {
        acc = op.combine(acc, op.load(in[c], c));
      } else {
        acc = op.combine(acc, in[c]);
      }
    }
  }
  acc = group_allreduce(op, acc, args.group);
  if (lane_in_row != 0 || row >= args.rows) return;
  if constexpr (kWritePartial) {
    static_cast<Acc*>(args.out)[row * gridDim.y + blockIdx.y] = acc;
  } else {
    using Out = decltype(op.finish(acc, 0));
    static_cast<Out*>(args.out)[row] = op.finish(acc, args.count);
  }
}

int group_for(int64_t cols) { return cols >= kBlockRowCols ? kBlockThreads : kWarpSize; }

dim3 grid_for(int64_t rows, int group, int64_t splits) {
  const int64_t rows_per_block = kBlockThreads / group;
  return dim3(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block),
              static_cast<unsigned>(splits));
}

// Column chunks per row: > 1 only for long rows too few to fill the GPU.
int64_t splits_for(int64_t rows, int64_t cols) {
  if (cols < kSplitMinCols) return 1;
  const int64_t sms = device_properties().multiProcessorCount;
  const int64_t wanted_blocks = 4 * sms;
  if (rows >= wanted_blocks) return 1;
  const int64_t by_size = (cols + kColsPerSplit - 1) / kColsPerSplit;
  const int64_t by_occupancy = (wanted_blocks + rows - 1) / rows;
  return std::max<int64_t>(1, std::min<int64_t>({by_size, by_occupancy, 65535}));
}

// Runs op over the rows of x into out, in one or two passes.
template <typename T, typename Op>
void run_rows(const char* name, const Op& op, const Tensor& out, const Tensor& x) {
  using Acc = typename Op::Acc;
  const int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  if (rows == 0) return;
  DeviceGuard guard(out.device().index);
  const cudaStream_t stream = current_stream().handle();
  const int64_t splits = splits_for(rows, cols);
  RowArgs args{};
  args.in = x.data_ptr();
  args.rows = rows;
  args.in_cols = cols;
  args.in_row_stride = x.strides()[0];
  args.count = cols;
  args.group = group_for(splits > 1 ? (cols + splits - 1) / splits : cols);
  if (splits == 1) {
    args.out = out.data_ptr();
    args.chunk = cols;
    profiler::declare_work(static_cast<double>(x.nbytes() + out.nbytes()), static_cast<double>(rows * cols));
    launch_kernel(name, __FILE__, __LINE__, reduce_rows_kernel<Op, T, true, false>,
                  grid_for(rows, args.group, 1), dim3(kBlockThreads), 0, stream, args, op);
    return;
  }
  // Pass 1: one partial Acc per (row, chunk) into a device workspace.
  Tensor workspace = empty({rows, splits, static_cast<int64_t>(sizeof(Acc))},
                           {.dtype = kU8, .device = out.device()});
  args.out = workspace.data_ptr();
  args.chunk = (cols + splits - 1) / splits;
  profiler::declare_work(static_cast<double>(x.nbytes() + workspace.nbytes()), static_cast<double>(rows * cols));
  launch_kernel(name, __FILE__, __LINE__, reduce_rows_kernel<Op, T, true, true>,
                grid_for(rows, args.group, splits), dim3(kBlockThreads), 0, stream, args, op);
  // Pass 2: combine each row's partials in chunk order, then finish.
  RowArgs final_args{};
  final_args.in = workspace.data_ptr();
  final_args.out = out.data_ptr();
  final_args.rows = rows;
  final_args.in_cols = splits;
  final_args.in_row_stride = splits;
  final_args.chunk = splits;
  final_args.count = cols;
  final_args.group = group_for(splits);
  profiler::declare_work(static_cast<double>(workspace.nbytes() + out.nbytes()), static_cast<double>(rows * splits));
  launch_kernel(name, __FILE__, __LINE__, reduce_rows_kernel<Op, Acc, false, false>,
                grid_for(rows, final_args.group, 1), dim3(kBlockThreads), 0, stream, final_args, op);
  // The workspace goes back to the caching allocator, which orders its reuse
  // after this stream's work.
}

// ---- column reductions ---------------------------------------------------------------------
//
// Note [Column reductions on CUDA]
// reduce_cols_kernel<Op, In, kLoadRaw, kWritePartial>
//   formula     out[r] = finish(combine_{c in [0, cols)} load(x[r + c * ld], c), cols)
//   shapes      x [rows, cols] with dense columns (stride(0) == 1, stride(1) = ld
//               >= rows): a row-major [cols, rows] matrix summed over its rows,
//               as a bias gradient [B*T, N] -> [N]; out [rows]
//   split       a block is kColLanes (32) consecutive r (one warp's lanes, so
//               every load of a warp is one contiguous run of 32 elements) by
//               kColWarps (8) warps; warp w accumulates c = c0 + w, c0 + w + 8,
//               ... of its block's column slab [c0, c1) into a register Acc; the
//               8 warp partials meet in shared memory and warp 0 folds them in
//               warp order. No atomics.
//   two-pass    when the r blocks alone cannot fill the GPU (few output
//               columns, many rows: 768 outputs over 8192 rows is 24 blocks),
//               the c range is cut into `splits` slabs (grid.y): pass 1 writes
//               one partial Acc per (slab, r) to a workspace [splits, rows];
//               pass 2 runs the same kernel over it (kLoadRaw = false) and
//               applies finish with the original cols.
//   launch      256 threads (32 x 8); grid.x = ceil(rows / 32), grid.y = splits
//   bytes       each element of x read once (sizeof(T)); rows * sizeof(T)
//               written; two-pass adds splits * rows * sizeof(Acc) written and
//               read back (<= 1/256 of x when it splits)
//   FLOPs       one combine per element
//   precision   as the row path: float accumulation for f32/f16/bf16, double
//               for f64, i64 for integer sums; one rounding on store
//   determinism the combination order is a function of (rows, cols, the SM
//               count) only: bit-identical run to run; it differs
//               from the row path's order (and the CPU's), so results agree to
//               the reduction tolerance, not bit for bit
constexpr int kColLanes = kWarpSize;
constexpr int kColWarps = kBlockThreads / kWarpSize;
constexpr int64_t kColsPerColSplit = 256;  // the least c per slab worth a block

struct ColArgs {
  const void* in;  // [rows, in_cols] of In: element (r, c) at r + c * ld
  void* out;       // [rows] of Out (final pass) or [gridDim.y, rows] of Acc (pass 1)
  int64_t rows;
  int64_t in_cols;
  int64_t ld;
  int64_t chunk;  // columns per grid.y slab
  int64_t count;  // the n handed to finish: the original cols
};

template <typename Op, typename In, bool kLoadRaw, bool kWritePartial>
__global__ void __launch_bounds__(kBlockThreads) reduce_cols_kernel(ColArgs args, Op op) {
  using Acc = typename Op::Acc;
  // shared: one partial per (warp, lane); registers: acc; global: in (read once), out
  __shared__ Acc partial[kColWarps][kColLanes];
  const int lane = static_cast<int>(threadIdx.x) % kColLanes;
  const int warp = static_cast<int>(threadIdx.x) / kColLanes;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kColLanes + lane;
  const int64_t c_begin = static_cast<int64_t>(blockIdx.y) * args.chunk;
  const int64_t c_end = c_begin + args.chunk < args.in_cols ? c_begin + args.chunk : args.in_cols;
  Acc acc = op.identity();
  if (r < args.rows) {
    const In* in = static_cast<const In*>(args.in) + r;
    for (int64_t c = c_begin + warp; c < c_end; c += kColWarps) {
      if constexpr (kLoadRaw) {
        acc = op.combine(acc, op.load(in[c * args.ld], c));
      } else {
        acc = op.combine(acc, in[c * args.ld]);
      }
    }
  }
  partial[warp][lane] = acc;
  __syncthreads();
  if (warp != 0 || r >= args.rows) return;
  for (int w = 1; w < kColWarps; ++w) acc = op.combine(acc, partial[w][lane]);
  if constexpr (kWritePartial) {
    static_cast<Acc*>(args.out)[static_cast<int64_t>(blockIdx.y) * args.rows + r] = acc;
  } else {
    using Out = decltype(op.finish(acc, 0));
    static_cast<Out*>(args.out)[r] = op.finish(acc, args.count);
  }
}

// Column slabs: > 1 only when the r blocks leave most SMs idle and each slab
// still gets kColsPerColSplit columns.
int64_t col_splits_for(int64_t rows, int64_t cols) {
  const int64_t blocks = (rows + kColLanes - 1) / kColLanes;
  const int64_t wanted_blocks = 4 * static_cast<int64_t>(device_properties().multiProcessorCount);
  if (blocks >= wanted_blocks || cols < 2 * kColsPerColSplit) return 1;
  const int64_t by_size = cols / kColsPerColSplit;
  const int64_t by_occupancy = (wanted_blocks + blocks - 1) / blocks;
  return std::max<int64_t>(1, std::min<int64_t>({by_size, by_occupancy, 65535}));
}

template <typename T, typename Op>
void run_cols(const char* name, const Op& op, const Tensor& out, const Tensor& x) {
  using Acc = typename Op::Acc;
  const int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  if (rows == 0) return;
  DeviceGuard guard(out.device().index);
  const cudaStream_t stream = current_stream().handle();
  const int64_t splits = col_splits_for(rows, cols);
  const dim3 block(kBlockThreads);
  ColArgs args{};
  args.in = x.data_ptr();
  args.rows = rows;
  args.in_cols = cols;
  args.ld = cols > 1 ? x.strides()[1] : rows;
  args.count = cols;
  const auto grid_x = static_cast<unsigned>((rows + kColLanes - 1) / kColLanes);
  if (splits == 1) {
    args.out = out.data_ptr();
    args.chunk = cols;
    launch_kernel(name, __FILE__, __LINE__, reduce_cols_kernel<Op, T, true, false>, dim3(grid_x, 1), block, 0, stream,
                  args, op);
    return;
  }
  Tensor workspace = empty({splits, rows, static_cast<int64_t>(sizeof(Acc))}, {.dtype = kU8, .device = out.device()});
  args.out = workspace.data_ptr();
  args.chunk = (cols + splits - 1) / splits;
  launch_kernel(name, __FILE__, __LINE__, reduce_cols_kernel<Op, T, true, true>,
                dim3(grid_x, static_cast<unsigned>(splits)), block, 0, stream, args, op);
  ColArgs final_args{};
  final_args.in = workspace.data_ptr();
  final_args.out = out.data_ptr();
  final_args.rows = rows;
  final_args.in_cols = splits;
  final_args.ld = rows;
  final_args.chunk = splits;
  final_args.count = cols;
  launch_kernel(name, __FILE__, __LINE__, reduce_cols_kernel<Op, Acc, false, false>, dim3(grid_x, 1), block, 0, stream,
                final_args, op);
  // The workspace goes back to the caching allocator, which orders its reuse
  // after this stream's work.
}

}  // namespace

void reduce_cols(OpId op, const Tensor& out, const Tensor& x) {
  hg::detail::check_reduce_cols_buffers(out, x);
  const char* name = op_name(op).data();
  dispatch_compute_dtype(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case OpId::max:
        return run_cols<T>(name, ExtremumOp<T, true>{}, out, x);
      case OpId::min:
        return run_cols<T>(name, ExtremumOp<T, false>{}, out, x);
      default:
        break;
    }
    if constexpr (std::is_same_v<T, int64_t>) {
      if (op == OpId::sum) return run_cols<T>(name, SumOp<T>{}, out, x);
    } else if constexpr (!std::is_integral_v<T>) {
      switch (op) {
        case OpId::sum:
          return run_cols<T>(name, SumOp<T>{}, out, x);
        case OpId::mean:
          return run_cols<T>(name, MeanOp<T>{}, out, x);
        case OpId::norm:
          return run_cols<T>(name, NormOp<T>{}, out, x);
        default:
          break;
      }
    }
    HG_FAIL("cuda::reduce_cols: ", op_name(op), " is not a reduction for dtype ", dtype_of<T>());
  });
}

void reduce_rows(OpId op, const Tensor& out, const Tensor& x) {
  hg::detail::check_reduce_rows_buffers(out, x);
  const char* name = op_name(op).data();
  dispatch_compute_dtype(x.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case OpId::max:
        return run_rows<T>(name, ExtremumOp<T, true>{}, out, x);
      case OpId::min:
        return run_rows<T>(name, ExtremumOp<T, false>{}, out, x);
      default:
        break;
    }
    if constexpr (std::is_same_v<T, int64_t>) {
      if (op == OpId::sum) return run_rows<T>(name, SumOp<T>{}, out, x);
    } else if constexpr (!std::is_integral_v<T>) {
      switch (op) {
        case OpId::sum:
          return run_rows<T>(name, SumOp<T>{}, out, x);
        case OpId::mean:
          return run_rows<T>(name, MeanOp<T>{}, out, x);
        case OpId::norm:
          return run_rows<T>(name, NormOp<T>{}, out, x);
        default:
          break;
      }
    }
    HG_FAIL("cuda::reduce_rows: ", op_name(op), " is not a reduction for dtype ", dtype_of<T>());
  });
}

void argmax_rows(const Tensor& out, const Tensor& x) {
  HG_CHECK(x.dim() == 2 && (x.sizes()[1] <= 1 || x.strides()[1] == 1), "argmax_rows wants dense rows, got ",
            x.shape_str());
  HG_CHECK(out.is_contiguous() && out.dtype() == kI64 && out.numel() == x.sizes()[0],
            "argmax_rows: bad output ", out.shape_str());
  dispatch_compute_dtype(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    run_rows<T>("argmax", ArgmaxOp<T>{}, out, x);
  });
}

}  // namespace hg::cuda

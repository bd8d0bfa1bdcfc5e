// The row split shared by the softmax and cross-entropy kernels, and its
// launcher.
//
// Rows are contiguous; a row is handled by one warp (rows up to kWarpRowMax
// elements, kWarpRowsPerBlock rows per block) or by one whole block (longer
// rows, 256 to 1024 threads), and kernels loop grid-stride over rows (grid
// capped at kMaxGridRows). A row kernel is a template over kBlockPerRow; it
// reduces across the row's threads with row_allreduce<kBlockPerRow>
// (kernels/cuda/block_reduce.cuh), declares __launch_bounds__(kRowMaxThreads)
// (the block-per-row launch reaches 1024 threads), and is launched with
// launch_row_kernel, which picks the shape and the matching instantiation:
//
//   launch_row_kernel("softmax_forward_kernel", __FILE__, __LINE__,
//                     [](auto block_per_row) {
//                       return softmax_forward_kernel<T, kLog, decltype(block_per_row)::value>;
//                     },
//                     rows, cols, stream, x, y, rows, cols);
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/block_reduce.cuh"
#include "runtime/cuda/device_limits.h"
#include "kernels/cuda/launch.cuh"

namespace hg::cuda {

inline constexpr int kWarpRowMax = 1024;          // longest row handled by one warp
inline constexpr int kWarpRowsPerBlock = 4;       // warp-per-row blocks: 128 threads
inline constexpr int kRowMaxThreads = kMaxThreadsPerBlock;  // largest block-per-row launch
inline constexpr int64_t kMaxGridRows = 1 << 20;  // grid cap; kernels loop over the rest

// Which row this thread starts on, its index within the row, the row stride.
struct RowSplit {
  int64_t first_row;
  int64_t row_step;
  int lane;     // index of this thread among the row's threads
  int threads;  // threads per row
};

template <bool kBlockPerRow>
__device__ __forceinline__ RowSplit row_split() {
  if constexpr (kBlockPerRow) {
    return {static_cast<int64_t>(blockIdx.x), static_cast<int64_t>(gridDim.x),
            static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
  } else {
    const int warps = blockDim.x / kWarpSize;
    return {static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / kWarpSize,
            static_cast<int64_t>(gridDim.x) * warps, static_cast<int>(threadIdx.x % kWarpSize),
            kWarpSize};
  }
}

// The launch shape for rows of `cols` elements: warp rows (kWarpRowsPerBlock
// per block) up to kWarpRowMax, else one block per row, 256-1024 threads.
struct RowLaunch {
  bool block_per_row;
  dim3 grid;
  dim3 block;
};

inline RowLaunch row_launch(int64_t rows, int64_t cols) {
  if (cols <= kWarpRowMax) {
    const int64_t blocks = (rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
    return {false, dim3(static_cast<unsigned>(std::min(blocks, kMaxGridRows))),
            dim3(kWarpRowsPerBlock * kWarpSize)};
  }
  const int threads = cols <= 4096 ? kBlockThreads : (cols <= 16384 ? 2 * kBlockThreads : kRowMaxThreads);
  return {true, dim3(static_cast<unsigned>(std::min(rows, kMaxGridRows))), dim3(threads)};
}

// Launches the row kernel for rows x cols: `pick(std::bool_constant<B>)`
// returns the kernel instantiated for kBlockPerRow = B.
template <typename Pick, typename... Args>
void launch_row_kernel(const char* name, const char* file, int line, Pick pick, int64_t rows, int64_t cols,
                       cudaStream_t stream, Args&&... args) {
  const RowLaunch l = row_launch(rows, cols);
  with_bool(l.block_per_row, [&](auto block_per_row) {
    launch_kernel(name, file, line, pick(block_per_row), l.grid, l.block, 0, stream, std::forward<Args>(args)...);
  });
}

}  // namespace hg::cuda

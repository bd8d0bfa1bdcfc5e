// Row-wise reductions shared by the softmax and cross-entropy kernels.
//
// Rows are contiguous; a row is handled by one warp (rows up to kWarpRowMax
// elements, kWarpRowsPerBlock rows per block) or by one whole block (longer
// rows), and kernels loop grid-stride over rows (grid capped at kMaxGridRows).
// row_allreduce combines a per-thread value over the row's threads:
//   warp rows:  an xor butterfly of __shfl_xor_sync (a+b == b+a bit for bit,
//               so every lane ends with the same value);
//   block rows: then lane 0 of each warp posts to `partials` (shared memory,
//               >= blockDim.x / 32 entries) and every thread folds them in warp
//               order: a fixed order, so results are deterministic (no atomics).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/device_math.cuh"

namespace hg::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr int kWarpRowMax = 1024;         // longest row handled by one warp
inline constexpr int kWarpRowsPerBlock = 4;      // warp-per-row blocks: 128 threads
inline constexpr int kMaxWarpsPerBlock = 32;     // 1024 threads
inline constexpr int64_t kMaxGridRows = 1 << 20;  // grid cap; kernels loop over the rest

// Scalar lanes exchange; reductions over structs add their own overload next
// to the struct (found by argument-dependent lookup).
template <typename A>
__device__ __forceinline__ A shuffle_xor(A v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}

template <bool kBlockPerRow, typename V, typename Merge>
__device__ __forceinline__ V row_allreduce(V value, Merge merge_fn, V* partials) {
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2) {
    value = merge_fn(value, shuffle_xor(value, lane_mask));
  }
  if constexpr (kBlockPerRow) {
    const int warp_id = threadIdx.x / kWarpSize, lane_id = threadIdx.x % kWarpSize;
    const int num_warps = blockDim.x / kWarpSize;
    if (lane_id == 0) partials[warp_id] = value;
    __syncthreads();
    value = partials[0];
    for (int w = 1; w < num_warps; ++w) value = merge_fn(value, partials[w]);
    __syncthreads();  // partials may be reused by the next reduction
  }
  return value;
}

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
  const int threads = cols <= 4096 ? 256 : (cols <= 16384 ? 512 : 1024);
  return {true, dim3(static_cast<unsigned>(std::min(rows, kMaxGridRows))), dim3(threads)};
}

}  // namespace hg::cuda

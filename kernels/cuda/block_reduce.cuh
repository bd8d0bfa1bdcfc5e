// Warp and block all-reductions: the one reduction system of the CUDA
// kernels (row reductions, softmax, cross-entropy, gradient norm). Plain
// building blocks in the manner of CUB's WarpReduce / BlockReduce, with a
// fixed combination order so results are bit-deterministic (no atomics).
//
//   warp_allreduce(v, merge)
//     an xor butterfly of __shfl_xor_sync over the 32 lanes (masks 16, 8, 4,
//     2, 1): 5 shuffles, registers only. Lane i combines merge(v_i, v_{i^m});
//     with a commutative merge (a + b == b + a bit for bit, max, the
//     online-softmax merge, argmax's total order) every lane ends with the
//     same value. All 32 lanes of the warp must call it.
//   block_allreduce(v, merge, partials)
//     warp_allreduce, then lane 0 of warp w posts its value to partials[w]
//     (shared memory, >= blockDim.x / 32 entries), a barrier, and every
//     thread folds partials[0], partials[1], ... in warp order; a second
//     barrier lets the caller reuse `partials` at once. Every thread of the
//     block must call it (it has barriers); blockDim.x a multiple of 32.
//   row_allreduce<kBlockPerRow>(v, merge, partials)
//     the one a row kernel wants: block_allreduce when a whole block owns the
//     row, warp_allreduce when a warp does (kernels/cuda/row_reduce.cuh).
//
// Value types: any type __shfl_xor_sync takes (float, double, int, long long,
// ...) through shuffle_xor below; a struct (a running (max, sum) pair, an
// (value, index) candidate) adds a shuffle_xor overload next to itself, found
// by argument-dependent lookup.
//
// Cost: 5 shuffles per warp; a block adds 2 barriers and blockDim.x / 32
// shared-memory reads per thread (8 for 256 threads, 32 for 1024).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/device_limits.h"

namespace hg::cuda {

inline constexpr unsigned kFullWarpMask = 0xffffffffu;

template <typename A>
__device__ __forceinline__ A shuffle_xor(A v, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}
// int64_t is `long` on Linux; spell the 64-bit shuffle with the overload every
// nvcc version has.
__device__ __forceinline__ int64_t shuffle_xor(int64_t v, int lane_mask) {
  return static_cast<int64_t>(__shfl_xor_sync(kFullWarpMask, static_cast<long long>(v), lane_mask));
}

template <typename V, typename Merge>
__device__ __forceinline__ V warp_allreduce(V value, Merge merge_fn) {
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2) {
    value = merge_fn(value, shuffle_xor(value, lane_mask));
  }
  return value;
}

template <typename V, typename Merge>
__device__ __forceinline__ V block_allreduce(V value, Merge merge_fn, V* partials) {
  value = warp_allreduce(value, merge_fn);
  const int warp_id = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane_id = static_cast<int>(threadIdx.x) % kWarpSize;
  const int num_warps = static_cast<int>(blockDim.x) / kWarpSize;
  if (lane_id == 0) partials[warp_id] = value;  // shared
  __syncthreads();
  value = partials[0];
  for (int w = 1; w < num_warps; ++w) value = merge_fn(value, partials[w]);
  __syncthreads();  // partials may be reused by the next reduction
  return value;
}

template <bool kBlockPerRow, typename V, typename Merge>
__device__ __forceinline__ V row_allreduce(V value, Merge merge_fn, V* partials) {
  if constexpr (kBlockPerRow) {
    return block_allreduce(value, merge_fn, partials);
  } else {
    (void)partials;
    return warp_allreduce(value, merge_fn);
  }
}

}  // namespace hg::cuda

// The online-softmax state shared by the softmax and cross-entropy kernels:
// a running (max, sum of exp(x - max)) pair, folded one element at a time and
// merged across threads (row_allreduce, kernels/cuda/row_reduce.cuh), so a row
// is read once for both statistics.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/device_math.cuh"

namespace hg::cuda {

// A running (max, sum of exp(x - max)) pair: the online-softmax state.
template <typename A>
struct MaxSum {
  A m;  // running max (NaN once any NaN was seen)
  A s;  // sum of exp(x - m) over the elements seen
};

// Adds one element. exp(-inf - -inf) is NaN, so -inf elements add 0 explicitly
// (an all -inf row then ends with s = 0 and a NaN result, as in PyTorch); a
// +inf element adds exp(inf - inf) = NaN, as the two-pass formula does.
template <typename A>
__device__ __forceinline__ MaxSum<A> online_add(MaxSum<A> st, A x) {
  if (x > st.m) {
    st.s = st.s * dmath::exp(st.m - x) + (x == A(INFINITY) ? A(NAN) : A(1));
    st.m = x;
  } else if (x != x) {
    st.m = x;
    st.s = x;
  } else if (x != A(-INFINITY)) {
    st.s += dmath::exp(x - st.m);
  }
  return st;
}

template <typename A>
__device__ __forceinline__ MaxSum<A> merge(MaxSum<A> a, MaxSum<A> b) {
  const A m = max_nan(a.m, b.m);
  if (m == A(-INFINITY)) return {m, A(0)};  // both empty or all -inf
  const A sa = a.m == A(-INFINITY) ? A(0) : a.s * dmath::exp(a.m - m);
  const A sb = b.m == A(-INFINITY) ? A(0) : b.s * dmath::exp(b.m - m);
  return {m, sa + sb};
}

// Found by argument-dependent lookup from row_allreduce (kernels/cuda/block_reduce.cuh).
template <typename A>
__device__ __forceinline__ MaxSum<A> shuffle_xor(MaxSum<A> v, int lane_mask) {
  return {::hg::cuda::shuffle_xor(v.m, lane_mask), ::hg::cuda::shuffle_xor(v.s, lane_mask)};
}

}  // namespace hg::cuda

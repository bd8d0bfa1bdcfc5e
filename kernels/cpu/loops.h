// CPU elementwise loop helper: applies fn to every element of N strided inputs
// and one strided output of the same sizes, so kernels read as math.
//
//   cpu::map<float>(out, [](float a, float b) { return a + b; }, a, b);
//
// Contiguous operands take a flat (OpenMP-parallel) loop; anything else walks
// an odometer over the dims with the innermost dim as a plain strided loop.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/scalar_math.h"

namespace hg::cpu {

// acc_t<T> and the NaN-propagating max_nan/min_nan are shared with the CUDA
// kernels (kernels/scalar_math.h).
using ::hg::acc_t;
using ::hg::max_nan;
using ::hg::min_nan;

// Below this many elements a parallel region costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// body(i) for i in [0, n): on the OpenMP pool when `parallel` (the caller's
// grain test), else as a plain loop. `#pragma omp parallel for if (false)`
// still enters libgomp (GOMP_parallel with one thread, its barrier and
// bookkeeping), so every CPU kernel decides before the pragma, here.
template <typename Body>
void parallel_for(int64_t n, bool parallel, const Body& body) {
  if (!parallel || n < 2) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// The OR of body(i) over [0, n), every body(i) run (it may write), with the
// same decision as parallel_for.
template <typename Body>
bool parallel_any(int64_t n, bool parallel, const Body& body) {
  bool any = false;
  if (!parallel || n < 2) {
    for (int64_t i = 0; i < n; ++i) any = body(i) || any;
    return any;
  }
#pragma omp parallel for schedule(static) reduction(|| : any)
  for (int64_t i = 0; i < n; ++i) any = body(i) || any;
  return any;
}

// Note [16-bit kernels through f32 on the CPU]
// A 16-bit row kernel reads each value several times, and in this
// baseline-x86-64 build every read of an f16 is a software conversion (f16
// layer_norm ran at 0.03x PyTorch's speed). Such a kernel can run instead as
// its f32 version on copies widened by the vectorised casts, its outputs
// rounded back once (RNE) by the same casts: softmax on the scalar math path
// (HG_CPU_MATH=scalar) does. The vector softmax converts in registers
// (kernels/cpu/vec_math.h) and the norms widen row by row (Note [16-bit norm
// rows on the CPU] in kernels/norm/norm_cpu.cpp), with the same results. The 16-bit
// kernels compute exactly that (widen every read to float, compute in float,
// round once on store), so the results are bit-identical (tests "16-bit
// softmax rows are bit-identical to the f32 path" and "16-bit norms are
// bit-identical to the f32 kernels"); the cost is an f32 copy of the inputs
// and outputs for the call.
// t widened to f32 (undefined stays undefined), and an f32 buffer shaped like t.
inline Tensor widened_f32(const Tensor& t) { return t.defined() ? t.to(kF32) : Tensor(); }
inline Tensor f32_buffer_like(const Tensor& t) {
  return t.defined() ? empty(t.sizes(), {.dtype = kF32, .device = t.device()}) : Tensor();
}

template <typename Out, typename... In, typename Fn, typename... Tensors>
void map_typed(const Tensor& out, Fn&& fn, const Tensors&... ins) {
  static_assert(sizeof...(In) == sizeof...(Tensors), "one C++ type per input tensor");
  const int64_t n = out.numel();
  if (n == 0) return;
  Out* o = static_cast<Out*>(out.data_ptr());
  std::tuple<const In*...> in_ptrs{static_cast<const In*>(ins.data_ptr())...};
  const bool flat = out.is_contiguous() && (... && (ins.is_contiguous() && ins.sizes() == out.sizes()));
  if (flat) {
    // A plain loop below the grain: `omp parallel for if (false)` still
    // enters libgomp (GOMP_parallel, ~1/4 of a 1-element op's host cost).
    if (n < kParallelGrain) {
      for (int64_t i = 0; i < n; ++i) {
        o[i] = std::apply([&](const In*... p) { return fn(p[i]...); }, in_ptrs);
      }
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      o[i] = std::apply([&](const In*... p) { return fn(p[i]...); }, in_ptrs);
    }
    return;
  }
  const int64_t rank = out.dim();
  if (rank == 0) {
    o[0] = std::apply([&](const In*... p) { return fn(p[0]...); }, in_ptrs);
    return;
  }
  constexpr size_t kIn = sizeof...(In);
  const std::array<const Shape*, kIn> in_strides{&ins.strides()...};
  const Shape& sizes = out.sizes();
  const int64_t inner = sizes[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t out_base = 0;
  std::array<int64_t, kIn> in_base{};
  std::array<int64_t, kIn> in_inner{};
  for (size_t k = 0; k < kIn; ++k) in_inner[k] = (*in_strides[k])[rank - 1];
  const int64_t out_inner = out.strides()[rank - 1];
  while (true) {
    for (int64_t i = 0; i < inner; ++i) {
      o[out_base + i * out_inner] = [&]<size_t... K>(std::index_sequence<K...>) {
        return fn(std::get<K>(in_ptrs)[in_base[K] + i * in_inner[K]]...);
      }(std::index_sequence_for<In...>{});
    }
    int64_t d = rank - 2;
    for (; d >= 0; --d) {  // odometer over the outer dims
      ++index[d];
      out_base += out.strides()[d];
      for (size_t k = 0; k < kIn; ++k) in_base[k] += (*in_strides[k])[d];
      if (index[d] < sizes[d]) break;
      out_base -= index[d] * out.strides()[d];
      for (size_t k = 0; k < kIn; ++k) in_base[k] -= index[d] * (*in_strides[k])[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// All operands share one C++ type T.
template <typename T, typename Fn, typename... Tensors>
void map(const Tensor& out, Fn&& fn, const Tensors&... ins) {
  map_typed<T, std::conditional_t<true, T, Tensors>...>(out, std::forward<Fn>(fn), ins...);
}

}  // namespace hg::cpu

// CUDA elementwise ops, in three files that nvcc compiles in parallel (each
// instantiates map_kernel's paths for every functor and dtype it covers):
//   elementwise.cu         the copy/cast/fill kernels core/ uses for every
//                          device copy, and the launch-path counters
//   elementwise_unary.cu   unary and unary backward
//   elementwise_binary.cu  binary (+ scalar) and where
// Every family is a functor run by map_kernel (kernels/elementwise/elementwise.cuh:
// split, launch shape and bytes moved are described there).
//
// The math of every op is its functor in kernels/elementwise/elementwise_functors.h and
// the dispatch is kernels/elementwise/elementwise_engine.h, shared with the CPU reference
// (kernels/elementwise/elementwise_cpu.cpp); this file plugs in launch_map.
//
// Precision contract: 16-bit inputs are widened to float, the math runs in
// acc_t (float; double for f64), one rounding on store. NaN propagates through
// every floating op (relu, maximum, minimum and clamp included).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "core/copy.h"
#include "kernels/backend.h"
#include "kernels/elementwise/elementwise.cuh"
#include "kernels/elementwise/map_stats.h"

namespace hg::cuda {

namespace {

template <typename To, typename From>
struct CastOp {
  __device__ __forceinline__ To operator()(From v) const { return convert_value<To>(v); }
};

template <typename T>
struct FillOp {
  T value;
  __device__ __forceinline__ T operator()() const { return value; }
};

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  dispatch_dtype(dst.dtype(), [&](auto dst_tag) {
    using To = decltype(dst_tag);
    dispatch_dtype(src.dtype(), [&](auto src_tag) {
      using From = decltype(src_tag);
      launch_map<To, From>("cast", CastOp<To, From>{}, dst, src);
    });
  });
}

void fill(const Tensor& dst, double value) {
  dispatch_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_map<T>("fill", FillOp<T>{convert_value<T>(value)}, dst);
  });
}

// ---- launch counters (kernels/elementwise/map_stats.h) ----

namespace {

std::atomic<bool> g_force_index64{false};

struct AtomicStats {
  std::array<std::atomic<int64_t>, kNumMapPaths> launches{}, elements{}, bytes{};
};

AtomicStats& atomic_stats() {
  static AtomicStats stats;
  return stats;
}

template <int N>
MapPath path_for(const std::vector<const Tensor*>& list) {
  std::array<const Tensor*, N> ops{};
  std::copy(list.begin(), list.end(), ops.begin());
  size_t widest = 0;
  bool contiguous = true;
  for (const Tensor* t : ops) {
    widest = std::max(widest, dtype_size(t->dtype()));
    contiguous = contiguous && t->is_contiguous() && aligned16(t->data_ptr());
  }
  if (contiguous) return MapPath::kContiguous;
  const int vec = widest >= 16 ? 1 : static_cast<int>(16 / widest);
  return plan_map<N>(collapse_dims<N>(ops), ops, ops[0]->numel(), vec);
}

}  // namespace

void count_map_launch(MapPath path, int64_t elements, int64_t bytes) {
  AtomicStats& s = atomic_stats();
  const auto p = static_cast<size_t>(path);
  s.launches[p].fetch_add(1, std::memory_order_relaxed);
  s.elements[p].fetch_add(elements, std::memory_order_relaxed);
  s.bytes[p].fetch_add(bytes, std::memory_order_relaxed);
}

MapStats map_stats() {
  AtomicStats& s = atomic_stats();
  MapStats out;
  for (size_t p = 0; p < static_cast<size_t>(kNumMapPaths); ++p) {
    out.launches[p] = s.launches[p].load(std::memory_order_relaxed);
    out.elements[p] = s.elements[p].load(std::memory_order_relaxed);
    out.bytes[p] = s.bytes[p].load(std::memory_order_relaxed);
  }
  return out;
}

void reset_map_stats() {
  AtomicStats& s = atomic_stats();
  for (size_t p = 0; p < static_cast<size_t>(kNumMapPaths); ++p) {
    s.launches[p].store(0, std::memory_order_relaxed);
    s.elements[p].store(0, std::memory_order_relaxed);
    s.bytes[p].store(0, std::memory_order_relaxed);
  }
}

void force_map_index64(bool on) { g_force_index64.store(on, std::memory_order_relaxed); }
bool map_index64_forced() { return g_force_index64.load(std::memory_order_relaxed); }

const char* map_path_name(MapPath path) {
  switch (path) {
    case MapPath::kContiguous:
      return "contiguous";
    case MapPath::kVectorRuns:
      return "vector-runs";
    case MapPath::kTranspose:
      return "transpose";
    case MapPath::kStrided32:
      return "strided32";
    case MapPath::kStrided64:
      return "strided64";
  }
  return "?";
}

MapPath map_path_for(const Tensor& out, const std::vector<Tensor>& ins) {
  HG_CHECK(out.defined() && ins.size() <= 3, "map_path_for: an output and at most 3 inputs");
  std::vector<const Tensor*> list{&out};
  for (const Tensor& t : ins) {
    HG_CHECK(t.defined() && t.sizes() == out.sizes(), "map_path_for: inputs must have the output's sizes (",
             out.shape_str(), "); expand them first");
    list.push_back(&t);
  }
  switch (list.size()) {
    case 1:
      return path_for<1>(list);
    case 2:
      return path_for<2>(list);
    case 3:
      return path_for<3>(list);
    default:
      return path_for<4>(list);
  }
}

namespace {
// Core's copy_/fill_/contiguous/to(dtype) on CUDA tensors use these kernels
// (Note [Copy kernels] in core/copy.h).
const bool kRegistered = [] {
  register_copy_kernel(DeviceType::CUDA, &copy);
  register_fill_kernel(DeviceType::CUDA, &fill);
  return true;
}();
}  // namespace

}  // namespace hg::cuda

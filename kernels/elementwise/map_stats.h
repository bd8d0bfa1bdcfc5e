// Host-side counters of the CUDA elementwise engine (kernels/elementwise/elementwise.cuh):
// per launch path, how many launches and how many elements and bytes they
// moved. A measuring tool for the per-step tables (docs/benchmarks.md) and the
// tests that check which path a layout takes; counting is a few relaxed
// atomic adds per launch, always on.
//
//   hg::cuda::reset_map_stats();
//   ... a training step ...
//   const hg::cuda::MapStats s = hg::cuda::map_stats();
//   s.launches[static_cast<int>(hg::cuda::MapPath::kStrided32)]
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace hg::cuda {

enum class MapPath : int {
  kContiguous,  // every operand contiguous and aligned: 128-bit vectors
  kVectorRuns,  // strided, but the innermost dim contiguous: 128-bit runs, 32-bit fast-divisor offsets
  kTranspose,   // one input whose last two (collapsed) dims are swapped: 32x32 shared-memory tiles
  kStrided32,   // any other layout: 32-bit fast-divisor offsets, 4 elements per thread
  kStrided64,   // offsets or sizes past 2^31: 64-bit div/mod per dim, 1 element per thread
};
inline constexpr int kNumMapPaths = 5;

const char* map_path_name(MapPath path);

struct MapStats {
  std::array<int64_t, kNumMapPaths> launches{};
  std::array<int64_t, kNumMapPaths> elements{};
  std::array<int64_t, kNumMapPaths> bytes{};  // bytes read + written, as declared by the launch
};

MapStats map_stats();
void reset_map_stats();

// The path launch_map takes for out = op(ins...) with these layouts, with
// operand element sizes taken from the tensors' dtypes (out first). Pure
// host-side layout logic (no launch, no data access), so a test can ask about
// a broadcast view of 2^32 virtual elements without allocating it.
MapPath map_path_for(const Tensor& out, const std::vector<Tensor>& ins);

// Tests: every strided launch takes the 64-bit fallback while set (the path
// otherwise only layouts past 2^31 elements reach).
void force_map_index64(bool on);
bool map_index64_forced();

}  // namespace hg::cuda

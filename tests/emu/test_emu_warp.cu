// cuda-emu: warp intrinsics (shuffles, votes, match, reduce) against their CUDA
// definitions, including partial warps and exited lanes.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "tests/emu/emu_test_util.h"

using hg::emu::test::DeviceBuffer;

namespace {

// out[k * n + t]: the k-th intrinsic's result for thread t.
__global__ void warp_ops_kernel(unsigned* out, int n) {
  const unsigned t = threadIdx.x, lane = t % 32;
  const unsigned full = 0xffffffffu;
  unsigned* o = out + t;
  o[0 * n] = __shfl_sync(full, t * 10, 3);            // broadcast lane 3 of the warp
  o[1 * n] = __shfl_sync(full, t, lane + 1, 8);        // rotate within 8-lane segments
  o[2 * n] = __shfl_down_sync(full, t, 4, 16);         // past the segment end: own value
  o[3 * n] = __shfl_xor_sync(full, t, 5);              // butterfly
  o[4 * n] = __ballot_sync(full, lane % 3 == 0);
  o[5 * n] = __any_sync(full, lane == 31);
  o[6 * n] = __all_sync(full, lane < 31);
  o[7 * n] = __match_any_sync(full, lane / 4);
  o[8 * n] = __reduce_add_sync(full, lane);
  o[9 * n] = static_cast<unsigned>(__reduce_max_sync(full, static_cast<int>(lane) - 16));
  o[10 * n] = __activemask();
  const double d = __shfl_sync(full, static_cast<double>(t) + 0.5, 0);  // 64-bit values
  o[11 * n] = static_cast<unsigned>(d * 2);
  __syncwarp();
}

// Lanes >= 20 exit first; the rest shuffle with the full mask (exited lanes
// are excused) and read lane 25, which has exited: they get their own value.
__global__ void exited_lanes_kernel(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  if (lane >= 20) return;
  out[threadIdx.x] = __shfl_sync(0xffffffffu, lane + 100, lane < 10 ? 25 : 0);
}

// Half the warp shuffles among itself with a partial mask.
__global__ void partial_mask_kernel(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  out[threadIdx.x] = __shfl_xor_sync(mask, lane, 1) + (lane < 16 ? __ballot_sync(mask, 1) : 0u);
}

}  // namespace

TEST_CASE("emu: warp shuffles, votes, match and reduce", "[emu][warp]") {
  for (int n : {64, 48}) {  // 48: the second warp is partial (16 lanes)
    DeviceBuffer<unsigned> out(12 * n);
    HG_LAUNCH(warp_ops_kernel, dim3(1), dim3(n), 0, nullptr, out.get(), n);
    const std::vector<unsigned> r = out.download();
    for (int t = 0; t < n; ++t) {
      INFO("n " << n << " thread " << t);
      const unsigned lane = t % 32, base = t - lane;
      const unsigned lanes = std::min(32u, static_cast<unsigned>(n) - base);
      const unsigned existing = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
      CHECK(r[0 * n + t] == (base + 3) * 10);
      const unsigned rot_src = (lane & ~7u) + ((lane + 1) & 7u);
      CHECK(r[1 * n + t] == (rot_src < lanes ? base + rot_src : static_cast<unsigned>(t)));
      const unsigned down_src = lane + 4;
      CHECK(r[2 * n + t] == ((down_src / 16 == lane / 16 && down_src < lanes) ? base + down_src : t));
      const unsigned xor_src = lane ^ 5u;
      CHECK(r[3 * n + t] == (xor_src < lanes ? base + xor_src : static_cast<unsigned>(t)));
      CHECK(r[4 * n + t] == (0x49249249u & existing));
      CHECK(r[5 * n + t] == (lanes == 32 ? 1u : 0u));
      CHECK(r[6 * n + t] == (lanes == 32 ? 0u : 1u));
      CHECK(r[7 * n + t] == ((0xfu << (lane / 4 * 4)) & existing));
      unsigned sum = 0;
      for (unsigned j = 0; j < lanes; ++j) sum += j;
      CHECK(r[8 * n + t] == sum);
      CHECK(static_cast<int>(r[9 * n + t]) == static_cast<int>(lanes) - 1 - 16);
      CHECK(r[10 * n + t] == existing);
      CHECK(r[11 * n + t] == 2 * base + 1);
    }
  }
}

TEST_CASE("emu: exited lanes are excused from a full-mask shuffle", "[emu][warp]") {
  DeviceBuffer<unsigned> out(32);
  HG_LAUNCH(exited_lanes_kernel, dim3(1), dim3(32), 0, nullptr, out.get());
  const std::vector<unsigned> r = out.download();
  for (unsigned lane = 0; lane < 20; ++lane) CHECK(r[lane] == (lane < 10 ? lane + 100 : 100u));
}

TEST_CASE("emu: two half-warps shuffle independently with partial masks", "[emu][warp]") {
  DeviceBuffer<unsigned> out(32);
  HG_LAUNCH(partial_mask_kernel, dim3(1), dim3(32), 0, nullptr, out.get());
  const std::vector<unsigned> r = out.download();
  for (unsigned lane = 0; lane < 32; ++lane) CHECK(r[lane] == (lane ^ 1u) + (lane < 16 ? 0xffffu : 0u));
}

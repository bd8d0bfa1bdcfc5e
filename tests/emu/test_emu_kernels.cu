// cuda-emu: kernels that use shared memory, barriers, warp shuffles and atomics
// the way halfgrad's kernels do, each checked against a CPU reference.
#include <catch2/catch.hpp>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/emu/emu_test_util.h"

using hg::emu::test::DeviceBuffer;
using hg::emu::test::ScopedSeed;

namespace {

constexpr int kBlock = 256;

// Block sum of `in` into `out` (one float per block): warp shuffles reduce 32
// values each, shared memory carries the 8 warp sums, warp 0 reduces those.
__device__ float block_reduce_sum(float v) {
  __shared__ float warp_sums[32];
  const int lane_id = threadIdx.x % warpSize, warp_id = threadIdx.x / warpSize;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane_id == 0) warp_sums[warp_id] = v;
  __syncthreads();
  const int n_warps = (blockDim.x + warpSize - 1) / warpSize;
  v = lane_id < n_warps ? warp_sums[lane_id] : 0.0f;
  if (warp_id == 0) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

__global__ void reduce_kernel(float* out, float* total, const float* in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float sum = block_reduce_sum(i < n ? in[i] : 0.0f);
  if (threadIdx.x == 0) {
    out[blockIdx.x] = sum;
    atomicAdd(total, sum);
  }
}

// Inclusive scan of one block of up to 1024 ints: Hillis-Steele in a shared
// double buffer (log2(n) steps, one barrier each).
__global__ void scan_kernel(int* out, const int* in, int n) {
  __shared__ int buf[2][1024];
  const int t = threadIdx.x;
  int src = 0;
  buf[src][t] = t < n ? in[t] : 0;
  __syncthreads();
  for (int offset = 1; offset < static_cast<int>(blockDim.x); offset *= 2) {
    buf[1 - src][t] = buf[src][t] + (t >= offset ? buf[src][t - offset] : 0);
    src = 1 - src;
    __syncthreads();
  }
  if (t < n) out[t] = buf[src][t];
}

// Warp-level inclusive scan with __shfl_up_sync, segments of `width` lanes.
__global__ void warp_scan_kernel(int* out, const int* in, int width) {
  const int t = threadIdx.x;
  int v = in[t];
  for (int offset = 1; offset < width; offset *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, v, offset, width);
    if ((t % width) >= offset) v += up;
  }
  out[t] = v;
}

// 64-bin histogram: per-block shared bins with shared atomics, then one global
// atomicAdd per bin and block.
constexpr int kBins = 64;
__global__ void histogram_kernel(unsigned* bins, const int* values, int n) {
  __shared__ unsigned local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&local[values[i] % kBins], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

// Reverses each block's slice through dynamic shared memory.
__global__ void reverse_kernel(float* out, const float* in) {
  float* tile = hg::cuda::dynamic_shared<float>();
  const int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[blockDim.x - 1 - t];
}

// Records every thread's coordinates in a 3-D launch.
__global__ void coords_kernel(uint4* out) {
  const unsigned block_linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread_linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned block_threads = blockDim.x * blockDim.y * blockDim.z;
  out[block_linear * block_threads + thread_linear] =
      make_uint4(threadIdx.x | threadIdx.y << 8 | threadIdx.z << 16,
                 blockIdx.x | blockIdx.y << 8 | blockIdx.z << 16, blockDim.x * 10000 + blockDim.y * 100 + blockDim.z,
                 gridDim.x * 10000 + gridDim.y * 100 + gridDim.z);
}

// Reads shared memory; only block 0 writes it first.
__global__ void poison_kernel(float* out_static, float* out_dynamic) {
  __shared__ float tile[kBlock];
  float* dyn = hg::cuda::dynamic_shared<float>();
  if (blockIdx.x == 0) {
    tile[threadIdx.x] = 1.0f;
    dyn[threadIdx.x] = 2.0f;
  }
  __syncthreads();
  out_static[blockIdx.x * blockDim.x + threadIdx.x] = tile[threadIdx.x];
  out_dynamic[blockIdx.x * blockDim.x + threadIdx.x] = dyn[threadIdx.x];
}

// 128-bit loads: 8 halves at a time through uint4, like the vectorised kernels.
__global__ void vector_copy_kernel(uint4* out, const uint4* in, int n_vec) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n_vec) out[i] = reinterpret_cast<const uint4*>(in)[i];
}

}  // namespace

TEST_CASE("emu: block reduction with shared memory and warp shuffles", "[emu]") {
  for (int n : {1, 255, 256, 1000, 4096 + 17}) {
    std::vector<float> host(n);
    for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 7 - 3);  // exact in float
    const int blocks = (n + kBlock - 1) / kBlock;
    DeviceBuffer<float> in(host), out(blocks), total(1);
    total.fill_zero();
    HG_LAUNCH(reduce_kernel, dim3(blocks), dim3(kBlock), 0, nullptr, out.get(), total.get(), in.get(), n);
    const std::vector<float> sums = out.download();
    for (int b = 0; b < blocks; ++b) {
      float expected = 0;
      for (int i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) expected += host[i];
      REQUIRE(sums[b] == expected);
    }
    REQUIRE(total.download()[0] == std::accumulate(host.begin(), host.end(), 0.0f));
  }
}

TEST_CASE("emu: block reduction is correct for several schedules", "[emu]") {
  std::vector<float> host(3000, 1.0f);
  DeviceBuffer<float> in(host), out(12), total(1);
  for (uint64_t seed : {0ull, 1ull, 2ull, 3ull, 12345ull}) {
    ScopedSeed scoped(seed);
    total.fill_zero();
    HG_LAUNCH(reduce_kernel, dim3(12), dim3(kBlock), 0, nullptr, out.get(), total.get(), in.get(), 3000);
    REQUIRE(total.download()[0] == 3000.0f);
  }
}

TEST_CASE("emu: inclusive scan in shared memory", "[emu]") {
  for (int n : {1, 33, 512, 1024}) {
    std::vector<int> host(n);
    for (int i = 0; i < n; ++i) host[i] = (i * 37) % 11 - 5;
    std::vector<int> expected(n);
    std::partial_sum(host.begin(), host.end(), expected.begin());
    DeviceBuffer<int> in(host), out(n);
    const int threads = 1 << static_cast<int>(std::ceil(std::log2(std::max(n, 2))));
    HG_LAUNCH(scan_kernel, dim3(1), dim3(threads), 0, nullptr, out.get(), in.get(), n);
    REQUIRE(out.download() == expected);
  }
}

TEST_CASE("emu: warp scan with __shfl_up_sync and widths", "[emu]") {
  std::vector<int> host(64);
  std::iota(host.begin(), host.end(), 1);
  DeviceBuffer<int> in(host), out(64);
  for (int width : {2, 4, 8, 16, 32}) {
    HG_LAUNCH(warp_scan_kernel, dim3(1), dim3(64), 0, nullptr, out.get(), in.get(), width);
    const std::vector<int> got = out.download();
    for (int t = 0; t < 64; ++t) {
      int expected = 0;
      for (int j = t - t % width; j <= t; ++j) expected += host[j];
      REQUIRE(got[t] == expected);
    }
  }
}

TEST_CASE("emu: histogram with shared and global atomics", "[emu]") {
  const int n = 10000;
  std::vector<int> host(n);
  std::vector<unsigned> expected(kBins, 0);
  for (int i = 0; i < n; ++i) {
    host[i] = (i * 7919) % 1000;
    ++expected[host[i] % kBins];
  }
  DeviceBuffer<int> values(host);
  DeviceBuffer<unsigned> bins(kBins);
  bins.fill_zero();
  HG_LAUNCH(histogram_kernel, dim3(7), dim3(128), 0, nullptr, bins.get(), values.get(), n);
  REQUIRE(bins.download() == expected);
}

TEST_CASE("emu: dynamic shared memory sized by the launch", "[emu]") {
  for (int block : {32, 100, 1024}) {
    const int blocks = 3;
    std::vector<float> host(block * blocks);
    std::iota(host.begin(), host.end(), 0.0f);
    DeviceBuffer<float> in(host), out(host.size());
    HG_LAUNCH(reverse_kernel, dim3(blocks), dim3(block), block * sizeof(float), nullptr, out.get(), in.get());
    const std::vector<float> got = out.download();
    for (int b = 0; b < blocks; ++b) {
      for (int t = 0; t < block; ++t) REQUIRE(got[b * block + t] == host[b * block + block - 1 - t]);
    }
  }
}

TEST_CASE("emu: built-in variables in a 3-D launch", "[emu]") {
  const dim3 grid(3, 2, 2), block(8, 4, 2);
  const int n = 3 * 2 * 2 * 8 * 4 * 2;
  DeviceBuffer<uint4> out(n);
  HG_LAUNCH(coords_kernel, grid, block, 0, nullptr, out.get());
  const std::vector<uint4> got = out.download();
  int i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 4; ++ty)
            for (unsigned tx = 0; tx < 8; ++tx, ++i) {
              REQUIRE(got[i].x == (tx | ty << 8 | tz << 16));
              REQUIRE(got[i].y == (bx | by << 8 | bz << 16));
              REQUIRE(got[i].z == 80402u);
              REQUIRE(got[i].w == 30202u);
            }
}

TEST_CASE("emu: shared memory is poisoned (NaN) at the start of every block", "[emu]") {
  DeviceBuffer<float> out_static(2 * kBlock), out_dynamic(2 * kBlock);
  HG_LAUNCH(poison_kernel, dim3(2), dim3(kBlock), kBlock * sizeof(float), nullptr, out_static.get(),
            out_dynamic.get());
  const std::vector<float> s = out_static.download(), d = out_dynamic.download();
  for (int t = 0; t < kBlock; ++t) {
    REQUIRE(s[t] == 1.0f);  // block 0 wrote before reading
    REQUIRE(d[t] == 2.0f);
    REQUIRE(std::isnan(s[kBlock + t]));  // block 1 sees fresh (poisoned) memory, not block 0's
    REQUIRE(std::isnan(d[kBlock + t]));
  }
}

TEST_CASE("emu: 128-bit vector loads keep CUDA's alignment", "[emu]") {
  static_assert(alignof(uint4) == 16 && alignof(float4) == 16 && sizeof(half2) == 4);
  const int n_vec = 300;
  std::vector<uint4> host(n_vec);
  for (int i = 0; i < n_vec; ++i) host[i] = make_uint4(i, 2 * i, 3 * i, 4 * i);
  DeviceBuffer<uint4> in(host), out(n_vec);
  HG_LAUNCH(vector_copy_kernel, dim3(2), dim3(256), 0, nullptr, out.get(), in.get(), n_vec);
  const std::vector<uint4> got = out.download();
  for (int i = 0; i < n_vec; ++i) REQUIRE((got[i].x == host[i].x && got[i].w == host[i].w));
}

TEST_CASE("emu: an empty grid is a no-op in HG_LAUNCH", "[emu]") {
  DeviceBuffer<float> out(1), total(1);
  REQUIRE_NOTHROW(HG_LAUNCH(reduce_kernel, dim3(0), dim3(kBlock), 0, nullptr, out.get(), total.get(),
                            static_cast<const float*>(nullptr), 0));
  REQUIRE(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("emu: launches from several host threads are serialised safely", "[emu]") {
  std::vector<float> host(5000, 1.0f);
  DeviceBuffer<float> in(host);
  std::vector<std::thread> threads;
  std::vector<float> results(4, 0.0f);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      DeviceBuffer<float> out(20), total(1);
      total.fill_zero();
      for (int rep = 0; rep < 5; ++rep) {
        HG_LAUNCH(reduce_kernel, dim3(20), dim3(kBlock), 0, nullptr, out.get(), total.get(), in.get(), 5000);
      }
      results[k] = total.download()[0];
    });
  }
  for (std::thread& t : threads) t.join();
  for (float r : results) REQUIRE(r == 25000.0f);
}

// cuda-emu: launch cost sanity. Prints timings; asserts only a loose bound, so
// a slow CI machine does not fail it, while an accidental O(n^2) or a stack
// mapping per thread would.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "tests/emu/emu_test_util.h"

using hg::emu::test::DeviceBuffer;

namespace {

__global__ void axpy_kernel(float* y, const float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void staged_kernel(float* y, const float* x, int n) {
  __shared__ float tile[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  const float v = tile[(threadIdx.x + 1) % blockDim.x];
  __syncthreads();
  if (i < n) y[i] = v;
}

}  // namespace

TEST_CASE("emu: a launch of 10^5 threads takes milliseconds", "[emu][perf]") {
  const int n = 100000;
  DeviceBuffer<float> x(std::vector<float>(n, 1.0f)), y(std::vector<float>(n, 2.0f));
  const dim3 grid((n + 255) / 256), block(256);
  HG_LAUNCH(axpy_kernel, grid, block, 0, nullptr, y.get(), x.get(), 3.0f, n);  // warm-up: maps the stacks
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  HG_LAUNCH(axpy_kernel, grid, block, 0, nullptr, y.get(), x.get(), 3.0f, n);
  const double axpy_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  start = Clock::now();
  HG_LAUNCH(staged_kernel, grid, block, 0, nullptr, y.get(), x.get(), n);
  const double staged_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const hg::emu::LaunchStats stats = hg::emu::last_launch_stats();
  std::printf("cuda-emu: 10^5 threads: axpy %.1f ms, with 2 barriers %.1f ms (%llu fiber switches)\n", axpy_ms,
              staged_ms, static_cast<unsigned long long>(stats.fiber_switches));
  CHECK(stats.threads == 391u * 256u);
  CHECK(y.download()[0] == 1.0f);  // thread 0 read thread 1's slot
  CHECK(axpy_ms < 5000.0);  // loose: typical is tens of milliseconds
}

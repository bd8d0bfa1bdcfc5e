// cuda-emu: the bugs the emulator exists to catch (a missing barrier, divergent
// barriers, misused warp intrinsics) and the launch shapes a
// real Hopper GPU refuses. Device asserts: test_emu_assert.cu.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/emu/emu_test_util.h"

using Catch::Matchers::Contains;
using hg::emu::test::DeviceBuffer;
using hg::emu::test::ScopedSeed;

namespace {

constexpr int kBlock = 256;

// Each thread reads its left neighbour's shared-memory slot. With the barrier
// this is correct; without it the read races with the neighbour's write.
template <bool kWithBarrier>
__global__ void shift_kernel(float* out, const float* in) {
  __shared__ float tile[kBlock];
  const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  tile[t] = in[i];
  if constexpr (kWithBarrier) __syncthreads();
  out[i] = t > 0 ? tile[t - 1] : tile[t];
}

// Returns how many outputs of shift_kernel are wrong.
template <bool kWithBarrier>
int count_shift_errors() {
  const int n = 4 * kBlock;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  DeviceBuffer<float> in(host), out(n);
  HG_LAUNCH(shift_kernel<kWithBarrier>, dim3(4), dim3(kBlock), 0, nullptr, out.get(), in.get());
  const std::vector<float> got = out.download();
  int errors = 0;
  for (int i = 0; i < n; ++i) {
    const float expected = i % kBlock > 0 ? host[i - 1] : host[i];
    errors += !(got[i] == expected);
  }
  return errors;
}

__global__ void early_exit_kernel(float* out) {
  __shared__ float tile[64];
  if (threadIdx.x < 16) return;  // these threads never reach the barrier
  tile[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = tile[63 - threadIdx.x];
}

__global__ void two_barriers_kernel(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void loop_count_kernel(int* out) {
  for (unsigned k = 0; k < 1 + threadIdx.x / 32; ++k) __syncthreads();  // warps loop different times
  out[threadIdx.x] = 1;
}

__global__ void shfl_self_not_in_mask_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(0x1u, static_cast<int>(threadIdx.x), 0);  // lanes 1.. not in mask
}

__global__ void mismatched_warp_ops_kernel(int* out) {
  if (threadIdx.x % 2 == 0) {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
  } else {
    out[threadIdx.x] = static_cast<int>(__ballot_sync(0xffffffffu, 1));
  }
}

__global__ void warp_waits_for_barrier_kernel(int* out) {
  if (threadIdx.x < 32) out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
  __syncthreads();  // warp 1 waits here while warp 0 is still in its shuffle
  if (threadIdx.x >= 32) out[threadIdx.x] = 2;
}

__global__ void warp_deadlock_kernel(int* out) {
  const unsigned lane = threadIdx.x % 32;
  if (lane < 16) out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 20);  // lanes 16.. never come
  __syncthreads();
}

__global__ void throwing_kernel(int* out) {
  HG_CHECK(threadIdx.x != 3, "device code may throw hg::Error in the emulator");
  out[threadIdx.x] = 1;
}

__global__ void trap_kernel(int* out) {
  if (threadIdx.x == 5) __trap();
  out[threadIdx.x] = 1;
}

__global__ void fill_kernel(float* out, int n) {
  float* smem = hg::cuda::dynamic_shared<float>();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  smem[threadIdx.x] = 1.0f;
  if (i < n) out[i] = smem[threadIdx.x];
}

__global__ void store_kernel(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1.0f;
}

std::string launch_error(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const hg::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("emu: a missing __syncthreads is caught by the shuffled schedule", "[emu][bugs]") {
  // In thread order (seed 0) the bug is invisible: every left neighbour has
  // already written. That is the luck a GPU may or may not give you.
  {
    ScopedSeed in_order(0);
    REQUIRE(count_shift_errors<false>() == 0);
  }
  for (uint64_t seed : {1ull, 2ull, 3ull, 4ull, 5ull, 0xdeadbeefull}) {
    ScopedSeed scoped(seed);
    INFO("seed " << seed);
    REQUIRE(count_shift_errors<true>() == 0);  // the fixed kernel passes every schedule
    REQUIRE(count_shift_errors<false>() > 0);  // the buggy one fails every shuffled schedule
  }
}

TEST_CASE("emu: threads exiting before a __syncthreads are reported, naming the kernel", "[emu][bugs]") {
  DeviceBuffer<float> out(64);
  const std::string message =
      launch_error([&] { HG_LAUNCH(early_exit_kernel, dim3(1), dim3(64), 0, nullptr, out.get()); });
  CHECK_THAT(message, Contains("early_exit_kernel"));
  CHECK_THAT(message, Contains("divergent barrier"));
  CHECK_THAT(message, Contains("16 exited"));
  CHECK_THAT(message, Contains("test_emu_bugs.cu"));
  CHECK_THAT(message, Contains("cudaErrorLaunchFailure"));
  REQUIRE(cudaGetLastError() == cudaSuccess);  // consumed by the launch helper
}

TEST_CASE("emu: threads waiting at different barriers are reported", "[emu][bugs]") {
  DeviceBuffer<int> out(64);
  std::string message =
      launch_error([&] { HG_LAUNCH(two_barriers_kernel, dim3(1), dim3(64), 0, nullptr, out.get()); });
  CHECK_THAT(message, Contains("two_barriers_kernel"));
  CHECK_THAT(message, Contains("divergent barrier"));
  message = launch_error([&] { HG_LAUNCH(loop_count_kernel, dim3(2), dim3(64), 0, nullptr, out.get()); });
  CHECK_THAT(message, Contains("loop_count_kernel"));
  CHECK_THAT(message, Contains("exited without reaching it"));
}

TEST_CASE("emu: misused warp intrinsics are reported", "[emu][bugs]") {
  DeviceBuffer<int> out(64);
  std::string message =
      launch_error([&] { HG_LAUNCH(shfl_self_not_in_mask_kernel, dim3(1), dim3(32), 0, nullptr, out.get()); });
  CHECK_THAT(message, Contains("does not include its own lane"));
  message = launch_error([&] { HG_LAUNCH(mismatched_warp_ops_kernel, dim3(1), dim3(32), 0, nullptr, out.get()); });
  CHECK_THAT(message, Contains("different warp operations"));
  // Not a bug: a warp op completes while other warps already wait at the barrier.
  REQUIRE_NOTHROW(HG_LAUNCH(warp_waits_for_barrier_kernel, dim3(1), dim3(64), 0, nullptr, out.get()));
}

TEST_CASE("emu: a warp op waiting for lanes stuck at a block barrier is a deadlock", "[emu][bugs]") {
  DeviceBuffer<int> out(32);
  const std::string message =
      launch_error([&] { HG_LAUNCH(warp_deadlock_kernel, dim3(1), dim3(32), 0, nullptr, out.get()); });
  CHECK_THAT(message, Contains("deadlock"));
  CHECK_THAT(message, Contains("__shfl_sync()"));
  CHECK_THAT(message, Contains("__syncthreads()"));
}

TEST_CASE("emu: an exception thrown by device code fails the launch", "[emu][bugs]") {
  DeviceBuffer<int> out(32);
  const std::string message =
      launch_error([&] { HG_LAUNCH(throwing_kernel, dim3(2), dim3(32), 0, nullptr, out.get()); });
  CHECK_THAT(message, Contains("thread (3,0,0) of block (0,0,0) threw"));
  CHECK_THAT(message, Contains("device code may throw"));
  // The emulator is usable afterwards.
  std::vector<int> zeros(32, 0);
  out.upload(zeros);
  REQUIRE_NOTHROW(HG_LAUNCH(store_kernel, dim3(1), dim3(32), 0, nullptr, reinterpret_cast<float*>(out.get()), 32));
}

TEST_CASE("emu: __trap fails the launch", "[emu][bugs]") {
  DeviceBuffer<int> out(32);
  const std::string message = launch_error([&] { HG_LAUNCH(trap_kernel, dim3(1), dim3(32), 0, nullptr, out.get()); });
  CHECK_THAT(message, Contains("__trap()"));
  CHECK_THAT(message, Contains("thread (5,0,0)"));
}

TEST_CASE("emu: launch shapes a Hopper GPU refuses are refused", "[emu][launch]") {
  DeviceBuffer<float> out(4096);
  const auto launch_code = [&](dim3 grid, dim3 block, size_t smem) {
    const hg::emu::LaunchResult r =
        hg::emu::launch_kernel("store_kernel", store_kernel, grid, block, smem, nullptr, out.get(), 0);
    const cudaError_t last = cudaGetLastError();
    CHECK(last == r.error);  // a failed launch also sets the last error, as on a GPU
    return r.error;
  };
  CHECK(launch_code(dim3(1), dim3(1024), 0) == cudaSuccess);
  CHECK(launch_code(dim3(1), dim3(1025), 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_code(dim3(1), dim3(32, 33), 0) == cudaErrorInvalidConfiguration);  // 1056 threads
  CHECK(launch_code(dim3(1), dim3(1, 1, 64), 0) == cudaSuccess);
  CHECK(launch_code(dim3(1), dim3(1, 1, 65), 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_code(dim3(1), dim3(0), 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_code(dim3(0), dim3(32), 0) == cudaErrorInvalidConfiguration);  // raw launch; HG_LAUNCH skips it
  CHECK(launch_code(dim3(1, 65536), dim3(32), 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_code(dim3(1, 1, 65536), dim3(32), 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_code(dim3(1), dim3(32), 48 * 1024) == cudaSuccess);
  CHECK(launch_code(dim3(1), dim3(32), 48 * 1024 + 1) == cudaErrorInvalidValue);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  CHECK(hg::emu::launch_kernel("store_kernel", store_kernel, dim3(1), dim3(32), 0, stream, out.get(), 32).error ==
        cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  CHECK(hg::emu::launch_kernel("store_kernel", store_kernel, dim3(1), dim3(32), 0, stream, out.get(), 32).error ==
        cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);

  const std::string message = launch_error(
      [&] { HG_LAUNCH(store_kernel, dim3(1), dim3(64, 32), 0, nullptr, out.get(), 4096); });
  CHECK_THAT(message, Contains("store_kernel"));
  CHECK_THAT(message, Contains("cudaErrorInvalidConfiguration"));
  CHECK_THAT(message, Contains("2048 threads"));
}

TEST_CASE("emu: more than 48 KiB of dynamic shared memory needs the opt-in", "[emu][launch]") {
  DeviceBuffer<float> out(1024);
  const size_t big = 100 * 1024;
  const std::string message =
      launch_error([&] { HG_LAUNCH(fill_kernel, dim3(1), dim3(1024), big, nullptr, out.get(), 1024); });
  CHECK_THAT(message, Contains("cudaFuncSetAttribute"));
  CHECK_THAT(message, Contains("cudaErrorInvalidValue"));

  REQUIRE(cudaFuncSetAttribute(fill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) ==
          cudaErrorInvalidValue);
  REQUIRE(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE(cudaFuncSetAttribute(fill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big)) ==
          cudaSuccess);
  REQUIRE_NOTHROW(HG_LAUNCH(fill_kernel, dim3(1), dim3(1024), big, nullptr, out.get(), 1024));
  REQUIRE(out.download()[1023] == 1.0f);
  REQUIRE_THROWS_AS(HG_LAUNCH(fill_kernel, dim3(1), dim3(1024), big + 4, nullptr, out.get(), 1024), hg::Error);
  REQUIRE(cudaFuncSetAttribute(fill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024) ==
          cudaSuccess);
}

// The cuda-emu host runtime shim itself: memory semantics (poison, alignment,
// capacity, pointer validation), error state, streams and events. Emu only:
// on a GPU these are the real runtime's business.
#if defined(HG_CUDA_EMU)

#include <cuda_runtime_api.h>
#include <hg_emu_runtime.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"

namespace {

// Restores the emulated capacity when a test that shrinks it ends.
struct CapacityGuard {
  size_t saved = hg::emu::device_memory_capacity();
  ~CapacityGuard() { hg::emu::set_device_memory_capacity(saved); }
};

}  // namespace

TEST_CASE("emu shim: cudaMalloc is exact, aligned and NaN-poisoned", "[cuda][emu-shim]") {
  const size_t before = hg::emu::device_memory_in_use(0);
  void* ptr = nullptr;
  REQUIRE(cudaMalloc(&ptr, 1001) == cudaSuccess);
  CHECK(reinterpret_cast<uintptr_t>(ptr) % 256 == 0);
  CHECK(hg::emu::device_memory_in_use(0) == before + 1001);
  CHECK(hg::emu::device_of_pointer(ptr) == 0);
  CHECK(hg::emu::device_of_pointer(static_cast<char*>(ptr) + 1000) == 0);
  CHECK(hg::emu::device_of_pointer(static_cast<char*>(ptr) + 1001) == -1);
  CHECK(hg::emu::is_device_range(ptr, 1001));
  CHECK_FALSE(hg::emu::is_device_range(ptr, 1002));

  // Uninitialised device memory reads as NaN in every float format.
  std::vector<unsigned char> host(1001);
  REQUIRE(cudaMemcpy(host.data(), ptr, host.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  float f;
  std::memcpy(&f, host.data(), 4);
  CHECK(std::isnan(f));
  uint16_t h;
  std::memcpy(&h, host.data(), 2);
  CHECK(std::isnan(hg::detail::half_bits_to_float(h)));
  CHECK(std::isnan(hg::detail::bfloat16_bits_to_float(h)));

  REQUIRE(cudaFree(ptr) == cudaSuccess);
  CHECK(hg::emu::device_memory_in_use(0) == before);

  void* empty = reinterpret_cast<void*>(0x1);
  CHECK(cudaMalloc(&empty, 0) == cudaSuccess);
  CHECK(empty == nullptr);
  CHECK(cudaFree(nullptr) == cudaSuccess);
}

TEST_CASE("emu shim: invalid frees and out-of-range copies are refused", "[cuda][emu-shim]") {
  void* ptr = nullptr;
  REQUIRE(cudaMalloc(&ptr, 64) == cudaSuccess);
  int host_value = 0;
  CHECK(cudaFree(&host_value) == cudaErrorInvalidValue);
  CHECK(cudaFree(static_cast<char*>(ptr) + 8) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);

  std::vector<char> host(128, 1);
  CHECK(cudaMemcpy(ptr, host.data(), 65, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(host.data(), static_cast<char*>(ptr) + 32, 33, cudaMemcpyDeviceToHost) ==
        cudaErrorInvalidValue);
  CHECK(cudaMemcpy(host.data(), host.data() + 64, 16, cudaMemcpyHostToDevice) ==
        cudaErrorInvalidValue);  // the "device" side is host memory
  CHECK(cudaMemset(ptr, 0, 65) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(ptr, host.data(), 64, static_cast<cudaMemcpyKind>(7)) ==
        cudaErrorInvalidValue);
  (void)cudaGetLastError();

  // cudaMemcpyDefault infers the direction from the pointers.
  REQUIRE(cudaMemcpy(ptr, host.data(), 64, cudaMemcpyDefault) == cudaSuccess);
  REQUIRE(cudaMemset(static_cast<char*>(ptr) + 60, 7, 4) == cudaSuccess);
  std::vector<char> back(64, 0);
  REQUIRE(cudaMemcpy(back.data(), ptr, 64, cudaMemcpyDefault) == cudaSuccess);
  CHECK(back[0] == 1);
  CHECK(back[59] == 1);
  CHECK(back[60] == 7);
  CHECK(cudaMemcpy(back.data(), ptr, 65, cudaMemcpyDefault) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
  REQUIRE(cudaFree(ptr) == cudaSuccess);
  CHECK(cudaFree(ptr) == cudaErrorInvalidValue);  // double free
  (void)cudaGetLastError();
}

TEST_CASE("emu shim: capacity limit and cudaMemGetInfo", "[cuda][emu-shim]") {
  CapacityGuard restore;
  const size_t in_use = hg::emu::device_memory_in_use(0);
  hg::emu::set_device_memory_capacity(in_use + (8 << 20));
  size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  CHECK(total_bytes == in_use + (8 << 20));
  CHECK(free_bytes == size_t{8} << 20);

  void* a = nullptr;
  void* b = nullptr;
  REQUIRE(cudaMalloc(&a, 6 << 20) == cudaSuccess);
  CHECK(cudaMalloc(&b, 3 << 20) == cudaErrorMemoryAllocation);
  CHECK(cudaPeekAtLastError() == cudaErrorMemoryAllocation);  // peek keeps it
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaMalloc(&b, 2 << 20) == cudaSuccess);
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  CHECK(free_bytes == 0);
  cudaDeviceProp prop;
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(prop.totalGlobalMem == total_bytes);
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaFree(b) == cudaSuccess);
}

TEST_CASE("emu shim: pinned host memory is host memory", "[cuda][emu-shim]") {
  void* pinned = nullptr;
  REQUIRE(cudaMallocHost(&pinned, 100) == cudaSuccess);
  CHECK(hg::emu::device_of_pointer(pinned) == -1);
  CHECK(cudaFree(pinned) == cudaErrorInvalidValue);  // not device memory
  (void)cudaGetLastError();
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  void* mapped = nullptr;
  REQUIRE(cudaHostAlloc(&mapped, 64, cudaHostAllocPortable) == cudaSuccess);
  CHECK(cudaFreeHost(mapped) == cudaSuccess);
}

TEST_CASE("emu shim: stream and event handles are validated", "[cuda][emu-shim]") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, -3) == cudaSuccess);
  int priority = 0;
  unsigned int flags = 0;
  REQUIRE(cudaStreamGetPriority(stream, &priority) == cudaSuccess);
  REQUIRE(cudaStreamGetFlags(stream, &flags) == cudaSuccess);
  CHECK(priority == -3);
  CHECK(flags == cudaStreamNonBlocking);
  CHECK(cudaStreamQuery(stream) == cudaSuccess);
  CHECK(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess);

  cudaEvent_t a = nullptr, b = nullptr;
  REQUIRE(cudaEventCreate(&a) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&b, cudaEventDisableTiming) == cudaSuccess);
  float ms = -1.0f;
  CHECK(cudaEventElapsedTime(&ms, a, a) == cudaErrorInvalidResourceHandle);  // not recorded
  REQUIRE(cudaEventRecord(a, stream) == cudaSuccess);
  REQUIRE(cudaEventRecord(b, stream) == cudaSuccess);
  CHECK(cudaEventElapsedTime(&ms, a, a) == cudaSuccess);
  CHECK(ms == 0.0f);
  CHECK(cudaEventElapsedTime(&ms, a, b) == cudaErrorInvalidResourceHandle);  // timing off
  CHECK(cudaStreamWaitEvent(stream, b) == cudaSuccess);
  CHECK(cudaEventCreateWithFlags(&b, cudaEventInterprocess) == cudaErrorInvalidValue);

  REQUIRE(cudaEventDestroy(a) == cudaSuccess);
  CHECK(cudaEventDestroy(a) == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventRecord(a, stream) == cudaErrorInvalidResourceHandle);
  REQUIRE(cudaEventDestroy(b) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  CHECK(cudaStreamDestroy(stream) == cudaErrorInvalidResourceHandle);
  CHECK(cudaStreamSynchronize(stream) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(std::string(cudaGetErrorName(cudaErrorInvalidResourceHandle)) ==
        "cudaErrorInvalidResourceHandle");
  CHECK(std::string(cudaGetErrorString(cudaErrorMemoryAllocation)) == "out of memory");
}

#endif  // HG_CUDA_EMU

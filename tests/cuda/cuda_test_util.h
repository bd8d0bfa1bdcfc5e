// Helpers shared by the tests in tests/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"

// The binaries of tests/cuda need a device (REQUIRES cuda in tests.cmake: on a
// machine without one the whole binary is reported skipped, tests/main.cpp),
// so inside a case a missing device is a failure, never a silent pass; in the
// emu build a device always exists unless a test removed it.
#define HG_REQUIRE_CUDA_DEVICE() REQUIRE(::hg::cuda::is_available())

namespace hg::test {

// Owns `bytes` of device memory from cudaMalloc (not the caching allocator,
// so tests of the allocator do not depend on it).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { HG_CUDA_CHECK(cudaMalloc(&ptr_, bytes)); }
  ~DeviceBuffer() { (void)cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() * sizeof(T) <= bytes_);
    HG_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <typename T>
  std::vector<T> download(size_t count) const {
    std::vector<T> host(count);
    HG_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace hg::test

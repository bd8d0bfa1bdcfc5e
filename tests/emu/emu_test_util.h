// Helpers shared by the cuda-emu tests: device buffers and schedule seeds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace hg::emu::test {

// A cudaMalloc'ed array of T, freed on scope exit.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    HG_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    HG_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    HG_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  void fill_zero() { HG_CUDA_CHECK(cudaMemset(ptr_, 0, n_ * sizeof(T))); }

 private:
  T* ptr_ = nullptr;
  size_t n_;
};

// Sets the schedule seed for one scope and restores the previous one.
class ScopedSeed {
 public:
  explicit ScopedSeed(uint64_t seed) : previous_(schedule_seed()) { set_schedule_seed(seed); }
  ~ScopedSeed() { set_schedule_seed(previous_); }
  ScopedSeed(const ScopedSeed&) = delete;
  ScopedSeed& operator=(const ScopedSeed&) = delete;

 private:
  uint64_t previous_;
};

}  // namespace hg::emu::test

// Controls of the cuda-emu host runtime that have no CUDA equivalent: tests use
// them to shape the emulated machine (device count, memory capacity) and to
// inspect what the shim holds. Only available in the emu build (HG_CUDA_EMU).
#pragma once

#include <cstddef>

namespace hg::emu {

// Default capacity of each emulated device: 80 GiB, like an H100 80GB. The host
// must still have the memory for what is actually allocated.
inline constexpr size_t kDefaultDeviceMemoryCapacity = size_t{80} << 30;
// cudaMalloc hands out 256-byte aligned memory, like the real allocator.
inline constexpr size_t kDeviceAlignment = 256;
// Fresh device allocations are filled with this byte: 0xFFFF.. is a NaN in
// f32, f16 and bf16, so a kernel that reads memory nobody wrote produces NaN.
inline constexpr unsigned char kPoisonByte = 0xFF;

// Memory capacity of every emulated device (bytes). cudaMalloc fails with
// cudaErrorMemoryAllocation once the live device allocations would exceed it,
// and cudaMemGetInfo/totalGlobalMem report it. Initial value: the environment
// variable HG_EMU_DEVICE_MEMORY_MB if set, else kDefaultDeviceMemoryCapacity.
void set_device_memory_capacity(size_t bytes);
size_t device_memory_capacity();
// Bytes currently held by cudaMalloc on `device` (exact requested sizes).
size_t device_memory_in_use(int device);
// Number of live cudaMalloc allocations on `device`.
size_t device_allocation_count(int device);

// Number of emulated devices (0..kMaxDevices, runtime/cuda/device_limits.h). Initial value: HG_EMU_DEVICE_COUNT if set,
// else 1. With 0, cudaGetDeviceCount reports cudaErrorNoDevice, which is how a
// machine without a GPU behaves.
void set_device_count(int count);
// Bumped by every set_device_count: lets hg::cuda cache the device count (a
// real GPU's count is fixed for the process) and still see a test change it.
unsigned device_count_generation();

// Number of cudaMemcpyAsync calls so far (process-wide) whose host side is
// pageable memory (not from cudaHostAlloc/cudaMallocHost): on a GPU such a copy
// is staged through a driver buffer by the host thread, which may wait for the
// device (a hidden host wait that Note [Host sync counter] cannot see). Tests
// take two snapshots around a step that must not stall the host.
size_t pageable_async_copies();

}  // namespace hg::emu

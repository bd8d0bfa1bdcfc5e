// Allocators and per-device-type backend hooks.
//
// Note [Backend hooks]
// core/ (floor 0) owns Storage and Tensor but must not include the CUDA backend
// (floor 1). A backend registers a DeviceHooks object for its device type at
// start-up; core reaches device memory only through it (allocate, free, copy).
// The CPU hooks live in core itself. Without a registered CUDA backend (the cpu
// configuration) any use of Device::cuda() throws an hg::Error saying so.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace hg {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory for nbytes (nullptr when nbytes == 0) or throws hg::Error.
  virtual void* allocate(size_t nbytes, Device device) = 0;
  // Releases memory from allocate(); ptr may be nullptr.
  virtual void deallocate(void* ptr, Device device) = 0;
};

// 64-byte aligned host memory (a cache line, and enough for AVX-512 loads).
inline constexpr size_t kCpuAlignment = 64;
Allocator& cpu_allocator();

// The CPU allocator's block cache (Note [CPU block cache] in
// core/allocator.cpp): what it holds now, and a call that gives it all back to
// the C library, as torch.cuda.empty_cache() does for the CUDA cache.
// HG_CPU_BLOCK_CACHE=0 turns the cache off; HG_CPU_CACHE_MB sets the budget for
// large blocks (> 128 KiB).
struct CpuCacheStats {
  size_t small_cached_blocks = 0;
  size_t large_cached_blocks = 0;
  size_t large_cached_bytes = 0;
  size_t large_budget_bytes = 0;
  bool enabled = false;
};
CpuCacheStats cpu_cache_stats();
void cpu_empty_cache();

class DeviceHooks {
 public:
  virtual ~DeviceHooks() = default;
  virtual Allocator& allocator() = 0;
  // Number of devices of this type available now (0 when no driver/device).
  virtual int device_count() = 0;
  // Copies n bytes between any two devices, one of which is of this hook's
  // type (or both). Returns when the bytes are readable by the host code that
  // follows (synchronous with respect to the host).
  virtual void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t n) = 0;
  // Waits for all queued work on `device`.
  virtual void synchronize(Device device) = 0;
};

// Called once by a backend during static initialisation (or explicitly).
void register_device_hooks(DeviceType type, DeviceHooks* hooks);
// The hooks for `type`; throws hg::Error when no backend provides that type.
DeviceHooks& device_hooks(DeviceType type);
bool has_device_hooks(DeviceType type);
// Throws an hg::Error unless `device` exists (right type, index in range).
void check_device(Device device);

// Copies n bytes between devices through the right hooks (CPU<->CPU is memcpy).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n);

}  // namespace hg

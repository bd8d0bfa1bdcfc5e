#include "core/allocator.h"

#include <array>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "core/error.h"

// GCC defines __SANITIZE_ADDRESS__ under -fsanitize=address; clang (the
// fuzzers' build) answers __has_feature(address_sanitizer).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HG_HAS_ASAN_FEATURE 1
#endif
#endif
#ifndef HG_HAS_ASAN_FEATURE
#define HG_HAS_ASAN_FEATURE 0
#endif

namespace hg {

namespace {

void* aligned_host_alloc(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  HG_CHECK(nbytes <= SIZE_MAX - kCpuAlignment, "allocation of ", nbytes, " bytes is too large; check the tensor sizes");
  const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  void* ptr = std::aligned_alloc(kCpuAlignment, rounded);
  HG_CHECK(ptr != nullptr, "out of host memory: could not allocate ", nbytes,
           " bytes; reduce the batch size or the model size");
  return ptr;
}

// Note [CPU block cache]
// Small host blocks (<= kMaxCachedBlock bytes) are rounded up to a power of
// two and, when freed, kept on a per-size free list for the next allocation of
// that size class instead of going back to glibc (whose memalign path was
// about a fifth of the host cost of a 1-element op; docs/benchmarks.md, "CPU
// backend notes"). Every block then carries one 64-byte header in front of
// the pointer handed out (so the alignment is kept) that records its class,
// or kUncached for large blocks. At most kMaxCachedPerClass blocks per class
// are kept: the cache holds at most 64 * 128 KiB = 8 MiB. HG_CPU_BLOCK_CACHE=0
// (read once, at start-up) turns the cache off, and it is off under
// AddressSanitizer, whose use-after-free checks need every free to reach it.
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
#if defined(__SANITIZE_ADDRESS__) || HG_HAS_ASAN_FEATURE
    enabled_ = false;
#else
    const char* env = std::getenv("HG_CPU_BLOCK_CACHE");
    enabled_ = !(env != nullptr && std::strcmp(env, "0") == 0);
#endif
  }
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;
  ~CpuAllocator() override = default;  // never runs: see cpu_allocator()

  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    if (!enabled_) return aligned_host_alloc(nbytes);
    if (nbytes > kMaxCachedBlock) {
      HG_CHECK(nbytes <= SIZE_MAX - 2 * kCpuAlignment, "allocation of ", nbytes,
               " bytes is too large; check the tensor sizes");
      return with_header(aligned_host_alloc(nbytes + kCpuAlignment), kUncached);
    }
    const uint8_t cls = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& list = free_[cls];
      if (!list.empty()) {
        void* base = list.back();
        list.pop_back();
        return static_cast<char*>(base) + kCpuAlignment;
      }
    }
    return with_header(aligned_host_alloc((kMinBlock << cls) + kCpuAlignment), cls);
  }

  void deallocate(void* ptr, Device) override {
    if (ptr == nullptr) return;
    if (!enabled_) {
      std::free(ptr);
      return;
    }
    void* base = static_cast<char*>(ptr) - kCpuAlignment;
    const uint8_t cls = *static_cast<const uint8_t*>(base);
    if (cls != kUncached) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& list = free_[cls];
      if (list.size() < kMaxCachedPerClass) {
        list.push_back(base);
        return;
      }
    }
    std::free(base);
  }

 private:
  static constexpr size_t kMinBlock = kCpuAlignment;  // class 0
  static constexpr size_t kNumClasses = 12;           // 64 B .. 128 KiB
  static constexpr size_t kMaxCachedBlock = kMinBlock << (kNumClasses - 1);
  static constexpr size_t kMaxCachedPerClass = 64;
  static constexpr uint8_t kUncached = 0xff;

  static uint8_t size_class(size_t nbytes) {
    uint8_t cls = 0;
    while ((kMinBlock << cls) < nbytes) ++cls;
    return cls;
  }
  static void* with_header(void* base, uint8_t cls) {
    *static_cast<uint8_t*>(base) = cls;
    return static_cast<char*>(base) + kCpuAlignment;
  }

  bool enabled_ = true;
  std::mutex mutex_;
  std::array<std::vector<void*>, kNumClasses> free_;
};

class CpuHooks final : public DeviceHooks {
 public:
  Allocator& allocator() override { return cpu_allocator(); }
  int device_count() override { return 1; }
  void copy_bytes(void* dst, Device, const void* src, Device, size_t n) override {
    if (n != 0) std::memcpy(dst, src, n);
  }
  void synchronize(Device) override {}
};

std::array<DeviceHooks*, kNumDeviceTypes>& hook_table() {
  static CpuHooks cpu_hooks;
  static std::array<DeviceHooks*, kNumDeviceTypes> table = {&cpu_hooks, nullptr};
  return table;
}

}  // namespace

Allocator& cpu_allocator() {
  // Never destroyed: tensors held by other static objects may be freed after
  // this translation unit's statics are gone.
  static CpuAllocator* allocator = new CpuAllocator;
  return *allocator;
}

void register_device_hooks(DeviceType type, DeviceHooks* hooks) {
  hook_table()[static_cast<size_t>(type)] = hooks;
}

bool has_device_hooks(DeviceType type) {
  return hook_table()[static_cast<size_t>(type)] != nullptr;
}

DeviceHooks& device_hooks(DeviceType type) {
  DeviceHooks* hooks = hook_table()[static_cast<size_t>(type)];
  HG_CHECK(hooks != nullptr,
           "this halfgrad was built without the CUDA backend (cpu configuration), so "
           "Device::cuda() is unavailable; build the emu or gpu configuration "
           "(cmake --preset emu|gpu) or use Device::cpu()");
  return *hooks;
}

void check_device(Device device) {
  HG_CHECK(device.index >= 0, "device index must be >= 0, got ", device.index);
  if (device.is_cpu()) {
    HG_CHECK(device.index == 0, "the CPU device has index 0 only, got cpu:", device.index);
    return;
  }
  const int count = device_hooks(device.type).device_count();
  HG_CHECK(device.index < count, "requested ", device, " but ", count,
           " CUDA device(s) are available",
           count == 0 ? " (no driver or GPU found; use Device::cpu() or the emu build)" : "");
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n) {
  if (n == 0) return;
  const DeviceType type = dst_device.is_cpu() ? src_device.type : dst_device.type;
  device_hooks(type).copy_bytes(dst, dst_device, src, src_device, n);
}

}  // namespace hg

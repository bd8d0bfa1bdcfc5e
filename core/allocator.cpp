#include "core/allocator.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace hg {

namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    // aligned_alloc needs a size that is a multiple of the alignment.
    HG_CHECK(nbytes <= SIZE_MAX - kCpuAlignment, "allocation of ", nbytes,
             " bytes is too large; check the tensor sizes");
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* ptr = std::aligned_alloc(kCpuAlignment, rounded);
    HG_CHECK(ptr != nullptr, "out of host memory: could not allocate ", nbytes,
             " bytes; reduce the batch size or the model size");
    return ptr;
  }
  void deallocate(void* ptr, Device) override { std::free(ptr); }
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
  static CpuAllocator allocator;
  return allocator;
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

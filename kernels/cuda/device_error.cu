// The device-side error flag (Note [Device error flag] in device_error.h):
// lazy per-device allocation, and the host check that turns a recorded error
// into an hg::Error. No kernels here; it is a .cu file so that it builds with
// the CUDA backend in both configurations.
#include "kernels/cuda/device_error.h"

#include <array>
#include <atomic>
#include <mutex>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace hg::cuda {

namespace {

constexpr int kMaxDevices = 64;

struct Slots {
  std::mutex mutex;  // guards allocation
  std::array<std::atomic<DeviceError*>, kMaxDevices> records{};
};

Slots& slots() {
  static Slots* s = new Slots();  // never destroyed: checks may run during static teardown
  return *s;
}

int resolve(int device) {
  if (device < 0) device = current_device();
  HG_CHECK(device < kMaxDevices, "device error flag: device index ", device, " exceeds ", kMaxDevices);
  return device;
}

std::string describe(const DeviceError& e) {
  const std::string op(op_name(static_cast<OpId>(e.op)));
  switch (static_cast<DeviceErrorCode>(e.code)) {
    case DeviceErrorCode::kTargetOutOfRange:
      return ::hg::detail::str_cat(op, ": target ", e.value, " at row ", e.index,
                                   " is out of range [0, ", e.limit,
                                   "); targets must be class indices or ignore_index (", e.aux,
                                   ") (reported by a CUDA kernel)");
    default:
      return ::hg::detail::str_cat(op, ": a CUDA kernel reported error code ", e.code, " (value ",
                                   e.value, ", index ", e.index, ")");
  }
}

}  // namespace

DeviceError* device_error_slot(int device) {
  device = resolve(device);
  Slots& s = slots();
  if (DeviceError* p = s.records[device].load(std::memory_order_acquire)) return p;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (DeviceError* p = s.records[device].load(std::memory_order_relaxed)) return p;
  DeviceGuard guard(device);
  void* p = nullptr;
  HG_CUDA_CHECK(cudaMalloc(&p, sizeof(DeviceError)));
  HG_CUDA_CHECK(cudaMemset(p, 0, sizeof(DeviceError)));
  count_synchronization();
  HG_CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any stream's kernel can see it
  s.records[device].store(static_cast<DeviceError*>(p), std::memory_order_release);
  return static_cast<DeviceError*>(p);
}

void check_device_errors(int device) {
  device = resolve(device);
  DeviceError* slot = slots().records[device].load(std::memory_order_acquire);
  if (slot == nullptr) return;  // no kernel could have reported anything
  DeviceGuard guard(device);
  const Stream stream = current_stream(device);
  DeviceError host{};
  count_device_to_host_copy();  // Note [Host sync counter]
  HG_CUDA_CHECK(cudaMemcpyAsync(&host, slot, sizeof(DeviceError), cudaMemcpyDeviceToHost, stream.handle()));
  stream.synchronize();
  if (host.code == static_cast<int>(DeviceErrorCode::kNone)) return;
  HG_CUDA_CHECK(cudaMemsetAsync(slot, 0, sizeof(DeviceError), stream.handle()));
  stream.synchronize();
  HG_FAIL(describe(host));
}

}  // namespace hg::cuda

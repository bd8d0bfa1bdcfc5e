// The device-side error flag (Note [Device error flag] in device_error.h):
// lazy per-device allocation, and the host check that turns a recorded error
// into an hg::Error. No kernels here; it is a .cu file so that it builds with
// the CUDA backend in both configurations.
#include "kernels/cuda/device_error.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_limits.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

// One device's record and the streams that may have written it since the
// last check.
struct DeviceSlot {
  std::atomic<DeviceError*> record{nullptr};
  std::atomic<bool> any_pending{false};  // !pending.empty(), readable without the lock
  std::mutex mutex;                      // guards allocation and `pending`
  std::vector<Stream> pending;           // noted streams, each once
};

struct Slots {
  std::array<DeviceSlot, kMaxDevices> devices;
};

DeviceSlot& device_slot(int device) {
  static Slots* s = new Slots();  // never destroyed: checks may run during static teardown
  return s->devices[static_cast<size_t>(device)];
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
    case DeviceErrorCode::kIndexOutOfRange:
      return ::hg::detail::str_cat(op, ": index ", e.value, " at position ", e.index, " is out of range [0, ", e.limit,
                                   ") for an indexed dim of size ", e.limit, "; indices must be in [0, ", e.limit,
                                   ") (reported by a CUDA kernel)");
    default:
      return ::hg::detail::str_cat(op, ": a CUDA kernel reported error code ", e.code, " (value ",
                                   e.value, ", index ", e.index, ")");
  }
}

}  // namespace

DeviceError* device_error_slot(const Stream& stream) {
  const int device = resolve(stream.device());
  DeviceSlot& d = device_slot(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  DeviceError* record = d.record.load(std::memory_order_relaxed);
  if (record == nullptr) {
    DeviceGuard guard(device);
    void* p = nullptr;
    HG_CUDA_CHECK(cudaMalloc(&p, sizeof(DeviceError)));
    HG_CUDA_CHECK(cudaMemset(p, 0, sizeof(DeviceError)));
    count_synchronization();
    HG_CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any stream's kernel can see it
    record = static_cast<DeviceError*>(p);
    d.record.store(record, std::memory_order_release);
  }
  if (std::find(d.pending.begin(), d.pending.end(), stream) == d.pending.end()) d.pending.push_back(stream);
  d.any_pending.store(true, std::memory_order_release);
  return record;
}

void check_device_errors(int device) {
  device = resolve(device);
  DeviceSlot& d = device_slot(device);
  if (!d.any_pending.load(std::memory_order_acquire)) return;  // nothing could have reported
  std::vector<Stream> streams;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    streams.swap(d.pending);
    d.any_pending.store(false, std::memory_order_release);
  }
  if (streams.empty()) return;  // another thread's check took them
  DeviceError* record = d.record.load(std::memory_order_acquire);
  DeviceGuard guard(device);
  // Every kernel that may have reported has finished once its stream has.
  for (const Stream& s : streams) s.synchronize();
  const Stream& on = streams.back();
  DeviceError host{};
  count_device_to_host_copy();  // Note [Host sync counter]
  HG_CUDA_CHECK(cudaMemcpyAsync(&host, record, sizeof(DeviceError), cudaMemcpyDeviceToHost, on.handle()));
  on.synchronize();
  if (host.code == static_cast<int>(DeviceErrorCode::kNone)) return;
  HG_CUDA_CHECK(cudaMemsetAsync(record, 0, sizeof(DeviceError), on.handle()));
  on.synchronize();
  HG_FAIL(describe(host));
}

int device_error_streams_pending(int device) {
  DeviceSlot& d = device_slot(resolve(device));
  std::lock_guard<std::mutex> lock(d.mutex);
  return static_cast<int>(d.pending.size());
}

}  // namespace hg::cuda

// The pinned staging pool behind upload_table (Note [Device tables through
// pinned staging], runtime/cuda/device_table.h).
#include "runtime/cuda/device_table.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_limits.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

constexpr size_t kMinSlotBytes = size_t{64} << 10;

struct StagingSlot {
  PinnedBuffer buffer;
  Event done{/*enable_timing=*/false};  // recorded after the slot's last copy
};

struct StagingPool {
  std::mutex mutex;
  std::vector<std::unique_ptr<StagingSlot>> slots[kMaxDevices];
};

// Immortal: a queued copy may still read a slot while static destructors run;
// the driver frees the pinned memory at process exit.
StagingPool& pool() {
  static StagingPool* p = new StagingPool;
  return *p;
}

}  // namespace

void upload_bytes(void* dst, const void* src, size_t nbytes, Device device) {
  if (nbytes == 0) return;
  HG_CHECK(device.is_cuda() && device.index >= 0 && device.index < kMaxDevices,
           "upload_bytes: not a CUDA device: ", device);
  DeviceGuard guard(device.index);
  const Stream stream = current_stream(device.index);
  StagingPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto& slots = p.slots[device.index];
  StagingSlot* slot = nullptr;
  for (auto& s : slots) {  // the smallest free slot that fits
    if (s->buffer.size() >= nbytes && (slot == nullptr || s->buffer.size() < slot->buffer.size()) && s->done.query()) {
      slot = s.get();
    }
  }
  if (slot == nullptr) {
    auto fresh = std::make_unique<StagingSlot>();
    fresh->buffer = PinnedBuffer(std::bit_ceil(std::max(nbytes, kMinSlotBytes)));
    slot = fresh.get();
    slots.push_back(std::move(fresh));
  }
  std::memcpy(slot->buffer.data(), src, nbytes);
  HG_CUDA_CHECK(cudaMemcpyAsync(dst, slot->buffer.data(), nbytes, cudaMemcpyHostToDevice, stream.handle()));
  slot->done.record(stream);
}

size_t staging_slot_count(Device device) {
  if (!device.is_cuda() || device.index < 0 || device.index >= kMaxDevices) return 0;
  StagingPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.slots[device.index].size();
}

}  // namespace hg::cuda

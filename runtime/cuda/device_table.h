// Host-built argument tables of multi-tensor kernels (their chunk lists),
// copied to the device in stream order, without a host wait.
//
// Note [Device tables through pinned staging]
// Why not Tensor::to(device): core's device copies wait for the stream
// (DeviceHooks::copy_bytes returns when the bytes are ready for the host),
// which would make every optimizer step and clip_grad_norm_ wait for all GPU
// work queued before it. Why not cudaMemcpyAsync from the std::vector itself:
// a copy from pageable memory is staged by the calling host thread through a
// driver buffer, and the call may block until earlier work has drained that
// buffer (a hidden host wait). So the table is first written into pinned
// memory from a per-device pool of staging slots, each with an event recorded
// after its copy; a slot is reused only once its event has completed
// (cudaEventQuery, which never waits), else the pool grows by a new slot
// (power-of-two sizes from 64 KiB). The pool therefore holds about as many
// slots as there are uploads in flight (a few per training step) and never
// blocks the host. The device bytes come from the caching allocator on the
// current stream, which hands them out again only in that stream's order, and
// the table is read only by the kernels launched next on that stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/tensor.h"

namespace hg::cuda {

// Copies nbytes from host `src` to device `dst` (on `device`) in the order of
// device's current stream, through a pinned staging slot; returns without
// waiting for the device. `src` may go away as soon as it returns.
void upload_bytes(void* dst, const void* src, size_t nbytes, Device device);

// Pinned staging slots held by the pool of `device` (tests: the pool stays
// small across repeated uploads).
size_t staging_slot_count(Device device);

// The bytes of `table` on `device` (a u8 tensor that owns them; keep it alive
// until the kernels reading it are queued).
template <typename T>
Tensor upload_table(const std::vector<T>& table, Device device) {
  static_assert(std::is_trivially_copyable_v<T>, "a device table holds plain structs");
  const size_t nbytes = table.size() * sizeof(T);
  Tensor bytes = empty({static_cast<int64_t>(nbytes)}, {.dtype = kU8, .device = device});
  if (nbytes > 0) upload_bytes(bytes.data_ptr(), table.data(), nbytes, device);
  return bytes;
}

}  // namespace hg::cuda

// Host-built argument tables of multi-tensor kernels (their chunk lists),
// copied to the device in stream order, without a host sync.
//
// Why not Tensor::to(device): core's device copies wait for the stream
// (DeviceHooks::copy_bytes returns when the bytes are ready for the host),
// which would make every optimizer step and clip_grad_norm_ wait for all GPU
// work queued before it. A table is read only by the kernels launched next on
// the current stream, so stream order is enough: cudaMemcpyAsync from pageable
// host memory stages the source before it returns (the vector may go away),
// and the device bytes come from the caching allocator on the current stream,
// which hands them out again only in that stream's order.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

// The bytes of `table` on `device` (a u8 tensor that owns them; keep it alive
// until the kernels reading it are queued).
template <typename T>
Tensor upload_table(const std::vector<T>& table, Device device) {
  static_assert(std::is_trivially_copyable_v<T>, "a device table holds plain structs");
  const size_t nbytes = table.size() * sizeof(T);
  Tensor bytes = empty({static_cast<int64_t>(nbytes)}, {.dtype = kU8, .device = device});
  if (nbytes > 0) {
    DeviceGuard guard(device.index);
    HG_CUDA_CHECK(cudaMemcpyAsync(bytes.data_ptr(), table.data(), nbytes, cudaMemcpyHostToDevice,
                                  current_stream(device.index).handle()));
  }
  return bytes;
}

}  // namespace hg::cuda

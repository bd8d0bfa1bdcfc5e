// Registers the CUDA backend with core (Note [Backend hooks] in core/allocator.h)
// at static-initialisation time: loading the halfgrad shared library is enough
// for Device::cuda(i) tensors to allocate and copy. Nothing here touches the
// CUDA runtime until first use, so a process without a GPU pays nothing.
#include "core/allocator.h"
#include "core/error.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cuda_check.h"
#include "kernels/cuda/device_error.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {
namespace {

class CudaHooks final : public DeviceHooks {
 public:
  Allocator& allocator() override { return cuda_allocator(); }

  int device_count() override { return hg::cuda::device_count(); }

  // Copies on the current stream of the CUDA side and waits for it, so the
  // copy is ordered after kernels already queued there (which produced or
  // still read the source), and the bytes are ready when this returns.
  void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                  size_t n) override {
    if (n == 0) return;
    cudaMemcpyKind kind = cudaMemcpyDefault;
    int device = 0;
    if (dst_device.is_cuda() && src_device.is_cuda()) {
      device = dst_device.index;
      kind = cudaMemcpyDeviceToDevice;
      if (dst_device.index != src_device.index) {
        // Across devices: let the source's queued work finish, then a
        // peer copy (cudaMemcpyDefault infers it from the pointers).
        hg::cuda::synchronize(src_device.index);
        kind = cudaMemcpyDefault;
      }
    } else if (dst_device.is_cuda()) {
      device = dst_device.index;
      kind = cudaMemcpyHostToDevice;
    } else if (src_device.is_cuda()) {
      device = src_device.index;
      kind = cudaMemcpyDeviceToHost;
    } else {
      HG_FAIL("CUDA copy_bytes called for a CPU-to-CPU copy; use hg::copy_bytes");
    }
    DeviceGuard guard(device);
    const Stream stream = current_stream(device);
    if (kind == cudaMemcpyDeviceToHost) count_device_to_host_copy();  // Note [Host sync counter]
    HG_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, stream.handle()));
    stream.synchronize();
    // A device-to-host copy is a sync point: report errors kernels flagged
    // (Note [Device error flag] in kernels/cuda/device_error.h).
    if (src_device.is_cuda() && !dst_device.is_cuda()) check_device_errors(device);
  }

  void synchronize(Device device) override {
    hg::cuda::synchronize(device.index);
    check_device_errors(device.index);
  }
};

CudaHooks& cuda_hooks() {
  static CudaHooks hooks;
  return hooks;
}

// Static registration (the library is shared, so this always runs on load).
[[maybe_unused]] const bool kRegistered = [] {
  register_device_hooks(DeviceType::CUDA, &cuda_hooks());
  return true;
}();

}  // namespace
}  // namespace hg::cuda

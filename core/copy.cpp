#include "core/copy.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "core/convert.h"
#include "core/log.h"
#include "core/profiler.h"
#include "core/tensor.h"

namespace hg {

namespace {

// Visits every element of a strided N-d view pair in row-major order, calling
// fn(dst_offset, src_offset) with element offsets. The innermost dimension is
// a plain loop; the outer ones advance an odometer.
template <typename Fn>
void for_each_offset_pair(const Shape& sizes, const Shape& dst_strides, const Shape& src_strides,
                          Fn&& fn) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  if (rank == 0) {
    fn(int64_t{0}, int64_t{0});
    return;
  }
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  const int64_t inner = sizes[rank - 1];
  const int64_t dst_inner = dst_strides[rank - 1];
  const int64_t src_inner = src_strides[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t dst_base = 0, src_base = 0;
  while (true) {
    for (int64_t i = 0; i < inner; ++i) fn(dst_base + i * dst_inner, src_base + i * src_inner);
    int64_t d = rank - 2;
    for (; d >= 0; --d) {  // odometer over the outer dims
      ++index[d];
      dst_base += dst_strides[d];
      src_base += src_strides[d];
      if (index[d] < sizes[d]) break;
      dst_base -= index[d] * dst_strides[d];
      src_base -= index[d] * src_strides[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

std::array<CopyKernel, kNumDeviceTypes> g_copy_kernels{};
std::array<FillKernel, kNumDeviceTypes> g_fill_kernels{};
std::array<ArangeKernel, kNumDeviceTypes> g_arange_kernels{};
std::atomic<CpuConvertKernel> g_cpu_convert{nullptr};

Tensor stage_to_host(const Tensor& t) {
  const Storage& storage = t.storage();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = make_storage(storage->nbytes(), Device::cpu());
  copy_bytes(impl->storage->data(), Device::cpu(), storage->data(), storage->device(),
             storage->nbytes());
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->offset = t.offset();
  impl->dtype = t.dtype();
  return Tensor(impl);
}

void warn_staging_once(Device device) {
  static std::once_flag flag;
  std::call_once(flag, [&] {
    HG_LOG_INFO("no copy kernel registered for {}; copying through host memory", device.str());
  });
}

// Same-device copy on any device.
void copy_same_device(const Tensor& dst, const Tensor& src) {
  const DeviceType type = dst.device().type;
  profiler::declare_work(static_cast<double>(dst.nbytes() + src.nbytes()));  // Note [Profiler]
  if (type == DeviceType::CPU) {
    const profiler::WorkScope profiled(profiler::Kind::cpu_kernel, "cpu::copy");
    cpu::copy_strided(dst, src);
    return;
  }
  if (CopyKernel kernel = g_copy_kernels[static_cast<size_t>(type)]) {
    kernel(dst, src);
    return;
  }
  warn_staging_once(dst.device());
  Tensor host_dst = stage_to_host(dst);
  cpu::copy_strided(host_dst, stage_to_host(src));
  copy_bytes(dst.storage()->data(), dst.device(), host_dst.storage()->data(), Device::cpu(),
             dst.storage()->nbytes());
}

}  // namespace

void register_copy_kernel(DeviceType type, CopyKernel kernel) {
  g_copy_kernels[static_cast<size_t>(type)] = kernel;
}
void register_fill_kernel(DeviceType type, FillKernel kernel) {
  g_fill_kernels[static_cast<size_t>(type)] = kernel;
}

void register_arange_kernel(DeviceType type, ArangeKernel kernel) {
  g_arange_kernels[static_cast<size_t>(type)] = kernel;
}
void register_cpu_convert_kernel(CpuConvertKernel kernel) { g_cpu_convert.store(kernel); }
ArangeKernel arange_kernel(DeviceType type) { return g_arange_kernels[static_cast<size_t>(type)]; }

void copy_into(const Tensor& dst, const Tensor& src) {
  HG_CHECK(dst.defined() && src.defined(), "copy: both tensors must be defined");
  const Tensor source = src.sizes() == dst.sizes() ? src : src.expand(dst.sizes());
  if (dst.numel() == 0) return;
  if (dst.device() == source.device()) {
    copy_same_device(dst, source);
    return;
  }
  // Cross-device: contiguous, already-converted bytes on the source side ...
  Tensor packed = empty(dst.sizes(), {.dtype = dst.dtype(), .device = source.device()});
  copy_same_device(packed, source);
  // ... moved in one transfer, then scattered if dst is strided.
  if (dst.is_contiguous()) {
    copy_bytes(dst.data_ptr(), dst.device(), packed.data_ptr(), packed.device(), dst.nbytes());
    return;
  }
  Tensor landed = empty(dst.sizes(), {.dtype = dst.dtype(), .device = dst.device()});
  copy_bytes(landed.data_ptr(), landed.device(), packed.data_ptr(), packed.device(),
             dst.nbytes());
  copy_same_device(dst, landed);
}

void fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  const DeviceType type = dst.device().type;
  profiler::declare_work(static_cast<double>(dst.nbytes()));  // Note [Profiler]
  if (type == DeviceType::CPU) {
    const profiler::WorkScope profiled(profiler::Kind::cpu_kernel, "cpu::fill");
    cpu::fill_strided(dst, value);
    return;
  }
  if (FillKernel kernel = g_fill_kernels[static_cast<size_t>(type)]) {
    kernel(dst, value);
    return;
  }
  warn_staging_once(dst.device());
  Tensor host = empty(dst.sizes(), {.dtype = dst.dtype()});
  cpu::fill_strided(host, value);
  copy_into(dst, host);
}

namespace cpu {

void copy_strided(const Tensor& dst, const Tensor& src) {
  HG_DCHECK(dst.sizes() == src.sizes(), "copy_strided shapes ", dst.shape_str(), " vs ",
            src.shape_str());
  HG_DCHECK(dst.is_cpu() && src.is_cpu(), "copy_strided needs host tensors");
  if (dst.numel() == 0) return;
  // Same dtype, both contiguous: one memmove (memmove: views may overlap).
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  // Same dtype, rows contiguous on both sides (a transpose of outer dims,
  // e.g. attention's [B, T, H, D] -> [B, H, T, D]): one memcpy a row.
  const int64_t rank = dst.dim();
  if (dst.dtype() == src.dtype() && rank >= 2 && dst.strides()[rank - 1] == 1 && src.strides()[rank - 1] == 1 &&
      dst.sizes()[rank - 1] >= 8) {
    const int64_t item = static_cast<int64_t>(dtype_size(dst.dtype()));
    const int64_t row_bytes = dst.sizes()[rank - 1] * item;
    const Shape outer(dst.sizes().begin(), dst.sizes().end() - 1);
    const Shape dst_outer(dst.strides().begin(), dst.strides().end() - 1);
    const Shape src_outer(src.strides().begin(), src.strides().end() - 1);
    char* out = static_cast<char*>(dst.data_ptr());
    const char* in = static_cast<const char*>(src.data_ptr());
    for_each_offset_pair(outer, dst_outer, src_outer, [&](int64_t o, int64_t i) {
      std::memmove(out + o * item, in + i * item, static_cast<size_t>(row_bytes));
    });
    return;
  }
  if (dst.dtype() != src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    if (CpuConvertKernel kernel = g_cpu_convert.load(); kernel != nullptr && kernel(dst, src)) return;
  }
  dispatch_dtype(dst.dtype(), [&](auto dst_tag) {
    using D = decltype(dst_tag);
    dispatch_dtype(src.dtype(), [&](auto src_tag) {
      using S = decltype(src_tag);
      D* out = static_cast<D*>(dst.data_ptr());
      const S* in = static_cast<const S*>(src.data_ptr());
      for_each_offset_pair(dst.sizes(), dst.strides(), src.strides(),
                           [&](int64_t o, int64_t i) { out[o] = convert_value<D>(in[i]); });
    });
  });
}

void fill_strided(const Tensor& dst, double value) {
  dispatch_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = convert_value<T>(value);
    T* out = static_cast<T*>(dst.data_ptr());
    for_each_offset_pair(dst.sizes(), dst.strides(), dst.strides(),
                         [&](int64_t o, int64_t) { out[o] = v; });
  });
}

}  // namespace cpu
}  // namespace hg

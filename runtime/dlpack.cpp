// DLPack export and import (runtime/dlpack.h has the contract).
#include "runtime/dlpack.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

#ifdef HG_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"
#endif

namespace hg {

namespace {

// More dims than any real tensor has; bounds what a corrupt ndim can make us read.
constexpr int32_t kMaxDims = 64;

std::string dtype_str(DLDataType t) {
  return "{code " + std::to_string(t.code) + ", bits " + std::to_string(t.bits) + ", lanes " + std::to_string(t.lanes) +
         "}";
}

// ---- export ---------------------------------------------------------------------------

// What a DLManagedTensor(Versioned) made by to_dlpack owns: the tensor (so
// its storage stays alive) and the shape and strides arrays DLTensor points
// into. `managed` comes first so the deleter can find the whole block.
template <typename Managed>
struct Exported {
  Managed managed{};
  Tensor tensor;
  std::vector<int64_t> shape, strides;

  static void deleter(Managed* self) {
    if (self != nullptr) delete static_cast<Exported*>(self->manager_ctx);
  }
};

// DLPack's stream contract for a CUDA tensor handed to a consumer on `stream`
// (the values of __dlpack__(stream=...)).
void make_ready_for_consumer(const Tensor& t, std::optional<int64_t> stream) {
  if (t.is_cpu()) {
    HG_CHECK(!stream || *stream == -1, "to_dlpack: a CPU tensor takes no stream (got ", *stream,
             "); DLPack's stream argument is for device memory");
    return;
  }
#ifdef HG_WITH_CUDA
  const int64_t s = stream.value_or(1);  // unset: the legacy default stream
  HG_CHECK(s != 0,
           "to_dlpack: stream 0 is ambiguous for CUDA and refused by DLPack; pass 1 for the legacy default "
           "stream, 2 for the per-thread default stream or -1 for no synchronisation");
  HG_CHECK(s >= -1, "to_dlpack: stream ", s, " is not a CUDA stream (use -1, 1, 2 or a cudaStream_t)");
  if (s == -1) return;  // the consumer synchronises itself
  const int device = t.device().index;
  cuda::DeviceGuard guard(device);
  const cuda::Stream producer = cuda::current_stream(device);
  const cudaStream_t consumer = s == 1   ? cudaStreamLegacy
                                : s == 2 ? cudaStreamPerThread
                                         : reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(s));
  if (producer.is_default() ? s == 1 : producer.handle() == consumer) return;  // the same stream
  // The work queued so far on halfgrad's stream happens before anything the
  // consumer queues next on its own: an event, and a device-side wait.
  cuda::Event ready(/*enable_timing=*/false);
  ready.record(producer);
  HG_CUDA_CHECK(cudaStreamWaitEvent(consumer, ready.handle(), 0));
#else
  HG_FAIL("to_dlpack: a ", t.device().str(), " tensor in a build without CUDA");
#endif
}

template <typename Managed>
Managed* export_tensor(const Tensor& t, const DLPackOptions& options, const char* op) {
  HG_CHECK(t.defined(), op, ": the tensor is undefined");
  HG_CHECK(!t.requires_grad(), op,
           ": cannot export a tensor that requires grad (DLPack carries no autograd "
           "graph); export t.detach()");
  make_ready_for_consumer(t, options.stream);
  auto owner = std::make_unique<Exported<Managed>>();
  owner->tensor = t.detach();  // shares the storage; cut off from the graph
  owner->shape.assign(t.sizes().begin(), t.sizes().end());
  owner->strides.assign(t.strides().begin(), t.strides().end());
  DLTensor& dl = owner->managed.dl_tensor;
  dl.data = t.data_ptr();  // the first element; null only for an empty storage
  dl.device = to_dlpack_device(t.device());
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = to_dlpack_dtype(t.dtype());
  dl.shape = owner->shape.empty() ? nullptr : owner->shape.data();
  dl.strides = owner->strides.empty() ? nullptr : owner->strides.data();
  dl.byte_offset = 0;
  owner->managed.manager_ctx = owner.get();
  owner->managed.deleter = &Exported<Managed>::deleter;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    owner->managed.version = DLPackVersion{kDLPackMajorVersion, kDLPackMinorVersion};
    owner->managed.flags = options.read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  } else {
    HG_CHECK(!options.read_only, op, ": read_only needs the versioned export (to_dlpack_versioned)");
  }
  return &owner.release()->managed;
}

// ---- import ---------------------------------------------------------------------------

// Calls the producer's deleter exactly once: from the storage's release when
// the import succeeds, here when it throws.
template <typename Managed>
struct DeleterGuard {
  Managed* managed;
  ~DeleterGuard() {
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }
};

template <typename Managed>
Tensor import_tensor(Managed* managed, const char* op) {
  HG_CHECK(managed != nullptr, op, ": null DLManagedTensor");
  DeleterGuard<Managed> guard{managed};
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    // A different major version may lay the struct out differently: only the
    // deleter (first fields, same in every version) may be touched.
    HG_CHECK(managed->version.major == kDLPackMajorVersion, op, ": DLPack version ", managed->version.major, ".",
             managed->version.minor, " is not supported (this build reads ", kDLPackMajorVersion, ".x)");
    HG_CHECK((managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) == 0, op,
             ": the tensor is read-only (DLPACK_FLAG_BITMASK_READ_ONLY) and halfgrad tensors are writable; "
             "copy it on the producer's side first");
  }
  const DLTensor& dl = managed->dl_tensor;
  HG_CHECK(dl.ndim >= 0 && dl.ndim <= kMaxDims, op, ": ndim ", dl.ndim, " is out of range [0, ", kMaxDims, "]");
  HG_CHECK(dl.ndim == 0 || dl.shape != nullptr, op, ": shape is null for a ", dl.ndim, "-d tensor");
  const DType dtype = dtype_from_dlpack(dl.dtype);
  const Device device = device_from_dlpack(dl.device);
  check_device(device);
  const auto elem = static_cast<int64_t>(dtype_size(dtype));

  Shape sizes(static_cast<size_t>(dl.ndim)), strides;
  for (int32_t d = 0; d < dl.ndim; ++d) {
    HG_CHECK(dl.shape[d] >= 0, op, ": dim ", d, " has negative size ", dl.shape[d]);
    sizes[static_cast<size_t>(d)] = dl.shape[d];
  }
  const int64_t numel = numel_of(sizes);
  if (dl.strides == nullptr) {  // compact row-major
    strides = contiguous_strides(sizes);
  } else {
    strides.assign(dl.strides, dl.strides + dl.ndim);
    for (int32_t d = 0; d < dl.ndim; ++d) {
      // A stride along a dim of size 0 or 1 is never stepped: any value will do.
      if (sizes[static_cast<size_t>(d)] <= 1)
        strides[static_cast<size_t>(d)] = std::max<int64_t>(strides[static_cast<size_t>(d)], 0);
      HG_CHECK(strides[static_cast<size_t>(d)] >= 0, op, ": dim ", d, " has negative stride ", dl.strides[d],
               "; halfgrad views have none (make the array contiguous on the producer's side first)");
    }
  }
  // Elements the view reaches (0 when it has none).
  const int64_t extent = numel == 0 ? 0 : view_extent(sizes, strides, 0, op);
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  if (extent == 0) {
    impl->storage = make_storage(0, device);  // nothing to view; the guard frees the producer's tensor
    return Tensor(std::move(impl));
  }
  HG_CHECK(dl.data != nullptr, op, ": data is null for a tensor of ", numel, " elements");
  HG_CHECK(dl.byte_offset <= static_cast<uint64_t>(INT64_MAX), op, ": byte_offset ", dl.byte_offset, " is too large");
  void* first = static_cast<char*>(dl.data) + dl.byte_offset;
  HG_CHECK(reinterpret_cast<uintptr_t>(first) % static_cast<uintptr_t>(elem) == 0, op, ": data + byte_offset (", first,
           ") is not aligned to the ", elem, "-byte ", dtype_name(dtype), " elements");
  const size_t nbytes = static_cast<size_t>(checked_mul(extent, elem, op, "the byte size"));
  impl->storage = make_external_storage(first, nbytes, device, [managed] {
    if (managed->deleter != nullptr) managed->deleter(managed);
  });
  guard.managed = nullptr;  // the storage calls the deleter from here on
  return Tensor(std::move(impl));
}

}  // namespace

// ---- dtypes and devices ---------------------------------------------------------------------

DLDataType to_dlpack_dtype(DType dtype) {
  switch (dtype) {
    case kF32:
      return {static_cast<uint8_t>(kDLFloat), 32, 1};
    case kF64:
      return {static_cast<uint8_t>(kDLFloat), 64, 1};
    case kF16:
      return {static_cast<uint8_t>(kDLFloat), 16, 1};
    case kBF16:
      return {static_cast<uint8_t>(kDLBfloat), 16, 1};
    case kI64:
      return {static_cast<uint8_t>(kDLInt), 64, 1};
    case kI32:
      return {static_cast<uint8_t>(kDLInt), 32, 1};
    case kU8:
      return {static_cast<uint8_t>(kDLUInt), 8, 1};
    case kBool:
      return {kDLPackBoolCode, 8, 1};
    case kF8E4M3:
      return {kDLPackFloat8E4M3FnCode, 8, 1};
    case kF8E5M2:
      return {kDLPackFloat8E5M2Code, 8, 1};
  }
  HG_FAIL("to_dlpack: dtype ", dtype_name(dtype), " has no DLPack type");
}

DType dtype_from_dlpack(DLDataType t) {
  HG_CHECK(t.lanes == 1, "from_dlpack: vector dtypes (lanes ", t.lanes, ") are not supported");
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 32) return kF32;
      if (t.bits == 64) return kF64;
      if (t.bits == 16) return kF16;
      break;
    case kDLBfloat:
      if (t.bits == 16) return kBF16;
      break;
    case kDLInt:
      if (t.bits == 64) return kI64;
      if (t.bits == 32) return kI32;
      break;
    case kDLUInt:
      if (t.bits == 8) return kU8;
      break;
    case kDLPackBoolCode:
      if (t.bits == 8) return kBool;
      break;
    case kDLPackFloat8E4M3FnCode:
      if (t.bits == 8) return kF8E4M3;
      break;
    case kDLPackFloat8E5M2Code:
      if (t.bits == 8) return kF8E5M2;
      break;
    default:
      break;
  }
  HG_FAIL("from_dlpack: DLPack dtype ", dtype_str(t),
          " has no halfgrad dtype (f32, f64, f16, bf16, f8e4m3, f8e5m2, i64, i32, u8, bool); convert it on the "
          "producer's side");
}

DLDevice to_dlpack_device(Device device) {
  if (device.is_cpu()) return {kDLCPU, 0};
  return {kDLCUDA, device.index};
}

Device device_from_dlpack(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: ordinary host memory for reading and writing
      return Device::cpu();
    case kDLCUDA:
      HG_CHECK(device.device_id >= 0, "from_dlpack: CUDA device index ", device.device_id, " is negative");
      return Device::cuda(device.device_id);
    default:
      HG_FAIL("from_dlpack: DLPack device type ", static_cast<int>(device.device_type),
              " is not supported (kDLCPU, kDLCUDAHost and kDLCUDA are)");
  }
}

std::optional<int64_t> dlpack_stream(Device device) {
  if (device.is_cpu()) return std::nullopt;
#ifdef HG_WITH_CUDA
  const cuda::Stream s = cuda::current_stream(device.index);
  return s.is_default() ? int64_t{1} : static_cast<int64_t>(reinterpret_cast<uintptr_t>(s.handle()));
#else
  HG_FAIL("dlpack_stream: ", device.str(), " in a build without CUDA");
#endif
}

// ---- the four entry points ----------------------------------------------------------------

DLManagedTensor* to_dlpack(const Tensor& t, const DLPackOptions& options) {
  return export_tensor<DLManagedTensor>(t, options, "to_dlpack");
}

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, const DLPackOptions& options) {
  return export_tensor<DLManagedTensorVersioned>(t, options, "to_dlpack_versioned");
}

Tensor from_dlpack(DLManagedTensor* managed) { return import_tensor(managed, "from_dlpack"); }

Tensor from_dlpack(DLManagedTensorVersioned* managed) { return import_tensor(managed, "from_dlpack"); }

}  // namespace hg

// cuda-emu host runtime: errors, devices and memory (see cuda_runtime_api.h).
//
// Note [Emulated device memory]
// Device memory is ordinary heap memory so that AddressSanitizer, which tracks
// the exact requested size of every heap block, reports a kernel that reads or
// writes one element past its buffer. Hence: exactly `size` bytes from
// posix_memalign (256-byte aligned like cudaMalloc, no padding), filled with
// 0xFF (NaN in f32/f16/bf16) so a kernel that reads memory nobody wrote
// produces NaN instead of plausible zeros. A per-device capacity turns the
// host's large RAM into a small GPU for out-of-memory tests.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <hg_emu_runtime.h>

#include "runtime/emu/runtime_internal.h"

namespace hg::emu {
namespace {

struct Allocation {
  size_t size = 0;
  int device = 0;
  bool pinned_host = false;  // cudaMallocHost/cudaHostAlloc, not device memory
};

size_t env_size_mb(const char* name, size_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') return fallback;
  return static_cast<size_t>(mb) << 20;
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0') return fallback;
  return static_cast<int>(std::clamp<long>(value, lo, hi));
}

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;  // keyed by base address
  size_t capacity = env_size_mb("HG_EMU_DEVICE_MEMORY_MB", kDefaultDeviceMemoryCapacity);
  int device_count = env_int("HG_EMU_DEVICE_COUNT", 1, 0, detail::kMaxDevices);
  size_t in_use[detail::kMaxDevices] = {};
  size_t live_count[detail::kMaxDevices] = {};
  std::set<const CUstream_st*> streams;
  std::set<const CUevent_st*> events;
};

// Immortal: kernels and tensors freed from static destructors may still call
// cudaFree after this translation unit's statics are gone. The memory it
// points to stays reachable, so LeakSanitizer does not report it.
State& state() {
  static State* s = new State;
  return *s;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_current_device = 0;

// The live allocation containing [ptr, ptr + n), or nullptr. Caller holds the
// mutex. n == 0 asks only that ptr lies inside (or at the base of) one.
const Allocation* find_allocation(State& s, const void* ptr, size_t n) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  const uintptr_t base = it->first;
  const size_t size = it->second.size;
  if (address - base >= std::max<size_t>(size, 1)) return nullptr;
  if (n > size - (address - base)) return nullptr;
  return &it->second;
}

bool is_device_range_locked(State& s, const void* ptr, size_t n) {
  const Allocation* a = find_allocation(s, ptr, n);
  return a != nullptr && !a->pinned_host;
}

// Whether `ptr` points into device memory (for cudaMemcpyDefault). A pointer
// inside a device allocation whose range overflows it is an error, reported
// by returning `true` with *in_range == false.
bool classify(State& s, const void* ptr, size_t n, bool* in_range) {
  const Allocation* start = find_allocation(s, ptr, 0);
  if (start == nullptr || start->pinned_host) {
    *in_range = true;
    return false;
  }
  *in_range = find_allocation(s, ptr, n) != nullptr;
  return true;
}

}  // namespace

void set_last_error(cudaError_t error) {
  // A successful launch does not clear an earlier error in the real runtime.
  if (error != cudaSuccess) t_last_error = error;
}

void set_device_memory_capacity(size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.capacity = bytes;
}

size_t device_memory_capacity() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.capacity;
}

size_t device_memory_in_use(int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return device >= 0 && device < detail::kMaxDevices ? s.in_use[device] : 0;
}

size_t device_allocation_count(int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return device >= 0 && device < detail::kMaxDevices ? s.live_count[device] : 0;
}

namespace {
std::atomic<unsigned> g_device_count_generation{0};
std::atomic<size_t> g_pageable_async_copies{0};
}  // namespace

size_t pageable_async_copies() { return g_pageable_async_copies.load(std::memory_order_relaxed); }

void set_device_count(int count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.device_count = std::clamp(count, 0, detail::kMaxDevices);
  g_device_count_generation.fetch_add(1, std::memory_order_release);
}

unsigned device_count_generation() { return g_device_count_generation.load(std::memory_order_acquire); }

int device_of_pointer(const void* ptr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Allocation* a = find_allocation(s, ptr, 0);
  return a != nullptr && !a->pinned_host ? a->device : -1;
}

bool is_device_range(const void* ptr, size_t nbytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return is_device_range_locked(s, ptr, nbytes);
}

bool is_valid_stream(cudaStream_t stream) { return detail::is_valid_stream(stream); }

namespace detail {

cudaError_t fail(cudaError_t error) {
  set_last_error(error);
  return error;
}

int device_count() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.device_count;
}

int current_device() { return t_current_device; }

bool is_valid_stream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return true;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.streams.count(stream) != 0;
}

bool is_valid_event(cudaEvent_t event) {
  if (event == nullptr) return false;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.count(event) != 0;
}

void register_stream(CUstream_st* stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.streams.insert(stream);
}

bool unregister_stream(CUstream_st* stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.streams.erase(stream) != 0;
}

void register_event(CUevent_st* event) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.events.insert(event);
}

bool unregister_event(CUevent_st* event) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.erase(event) != 0;
}

}  // namespace detail
}  // namespace hg::emu

using hg::emu::detail::fail;

// ---- errors -------------------------------------------------------------------

cudaError_t cudaGetLastError(void) {
  const cudaError_t error = hg::emu::t_last_error;
  hg::emu::t_last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError(void) { return hg::emu::t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (static_cast<int>(error)) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError:
      return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources:
      return "cudaErrorLaunchOutOfResources";
    case cudaErrorAssert:
      return "cudaErrorAssert";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorUnknown:
      return "cudaErrorUnknown";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (static_cast<int>(error)) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInitializationError:
      return "initialization error";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorAssert:
      return "device-side assert triggered";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNotSupported:
      return "operation not supported";
    case cudaErrorUnknown:
      return "unknown error";
    default:
      return "unrecognized error code";
  }
}

// ---- devices ------------------------------------------------------------------

namespace {

// cudaErrorNoDevice on a machine "without a GPU" (set_device_count(0)),
// cudaErrorInvalidDevice for an index out of range, else success.
cudaError_t check_device_index(int device) {
  const int count = hg::emu::detail::device_count();
  if (count == 0) return cudaErrorNoDevice;
  if (device < 0 || device >= count) return cudaErrorInvalidDevice;
  return cudaSuccess;
}

cudaError_t check_current_device() { return check_device_index(hg::emu::t_current_device); }

void fill_properties(cudaDeviceProp* prop, int device) {
  namespace emu = hg::emu;
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "halfgrad cuda-emu (sm_%d%d)", emu::kComputeMajor, emu::kComputeMinor);
  prop->totalGlobalMem = emu::device_memory_capacity();
  prop->sharedMemPerBlock = emu::kSharedMemPerBlock;
  prop->regsPerBlock = 65536;
  prop->warpSize = emu::kWarpSize;
  prop->maxThreadsPerBlock = emu::kMaxThreadsPerBlock;
  prop->maxThreadsDim[0] = static_cast<int>(emu::kMaxBlockDimX);
  prop->maxThreadsDim[1] = static_cast<int>(emu::kMaxBlockDimY);
  prop->maxThreadsDim[2] = static_cast<int>(emu::kMaxBlockDimZ);
  prop->maxGridSize[0] = static_cast<int>(emu::kMaxGridDimX);
  prop->maxGridSize[1] = static_cast<int>(emu::kMaxGridDimY);
  prop->maxGridSize[2] = static_cast<int>(emu::kMaxGridDimZ);
  prop->totalConstMem = 64 * 1024;
  prop->major = emu::kComputeMajor;
  prop->minor = emu::kComputeMinor;
  prop->multiProcessorCount = emu::kMultiProcessorCount;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  prop->ECCEnabled = 1;
  prop->pciBusID = device + 1;
  prop->asyncEngineCount = 3;
  prop->unifiedAddressing = 1;
  prop->memoryBusWidth = 5120;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->persistingL2CacheMaxSize = 30 * 1024 * 1024;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->streamPrioritiesSupported = 1;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerMultiprocessor = 65536;
  prop->managedMemory = 1;
  prop->sharedMemPerBlockOptin = emu::kSharedMemPerBlockOptin;
  prop->maxBlocksPerMultiProcessor = 32;
  prop->reservedSharedMemPerBlock = 1024;
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = hg::emu::detail::device_count();
  return *count == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  if (hg::emu::detail::device_count() == 0) return fail(cudaErrorNoDevice);
  *device = hg::emu::t_current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (const cudaError_t e = check_device_index(device); e != cudaSuccess) return fail(e);
  hg::emu::t_current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = check_device_index(device); e != cudaSuccess) return fail(e);
  fill_properties(prop, device);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = check_device_index(device); e != cudaSuccess) return fail(e);
  cudaDeviceProp p;
  fill_properties(&p, device);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = p.maxThreadsPerBlock;
      break;
    case cudaDevAttrMaxBlockDimX:
      *value = p.maxThreadsDim[0];
      break;
    case cudaDevAttrMaxBlockDimY:
      *value = p.maxThreadsDim[1];
      break;
    case cudaDevAttrMaxBlockDimZ:
      *value = p.maxThreadsDim[2];
      break;
    case cudaDevAttrMaxGridDimX:
      *value = p.maxGridSize[0];
      break;
    case cudaDevAttrMaxGridDimY:
      *value = p.maxGridSize[1];
      break;
    case cudaDevAttrMaxGridDimZ:
      *value = p.maxGridSize[2];
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(p.sharedMemPerBlock);
      break;
    case cudaDevAttrTotalConstantMemory:
      *value = static_cast<int>(p.totalConstMem);
      break;
    case cudaDevAttrWarpSize:
      *value = p.warpSize;
      break;
    case cudaDevAttrMaxRegistersPerBlock:
      *value = p.regsPerBlock;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = p.multiProcessorCount;
      break;
    case cudaDevAttrL2CacheSize:
      *value = p.l2CacheSize;
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = p.maxThreadsPerMultiProcessor;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = static_cast<int>(p.sharedMemPerMultiprocessor);
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    default:
      return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  // Streams run work at enqueue time: there is never anything to wait for.
  if (const cudaError_t e = check_current_device(); e != cudaSuccess) return fail(e);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (leastPriority != nullptr) *leastPriority = hg::emu::detail::kLeastStreamPriority;
  if (greatestPriority != nullptr) *greatestPriority = hg::emu::detail::kGreatestStreamPriority;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return fail(cudaErrorInvalidValue);
  *runtimeVersion = 13000;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return fail(cudaErrorInvalidValue);
  // 0 is what the real call reports when no driver is installed.
  *driverVersion = hg::emu::detail::device_count() == 0 ? 0 : 13000;
  return cudaSuccess;
}

// ---- memory -------------------------------------------------------------------

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  using hg::emu::state;
  if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = check_current_device(); e != cudaSuccess) return fail(e);
  if (size == 0) {  // like the real runtime: success and a null pointer
    *devPtr = nullptr;
    return cudaSuccess;
  }
  const int device = hg::emu::t_current_device;
  auto& s = state();
  {
    // Reserve under the lock so concurrent cudaMallocs cannot overshoot.
    std::lock_guard<std::mutex> lock(s.mutex);
    if (size > s.capacity || s.in_use[device] > s.capacity - size) {
      return fail(cudaErrorMemoryAllocation);
    }
    s.in_use[device] += size;
  }
  void* ptr = nullptr;
  if (posix_memalign(&ptr, hg::emu::kDeviceAlignment, size) != 0 || ptr == nullptr) {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.in_use[device] -= size;
    return fail(cudaErrorMemoryAllocation);
  }
  std::memset(ptr, hg::emu::kPoisonByte, size);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.allocations[reinterpret_cast<uintptr_t>(ptr)] = {size, device, false};
    ++s.live_count[device];
  }
  *devPtr = ptr;
  return cudaSuccess;
}

cudaError_t cudaFree(void* devPtr) {
  using hg::emu::state;
  if (devPtr == nullptr) return cudaSuccess;
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(devPtr));
    if (it == s.allocations.end() || it->second.pinned_host) return fail(cudaErrorInvalidValue);
    s.in_use[it->second.device] -= it->second.size;
    --s.live_count[it->second.device];
    s.allocations.erase(it);
  }
  std::free(devPtr);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  using hg::emu::state;
  if (pHost == nullptr || flags > 0x07) return fail(cudaErrorInvalidValue);
  if (size == 0) {
    *pHost = nullptr;
    return cudaSuccess;
  }
  void* ptr = nullptr;
  if (posix_memalign(&ptr, hg::emu::kDeviceAlignment, size) != 0 || ptr == nullptr) {
    return fail(cudaErrorMemoryAllocation);
  }
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.allocations[reinterpret_cast<uintptr_t>(ptr)] = {size, -1, true};
  }
  *pHost = ptr;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void* ptr) {
  using hg::emu::state;
  if (ptr == nullptr) return cudaSuccess;
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == s.allocations.end() || !it->second.pinned_host) return fail(cudaErrorInvalidValue);
    s.allocations.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  using hg::emu::state;
  if (free == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = check_current_device(); e != cudaSuccess) return fail(e);
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const size_t used = s.in_use[hg::emu::t_current_device];
  *total = s.capacity;
  *free = s.capacity > used ? s.capacity - used : 0;
  return cudaSuccess;
}

namespace hg::emu {
namespace {
// Counts an asynchronous copy whose host side `host` is pageable memory.
void note_host_side(State& s, const void* host, bool stream_call) {
  if (!stream_call) return;
  const Allocation* a = find_allocation(s, host, 0);
  if (a == nullptr || !a->pinned_host) g_pageable_async_copies.fetch_add(1, std::memory_order_relaxed);
}

cudaError_t memcpy_impl(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                        bool stream_call);
}  // namespace
}  // namespace hg::emu

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  return hg::emu::memcpy_impl(dst, src, count, kind, stream, true);
}

namespace hg::emu {
namespace {
cudaError_t memcpy_impl(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                        bool stream_call) {
  using hg::emu::state;
  if (!hg::emu::detail::is_valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  auto& s = state();
  {
    // The device side of a copy must lie inside one live cudaMalloc block:
    // this is where a wrong size or a stale pointer is caught even without
    // AddressSanitizer.
    std::lock_guard<std::mutex> lock(s.mutex);
    bool ok = true;
    switch (kind) {
      case cudaMemcpyHostToHost:
        break;
      case cudaMemcpyHostToDevice:
        ok = hg::emu::is_device_range_locked(s, dst, count);
        hg::emu::note_host_side(s, src, stream_call);
        break;
      case cudaMemcpyDeviceToHost:
        ok = hg::emu::is_device_range_locked(s, src, count);
        hg::emu::note_host_side(s, dst, stream_call);
        break;
      case cudaMemcpyDeviceToDevice:
        ok = hg::emu::is_device_range_locked(s, dst, count) && hg::emu::is_device_range_locked(s, src, count);
        break;
      case cudaMemcpyDefault: {
        bool dst_ok = true, src_ok = true;
        const bool dst_device = hg::emu::classify(s, dst, count, &dst_ok);
        const bool src_device = hg::emu::classify(s, src, count, &src_ok);
        if (dst_device != src_device) hg::emu::note_host_side(s, dst_device ? src : dst, stream_call);
        ok = dst_ok && src_ok;
        break;
      }
      default:
        ok = false;
    }
    if (!ok) return fail(cudaErrorInvalidValue);
  }
  // memmove: overlapping device-to-device copies are harmless here.
  std::memmove(dst, src, count);
  return cudaSuccess;
}
}  // namespace
}  // namespace hg::emu

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return hg::emu::memcpy_impl(dst, src, count, kind, nullptr, false);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  if (!hg::emu::detail::is_valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (count == 0) return cudaSuccess;
  if (!hg::emu::is_device_range(devPtr, count)) return fail(cudaErrorInvalidValue);
  std::memset(devPtr, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) { return cudaMemsetAsync(devPtr, value, count, nullptr); }

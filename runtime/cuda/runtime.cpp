// The CUDA runtime layer (see runtime.h). Host C++ over the CUDA runtime API;
// built unchanged against the real runtime (gpu) and the emulator's shim (emu).
#include "runtime/cuda/runtime.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#if defined(HG_CUDA_EMU)
#include <hg_emu_runtime.h>
#endif

#include "core/error.h"
#include "runtime/cuda/cuda_check.h"

namespace hg::cuda {

// ---- devices ------------------------------------------------------------------

namespace {

int query_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // No driver, no GPU, or a driver too old: all of these mean zero devices.
    // Clear the error so it does not surface at an unrelated later check.
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

// Which configuration the cached count belongs to: a real GPU's device count
// is fixed for the life of the process (CUDA_VISIBLE_DEVICES is read once, at
// initialisation); the emulator's changes with hg::emu::set_device_count.
uint64_t device_count_generation() {
#if defined(HG_CUDA_EMU)
  return ::hg::emu::device_count_generation();
#else
  return 0;
#endif
}

}  // namespace

// Queried once and cached: DeviceGuard and every launcher that names a device
// check the index, and cudaGetDeviceCount costs a driver call each time.
int device_count() {
  // (generation << 32) | (count + 1); 0 until the first query.
  static std::atomic<uint64_t> cached{0};
  const uint64_t generation = device_count_generation();
  const uint64_t entry = cached.load(std::memory_order_acquire);
  if (entry != 0 && (entry >> 32) == generation) return static_cast<int>(entry & 0xffffffffu) - 1;
  const int count = query_device_count();
  cached.store((generation << 32) | static_cast<uint64_t>(count + 1), std::memory_order_release);
  return count;
}

bool is_available() { return device_count() > 0; }

void check_device_index(int device) {
  const int count = device_count();
  HG_CHECK(device >= 0 && device < count, "requested cuda:", device, " but ", count, " CUDA device(s) are available",
           count == 0 ? " (no driver or GPU found; use Device::cpu() or the emu build)"
                      : "; use an index below the device count (CUDA_VISIBLE_DEVICES "
                        "renumbers the visible devices from 0)");
}

int current_device() {
  int device = 0;
  HG_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void set_device(int device) {
  check_device_index(device);
  HG_CUDA_CHECK(cudaSetDevice(device));
}

const cudaDeviceProp& device_properties(int device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  // Entries are never freed or moved once created, so references stay valid.
  static std::mutex mutex;
  static std::vector<std::unique_ptr<cudaDeviceProp>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() <= static_cast<size_t>(device)) cache.resize(device + 1);
  if (!cache[device]) {
    auto prop = std::make_unique<cudaDeviceProp>();
    HG_CUDA_CHECK(cudaGetDeviceProperties(prop.get(), device));
    cache[device] = std::move(prop);
  }
  return *cache[device];
}

void synchronize(int device) {
  DeviceGuard guard(device);
  count_synchronization();
  HG_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- host sync counter --------------------------------------------------------

namespace {
std::atomic<int64_t> g_d2h_copies{0};
std::atomic<int64_t> g_synchronizations{0};
}  // namespace

HostSyncCounts host_sync_counts() {
  return {g_d2h_copies.load(std::memory_order_relaxed), g_synchronizations.load(std::memory_order_relaxed)};
}
void count_device_to_host_copy() { g_d2h_copies.fetch_add(1, std::memory_order_relaxed); }
void count_synchronization() { g_synchronizations.fetch_add(1, std::memory_order_relaxed); }

DeviceGuard::DeviceGuard(int device) {
  if (device < 0) return;
  check_device_index(device);
  const int current = current_device();
  if (current != device) {
    HG_CUDA_CHECK(cudaSetDevice(device));
    original_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  // Restoring a device that was valid a moment ago cannot fail in practice;
  // a destructor must not throw, so any error is dropped.
  if (original_ >= 0 && cudaSetDevice(original_) != cudaSuccess) (void)cudaGetLastError();
}

// ---- streams ------------------------------------------------------------------

namespace {

int resolve_device(int device) {
  if (device < 0) return current_device();
  check_device_index(device);
  return device;
}

// Per-thread current stream of each device; empty slots mean the default.
std::vector<Stream>& thread_current_streams() {
  thread_local std::vector<Stream> streams;
  return streams;
}

}  // namespace

Stream Stream::default_stream(int device) { return Stream(resolve_device(device), nullptr, {}); }

Stream Stream::create(int device, int priority, bool non_blocking) {
  device = resolve_device(device);
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  HG_CUDA_CHECK(
      cudaStreamCreateWithPriority(&stream, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault, priority));
  std::shared_ptr<void> owner(stream, [](void* s) {
    // Runs from destructors (possibly at thread exit): never throws.
    if (cudaStreamDestroy(static_cast<cudaStream_t>(s)) != cudaSuccess) (void)cudaGetLastError();
  });
  return Stream(device, stream, std::move(owner));
}

std::pair<int, int> Stream::priority_range() {
  int least = 0, greatest = 0;
  HG_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return {least, greatest};
}

int Stream::priority() const {
  int priority = 0;
  HG_CUDA_CHECK(cudaStreamGetPriority(stream_, &priority));
  return priority;
}

bool Stream::query() const {
  const cudaError_t status = cudaStreamQuery(stream_);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error
    return false;
  }
  HG_CUDA_CHECK(status);
  return true;
}

void Stream::synchronize() const {
  count_synchronization();
  HG_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Stream::wait(const Event& event) const {
  if (!event.is_recorded()) return;
  HG_CUDA_CHECK(cudaStreamWaitEvent(stream_, event.handle(), 0));
}

Stream current_stream(int device) {
  device = resolve_device(device);
  auto& streams = thread_current_streams();
  if (static_cast<size_t>(device) < streams.size() && streams[device].device() == device) {
    return streams[device];
  }
  return Stream::default_stream(device);
}

void set_current_stream(const Stream& stream) {
  auto& streams = thread_current_streams();
  const auto device = static_cast<size_t>(stream.device());
  if (streams.size() <= device) {
    // Fill new slots with each device's own default stream.
    for (size_t d = streams.size(); d <= device; ++d) {
      streams.push_back(Stream::default_stream(static_cast<int>(d)));
    }
  }
  streams[device] = stream;
}

StreamGuard::StreamGuard(const Stream& stream)
    : device_guard_(stream.device()), previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() { set_current_stream(previous_); }

// ---- events -------------------------------------------------------------------

Event::Event(bool enable_timing, bool blocking_sync)
    : flags_((enable_timing ? cudaEventDefault : cudaEventDisableTiming) |
             (blocking_sync ? cudaEventBlockingSync : 0u)) {}

Event::~Event() {
  if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) (void)cudaGetLastError();
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(std::exchange(other.device_, -1)), flags_(other.flags_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) (void)cudaGetLastError();
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
    flags_ = other.flags_;
  }
  return *this;
}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  if (event_ == nullptr) {
    DeviceGuard guard(stream.device());
    HG_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags_));
    device_ = stream.device();
  }
  HG_CHECK(device_ == stream.device(), "Event::record: the event belongs to cuda:", device_,
           " but the stream is on cuda:", stream.device(), "; use one Event per device");
  DeviceGuard guard(device_);
  HG_CUDA_CHECK(cudaEventRecord(event_, stream.handle()));
}

void Event::synchronize() const {
  if (event_ == nullptr) return;
  count_synchronization();
  HG_CUDA_CHECK(cudaEventSynchronize(event_));
}

bool Event::query() const {
  if (event_ == nullptr) return true;
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  HG_CUDA_CHECK(status);
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  HG_CHECK(is_recorded() && end.is_recorded(),
           "Event::elapsed_ms needs both events recorded; call record() on each first");
  HG_CHECK(!(flags_ & cudaEventDisableTiming) && !(end.flags_ & cudaEventDisableTiming),
           "Event::elapsed_ms needs events created with enable_timing=true");
  end.synchronize();
  float ms = 0.0f;
  HG_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

// ---- pinned host memory -------------------------------------------------------

PinnedBuffer::PinnedBuffer(size_t nbytes) : size_(nbytes) {
  if (nbytes == 0) return;
  HG_CUDA_CHECK(cudaHostAlloc(&data_, nbytes, cudaHostAllocDefault));
}

PinnedBuffer::~PinnedBuffer() {
  // A destructor cannot act on a failure; clear it so it is not reported later.
  if (data_ != nullptr && cudaFreeHost(data_) != cudaSuccess) (void)cudaGetLastError();
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr && cudaFreeHost(data_) != cudaSuccess) (void)cudaGetLastError();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

// ---- library handles ----------------------------------------------------------

namespace {

// One set of handles per (thread, device). cuBLAS and cuDNN handles are not
// safe to share between threads that drive different streams, and creating
// one costs milliseconds, so each thread keeps its own for its lifetime.
struct ThreadHandles {
  std::vector<cublasHandle_t> cublas;
  std::vector<cublasLtHandle_t> cublaslt;
  std::vector<cudnnHandle_t> cudnn;
  // The stream each handle is bound to: rebinding only when it changes
  // matters for cuBLAS, whose cublasSetStream also resets its workspace.
  std::vector<cudaStream_t> cublas_stream;
  std::vector<cudaStream_t> cudnn_stream;

  ~ThreadHandles() {
    // Destroy failures at thread/process exit cannot be acted upon.
    for (cublasHandle_t h : cublas) {
      if (h != nullptr) (void)cublasDestroy(h);
    }
    for (cublasLtHandle_t h : cublaslt) {
      if (h != nullptr) (void)cublasLtDestroy(h);
    }
    for (cudnnHandle_t h : cudnn) {
      if (h != nullptr) (void)cudnnDestroy(h);
    }
  }
};

ThreadHandles& thread_handles() {
  thread_local ThreadHandles handles;
  return handles;
}

template <typename Handle>
Handle& handle_slot(std::vector<Handle>& slots, int device) {
  if (slots.size() <= static_cast<size_t>(device)) slots.resize(device + 1, nullptr);
  return slots[device];
}

// Note [Library handle streams]
// A handle remembers the stream it was last bound to, and is rebound only
// when the current stream differs. A stream destroyed and another created at
// the same address is the same cudaStream_t value to the library, so the
// remembered binding stays right.

}  // namespace

cublasContext* cublas_handle() {
  const int device = current_device();
  cublasHandle_t& handle = handle_slot(thread_handles().cublas, device);
  if (handle == nullptr) {
    HG_CUBLAS_CHECK(cublasCreate(&handle));
    // Host-side alpha/beta; fp32 GEMMs stay fp32 unless a caller opts into
    // TF32 per call (CUBLAS_COMPUTE_32F_FAST_TF32).
    HG_CUBLAS_CHECK(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
    // 16-bit GEMMs accumulate in fp32 (CUBLAS_COMPUTE_32F): forbid split-K
    // reductions in the 16-bit output type, so the contract "fp32
    // accumulation, one rounding" holds on a GPU too (kernels/gemm/README.md, "Reduced-precision reduction").
    HG_CUBLAS_CHECK(cublasSetMathMode(
        handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  }
  // Note [Library handle streams]
  cudaStream_t& bound = handle_slot(thread_handles().cublas_stream, device);
  const cudaStream_t stream = current_stream(device).handle();
  if (bound != stream) {  // a new handle starts on the default stream (nullptr)
    HG_CUBLAS_CHECK(cublasSetStream(handle, stream));
    bound = stream;
  }
  return handle;
}

cublasLtContext* cublaslt_handle() {
  // cuBLASLt takes the stream per call (cublasLtMatmul), so there is nothing
  // to bind here.
  const int device = current_device();
  cublasLtHandle_t& handle = handle_slot(thread_handles().cublaslt, device);
  if (handle == nullptr) HG_CUBLAS_CHECK(cublasLtCreate(&handle));
  return handle;
}

cudnnContext* cudnn_handle() {
  const int device = current_device();
  cudnnHandle_t& handle = handle_slot(thread_handles().cudnn, device);
  if (handle == nullptr) HG_CUDNN_CHECK(cudnnCreate(&handle));
  // Note [Library handle streams]
  cudaStream_t& bound = handle_slot(thread_handles().cudnn_stream, device);
  const cudaStream_t stream = current_stream(device).handle();
  if (bound != stream) {  // a new handle starts on the default stream (nullptr)
    HG_CUDNN_CHECK(cudnnSetStream(handle, stream));
    bound = stream;
  }
  return handle;
}

}  // namespace hg::cuda

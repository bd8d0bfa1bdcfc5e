// The CUDA runtime layer: devices, streams, events, library handles. The same
// code runs on a real GPU (gpu build) and on the CPU emulator (emu build).
//
//   if (hg::cuda::is_available()) {
//     hg::cuda::DeviceGuard device(0);
//     hg::cuda::Stream side = hg::cuda::Stream::create();
//     hg::cuda::StreamGuard on_side(side);       // kernels now go to `side`
//     hg::cuda::Event start, stop;
//     start.record();
//     ... launch work ...
//     stop.record();
//     float ms = start.elapsed_ms(stop);
//   }
//
// Threading: the current device and the current stream are per host thread
// (the current stream is kept per device), as in the CUDA runtime and PyTorch.
// Library handles are per thread and device and follow the current stream
// each time they are fetched (cuBLASLt takes its stream per call).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

// The library handle types, declared the way cublas_api.h / cublasLt.h /
// cudnn.h declare them, so this header does not pull those large headers in.
struct cublasContext;
struct cublasLtContext;
struct cudnnContext;

namespace hg::cuda {

// ---- devices ------------------------------------------------------------------

// True when at least one CUDA device is usable. Never throws: no driver, no
// GPU or a driver error all mean "not available".
bool is_available();
// Number of usable devices (0 when none; never throws). Queried once and
// cached (the emulator's set_device_count refreshes it).
int device_count();
// Throws hg::Error unless 0 <= device < device_count(); the message says how
// many devices exist and what to do instead.
void check_device_index(int device);
int current_device();
void set_device(int device);
// Properties of `device` (the current device when negative), queried once and
// cached for the process.
const cudaDeviceProp& device_properties(int device = -1);
// Waits until all work on `device` (current when negative) has finished.
void synchronize(int device = -1);

// ---- host sync counter --------------------------------------------------------

// Note [Host sync counter]
// Every device-to-host copy and every host wait (device, stream or event
// synchronisation) made through this runtime layer is counted, process-wide:
// Stream/Event/device synchronize, core's device copies (DeviceHooks::
// copy_bytes, behind Tensor::to / item / cpu) and the device-error check. A
// test takes two snapshots around code that must not stall the host (e.g. a
// GradScaler step) and asserts both differences are zero. The cost is one
// relaxed atomic add per event, next to a wait of microseconds at least.
struct HostSyncCounts {
  int64_t device_to_host_copies = 0;
  int64_t synchronizations = 0;  // device, stream and event waits
};
HostSyncCounts host_sync_counts();
// Called by the runtime layer where it copies to the host or waits.
void count_device_to_host_copy();
void count_synchronization();

// Makes `device` current for the guard's lifetime (a negative index leaves
// the current device alone), then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  int original_device() const { return original_; }

 private:
  int original_ = -1;  // -1: nothing to restore
};

// ---- streams ------------------------------------------------------------------

class Event;

// A CUDA stream on one device: either the device's default (legacy null)
// stream, or one created by Stream::create, which lives as long as any copy of
// the Stream refers to it. Copies are cheap and compare equal.
class Stream {
 public:
  // The default stream of device 0 (use default_stream(d) for others).
  Stream() = default;
  static Stream default_stream(int device = -1);
  // A new stream on `device` (current when negative). Lower numbers are higher
  // priority; priority_range() gives the valid span, values outside it are
  // clamped. A non-blocking stream does not synchronise with the default one.
  static Stream create(int device = -1, int priority = 0, bool non_blocking = true);
  // {least, greatest} priority, e.g. {0, -5} on Hopper.
  static std::pair<int, int> priority_range();

  cudaStream_t handle() const { return stream_; }
  int device() const { return device_; }
  bool is_default() const { return stream_ == nullptr; }
  int priority() const;
  // True when all work queued so far has finished.
  bool query() const;
  void synchronize() const;
  // Work queued on this stream after this call waits for `event` (no host
  // wait). A never-recorded event is a no-op.
  void wait(const Event& event) const;

  friend bool operator==(const Stream& a, const Stream& b) { return a.stream_ == b.stream_ && a.device_ == b.device_; }

 private:
  Stream(int device, cudaStream_t stream, std::shared_ptr<void> owner)
      : device_(device), stream_(stream), owner_(std::move(owner)) {}

  int device_ = 0;
  cudaStream_t stream_ = nullptr;  // nullptr: the default stream
  std::shared_ptr<void> owner_;    // destroys a created stream with its last copy
};

// The calling thread's current stream on `device` (current device when
// negative); the default stream until set_current_stream changes it.
Stream current_stream(int device = -1);
// Makes `stream` current for its device on the calling thread.
void set_current_stream(const Stream& stream);

// Makes `stream` the current stream (and its device the current device) for
// the guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  DeviceGuard device_guard_;
  Stream previous_;
};

// ---- events -------------------------------------------------------------------

// A CUDA event, created lazily on the device of the first stream it is
// recorded on. Move-only.
class Event {
 public:
  explicit Event(bool enable_timing = true, bool blocking_sync = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record();  // on the current stream of the current device
  void record(const Stream& stream);
  // Blocks the host until the recorded work is done (no-op if never recorded).
  void synchronize() const;
  // True when the recorded work is done, or when never recorded.
  bool query() const;
  // Milliseconds from this event to `end`; both must be recorded with timing
  // enabled. Waits for `end` to complete first.
  float elapsed_ms(const Event& end) const;

  bool is_recorded() const { return event_ != nullptr; }
  cudaEvent_t handle() const { return event_; }
  int device() const { return device_; }

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = -1;
  unsigned int flags_ = 0;
};

// ---- pinned host memory -------------------------------------------------------

// Page-locked host memory (cudaHostAlloc, freed with cudaFreeHost): the source
// or target of a cudaMemcpyAsync that really runs asynchronously, since the
// DMA engine reads it without a staging copy. Move-only; the owner must make
// sure no queued copy still reads or writes the bytes when it is destroyed or
// reused (synchronise on an Event recorded after the copy).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // nbytes of pinned memory (none for 0); throws hg::Error when the runtime
  // refuses (e.g. the pinned-memory limit is reached).
  explicit PinnedBuffer(size_t nbytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// ---- library handles ----------------------------------------------------------

// Lazily created per (thread, current device), destroyed when the thread
// exits, and bound to current_stream() on every call (rebound only when that
// stream changed: cuBLAS's cublasSetStream also resets its workspace). Fetch
// the handle right before use instead of caching it.
cublasContext* cublas_handle();      // a cublasHandle_t
cublasLtContext* cublaslt_handle();  // a cublasLtHandle_t
cudnnContext* cudnn_handle();        // a cudnnHandle_t

}  // namespace hg::cuda

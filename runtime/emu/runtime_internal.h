// Internal state of the cuda-emu host runtime shim, shared by runtime*.cpp.
// Not installed on the include path: library stand-ins include it by relative
// path to validate streams and device pointers the way the real runtime does.
#pragma once

#include <chrono>
#include <cstddef>

#include <cuda_runtime_api.h>

// Stream and event objects behind the opaque cudaStream_t / cudaEvent_t.
// Streams are synchronous (work runs at enqueue), so they hold no queue.
struct CUstream_st {
  int device = 0;
  unsigned int flags = 0;
  int priority = 0;
};

struct CUevent_st {
  int device = 0;
  unsigned int flags = 0;
  bool recorded = false;
  std::chrono::steady_clock::time_point time{};
};

namespace hg::emu::detail {

using ::hg::emu::kMaxDevices;  // runtime/cuda/device_limits.h
// Stream priorities of a Hopper GPU: 0 is the lowest, -5 the highest.
inline constexpr int kLeastStreamPriority = 0;
inline constexpr int kGreatestStreamPriority = -5;

// Records `error` as the calling thread's last error (unless it is success)
// and returns it: `return fail(cudaErrorInvalidValue);`.
cudaError_t fail(cudaError_t error);

int device_count();
int current_device();

// True for the default-stream handles (0, cudaStreamLegacy,
// cudaStreamPerThread) and for streams created and not yet destroyed.
bool is_valid_stream(cudaStream_t stream);
bool is_valid_event(cudaEvent_t event);
void register_stream(CUstream_st* stream);
bool unregister_stream(CUstream_st* stream);  // false when unknown
void register_event(CUevent_st* event);
bool unregister_event(CUevent_st* event);

}  // namespace hg::emu::detail

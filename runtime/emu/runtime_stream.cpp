// cuda-emu host runtime: streams and events.
//
// Streams are synchronous: a kernel launch or copy runs to completion when it
// is enqueued. So a stream is only a tag (device, flags, priority), every
// query answers "done", waits return at once, and an event records the host
// clock at the moment it is enqueued — which is when all earlier work on its
// stream has finished, exactly what a real event measures.
#include <algorithm>
#include <chrono>
#include <new>

#include "runtime/emu/runtime_internal.h"

namespace {

using hg::emu::detail::fail;

cudaError_t check_current_device() {
  const int count = hg::emu::detail::device_count();
  if (count == 0) return cudaErrorNoDevice;
  const int device = hg::emu::detail::current_device();
  return device >= 0 && device < count ? cudaSuccess : cudaErrorInvalidDevice;
}

}  // namespace

// ---- streams ------------------------------------------------------------------

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  using namespace hg::emu::detail;
  if (pStream == nullptr || flags > cudaStreamNonBlocking) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = check_current_device(); e != cudaSuccess) return fail(e);
  auto* stream = new (std::nothrow) CUstream_st;
  if (stream == nullptr) return fail(cudaErrorMemoryAllocation);
  stream->device = current_device();
  stream->flags = flags;
  // Like the real runtime, out-of-range priorities are clamped, not refused.
  stream->priority = std::clamp(priority, kGreatestStreamPriority, kLeastStreamPriority);
  register_stream(stream);
  *pStream = stream;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  return cudaStreamCreateWithPriority(pStream, flags, hg::emu::detail::kLeastStreamPriority);
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread ||
      !hg::emu::detail::unregister_stream(stream)) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!hg::emu::detail::is_valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (!hg::emu::detail::is_valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (!hg::emu::detail::is_valid_stream(stream) || !hg::emu::detail::is_valid_event(event)) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (flags != 0 && flags != 1) return fail(cudaErrorInvalidValue);  // 1: cudaEventWaitExternal
  return cudaSuccess;
}

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) {
  if (priority == nullptr) return fail(cudaErrorInvalidValue);
  if (!hg::emu::detail::is_valid_stream(hStream)) return fail(cudaErrorInvalidResourceHandle);
  const bool is_default = hStream == nullptr || hStream == cudaStreamLegacy || hStream == cudaStreamPerThread;
  *priority = is_default ? hg::emu::detail::kLeastStreamPriority : hStream->priority;
  return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int* flags) {
  if (flags == nullptr) return fail(cudaErrorInvalidValue);
  if (!hg::emu::detail::is_valid_stream(hStream)) return fail(cudaErrorInvalidResourceHandle);
  const bool is_default = hStream == nullptr || hStream == cudaStreamLegacy || hStream == cudaStreamPerThread;
  *flags = is_default ? cudaStreamDefault : hStream->flags;
  return cudaSuccess;
}

// ---- events -------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  using namespace hg::emu::detail;
  constexpr unsigned int kKnownFlags = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~kKnownFlags) != 0) return fail(cudaErrorInvalidValue);
  // Interprocess events must have timing disabled, as on a real GPU.
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) {
    return fail(cudaErrorInvalidValue);
  }
  if (const cudaError_t e = check_current_device(); e != cudaSuccess) return fail(e);
  auto* created = new (std::nothrow) CUevent_st;
  if (created == nullptr) return fail(cudaErrorMemoryAllocation);
  created->device = current_device();
  created->flags = flags;
  register_event(created);
  *event = created;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!hg::emu::detail::is_valid_event(event) || !hg::emu::detail::is_valid_stream(stream)) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  event->recorded = true;
  event->time = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!hg::emu::detail::is_valid_event(event)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  // A never-recorded event counts as complete, as in the real runtime.
  if (!hg::emu::detail::is_valid_event(event)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return fail(cudaErrorInvalidValue);
  if (!hg::emu::detail::is_valid_event(start) || !hg::emu::detail::is_valid_event(end)) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  // The real runtime refuses timing-disabled and never-recorded events with
  // cudaErrorInvalidResourceHandle.
  if ((start->flags & cudaEventDisableTiming) || (end->flags & cudaEventDisableTiming) || !start->recorded ||
      !end->recorded) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr || !hg::emu::detail::unregister_event(event)) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  delete event;
  return cudaSuccess;
}

// The profiler's device clock (core/profiler.h, Note [Profiler]) on the CUDA
// runtime: timing events recorded around launches, reused from a pool, read
// when a Profile stops. Recording an event does not wait for the device, so a
// profiled step adds no host sync per launch; the one wait is at stop().
// Installed at load without touching CUDA: the first Profile asks whether a
// device exists (is_available), so loading the library never initialises the
// CUDA runtime — compute-sanitizer refuses to check a process whose CUDA was
// initialised before its injection ("CUDA initialized before the Sanitizer").
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/profiler.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

// Events are created on first use and handed back to this pool by release;
// the profiler records on one thread at a time (its own).
std::vector<cudaEvent_t>& pool() {
  static std::vector<cudaEvent_t> events;
  return events;
}

void* record(uint64_t stream) {
  if (!is_available()) return nullptr;  // no device: the profile keeps host times
  cudaEvent_t e = nullptr;
  auto& p = pool();
  if (!p.empty()) {
    e = p.back();
    p.pop_back();
  } else if (cudaEventCreate(&e) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    p.push_back(e);
    return nullptr;
  }
  return e;
}

double elapsed_us(void* begin, void* end) {
  auto* b = static_cast<cudaEvent_t>(begin);
  auto* e = static_cast<cudaEvent_t>(end);
  float ms = 0;
  if (cudaEventSynchronize(e) != cudaSuccess || cudaEventElapsedTime(&ms, b, e) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return static_cast<double>(ms) * 1e3;
}

void release(void* event) { pool().push_back(static_cast<cudaEvent_t>(event)); }

uint64_t stream_now() { return is_available() ? reinterpret_cast<uint64_t>(current_stream().handle()) : 0; }

int device_now() { return is_available() ? current_device() : -1; }

void sync_counts(int64_t* syncs, int64_t* copies) {
  const HostSyncCounts c = host_sync_counts();
  *syncs = c.synchronizations;
  *copies = c.device_to_host_copies;
}

const profiler::DeviceClock kClock = {
    &record, &elapsed_us, &release, &stream_now, &device_now, &sync_counts,
#if defined(HG_CUDA_EMU)
    true,
#else
    false,
#endif
};

const bool kInstalled = [] {
  profiler::set_device_clock(&kClock);
  return true;
}();

}  // namespace

}  // namespace hg::cuda

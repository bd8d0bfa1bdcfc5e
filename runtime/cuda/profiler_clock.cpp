// The profiler's device clock (core/profiler.h, Note [Profiler]) on the CUDA
// runtime: timing events recorded around launches, reused from a pool, read
// when a Profile stops. Recording an event does not wait for the device, so a
// profiled step adds no host sync per launch; the one wait is at stop().
// Installed at load when a device exists (the emulator always has one).
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

uint64_t stream_now() { return reinterpret_cast<uint64_t>(current_stream().handle()); }

int device_now() { return current_device(); }

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
  if (is_available()) profiler::set_device_clock(&kClock);
  return true;
}();

}  // namespace

}  // namespace hg::cuda

// cuda-emu kernel launches: the emulated `kernel<<<grid, block, smem, stream>>>(args...)`.
// Kernel code does not call this directly: kernels/cuda/launch.cuh (HG_LAUNCH)
// calls launch_kernel() in the emu build and `<<<>>>` in the gpu build.
//
// A launch validates the shape against a Hopper GPU's limits (returning the
// error the real runtime returns), then runs every block, one after another,
// on the engine's worker thread; each CUDA thread is a fiber. It returns when
// the grid has finished (streams are synchronous in the emulator).
//
// Environment:
//   HG_EMU_SEED      seed of the order in which a block's threads run between
//                    barriers (default 1; 0 runs them in thread-index order).
//                    The same seed gives the same schedule, so failures replay.
//   HG_EMU_STACK_KB  stack size of each CUDA thread's fiber (default 256; 512 under
//                    AddressSanitizer, whose frames are larger).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "hg_emu_types.h"

// Values as in CUDA's driver_types.h.
enum cudaFuncAttribute : int {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
  cudaFuncAttributeMax
};

namespace hg::emu {

using KernelEntry = void (*)();  // a __global__ function, type-erased

struct KernelLaunch {
  const char* name = "";  // for messages: the kernel's source spelling
  KernelEntry entry = nullptr;
  void (*invoke)(KernelEntry entry, void* params) = nullptr;  // calls entry(params...)
  void* params = nullptr;                                     // std::tuple of the kernel's parameters
  dim3 grid, block;
  size_t shared_bytes = 0;  // dynamic shared memory per block
  cudaStream_t stream = nullptr;
};

struct LaunchResult {
  cudaError_t error = cudaSuccess;
  std::string message;  // what failed, naming the kernel, block and thread
};

// Validates and runs a launch. On failure also sets the runtime's last error
// (like a real launch), so cudaGetLastError() reports it.
LaunchResult launch(const KernelLaunch& launch);

// cudaFuncSetAttribute for the emulator.
cudaError_t set_func_attribute(KernelEntry entry, cudaFuncAttribute attribute, int value);

// The schedule seed (see HG_EMU_SEED above); tests set it to try several schedules.
void set_schedule_seed(uint64_t seed);
uint64_t schedule_seed();

// Counters of the last launch on this process, for tests and timing.
struct LaunchStats {
  uint64_t blocks = 0;
  uint64_t threads = 0;
  uint64_t fiber_switches = 0;  // scheduler -> fiber resumes
};
LaunchStats last_launch_stats();
// Kernel launches that ran, process-wide (tests count the launches of a step).
uint64_t launch_count();

namespace detail {
template <typename Tuple, typename... Params>
void invoke_kernel(KernelEntry entry, void* params) {
  auto kernel = reinterpret_cast<void (*)(Params...)>(entry);
  // Each CUDA thread gets its own copy of the parameters, as kernel parameters
  // are by value.
  std::apply([kernel](auto&... args) { kernel(args...); }, *static_cast<Tuple*>(params));
}
}  // namespace detail

template <typename... Params, typename... Args>
LaunchResult launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                           cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
  using Tuple = std::tuple<std::remove_cvref_t<Params>...>;
  Tuple params(std::forward<Args>(args)...);  // converted once, like CUDA's argument copy
  KernelLaunch l;
  l.name = name;
  l.entry = reinterpret_cast<KernelEntry>(kernel);
  l.invoke = &detail::invoke_kernel<Tuple, Params...>;
  l.params = &params;
  l.grid = grid;
  l.block = block;
  l.shared_bytes = shared_bytes;
  l.stream = stream;
  return launch(l);
}

}  // namespace hg::emu

// The C++ template form of cudaFuncSetAttribute from cuda_runtime.h.
template <typename T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attribute, int value) {
  return hg::emu::set_func_attribute(reinterpret_cast<hg::emu::KernelEntry>(entry), attribute, value);
}

// The one way halfgrad launches a kernel, in both CUDA builds:
//
//   HG_LAUNCH(scale_kernel, grid, block, shared_bytes, stream, out, in, n);
//   HG_LAUNCH((gemm_kernel<float, 128>), grid, block, 0, stream, ...);  // commas: parenthesise
//
// gpu build: `kernel<<<grid, block, shared_bytes, stream>>>(args...)`, then
// cudaGetLastError(). emu build: hg::emu::launch_kernel (runtime/emu), which
// validates the shape like a Hopper GPU, runs the grid on the CPU (one fiber
// per CUDA thread) and reports barrier/assert failures. Either way a failed
// launch throws hg::Error naming the kernel, the error and the call site.
// Kernel files never write `<<<>>>`, so every .cu file compiles with both nvcc
// and g++.
// launch_kernel(name, __FILE__, __LINE__, kernel, ...) is the same call with
// the name given: for launchers whose name is not the kernel expression
// (reduce.cu names each launch after its op; launch_row_kernel passes its
// caller's).
//
// An empty grid (a zero in grid.x/y/z) is a no-op here instead of the
// cudaErrorInvalidConfiguration a real launch returns: launchers compute the
// grid from the element count, and an empty tensor should not need a special
// case in every launcher. A zero-sized block is still an error.
//
// Dynamic shared memory: declare it with hg::cuda::dynamic_shared<T>() instead
// of `extern __shared__ T smem[];` (g++ cannot express the latter; see Note
// [Emulated shared memory] in runtime/emu/include/hg_emu_device.h). It is also
// the usual nvcc workaround for templated kernels, where `extern __shared__ T`
// with different T's conflicts.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/profiler.h"
#include "runtime/cuda/cuda_check.h"

namespace hg::cuda {

// The block's dynamic shared memory (sized by the launch's shared_bytes),
// 16-byte aligned, viewed as T.
template <typename T>
#if defined(__CUDACC__)
__device__
#endif
inline T* dynamic_shared() {
#if defined(HG_CUDA_EMU)
  return reinterpret_cast<T*>(::hg::emu::dynamic_shared_memory());
#else
  extern __shared__ __align__(16) unsigned char hg_dynamic_shared_memory[];
  return reinterpret_cast<T*>(hg_dynamic_shared_memory);
#endif
}

// fn(std::true_type{}) or fn(std::false_type{}): a run-time flag as a
// template argument of the kernel a launcher picks, so the launch is written
// once instead of in both arms of an if:
//   with_bool(rms, [&](auto rms_c) { launch_forward<T, W, decltype(rms_c)::value>(...); });
template <typename Fn>
decltype(auto) with_bool(bool flag, Fn&& fn) {
  return flag ? fn(std::true_type{}) : fn(std::false_type{});
}

namespace detail {
[[noreturn]] inline void throw_launch_error(cudaError_t error, const char* kernel, const char* detail,
                                            const char* file, int line) {
  if (detail != nullptr && *detail != '\0') {  // the emulator says which thread did what
    ::hg::detail::throw_error(file, line,
                              ::hg::detail::str_cat(detail, " [", cudaGetErrorName(error), ": ",
                                                    cudaGetErrorString(error), "]"));
  }
  ::hg::detail::throw_error(file, line,
                            ::hg::detail::str_cat("launch of kernel ", kernel, " failed: ",
                                                  cudaGetErrorName(error), " (", cudaGetErrorString(error), ")"));
}
}  // namespace detail

template <typename... Params, typename... Args>
void launch_kernel(const char* name, const char* file, int line, void (*kernel)(Params...), dim3 grid,
                   dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // empty launch: see above
  // Recorded while a Profile is open (Note [Profiler] in core/profiler.h).
  const unsigned grid3[3] = {grid.x, grid.y, grid.z}, block3[3] = {block.x, block.y, block.z};
  const ::hg::profiler::WorkScope profiled(::hg::profiler::Kind::kernel, name, reinterpret_cast<uint64_t>(stream),
                                           grid3, block3, shared_bytes);
#if defined(HG_CUDA_EMU)
  if (profiled.skip()) return;  // count-only profiling: recorded, not run
  const ::hg::emu::LaunchResult result = ::hg::emu::launch_kernel(
      name, kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
  if (result.error != cudaSuccess) {
    (void)cudaGetLastError();  // consumed here, as the gpu path below does
    detail::throw_launch_error(result.error, name, result.message.c_str(), file, line);
  }
#else
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) detail::throw_launch_error(error, name, nullptr, file, line);
#endif
}

}  // namespace hg::cuda

// HG_LAUNCH(kernel, grid, block, shared_bytes, stream, args...): see the top of this file.
#define HG_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                                  \
  ::hg::cuda::launch_kernel(#kernel, __FILE__, __LINE__, kernel, grid, block, shared_bytes, stream \
                            __VA_OPT__(, ) __VA_ARGS__)

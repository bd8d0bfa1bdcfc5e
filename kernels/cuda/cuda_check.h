// Error checks around CUDA runtime calls and kernel launches. Same code in the
// gpu build (real runtime) and the emu build (kernels/emu/include shim).
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace hg::cuda::detail {
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line);
}  // namespace hg::cuda::detail

// HG_CUDA_CHECK(cudaMalloc(&p, n)); throws hg::Error naming the call, the error
// name and text, and file:line.
#define HG_CUDA_CHECK(expr)                                                     \
  do {                                                                          \
    const cudaError_t hg_cuda_err_ = (expr);                                    \
    if (hg_cuda_err_ != cudaSuccess) [[unlikely]] {                             \
      ::hg::cuda::detail::throw_cuda_error(hg_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                           \
  } while (0)

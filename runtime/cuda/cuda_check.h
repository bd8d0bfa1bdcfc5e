// Error checks around CUDA runtime, cuBLAS and cuDNN calls and kernel launches.
// Same code in the gpu build (real libraries) and the emu build
// (runtime/emu/include stand-ins). Every failure becomes an hg::Error naming
// the call, the library's error name and text, and file:line.
//
// Only the CUDA runtime header is needed here: the cuBLAS/cuDNN macros compare
// against their status enums at the call site, which includes that library's
// header anyway, so this header stays cheap to include everywhere.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace hg::cuda::detail {
// Clear the thread's sticky runtime error (so the next launch check does not
// report this one again), then throw.
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line);
// `status` is the library's enum value (cublasStatus_t / cudnnStatus_t).
[[noreturn]] void throw_cublas_error(int status, const char* expr, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int status, const char* expr, const char* file, int line);
}  // namespace hg::cuda::detail

// HG_CUDA_CHECK(cudaMalloc(&p, n)); throws hg::Error naming the call, the error
// name and text, and file:line.
#define HG_CUDA_CHECK(expr)                                                          \
  do {                                                                               \
    const cudaError_t hg_cuda_err_ = (expr);                                         \
    if (hg_cuda_err_ != cudaSuccess) [[unlikely]] {                                  \
      ::hg::cuda::detail::throw_cuda_error(hg_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                \
  } while (0)

// After a kernel launch: reports a bad launch configuration (or an earlier
// asynchronous error) at the launch site.
#define HG_CUDA_CHECK_LAST_ERROR() HG_CUDA_CHECK(cudaGetLastError())

// HG_CUBLAS_CHECK(cublasGemmEx(...)); needs <cublas_v2.h> or <cublasLt.h>.
#define HG_CUBLAS_CHECK(expr)                                                                                 \
  do {                                                                                                        \
    const auto hg_cublas_status_ = (expr);                                                                    \
    if (hg_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                                            \
      ::hg::cuda::detail::throw_cublas_error(static_cast<int>(hg_cublas_status_), #expr, __FILE__, __LINE__); \
    }                                                                                                         \
  } while (0)

// HG_CUDNN_CHECK(cudnnConvolutionForward(...)); needs <cudnn.h>.
#define HG_CUDNN_CHECK(expr)                                                                                \
  do {                                                                                                      \
    const auto hg_cudnn_status_ = (expr);                                                                   \
    if (hg_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {                                            \
      ::hg::cuda::detail::throw_cudnn_error(static_cast<int>(hg_cudnn_status_), #expr, __FILE__, __LINE__); \
    }                                                                                                       \
  } while (0)

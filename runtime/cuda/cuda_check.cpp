#include "runtime/cuda/cuda_check.h"

#include <string>

#include <cublas_v2.h>
#include <cudnn.h>

namespace hg::cuda::detail {

void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line) {
  // Non-sticky errors (a bad argument, out of memory) would otherwise stay in
  // the thread's last-error slot and be reported again by the next launch
  // check, far from here. Sticky errors (illegal address) survive this call.
  (void)cudaGetLastError();
  std::string hint;
  if (error == cudaErrorNoDevice) {
    hint = "; no usable CUDA driver/GPU: use Device::cpu() or the emu build";
  } else if (error == cudaErrorMemoryAllocation) {
    hint = "; reduce the batch size or call hg::cuda::empty_cache()";
  } else if (error == cudaErrorIllegalAddress || error == cudaErrorLaunchFailure) {
    hint =
        "; a kernel accessed memory out of bounds: rerun under the emu build with "
        "HG_SANITIZE=ON (AddressSanitizer) to find it";
  }
  ::hg::detail::throw_error(file, line,
                            ::hg::detail::str_cat("CUDA error ", cudaGetErrorName(error), " (",
                                                  cudaGetErrorString(error), ") from `", expr, "`", hint));
}

void throw_cublas_error(int status, const char* expr, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  std::string hint;
  if (s == CUBLAS_STATUS_INVALID_VALUE) {
    hint =
        "; check m/n/k, the transposes and lda/ldb/ldc (column-major: lda >= rows of A as "
        "stored)";
  } else if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
    hint = "; this combination of data types and compute type is not supported by cuBLAS";
  }
  ::hg::detail::throw_error(file, line,
                            ::hg::detail::str_cat("cuBLAS error ", cublasGetStatusName(s), " (",
                                                  cublasGetStatusString(s), ") from `", expr, "`", hint));
}

void throw_cudnn_error(int status, const char* expr, const char* file, int line) {
  const auto s = static_cast<cudnnStatus_t>(status);
  ::hg::detail::throw_error(
      file, line, ::hg::detail::str_cat("cuDNN error ", cudnnGetErrorString(s), " (", status, ") from `", expr, "`"));
}

}  // namespace hg::cuda::detail

// cuda-emu death test (asan build only): a kernel that writes one element past
// the end of device memory, or of its dynamic shared memory, must be stopped
// by AddressSanitizer. CTest passes the run when the ASan report appears.
//   emu_asan_oob global | shared | none
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "runtime/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace {

__global__ void write_past_end_kernel(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = 1.0f;  // the bug: <= instead of <
}

__global__ void write_past_shared_kernel(float* out, int n) {
  float* tile = hg::cuda::dynamic_shared<float>();
  tile[threadIdx.x + 1] = 1.0f;  // the bug: the last thread writes past the buffer
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < n) out[threadIdx.x] = tile[threadIdx.x];
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "none";
  const int n = 100;
  float* out = nullptr;
  HG_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&out), n * sizeof(float)));
  if (std::strcmp(mode, "global") == 0) {
    HG_LAUNCH(write_past_end_kernel, dim3(1), dim3(128), 0, nullptr, out, n);
  } else if (std::strcmp(mode, "shared") == 0) {
    HG_LAUNCH(write_past_shared_kernel, dim3(1), dim3(64), 64 * sizeof(float), nullptr, out, n);
  } else {
    HG_LAUNCH(write_past_end_kernel, dim3(1), dim3(128), 0, nullptr, out, n - 1);
  }
  HG_CUDA_CHECK(cudaFree(out));
  std::printf("emu_asan_oob %s: no error detected\n", mode);
  return 0;
}

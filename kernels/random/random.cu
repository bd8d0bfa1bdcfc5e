// CUDA random fill.
//
// random_fill_kernel
//   formula    out[4b + j] = value j of Philox block b (Note [Random element
//              mapping] in kernels/random/random.h), rounded once to T
//   split      one thread per Philox block (4 elements), grid-stride loop
//   launch     256 threads/block, blocks = min(ceil(n / 1024), 32 * SMs)
//   bytes      4 * sizeof(T) written per thread, nothing read
//   precision  correctly rounded float ops only, so bit-identical to the CPU
#include <cuda_runtime.h>

#include <cstdint>

#include "core/convert.h"
#include "kernels/elementwise/elementwise.cuh"
#include "kernels/random/random.h"

namespace hg::cuda {

namespace {

template <typename T>
__global__ void random_fill_kernel(T* out, int64_t n, RandomParams params) {
  const int64_t blocks = (n + 3) / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += stride) {
    float values[4];
    random_values_of_block(params, static_cast<uint64_t>(b), values);
    for (int j = 0; j < 4 && 4 * b + j < n; ++j) out[4 * b + j] = convert_value<T>(values[j]);
  }
}

}  // namespace

void random_fill(const Tensor& out, const RandomParams& params) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  dispatch_compute_dtype(out.dtype(), "random fill", [&](auto tag) {
    using T = decltype(tag);
    HG_LAUNCH(random_fill_kernel<T>, dim3(map_grid((n + 3) / 4)), dim3(kMapThreads), 0,
              current_stream().handle(), static_cast<T*>(out.data_ptr()), n, params);
  });
}

}  // namespace hg::cuda

// The empty kernel of hg-bench's launch-overhead ceiling
// (ceilings/launch/empty-kernel): what one launch costs with nothing to do.
#include "benchmarks/suites.h"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"

namespace hgb {
namespace {

// Formula: none (the body is empty). Parallel split: none. Launch shape: one
// block of one thread. Bytes moved: 0. Precision contract: n/a. The CPU
// counterpart is the tiny-op row of the same suite (one 1-element add through
// the whole stack), since a CPU "launch" is a function call.
__global__ void empty_kernel() {}

}  // namespace

void launch_empty_kernels(int count) {
  const cudaStream_t stream = hg::cuda::current_stream().handle();
  for (int i = 0; i < count; ++i) HG_LAUNCH(empty_kernel, dim3(1), dim3(1), 0, stream);
}

}  // namespace hgb

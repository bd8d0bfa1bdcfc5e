// Division by a loop-invariant divisor through a precomputed magic number
// (Granlund and Montgomery; the form PyTorch's IntDivider uses): for
// 0 <= n < 2^31 and 1 <= d < 2^31,
//   n / d = (umulhi(n, magic) + n) >> shift,
//   shift = ceil(log2 d),  magic = floor(2^32 * (2^shift - d) / d) + 1,
// one multiply-high, one add and one shift instead of a ~20-instruction
// integer division. The host builds it once per launch; kernels divide with it
// per element. The add is done in 64 bits, so no bound beyond n < 2^31 is
// needed. Exact: tests/kernels/test_strided_copy.cpp checks it against `/`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"

namespace hg::cuda {

struct IntDivider {
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;

  IntDivider() = default;
  // Host side: d in [1, 2^31).
  explicit IntDivider(int64_t d) {
    HG_CHECK(d >= 1 && d <= INT32_MAX, "IntDivider: divisor ", d, " is outside [1, 2^31)");
    divisor = static_cast<uint32_t>(d);
    shift = 0;
    while ((uint64_t{1} << shift) < divisor) ++shift;
    const uint64_t m = ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - divisor)) / divisor + 1;
    magic = static_cast<uint32_t>(m);
  }

  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, magic);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return static_cast<uint32_t>((static_cast<uint64_t>(hi) + n) >> shift);
  }
};

}  // namespace hg::cuda

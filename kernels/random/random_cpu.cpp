// CPU random fill: one Philox block per 4 elements (Note [Random element mapping]).
#include <cstdint>

#include "core/convert.h"
#include "kernels/cpu/loops.h"
#include "kernels/random/random.h"

namespace hg::cpu {

void random_fill(const Tensor& out, const RandomParams& params) {
  dispatch_compute_dtype(out.dtype(), "random fill", [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(out.data_ptr());
    const int64_t n = out.numel();
    const int64_t blocks = (n + 3) / 4;
    parallel_for(blocks, n > 65536, [&](int64_t b) {
      float values[4];
      random_values_of_block(params, static_cast<uint64_t>(b), values);
      for (int64_t j = 0; j < 4 && 4 * b + j < n; ++j) data[4 * b + j] = convert_value<T>(values[j]);
    });
  });
}

}  // namespace hg::cpu

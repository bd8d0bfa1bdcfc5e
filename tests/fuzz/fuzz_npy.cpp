// .npy reader (data/npy.cpp): any bytes -> a tensor or an hg::Error.
#include <cstdint>

#include "core/error.h"
#include "data/npy.h"
#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {

int fuzz_npy(const uint8_t* data, size_t size) {
  try {
    const Tensor t = data::read_npy(input_file(data, size));
    if (t.numel() > 0) (void)t.to_vector<double>();
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace hg::fuzz

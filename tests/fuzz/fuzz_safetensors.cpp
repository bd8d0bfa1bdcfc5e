// safetensors reader (nn/serialize.cpp): any bytes -> a file or an hg::Error.
#include <cstdint>

#include "core/error.h"
#include "nn/serialize.h"
#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {

int fuzz_safetensors(const uint8_t* data, size_t size) {
  try {
    const nn::SafetensorsFile file = nn::load_safetensors(input_file(data, size));
    // Touch every byte of every tensor: an out-of-bounds view would show here.
    for (const auto& [name, t] : file.tensors) {
      if (t.numel() > 0) (void)t.to_vector<double>();
    }
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace hg::fuzz

// The libFuzzer entry point of one target; HG_FUZZ_TARGET names its harness.
#include <cstdint>

#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return hg::fuzz::HG_FUZZ_TARGET(data, size);
}

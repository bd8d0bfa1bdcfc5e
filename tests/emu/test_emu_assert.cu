// cuda-emu: a failed device assert() fails the launch with cudaErrorAssert.
// The emu preset builds RelWithDebInfo, whose -DNDEBUG compiles assert() out;
// this file undefines NDEBUG before its first include so the test runs in every
// emu build, not only in the asan preset's Debug build. Only this file's own
// kernel relies on it: the headers it includes define no inline function whose
// behaviour depends on NDEBUG (runtime/emu/include/hg_emu_device.h's assert
// macro is expanded here, in this file's kernel).
#undef NDEBUG
#include <cassert>

#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "tests/emu/emu_test_util.h"

#if defined(NDEBUG)
#error "NDEBUG must stay undefined in this file"
#endif

using Catch::Matchers::Contains;
using hg::emu::test::DeviceBuffer;

namespace {

__global__ void assert_kernel(const int* values) {
  assert(values[threadIdx.x] >= 0);
}

}  // namespace

TEST_CASE("emu: a failed device assert fails the launch with cudaErrorAssert", "[emu][bugs]") {
  std::vector<int> host(32, 1);
  host[7] = -1;
  DeviceBuffer<int> values(host);
  std::string message = "(no error)";
  try {
    HG_LAUNCH(assert_kernel, dim3(1), dim3(32), 0, nullptr, values.get());
  } catch (const hg::Error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Contains("cudaErrorAssert"));
  CHECK_THAT(message, Contains("values[threadIdx.x] >= 0"));
  CHECK_THAT(message, Contains("thread (7,0,0)"));
  // A launch whose asserts hold succeeds afterwards.
  host[7] = 1;
  values.upload(host);
  REQUIRE_NOTHROW(HG_LAUNCH(assert_kernel, dim3(1), dim3(32), 0, nullptr, values.get()));
}

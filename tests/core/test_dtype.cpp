// dtype table, Device parsing, hg::Error formatting.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"

using namespace hg;

TEST_CASE("dtype table is generated consistently", "[core][dtype]") {
  CHECK(kNumDTypes == 10);
  CHECK(dtype_size(kF8E4M3) == 1);
  CHECK(dtype_size(kF8E5M2) == 1);
  CHECK(is_floating(kF8E4M3));
  CHECK(is_fp8(kF8E5M2));
  CHECK_FALSE(is_fp8(kBF16));
  CHECK(dtype_from_name("float8_e4m3fn") == kF8E4M3);
  CHECK(dtype_from_name("float8_e5m2") == kF8E5M2);
  CHECK(dtype_size(kF32) == 4);
  CHECK(dtype_size(kF16) == 2);
  CHECK(dtype_size(kBF16) == 2);
  CHECK(dtype_size(kF64) == 8);
  CHECK(dtype_size(kI64) == 8);
  CHECK(dtype_size(kI32) == 4);
  CHECK(dtype_size(kU8) == 1);
  CHECK(dtype_size(kBool) == 1);
  CHECK(is_floating(kBF16));
  CHECK_FALSE(is_floating(kI32));
  CHECK(is_16bit_float(kF16));
  CHECK_FALSE(is_16bit_float(kF32));
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    CHECK(dtype_from_name(dtype_name(t)) == t);  // names round-trip
    dispatch_dtype(t, [&](auto tag) { CHECK(sizeof(tag) == dtype_size(t)); });
  }
  CHECK(dtype_from_name("float16") == kF16);
  CHECK(dtype_from_name("bfloat16") == kBF16);
  std::ostringstream os;
  os << kBF16;
  CHECK(os.str() == "bf16");
}

TEST_CASE("unknown dtype names and non-floating dispatch give hg::Error", "[core][dtype]") {
  CHECK_THROWS_WITH(dtype_from_name("fp8"), Catch::Contains("unknown dtype 'fp8'") &&
                                                Catch::Contains("f16"));
  CHECK_THROWS_WITH(dispatch_floating(kI64, "softmax", [](auto) { return 0; }),
                    Catch::Contains("softmax needs a floating dtype") && Catch::Contains("i64"));
}

TEST_CASE("Device parses and prints", "[core][device]") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::cuda(2).str() == "cuda:2");
  CHECK_THROWS_AS(Device::parse("gpu"), Error);
  CHECK_THROWS_AS(Device::parse("cuda:-1"), Error);
  CHECK_THROWS_AS(Device::parse("cuda:1x"), Error);
}

TEST_CASE("hg::Error carries message and location", "[core][error]") {
  try {
    HG_CHECK(1 + 1 == 3, "arithmetic is broken: ", 2, " != ", 3);
    FAIL("HG_CHECK did not throw");
  } catch (const Error& e) {
    CHECK(e.message() == "arithmetic is broken: 2 != 3");
    CHECK(std::string(e.what()).find("tests/core/test_dtype.cpp:") != std::string::npos);
    CHECK(e.line() > 0);
  }
}

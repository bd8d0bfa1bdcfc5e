// data/: .npy round trips of every dtype and one corrupt file per header rule.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/npy.h"

#include "tests/data/data_test_util.h"

using namespace hg;
using namespace hg::data;
using namespace hg::data::testing;

// ---- .npy ----------------------------------------------------------------------------

namespace {
// A .npy file from a header dict and payload, padded like numpy.
Bytes npy_bytes(const std::string& dict, const Bytes& payload, int major = 1) {
  const size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes b{0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  const uint32_t len = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) b.push_back((len >> (8 * i)) & 0xff);
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}
}  // namespace

TEST_CASE(".npy round trips every supported dtype and shape", "[data][npy]") {
  TempDir dir;
  const std::string path = dir.file("a.npy");
  const std::vector<Shape> shapes = {{}, {5}, {2, 3}, {2, 0, 3}, {1, 2, 3, 2}};
  for (DType dtype : {kF32, kF16, kF64, kI64, kI32, kU8, kBool}) {
    for (const Shape& shape : shapes) {
      INFO(dtype_name(dtype) << " " << shape_to_string(shape));
      const int64_t n = numel_of(shape);
      std::vector<double> values(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        values[static_cast<size_t>(i)] =
            dtype == kBool ? (i % 3 == 0) : (i * 7 % 23) - 5.5 * (i % 2);
      }
      if (dtype == kU8 || dtype == kI64 || dtype == kI32) {
        for (auto& v : values) v = std::abs(std::round(v));
      }
      const Tensor t = from_vector(values, shape, {.dtype = dtype});
      write_npy(path, t);
      const Tensor back = read_npy(path);
      CHECK(back.dtype() == dtype);
      CHECK(back.sizes() == shape);
      CHECK(back.to_vector<double>() == t.to_vector<double>());
      const Bytes file = read_plain(path);
      // The header pads the data to a 64-byte boundary.
      CHECK(file.size() % 64 == (static_cast<size_t>(n) * dtype_size(dtype)) % 64);
    }
  }
  // Non-contiguous views are written in logical (C) order.
  const Tensor m = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  write_npy(path, m.t());
  CHECK(read_npy(path).to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(read_npy(path).sizes() == Shape{3, 2});

  // The header is the dict numpy writes.
  write_npy(path, m);
  const Bytes file = read_plain(path);
  const int header_len = file[8] + 256 * file[9];
  CHECK(header_len + 10 + 24 == static_cast<int>(file.size()));
  const std::string header(file.begin() + 10, file.begin() + 10 + header_len);
  CHECK(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0) == 0);
  CHECK(header.back() == '\n');
  CHECK(file[6] == 1);

  // Overwrites leave no temp files behind.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) entries += e.is_regular_file();
  CHECK(entries == 1);

  CHECK_THROWS_WITH(write_npy(path, zeros({2}, {.dtype = kBF16})),
                    Catch::Contains("bf16 has no NumPy dtype") && Catch::Contains(".to(hg::kF32)"));
  CHECK_THROWS_WITH(write_npy(dir.file("no/such/dir/a.npy"), m), Catch::Contains("does not exist"));
}

TEST_CASE(".npy reader validates the header and the payload length", "[data][npy][errors]") {
  TempDir dir;
  const std::string path = dir.file("bad.npy");
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const Bytes payload(24, 0);
  auto check = [&](const Bytes& file, const std::string& expected) {
    INFO("expected message: " << expected);
    write_plain(path, file);
    CHECK_THROWS_WITH(read_npy(path), Catch::Contains(expected) && Catch::Contains(path));
  };

  write_plain(path, npy_bytes(good, payload));
  CHECK(read_npy(path).sizes() == Shape{2, 3});
  write_plain(path, npy_bytes(good, payload, 2));  // version 2.0
  CHECK(read_npy(path).sizes() == Shape{2, 3});
  write_plain(path, npy_bytes("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<i4\"}",
                              Bytes(12, 1)));  // any key order, double quotes
  CHECK(read_npy(path).sizes() == Shape{3});

  CHECK_THROWS_WITH(read_npy(dir.file("missing.npy")), Catch::Contains("does not exist"));
  check({0x93, 'N', 'U'}, "too short");
  Bytes bad_magic = npy_bytes(good, payload);
  bad_magic[1] = 'X';
  check(bad_magic, "magic");
  Bytes bad_version = npy_bytes(good, payload);
  bad_version[6] = 4;
  check(bad_version, "version 4.0");
  Bytes long_header = npy_bytes(good, payload);
  long_header[8] = 0xff;
  long_header[9] = 0x7f;  // 32767 bytes: more than the file holds
  check(long_header, "only");
  Bytes huge_header = npy_bytes(good, payload, 2);
  huge_header[10] = 0x10;  // ~1 MiB header: over the 64 KiB limit
  check(huge_header, "the limit is 65536");
  Bytes control = npy_bytes(good, payload);
  control[20] = 0x01;
  check(control, "control byte");

  check(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", payload),
        "Fortran");
  check(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", payload),
        "big-endian");
  check(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", payload),
        "dtype '<c8'");
  check(npy_bytes("{'descr': '<f4', 'shape': (2, 3), }", payload),
        "missing key(s): 'fortran_order'");
  check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", payload),
        "unknown key 'x'");
  check(npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                  payload),
        "duplicate key 'descr'");
  check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", payload), "(n,)");
  check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", payload),
        "non-negative integer");
  check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", payload),
        "after the closing");
  check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", payload), "'}'");
  check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                  payload),
        "64 bits");
  check(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                  "'shape': (4294967296, 4294967296, 4294967296)}",
                  payload),
        "overflows");
  check(npy_bytes(good, Bytes(23, 0)), "truncated file");
  check(npy_bytes(good, Bytes(25, 0)), "trailing data");
  check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000)}", payload),
        "needs 4000000000000 bytes");
  check(npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}", Bytes{0, 1, 2}),
        "byte value 2");
}

TEST_CASE("npy: a shape with a 0 and huge other dims is an hg::Error (was signed overflow)", "[data][npy][fuzz]") {
  TempDir dir;
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }";
  dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(dict.size() & 0xff);
  bytes += static_cast<char>(dict.size() >> 8);
  bytes += dict;
  write_plain(dir.file("huge.npy"), Bytes(bytes.begin(), bytes.end()));
  CHECK_THROWS_WITH(read_npy(dir.file("huge.npy")), Catch::Contains("no row-major strides"));
}

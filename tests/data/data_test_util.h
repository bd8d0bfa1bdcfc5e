// Shared helpers for the data/ tests: temp folders, raw and gzip'ed files,
// IDX byte builders, a fake Fashion-MNIST split.
#pragma once

#include <catch2/catch.hpp>

#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

namespace hg::data::testing {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

// A fresh folder under /tmp, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("hg_test_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty()) REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) > 0);
  REQUIRE(gzclose(f) == Z_OK);
}

inline Bytes read_plain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// An IDX file: 00 00 type ndims, big-endian dims, payload.
inline Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& payload,
                       uint8_t type = 0x08) {
  Bytes b{0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      b.push_back(static_cast<unsigned char>(d >> shift));
    }
  }
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

inline Bytes iota_bytes(size_t n, int start = 0) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((start + i) % 256);
  return b;
}


// Writes a tiny fake Fashion-MNIST split into `dir`.
inline void write_fake_split(const TempDir& dir, const std::string& prefix, uint32_t n_images,
                      uint32_t n_labels, uint8_t max_label = 9, bool gz = true) {
  const Bytes images = idx_bytes({n_images, 28, 28}, iota_bytes(size_t{n_images} * 784));
  Bytes label_payload(n_labels);
  for (uint32_t i = 0; i < n_labels; ++i) label_payload[i] = static_cast<unsigned char>(i % 10);
  if (n_labels > 0) label_payload.back() = max_label;
  const Bytes labels = idx_bytes({n_labels}, label_payload, 0x08);
  const std::string ext = gz ? ".gz" : "";
  auto write = gz ? write_gz : write_plain;
  write(dir.file(prefix + "-images-idx3-ubyte" + ext), images);
  write(dir.file(prefix + "-labels-idx1-ubyte" + ext), labels);
}

}  // namespace hg::data::testing

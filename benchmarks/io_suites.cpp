// io: reading checkpoints. safetensors_header times nn::load_safetensors on
// a file of n zero-size tensors, i.e. the header parse and its validation
// alone (Note [Linear-time header parse] in nn/serialize.cpp); the rows at
// 10K, 100K and 1M tensors show whether the parse stays linear.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "benchmarks/suites.h"
#include "core/error.h"
#include "nn/serialize.h"

namespace hgb {
namespace {

// A file of n F32 tensors of shape [0] ("t0", "t1", ...), written directly.
std::string write_many_tensor_file(int64_t n) {
  std::string header = "{";
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) header += ',';
    header += "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string path =
      "/tmp/hg_bench_header_" + std::to_string(::getpid()) + "_" + std::to_string(n) + ".safetensors";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), sizeof(length));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.close();
  HG_CHECK(out.good(), "hg-bench: cannot write ", path);
  return path;
}

}  // namespace

void add_io(Bench& b, std::vector<Workload>& out) {
  const std::vector<int64_t> counts =
      b.quick() ? std::vector<int64_t>{10'000} : std::vector<int64_t>{10'000, 100'000, 1'000'000};
  for (const int64_t n : counts) {
    const std::string label = n >= 1'000'000 ? std::to_string(n / 1'000'000) + "M" : std::to_string(n / 1000) + "K";
    out.push_back(
        {"io",
         "io/safetensors_header/" + label + "-tensors",
         {{"kind", "safetensors_header"}, {"tensors", n}},
         [n](Bench& bb, const Workload& self) {
           const std::string path = write_many_tensor_file(n);
           uint64_t header_bytes = 0;
           {
             std::ifstream in(path, std::ios::binary);
             in.read(reinterpret_cast<char*>(&header_bytes), sizeof(header_bytes));
           }
           size_t loaded = 0;
           const Stats s = bb.time([&] { loaded = hg::nn::load_safetensors(path).tensors.size(); },
                                   {.inner = 1, .before = {}, .runs = n >= 1'000'000 ? 3 : 0});
           ::unlink(path.c_str());
           HG_CHECK(loaded == static_cast<size_t>(n), "hg-bench: loaded ", loaded, " of ", n, " tensors");
           const double mb = static_cast<double>(header_bytes) / 1e6;
           char text[128];
           std::snprintf(text, sizeof(text), "%.1f MB header, %.2f M tensors/s", mb,
                         static_cast<double>(n) / s.median_s / 1e6);
           bb.emit(self, s, {{"header_mb", mb}, {"tensors_per_s", static_cast<double>(n) / s.median_s}}, text);
         }});
  }
}

}  // namespace hgb

// The safetensors header parser at scale (Note [Linear-time header parse] in
// nn/serialize.cpp): randomly generated many-tensor headers (random dtypes,
// shapes, names, tensor order unrelated to byte order, metadata) load back
// exactly as generated; a duplicated name among thousands is found; and the
// parse time grows linearly: 10x the tensors may cost at most 40x the time
// (a quadratic parse costs 100x).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/hash.h"
#include "nn/serialize.h"
#include "tests/test_files.h"

using namespace hg;

namespace {

struct Spec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes the specs with their data laid out in a shuffled order (offsets
// unrelated to header order), plus `meta` as __metadata__ at a random place.
void write_file(const std::string& path, const std::vector<Spec>& specs, const std::map<std::string, std::string>& meta,
                std::mt19937_64& rng, const std::string& extra_entry = "") {
  std::vector<size_t> data_order(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) data_order[i] = i;
  std::shuffle(data_order.begin(), data_order.end(), rng);
  std::vector<uint64_t> begin(specs.size());
  std::string data;
  for (size_t i : data_order) {
    begin[i] = data.size();
    data.append(specs[i].bytes.begin(), specs[i].bytes.end());
  }
  std::vector<std::string> entries;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string shape;
    for (int64_t d : specs[i].shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    entries.push_back("\"" + specs[i].name + "\":{\"shape\":[" + shape + "],\"data_offsets\":[" +
                      std::to_string(begin[i]) + "," + std::to_string(begin[i] + specs[i].bytes.size()) +
                      "],\"dtype\":\"" + std::string(nn::safetensors_dtype_name(specs[i].dtype)) + "\"}");
  }
  if (!meta.empty()) {
    std::string m;
    for (const auto& [k, v] : meta) m += (m.empty() ? "" : ",") + ("\"" + k + "\":\"" + v + "\"");
    entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(rng() % (entries.size() + 1)),
                   "\"__metadata__\":{" + m + "}");
  }
  if (!extra_entry.empty()) entries.push_back(extra_entry);
  std::string header = "{";
  for (size_t i = 0; i < entries.size(); ++i) header += (i ? "," : "") + entries[i];
  header += "}";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

std::vector<Spec> random_specs(size_t n, std::mt19937_64& rng) {
  const DType dtypes[] = {kF64, kF32, kF16, kBF16, kI64, kI32, kU8};
  std::vector<Spec> specs;
  for (size_t i = 0; i < n; ++i) {
    Spec s;
    s.name = "layer" + std::to_string(rng() % 1000) + ".w" + std::to_string(i);
    s.dtype = dtypes[rng() % std::size(dtypes)];
    const int dims = static_cast<int>(rng() % 4);
    int64_t numel = 1;
    for (int d = 0; d < dims; ++d) {
      s.shape.push_back(static_cast<int64_t>(rng() % 4));
      numel *= s.shape.back();
    }
    s.bytes.resize(static_cast<size_t>(numel) * dtype_size(s.dtype));
    for (uint8_t& b : s.bytes) b = static_cast<uint8_t>(rng());
    if (s.dtype == kF64 || s.dtype == kF32 || s.dtype == kF16 || s.dtype == kBF16) {
      std::fill(s.bytes.begin(), s.bytes.end(), uint8_t{0x3c});  // finite for every float width
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

// A header of n zero-size tensors; returns the seconds of the best of two loads.
double time_zero_size_header(const std::string& path, int64_t n) {
  std::string header = "{";
  for (int64_t i = 0; i < n; ++i) {
    header += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  }
  header += "}";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header;
  }
  // The process's CPU time, the best of three: the parse is single-threaded,
  // so CPU time counts its work and not the time other processes on a loaded
  // machine (ctest runs two tests at once) hold the core.
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    const std::clock_t t0 = std::clock();
    const nn::SafetensorsFile f = nn::load_safetensors(path);
    best = std::min(best, static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC);
    REQUIRE(f.tensors.size() == static_cast<size_t>(n));
  }
  return best;
}

}  // namespace

TEST_CASE("safetensors header at scale: random many-tensor headers load exactly", "[nn][serialize][scale]") {
  test::TempDir dir;
  std::mt19937_64 rng(20261204);
  for (size_t n : {size_t{1}, size_t{37}, size_t{2000}, size_t{20000}}) {
    INFO("tensors: " << n);
    const std::vector<Spec> specs = random_specs(n, rng);
    std::map<std::string, std::string> meta;
    const size_t meta_keys = rng() % 3 == 0 ? 0 : 1 + rng() % 5000;
    for (size_t k = 0; k < meta_keys; ++k) meta["key" + std::to_string(k)] = std::to_string(rng());
    const std::string path = (dir.path / ("many" + std::to_string(n) + ".safetensors")).string();
    write_file(path, specs, meta, rng);
    const nn::SafetensorsFile f = nn::load_safetensors(path);
    REQUIRE(f.tensors.size() == n);
    CHECK(f.metadata == meta);
    for (size_t i = 0; i < n; ++i) {
      REQUIRE(f.tensors[i].first == specs[i].name);  // header order
      const Tensor& t = f.tensors[i].second;
      REQUIRE(t.dtype() == specs[i].dtype);
      REQUIRE(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()) == specs[i].shape);
      REQUIRE(t.nbytes() == specs[i].bytes.size());
      if (t.nbytes() > 0) REQUIRE(std::memcmp(t.data_ptr(), specs[i].bytes.data(), t.nbytes()) == 0);
    }

    // The same file with one name repeated at the end is refused.
    if (n > 1) {
      const Spec& again = specs[rng() % n];
      const std::string dup = (dir.path / "dup.safetensors").string();
      write_file(dup, specs, meta, rng,
                 "\"" + again.name + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}");
      CHECK_THROWS_WITH(nn::load_safetensors(dup),
                        Catch::Contains("the key '" + again.name + "' appears twice in the header"));
    }
  }
}

TEST_CASE("safetensors header at scale: the parse time is linear in the tensor count", "[nn][serialize][scale]") {
  test::TempDir dir;
  const std::string path = (dir.path / "zero.safetensors").string();
  const double small = time_zero_size_header(path, 20'000);
  const double large = time_zero_size_header(path, 200'000);
  INFO("20K tensors: " << small << " s, 200K tensors: " << large << " s");
  // Linear: ~10x. The old parse (quadratic) took ~100x; 40x leaves room for
  // a loaded machine and the allocator.
  CHECK(large < 40.0 * small + 0.05);
}

TEST_CASE("xxh64: the published test vectors, for any split of the input", "[nn][serialize][integrity]") {
  auto xxh = [](const std::string& text, size_t split) {
    Xxh64 h;
    h.update(text.data(), std::min(split, text.size()));
    if (split < text.size()) h.update(text.data() + split, text.size() - split);
    return h.digest();
  };
  const std::string spam = "Nobody inspects the spammish repetition";
  for (size_t split : {size_t{0}, size_t{1}, size_t{5}, size_t{31}, size_t{32}, size_t{33}, size_t{100}}) {
    CHECK(xxh("", split) == 0xEF46DB3751D8E999ull);
    CHECK(xxh("abc", split) == 0x44BC2CF5AD770999ull);
    CHECK(xxh(spam, split) == 0xFBCEA83C8A378BF1ull);
  }
  CHECK(hex64(0xEF46DB3751D8E999ull) == "ef46db3751d8e999");
}

TEST_CASE("safetensors integrity hash: one flipped data byte is refused", "[nn][serialize][integrity]") {
  test::TempDir dir;
  const std::string path = (dir.path / "w.safetensors").string();
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * static_cast<float>(i);
  nn::save_safetensors(path, {{"w", from_vector(values, {10, 100})}, {"b", from_vector(std::vector<float>{1, 2})}},
                       {{"note", "x"}});
  // Intact: loads, and the hash entry is consumed (not part of the model's metadata).
  nn::SafetensorsFile f = nn::load_safetensors(path);
  CHECK(f.metadata == std::map<std::string, std::string>{{"note", "x"}});
  // Flip one bit of each of a few data bytes (one at a time): every one is refused.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  const size_t data_start = 8 + header_length;
  for (size_t at : {data_start, data_start + 1777, bytes.size() - 1}) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    const std::string bad = (dir.path / "flipped.safetensors").string();
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << flipped;
    CHECK_THROWS_WITH(nn::load_safetensors(bad), Catch::Contains("does not match the integrity hash") &&
                                                     Catch::Contains(bad) && Catch::Contains("verify_integrity"));
    // The switch reads it anyway (a foreign program's deliberate change).
    const nn::SafetensorsFile g = nn::load_safetensors(bad, {.verify_integrity = false});
    CHECK(g.tensors.size() == 2);
  }
  // A file without the entry (as PyTorch writes them) loads unverified: the
  // random-header test above writes such files.
}

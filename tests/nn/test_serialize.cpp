// safetensors checkpoints: bit-exact round trips of every dtype, one hand-crafted
// corrupt file per validation rule, atomic saves, and a file written by PyTorch.
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nn/serialize.h"
#include "tests/test_files.h"

using namespace hg;
using hg::test::read_bytes;
using hg::test::TempDir;
using hg::test::write_bytes;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// The raw bytes of a tensor in row-major order.
std::string tensor_bytes(const Tensor& t) {
  Tensor c = t.cpu().contiguous();
  return c.nbytes() == 0 ? std::string()
                         : std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// A CPU tensor holding exactly these bytes (lets tests pick f16/bf16 bit patterns).
template <typename Bits>
Tensor from_bits(DType dtype, Shape shape, const std::vector<Bits>& bits) {
  Tensor t = empty(std::move(shape), {.dtype = dtype});
  REQUIRE(t.nbytes() == bits.size() * sizeof(Bits));
  std::memcpy(t.data_ptr(), bits.data(), t.nbytes());
  return t;
}

// A safetensors file by hand: length field (header.size() unless overridden), header, buffer.
std::string craft(const std::string& header, const std::string& buffer = "",
                  std::optional<uint64_t> length = std::nullopt) {
  const uint64_t n = length.value_or(header.size());
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return bytes + header + buffer;
}

// One header entry as JSON text.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

// Loading these bytes must fail with a message naming the file and containing `rule`.
void expect_rejected(const std::string& bytes, const std::string& rule) {
  TempDir dir;
  const fs::path path = dir.path / "bad.safetensors";
  write_bytes(path, bytes);
  try {
    nn::load_safetensors(path.string());
    FAIL("a corrupt file loaded; expected the rule: " << rule);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK_THAT(e.message(), Contains(rule));
    CHECK_THAT(e.message(), Contains(path.string()));
  }
}

// Restores the file size limit and SIGXFSZ handling however the test exits.
struct FileSizeCap {
  rlimit old_limit{};
  void (*old_handler)(int) = nullptr;
  explicit FileSizeCap(rlim_t max_bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    old_handler =
        ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
    rlimit capped = old_limit;
    capped.rlim_cur = max_bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &capped) == 0);
  }
  ~FileSizeCap() {
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    ::signal(SIGXFSZ, old_handler);
  }
};

using Named = std::vector<std::pair<std::string, Tensor>>;

// One tensor of every dtype, with awkward values, ranks and layouts.
Named every_dtype() {
  const std::vector<uint16_t> half_bits = {
      0x0000, 0x8000, 0x3c00, 0x7c00,   // 0, -0, 1, inf
      0xfc00, 0x7e01, 0x0001, 0x7bff};  // -inf, NaN payload, subnormal, max
  const std::vector<uint16_t> bf16_bits = {0x0000, 0x8000, 0x3f80, 0x7f80,
                                           0xff80, 0x7fc1, 0x0001, 0x7f7f};
  return {
      {"f64", from_vector<double>({1.5, -0.0, 1e300, std::numeric_limits<double>::denorm_min(),
                                   std::numeric_limits<double>::quiet_NaN()})},
      {"f32_scalar", scalar_tensor(3.25)},
      {"f16_bits", from_bits(kF16, {2, 4}, half_bits)},
      {"bf16_bits", from_bits(kBF16, {4, 2}, bf16_bits)},
      {"i64", from_vector<int64_t>({std::numeric_limits<int64_t>::min(), -1, 0, std::numeric_limits<int64_t>::max()})},
      {"i32", from_vector<int32_t>({-7, 0, 7, std::numeric_limits<int32_t>::max()}, {2, 2})},
      {"u8", from_vector<uint8_t>({0, 1, 255})},
      {"bool", from_vector<uint8_t>({1, 0, 1}).to(kBool)},
      // fp8: 0, -0, 1, max, NaN, smallest subnormal (E4M3); 0, inf, max, NaN (E5M2).
      {"f8e4m3_bits", from_bits(kF8E4M3, {2, 3}, std::vector<uint8_t>{0x00, 0x80, 0x38, 0x7e, 0x7f, 0x01})},
      {"f8e5m2_bits", from_bits(kF8E5M2, {4}, std::vector<uint8_t>{0x00, 0x7c, 0xfb, 0x7f})},
      {"empty_f32", zeros({0, 3})},
      {"empty_i64", zeros({0}, {.dtype = kI64})},
      // [3, 2] transposed view: the file must hold its row-major values 0 3 1 4 2 5.
      {"transposed", arange(6).view({2, 3}).t()},
  };
}

const std::map<std::string, std::string> kMetadata = {
    {"format", "pt"}, {"step", "42"}, {"note", "h\xc3\xa9llo \xe2\x9c\x93"}};

}  // namespace

TEST_CASE("round trip of every dtype keeps bits, shapes, order and metadata", "[nn][serialize]") {
  TempDir dir;
  const fs::path path = dir.path / "all.safetensors";
  const Named saved = every_dtype();
  nn::save_safetensors(path.string(), saved, kMetadata);

  // Layout: the buffer starts 8-byte aligned and the header is space-padded JSON.
  const std::string bytes = read_bytes(path);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  CHECK(header_length % 8 == 0);
  CHECK(bytes[8] == '{');

  const nn::SafetensorsFile loaded = nn::load_safetensors(path.string());
  CHECK(loaded.metadata == kMetadata);
  REQUIRE(loaded.tensors.size() == saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    const auto& [name, original] = saved[i];
    const Tensor& back = loaded.tensors[i].second;
    INFO(name);
    CHECK(loaded.tensors[i].first == name);
    CHECK(back.dtype() == original.dtype());
    CHECK(back.sizes() == original.sizes());
    CHECK(back.is_cpu());
    CHECK(back.is_contiguous());
    CHECK(tensor_bytes(back) == tensor_bytes(original));
  }
  CHECK(loaded.at("transposed").to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(loaded.at("f32_scalar").dim() == 0);
  CHECK(loaded.contains("u8"));
  const std::vector<float> e4m3 = loaded.at("f8e4m3_bits").to_vector<float>();
  CHECK((e4m3[0] == 0.0f && std::signbit(e4m3[1]) && e4m3[2] == 1.0f && e4m3[3] == 448.0f && std::isnan(e4m3[4]) &&
         e4m3[5] == 0x1p-9f));
  CHECK(loaded.at("f8e5m2_bits").to_vector<float>()[2] == -57344.0f);
  // The header names them as the safetensors format does.
  CHECK(bytes.find("\"F8_E4M3\"") != std::string::npos);
  CHECK(bytes.find("\"F8_E5M2\"") != std::string::npos);
  CHECK_FALSE(loaded.contains("missing"));
  CHECK_THROWS_WITH(loaded.at("missing"),
                    Contains("no tensor named 'missing'") && Contains("f16_bits"));

  // Saving over an existing file replaces it; no metadata means no __metadata__ key.
  nn::save_safetensors(path.string(), {{"only", ones({2})}});
  const nn::SafetensorsFile replaced = nn::load_safetensors(path.string());
  CHECK(replaced.tensors.size() == 1);
  CHECK(replaced.metadata.empty());
  CHECK(dir.entries() == std::set<std::string>{"all.safetensors"});

  // For the PyTorch interop check (tests/nn/fixtures/check_safetensors.py).
  if (const char* out = std::getenv("HG_SAFETENSORS_OUT")) {
    nn::save_safetensors(out, every_dtype(), kMetadata);
  }
}

TEST_CASE("a file written by PyTorch's safetensors loads with the right values",
          "[nn][serialize]") {
  const nn::SafetensorsFile f =
      nn::load_safetensors(std::string(HG_NN_FIXTURE_DIR) + "/torch_written.safetensors");
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"source", "torch"}});
  CHECK(f.tensors.size() == 9);
  CHECK(f.at("weight").dtype() == kF16);
  CHECK(f.at("weight").sizes() == Shape{2, 3});
  CHECK(f.at("weight").to_vector<float>() == std::vector<float>{-1, -0.5, 0, 0.5, 1, 1.5});
  CHECK(f.at("bias").dtype() == kBF16);
  CHECK(f.at("bias").to_vector<float>() == std::vector<float>{1, -2, 0.5});
  CHECK(f.at("ids").to_vector<int64_t>() == std::vector<int64_t>{0, -1, int64_t{1} << 40, 7});
  CHECK(f.at("mask").dtype() == kBool);
  CHECK(f.at("mask").to_vector<uint8_t>() == std::vector<uint8_t>{1, 0, 0, 1});
  CHECK(f.at("scalar").dim() == 0);
  CHECK(f.at("scalar").item<float>() == 3.5f);
  CHECK(f.at("empty").sizes() == Shape{0, 2});
  CHECK(f.at("double").to_vector<double>() == std::vector<double>{1.0 / 3.0, -1e-300});
  CHECK(f.at("int").to_vector<int32_t>() == std::vector<int32_t>{-5, 0, 5});
  CHECK(f.at("bytes").to_vector<uint8_t>() == std::vector<uint8_t>{0, 128, 255});
}

TEST_CASE("a hand-crafted valid file loads, so the negative tests below isolate one rule",
          "[nn][serialize]") {
  TempDir dir;
  const fs::path path = dir.path / "ok.safetensors";
  const float values[2] = {1.0f, -2.0f};
  write_bytes(path, craft("{" + entry("a", "F32", "[2]", "[0,8]") + "," +
                              entry("z", "U8", "[0]", "[8,8]") + ",\"__metadata__\":{\"k\":\"v\"}}",
                          std::string(reinterpret_cast<const char*>(values), 8)));
  const nn::SafetensorsFile f = nn::load_safetensors(path.string());
  CHECK(f.at("a").to_vector<float>() == std::vector<float>{1.0f, -2.0f});
  CHECK(f.at("z").numel() == 0);
  CHECK(f.metadata.at("k") == "v");
  // An empty file body: no tensors, empty buffer.
  write_bytes(path, craft("{}"));
  CHECK(nn::load_safetensors(path.string()).tensors.empty());
}

TEST_CASE("each validation rule rejects a file that breaks it", "[nn][serialize]") {
  const std::string eight(8, '\0');
  const std::string ok_a = entry("a", "F32", "[2]", "[0,8]");

  SECTION("file shorter than 8 bytes") { expect_rejected("abc", "shorter than the 8-byte"); }
  SECTION("header length over 100 MB") {
    expect_rejected(craft("{}", "", 100'000'001), "exceeds the limit of 100000000");
  }
  SECTION("header length beyond the file end") {
    expect_rejected(craft("{}", "", 64), "runs past the end of the file");
  }
  SECTION("header not UTF-8") {
    expect_rejected(craft("{\"\xff\":{}}"), "not valid UTF-8");
    expect_rejected(craft("{\"\xc0\xaf\":{}}"), "not valid UTF-8");      // overlong '/'
    expect_rejected(craft("{\"\xed\xa0\x80\":{}}"), "not valid UTF-8");  // surrogate
  }
  SECTION("header not JSON") { expect_rejected(craft("{\"a\": "), "not valid JSON"); }
  SECTION("header not a JSON object") { expect_rejected(craft("[1, 2]"), "must be a JSON object"); }
  SECTION("entry not an object") {
    expect_rejected(craft("{\"a\": [1]}"), "entry 'a' must be an object");
  }
  SECTION("entry missing a key") {
    expect_rejected(craft("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", eight),
                    "missing the key 'shape'");
  }
  SECTION("entry with an extra key") {
    expect_rejected(
        craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", eight),
        "has an unexpected key 'x'");
  }
  SECTION("unknown dtype") {
    expect_rejected(craft("{" + entry("a", "I8", "[8]", "[0,8]") + "}", eight), "unknown dtype");
    expect_rejected(craft("{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", eight),
                    "unknown dtype");
  }
  SECTION("shape not a list of non-negative integers") {
    const std::string rule = "shape must be a list of non-negative integers";
    expect_rejected(craft("{" + entry("a", "F32", "2", "[0,8]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[-2]", "[0,8]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[2.0]", "[0,8]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[\"2\"]", "[0,8]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[9223372036854775808]", "[0,8]") + "}", eight),
                    rule);
  }
  SECTION("data_offsets not two integers with begin <= end") {
    const std::string rule = "data_offsets must be two non-negative integers";
    expect_rejected(craft("{" + entry("a", "F32", "[2]", "[0,8,8]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[2]", "[8]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[0]", "[8,0]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[2]", "[-8,0]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[2]", "[0,8.5]") + "}", eight), rule);
    expect_rejected(craft("{" + entry("a", "F32", "[2]", "{\"b\":0}") + "}", eight), rule);
  }
  SECTION("shape x dtype size differs from the byte span") {
    expect_rejected(craft("{" + entry("a", "F32", "[3]", "[0,8]") + "}", eight),
                    "needs 12 bytes but data_offsets span 8");
  }
  SECTION("shape x dtype size overflows 64 bits") {
    // 2^62 * 8 elements of 4 bytes: wraps to 0 without overflow checks, matching [0, 0].
    expect_rejected(craft("{" + entry("a", "F32", "[4611686018427387904,8]", "[0,0]") + "}"),
                    "overflows a 64-bit byte count");
    expect_rejected(craft("{" + entry("a", "F64", "[2305843009213693952]", "[0,0]") + "}"),
                    "overflows a 64-bit byte count");
  }
  SECTION("offsets beyond the buffer") {
    expect_rejected(craft("{" + entry("a", "F32", "[2]", "[4,12]") + "}", eight),
                    "run past the data buffer, which is 8 bytes");
    // An end near 2^64 must not wrap any sum around.
    expect_rejected(
        craft("{" + entry("a", "U8", "[8]", "[18446744073709551607,18446744073709551615]") + "}",
              eight),
        "run past the data buffer");
  }
  SECTION("overlapping tensors") {
    expect_rejected(craft("{" + ok_a + "," + entry("b", "F32", "[1]", "[4,8]") + "}", eight),
                    "overlap in the data buffer");
    // A zero-length tensor placed inside another one also overlaps it.
    expect_rejected(craft("{" + ok_a + "," + entry("b", "F32", "[0]", "[4,4]") + "}", eight),
                    "overlap in the data buffer");
  }
  SECTION("gap between tensors") {
    expect_rejected(craft("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                              entry("b", "U8", "[2]", "[6,8]") + "}",
                          eight),
                    "bytes [4, 6) of the data buffer belong to no tensor (a gap before 'b')");
  }
  SECTION("trailing bytes after the last tensor") {
    expect_rejected(
        craft("{" + entry("a", "F32", "[1]", "[0,4]") + "}", eight),
        "bytes [4, 8) at the end of the data buffer belong to no tensor (trailing bytes)");
    expect_rejected(craft("{}", "x"), "trailing bytes");
  }
  SECTION("duplicate names") {
    expect_rejected(craft("{" + ok_a + "," + entry("a", "F32", "[2]", "[0,8]") + "}", eight),
                    "the key 'a' appears twice");
    expect_rejected(craft("{" + ok_a + ",\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", eight),
                    "the key 'k' appears twice");
  }
  SECTION("__metadata__ not an object of strings") {
    expect_rejected(craft("{" + ok_a + ",\"__metadata__\":[\"k\"]}", eight),
                    "'__metadata__' must be an object of strings");
    expect_rejected(craft("{" + ok_a + ",\"__metadata__\":{\"step\":3}}", eight),
                    "'__metadata__' must hold only string values, but 'step' is a number");
  }
  SECTION("BOOL bytes other than 0 and 1") {
    expect_rejected(craft("{" + entry("m", "BOOL", "[8]", "[0,8]") + "}",
                          std::string("\x01\x00\x02\x00\x00\x00\x00\x00", 8)),
                    "holds the byte 2 at element 2; only 0 and 1 are valid");
  }
  SECTION("missing file") {
    CHECK_THROWS_WITH(nn::load_safetensors("/nonexistent/x.safetensors"),
                      Contains("'/nonexistent/x.safetensors': cannot open it"));
  }
}

TEST_CASE("save_safetensors rejects bad names before touching the disk", "[nn][serialize]") {
  TempDir dir;
  const std::string path = (dir.path / "x.safetensors").string();
  CHECK_THROWS_WITH(nn::save_safetensors(path, {{"", ones({1})}}), Contains("empty name"));
  CHECK_THROWS_WITH(nn::save_safetensors(path, {{"a", ones({1})}, {"a", ones({2})}}),
                    Contains("'a' is used by two tensors"));
  CHECK_THROWS_WITH(nn::save_safetensors(path, {{"__metadata__", ones({1})}}),
                    Contains("reserved"));
  CHECK_THROWS_WITH(nn::save_safetensors(path, {{"a", Tensor()}}), Contains("'a' is undefined"));
  CHECK_THROWS_WITH(nn::save_safetensors(path, {{"a\xff", ones({1})}}),
                    Contains("not valid UTF-8"));
  CHECK(dir.entries().empty());
}

TEST_CASE("a save that fails midway leaves the old checkpoint and no temp file",
          "[nn][serialize]") {
  TempDir dir;
  const fs::path path = dir.path / "ckpt.safetensors";
  nn::save_safetensors(path.string(), {{"w", ones({4})}}, {{"version", "old"}});
  const std::string before = read_bytes(path);
  {
    // The 1 MiB tensor crosses a 64 KiB file size cap: write() fails with EFBIG
    // after the temp file already holds the header and part of the data.
    FileSizeCap cap(64 * 1024);
    CHECK_THROWS_WITH(
        nn::save_safetensors(path.string(), {{"w", zeros({256 * 1024})}}, {{"version", "new"}}),
        Contains("writing") && Contains(".tmp."));
  }
  CHECK(read_bytes(path) == before);
  CHECK(dir.entries() == std::set<std::string>{"ckpt.safetensors"});
  CHECK(nn::load_safetensors(path.string()).metadata.at("version") == "old");
}

TEST_CASE("a save whose rename fails removes its temp file", "[nn][serialize]") {
  TempDir dir;
  // The target is a non-empty folder: the temp file is written, then rename() fails.
  const fs::path target = dir.path / "ckpt.safetensors";
  fs::create_directory(target);
  write_bytes(target / "keep", "old");
  CHECK_THROWS_WITH(nn::save_safetensors(target.string(), {{"w", ones({4})}}),
                    Contains("cannot rename"));
  CHECK(dir.entries() == std::set<std::string>{"ckpt.safetensors"});
  CHECK(read_bytes(target / "keep") == "old");

  // A missing folder fails before any file exists.
  CHECK_THROWS_WITH(
      nn::save_safetensors((dir.path / "no" / "x.safetensors").string(), {{"w", ones({1})}}),
      Contains("cannot create the temp file"));
  CHECK(dir.entries() == std::set<std::string>{"ckpt.safetensors"});
}

TEST_CASE("docs/checkpoints.md example", "[nn][serialize]") {
  TempDir dir;
  const std::string path = (dir.path / "model.safetensors").string();
  hg::Tensor w = hg::randn({128, 784}, {.dtype = hg::kF16});
  hg::Tensor b = hg::zeros({128});
  hg::nn::save_safetensors(path, {{"fc1.weight", w}, {"fc1.bias", b}}, {{"step", "1000"}});

  hg::nn::SafetensorsFile f = hg::nn::load_safetensors(path);
  hg::Tensor w2 = f.at("fc1.weight");
  std::string step = f.metadata.at("step");
  CHECK(tensor_bytes(w2) == tensor_bytes(w));
  CHECK(w2.dtype() == hg::kF16);
  CHECK(step == "1000");
}

TEST_CASE("every truncation of a valid file is an hg::Error, never a crash", "[nn][serialize]") {
  TempDir dir;
  const fs::path path = dir.path / "full.safetensors";
  nn::save_safetensors(path.string(), every_dtype(), kMetadata);
  const std::string full = read_bytes(path);
  const fs::path cut = dir.path / "cut.safetensors";
  for (size_t size = 0; size < full.size(); ++size) {
    write_bytes(cut, full.substr(0, size));
    INFO("truncated to " << size << " of " << full.size() << " bytes");
    CHECK_THROWS_AS(nn::load_safetensors(cut.string()), Error);
  }
}

TEST_CASE("a save killed at a random moment leaves a complete checkpoint", "[nn][serialize]") {
  TempDir dir;
  const fs::path path = dir.path / "ckpt.safetensors";
  nn::save_safetensors(path.string(), {{"w", zeros({4})}}, {{"version", "old"}});
  // Each version fills w with its own number, so a torn file would show mixed values.
  const Tensor ones_w = full({256 * 1024}, 1.0);
  const Tensor twos_w = full({256 * 1024}, 2.0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Saves forever, alternating versions, until the parent kills it.
    for (int i = 0;; ++i) {
      try {
        nn::save_safetensors(path.string(), {{"w", i % 2 ? twos_w : ones_w}},
                             {{"version", std::to_string(1 + i % 2)}});
      } catch (...) {
        ::_exit(3);
      }
    }
  }
  ::usleep(30'000);
  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));

  const nn::SafetensorsFile f = nn::load_safetensors(path.string());
  const std::string version = f.metadata.at("version");
  INFO("version " << version);
  const std::vector<float> w = f.at("w").to_vector<float>();
  if (version == "old") {
    CHECK(w == std::vector<float>(4, 0.0f));
  } else {
    CHECK(w == std::vector<float>(256 * 1024, version == "1" ? 1.0f : 2.0f));
  }
  // Only the killed save's own temp file may be left next to the checkpoint.
  for (const std::string& name : dir.entries()) {
    if (name == "ckpt.safetensors") continue;
    CHECK_THAT(name, Contains("ckpt.safetensors.tmp." + std::to_string(child) + "."));
  }
}

TEST_CASE("headers that broke the reader: huge dims with a 0, deep nesting, very wide values",
          "[nn][serialize][fuzz]") {
  // [0, 2^62, 4]: 0 bytes, but contiguous strides overflowed (signed overflow; found by the fuzzer).
  expect_rejected(craft("{" + entry("x", "F32", "[0,4611686018427387904,4]", "[0,0]") + "}"), "no row-major strides");
  // A million nested lists as the dtype: the message's json.dump() recursed once
  // per level and overflowed the stack (SIGSEGV). Nesting is now refused while parsing.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  expect_rejected(craft("{\"x\":{\"dtype\":" + deep + ",\"shape\":[1],\"data_offsets\":[0,4]}}", std::string(4, '\0')),
                  "nests lists or objects more than");
  // A very wide dtype value: the message names its size, not its 6 MB of text.
  std::string wide = "[";
  for (int i = 0; i < 1'000'000; ++i) wide += i ? ",1" : "1";
  wide += "]";
  const std::string bytes = craft("{\"x\":{\"dtype\":" + wide + ",\"shape\":[1],\"data_offsets\":[0,4]}}", std::string(4, '\0'));
  expect_rejected(bytes, "unknown dtype a list of 1000000 values");
  TempDir dir;
  write_bytes(dir.path / "wide", bytes);
  try {
    nn::load_safetensors((dir.path / "wide").string());
  } catch (const Error& e) {
    CHECK(e.message().size() < 400);
  }
  // A 100 kB tensor name is clipped in messages too.
  expect_rejected(craft("{" + entry(std::string(100'000, 'n'), "F32", "[2]", "[0,4]") + "}", std::string(4, '\0')),
                  "... (100000 bytes)");
}

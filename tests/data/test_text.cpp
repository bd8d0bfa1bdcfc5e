// data/text.h: the character corpus (vocabulary, encode/decode, split, files)
// and random windows, against values computed here from the text itself.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/generator.h"
#include "data/text.h"
#include "tests/test_files.h"

using namespace hg;

TEST_CASE("CharCorpus: byte vocabulary, encode/decode round trip, split", "[data][text]") {
  const std::string text = "to be, or not to be:\nthat is the question.";
  data::CharCorpus c(text);
  const std::set<char> distinct(text.begin(), text.end());
  CHECK(c.vocab_size() == static_cast<int64_t>(distinct.size()));
  CHECK(c.vocab() == std::string(distinct.begin(), distinct.end()));  // sorted bytes
  const std::vector<int64_t> tok = c.tokens().to_vector<int64_t>();
  REQUIRE(tok.size() == text.size());
  for (size_t i = 0; i < text.size(); ++i) CHECK(c.vocab()[static_cast<size_t>(tok[i])] == text[i]);
  CHECK(c.decode(c.tokens()) == text);
  CHECK(c.decode(c.encode("not to be")) == "not to be");
  CHECK_THROWS_WITH(c.encode("toby"), Catch::Contains("byte value 121") && Catch::Contains("position 3"));
  CHECK_THROWS_WITH(c.decode(from_vector(std::vector<int64_t>{0, 99}, {2}, {.dtype = kI64})),
                    Catch::Contains("token 99"));
  auto [train, val] = c.split(0.9);
  CHECK(train.numel() == 38);  // round(0.9 * 42)
  CHECK(train.numel() + val.numel() == static_cast<int64_t>(text.size()));
  CHECK(c.decode(val) == text.substr(38));
  CHECK_THROWS_WITH(data::CharCorpus(""), Catch::Contains("empty"));
}

TEST_CASE("CharCorpus::from_folder reads the text files in name order", "[data][text]") {
  test::TempDir dir;
  test::write_bytes(dir.path / "b", "second\n%\n");
  test::write_bytes(dir.path / "a", "first\n%\n");
  test::write_bytes(dir.path / "a.dat", std::string("\0\1\2\3", 4));   // strfile index: skipped
  std::filesystem::create_symlink(dir.path / "a", dir.path / "a.u8");  // skipped
  const data::CharCorpus c = data::CharCorpus::from_folder(dir.path.string());
  CHECK(c.text() == "first\n%\nsecond\n%\n");
  CHECK_THROWS_WITH(data::CharCorpus::from_folder((dir.path / "missing").string()), Catch::Contains("no folder"));
}

TEST_CASE("random_windows: y is x shifted by one, seeded, every start reachable", "[data][text]") {
  std::string text;
  for (int i = 0; i < 50; ++i) text.push_back(static_cast<char>('A' + i % 26));
  data::CharCorpus c(text);
  Generator g1(5), g2(5);
  auto [x1, y1] = data::random_windows(c.tokens(), 64, 8, g1);
  auto [x2, y2] = data::random_windows(c.tokens(), 64, 8, g2);
  REQUIRE(x1.sizes() == Shape{64, 8});
  CHECK(x1.to_vector<int64_t>() == x2.to_vector<int64_t>());  // same seed, same batch
  const std::vector<int64_t> all = c.tokens().to_vector<int64_t>(), x = x1.to_vector<int64_t>(),
                             y = y1.to_vector<int64_t>();
  std::set<int64_t> starts;
  for (int64_t b = 0; b < 64; ++b) {
    // Find the window's start from its text (the 50-character text repeats
    // every 26, so the start is determined modulo 26 plus range): check that
    // both rows are consecutive runs of the token sequence.
    const int64_t first = x[static_cast<size_t>(b * 8)];
    for (int64_t t = 0; t < 8; ++t) {
      CHECK(x[static_cast<size_t>(b * 8 + t)] == (first + t) % 26);
      CHECK(y[static_cast<size_t>(b * 8 + t)] == (first + t + 1) % 26);
    }
    starts.insert(first);
  }
  CHECK(starts.size() > 10);  // 64 draws over 42 starts: many distinct
  Generator g3(6);
  CHECK(data::random_windows(c.tokens(), 64, 8, g3).first.to_vector<int64_t>() != x);
  CHECK_THROWS_WITH(data::random_windows(c.tokens(), 2, 50, g3), Catch::Contains("too few"));
}

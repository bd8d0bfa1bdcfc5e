// Character-level text data (data/text.h).
#include "data/text.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/generator.h"

namespace hg::data {

namespace fs = std::filesystem;

namespace {
bool integer_tokens(const Tensor& t) {
  return t.defined() && t.dim() == 1 && !is_floating(t.dtype()) && t.dtype() != kBool;
}
}  // namespace

CharCorpus::CharCorpus(std::string text) : text_(std::move(text)), index_(256, -1) {
  HG_CHECK(!text_.empty(), "CharCorpus: the text is empty; give it at least one character");
  std::array<bool, 256> seen{};
  for (const char c : text_) seen[static_cast<unsigned char>(c)] = true;
  for (int b = 0; b < 256; ++b) {
    if (!seen[static_cast<size_t>(b)]) continue;
    index_[static_cast<size_t>(b)] = static_cast<int16_t>(vocab_.size());
    vocab_.push_back(static_cast<char>(b));
  }
  tokens_ = encode(text_);
}

CharCorpus CharCorpus::from_folder(const std::string& folder) {
  const bool fortunes = fs::path(folder) == fs::path(kFortunesRoot);
  std::error_code ec;
  HG_CHECK(fs::is_directory(folder, ec), "CharCorpus: no folder '", folder, "'",
           fortunes ? " (install Debian's fortunes package: apt-get install fortunes)" : "");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.is_symlink() || !entry.is_regular_file() || entry.path().extension() == ".dat") continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    HG_CHECK(in.good(), "CharCorpus: cannot read '", f.string(), "'");
    std::ostringstream all;
    all << in.rdbuf();
    text += all.str();
  }
  HG_CHECK(!text.empty(), "CharCorpus: the folder '", folder, "' holds no text files");
  return CharCorpus(std::move(text));
}

Tensor CharCorpus::encode(std::string_view s) const {
  Tensor out = empty({static_cast<int64_t>(s.size())}, {.dtype = kI64});
  int64_t* p = out.data<int64_t>();
  for (size_t i = 0; i < s.size(); ++i) {
    const int16_t t = index_[static_cast<unsigned char>(s[i])];
    HG_CHECK(t >= 0, "CharCorpus::encode: the character with byte value ",
             static_cast<int>(static_cast<unsigned char>(s[i])), " at position ", i, " is not in the vocabulary of ",
             vocab_.size(), " characters");
    p[i] = t;
  }
  return out;
}

std::string CharCorpus::decode(const Tensor& tokens) const {
  HG_CHECK(integer_tokens(tokens), "CharCorpus::decode: expected a 1-D integer tensor of tokens, got ",
           tokens.defined() ? tokens.shape_str() : "an undefined tensor");
  std::string s;
  for (const int64_t t : tokens.to_vector<int64_t>()) {
    HG_CHECK(t >= 0 && t < vocab_size(), "CharCorpus::decode: token ", t, " is outside the vocabulary [0, ",
             vocab_size(), ")");
    s.push_back(vocab_[static_cast<size_t>(t)]);
  }
  return s;
}

std::pair<Tensor, Tensor> CharCorpus::split(double fraction) const {
  HG_CHECK(fraction > 0.0 && fraction < 1.0, "CharCorpus::split: the fraction must be in (0, 1), got ", fraction);
  const int64_t n = size();
  const int64_t cut = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
  return {tokens_.narrow(0, 0, cut), tokens_.narrow(0, cut, n - cut)};
}

std::pair<Tensor, Tensor> random_windows(const Tensor& tokens, int64_t batch, int64_t block, Generator& gen,
                                         Device device) {
  HG_CHECK(integer_tokens(tokens) && tokens.is_cpu(), "random_windows: tokens must be a 1-D integer CPU tensor, got ",
           tokens.defined() ? tokens.shape_str() : "an undefined tensor");
  HG_CHECK(batch >= 1 && block >= 1, "random_windows: batch and block must be >= 1, got ", batch, " and ", block);
  const int64_t n = tokens.numel();
  HG_CHECK(n > block, "random_windows: ", n, " tokens are too few for windows of ", block,
           " plus the next token; use a smaller block or more text");
  const Tensor src = tokens.to(kI64).contiguous();
  const int64_t* t = src.data<int64_t>();
  const Tensor u = rand({batch}, {.dtype = kF64}, &gen);
  const double* draw = u.data<double>();
  Tensor x = empty({batch, block}, {.dtype = kI64}), y = empty({batch, block}, {.dtype = kI64});
  int64_t* px = x.data<int64_t>();
  int64_t* py = y.data<int64_t>();
  const int64_t starts = n - block;  // positions 0 .. n - block - 1
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t p = std::min(static_cast<int64_t>(draw[b] * static_cast<double>(starts)), starts - 1);
    std::copy(t + p, t + p + block, px + b * block);
    std::copy(t + p + 1, t + p + block + 1, py + b * block);
  }
  return {x.to(device), y.to(device)};
}

}  // namespace hg::data

// Character-level text data for language models: a corpus read from files,
// its character vocabulary, and batches of random windows (nanoGPT's
// shakespeare_char preparation and get_batch, in C++).
//
//   hg::data::CharCorpus corpus = hg::data::CharCorpus::from_folder(hg::data::CharCorpus::kFortunesRoot);
//   auto [train, val] = corpus.split(0.9);                     // i64 token tensors
//   hg::Generator gen(0);
//   auto [x, y] = hg::data::random_windows(train, 12, 64, gen);  // [12, 64] each; y is x shifted by one
//   std::string text = corpus.decode(x[0]);
//
// Characters are bytes: the vocabulary is the sorted set of distinct bytes of
// the text (a UTF-8 character of several bytes is several tokens), so any
// file can be read and decode(encode(s)) == s.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace hg {
class Generator;
}

namespace hg::data {

class CharCorpus {
 public:
  // Where Debian's `fortunes` package installs its plain-text fortune files.
  static constexpr const char* kFortunesRoot = "/usr/share/games/fortunes";

  // The text itself; throws hg::Error when it is empty.
  explicit CharCorpus(std::string text);
  // Every regular file of `folder` (not recursive; symbolic links and
  // strfile's binary *.dat indexes skipped) in name order, concatenated.
  // Throws hg::Error naming the folder (and the apt-get fix for the default)
  // when it is missing or holds no text.
  static CharCorpus from_folder(const std::string& folder);

  const std::string& text() const { return text_; }
  int64_t size() const { return static_cast<int64_t>(text_.size()); }
  // The distinct bytes in increasing order; token i is vocab()[i].
  const std::string& vocab() const { return vocab_; }
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }

  // i64 tokens; throws hg::Error naming the first character not in the vocabulary.
  Tensor encode(std::string_view s) const;
  // The text of a 1-D integer tensor of tokens (any device); throws on a token
  // outside [0, vocab_size).
  std::string decode(const Tensor& tokens) const;
  // The whole text as i64 tokens [size()].
  const Tensor& tokens() const { return tokens_; }
  // The first round(fraction * size()) tokens and the rest (nanoGPT's 90/10
  // split: fraction 0.9), views of tokens(). fraction in (0, 1).
  std::pair<Tensor, Tensor> split(double fraction) const;

 private:
  std::string text_, vocab_;
  std::vector<int16_t> index_;  // byte -> token, -1 if absent
  Tensor tokens_;
};

// x [batch, block] and y [batch, block] (y[b, t] = tokens[p_b + t + 1]): windows
// starting at positions p_b drawn uniformly from [0, n - block - 1] with one
// f64 draw each from gen, as i64 tensors on `device`. tokens is a 1-D integer
// CPU tensor (the corpus stays in host memory; only the batch is copied).
// Throws hg::Error when it is not, or holds no more than block tokens.
std::pair<Tensor, Tensor> random_windows(const Tensor& tokens, int64_t batch, int64_t block, Generator& gen,
                                         Device device = Device::cpu());

}  // namespace hg::data

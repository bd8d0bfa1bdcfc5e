// Fashion-MNIST (Xiao et al. 2017): 70,000 28x28 grayscale images of clothing
// in 10 classes, 60,000 for training and 10,000 for testing.
//
// Reads the four IDX files from a folder; the default is where Debian's
// `dataset-fashion-mnist` package installs them. Either the gzip files as
// distributed (train-images-idx3-ubyte.gz, ...) or their uncompressed
// versions (same names without .gz) are accepted.
//
//   hg::data::FashionMnist train;                 // 60,000 samples
//   hg::data::FashionMnist test(hg::data::FashionMnist::kDefaultRoot, false);
//   hg::data::DataLoader loader(train.images(), train.labels(), {.batch_size = 128});
//
// Invariants after construction: images() is u8 [N, 28, 28] on the CPU,
// labels() is i64 [N] with every label in [0, 10), N == size() > 0.
// Loading the training set takes ~0.5 s (mostly gunzip) and holds 47 MB.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace hg::data {

class FashionMnist {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  static constexpr int64_t kNumClasses = 10;
  static constexpr int64_t kImageSize = 28;  // images are kImageSize x kImageSize

  // train = true reads train-*, false reads t10k-*. Throws hg::Error naming the
  // missing folder or file (with the apt-get fix) or the corrupt file.
  explicit FashionMnist(const std::string& root = kDefaultRoot, bool train = true);

  const Tensor& images() const { return images_; }  // u8 [N, 28, 28]
  const Tensor& labels() const { return labels_; }  // i64 [N]
  int64_t size() const { return images_.size(0); }
  bool train() const { return train_; }
  const std::string& root() const { return root_; }

  // "T-shirt/top", "Trouser", ... indexed by label.
  static const std::array<std::string_view, kNumClasses>& class_names();
  static std::string_view class_name(int64_t label);  // checked

 private:
  std::string root_;
  bool train_;
  Tensor images_;
  Tensor labels_;
};

}  // namespace hg::data

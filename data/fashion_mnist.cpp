// Fashion-MNIST loading: file lookup, IDX reads, cross-file consistency checks.
#include "data/fashion_mnist.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "data/idx.h"

namespace hg::data {
namespace {

constexpr const char* kInstallHint =
    "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass "
    "the folder that holds the IDX files";

// Finds `<root>/<stem>.gz`, else the uncompressed `<root>/<stem>`.
std::string find_file(const std::string& root, const std::string& stem) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path gz = fs::path(root) / (stem + ".gz");
  if (fs::is_regular_file(gz, ec)) return gz.string();
  const fs::path plain = fs::path(root) / stem;
  if (fs::is_regular_file(plain, ec)) return plain.string();
  for (const fs::path& p : {gz, plain}) {
    HG_CHECK(!fs::exists(p, ec), "Fashion-MNIST file '", p.string(), "' exists but is not a regular file (",
             fs::is_directory(p, ec) ? "a directory" : "a special file", "); pass the folder that holds the IDX files");
  }
  HG_FAIL("Fashion-MNIST file '", gz.string(), "' (or its uncompressed version '", plain.string(),
          "') is missing; ", kInstallHint);
}

}  // namespace

FashionMnist::FashionMnist(const std::string& root, bool train) : root_(root), train_(train) {
  std::error_code ec;
  HG_CHECK(std::filesystem::is_directory(root, ec), "Fashion-MNIST folder '", root,
           "' does not exist; ", kInstallHint);
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = find_file(root, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(root, prefix + "-labels-idx1-ubyte");

  images_ = read_idx(images_path);
  HG_CHECK(images_.dim() == 3 && images_.size(1) == kImageSize && images_.size(2) == kImageSize,
           "Fashion-MNIST images file '", images_path, "' has shape ", images_.shape_str(),
           "; expected [N, 28, 28]. Is it an images file?");
  HG_CHECK(images_.size(0) > 0, "Fashion-MNIST images file '", images_path, "' holds no images");

  const Tensor raw_labels = read_idx(labels_path);
  HG_CHECK(raw_labels.dim() == 1, "Fashion-MNIST labels file '", labels_path, "' has shape ",
           raw_labels.shape_str(), "; expected [N]. Is it a labels file?");
  HG_CHECK(raw_labels.size(0) == images_.size(0), "Fashion-MNIST files disagree: '",
           images_path, "' holds ", images_.size(0), " images but '", labels_path, "' holds ",
           raw_labels.size(0), " labels; both must come from the same split");

  // Widen to i64 (what cross_entropy takes) and range-check in the same pass.
  const int64_t n = raw_labels.size(0);
  labels_ = empty({n}, {.dtype = kI64});
  const uint8_t* src = raw_labels.data<uint8_t>();
  int64_t* dst = labels_.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    HG_CHECK(src[i] < kNumClasses, "Fashion-MNIST labels file '", labels_path, "': label ",
             static_cast<int>(src[i]), " at index ", i, " is out of range [0, ", kNumClasses,
             "); the file is corrupt");
    dst[i] = src[i];
  }
}

const std::array<std::string_view, FashionMnist::kNumClasses>& FashionMnist::class_names() {
  static constexpr std::array<std::string_view, kNumClasses> kNames = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return kNames;
}

std::string_view FashionMnist::class_name(int64_t label) {
  HG_CHECK(label >= 0 && label < kNumClasses, "FashionMnist::class_name: label ", label,
           " is out of range [0, ", kNumClasses, ")");
  return class_names()[static_cast<size_t>(label)];
}

}  // namespace hg::data

// data/: IDX reading (round trips and one corrupt file per validation rule),
// Fashion-MNIST loading, DataLoader batching/shuffling/resuming, .npy files.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/tensor.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "data/npy.h"

using namespace hg;
using namespace hg::data;
namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

namespace {

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

void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty()) REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) > 0);
  REQUIRE(gzclose(f) == Z_OK);
}

Bytes read_plain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// An IDX file: 00 00 type ndims, big-endian dims, payload.
Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& payload, uint8_t type = 0x08) {
  Bytes b{0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(d >> shift));
  }
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes iota_bytes(size_t n, int start = 0) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((start + i) % 256);
  return b;
}

}  // namespace

// ---- IDX ----------------------------------------------------------------------------

TEST_CASE("IDX files round trip, gzip and plain, 1 to 4 dims", "[data][idx]") {
  TempDir dir;
  const std::vector<std::vector<uint32_t>> shapes = {{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}, {0, 28}};
  for (const auto& dims : shapes) {
    size_t n = 1;
    for (uint32_t d : dims) n *= d;
    const Bytes payload = iota_bytes(n, 3);
    const Bytes file = idx_bytes(dims, payload);
    for (bool gz : {false, true}) {
      const std::string path = dir.file(gz ? "a.idx.gz" : "a.idx");
      gz ? write_gz(path, file) : write_plain(path, file);
      const Tensor t = read_idx(path);
      CHECK(t.dtype() == kU8);
      CHECK(t.is_cpu());
      CHECK(t.dim() == static_cast<int64_t>(dims.size()));
      for (size_t d = 0; d < dims.size(); ++d) CHECK(t.size(static_cast<int64_t>(d)) == dims[d]);
      CHECK(t.to_vector<uint8_t>() == std::vector<uint8_t>(payload.begin(), payload.end()));
    }
  }
}

TEST_CASE("IDX reader rejects every kind of corrupt file with a clear hg::Error", "[data][idx][errors]") {
  TempDir dir;
  const std::string path = dir.file("bad.idx");
  auto check_both = [&](const Bytes& file, const std::string& expected) {
    INFO("expected message: " << expected);
    write_plain(path, file);
    CHECK_THROWS_WITH(read_idx(path), Catch::Contains(expected) && Catch::Contains(path));
    write_gz(path + ".gz", file);
    CHECK_THROWS_WITH(read_idx(path + ".gz"), Catch::Contains(expected));
  };
  const Bytes good_payload = iota_bytes(12);

  CHECK_THROWS_WITH(read_idx(dir.file("nope.gz")), Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(read_idx(dir.path().string()), Catch::Contains("is a directory"));
  check_both({}, "too short");
  check_both({0, 0, 8}, "too short");
  check_both(Bytes{0x1f, 0x00, 0x08, 0x01, 0, 0, 0, 1, 5}, "bad magic number");
  check_both(idx_bytes({3}, iota_bytes(12), 0x0D), "float32");
  check_both(idx_bytes({3}, iota_bytes(12), 0x0D), "only type 0x08");
  check_both(idx_bytes({3}, iota_bytes(3), 0x42), "0x42");
  check_both(idx_bytes({}, {}), "declares 0 dimensions");
  check_both(idx_bytes({1, 1, 1, 1, 1}, {1}), "declares 5 dimensions");
  // Header cut inside the dims.
  Bytes cut = idx_bytes({3, 4}, good_payload);
  cut.resize(9);
  check_both(cut, "truncated in its header");
  // Payload one byte short, and one byte long.
  check_both(idx_bytes({3, 4}, iota_bytes(11)), "truncated");
  check_both(idx_bytes({3, 4}, iota_bytes(11)), "need 12 bytes of data but only 11");
  check_both(idx_bytes({3, 4}, iota_bytes(13)), "trailing data");
  // Dims whose product overflows 64 bits, and a product over the 1 GiB cap.
  check_both(idx_bytes({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {}),
             "read_idx limit");
  check_both(idx_bytes({65536, 65536}, {}), "read_idx limit");
  // Huge-but-allowed dims in a tiny file: must fail as truncated after reading
  // what is there, not by allocating ~1 GiB first.
  check_both(idx_bytes({1024, 1024, 1023}, iota_bytes(100)), "only 100 follow the header");
  // A smaller explicit cap applies too.
  write_plain(path, idx_bytes({3, 4}, good_payload));
  CHECK_THROWS_WITH(read_idx(path, 11), Catch::Contains("more than 11 bytes"));
  CHECK(read_idx(path, 12).numel() == 12);
}

TEST_CASE("IDX reader rejects damaged gzip streams", "[data][idx][errors]") {
  TempDir dir;
  const std::string path = dir.file("x.idx.gz");
  // Incompressible payload so the stream is long enough to cut and flip.
  Bytes payload(4096);
  std::mt19937 rng(7);
  for (auto& b : payload) b = static_cast<unsigned char>(rng());
  write_gz(path, idx_bytes({64, 64}, payload));
  const Bytes gz = read_plain(path);
  REQUIRE(gz.size() > 1000);
  CHECK(read_idx(path).numel() == 4096);

  Bytes truncated(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2));
  write_plain(path, truncated);
  CHECK_THROWS_AS(read_idx(path), hg::Error);

  Bytes no_trailer(gz.begin(), gz.end() - 4);  // drop ISIZE: stream ends early
  write_plain(path, no_trailer);
  CHECK_THROWS_WITH(read_idx(path), Catch::Contains("gzip"));

  Bytes flipped = gz;
  flipped[gz.size() / 2] ^= 0x5a;  // corrupt the deflate data: bad CRC or bad block
  write_plain(path, flipped);
  CHECK_THROWS_AS(read_idx(path), hg::Error);
}

// ---- Fashion-MNIST -------------------------------------------------------------------

namespace {
// Writes a tiny fake Fashion-MNIST split into `dir`.
void write_fake_split(const TempDir& dir, const std::string& prefix, uint32_t n_images,
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
}  // namespace

TEST_CASE("FashionMnist loads a folder and validates the pair of files", "[data][mnist]") {
  TempDir dir;
  write_fake_split(dir, "train", 12, 12);
  write_fake_split(dir, "t10k", 5, 5, 9, /*gz=*/false);  // uncompressed names work too
  const std::string root = dir.path().string();

  FashionMnist train(root, true);
  CHECK(train.size() == 12);
  CHECK(train.train());
  CHECK(train.images().sizes() == Shape{12, 28, 28});
  CHECK(train.images().dtype() == kU8);
  CHECK(train.labels().dtype() == kI64);
  CHECK(train.labels().to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 9});
  FashionMnist test(root, false);
  CHECK(test.size() == 5);
  CHECK(FashionMnist::class_name(0) == "T-shirt/top");
  CHECK(FashionMnist::class_name(9) == "Ankle boot");
  CHECK(FashionMnist::class_names().size() == 10);
  CHECK_THROWS_WITH(FashionMnist::class_name(10), Catch::Contains("out of range"));

  CHECK_THROWS_WITH(FashionMnist(dir.file("missing")),
                    Catch::Contains("apt-get install dataset-fashion-mnist"));
  {
    TempDir empty_dir;
    CHECK_THROWS_WITH(FashionMnist(empty_dir.path().string()),
                      Catch::Contains("train-images-idx3-ubyte.gz") &&
                          Catch::Contains("is missing") &&
                          Catch::Contains("apt-get install dataset-fashion-mnist"));
  }
  {
    TempDir bad;
    write_fake_split(bad, "train", 12, 11);
    CHECK_THROWS_WITH(FashionMnist(bad.path().string()),
                      Catch::Contains("12 images") && Catch::Contains("11 labels"));
  }
  {
    TempDir bad;
    write_fake_split(bad, "train", 4, 4, /*max_label=*/10);
    CHECK_THROWS_WITH(FashionMnist(bad.path().string()), Catch::Contains("label 10 at index 3"));
  }
  {
    TempDir bad;  // the images file swapped for a labels file
    write_fake_split(bad, "train", 4, 4);
    fs::copy_file(bad.file("train-labels-idx1-ubyte.gz"), bad.file("train-images-idx3-ubyte.gz"),
                  fs::copy_options::overwrite_existing);
    CHECK_THROWS_WITH(FashionMnist(bad.path().string()), Catch::Contains("expected [N, 28, 28]"));
  }
}

TEST_CASE("the real Fashion-MNIST, if installed", "[data][mnist][real]") {
  if (!fs::is_directory(FashionMnist::kDefaultRoot)) {
    WARN("skipped: " << FashionMnist::kDefaultRoot
                     << " not found (apt-get install dataset-fashion-mnist)");
    return;
  }
  for (bool train : {true, false}) {
    FashionMnist ds(FashionMnist::kDefaultRoot, train);
    const int64_t n = train ? 60000 : 10000;
    CHECK(ds.size() == n);
    CHECK(ds.images().sizes() == Shape{n, 28, 28});
    // The dataset is balanced: every class has exactly n / 10 samples.
    std::vector<int64_t> counts(10, 0);
    for (int64_t label : ds.labels().to_vector<int64_t>()) {
      REQUIRE(label >= 0);
      REQUIRE(label < 10);
      ++counts[static_cast<size_t>(label)];
    }
    CHECK(counts == std::vector<int64_t>(10, n / 10));
  }
}

// ---- DataLoader ----------------------------------------------------------------------

namespace {
// n samples of shape [2, 3]; sample i's pixels are i*6 .. i*6+5 (mod 256) and
// its label is i, so a batch's y names the samples it holds.
struct ToyData {
  Tensor images;
  Tensor labels;
};
ToyData toy_data(int64_t n) {
  const Bytes px = iota_bytes(static_cast<size_t>(n) * 6);
  std::vector<uint8_t> pixels(px.begin(), px.end());
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::iota(labels.begin(), labels.end(), 0);
  return {from_vector(pixels, {n, 2, 3}), from_vector(labels, {n})};
}
std::vector<int64_t> labels_of_pass(DataLoader& loader) {
  std::vector<int64_t> seen;
  for (auto [x, y] : loader) {
    for (int64_t v : y.to_vector<int64_t>()) seen.push_back(v);
  }
  return seen;
}
}  // namespace

TEST_CASE("DataLoader batches: shapes, drop_last, limit, flatten", "[data][loader]") {
  const ToyData d = toy_data(10);
  DataLoader loader(d.images, d.labels, {.batch_size = 4});
  CHECK(loader.num_samples() == 10);
  CHECK(loader.num_batches() == 3);
  std::vector<Shape> x_shapes;
  std::vector<Shape> y_shapes;
  for (auto [x, y] : loader) {
    x_shapes.push_back(x.sizes());
    y_shapes.push_back(y.sizes());
    CHECK(x.dtype() == kF32);
    CHECK(y.dtype() == kI64);
  }
  CHECK(x_shapes == std::vector<Shape>{{4, 6}, {4, 6}, {2, 6}});
  CHECK(y_shapes == std::vector<Shape>{{4}, {4}, {2}});

  DataLoader dropping(d.images, d.labels, {.batch_size = 4, .drop_last = true});
  CHECK(dropping.num_batches() == 2);
  CHECK(labels_of_pass(dropping) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});

  DataLoader limited(d.images, d.labels, {.batch_size = 4, .limit = 5});
  CHECK(limited.num_samples() == 5);
  CHECK(labels_of_pass(limited) == std::vector<int64_t>{0, 1, 2, 3, 4});
  DataLoader over_limit(d.images, d.labels, {.limit = 1000});
  CHECK(over_limit.num_samples() == 10);

  DataLoader unflat(d.images, d.labels, {.batch_size = 3, .flatten = false});
  CHECK(unflat.batch(0).x.sizes() == Shape{3, 2, 3});

  DataLoader exact(d.images, d.labels, {.batch_size = 5, .drop_last = true});
  CHECK(exact.num_batches() == 2);
  DataLoader single(d.images, d.labels, {.batch_size = 64});
  CHECK(single.num_batches() == 1);
  CHECK(single.batch(0).x.sizes() == Shape{10, 6});
}

TEST_CASE("DataLoader normalises pixels to ((v / 255) - mean) / std", "[data][loader]") {
  const ToyData d = toy_data(50);  // pixel values 0..255 (and some wrap)
  const double mean = 0.2860, std_dev = 0.3530;
  DataLoader loader(d.images, d.labels, {.batch_size = 50, .mean = mean, .std = std_dev});
  const std::vector<float> x = loader.batch(0).x.to_vector<float>();
  const std::vector<uint8_t> px = d.images.to_vector<uint8_t>();
  REQUIRE(x.size() == px.size());
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(x[i] == static_cast<float>((px[i] / 255.0 - mean) / std_dev));
  }
  // Default options: plain v / 255 in [0, 1].
  DataLoader plain(d.images, d.labels, {.batch_size = 50});
  const std::vector<float> p = plain.batch(0).x.to_vector<float>();
  CHECK(p[0] == 0.0f);
  CHECK(p[255] == 1.0f);
  CHECK(p[51] == static_cast<float>(51 / 255.0));

  for (DType dtype : {kF64, kF16, kBF16}) {
    DataLoader typed(d.images, d.labels, {.batch_size = 50, .mean = mean, .std = std_dev,
                                          .dtype = dtype});
    const Tensor xt = typed.batch(0).x;
    CHECK(xt.dtype() == dtype);
    const std::vector<double> xd = xt.to_vector<double>();
    const double tol = dtype == kF64 ? 1e-15 : dtype == kF16 ? 2e-3 : 1.6e-2;
    for (size_t i = 0; i < xd.size(); ++i) {
      const double ref = (px[i] / 255.0 - mean) / std_dev;
      CHECK(std::abs(xd[i] - ref) <= tol * std::max(1.0, std::abs(ref)));
    }
  }
}

TEST_CASE("DataLoader shuffling is seeded, per epoch, and a permutation", "[data][loader]") {
  const ToyData d = toy_data(103);
  const DataLoaderOptions options{.batch_size = 16, .shuffle = true, .seed = 42};
  DataLoader a(d.images, d.labels, options);
  DataLoader b(d.images, d.labels, options);

  const std::vector<int64_t> a0 = labels_of_pass(a);
  CHECK(a.epoch() == 1);  // a full pass moves to the next epoch
  CHECK(a.position() == 0);
  const std::vector<int64_t> a1 = labels_of_pass(a);
  CHECK(labels_of_pass(b) == a0);  // same seed, same epoch: same order
  CHECK(labels_of_pass(b) == a1);
  CHECK(a0 != a1);  // epochs differ

  std::vector<int64_t> identity(103);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(a0 != identity);
  for (auto order : {a0, a1}) {  // every sample exactly once per epoch
    std::sort(order.begin(), order.end());
    CHECK(order == identity);
  }

  DataLoader other_seed(d.images, d.labels, {.batch_size = 16, .shuffle = true, .seed = 43});
  CHECK(labels_of_pass(other_seed) != a0);

  // Epoch k's order depends only on (seed, k): jump straight to epoch 1.
  DataLoader c(d.images, d.labels, options);
  c.set_epoch(1);
  CHECK(labels_of_pass(c) == a1);
  CHECK(c.order().size() == 103);

  // The features travel with the labels: sample i's first pixel is 6i mod 256.
  DataLoader check(d.images, d.labels, {.batch_size = 103, .shuffle = true, .seed = 5});
  auto [x, y] = check.batch(0);
  const std::vector<float> xs = x.to_vector<float>();
  const std::vector<int64_t> ys = y.to_vector<int64_t>();
  for (size_t r = 0; r < ys.size(); ++r) {
    CHECK(xs[r * 6] == static_cast<float>(((6 * ys[r]) % 256) / 255.0));
  }

  // shuffled_indices is a permutation for edge sizes too.
  CHECK(shuffled_indices(0, 1, 0).empty());
  CHECK(shuffled_indices(1, 1, 0) == std::vector<int64_t>{0});
  std::vector<int64_t> big = shuffled_indices(60000, 9, 3);
  CHECK(big == shuffled_indices(60000, 9, 3));
  std::sort(big.begin(), big.end());
  CHECK(big.front() == 0);
  CHECK(std::adjacent_find(big.begin(), big.end()) == big.end());
  CHECK(big.back() == 59999);
}

TEST_CASE("DataLoader resumes mid-epoch with the same remaining batches", "[data][loader]") {
  const ToyData d = toy_data(50);
  const DataLoaderOptions options{.batch_size = 8, .shuffle = true, .seed = 7};

  // Uninterrupted: epoch 0, then epoch 1 in full.
  DataLoader full(d.images, d.labels, options);
  labels_of_pass(full);
  std::vector<std::vector<int64_t>> epoch1;
  std::vector<std::vector<float>> epoch1_x;
  for (auto [x, y] : full) {
    epoch1.push_back(y.to_vector<int64_t>());
    epoch1_x.push_back(x.to_vector<float>());
  }
  REQUIRE(epoch1.size() == 7);

  // Interrupted: stop inside batch 3 of epoch 1 and save (epoch, position).
  DataLoader first(d.images, d.labels, options);
  labels_of_pass(first);
  uint64_t saved_epoch = 0;
  int64_t saved_position = 0;
  int64_t seen = 0;
  for (auto [x, y] : first) {
    CHECK(y.to_vector<int64_t>() == epoch1[static_cast<size_t>(seen)]);
    ++seen;
    if (seen == 3) {
      saved_epoch = first.epoch();
      saved_position = first.position();  // counts the batch in hand
      break;
    }
  }
  CHECK(saved_epoch == 1);
  CHECK(saved_position == 3);

  // Restart in a fresh loader.
  DataLoader resumed(d.images, d.labels, options);
  resumed.set_epoch(saved_epoch);
  resumed.skip(saved_position);
  size_t i = static_cast<size_t>(saved_position);
  for (auto [x, y] : resumed) {
    REQUIRE(i < epoch1.size());
    CHECK(y.to_vector<int64_t>() == epoch1[i]);
    CHECK(x.to_vector<float>() == epoch1_x[i]);
    ++i;
  }
  CHECK(i == epoch1.size());
  CHECK(resumed.epoch() == 2);

  // set_position is absolute; skipping to the end makes the next pass empty
  // and moves to the next epoch.
  resumed.set_epoch(4);
  resumed.set_position(7);
  CHECK(labels_of_pass(resumed).empty());
  CHECK(resumed.epoch() == 5);
  CHECK(resumed.position() == 0);
  CHECK_THROWS_WITH(resumed.skip(8), Catch::Contains("only 7 batches remain"));
  CHECK_THROWS_WITH(resumed.set_position(8), Catch::Contains("must be in [0, 7]"));
}

TEST_CASE("DataLoader rejects bad inputs and options", "[data][loader][errors]") {
  const ToyData d = toy_data(6);
  CHECK_THROWS_WITH(DataLoader(d.images, d.labels, {.batch_size = 0}),
                    Catch::Contains("batch_size must be positive"));
  CHECK_THROWS_WITH(DataLoader(d.images.to(kF32), d.labels), Catch::Contains("must be u8"));
  CHECK_THROWS_WITH(DataLoader(d.images, d.labels.to(kI32)), Catch::Contains(".to(hg::kI64)"));
  CHECK_THROWS_WITH(DataLoader(d.images, d.labels.slice(0, 0, 5)),
                    Catch::Contains("images hold 6 samples but labels hold 5"));
  CHECK_THROWS_WITH(DataLoader(d.images, d.labels, {.std = 0.0}), Catch::Contains("std > 0"));
  CHECK_THROWS_WITH(DataLoader(d.images, d.labels, {.limit = -1}), Catch::Contains("limit"));
  CHECK_THROWS_WITH(DataLoader(d.images, d.labels, {.dtype = kI32}),
                    Catch::Contains("must be floating"));
  DataLoader ok(d.images, d.labels, {.batch_size = 4});
  CHECK_THROWS_WITH(ok.batch(2), Catch::Contains("out of range [0, 2)"));
  // A non-contiguous images tensor is accepted (copied once).
  const Tensor strided = d.images.transpose(1, 2);
  DataLoader t(strided, d.labels, {.batch_size = 6, .flatten = false});
  CHECK(t.batch(0).x.sizes() == Shape{6, 3, 2});
}

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
        values[static_cast<size_t>(i)] = dtype == kBool ? (i % 3 == 0) : (i * 7 % 23) - 5.5 * (i % 2);
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
      CHECK(file.size() % 64 == (static_cast<size_t>(n) * dtype_size(dtype)) % 64);  // header aligned
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
  check(npy_bytes("{'descr': '<f4', 'shape': (2, 3), }", payload), "missing key(s): 'fortran_order'");
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

// data/: IDX reading (round trips and one corrupt file per validation rule),
// Fashion-MNIST loading, and the docs/data.md example.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "data/idx.h"

#include "tests/data/data_test_util.h"
#include "tests/skip.h"

using namespace hg;
using namespace hg::data;
using namespace hg::data::testing;

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

TEST_CASE("IDX reader rejects every kind of corrupt file with a clear hg::Error",
          "[data][idx][errors]") {
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

TEST_CASE("the real Fashion-MNIST, if installed", "[data][mnist][real][needs-fashion-mnist]") {
  if (!fs::is_directory(FashionMnist::kDefaultRoot)) {
    HG_SKIP(FashionMnist::kDefaultRoot << " not found (apt-get install dataset-fashion-mnist)");
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

TEST_CASE("docs/data.md example", "[data][docs]") {
  TempDir dir;
  write_fake_split(dir, "train", 300, 300);
  write_fake_split(dir, "t10k", 20, 20);
  const std::string root = dir.path().string();
  int64_t batches = 0;
  // ---- begin docs/data.md example (root passed explicitly here) ----
  hg::data::FashionMnist train(root);
  hg::data::FashionMnist test(root, /*train=*/false);
  hg::data::DataLoader loader(train.images(), train.labels(),
                              {.batch_size = 128, .shuffle = true, .seed = 42,
                               .mean = 0.2860, .std = 0.3530});
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (auto [x, y] : loader) {  // x: f32 [B, 784], y: i64 [B]
      CHECK(x.size(1) == 784);
      CHECK(x.size(0) == y.size(0));
      ++batches;
    }
  }
  // ---- end ----
  CHECK(test.size() == 20);
  CHECK(batches == 9);
  CHECK(loader.epoch() == 3);
}

TEST_CASE("IDX: trailing garbage after gzip, several gzip members, dims that overflow, folders",
          "[data][idx][fuzz]") {
  TempDir dir;
  const Bytes file = idx_bytes({2, 3}, iota_bytes(6));
  // zlib's gzread skipped anything after the gzip stream: such files were accepted.
  write_gz(dir.file("g.gz"), file);
  Bytes gz = read_plain(dir.file("g.gz"));
  Bytes garbage = gz;
  for (char c : std::string("junk")) garbage.push_back(static_cast<uint8_t>(c));
  write_plain(dir.file("garbage.gz"), garbage);
  CHECK_THROWS_WITH(read_idx(dir.file("garbage.gz")), Catch::Contains("trailing garbage"));
  // A cut-off stream is still an error.
  write_plain(dir.file("cut.gz"), Bytes(gz.begin(), gz.end() - 6));
  CHECK_THROWS_WITH(read_idx(dir.file("cut.gz")), Catch::Contains("not a valid gzip file"));
  // Two members (concatenated .gz files, as gzip(1) reads them) are one file.
  write_gz(dir.file("m1.gz"), Bytes(file.begin(), file.begin() + 5));
  write_gz(dir.file("m2.gz"), Bytes(file.begin() + 5, file.end()));
  Bytes two = read_plain(dir.file("m1.gz"));
  const Bytes second = read_plain(dir.file("m2.gz"));
  two.insert(two.end(), second.begin(), second.end());
  write_plain(dir.file("two.gz"), two);
  CHECK(read_idx(dir.file("two.gz")).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 2, 3, 4, 5});
  // [0, 2^32-1, 2^32-1, 2^32-1]: no bytes, but the strides overflowed int64 (found by the fuzzer).
  write_plain(dir.file("huge"), idx_bytes({0, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}));
  CHECK_THROWS_WITH(read_idx(dir.file("huge")), Catch::Contains("no row-major strides"));
  // A folder where Fashion-MNIST expects a file was reported as "missing".
  std::filesystem::create_directories(dir.file("fm/train-images-idx3-ubyte.gz"));
  CHECK_THROWS_WITH(FashionMnist(dir.file("fm")), Catch::Contains("exists but is not a regular file (a directory)"));
}

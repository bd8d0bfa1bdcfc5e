// data/: DataLoader batching, normalisation, seeded shuffling and resuming.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/tensor.h"
#include "data/dataloader.h"

#include "tests/data/data_test_util.h"

using namespace hg;
using namespace hg::data;
using namespace hg::data::testing;

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

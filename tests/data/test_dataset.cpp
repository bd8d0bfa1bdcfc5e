// data/dataset.h: TensorDataset, ImageDataset, a custom Dataset and the
// DatasetLoader: batches against rows read back directly, the same order and
// batches as DataLoader, prefetch on and off identical, resuming, sharding,
// worker errors and bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::data;
using Catch::Contains;

namespace {

// n samples: tokens i64 [n, 3] = 10 i + t, features f32 [n, 2] = i + 0.5 c, mask bool [n, 3].
struct Toy {
  Tensor tokens, features, mask;
};
Toy toy(int64_t n) {
  std::vector<int64_t> tok;
  std::vector<float> feat;
  std::vector<uint8_t> mask;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < 3; ++t) tok.push_back(10 * i + t);
    for (int64_t c = 0; c < 2; ++c) feat.push_back(static_cast<float>(i) + 0.5f * static_cast<float>(c));
    for (int64_t t = 0; t < 3; ++t) mask.push_back((i + t) % 2);
  }
  return {from_vector(tok, {n, 3}), from_vector(feat, {n, 2}), from_vector(mask, {n, 3}).to(kBool)};
}

// The sample indices a batch holds, read from its token field (row i starts with 10 i).
std::vector<int64_t> samples_of(const Tensor& tokens) {
  std::vector<int64_t> out;
  const std::vector<int64_t> v = tokens.cpu().contiguous().to_vector<int64_t>();
  for (size_t r = 0; r < v.size() / 3; ++r) out.push_back(v[r * 3] / 10);
  return out;
}

// Sample i is {i * ones(2), [i]}; throws for `bad`.
struct Squares : Dataset {
  int64_t n = 0, bad = -1;
  int64_t size() const override { return n; }
  Example get(int64_t i) const override {
    HG_CHECK(i != bad, "Squares: sample ", i, " is broken");
    return {full({2}, static_cast<double>(i * i)), tensor({i})};
  }
};

}  // namespace

TEST_CASE("TensorDataset batches are the rows of its tensors, in the loader's order", "[data][dataset]") {
  const Toy d = toy(10);
  TensorDataset ds({d.tokens, d.features, d.mask});
  CHECK(ds.size() == 10);
  const Example s = ds.get(7);
  REQUIRE(s.size() == 3);
  CHECK(s[0].to_vector<int64_t>() == std::vector<int64_t>{70, 71, 72});
  CHECK(s[1].to_vector<float>() == std::vector<float>{7.0f, 7.5f});
  DatasetLoader loader(ds, {.batch_size = 4, .shuffle = true, .seed = 3});
  CHECK(loader.num_batches() == 3);
  std::vector<int64_t> seen;
  for (const Example& b : loader) {
    REQUIRE(b.size() == 3);
    const std::vector<int64_t> rows = samples_of(b[0]);
    CHECK(b[0].dtype() == kI64);
    CHECK(b[1].dtype() == kF32);
    CHECK(b[2].dtype() == kBool);
    CHECK(b[1].sizes() == Shape{static_cast<int64_t>(rows.size()), 2});
    const std::vector<float> f = b[1].to_vector<float>();
    const std::vector<uint8_t> m = b[2].to(kU8).to_vector<uint8_t>();
    for (size_t r = 0; r < rows.size(); ++r) {
      CHECK(f[r * 2] == static_cast<float>(rows[r]));
      CHECK(f[r * 2 + 1] == static_cast<float>(rows[r]) + 0.5f);
      for (size_t t = 0; t < 3; ++t) CHECK(m[r * 3 + t] == (rows[r] + static_cast<int64_t>(t)) % 2);
    }
    seen.insert(seen.end(), rows.begin(), rows.end());
  }
  // One epoch visits every sample once, in the shuffled order, the same as DataLoader's.
  std::vector<int64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  CHECK(sorted == all);
  CHECK(seen == epoch_order(10, loader.options(), 0));
  CHECK(loader.epoch() == 1);
}

TEST_CASE("ImageDataset through DatasetLoader is DataLoader, batch for batch", "[data][dataset]") {
  const int64_t n = 13;
  std::vector<uint8_t> px(static_cast<size_t>(n * 6));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) % 256);
  std::vector<int64_t> lab(static_cast<size_t>(n));
  std::iota(lab.begin(), lab.end(), 0);
  const Tensor images = from_vector(px, {n, 2, 3}), labels = from_vector(lab, {n});
  const DataLoaderOptions o{.batch_size = 5, .shuffle = true, .seed = 9, .mean = 0.3, .std = 0.2};
  DataLoader images_loader(images, labels, o);
  ImageDataset ds(images, labels, 0.3, 0.2);
  DatasetLoader loader(ds, {.batch_size = 5, .shuffle = true, .seed = 9});
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<Batch> want;
    for (auto b : images_loader) want.push_back(b);
    size_t k = 0;
    for (const Example& b : loader) {
      REQUIRE(k < want.size());
      CHECK(b[0].to_vector<float>() == want[k].x.to_vector<float>());
      CHECK(b[1].to_vector<int64_t>() == want[k].y.to_vector<int64_t>());
      ++k;
    }
    CHECK(k == want.size());
  }
}

TEST_CASE("DatasetLoader: prefetch on and off give the same batches; resuming continues the epoch", "[data][dataset]") {
  const Toy d = toy(23);
  TensorDataset ds({d.tokens, d.features});
  auto pass = [&](DatasetLoader& l) {
    std::vector<std::vector<int64_t>> out;
    for (const Example& b : l) out.push_back(samples_of(b[0]));
    return out;
  };
  DatasetLoader on(ds, {.batch_size = 4, .shuffle = true, .seed = 5, .prefetch = true});
  DatasetLoader off(ds, {.batch_size = 4, .shuffle = true, .seed = 5, .prefetch = false});
  for (int epoch = 0; epoch < 2; ++epoch) CHECK(pass(on) == pass(off));
  CHECK(on.prefetch_hits() == 2 * (on.num_batches() - 1));
  CHECK(off.prefetch_hits() == 0);

  // Interrupted after 3 batches of epoch 1, resumed by a new loader.
  DatasetLoader first(ds, {.batch_size = 4, .shuffle = true, .seed = 5});
  first.set_epoch(1);
  std::vector<std::vector<int64_t>> got;
  for (const Example& b : first) {
    got.push_back(samples_of(b[0]));
    if (first.position() == 3) break;
  }
  DatasetLoader resumed(ds, {.batch_size = 4, .shuffle = true, .seed = 5});
  resumed.set_epoch(first.epoch());
  resumed.skip(first.position());
  for (const Example& b : resumed) got.push_back(samples_of(b[0]));
  DatasetLoader whole(ds, {.batch_size = 4, .shuffle = true, .seed = 5});
  whole.set_epoch(1);
  CHECK(got == pass(whole));
}

TEST_CASE("DatasetLoader shards like DistributedSampler and drops the last partial batch on request",
          "[data][dataset]") {
  const Toy d = toy(11);
  TensorDataset ds({d.tokens});
  std::multiset<int64_t> all;
  for (int64_t rank = 0; rank < 3; ++rank) {
    DatasetLoader l(ds, {.batch_size = 2, .shuffle = true, .seed = 1, .num_replicas = 3, .rank = rank});
    CHECK(l.num_samples() == 4);  // ceil(11 / 3), padded
    for (const Example& b : l) {
      for (int64_t s : samples_of(b[0])) all.insert(s);
    }
  }
  CHECK(all.size() == 12);
  for (int64_t i = 0; i < 11; ++i) CHECK(all.count(i) >= 1);
  DatasetLoader dl(ds, {.batch_size = 4, .drop_last = true});
  CHECK(dl.num_batches() == 2);
}

TEST_CASE("a custom Dataset: get() stacked by default, on every test device; worker errors surface",
          "[data][dataset]") {
  Squares sq;
  sq.n = 5;
  for (Device dev : hg::test::test_devices()) {
    INFO(dev.str());
    DatasetLoader l(sq, {.batch_size = 2, .device = dev});
    std::vector<double> xs;
    std::vector<int64_t> ys;
    for (const Example& b : l) {
      CHECK(b[0].device() == dev);
      CHECK(b[0].sizes() == Shape{b[1].size(0), 2});
      for (double v : b[0].cpu().to(kF64).to_vector<double>()) xs.push_back(v);
      for (int64_t v : b[1].cpu().to_vector<int64_t>()) ys.push_back(v);
    }
    CHECK(xs == std::vector<double>{0, 0, 1, 1, 4, 4, 9, 9, 16, 16});
    CHECK(ys == std::vector<int64_t>{0, 1, 2, 3, 4});
  }
  // Sample 3 is in batch 1, which the worker makes while batch 0 is used.
  sq.bad = 3;
  DatasetLoader l(sq, {.batch_size = 2});
  auto it = l.begin();
  CHECK((*it).size() == 2);
  ++it;
  CHECK_THROWS_WITH(*it, Contains("sample 3 is broken"));
  CHECK(l.position() == 1);
}

TEST_CASE("TensorDataset and DatasetLoader refuse bad input with a clear message", "[data][dataset]") {
  CHECK_THROWS_WITH(TensorDataset({zeros({3, 2}), zeros({4})}), Contains("holds 4 samples") && Contains("3"));
  CHECK_THROWS_WITH(TensorDataset({}), Contains("at least one tensor"));
  CHECK_THROWS_WITH(TensorDataset({tensor(1.0)}), Contains("leading sample dim"));
  TensorDataset ds({zeros({3, 2})});
  CHECK_THROWS_WITH(ds.get(3), Contains("out of range"));
  CHECK_THROWS_WITH(DatasetLoader(ds, {.batch_size = 0}), Contains("batch_size"));
  CHECK_THROWS_WITH(DatasetLoader(ds, {.mean = 0.5}), Contains("ImageDataset"));
  DatasetLoader three(ds, {.batch_size = 1});
  CHECK_THROWS_WITH(three.skip(4), Contains("DatasetLoader::skip(4): only 3 batches remain in epoch 0"));
  CHECK_THROWS_WITH(three.set_position(4), Contains("DatasetLoader::set_position(4): must be in [0, 3]"));
  static_assert(!std::is_constructible_v<DatasetLoader, TensorDataset&&, DataLoaderOptions>,
                "a temporary dataset would dangle");
  static_assert(std::is_constructible_v<DatasetLoader, TensorDataset&, DataLoaderOptions>);
  // The image loader points to the general one for other dtypes.
  CHECK_THROWS_WITH(DataLoader(zeros({3, 2}), zeros({3}, {.dtype = kI64})), Contains("TensorDataset"));
}

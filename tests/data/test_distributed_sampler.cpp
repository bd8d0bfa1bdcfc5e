// data/: the data-parallel split of DataLoader (num_replicas / rank), checked
// against the single-replica order of the same seed and epoch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/tensor.h"
#include "data/dataloader.h"

using namespace hg;
using namespace hg::data;

namespace {
struct Toy {
  Tensor images, labels;
};
Toy toy(int64_t n) {
  std::vector<uint8_t> px(static_cast<size_t>(n) * 4);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i % 251);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::iota(labels.begin(), labels.end(), 0);
  return {from_vector(px, {n, 4}), from_vector(labels, {n})};
}
std::vector<int64_t> pass_labels(DataLoader& l) {
  std::vector<int64_t> out;
  for (auto [x, y] : l)
    for (int64_t v : y.to_vector<int64_t>()) out.push_back(v);
  return out;
}
}  // namespace

TEST_CASE("DataLoader shards: rank r visits positions r, r+R, ... of the shared order", "[data][loader][distributed]") {
  const int64_t n = 10;
  Toy d = toy(n);
  for (bool pad : {true, false}) {
    for (int64_t R : {2, 3, 4}) {
      CAPTURE(pad, R);
      DataLoader whole(d.images, d.labels, {.batch_size = 3, .shuffle = true, .seed = 9});
      for (uint64_t epoch : {0, 5}) {
        whole.set_epoch(epoch);
        const std::vector<int64_t> order = whole.order();  // the reference: one replica
        const int64_t per_rank = pad ? (n + R - 1) / R : n / R;
        std::vector<int64_t> seen;
        for (int64_t r = 0; r < R; ++r) {
          DataLoader shard(
              d.images, d.labels,
              {.batch_size = 3, .shuffle = true, .seed = 9, .num_replicas = R, .rank = r, .pad_shards = pad});
          shard.set_epoch(epoch);
          REQUIRE(shard.num_samples() == per_rank);
          REQUIRE(shard.dataset_samples() == n);
          const std::vector<int64_t> got = pass_labels(shard);
          REQUIRE(static_cast<int64_t>(got.size()) == per_rank);
          for (int64_t k = 0; k < per_rank; ++k) {
            const int64_t pos = r + k * R;  // padded positions wrap to the beginning
            REQUIRE(got[static_cast<size_t>(k)] == order[static_cast<size_t>(pos % n)]);
          }
          seen.insert(seen.end(), got.begin(), got.end());
        }
        std::sort(seen.begin(), seen.end());
        const int64_t distinct = std::unique(seen.begin(), seen.end()) - seen.begin();
        // pad: every sample at least once; drop: R * floor(n / R) distinct samples.
        CHECK(distinct == (pad ? n : R * (n / R)));
      }
    }
  }
}

TEST_CASE("DataLoader shards: drop_last per shard, bad rank", "[data][loader][distributed]") {
  Toy d = toy(10);
  DataLoader s(d.images, d.labels, {.batch_size = 2, .drop_last = true, .num_replicas = 3, .rank = 2});
  CHECK(s.num_samples() == 4);  // ceil(10 / 3), padded
  CHECK(s.num_batches() == 2);
  CHECK_THROWS_WITH(DataLoader(d.images, d.labels, {.num_replicas = 2, .rank = 2}),
                    Catch::Contains("rank must be in [0, num_replicas)"));
  CHECK_THROWS_WITH(DataLoader(toy(1).images, toy(1).labels, {.num_replicas = 2, .pad_shards = false}),
                    Catch::Contains("set pad_shards = true"));
}

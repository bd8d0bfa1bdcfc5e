// DataLoader: batches of (images, labels) with seeded, resumable shuffling.
//
//   hg::data::FashionMnist train;
//   hg::data::DataLoader loader(train.images(), train.labels(),
//                               {.batch_size = 128, .shuffle = true, .seed = 42,
//                                .mean = 0.2860, .std = 0.3530});
//   for (int epoch = 0; epoch < 10; ++epoch) {
//     for (auto [x, y] : loader) { ... }  // x f32 [B, 784], y i64 [B]
//   }
//
// Each batch: x = ((v / 255) - mean) / std for the u8 pixels v of the batch's
// samples, flattened to [B, prod(trailing dims)] (or kept as [B, dims...] with
// flatten = false), in `dtype`; y = the i64 labels [B]. Both live on `device`.
//
// Note [DataLoader order and resuming]
// The order of epoch k is a pure function of (seed, k): a Fisher-Yates
// shuffle whose random numbers come from Philox keyed by `seed` at stream
// offset kShuffleStream + k (see core/philox.h). Nothing else is consumed,
// so the order is the same whatever ran before, on any device and after a
// restart. The loader tracks (epoch, position): `position()` counts the
// batches handed out in the current epoch (it advances when a batch is
// dereferenced, so inside the loop body it already includes the current
// batch), and a full pass moves to the next epoch with position 0. A
// checkpoint saves epoch() and position(); resuming calls set_epoch(e) and
// skip(position) — the remaining batches are then identical to those of an
// uninterrupted run. One pass at a time: two live iterators share the state.
//
// Performance: a batch is assembled on the host with a 256-entry lookup table
// (one table read per pixel, no division); a 128 x 784 batch is 100 KB of
// u8 reads and 400 KB of f32 writes. On a CUDA device the batch is then moved
// with .to(device) synchronously; staging in pinned memory with an async copy
// on a side stream is a follow-up.
#pragma once

#include <cstdint>
#include <cstddef>
#include <iterator>
#include <vector>

#include "core/tensor.h"

namespace hg::data {

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;
  uint64_t seed = 0;       // shuffle seed; epoch k's order depends only on (seed, k)
  bool drop_last = false;  // drop a final batch smaller than batch_size
  double mean = 0.0;       // x = (v/255 - mean) / std
  double std = 1.0;
  int64_t limit = 0;       // use only the first `limit` samples; 0 = all (larger = all)
  bool flatten = true;     // x is [B, prod(dims)] (true) or [B, dims...] (false)
  Device device = Device::cpu();
  DType dtype = kF32;      // floating dtype of x
};

// One batch; `auto [x, y] = batch` works (an aggregate of two members).
struct Batch {
  Tensor x;  // [B, D] floating, normalised
  Tensor y;  // [B] i64
};

class DataLoader {
 public:
  // Stream offset base for the shuffle's Philox numbers: keeps them apart from
  // the offsets 0, 1, 2, ... that a Generator with the same seed hands out for
  // weight init and dropout, so reusing one seed does not correlate the two.
  static constexpr uint64_t kShuffleStream = uint64_t{0x5348554646} << 24;  // "SHUFF"

  // images: u8 [N, ...]; labels: i64 [N]. The tensors are shared, not copied
  // (CPU tensors; others are copied to the host once).
  DataLoader(const Tensor& images, const Tensor& labels, DataLoaderOptions options = {});

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Batch;

    Iterator() = default;
    Batch operator*() const;  // assembles the batch; sets loader.position()
    Iterator& operator++();   // after the last batch, the loader moves to the next epoch
    void operator++(int) { ++*this; }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    friend class DataLoader;
    Iterator(DataLoader* loader, int64_t index) : loader_(loader), index_(index) {}
    DataLoader* loader_ = nullptr;
    int64_t index_ = 0;
  };

  // Iterates the current epoch from position() to the end. If the epoch is
  // already fully consumed (position() == num_batches(), e.g. after a break in
  // the last batch or skip() to the end), the pass is empty and the loader
  // moves to the next epoch, so `for (epoch...) for (batch : loader)` stays in step.
  Iterator begin();
  Iterator end() { return Iterator(this, num_batches()); }

  // Batch `index` of the current epoch (0 <= index < num_batches()); does not
  // change position().
  Batch batch(int64_t index) const;

  int64_t num_batches() const;
  int64_t num_samples() const { return num_samples_; }  // after `limit`
  int64_t batch_size() const { return options_.batch_size; }
  const DataLoaderOptions& options() const { return options_; }

  // Epoch / position state (Note [DataLoader order and resuming]).
  uint64_t epoch() const { return epoch_; }
  int64_t position() const { return position_; }
  void set_epoch(uint64_t epoch);         // selects epoch's order, position 0
  void skip(int64_t n_batches);           // position += n (checked <= num_batches())
  void set_position(int64_t batch_index); // absolute, 0..num_batches()

  // Sample indices of the current epoch in visiting order (size num_samples()).
  const std::vector<int64_t>& order() const { return order_; }

 private:
  void compute_order();
  void finish_epoch();

  Tensor images_;  // u8 [N, ...], contiguous, CPU
  Tensor labels_;  // i64 [N], contiguous, CPU
  DataLoaderOptions options_;
  Shape sample_shape_;       // trailing dims of images
  int64_t sample_numel_ = 0; // prod(sample_shape_)
  int64_t num_samples_ = 0;
  std::vector<double> lut_;  // 256 entries: normalised value of each pixel byte
  uint64_t epoch_ = 0;
  int64_t position_ = 0;
  std::vector<int64_t> order_;
};

// Unbiased-enough Fisher-Yates permutation of [0, n) from Philox at
// (seed, offset); exposed for tests and for datasets that shuffle themselves.
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, uint64_t offset);

}  // namespace hg::data

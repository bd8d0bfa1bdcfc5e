// DataLoader: order computation (seeded Fisher-Yates) and batch assembly.
#include "data/dataloader.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/philox.h"

namespace hg::data {
namespace {

// High 64 bits of a 64x64-bit product, from 32-bit halves (no __int128, which
// -Wpedantic rejects).
uint64_t mul_hi64(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
  const uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo;
  const uint64_t hi_lo = a_hi * b_lo;
  const uint64_t lo_hi = a_lo * b_hi;
  const uint64_t hi_hi = a_hi * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  return hi_hi + (hi_lo >> 32) + (cross >> 32);
}

}  // namespace

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, uint64_t offset) {
  HG_CHECK(n >= 0, "shuffled_indices: n must be >= 0, got ", n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  // Fisher-Yates from the back. Step t (swapping position i = n-1-t) uses
  // Philox block t at (seed, offset): lanes 0 and 1 form a 64-bit u, and
  // j = floor(u * (i+1) / 2^64) is uniform on [0, i] up to a bias below
  // n / 2^64 (< 1e-13 for a million samples), which no training run can see.
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t step = static_cast<uint64_t>(n - 1 - i);
    const Philox4x32Out bits = philox_block(seed, offset, step);
    const uint64_t u = (uint64_t{bits.x[1]} << 32) | bits.x[0];
    const auto j = static_cast<int64_t>(mul_hi64(u, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

DataLoader::DataLoader(const Tensor& images, const Tensor& labels, DataLoaderOptions options)
    : options_(options) {
  HG_CHECK(images.defined() && labels.defined(),
           "DataLoader: images and labels must be defined tensors");
  HG_CHECK(images.dtype() == kU8, "DataLoader: images must be u8 [N, ...] (raw pixel bytes), got ",
           dtype_name(images.dtype()), " ", images.shape_str());
  HG_CHECK(images.dim() >= 1, "DataLoader: images must have a leading sample dim [N, ...], got a "
           "rank-0 tensor");
  HG_CHECK(labels.dtype() == kI64 && labels.dim() == 1, "DataLoader: labels must be i64 [N], got ",
           dtype_name(labels.dtype()), " ", labels.shape_str(),
           "; convert with .to(hg::kI64) or flatten them");
  HG_CHECK(images.size(0) == labels.size(0), "DataLoader: images hold ", images.size(0),
           " samples but labels hold ", labels.size(0), "; they must match");
  HG_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got ",
           options_.batch_size);
  HG_CHECK(options_.limit >= 0, "DataLoader: limit must be >= 0 (0 = all samples), got ",
           options_.limit);
  HG_CHECK(std::isfinite(options_.mean) && std::isfinite(options_.std) && options_.std > 0,
           "DataLoader: normalisation needs a finite mean and a finite std > 0, got mean ",
           options_.mean, " std ", options_.std);
  HG_CHECK(is_floating(options_.dtype), "DataLoader: dtype must be floating (f32, f16, bf16, ",
           "f64), got ", dtype_name(options_.dtype));

  // Batches are gathered on the host from contiguous rows.
  images_ = images.cpu().contiguous();
  labels_ = labels.cpu().contiguous();
  sample_shape_.assign(images_.sizes().begin() + 1, images_.sizes().end());
  sample_numel_ = numel_of(sample_shape_);
  const int64_t n = images_.size(0);
  num_samples_ = options_.limit > 0 && options_.limit < n ? options_.limit : n;

  // Computed in double, rounded once to the batch dtype in batch().
  lut_.resize(256);
  for (int v = 0; v < 256; ++v) {
    lut_[static_cast<size_t>(v)] = (v / 255.0 - options_.mean) / options_.std;
  }
  compute_order();
}

int64_t DataLoader::num_batches() const {
  const int64_t b = options_.batch_size;
  return options_.drop_last ? num_samples_ / b : (num_samples_ + b - 1) / b;
}

void DataLoader::compute_order() {
  if (options_.shuffle) {
    order_ = shuffled_indices(num_samples_, options_.seed, kShuffleStream + epoch_);
  } else {
    order_.resize(static_cast<size_t>(num_samples_));
    for (int64_t i = 0; i < num_samples_; ++i) order_[static_cast<size_t>(i)] = i;
  }
}

void DataLoader::set_epoch(uint64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  compute_order();
}

void DataLoader::skip(int64_t n_batches) {
  HG_CHECK(n_batches >= 0, "DataLoader::skip: n_batches must be >= 0, got ", n_batches);
  HG_CHECK(n_batches <= num_batches() - position_, "DataLoader::skip(", n_batches,
           "): only ", num_batches() - position_, " batches remain in epoch ", epoch_,
           " (position ", position_, " of ", num_batches(), ")");
  position_ += n_batches;
}

void DataLoader::set_position(int64_t batch_index) {
  HG_CHECK(batch_index >= 0 && batch_index <= num_batches(), "DataLoader::set_position(",
           batch_index, "): must be in [0, ", num_batches(), "]");
  position_ = batch_index;
}

void DataLoader::finish_epoch() { set_epoch(epoch_ + 1); }

DataLoader::Iterator DataLoader::begin() {
  if (position_ >= num_batches()) {
    finish_epoch();
    return end();
  }
  return Iterator(this, position_);
}

Batch DataLoader::batch(int64_t index) const {
  HG_CHECK(index >= 0 && index < num_batches(), "DataLoader::batch(", index,
           "): index out of range [0, ", num_batches(), ")");
  const int64_t first = index * options_.batch_size;
  const int64_t count = std::min(options_.batch_size, num_samples_ - first);

  Shape x_shape{count};
  if (options_.flatten) {
    x_shape.push_back(sample_numel_);
  } else {
    x_shape.insert(x_shape.end(), sample_shape_.begin(), sample_shape_.end());
  }
  Batch out{empty(x_shape, {.dtype = options_.dtype}), empty({count}, {.dtype = kI64})};

  const uint8_t* pixels = images_.data<uint8_t>();
  const int64_t* labels = labels_.data<int64_t>();
  int64_t* y = out.y.data<int64_t>();
  dispatch_floating(options_.dtype, "DataLoader", [&](auto tag) {
    using T = decltype(tag);
    T lut[256];
    for (size_t v = 0; v < 256; ++v) {
      if constexpr (std::is_same_v<T, double>) {
        lut[v] = lut_[v];
      } else {
        // f32 rounds once; f16/bf16 round via f32 (a double rounding that can
        // move a tie by one 16-bit ulp, far below the noise of training).
        lut[v] = T(static_cast<float>(lut_[v]));
      }
    }
    T* x = out.x.template data<T>();
    for (int64_t r = 0; r < count; ++r) {
      const int64_t sample = order_[static_cast<size_t>(first + r)];
      const uint8_t* src = pixels + sample * sample_numel_;
      T* dst = x + r * sample_numel_;
      for (int64_t k = 0; k < sample_numel_; ++k) dst[k] = lut[src[k]];
      y[r] = labels[sample];
    }
  });

  if (!options_.device.is_cpu()) {
    // Synchronous host -> device copy; pinned staging + side-stream prefetch is a follow-up.
    out.x = out.x.to(options_.device);
    out.y = out.y.to(options_.device);
  }
  return out;
}

Batch DataLoader::Iterator::operator*() const {
  Batch b = loader_->batch(index_);
  loader_->position_ = index_ + 1;
  return b;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  if (index_ >= loader_->num_batches()) loader_->finish_epoch();
  return *this;
}

}  // namespace hg::data

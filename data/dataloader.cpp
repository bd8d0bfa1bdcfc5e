// DataLoader: order computation (seeded Fisher-Yates), batch assembly and the
// choice between the synchronous path and the CUDA prefetcher (data/prefetch.cpp).
#include "data/dataloader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/philox.h"
#include "data/prefetch.h"

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

int64_t shard_samples(int64_t dataset_samples, const DataLoaderOptions& options) {
  HG_CHECK(options.num_replicas >= 1 && options.rank >= 0 && options.rank < options.num_replicas,
           "DataLoader: rank must be in [0, num_replicas) and num_replicas >= 1, got rank ", options.rank, " of ",
           options.num_replicas);
  const int64_t R = options.num_replicas;
  const int64_t n = options.pad_shards ? (dataset_samples + R - 1) / R : dataset_samples / R;
  HG_CHECK(n > 0 || dataset_samples == 0, "DataLoader: ", dataset_samples, " samples cannot be split over ", R,
           " replicas without padding; set pad_shards = true");
  return n;
}

std::vector<int64_t> epoch_order(int64_t dataset_samples, const DataLoaderOptions& options, uint64_t epoch) {
  std::vector<int64_t> order;
  if (options.shuffle) {
    order = shuffled_indices(dataset_samples, options.seed, DataLoader::kShuffleStream + epoch);
  } else {
    order.resize(static_cast<size_t>(dataset_samples));
    for (int64_t i = 0; i < dataset_samples; ++i) order[static_cast<size_t>(i)] = i;
  }
  if (options.num_replicas > 1 && !order.empty()) {  // this rank's shard (DataLoaderOptions::num_replicas)
    const int64_t R = options.num_replicas, count = shard_samples(dataset_samples, options);
    std::vector<int64_t> shard(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) {
      const int64_t pos = (options.rank + k * R) % dataset_samples;  // padding wraps to the start
      shard[static_cast<size_t>(k)] = order[static_cast<size_t>(pos)];
    }
    order = std::move(shard);
  }
  return order;
}

namespace detail {

int64_t batches_per_epoch(int64_t samples, int64_t batch_size, bool drop_last) {
  return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size;
}

int64_t skip_position(const char* who, int64_t position, int64_t n_batches, int64_t batches, uint64_t epoch) {
  HG_CHECK(n_batches >= 0, who, "::skip: n_batches must be >= 0, got ", n_batches);
  HG_CHECK(n_batches <= batches - position, who, "::skip(", n_batches, "): only ", batches - position,
           " batches remain in epoch ", epoch, " (position ", position, " of ", batches, ")");
  return position + n_batches;
}

int64_t checked_position(const char* who, int64_t batch_index, int64_t batches) {
  HG_CHECK(batch_index >= 0 && batch_index <= batches, who, "::set_position(", batch_index, "): must be in [0, ",
           batches, "]");
  return batch_index;
}

std::shared_ptr<BatchSource> make_image_source(const char* who, const Tensor& images, const Tensor& labels, double mean,
                                               double std, bool flatten, DType dtype) {
  HG_CHECK(images.defined() && labels.defined(), who, ": images and labels must be defined tensors");
  HG_CHECK(images.dtype() == kU8, who, ": images must be u8 [N, ...] (raw pixel bytes), got ",
           dtype_name(images.dtype()), " ", images.shape_str(),
           "; for other tensors (i64 tokens, f32 features) use hg::data::TensorDataset with a DatasetLoader");
  HG_CHECK(images.dim() >= 1, who, ": images must have a leading sample dim [N, ...], got a rank-0 tensor");
  HG_CHECK(labels.dtype() == kI64 && labels.dim() == 1, who, ": labels must be i64 [N], got ",
           dtype_name(labels.dtype()), " ", labels.shape_str(), "; convert with .to(hg::kI64) or flatten them");
  HG_CHECK(images.size(0) == labels.size(0), who, ": images hold ", images.size(0), " samples but labels hold ",
           labels.size(0), "; they must match");
  HG_CHECK(std::isfinite(mean) && std::isfinite(std) && std > 0, who,
           ": normalisation needs a finite mean and a finite std > 0, got mean ", mean, " std ", std);
  HG_CHECK(is_floating(dtype), who, ": dtype must be floating (f32, f16, bf16, f64), got ", dtype_name(dtype));
  // Batches are gathered on the host from contiguous rows.
  auto source = std::make_shared<BatchSource>();
  source->images = images.detach().cpu().contiguous();
  source->labels = labels.detach().cpu().contiguous();
  source->pixels = source->images.data<uint8_t>();
  source->label_data = source->labels.data<int64_t>();
  source->sample_shape.assign(source->images.sizes().begin() + 1, source->images.sizes().end());
  source->sample_numel = numel_of(source->sample_shape);
  source->flatten = flatten;
  source->dtype = dtype;
  // Computed in double, rounded once to the batch dtype in assemble_batch().
  for (int v = 0; v < 256; ++v) source->lut[static_cast<size_t>(v)] = (v / 255.0 - mean) / std;
  return source;
}

Shape BatchSource::x_shape(int64_t count) const {
  Shape shape{count};
  if (flatten) {
    shape.push_back(sample_numel);
  } else {
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  }
  return shape;
}

void assemble_batch(const BatchSource& source, const int64_t* samples, int64_t count, void* x,
                    int64_t* y) {
  dispatch_floating(source.dtype, "DataLoader", [&](auto tag) {
    using T = decltype(tag);
    T lut[256];
    for (size_t v = 0; v < 256; ++v) {
      if constexpr (std::is_same_v<T, double>) {
        lut[v] = source.lut[v];
      } else {
        // f32 rounds once; f16/bf16 round via f32 (a double rounding that can
        // move a tie by one 16-bit ulp, far below the noise of training).
        lut[v] = T(static_cast<float>(source.lut[v]));
      }
    }
    T* x_rows = static_cast<T*>(x);
    for (int64_t r = 0; r < count; ++r) {
      const int64_t sample = samples[r];
      const uint8_t* src = source.pixels + sample * source.sample_numel;
      T* dst = x_rows + r * source.sample_numel;
      for (int64_t k = 0; k < source.sample_numel; ++k) dst[k] = lut[src[k]];
      y[r] = source.label_data[sample];
    }
  });
}

}  // namespace detail

DataLoader::DataLoader(const Tensor& images, const Tensor& labels, DataLoaderOptions options)
    : options_(options) {
  HG_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got ", options_.batch_size);
  HG_CHECK(options_.limit >= 0, "DataLoader: limit must be >= 0 (0 = all samples), got ", options_.limit);
  auto source = detail::make_image_source("DataLoader", images, labels, options_.mean, options_.std, options_.flatten,
                                          options_.dtype);
  source->batch_size = options_.batch_size;
  const int64_t n = source->images.size(0);
  dataset_samples_ = options_.limit > 0 && options_.limit < n ? options_.limit : n;
  num_samples_ = shard_samples(dataset_samples_, options_);
  source_ = std::move(source);
  compute_order();
}

// Out of line: detail::Prefetcher is complete here.
DataLoader::~DataLoader() = default;
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

int64_t DataLoader::num_batches() const {
  return detail::batches_per_epoch(num_samples_, options_.batch_size, options_.drop_last);
}

void DataLoader::compute_order() {
  order_ = std::make_shared<const std::vector<int64_t>>(epoch_order(dataset_samples_, options_, epoch_));
  ++order_generation_;
}

void DataLoader::set_epoch(uint64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  compute_order();
}

void DataLoader::skip(int64_t n_batches) {
  position_ = detail::skip_position("DataLoader", position_, n_batches, num_batches(), epoch_);
}

void DataLoader::set_position(int64_t batch_index) {
  position_ = detail::checked_position("DataLoader", batch_index, num_batches());
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

  Batch out{empty(source_->x_shape(count), {.dtype = options_.dtype}),
            empty({count}, {.dtype = kI64})};
  detail::assemble_batch(*source_, order_->data() + first, count, out.x.data_ptr(),
                         out.y.data<int64_t>());
  if (!options_.device.is_cpu()) {
    // Synchronous host -> device copies (the path without prefetching).
    out.x = out.x.to(options_.device);
    out.y = out.y.to(options_.device);
  }
  return out;
}

bool DataLoader::uses_prefetch() const {
#if defined(HG_WITH_CUDA)
  return options_.prefetch && options_.device.is_cuda();
#else
  return false;
#endif
}

Batch DataLoader::fetch(int64_t index) {
#if defined(HG_WITH_CUDA)
  if (uses_prefetch()) {
    HG_CHECK(index >= 0 && index < num_batches(), "DataLoader: batch ", index,
             " out of range [0, ", num_batches(), ")");
    if (prefetcher_ == nullptr) {
      prefetcher_ = std::make_unique<detail::Prefetcher>(source_, options_.device);
    }
    return prefetcher_->get(order_generation_, order_, index, num_batches());
  }
#endif
  return batch(index);
}

PrefetchStats DataLoader::prefetch_stats() const {
#if defined(HG_WITH_CUDA)
  if (prefetcher_ != nullptr) return prefetcher_->stats();
#endif
  return {};
}

Batch DataLoader::Iterator::operator*() const {
  Batch b = loader_->fetch(index_);
  loader_->position_ = index_ + 1;
  return b;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  if (index_ >= loader_->num_batches()) loader_->finish_epoch();
  return *this;
}

}  // namespace hg::data

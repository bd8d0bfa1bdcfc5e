// Datasets and the loader over any dataset (data/dataset.h).
#include "data/dataset.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "data/prefetch.h"
#include "kernels/index/index.h"

namespace hg::data {

Example Dataset::get_batch(const std::vector<int64_t>& indices) const {
  HG_CHECK(!indices.empty(), "Dataset::get_batch: no indices");
  std::vector<Example> samples;
  samples.reserve(indices.size());
  for (int64_t i : indices) samples.push_back(get(i));
  Example out;
  for (size_t f = 0; f < samples[0].size(); ++f) {
    std::vector<Tensor> field;
    field.reserve(samples.size());
    for (size_t k = 0; k < samples.size(); ++k) {
      HG_CHECK(samples[k].size() == samples[0].size(), "Dataset::get_batch: sample ", indices[k], " has ",
               samples[k].size(), " fields, sample ", indices[0], " has ", samples[0].size());
      field.push_back(samples[k][f]);
    }
    out.push_back(ops::stack(field, 0));
  }
  return out;
}

TensorDataset::TensorDataset(std::vector<Tensor> tensors) {
  HG_CHECK(!tensors.empty(), "TensorDataset: give at least one tensor");
  for (size_t f = 0; f < tensors.size(); ++f) {
    const Tensor& t = tensors[f];
    HG_CHECK(t.defined() && t.dim() >= 1, "TensorDataset: tensor ", f, " must have a leading sample dim [N, ...], got ",
             t.defined() ? t.shape_str() : "an undefined tensor");
    HG_CHECK(t.size(0) == tensors[0].size(0), "TensorDataset: tensor ", f, " holds ", t.size(0),
             " samples but tensor 0 holds ", tensors[0].size(0), "; they must match (the leading dim)");
    tensors_.push_back(t.detach().cpu().contiguous());
  }
  size_ = tensors_[0].size(0);
}

Example TensorDataset::get(int64_t index) const {
  HG_CHECK(index >= 0 && index < size_, "TensorDataset::get(", index, "): index out of range [0, ", size_, ")");
  Example out;
  for (const Tensor& t : tensors_) out.push_back(t.select(0, index));
  return out;
}

Example TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) {
    HG_CHECK(i >= 0 && i < size_, "TensorDataset::get_batch: index ", i, " out of range [0, ", size_, ")");
  }
  const Tensor index = from_vector(indices);
  Example out;
  for (const Tensor& t : tensors_) out.push_back(ops::index_select(t, 0, index));
  return out;
}

ImageDataset::ImageDataset(const Tensor& images, const Tensor& labels, double mean, double std, bool flatten,
                           DType dtype)
    : source_(detail::make_image_source("ImageDataset", images, labels, mean, std, flatten, dtype)) {}

ImageDataset::~ImageDataset() = default;

int64_t ImageDataset::size() const { return source_->images.size(0); }

Example ImageDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) {
    HG_CHECK(i >= 0 && i < size(), "ImageDataset::get_batch: index ", i, " out of range [0, ", size(), ")");
  }
  const auto count = static_cast<int64_t>(indices.size());
  Example out{empty(source_->x_shape(count), {.dtype = source_->dtype}), empty({count}, {.dtype = kI64})};
  detail::assemble_batch(*source_, indices.data(), count, out[0].data_ptr(), out[1].data<int64_t>());
  return out;
}

Example ImageDataset::get(int64_t index) const {
  Example b = get_batch({index});
  return {b[0].select(0, 0), b[1].select(0, 0)};
}

DatasetLoader::DatasetLoader(const Dataset& dataset, DataLoaderOptions options)
    : dataset_(&dataset), options_(options) {
  const DataLoaderOptions plain;
  HG_CHECK(options_.mean == plain.mean && options_.std == plain.std && options_.flatten == plain.flatten &&
               options_.dtype == plain.dtype,
           "DatasetLoader: mean, std, flatten and dtype are the image loader's options; a DatasetLoader hands out "
           "the dataset's tensors as they are (normalise images with hg::data::ImageDataset)");
  HG_CHECK(options_.batch_size > 0, "DatasetLoader: batch_size must be positive, got ", options_.batch_size);
  HG_CHECK(options_.limit >= 0, "DatasetLoader: limit must be >= 0 (0 = all samples), got ", options_.limit);
  const int64_t n = dataset.size();
  HG_CHECK(n >= 0, "DatasetLoader: the dataset's size() is negative (", n, ")");
  dataset_samples_ = options_.limit > 0 && options_.limit < n ? options_.limit : n;
  num_samples_ = shard_samples(dataset_samples_, options_);
  compute_order();
}

DatasetLoader::~DatasetLoader() { drop_ahead(); }

int64_t DatasetLoader::num_batches() const {
  return detail::batches_per_epoch(num_samples_, options_.batch_size, options_.drop_last);
}

void DatasetLoader::compute_order() {
  drop_ahead();
  order_ = epoch_order(dataset_samples_, options_, epoch_);
  ++generation_;
}

void DatasetLoader::drop_ahead() {
  if (!ahead_.valid()) return;
  try {
    ahead_.get();  // waits for the worker; its result (or error) belongs to no one now
  } catch (...) {}
  ahead_index_ = -1;
}

void DatasetLoader::set_epoch(uint64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  compute_order();
}

void DatasetLoader::skip(int64_t n_batches) {
  position_ = detail::skip_position("DatasetLoader", position_, n_batches, num_batches(), epoch_);
}

void DatasetLoader::set_position(int64_t batch_index) {
  position_ = detail::checked_position("DatasetLoader", batch_index, num_batches());
}

DatasetLoader::Iterator DatasetLoader::begin() {
  if (position_ >= num_batches()) {
    set_epoch(epoch_ + 1);
    return end();
  }
  return Iterator(this, position_);
}

Example DatasetLoader::host_batch(int64_t index) const {
  const int64_t first = index * options_.batch_size;
  const int64_t count = std::min(options_.batch_size, num_samples_ - first);
  const std::vector<int64_t> indices(order_.begin() + first, order_.begin() + first + count);
  NoGradGuard no_grad;
  Example b = dataset_->get_batch(indices);
  HG_CHECK(!b.empty(), "DatasetLoader: the dataset's get_batch returned no tensors");
  for (size_t f = 0; f < b.size(); ++f) {
    HG_CHECK(b[f].defined() && b[f].dim() >= 1 && b[f].size(0) == count, "DatasetLoader: field ", f,
             " of the dataset's get_batch of ", count, " samples is ",
             b[f].defined() ? b[f].shape_str() : "an undefined tensor", "; it must be [", count, ", ...]");
  }
  return b;
}

Example DatasetLoader::to_device(Example batch) const {
  for (Tensor& t : batch) {
    if (t.device() != options_.device) t = t.to(options_.device);
  }
  return batch;
}

Example DatasetLoader::batch(int64_t index) const {
  HG_CHECK(index >= 0 && index < num_batches(), "DatasetLoader::batch(", index, "): index out of range [0, ",
           num_batches(), ")");
  return to_device(host_batch(index));
}

Example DatasetLoader::fetch(int64_t index) {
  HG_CHECK(index >= 0 && index < num_batches(), "DatasetLoader: batch ", index, " out of range [0, ", num_batches(),
           ")");
  Example b;
  if (ahead_.valid() && ahead_generation_ == generation_ && ahead_index_ == index) {
    ++hits_;
    ahead_index_ = -1;
    b = ahead_.get();  // rethrows the worker's error for this batch
  } else {
    ++misses_;
    drop_ahead();
    b = host_batch(index);
  }
  if (options_.prefetch && index + 1 < num_batches()) {
    ahead_generation_ = generation_;
    ahead_index_ = index + 1;
    ahead_ = std::async(std::launch::async, [this, next = index + 1] { return host_batch(next); });
  }
  return to_device(std::move(b));
}

Example DatasetLoader::Iterator::operator*() const {
  Example b = loader_->fetch(index_);
  loader_->position_ = index_ + 1;
  return b;
}

DatasetLoader::Iterator& DatasetLoader::Iterator::operator++() {
  ++index_;
  if (index_ >= loader_->num_batches()) loader_->set_epoch(loader_->epoch_ + 1);
  return *this;
}

}  // namespace hg::data

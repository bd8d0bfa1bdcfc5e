// Datasets over your own tensors and a loader over any dataset, as
// torch.utils.data's Dataset / TensorDataset / DataLoader:
//
//   hg::data::TensorDataset ds({tokens, mask, labels});  // i64 [N, T], bool [N, T], i64 [N]
//   hg::data::DatasetLoader loader(ds, {.batch_size = 32, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 3; ++epoch) {
//     for (const std::vector<hg::Tensor>& b : loader) {
//       const hg::Tensor &x = b[0], &m = b[1], &y = b[2];  // [32, T], [32, T], [32]
//     }
//   }
//
// A Dataset has size() samples; get(i) returns sample i as a list of tensors
// (no leading batch dim) and get_batch(indices) the samples at `indices`
// stacked along a new dim 0 (the default stacks get(i); TensorDataset gathers
// each tensor's rows with one index_select). The loader visits the samples in
// the order of DataLoader (the same seeded shuffle, Note [DataLoader order and
// resuming] in data/dataloader.h, and the same distributed sharding), so one
// (seed, epoch) gives the same batches with either loader; it keeps the same
// (epoch, position) state, so a checkpoint resumes it with set_epoch and skip.
//
// Prefetch (DataLoaderOptions::prefetch, on by default): one worker thread
// calls get_batch for batch i + 1 while the loop runs step i (under
// NoGradGuard), so a dataset that decodes or tokenizes hides that time; the
// copy to options.device is made by the loop's thread when the batch is
// handed out. get_batch must therefore be safe to call from another thread
// while the loop runs (TensorDataset and ImageDataset only read) and should
// return host tensors (device work belongs to the loop's thread). Batches are
// keyed by (order, index): skip, set_epoch or set_position drop the batch
// made ahead, and what the loop sees is the same with prefetch on or off. An
// exception in the worker is rethrown by the dereference of its batch.
#pragma once

#include <cstdint>
#include <future>
#include <iterator>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "data/dataloader.h"

namespace hg::data {

namespace detail {
struct BatchSource;
}  // namespace detail

using Example = std::vector<Tensor>;  // one sample, or one batch: a tensor per field

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Sample i (0 <= i < size()): one tensor per field, without a batch dim.
  virtual Example get(int64_t index) const = 0;
  // The samples at `indices`, each field stacked along a new dim 0. The
  // default stacks get(i); override it when a batch can be made at once.
  virtual Example get_batch(const std::vector<int64_t>& indices) const;
};

// Samples are rows of the given tensors (all with the same leading size N);
// get(i) is {t[i] for t in tensors}. The tensors are shared, not copied
// (CPU tensors; others are copied to the host once, and batches move to the
// loader's device).
class TensorDataset final : public Dataset {
 public:
  explicit TensorDataset(std::vector<Tensor> tensors);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

// The image loader's samples as a dataset: u8 images [N, ...] normalised to
// ((v / 255) - mean) / std in `dtype` (flattened to [prod(dims)] per sample
// unless flatten is false) and i64 labels [N]. get_batch makes exactly the
// DataLoader's batch (the same lookup table and rounding).
class ImageDataset final : public Dataset {
 public:
  ImageDataset(const Tensor& images, const Tensor& labels, double mean = 0.0, double std = 1.0, bool flatten = true,
               DType dtype = kF32);
  ~ImageDataset() override;
  int64_t size() const override;
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;

 private:
  std::shared_ptr<const detail::BatchSource> source_;
};

// Batches of any Dataset. Takes DataLoaderOptions: batch_size, shuffle, seed,
// drop_last, limit, device, prefetch (above) and the distributed sharding
// (num_replicas, rank, pad_shards) mean what they mean for DataLoader; the
// image fields (mean, std, flatten, dtype) must stay at their defaults (they
// belong to ImageDataset). The dataset must outlive the loader.
class DatasetLoader {
 public:
  DatasetLoader(const Dataset& dataset, DataLoaderOptions options = {});
  // The loader keeps a reference: a temporary dataset would dangle, so it does not compile.
  DatasetLoader(const Dataset&& dataset, DataLoaderOptions options = {}) = delete;
  ~DatasetLoader();  // waits for the batch being made ahead
  DatasetLoader(const DatasetLoader&) = delete;
  DatasetLoader& operator=(const DatasetLoader&) = delete;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Example;

    Iterator() = default;
    Example operator*() const;  // returns the batch; sets loader.position()
    Iterator& operator++();     // after the last batch, the loader moves to the next epoch
    void operator++(int) { ++*this; }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    friend class DatasetLoader;
    Iterator(DatasetLoader* loader, int64_t index) : loader_(loader), index_(index) {}
    DatasetLoader* loader_ = nullptr;
    int64_t index_ = 0;
  };

  // As DataLoader::begin/end: from position() to the end of the epoch.
  Iterator begin();
  Iterator end() { return Iterator(this, num_batches()); }

  // Batch `index` of the current epoch, made now (no prefetch); does not change position().
  Example batch(int64_t index) const;

  int64_t num_batches() const;
  int64_t num_samples() const { return num_samples_; }          // this rank's shard
  int64_t dataset_samples() const { return dataset_samples_; }  // after `limit`, all shards
  const DataLoaderOptions& options() const { return options_; }

  uint64_t epoch() const { return epoch_; }
  int64_t position() const { return position_; }
  void set_epoch(uint64_t epoch);
  void skip(int64_t n_batches);
  void set_position(int64_t batch_index);
  const std::vector<int64_t>& order() const { return order_; }
  // Dereferences served by the batch made ahead, and those made on demand.
  int64_t prefetch_hits() const { return hits_; }
  int64_t prefetch_misses() const { return misses_; }

 private:
  Example host_batch(int64_t index) const;  // on the host, from order_
  Example to_device(Example batch) const;
  Example fetch(int64_t index);
  void compute_order();
  void drop_ahead();

  const Dataset* dataset_;
  DataLoaderOptions options_;
  int64_t num_samples_ = 0;
  int64_t dataset_samples_ = 0;
  uint64_t epoch_ = 0;
  int64_t position_ = 0;
  std::vector<int64_t> order_;
  uint64_t generation_ = 0;
  // The batch made ahead by the worker: (generation, index) and its future.
  uint64_t ahead_generation_ = 0;
  int64_t ahead_index_ = -1;
  std::future<Example> ahead_;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace hg::data

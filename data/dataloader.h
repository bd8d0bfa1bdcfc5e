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
// u8 reads and 400 KB of f32 writes. On a CUDA device with options.prefetch
// (the default) batches are assembled ahead by a host thread into pinned
// memory and copied on a side stream (Note [DataLoader prefetch]); otherwise,
// and on the CPU, the batch is assembled when it is dereferenced (and moved
// with a synchronous .to(device)).
//
// Note [DataLoader prefetch]
// Goal: the copy of batch i+1 overlaps the GPU work of step i, and the host
// assembly of batch i+2 overlaps the host side of step i, without changing
// what the loop sees (same batches, same position(), same resuming).
//   - Who does what. One worker thread per loader does only host work: it
//     fills a pinned buffer (cudaHostAlloc) with batch k's normalised x and
//     its labels. Every CUDA call (allocation, events, cudaMemcpyAsync) is
//     made by the thread that dereferences the iterator, so no CUDA state is
//     shared between threads. (In cuda-emu, streams run their work at the
//     call: the "async" copy is a memmove by the dereferencing thread, and
//     the only overlap left is the worker's assembly.)
//   - Dereferencing batch i (the "consumer" stream C = current stream then):
//     (1) take batch i's device tensors, staged at the previous dereference
//     (or, on a miss, assemble and copy it now); (2) C waits on the event
//     recorded after its copy (no host wait); (3) wait for the worker to
//     finish batch i+1 (it had the whole of step i-1); (4) hand the pinned
//     buffer batch i was copied from to the worker for batch i+2, after
//     synchronising (host) on the copy_done of that copy, issued one
//     dereference earlier; (5) stage batch i+1: allocate its device tensors
//     on C, record event A on C, make the side stream S wait on A,
//     cudaMemcpyAsync pinned -> device on S, record copy_done on S.
//   - Why allocate on C and make S wait on A: the caching allocator pools
//     blocks per stream and hands C's freed blocks out again assuming C's
//     order. The new tensors belong to C's pool, so they are freed in C's
//     order; A makes S write only after everything queued on C before the
//     allocation, which may still use the reused block, has run.
//   - Two pinned buffers: one is read by the copy in flight, the other is
//     being filled. A buffer is refilled only after its copy's event has
//     completed (step (4)); by then the GPU has usually long finished it.
//   - Discarding. Prefetched work is keyed by (order generation, batch
//     index); set_epoch() starts a new generation. A dereference whose key
//     is not the staged one (after skip/set_epoch/set_position, a repeated
//     dereference, or a changed current stream) drops the staged batch: C
//     waits on its copy_done before the tensors are freed, so the next user
//     of those blocks (on C) runs after the copy into them. Nothing is
//     consumed ahead: position() moves
//     only on dereference, and the staged batch is a pure function of its
//     key. A new pass starts with a miss (the first batch is assembled and
//     copied on demand), so nothing crosses an epoch boundary.
//   - Errors in the worker (hg::Error or any exception) are kept with the
//     batch and rethrown by the dereference of that batch; position() then
//     stays at the batches actually handed out.
//   - Destruction joins the worker and synchronises on the copies that read
//     the pinned buffers before freeing them.
//   - Cost: one more batch lives on the device (the staged one), two pinned
//     buffers of one batch each, one thread, one stream.
// A CPU loader does not use a thread: its batches feed CPU kernels that
// already use every core, and there is no copy to hide.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace hg::data {

namespace detail {
struct BatchSource;
class Prefetcher;
}  // namespace detail

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
  // On a CUDA device: assemble ahead on a host thread into pinned memory and
  // copy on a side stream (Note [DataLoader prefetch]). Same batches either way.
  bool prefetch = true;
  // Data-parallel split, torch's DistributedSampler: each epoch's order (the
  // same on every rank: it depends only on seed and epoch) is cut into
  // num_replicas interleaved shards, and this loader visits shard `rank`:
  // positions rank, rank + num_replicas, ... With pad_shards the order is
  // first padded by repeating its beginning to a multiple of num_replicas
  // (every rank sees ceil(N / R) samples, a few twice); without, its tail is
  // dropped (floor(N / R) each). drop_last then applies to each shard's last
  // batch. num_samples() counts this rank's shard. hg::distributed sets
  // neither: pass rank and world size explicitly.
  int64_t num_replicas = 1;
  int64_t rank = 0;
  bool pad_shards = true;
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): DataLoaderOptions{}.set_pad_shards(...).set_batch_size(...).
  // clang-format off
  constexpr DataLoaderOptions& set_batch_size(int64_t v) { batch_size = v; return *this; }
  constexpr DataLoaderOptions& set_shuffle(bool v) { shuffle = v; return *this; }
  constexpr DataLoaderOptions& set_seed(uint64_t v) { seed = v; return *this; }
  constexpr DataLoaderOptions& set_drop_last(bool v) { drop_last = v; return *this; }
  constexpr DataLoaderOptions& set_mean(double v) { mean = v; return *this; }
  constexpr DataLoaderOptions& set_std(double v) { std = v; return *this; }
  constexpr DataLoaderOptions& set_limit(int64_t v) { limit = v; return *this; }
  constexpr DataLoaderOptions& set_flatten(bool v) { flatten = v; return *this; }
  constexpr DataLoaderOptions& set_device(Device v) { device = v; return *this; }
  constexpr DataLoaderOptions& set_dtype(DType v) { dtype = v; return *this; }
  constexpr DataLoaderOptions& set_prefetch(bool v) { prefetch = v; return *this; }
  constexpr DataLoaderOptions& set_num_replicas(int64_t v) { num_replicas = v; return *this; }
  constexpr DataLoaderOptions& set_rank(int64_t v) { rank = v; return *this; }
  constexpr DataLoaderOptions& set_pad_shards(bool v) { pad_shards = v; return *this; }
  // clang-format on
};

// Counters of the prefetcher (all zero on the CPU or with prefetch off).
struct PrefetchStats {
  int64_t staged = 0;     // batches whose host->device copy was issued one step ahead
  int64_t hits = 0;       // dereferences served by the staged batch
  int64_t misses = 0;     // dereferences that assembled and copied on demand
  int64_t discarded = 0;  // staged batches dropped (skip, set_epoch, stream change)
  uintptr_t copy_stream = 0;  // the side stream's cudaStream_t (0 before the first batch)
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
  // Move-only (iterators point at the loader: do not move it mid-pass).
  ~DataLoader();  // joins the prefetch thread, waits for its copies
  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Batch;

    Iterator() = default;
    Batch operator*() const;  // returns the batch; sets loader.position()
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
  // change position(). Always assembled on demand (never prefetched).
  Batch batch(int64_t index) const;

  int64_t num_batches() const;
  int64_t num_samples() const { return num_samples_; }          // after `limit`; this rank's shard
  int64_t dataset_samples() const { return dataset_samples_; }  // after `limit`, all shards
  int64_t batch_size() const { return options_.batch_size; }
  const DataLoaderOptions& options() const { return options_; }

  // Epoch / position state (Note [DataLoader order and resuming]).
  uint64_t epoch() const { return epoch_; }
  int64_t position() const { return position_; }
  void set_epoch(uint64_t epoch);         // selects epoch's order, position 0
  void skip(int64_t n_batches);           // position += n (checked <= num_batches())
  void set_position(int64_t batch_index); // absolute, 0..num_batches()

  // Sample indices of the current epoch in visiting order (size num_samples()).
  const std::vector<int64_t>& order() const { return *order_; }

  PrefetchStats prefetch_stats() const;

 private:
  void compute_order();
  void finish_epoch();
  bool uses_prefetch() const;
  Batch fetch(int64_t index);  // the iterator's dereference

  DataLoaderOptions options_;
  std::shared_ptr<const detail::BatchSource> source_;  // pixels, labels, LUT (immutable)
  int64_t num_samples_ = 0;                            // this rank's shard
  int64_t dataset_samples_ = 0;                        // after limit, before sharding
  uint64_t epoch_ = 0;
  int64_t position_ = 0;
  // Replaced (never modified) by compute_order, so a prefetch job can hold it.
  std::shared_ptr<const std::vector<int64_t>> order_;
  uint64_t order_generation_ = 0;  // bumped by compute_order: keys prefetched work
  std::unique_ptr<detail::Prefetcher> prefetcher_;  // created on first CUDA dereference
};

// The samples epoch `epoch` visits, in order, on options.rank (shuffled by
// (seed, epoch) when options.shuffle, then this rank's shard; Note
// [DataLoader order and resuming]): DataLoader's and DatasetLoader's order.
// `dataset_samples` counts the samples after `limit`.
std::vector<int64_t> epoch_order(int64_t dataset_samples, const DataLoaderOptions& options, uint64_t epoch);
// How many samples options.rank's shard holds (checks rank and num_replicas).
int64_t shard_samples(int64_t dataset_samples, const DataLoaderOptions& options);

// Unbiased-enough Fisher-Yates permutation of [0, n) from Philox at
// (seed, offset); exposed for tests and for datasets that shuffle themselves.
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, uint64_t offset);

}  // namespace hg::data

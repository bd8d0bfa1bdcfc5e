// DataLoader internals: the immutable batch source shared by the loader and
// its prefetcher, host batch assembly, and the CUDA prefetcher
// (Note [DataLoader prefetch] in data/dataloader.h). Not a public header.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "data/dataloader.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace hg::data::detail {

// What batches are made of. Built once by the DataLoader constructor and never
// modified, so the worker thread reads it without locking.
struct BatchSource {
  Tensor images;                  // u8 [N, ...], contiguous, CPU (keeps `pixels` alive)
  Tensor labels;                  // i64 [N], contiguous, CPU (keeps `label_data` alive)
  const uint8_t* pixels = nullptr;
  const int64_t* label_data = nullptr;
  Shape sample_shape;             // trailing dims of images
  int64_t sample_numel = 0;       // prod(sample_shape)
  int64_t batch_size = 0;
  bool flatten = true;
  DType dtype = kF32;
  std::array<double, 256> lut{};  // normalised value of each pixel byte

  Shape x_shape(int64_t count) const;  // [count, numel] or [count, dims...]
};

// The checked, host-side source of u8 images [N, ...] and i64 labels [N]
// (errors name `who`); batch_size is left for the caller.
std::shared_ptr<BatchSource> make_image_source(const char* who, const Tensor& images, const Tensor& labels, double mean,
                                               double std, bool flatten, DType dtype);

// The (epoch, position) rules of both loaders (Note [DataLoader order and
// resuming] in data/dataloader.h); errors name `who` ("DataLoader").
int64_t batches_per_epoch(int64_t samples, int64_t batch_size, bool drop_last);
// position + n_batches, checked to stay within the epoch's `batches`.
int64_t skip_position(const char* who, int64_t position, int64_t n_batches, int64_t batches, uint64_t epoch);
// batch_index, checked to be in [0, batches].
int64_t checked_position(const char* who, int64_t batch_index, int64_t batches);

// Writes the batch of samples[0 .. count) into x (count * sample_numel values
// of source.dtype) and y (count labels). Host memory only; thread-safe.
void assemble_batch(const BatchSource& source, const int64_t* samples, int64_t count, void* x,
                    int64_t* y);

// Test hook: the worker thread throws hg::Error when it assembles batch
// `index` (any epoch); -1 (the default) turns it off.
void set_prefetch_fault_for_testing(int64_t index);

#if defined(HG_WITH_CUDA)

class Prefetcher {
 public:
  using Order = std::shared_ptr<const std::vector<int64_t>>;

  Prefetcher(std::shared_ptr<const BatchSource> source, Device device);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Batch `index` of `order` (whose identity is `generation`), on the device
  // and ordered before later work on the current stream; then stages batch
  // index + 1 (if < num_batches). Rethrows an error of the worker for this batch.
  Batch get(uint64_t generation, const Order& order, int64_t index, int64_t num_batches);

  const PrefetchStats& stats() const { return stats_; }

 private:
  struct Key {
    uint64_t generation = 0;
    int64_t index = -1;
    friend bool operator==(const Key&, const Key&) = default;
  };
  enum class SlotState { kEmpty, kQueued, kAssembling, kReady, kFailed };
  struct Slot {
    cuda::PinnedBuffer pinned;  // x bytes, then the labels at y_offset_
    // Recorded on the side stream after the last copy that read `pinned`.
    cuda::Event copy_done{/*enable_timing=*/false};
    // Guarded by mutex_:
    SlotState state = SlotState::kEmpty;
    Key key;
    Order order;
    int64_t count = 0;  // samples in the batch
    std::exception_ptr error;
  };
  // A batch whose copy was issued one dereference early.
  struct Staged {
    Key key;
    Batch batch;
    cuda::Stream consumer;  // the stream its memory was allocated on
    int slot = 0;           // the pinned buffer it was copied from
  };

  void worker_loop();
  int find_slot(const Key& key);  // -1 if no slot holds `key`
  // Makes `slot` empty: drops a queued job, waits for one being assembled.
  void reclaim(int slot);
  // Hands `slot` to the worker for batch `key` (after its last copy finished).
  void enqueue(int slot, const Key& key, const Order& order, int64_t num_samples);
  SlotState wait_done(int slot);
  // Issues the copy of a ready slot into new tensors allocated on `consumer`.
  Batch copy_to_device(int slot, const cuda::Stream& consumer);
  void discard_staged();
  void stage(const Key& key, const Order& order, int64_t num_batches, int free_slot,
             const cuda::Stream& consumer);

  std::shared_ptr<const BatchSource> source_;
  Device device_;
  size_t y_offset_ = 0;  // labels' byte offset in a pinned buffer
  cuda::Stream side_;
  cuda::Event alloc_ready_{/*enable_timing=*/false};  // recorded on the consumer stream
  std::array<Slot, 2> slots_;
  std::optional<Staged> staged_;
  PrefetchStats stats_;

  std::mutex mutex_;
  std::condition_variable cv_;  // slot state changes and new jobs
  std::deque<int> queue_;       // queued slots, oldest first
  bool stop_ = false;
  std::thread worker_;          // last: starts after everything above exists
};

#else

class Prefetcher {};  // no CUDA backend: never created

#endif

}  // namespace hg::data::detail

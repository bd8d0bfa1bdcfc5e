// The CUDA prefetcher of the DataLoader: a host worker thread assembles batches
// into two pinned buffers, the dereferencing thread copies them to the device
// on a side stream one step ahead (Note [DataLoader prefetch] in dataloader.h).
#include "data/prefetch.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "core/error.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/cuda_check.h"
#endif

namespace hg::data::detail {
namespace {

std::atomic<int64_t> g_fault_index{-1};

}  // namespace

void set_prefetch_fault_for_testing(int64_t index) { g_fault_index.store(index); }

#if defined(HG_WITH_CUDA)

Prefetcher::Prefetcher(std::shared_ptr<const BatchSource> source, Device device)
    : source_(std::move(source)), device_(device) {
  HG_CHECK(device_.is_cuda(), "DataLoader prefetch needs a CUDA device, got ", device_.str());
  cuda::DeviceGuard guard(device_.index);
  side_ = cuda::Stream::create(device_.index);
  // One pinned buffer holds the largest batch: x, then the labels 256-byte aligned.
  const size_t rows = static_cast<size_t>(source_->batch_size);
  const size_t x_bytes = rows * static_cast<size_t>(source_->sample_numel) *
                         dtype_size(source_->dtype);
  y_offset_ = (x_bytes + 255) / 256 * 256;
  const size_t total = y_offset_ + rows * sizeof(int64_t);
  for (Slot& slot : slots_) slot.pinned = cuda::PinnedBuffer(total);
  stats_.copy_stream = reinterpret_cast<uintptr_t>(side_.handle());
  worker_ = std::thread([this] { worker_loop(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  // The pinned buffers may still be read by queued copies: wait for them
  // before PinnedBuffer frees the memory. Failures cannot be reported here.
  try {
    cuda::DeviceGuard guard(device_.index);
    discard_staged();
    for (Slot& slot : slots_) slot.copy_done.synchronize();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw
  }
}

// ---- worker thread: host work only ----------------------------------------------

void Prefetcher::worker_loop() {
  for (;;) {
    int index = 0;
    Key key;
    Order order;
    int64_t count = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      index = queue_.front();
      queue_.pop_front();
      Slot& slot = slots_[static_cast<size_t>(index)];
      slot.state = SlotState::kAssembling;
      key = slot.key;
      order = slot.order;
      count = slot.count;
    }
    std::exception_ptr error;
    try {
      HG_CHECK(key.index != g_fault_index.load(), "DataLoader prefetch: injected fault at batch ",
               key.index, " (set_prefetch_fault_for_testing)");
      auto* bytes = static_cast<unsigned char*>(slots_[static_cast<size_t>(index)].pinned.data());
      const int64_t first = key.index * source_->batch_size;
      assemble_batch(*source_, order->data() + first, count, bytes,
                     reinterpret_cast<int64_t*>(bytes + y_offset_));
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Slot& slot = slots_[static_cast<size_t>(index)];
      slot.state = error ? SlotState::kFailed : SlotState::kReady;
      slot.error = error;
    }
    cv_.notify_all();
  }
}

// ---- slots (consumer thread) -------------------------------------------------------

int Prefetcher::find_slot(const Key& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state != SlotState::kEmpty && slots_[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

void Prefetcher::reclaim(int index) {
  std::unique_lock<std::mutex> lock(mutex_);
  Slot& slot = slots_[static_cast<size_t>(index)];
  // A batch being assembled is not interrupted: it takes well under a millisecond.
  cv_.wait(lock, [&] { return slot.state != SlotState::kAssembling; });
  if (slot.state == SlotState::kQueued) std::erase(queue_, index);
  slot.state = SlotState::kEmpty;
  slot.key = Key{};
  slot.order.reset();
  slot.error = nullptr;
}

void Prefetcher::enqueue(int index, const Key& key, const Order& order, int64_t num_samples) {
  Slot& slot = slots_[static_cast<size_t>(index)];
  // The copy that last read these pinned bytes must be done before the worker
  // overwrites them. It was issued one dereference ago (or is a discarded one).
  slot.copy_done.synchronize();
  const int64_t first = key.index * source_->batch_size;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HG_DCHECK(slot.state == SlotState::kEmpty, "prefetch slot reused while busy");
    slot.state = SlotState::kQueued;
    slot.key = key;
    slot.order = order;
    slot.count = std::min(source_->batch_size, num_samples - first);
    slot.error = nullptr;
    queue_.push_back(index);
  }
  cv_.notify_all();
}

Prefetcher::SlotState Prefetcher::wait_done(int index) {
  std::unique_lock<std::mutex> lock(mutex_);
  Slot& slot = slots_[static_cast<size_t>(index)];
  cv_.wait(lock, [&] {
    return slot.state == SlotState::kReady || slot.state == SlotState::kFailed;
  });
  return slot.state;
}

// ---- device side (consumer thread) --------------------------------------------------

Batch Prefetcher::copy_to_device(int index, const cuda::Stream& consumer) {
  Slot& slot = slots_[static_cast<size_t>(index)];
  // Allocated while `consumer` is current: the blocks belong to its pool.
  Batch out{empty(source_->x_shape(slot.count), {.dtype = source_->dtype, .device = device_}),
            empty({slot.count}, {.dtype = kI64, .device = device_})};
  // The side stream writes only after the consumer's queued work, which may
  // still use a reused block, has run.
  alloc_ready_.record(consumer);
  side_.wait(alloc_ready_);
  const auto* bytes = static_cast<const unsigned char*>(slot.pinned.data());
  HG_CUDA_CHECK(cudaMemcpyAsync(out.x.data_ptr(), bytes, out.x.nbytes(), cudaMemcpyHostToDevice,
                                side_.handle()));
  HG_CUDA_CHECK(cudaMemcpyAsync(out.y.data_ptr(), bytes + y_offset_, out.y.nbytes(),
                                cudaMemcpyHostToDevice, side_.handle()));
  slot.copy_done.record(side_);
  return out;
}

void Prefetcher::discard_staged() {
  if (!staged_) return;
  // The staged tensors go back to the consumer's pool when dropped; the next
  // user of the blocks runs there, so order it after the copy into them.
  staged_->consumer.wait(slots_[static_cast<size_t>(staged_->slot)].copy_done);
  staged_.reset();
  ++stats_.discarded;
}

void Prefetcher::stage(const Key& key, const Order& order, int64_t num_batches, int free_slot,
                       const cuda::Stream& consumer) {
  const int64_t num_samples = static_cast<int64_t>(order->size());
  int index = find_slot(key);
  if (index < 0) {  // not prefetched (a new pass, or the pipeline was drained): do it now
    index = 1 - free_slot;
    reclaim(index);
    enqueue(index, key, order, num_samples);
  }
  // Normally assembled during the previous step. A failure stays in the slot
  // and is rethrown when this batch is dereferenced.
  if (wait_done(index) == SlotState::kFailed) return;
  // The worker refills the other buffer (the current batch's, copied one
  // dereference ago) with the batch after this one while we issue the copy.
  if (key.index + 1 < num_batches) {
    const Key after{key.generation, key.index + 1};
    if (find_slot(after) < 0) {
      reclaim(free_slot);
      enqueue(free_slot, after, order, num_samples);
    }
  }
  staged_ = Staged{key, copy_to_device(index, consumer), consumer, index};
  ++stats_.staged;
}

Batch Prefetcher::get(uint64_t generation, const Order& order, int64_t index,
                      int64_t num_batches) {
  cuda::DeviceGuard guard(device_.index);
  const cuda::Stream consumer = cuda::current_stream(device_.index);
  const Key key{generation, index};
  Batch out;
  int slot = -1;
  if (staged_ && staged_->key == key && staged_->consumer == consumer) {
    out = std::move(staged_->batch);
    slot = staged_->slot;
    staged_.reset();
    ++stats_.hits;
  } else {
    discard_staged();
    ++stats_.misses;
    slot = find_slot(key);
    if (slot < 0) {
      // Take a slot that is neither busy nor holding the next batch, if one is.
      const Key next{generation, index + 1};
      int best_score = 4;
      for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
        std::lock_guard<std::mutex> lock(mutex_);
        const Slot& s = slots_[static_cast<size_t>(i)];
        const int score = (s.state != SlotState::kEmpty && s.key == next ? 2 : 0) +
                          (s.state == SlotState::kAssembling ? 1 : 0);
        if (score < best_score) {
          best_score = score;
          slot = i;
        }
      }
      reclaim(slot);
      enqueue(slot, key, order, static_cast<int64_t>(order->size()));
    }
    if (wait_done(slot) == SlotState::kFailed) {
      std::exception_ptr error;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        error = std::exchange(slots_[static_cast<size_t>(slot)].error, nullptr);
      }
      reclaim(slot);
      std::rethrow_exception(error);
    }
    out = copy_to_device(slot, consumer);
  }
  // Work queued on the consumer from now on sees the copied bytes.
  consumer.wait(slots_[static_cast<size_t>(slot)].copy_done);
  if (index + 1 < num_batches) {
    stage(Key{generation, index + 1}, order, num_batches, slot, consumer);
  }
  return out;
}

#endif  // HG_WITH_CUDA

}  // namespace hg::data::detail

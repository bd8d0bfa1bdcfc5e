// hg::Storage — a reference-counted block of bytes on one device, shared by all
// tensors that view it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "core/allocator.h"
#include "core/device.h"

namespace hg {

// Invariants: data is nullptr iff nbytes == 0; the memory came from
// `allocator` and is released through it exactly once, when the last Storage
// handle goes away. An external storage (make_external_storage) wraps memory
// another library owns: its `release` runs exactly once instead, when the last
// handle goes away. The version counter counts in-place writes to any view of
// this storage; autograd compares it to detect a saved tensor that changed.
class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device);  // allocates (uninitialised)
  // Wraps nbytes (> 0) at data (not null) on device; release() gives them back.
  StorageImpl(void* data, size_t nbytes, Device device, std::function<void()> release);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  std::function<void()> release_;  // set for external memory only
  std::atomic<uint64_t> version_{0};
};

using Storage = std::shared_ptr<StorageImpl>;

inline Storage make_storage(size_t nbytes, Device device) {
  return std::make_shared<StorageImpl>(nbytes, device);
}

// Memory owned elsewhere (e.g. a DLPack producer's), viewed without a copy;
// release runs once, when the last Storage handle goes away. Throws hg::Error
// (without calling release) on a null pointer, nbytes == 0 or a missing device.
inline Storage make_external_storage(void* data, size_t nbytes, Device device, std::function<void()> release) {
  return std::make_shared<StorageImpl>(data, nbytes, device, std::move(release));
}

}  // namespace hg

// hg::Storage — a reference-counted block of bytes on one device, shared by all
// tensors that view it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"

namespace hg {

// Invariants: data is nullptr iff nbytes == 0; the memory came from
// `allocator` and is released through it exactly once, when the last Storage
// handle goes away. The version counter counts in-place writes to any view of
// this storage; autograd compares it to detect a saved tensor that changed.
class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device);  // allocates (uninitialised)
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
  std::atomic<uint64_t> version_{0};
};

using Storage = std::shared_ptr<StorageImpl>;

inline Storage make_storage(size_t nbytes, Device device) {
  return std::make_shared<StorageImpl>(nbytes, device);
}

}  // namespace hg

#include "core/storage.h"

#include <functional>
#include <utility>

#include "core/error.h"

namespace hg {

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  check_device(device);
  allocator_ = &device_hooks(device.type).allocator();
  data_ = allocator_->allocate(nbytes, device);
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, std::function<void()> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {
  HG_CHECK(data != nullptr && nbytes > 0 && release_,
           "external storage needs a non-null pointer, nbytes > 0 and a release function");
  check_device(device);
}

StorageImpl::~StorageImpl() {
  if (release_) {
    release_();
  } else if (data_ != nullptr) {
    allocator_->deallocate(data_, device_);
  }
}

}  // namespace hg

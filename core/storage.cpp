#include "core/storage.h"

namespace hg {

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  check_device(device);
  allocator_ = &device_hooks(device.type).allocator();
  data_ = allocator_->allocate(nbytes, device);
}

StorageImpl::~StorageImpl() {
  if (data_ != nullptr) allocator_->deallocate(data_, device_);
}

}  // namespace hg

#include "runtime/emu/stack_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace hg::emu {

StackPool::StackPool(size_t usable_bytes) {
  page_bytes_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  usable_bytes_ = (usable_bytes + page_bytes_ - 1) / page_bytes_ * page_bytes_;
}

StackPool::~StackPool() {
  for (void* base : all_) ::munmap(base, usable_bytes_ + page_bytes_);
}

boost::context::stack_context StackPool::allocate() {
  void* base;
  if (!free_.empty()) {
    base = free_.back();
    free_.pop_back();
  } else {
    const size_t total = usable_bytes_ + page_bytes_;
    base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    HG_CHECK(base != MAP_FAILED, "cuda-emu: cannot map a ", usable_bytes_ / 1024, " KiB fiber stack (",
             std::strerror(errno), "); lower HG_EMU_STACK_KB or the block size");
    HG_CHECK(::mprotect(base, page_bytes_, PROT_NONE) == 0, "cuda-emu: mprotect of a stack guard failed");
    all_.push_back(base);
  }
  boost::context::stack_context stack;
  stack.size = usable_bytes_;
  stack.sp = static_cast<char*>(base) + page_bytes_ + usable_bytes_;  // stacks grow down
  return stack;
}

void StackPool::deallocate(boost::context::stack_context& stack) noexcept {
  char* bottom = static_cast<char*>(stack.sp) - usable_bytes_;
  free_.push_back(bottom - page_bytes_);
}

void StackPool::clear_sanitizer_state() {
#if defined(__SANITIZE_ADDRESS__)
  // Not on every deallocate: unpoisoning 512 KiB of stack costs 64 KiB of
  // shadow writes, which made a 10^5-thread launch take seconds. Fibers that
  // return normally leave no poisoned frames behind; those unwound after a
  // failure might, so the engine calls this after a failed block.
  for (void* base : free_) ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(base) + page_bytes_, usable_bytes_);
#endif
}

}  // namespace hg::emu

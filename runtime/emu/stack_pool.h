// Fiber stacks for the cuda-emu engine, pooled so that a launch of 10^5 CUDA
// threads maps no memory after the first block: a 1024-thread block needs 1024
// live stacks, and every later block (and launch) reuses them.
#pragma once

#include <cstddef>
#include <vector>

#include <boost/context/stack_context.hpp>

namespace hg::emu {

class StackPool {
 public:
  // usable_bytes: stack per fiber; each stack also gets a PROT_NONE guard page
  // below it, so a kernel that overflows its stack faults instead of silently
  // corrupting the neighbouring fiber.
  explicit StackPool(size_t usable_bytes);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  boost::context::stack_context allocate();
  void deallocate(boost::context::stack_context& stack) noexcept;
  size_t stack_bytes() const { return usable_bytes_; }
  // Under AddressSanitizer: forget stack poisoning left in the free stacks.
  void clear_sanitizer_state();

 private:
  size_t usable_bytes_;
  size_t page_bytes_;
  std::vector<void*> free_;  // mapping bases (guard page first)
  std::vector<void*> all_;
};

// boost::context StackAllocator over a pool (the pool outlives every fiber).
struct PooledStackAllocator {
  StackPool* pool;
  boost::context::stack_context allocate() { return pool->allocate(); }
  void deallocate(boost::context::stack_context& stack) noexcept { pool->deallocate(stack); }
};

}  // namespace hg::emu

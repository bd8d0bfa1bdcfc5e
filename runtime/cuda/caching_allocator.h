// A caching allocator for CUDA device memory, in the manner of PyTorch's.
//
// Note [Caching allocator]
// cudaMalloc and cudaFree are slow (cudaFree synchronises the device), and a
// training step allocates and frees the same sizes again and again. So freed
// blocks are kept and handed out again:
//   - requests are rounded up to multiples of 512 bytes;
//   - small requests (<= 1 MiB) come from 2 MiB segments, large ones from
//     20 MiB segments (up to 10 MiB) or segments rounded up to 2 MiB; the two
//     pools never share segments, so small tensors do not fragment big ones;
//   - the free block that fits best (smallest adequate size) is reused, split
//     when the rest is worth keeping (>= 512 B in the small pool, > 1 MiB in
//     the large), and on free merged with free neighbours of its segment;
//   - a block freed on stream S is reused only for allocations on S: work on S
//     is ordered, so the next user cannot overtake the previous one. Memory
//     used on several streams needs a synchronisation by the caller;
//   - when cudaMalloc fails, every cached segment with nothing in use is
//     released and the cudaMalloc retried once; if that fails too, hg::Error
//     says what was requested, what is allocated and reserved, and the
//     device's capacity.
// Invariants: every segment is covered exactly by a doubly linked list of
// blocks in address order; no two adjacent blocks are both free; free blocks
// are in exactly one pool set; allocated blocks are in the active map.
//
// HG_CUDA_ALLOC=nocache turns caching off: every allocation is its own
// cudaMalloc of exactly the requested size and every free a cudaFree, so
// AddressSanitizer (emu build) and compute-sanitizer see each buffer's true
// bounds. In the emu build with caching on, cached memory is additionally
// poisoned for AddressSanitizer and refilled with NaN bytes on reuse.
//
// Thread-safe: one mutex guards all state.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

namespace hg::cuda {

inline constexpr size_t kMinBlockSize = 512;                // rounding unit
inline constexpr size_t kSmallSize = size_t{1} << 20;       // largest "small" request
inline constexpr size_t kSmallBuffer = size_t{2} << 20;     // segment for small requests
inline constexpr size_t kLargeBuffer = size_t{20} << 20;    // segment for 1-10 MiB requests
inline constexpr size_t kMinLargeAlloc = size_t{10} << 20;  // above: segment = rounded size
inline constexpr size_t kRoundLarge = size_t{2} << 20;      // rounding of big segments

// Per-device counters. Bytes are rounded block sizes unless named "requested".
struct AllocatorStats {
  size_t allocated_bytes = 0;       // in blocks handed out and not yet freed
  size_t requested_bytes = 0;       // what the callers of those blocks asked for
  size_t reserved_bytes = 0;        // held from cudaMalloc (in use + cached)
  size_t peak_allocated_bytes = 0;  // since construction or reset_peak_stats
  size_t peak_reserved_bytes = 0;
  size_t active_blocks = 0;         // blocks handed out and not yet freed
  size_t segments = 0;              // live cudaMalloc allocations
  uint64_t num_allocs = 0;          // allocate() calls that returned memory
  uint64_t num_frees = 0;           // free() calls that released memory
  uint64_t num_device_mallocs = 0;  // successful cudaMalloc calls
  uint64_t num_device_frees = 0;    // cudaFree calls
  uint64_t num_alloc_retries = 0;   // cudaMalloc failed, cache released, retried
  uint64_t num_ooms = 0;            // retry failed too: hg::Error thrown
};

struct CachingAllocatorConfig {
  bool caching = true;
  // HG_CUDA_ALLOC: unset, "" or "cache" -> caching; "nocache" -> no caching.
  // Any other value throws hg::Error naming the accepted values.
  static CachingAllocatorConfig from_env();
};

class CachingAllocator {
 public:
  explicit CachingAllocator(CachingAllocatorConfig config = {});
  // Releases every segment. Blocks still allocated become invalid.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // nbytes of device memory on `device`, for use on `stream`; nullptr for 0
  // bytes. Throws hg::Error when the device is out of memory (see above).
  void* allocate(size_t nbytes, int device, cudaStream_t stream);
  // On the current device and its current stream.
  void* allocate(size_t nbytes);
  // Returns a pointer from allocate() (nullptr is ignored). Throws hg::Error
  // for a pointer this allocator does not own (a double free, or memory from
  // elsewhere).
  void free(void* ptr);
  // Releases all cached segments that have nothing in use (every device).
  void empty_cache();

  AllocatorStats stats(int device) const;
  // Sets the peaks to the current values.
  void reset_peak_stats(int device);
  bool caching_enabled() const { return config_.caching; }

 private:
  struct Block;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;
  struct DeviceState {
    Pool small_pool;
    Pool large_pool;
    AllocatorStats stats;
  };

  DeviceState& device_state(int device);
  Block* find_free_block(Pool& pool, cudaStream_t stream, size_t size);
  // nullptr on cudaErrorMemoryAllocation; throws for any other error.
  void* device_malloc(int device, size_t size);
  void release_cached_segments(int device);
  void free_segment(Block* block);
  [[noreturn]] void throw_out_of_memory(int device, size_t requested);

  CachingAllocatorConfig config_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::unordered_map<void*, Block*> active_;  // allocated blocks by address
};

// The process-wide allocator used for tensors (configured from the
// environment on first use; never destroyed, so tensors freed during static
// destruction are safe).
CachingAllocator& caching_allocator();
// hg::Allocator for Device::cuda(i) that allocates on the thread's current
// stream of device i through caching_allocator(). Used by the DeviceHooks.
Allocator& cuda_allocator();

// Shorthands for caching_allocator(); `device` < 0 means the current device.
void empty_cache();
AllocatorStats memory_stats(int device = -1);
void reset_peak_memory_stats(int device = -1);
// "1.50 GiB", "512 B": for messages.
std::string format_bytes(size_t bytes);

}  // namespace hg::cuda

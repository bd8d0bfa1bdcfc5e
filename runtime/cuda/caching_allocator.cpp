// The caching device allocator (see Note [Caching allocator] in the header).
#include "runtime/cuda/caching_allocator.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_limits.h"
#include "runtime/cuda/runtime.h"

// In the emu build device memory is host heap memory, so AddressSanitizer can
// watch the cache too: free blocks and the slack after each request are
// poisoned, so a kernel that overruns its buffer into a neighbouring cached
// block is reported even though the segment itself is one heap allocation.
#if defined(HG_CUDA_EMU) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define HG_EMU_ASAN 1
#endif

namespace hg::cuda {
namespace {

void poison(void* ptr, size_t n) {
#if defined(HG_EMU_ASAN)
  ASAN_POISON_MEMORY_REGION(ptr, n);
#else
  (void)ptr;
  (void)n;
#endif
}

void unpoison(void* ptr, size_t n) {
#if defined(HG_EMU_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(ptr, n);
#else
  (void)ptr;
  (void)n;
#endif
}

size_t round_size(size_t nbytes) {
  return nbytes < kMinBlockSize ? kMinBlockSize : (nbytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

// cudaMalloc size for a block of `size` bytes (already rounded).
size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

void update_peaks(AllocatorStats& s) {
  if (s.allocated_bytes > s.peak_allocated_bytes) s.peak_allocated_bytes = s.allocated_bytes;
  if (s.reserved_bytes > s.peak_reserved_bytes) s.peak_reserved_bytes = s.reserved_bytes;
}

}  // namespace

struct CachingAllocator::Block {
  int device = 0;
  cudaStream_t stream = nullptr;  // the only stream that may reuse it
  size_t size = 0;                // bytes of the segment this block covers
  size_t requested = 0;           // caller's nbytes while allocated
  char* ptr = nullptr;
  bool allocated = false;
  bool small = false;     // which pool: small (<= 1 MiB) or large
  Block* prev = nullptr;  // neighbours in the same segment
  Block* next = nullptr;
};

// Pools order free blocks by (stream, size, address): lower_bound on
// (stream, size) is the best fit for that stream.
bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  const auto sa = reinterpret_cast<uintptr_t>(a->stream);
  const auto sb = reinterpret_cast<uintptr_t>(b->stream);
  if (sa != sb) return sa < sb;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

CachingAllocatorConfig CachingAllocatorConfig::from_env() {
  CachingAllocatorConfig config;
  const char* value = std::getenv("HG_CUDA_ALLOC");
  const std::string_view text = value != nullptr ? value : "";
  HG_CHECK(text.empty() || text == "cache" || text == "nocache", "HG_CUDA_ALLOC='", text,
           "' is not understood; use HG_CUDA_ALLOC=nocache (one cudaMalloc per tensor, for "
           "sanitizers) or HG_CUDA_ALLOC=cache (the default), or unset it");
  config.caching = text != "nocache";
  return config;
}

CachingAllocator::CachingAllocator(CachingAllocatorConfig config) : config_(config) {}

CachingAllocator::~CachingAllocator() {
  // Gather every block, free each segment through its first block, delete all.
  std::vector<Block*> blocks;
  for (auto& ds : devices_) {
    if (!ds) continue;
    blocks.insert(blocks.end(), ds->small_pool.begin(), ds->small_pool.end());
    blocks.insert(blocks.end(), ds->large_pool.begin(), ds->large_pool.end());
  }
  for (auto& [ptr, block] : active_) blocks.push_back(block);
  for (Block* block : blocks) {
    if (block->prev != nullptr) continue;
    size_t bytes = 0;
    for (Block* b = block; b != nullptr; b = b->next) bytes += b->size;
    unpoison(block->ptr, bytes);
    // Errors during teardown (e.g. the runtime already unloading) are moot.
    if (cudaFree(block->ptr) != cudaSuccess) (void)cudaGetLastError();
  }
  for (Block* block : blocks) delete block;
}

CachingAllocator::DeviceState& CachingAllocator::device_state(int device) {
  HG_CHECK(device >= 0 && device < kMaxDevices, "CachingAllocator: invalid device index ", device);
  if (devices_.size() <= static_cast<size_t>(device)) devices_.resize(device + 1);
  if (!devices_[device]) devices_[device] = std::make_unique<DeviceState>();
  return *devices_[device];
}

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, cudaStream_t stream, size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

void* CachingAllocator::device_malloc(int device, size_t size) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, size);
  if (status == cudaErrorMemoryAllocation) {
    // Expected and handled by the caller (retry or a descriptive error): do
    // not leave it for the next launch check to report.
    (void)cudaGetLastError();
    return nullptr;
  }
  HG_CUDA_CHECK(status);
  DeviceState& ds = device_state(device);
  ds.stats.reserved_bytes += size;
  ++ds.stats.segments;
  ++ds.stats.num_device_mallocs;
  update_peaks(ds.stats);
  return ptr;
}

void CachingAllocator::free_segment(Block* block) {
  DeviceState& ds = device_state(block->device);
  unpoison(block->ptr, block->size);
  HG_CUDA_CHECK(cudaFree(block->ptr));
  ds.stats.reserved_bytes -= block->size;
  --ds.stats.segments;
  ++ds.stats.num_device_frees;
  delete block;
}

void CachingAllocator::release_cached_segments(int device) {
  DeviceState& ds = device_state(device);
  for (Pool* pool : {&ds.small_pool, &ds.large_pool}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* block = *it;
      // Only whole segments go back: a free block with a neighbour is part of
      // a segment that still has something in use.
      if (block->prev == nullptr && block->next == nullptr) {
        it = pool->erase(it);
        free_segment(block);
      } else {
        ++it;
      }
    }
  }
}

void* CachingAllocator::allocate(size_t nbytes) {
  const int device = current_device();
  return allocate(nbytes, device, current_stream(device).handle());
}

void* CachingAllocator::allocate(size_t nbytes, int device, cudaStream_t stream) {
  if (nbytes == 0) return nullptr;
  HG_CHECK(nbytes <= (size_t{1} << 50), "CUDA allocation of ", nbytes,
           " bytes is impossibly large; check the tensor sizes");
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& ds = device_state(device);

  Block* block = nullptr;
  if (!config_.caching) {
    // Exactly nbytes, so sanitizers see the buffer's true end.
    void* ptr = device_malloc(device, nbytes);
    if (ptr == nullptr) {
      ++ds.stats.num_ooms;
      throw_out_of_memory(device, nbytes);
    }
    block = new Block;
    block->device = device;
    block->stream = stream;
    block->size = nbytes;
    block->ptr = static_cast<char*>(ptr);
  } else {
    const size_t size = round_size(nbytes);
    const bool small = size <= kSmallSize;
    Pool& pool = small ? ds.small_pool : ds.large_pool;
    block = find_free_block(pool, stream, size);
    if (block == nullptr) {
      const size_t bytes = segment_size(size);
      void* ptr = device_malloc(device, bytes);
      if (ptr == nullptr) {
        // Cached segments of any stream may be what stands in the way.
        ++ds.stats.num_alloc_retries;
        release_cached_segments(device);
        ptr = device_malloc(device, bytes);
      }
      if (ptr == nullptr) {
        ++ds.stats.num_ooms;
        throw_out_of_memory(device, nbytes);
      }
      poison(ptr, bytes);
      block = new Block;
      block->device = device;
      block->stream = stream;
      block->size = bytes;
      block->ptr = static_cast<char*>(ptr);
      block->small = small;
    }
    const size_t remaining = block->size - size;
    if (small ? remaining >= kMinBlockSize : remaining > kSmallSize) {
      auto* rest = new Block;
      rest->device = device;
      rest->stream = stream;
      rest->size = remaining;
      rest->ptr = block->ptr + size;
      rest->small = small;
      rest->prev = block;
      rest->next = block->next;
      if (block->next != nullptr) block->next->prev = rest;
      block->next = rest;
      block->size = size;
      pool.insert(rest);
    }
  }

  block->allocated = true;
  block->requested = nbytes;
  active_[block->ptr] = block;
  ds.stats.allocated_bytes += block->size;
  ds.stats.requested_bytes += nbytes;
  ++ds.stats.active_blocks;
  ++ds.stats.num_allocs;
  update_peaks(ds.stats);
  unpoison(block->ptr, nbytes);
#if defined(HG_CUDA_EMU)
  // Reused blocks hold the previous tensor's bytes; refill them with NaN so
  // reading memory nobody wrote is as visible as with a fresh cudaMalloc.
  HG_CUDA_CHECK(cudaMemsetAsync(block->ptr, 0xFF, nbytes, stream));
#endif
  return block->ptr;
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = active_.find(ptr);
  HG_CHECK(it != active_.end(), "CachingAllocator::free: ", ptr,
           " was not allocated by this allocator or was already freed (double free)");
  Block* block = it->second;
  active_.erase(it);
  DeviceState& ds = device_state(block->device);
  ds.stats.allocated_bytes -= block->size;
  ds.stats.requested_bytes -= block->requested;
  --ds.stats.active_blocks;
  ++ds.stats.num_frees;
  if (!config_.caching) {
    free_segment(block);
    return;
  }
  block->allocated = false;
  block->requested = 0;
  poison(block->ptr, block->size);
  Pool& pool = block->small ? ds.small_pool : ds.large_pool;
  // Merge with free neighbours (erase them from the pool before their keys
  // change), so the segment can become one free block again.
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    pool.erase(prev);
    block->ptr = prev->ptr;
    block->size += prev->size;
    block->prev = prev->prev;
    if (block->prev != nullptr) block->prev->next = block;
    delete prev;
  }
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t device = 0; device < devices_.size(); ++device) {
    if (devices_[device]) release_cached_segments(static_cast<int>(device));
  }
}

AllocatorStats CachingAllocator::stats(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || static_cast<size_t>(device) >= devices_.size() || !devices_[device]) {
    return {};
  }
  return devices_[device]->stats;
}

void CachingAllocator::reset_peak_stats(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats& s = device_state(device).stats;
  s.peak_allocated_bytes = s.allocated_bytes;
  s.peak_reserved_bytes = s.reserved_bytes;
}

void CachingAllocator::throw_out_of_memory(int device, size_t requested) {
  const AllocatorStats& s = device_state(device).stats;
  size_t free_bytes = 0, total_bytes = 0;
  {
    DeviceGuard guard(device);
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
  }
  HG_FAIL("CUDA out of memory: tried to allocate ", format_bytes(requested), " on cuda:", device,
          config_.caching ? " (after releasing the allocator's cache and retrying)" : "", ". The device has ",
          format_bytes(total_bytes), " capacity, ", format_bytes(free_bytes), " free; halfgrad holds ",
          format_bytes(s.allocated_bytes), " allocated by tensors and ", format_bytes(s.reserved_bytes),
          " reserved by the caching allocator. Reduce the batch size (or the model size), "
          "free tensors you no longer need, or call hg::cuda::empty_cache() if another "
          "allocator or process needs the cached memory.");
}

std::string format_bytes(size_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f %s", value, kUnits[unit]);
  return text;
}

// ---- the process-wide instance --------------------------------------------------

CachingAllocator& caching_allocator() {
  // Immortal on purpose: tensors destroyed by other static destructors may
  // free into it at exit. Its memory stays reachable, so leak checkers are quiet.
  static CachingAllocator* allocator = new CachingAllocator(CachingAllocatorConfig::from_env());
  return *allocator;
}

namespace {

class CudaTensorAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    HG_CHECK(device.is_cuda(), "cuda_allocator() asked for memory on ", device);
    return caching_allocator().allocate(nbytes, device.index, current_stream(device.index).handle());
  }
  void deallocate(void* ptr, Device) override { caching_allocator().free(ptr); }
};

int resolve(int device) { return device < 0 ? current_device() : device; }

}  // namespace

Allocator& cuda_allocator() {
  static CudaTensorAllocator allocator;
  return allocator;
}

void empty_cache() { caching_allocator().empty_cache(); }

AllocatorStats memory_stats(int device) { return caching_allocator().stats(resolve(device)); }

void reset_peak_memory_stats(int device) { caching_allocator().reset_peak_stats(resolve(device)); }

}  // namespace hg::cuda

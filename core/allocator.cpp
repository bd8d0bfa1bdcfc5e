#include "core/allocator.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include <unistd.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/error.h"

// GCC defines __SANITIZE_ADDRESS__ under -fsanitize=address; clang (the
// fuzzers' build) answers __has_feature(address_sanitizer).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HG_HAS_ASAN_FEATURE 1
#endif
#endif
#ifndef HG_HAS_ASAN_FEATURE
#define HG_HAS_ASAN_FEATURE 0
#endif

namespace hg {

namespace {

// Note [Huge pages for large host blocks]
// A block of kHugePage (2 MiB) or more is placed on a 2 MiB boundary and the
// whole 2 MiB pages inside it are advised MADV_HUGEPAGE when it is allocated,
// so that on Linux with transparent huge pages in "madvise" mode (Debian's
// default) or "always" they are faulted in as 2 MiB pages: one TLB entry
// instead of 512. (Memory glibc hands back from an earlier block may
// already hold 4 KiB pages; khugepaged merges those later, in the background.) Streaming kernels walk hundreds of MiB per call
// (the optimizer step: 28 bytes per parameter over 7 or 8 arrays), and with
// 4 KiB pages every 4 KiB of every stream costs a TLB miss and a page walk,
// which in a virtual machine is a two-level walk: the AdamW step of a GPT-2
// sized model ran 1.2-1.3x faster with its tensors on huge pages
// (docs/bench/history.md, "CPU AdamW, 2026-12-05"). PyTorch does the
// same for blocks of 2 MiB or more when THP_MEM_ALLOC_ENABLE=1. The advice
// only changes the page size, never the contents, and costs no resident
// memory: the block's tail past its last whole 2 MiB page is not advised and
// keeps 4 KiB pages (advising it too would make the kernel back a whole 2 MiB
// page for it: a 2.4 MB tensor would hold 4 MiB), and the unaligned head
// glibc leaves before the aligned block is never touched. HG_CPU_HUGE_PAGES=0
// (read once, at start-up) turns it off; where madvise fails (no THP in the
// kernel) the block keeps 4 KiB pages.
constexpr size_t kHugePage = size_t{2} << 20;

bool huge_pages_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("HG_CPU_HUGE_PAGES");
    return !(env != nullptr && std::strcmp(env, "0") == 0);
  }();
  return on;
}

// nullptr when the host is out of memory (the caller may free cached blocks
// and try again).
void* try_aligned_host_alloc(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  HG_CHECK(nbytes <= SIZE_MAX - kHugePage, "allocation of ", nbytes, " bytes is too large; check the tensor sizes");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (nbytes >= kHugePage && huge_pages_enabled()) {
    void* ptr = nullptr;
    if (posix_memalign(&ptr, kHugePage, nbytes) != 0) return nullptr;
    (void)madvise(ptr, nbytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: a failure changes nothing
    return ptr;
  }
#endif
  const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  return std::aligned_alloc(kCpuAlignment, rounded);
}

[[noreturn]] void out_of_host_memory(size_t nbytes) {
  HG_FAIL("out of host memory: could not allocate ", nbytes, " bytes; reduce the batch size or the model size");
}

void* aligned_host_alloc(size_t nbytes) {
  void* ptr = try_aligned_host_alloc(nbytes);
  if (ptr == nullptr) out_of_host_memory(nbytes);
  return ptr;
}

// Physical memory in bytes (0 when unknown).
size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

// Note [CPU block cache]
// Freed host blocks are kept for the next allocation of their size class
// instead of going back to glibc:
// - Small blocks (<= kMaxCachedBlock = 128 KiB) are rounded up to a power of
//   two and kept on a per-class free list, at most kMaxCachedPerClass = 64
//   blocks per class (8 MiB in all). glibc's memalign path was about a fifth
//   of the host cost of a 1-element op (docs/bench/history.md, "CPU backend
//   notes").
// - Large blocks are rounded up to a multiple of an eighth of their power of
//   two (at most 12.5% more; 4 KiB at least) and kept by that size, up to a
//   byte budget: HG_CPU_CACHE_MB, by default the smaller of 2 GiB and an
//   eighth of the physical memory. glibc serves blocks of 32 MiB and more
//   with a fresh mmap each time, and the kernel faults in and zeroes every
//   page of it again on first touch: that was 14% of the step of a 4×4096
//   MLP in bf16 (docs/bench/history.md, "CPU backend notes"). When a freed block does not fit in the
//   budget, the largest cached blocks go back to glibc first; when the host
//   is out of memory, the whole cache goes back and the allocation is tried
//   once more. cpu_empty_cache() returns it all, as torch.cuda.empty_cache()
//   does for the CUDA cache.
// Every block carries one 64-byte header in front of the pointer handed out
// (so the alignment is kept) that records its class: a small class, or
// kLarge with its rounded size. HG_CPU_BLOCK_CACHE=0 (read once, at start-up) turns
// both caches off, and they are off under AddressSanitizer, whose
// use-after-free checks need every free to reach it.
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
#if defined(__SANITIZE_ADDRESS__) || HG_HAS_ASAN_FEATURE
    enabled_ = false;
#else
    const char* env = std::getenv("HG_CPU_BLOCK_CACHE");
    enabled_ = !(env != nullptr && std::strcmp(env, "0") == 0);
#endif
    const size_t phys = physical_memory_bytes();
    large_budget_ = phys == 0 ? (size_t{1} << 30) : std::min(size_t{2} << 30, phys / 8);
    if (const char* mb = std::getenv("HG_CPU_CACHE_MB"); mb != nullptr && *mb != '\0') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(mb, &end, 10);
      HG_CHECK(end != nullptr && *end == '\0' && v <= (SIZE_MAX >> 20),
               "HG_CPU_CACHE_MB must be a whole number of MiB (0 keeps no large blocks), got '", mb, "'");
      large_budget_ = static_cast<size_t>(v) << 20;
    }
  }
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;
  ~CpuAllocator() override = default;  // never runs: see cpu_allocator()

  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    if (!enabled_) return aligned_host_alloc(nbytes);
    if (nbytes > kMaxCachedBlock) return allocate_large(nbytes);
    const uint8_t cls = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& list = free_[cls];
      if (!list.empty()) {
        void* base = list.back();
        list.pop_back();
        return static_cast<char*>(base) + kCpuAlignment;
      }
    }
    return with_header(aligned_host_alloc((kMinBlock << cls) + kCpuAlignment), cls, 0);
  }

  void deallocate(void* ptr, Device) override {
    if (ptr == nullptr) return;
    if (!enabled_) {
      std::free(ptr);
      return;
    }
    void* base = static_cast<char*>(ptr) - kCpuAlignment;
    const uint8_t cls = *static_cast<const uint8_t*>(base);
    if (cls == kLarge) {
      deallocate_large(base);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& list = free_[cls];
      if (list.size() < kMaxCachedPerClass) {
        list.push_back(base);
        return;
      }
    }
    std::free(base);
  }

  // Returns every cached block to glibc.
  void empty_cache() {
    std::vector<void*> bases;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& list : free_) {
        bases.insert(bases.end(), list.begin(), list.end());
        list.clear();
      }
      for (auto& [size, list] : large_) bases.insert(bases.end(), list.begin(), list.end());
      large_.clear();
      large_bytes_ = 0;
    }
    for (void* b : bases) std::free(b);
  }

  CpuCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    CpuCacheStats s{.large_cached_bytes = large_bytes_, .large_budget_bytes = large_budget_, .enabled = enabled_};
    for (const auto& list : free_) s.small_cached_blocks += list.size();
    for (const auto& [size, list] : large_) s.large_cached_blocks += list.size();
    return s;
  }

 private:
  static constexpr size_t kMinBlock = kCpuAlignment;  // class 0
  static constexpr size_t kNumClasses = 12;           // 64 B .. 128 KiB
  static constexpr size_t kMaxCachedBlock = kMinBlock << (kNumClasses - 1);
  static constexpr size_t kMaxCachedPerClass = 64;
  static constexpr uint8_t kLarge = 0xfe;

  static uint8_t size_class(size_t nbytes) {
    uint8_t cls = 0;
    while ((kMinBlock << cls) < nbytes) ++cls;
    return cls;
  }
  // A large block's cached size: n rounded up to a multiple of an eighth of
  // the largest power of two <= n (and of 4 KiB).
  static size_t large_size(size_t nbytes) {
    size_t pow2 = size_t{1} << (63 - __builtin_clzll(nbytes));
    const size_t step = std::max<size_t>(pow2 / 8, 4096);
    HG_CHECK(nbytes <= SIZE_MAX - step - kCpuAlignment, "allocation of ", nbytes,
             " bytes is too large; check the tensor sizes");
    return (nbytes + step - 1) / step * step;
  }
  static void* with_header(void* base, uint8_t cls, size_t size) {
    *static_cast<uint8_t*>(base) = cls;
    std::memcpy(static_cast<char*>(base) + sizeof(size_t), &size, sizeof size);
    return static_cast<char*>(base) + kCpuAlignment;
  }

  void* allocate_large(size_t nbytes) {
    const size_t size = large_size(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = large_.find(size);
      if (it != large_.end() && !it->second.empty()) {
        void* base = it->second.back();
        it->second.pop_back();
        large_bytes_ -= size;
        return static_cast<char*>(base) + kCpuAlignment;
      }
    }
    void* base = try_aligned_host_alloc(size + kCpuAlignment);
    if (base == nullptr) {  // give the cache back and try once more
      empty_cache();
      base = try_aligned_host_alloc(size + kCpuAlignment);
      if (base == nullptr) out_of_host_memory(nbytes);
    }
    return with_header(base, kLarge, size);
  }

  void deallocate_large(void* base) {
    size_t size = 0;
    std::memcpy(&size, static_cast<const char*>(base) + sizeof(size_t), sizeof size);
    std::vector<void*> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (size <= large_budget_) {
        // Largest blocks go first until this one fits.
        while (large_bytes_ + size > large_budget_) {
          auto last = std::prev(large_.end());
          evicted.push_back(last->second.back());
          last->second.pop_back();
          large_bytes_ -= last->first;
          if (last->second.empty()) large_.erase(last);
        }
        large_[size].push_back(base);
        large_bytes_ += size;
        base = nullptr;
      }
    }
    for (void* b : evicted) std::free(b);
    std::free(base);  // nullptr when cached
  }

  bool enabled_ = true;
  std::mutex mutex_;
  std::array<std::vector<void*>, kNumClasses> free_;
  std::map<size_t, std::vector<void*>> large_;  // rounded size -> cached blocks
  size_t large_bytes_ = 0;
  size_t large_budget_ = 0;
};

class CpuHooks final : public DeviceHooks {
 public:
  Allocator& allocator() override { return cpu_allocator(); }
  int device_count() override { return 1; }
  void copy_bytes(void* dst, Device, const void* src, Device, size_t n) override {
    if (n != 0) std::memcpy(dst, src, n);
  }
  void synchronize(Device) override {}
};

std::array<DeviceHooks*, kNumDeviceTypes>& hook_table() {
  static CpuHooks cpu_hooks;
  static std::array<DeviceHooks*, kNumDeviceTypes> table = {&cpu_hooks, nullptr};
  return table;
}

}  // namespace

namespace {
CpuAllocator& the_cpu_allocator() {
  // Never destroyed: tensors held by other static objects may be freed after
  // this translation unit's statics are gone.
  static CpuAllocator* allocator = new CpuAllocator;
  return *allocator;
}
}  // namespace

Allocator& cpu_allocator() { return the_cpu_allocator(); }
void cpu_empty_cache() { the_cpu_allocator().empty_cache(); }
CpuCacheStats cpu_cache_stats() { return the_cpu_allocator().stats(); }

void register_device_hooks(DeviceType type, DeviceHooks* hooks) {
  hook_table()[static_cast<size_t>(type)] = hooks;
}

bool has_device_hooks(DeviceType type) {
  return hook_table()[static_cast<size_t>(type)] != nullptr;
}

DeviceHooks& device_hooks(DeviceType type) {
  DeviceHooks* hooks = hook_table()[static_cast<size_t>(type)];
  HG_CHECK(hooks != nullptr,
           "this halfgrad was built without the CUDA backend (cpu configuration), so "
           "Device::cuda() is unavailable; build the emu or gpu configuration "
           "(cmake --preset emu|gpu) or use Device::cpu()");
  return *hooks;
}

void check_device(Device device) {
  HG_CHECK(device.index >= 0, "device index must be >= 0, got ", device.index);
  if (device.is_cpu()) {
    HG_CHECK(device.index == 0, "the CPU device has index 0 only, got cpu:", device.index);
    return;
  }
  const int count = device_hooks(device.type).device_count();
  HG_CHECK(device.index < count, "requested ", device, " but ", count,
           " CUDA device(s) are available",
           count == 0 ? " (no driver or GPU found; use Device::cpu() or the emu build)" : "");
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n) {
  if (n == 0) return;
  const DeviceType type = dst_device.is_cpu() ? src_device.type : dst_device.type;
  device_hooks(type).copy_bytes(dst, dst_device, src, src_device, n);
}

}  // namespace hg

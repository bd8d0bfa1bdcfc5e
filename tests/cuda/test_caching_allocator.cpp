// The caching device allocator. Most cases use their own CachingAllocator so
// counts start from zero; out-of-memory cases shrink the emulated device.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/cuda/caching_allocator.h"
#include "tests/cuda/cuda_test_util.h"

#if defined(HG_CUDA_EMU)
#include <hg_emu_runtime.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#endif

using Catch::Matchers::Contains;
using hg::cuda::AllocatorStats;
using hg::cuda::CachingAllocator;
using hg::cuda::CachingAllocatorConfig;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Addresses as integers: Catch would print a char* as a C string.
uintptr_t addr(void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

TEST_CASE("caching allocator: a freed block is reused", "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  CachingAllocator alloc;
  void* a = alloc.allocate(1000, 0, nullptr);
  REQUIRE(a != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a) % 256 == 0);  // cudaMalloc alignment
  alloc.free(a);
  void* b = alloc.allocate(900, 0, nullptr);  // rounds to the same 1024 bytes
  CHECK(b == a);
  const AllocatorStats s = alloc.stats(0);
  CHECK(s.num_device_mallocs == 1);
  CHECK(s.num_allocs == 2);
  CHECK(s.num_frees == 1);
  CHECK(s.allocated_bytes == 1024);
  CHECK(s.requested_bytes == 900);
  CHECK(s.reserved_bytes == hg::cuda::kSmallBuffer);
  alloc.free(b);
  CHECK(alloc.allocate(0, 0, nullptr) == nullptr);
  alloc.free(nullptr);
}

TEST_CASE("caching allocator: small blocks split one segment and merge back",
          "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  CachingAllocator alloc;
  void* a = alloc.allocate(1000, 0, nullptr);
  void* b = alloc.allocate(1000, 0, nullptr);
  CHECK(addr(b) == addr(a) + 1024);  // split from the same 2 MiB segment
  CHECK(alloc.stats(0).num_device_mallocs == 1);
  CHECK(alloc.stats(0).segments == 1);
  alloc.free(a);
  alloc.free(b);

  // Two 1 MiB halves fill the segment exactly...
  void* lo = alloc.allocate(kMiB, 0, nullptr);
  void* hi = alloc.allocate(kMiB, 0, nullptr);
  CHECK(lo == a);
  CHECK(addr(hi) == addr(lo) + kMiB);
  CHECK(alloc.stats(0).num_device_mallocs == 1);
  // ...and after both are freed they merge into one free segment, which is
  // the only kind empty_cache can return to the device.
  alloc.free(hi);
  alloc.free(lo);
  alloc.empty_cache();
  const AllocatorStats s = alloc.stats(0);
  CHECK(s.reserved_bytes == 0);
  CHECK(s.segments == 0);
  CHECK(s.num_device_frees == 1);
}

TEST_CASE("caching allocator: large requests use the large pool", "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  CachingAllocator alloc;
  void* a = alloc.allocate(3 * kMiB, 0, nullptr);  // from a 20 MiB segment
  CHECK(alloc.stats(0).reserved_bytes == hg::cuda::kLargeBuffer);
  // Larger than the 17 MiB left over: its own segment, rounded to 2 MiB.
  void* b = alloc.allocate(17 * kMiB + 1, 0, nullptr);
  CHECK(alloc.stats(0).reserved_bytes == hg::cuda::kLargeBuffer + 18 * kMiB);
  void* c = alloc.allocate(3 * kMiB, 0, nullptr);  // best fit: the rest of the first segment
  CHECK(addr(c) == addr(a) + 3 * kMiB);
  void* d = alloc.allocate(12 * kMiB, 0, nullptr);  // fits in what is left of the first
  CHECK(addr(d) == addr(a) + 6 * kMiB);
  CHECK(alloc.stats(0).num_device_mallocs == 2);
  void* tiny = alloc.allocate(100, 0, nullptr);  // small pool: a new 2 MiB segment
  CHECK(alloc.stats(0).num_device_mallocs == 3);
  for (void* p : {a, b, c, d, tiny}) alloc.free(p);
  CHECK(alloc.stats(0).allocated_bytes == 0);
}

TEST_CASE("caching allocator: statistics return to baseline", "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  CachingAllocator alloc;
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> size(1, 3 * kMiB);
  std::vector<void*> live;
  for (int i = 0; i < 200; ++i) {
    live.push_back(alloc.allocate(size(rng), 0, nullptr));
    if (i % 3 == 2) {  // free a random earlier block now and then
      const size_t victim = rng() % live.size();
      alloc.free(live[victim]);
      live.erase(live.begin() + static_cast<long>(victim));
    }
  }
  CHECK(alloc.stats(0).allocated_bytes > 0);
  CHECK(alloc.stats(0).peak_allocated_bytes >= alloc.stats(0).allocated_bytes);
  for (void* p : live) alloc.free(p);
  AllocatorStats s = alloc.stats(0);
  CHECK(s.allocated_bytes == 0);
  CHECK(s.requested_bytes == 0);
  CHECK(s.active_blocks == 0);
  CHECK(s.num_allocs == 200);
  CHECK(s.num_frees == 200);
  CHECK(s.reserved_bytes > 0);  // still cached
  CHECK(s.peak_reserved_bytes >= s.reserved_bytes);

  alloc.reset_peak_stats(0);
  CHECK(alloc.stats(0).peak_allocated_bytes == 0);
  alloc.empty_cache();  // every segment merged back to one free block
  s = alloc.stats(0);
  CHECK(s.reserved_bytes == 0);
  CHECK(s.segments == 0);
  CHECK(s.num_device_frees == s.num_device_mallocs);
  CHECK(s.peak_reserved_bytes > 0);  // peaks survive until reset
  alloc.reset_peak_stats(0);
  CHECK(alloc.stats(0).peak_reserved_bytes == 0);
}

TEST_CASE("caching allocator: blocks freed on a stream are reused on that stream only",
          "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  hg::cuda::Stream s1 = hg::cuda::Stream::create(), s2 = hg::cuda::Stream::create();
  CachingAllocator alloc;
  void* a = alloc.allocate(4096, 0, s1.handle());
  alloc.free(a);
  void* b = alloc.allocate(4096, 0, s2.handle());
  CHECK(b != a);
  CHECK(alloc.stats(0).num_device_mallocs == 2);
  void* c = alloc.allocate(4096, 0, s1.handle());
  CHECK(c == a);
  alloc.free(b);
  alloc.free(c);
  // The one-argument form uses the current device and stream.
  {
    hg::cuda::StreamGuard guard(s2);
    void* d = alloc.allocate(4096);
    CHECK(d == b);
    alloc.free(d);
  }
}

TEST_CASE("caching allocator: bad frees are hg::Errors", "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  CachingAllocator alloc;
  void* a = alloc.allocate(64, 0, nullptr);
  alloc.free(a);
  CHECK_THROWS_WITH(alloc.free(a), Contains("double free"));
  int host = 0;
  CHECK_THROWS_WITH(alloc.free(&host), Contains("not allocated by this allocator"));
}

TEST_CASE("caching allocator: HG_CUDA_ALLOC selects the mode", "[cuda][allocator]") {
  const char* saved = std::getenv("HG_CUDA_ALLOC");
  const std::string saved_value = saved != nullptr ? saved : "";
  setenv("HG_CUDA_ALLOC", "nocache", 1);
  CHECK_FALSE(CachingAllocatorConfig::from_env().caching);
  setenv("HG_CUDA_ALLOC", "cache", 1);
  CHECK(CachingAllocatorConfig::from_env().caching);
  setenv("HG_CUDA_ALLOC", "sometimes", 1);
  CHECK_THROWS_WITH(CachingAllocatorConfig::from_env(),
                    Contains("HG_CUDA_ALLOC='sometimes'") && Contains("nocache"));
  if (saved != nullptr) {
    setenv("HG_CUDA_ALLOC", saved_value.c_str(), 1);
  } else {
    unsetenv("HG_CUDA_ALLOC");
  }
}

TEST_CASE("caching allocator: nocache mode calls cudaMalloc/cudaFree every time",
          "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  CachingAllocator alloc(CachingAllocatorConfig{/*caching=*/false});
  CHECK_FALSE(alloc.caching_enabled());
#if defined(HG_CUDA_EMU)
  const size_t live_before = hg::emu::device_allocation_count(0);
  const size_t bytes_before = hg::emu::device_memory_in_use(0);
#endif
  void* a = alloc.allocate(1000, 0, nullptr);
  CHECK(alloc.stats(0).reserved_bytes == 1000);  // exact: sanitizers see the true end
#if defined(HG_CUDA_EMU)
  CHECK(hg::emu::device_allocation_count(0) == live_before + 1);
  CHECK(hg::emu::device_memory_in_use(0) == bytes_before + 1000);
  CHECK_FALSE(hg::emu::is_device_range(a, 1001));
#endif
  alloc.free(a);
  void* b = alloc.allocate(1000, 0, nullptr);
  alloc.free(b);
  const AllocatorStats s = alloc.stats(0);
  CHECK(s.num_device_mallocs == 2);
  CHECK(s.num_device_frees == 2);
  CHECK(s.reserved_bytes == 0);
  CHECK(s.allocated_bytes == 0);
#if defined(HG_CUDA_EMU)
  CHECK(hg::emu::device_allocation_count(0) == live_before);
#endif
}

TEST_CASE("caching allocator: concurrent use from several threads", "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  CachingAllocator alloc;
  auto work = [&](unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<void*> mine;
    for (int i = 0; i < 500; ++i) {
      mine.push_back(alloc.allocate(1 + rng() % 200000, 0, nullptr));
      if (rng() % 2 == 0) {
        alloc.free(mine.back());
        mine.pop_back();
      }
    }
    for (void* p : mine) alloc.free(p);
  };
  std::thread t1(work, 1u), t2(work, 2u);
  t1.join();
  t2.join();
  CHECK(alloc.stats(0).allocated_bytes == 0);
  CHECK(alloc.stats(0).num_allocs == alloc.stats(0).num_frees);
}

#if defined(HG_CUDA_EMU)

namespace {

// Shrinks emulated device 0 to `headroom` bytes above what is in use now, and
// restores the old capacity at scope exit.
struct DeviceCapacity {
  size_t saved = hg::emu::device_memory_capacity();
  size_t capacity;
  explicit DeviceCapacity(size_t headroom)
      : capacity(hg::emu::device_memory_in_use(0) + headroom) {
    hg::emu::set_device_memory_capacity(capacity);
  }
  ~DeviceCapacity() { hg::emu::set_device_memory_capacity(saved); }
};

}  // namespace

TEST_CASE("caching allocator: out of memory frees the cache and retries once",
          "[cuda][allocator]") {
  const DeviceCapacity limit(24 * kMiB);
  CachingAllocator alloc;
  // Fill the cache: five 2 MiB small segments, all free afterwards.
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(alloc.allocate(kMiB, 0, nullptr));
  for (void* p : blocks) alloc.free(p);
  REQUIRE(alloc.stats(0).reserved_bytes == 10 * kMiB);
  REQUIRE(alloc.stats(0).allocated_bytes == 0);

  // 20 MiB does not fit next to the 10 MiB cache in 24 MiB: the cache is
  // released and the retry succeeds.
  void* big = alloc.allocate(20 * kMiB, 0, nullptr);
  REQUIRE(big != nullptr);
  AllocatorStats s = alloc.stats(0);
  CHECK(s.num_alloc_retries == 1);
  CHECK(s.num_ooms == 0);
  CHECK(s.reserved_bytes == 20 * kMiB);
  CHECK(s.num_device_frees == 5);
  CHECK(cudaGetLastError() == cudaSuccess);  // the failed cudaMalloc left no error

  // Now nothing cached can help: a clear error with the numbers and the fix.
  try {
    (void)alloc.allocate(10 * kMiB, 0, nullptr);
    FAIL("expected an out-of-memory hg::Error");
  } catch (const hg::Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK_THAT(what, Contains("CUDA out of memory"));
    CHECK_THAT(what, Contains("tried to allocate 10.00 MiB on cuda:0"));
    CHECK_THAT(what, Contains("after releasing the allocator's cache and retrying"));
    CHECK_THAT(what, Contains(hg::cuda::format_bytes(limit.capacity) + " capacity"));
    CHECK_THAT(what, Contains("20.00 MiB allocated by tensors"));
    CHECK_THAT(what, Contains("20.00 MiB reserved"));
    CHECK_THAT(what, Contains("Reduce the batch size"));
    CHECK_THAT(what, Contains("empty_cache()"));
  }
  s = alloc.stats(0);
  CHECK(s.num_alloc_retries == 2);
  CHECK(s.num_ooms == 1);
  CHECK(s.allocated_bytes == 20 * kMiB);  // the failed request changed nothing
  CHECK(cudaGetLastError() == cudaSuccess);

  alloc.free(big);
  void* again = alloc.allocate(10 * kMiB, 0, nullptr);  // fits in the freed block
  CHECK(again == big);
  alloc.free(again);
}

TEST_CASE("caching allocator: nocache mode reports out of memory too", "[cuda][allocator]") {
  const DeviceCapacity limit(4 * kMiB);
  CachingAllocator alloc(CachingAllocatorConfig{false});
  CHECK_THROWS_WITH(alloc.allocate(5 * kMiB, 0, nullptr),
                    Contains("tried to allocate 5.00 MiB") && !Contains("retrying"));
  CHECK(alloc.stats(0).num_ooms == 1);
}

TEST_CASE("caching allocator (emu): memory handed out reads as NaN, even when reused",
          "[cuda][allocator]") {
  CachingAllocator alloc;
  float* a = static_cast<float*>(alloc.allocate(4 * sizeof(float), 0, nullptr));
  HG_CUDA_CHECK(cudaMemset(a, 0, 4 * sizeof(float)));
  alloc.free(a);
  float* b = static_cast<float*>(alloc.allocate(4 * sizeof(float), 0, nullptr));
  REQUIRE(b == a);
  float host[4] = {};
  HG_CUDA_CHECK(cudaMemcpy(host, b, sizeof(host), cudaMemcpyDeviceToHost));
  for (float v : host) CHECK(std::isnan(v));
  alloc.free(b);
}

#if defined(__SANITIZE_ADDRESS__)
TEST_CASE("caching allocator (emu + ASan): slack and free blocks are poisoned",
          "[cuda][allocator]") {
  CachingAllocator alloc;
  char* a = static_cast<char*>(alloc.allocate(1000, 0, nullptr));
  CHECK_FALSE(__asan_address_is_poisoned(a));
  CHECK_FALSE(__asan_address_is_poisoned(a + 999));
  CHECK(__asan_address_is_poisoned(a + 1000));  // past the request, inside the block
  CHECK(__asan_address_is_poisoned(a + 4096));  // the cached rest of the segment
  alloc.free(a);
  CHECK(__asan_address_is_poisoned(a));
}
#endif

#endif  // HG_CUDA_EMU

TEST_CASE("caching allocator: the process-wide instance and its shorthands",
          "[cuda][allocator]") {
  HG_REQUIRE_CUDA_DEVICE();
  const AllocatorStats before = hg::cuda::memory_stats();
  void* p = hg::cuda::caching_allocator().allocate(12345);
  // The cache rounds a request up to its 512-byte class; with HG_CUDA_ALLOC=nocache
  // (compute-sanitizer runs) every request is its own cudaMalloc of the exact size.
  const size_t rounded = hg::cuda::caching_allocator().caching_enabled() ? 12800 : 12345;
  CHECK(hg::cuda::memory_stats().allocated_bytes == before.allocated_bytes + rounded);
  hg::cuda::caching_allocator().free(p);
  CHECK(hg::cuda::memory_stats().allocated_bytes == before.allocated_bytes);
  hg::cuda::reset_peak_memory_stats();
  CHECK(hg::cuda::memory_stats().peak_allocated_bytes == before.allocated_bytes);
  hg::cuda::empty_cache();
  CHECK(hg::cuda::format_bytes(512) == "512 B");
  CHECK(hg::cuda::format_bytes(3 * kMiB / 2) == "1.50 MiB");
}

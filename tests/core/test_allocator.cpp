// The CPU allocator (Note [CPU block cache] in core/allocator.cpp): every size
// is 64-byte aligned and fully writable, freed blocks of a size class come
// back for the next allocation of that class, and large blocks are kept up to
// their byte budget. ctest runs this file three times: with the cache
// (test_core), with HG_CPU_BLOCK_CACHE=0 (test_core_no_block_cache, the glibc
// path) and with HG_CPU_CACHE_MB=1 (test_core_small_block_cache: eviction).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "core/allocator.h"

using namespace hg;

TEST_CASE("cpu_allocator: aligned, writable blocks of every size", "[core][allocator]") {
  Allocator& a = cpu_allocator();
  CHECK(a.allocate(0, Device::cpu()) == nullptr);
  std::vector<std::pair<void*, size_t>> blocks;
  for (size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, size_t{4096}, size_t{131071},
                   size_t{131072}, size_t{131073}, size_t{1} << 20}) {
    void* p = a.allocate(n, Device::cpu());
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % kCpuAlignment == 0);
    std::memset(p, 0xAB, n);  // the whole block is ours (ASan or a header overwrite would show)
    blocks.emplace_back(p, n);
  }
  // Distinct blocks never overlap.
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      const auto* pi = static_cast<const char*>(blocks[i].first);
      const auto* pj = static_cast<const char*>(blocks[j].first);
      CHECK((pi + blocks[i].second <= pj || pj + blocks[j].second <= pi));
    }
  }
  for (auto [p, n] : blocks) {
    CHECK(static_cast<const unsigned char*>(p)[n - 1] == 0xAB);
    a.deallocate(p, Device::cpu());
  }
  a.deallocate(nullptr, Device::cpu());
}

TEST_CASE("cpu_allocator: a freed small block is reused when the cache is on", "[core][allocator]") {
  Allocator& a = cpu_allocator();
  const char* env = std::getenv("HG_CPU_BLOCK_CACHE");
  const bool cache_off = env != nullptr && std::strcmp(env, "0") == 0;
  void* p = a.allocate(100, Device::cpu());
  a.deallocate(p, Device::cpu());
  void* q = a.allocate(120, Device::cpu());  // same class (128 B)
  if (!cache_off) {
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(q == p);
#endif
  }
  a.deallocate(q, Device::cpu());
}

TEST_CASE("cpu_allocator: large blocks are reused within their budget and given back", "[core][allocator]") {
  Allocator& a = cpu_allocator();
  const CpuCacheStats before = cpu_cache_stats();
  const size_t mib = size_t{1} << 20;
  // 3 MiB + 100 B and 3 MiB + 5000 B share a size class (3.25 MiB: eighths of 2 MiB).
  void* p = a.allocate(3 * mib + 100, Device::cpu());
  std::memset(p, 0x5A, 3 * mib + 100);
  a.deallocate(p, Device::cpu());
  const CpuCacheStats after_free = cpu_cache_stats();
  const bool fits = before.enabled && after_free.large_budget_bytes >= 4 * mib;
  CHECK(after_free.large_cached_bytes <= after_free.large_budget_bytes);
  if (fits) {
    CHECK(after_free.large_cached_blocks == before.large_cached_blocks + 1);
    CHECK(after_free.large_cached_bytes == before.large_cached_bytes + 3 * mib + mib / 4);
  } else {
    CHECK(after_free.large_cached_blocks <= before.large_cached_blocks);  // too big to keep, or no cache
  }
  void* q = a.allocate(3 * mib + 5000, Device::cpu());
  CHECK(reinterpret_cast<uintptr_t>(q) % kCpuAlignment == 0);
  if (fits) {
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(q == p);
#endif
  }
  std::memset(q, 0xA5, 3 * mib + 5000);
  a.deallocate(q, Device::cpu());

  // Many blocks freed at once never hold more than the budget.
  std::vector<void*> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(a.allocate(600 * 1024 + static_cast<size_t>(i) * 8192, Device::cpu()));
  for (void* b : blocks) a.deallocate(b, Device::cpu());
  const CpuCacheStats many = cpu_cache_stats();
  CHECK(many.large_cached_bytes <= many.large_budget_bytes);
  if (many.enabled && many.large_budget_bytes >= 8 * mib) CHECK(many.large_cached_blocks >= 6);

  cpu_empty_cache();
  const CpuCacheStats empty = cpu_cache_stats();
  CHECK(empty.large_cached_blocks == 0);
  CHECK(empty.large_cached_bytes == 0);
  CHECK(empty.small_cached_blocks == 0);
}

// The CPU allocator (Note [CPU block cache] in core/allocator.cpp): every size
// is 64-byte aligned and fully writable, freed blocks of a size class come
// back for the next allocation of that class, and large blocks are never
// cached. ctest runs this file twice: with the cache (test_core) and with
// HG_CPU_BLOCK_CACHE=0 (test_core_no_block_cache), the glibc path.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
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

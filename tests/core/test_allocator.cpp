// The CPU allocator (Note [CPU block cache] in core/allocator.cpp): every size
// is 64-byte aligned and fully writable, freed blocks of a size class come
// back for the next allocation of that class, and large blocks are kept up to
// their byte budget. ctest runs this file three times: with the cache
// (test_core), with HG_CPU_BLOCK_CACHE=0 (test_core_no_block_cache, the glibc
// path) and with HG_CPU_CACHE_MB=1 (test_core_small_block_cache: eviction).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "tests/skip.h"

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

// Note [Huge pages for large host blocks]: a block of 2 MiB or more starts on
// a 2 MiB boundary and its whole 2 MiB pages carry the MADV_HUGEPAGE advice
// ("hg" in the VmFlags of /proc/self/smaps), its tail does not, unless
// HG_CPU_HUGE_PAGES=0 (the ctest run test_core_no_huge_pages). Skipped where
// the kernel has no transparent huge pages.
namespace {
// The VmFlags line of the mapping of /proc/self/smaps that holds p ("" when
// none is found).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find('-') < line.find(' ')) {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}
bool has_flag(const std::string& flags, const char* flag) {
  std::istringstream words(flags);
  std::string w;
  while (words >> w) {
    if (w == flag) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("cpu_allocator: blocks of 2 MiB or more are advised to use huge pages", "[core][allocator][needs-thp]") {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  if (!thp || !std::getline(thp, mode) || mode.find("[never]") != std::string::npos) {
    HG_SKIP("no transparent huge pages in this kernel");
  }
  const char* env = std::getenv("HG_CPU_HUGE_PAGES");
  const bool on = !(env != nullptr && std::strcmp(env, "0") == 0);
  Allocator& a = cpu_allocator();
  constexpr size_t kHuge = size_t{2} << 20;
  for (size_t n : {kHuge, size_t{9} << 20}) {
    void* p = a.allocate(n, Device::cpu());
    REQUIRE(p != nullptr);
    std::memset(p, 0x5A, n);
    const std::string flags = vm_flags_of(p);
    INFO("block of " << n << " bytes at " << p << ": " << flags);
    REQUIRE_FALSE(flags.empty());
    CHECK(has_flag(flags, "hg") == on);
    // The block starts on a 2 MiB boundary; with the block cache, its 64-byte
    // header comes first.
    const size_t header = cpu_cache_stats().enabled ? kCpuAlignment : 0;
    if (on) CHECK(reinterpret_cast<uintptr_t>(p) % kHuge == header);
    // The tail past the block's last whole 2 MiB page keeps 4 KiB pages (no
    // resident memory spent on a partly used huge page).
    if ((header + n) % kHuge != 0) CHECK_FALSE(has_flag(vm_flags_of(static_cast<char*>(p) + n - 1), "hg"));
    a.deallocate(p, Device::cpu());
  }
}

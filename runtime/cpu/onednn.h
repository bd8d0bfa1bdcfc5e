// What the CPU's oneDNN paths share (kernels/gemm/gemm_onednn.cpp for matmul,
// kernels/conv/conv_onednn.cpp for convolution): one CPU engine, a stream per
// calling thread, the LRU cache of primitives keyed by a plain struct and
// hashed with BytesHash (core/hash.h), and the test for oneDNN's reference
// (scalar) implementations, which the callers never take. Compiled only when
// the build has oneDNN (HG_HAVE_ONEDNN); private to libhalfgrad.
//
// Threads: Debian's libdnnl is built with OpenMP, the same libgomp as our
// kernels and OpenBLAS, so its parallel regions come from the one pool that
// hg::set_num_threads sizes (runtime/cpu/threads.h). A primitive fixes its
// work split for the thread count at creation, so every cache key holds the
// count (omp_get_max_threads()): after set_num_threads(n) the next call builds
// a primitive for n.
#pragma once

#include <cstddef>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>

#include "core/hash.h"
#include "runtime/cpu/cpu_dispatch.h"

namespace hg::cpu::onednn {

// The CPU engine every primitive and memory object is made on.
const dnnl::engine& engine();

// The calling thread's stream on engine().
dnnl::stream& stream();

// Whether a primitive descriptor's implementation is one of oneDNN's
// reference kernels ("ref:any", "ref_..."): scalar loops the callers' own
// fallbacks beat.
bool is_reference(const char* impl_info);

// What this oneDNN offers on this CPU (asked once): its effective ISA
// (get_effective_cpu_isa(), capped by DNNL_MAX_CPU_ISA) and whether it has a
// non-reference f16 matmul and f16 convolution (a small one of each is
// created). The decisions of runtime/cpu/cpu_dispatch.h take it.
const OnednnCaps& caps();

// Whether `name` is set to `value` in the environment.
bool env_is(const char* name, const char* value);

// A key zeroed before its fields are set (so padding bytes compare and hash
// equal), as BytesHash and the memcmp equality below require.
template <typename Key>
Key zeroed_key() {
  Key k;
  std::memset(static_cast<void*>(&k), 0, sizeof(Key));
  return k;
}

// Equality by bytes, for keys made with zeroed_key().
template <typename Key>
struct BytesEqual {
  bool operator()(const Key& a, const Key& b) const { return std::memcmp(&a, &b, sizeof(Key)) == 0; }
};

// An LRU cache of Capacity entries, thread-safe. get() returns the entry for
// key, built by make() on a miss (under the lock: creation is rare, once per
// shape). The returned pointer stays valid while the caller holds it (shared
// ownership survives eviction).
template <typename Key, typename Entry, size_t Capacity>
class Cache {
 public:
  template <typename F>
  std::shared_ptr<const Entry> get(const Key& key, F&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = map_.find(key); it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
      return it->second->second;
    }
    auto entry = std::make_shared<const Entry>(make());
    lru_.emplace_front(key, entry);
    map_.emplace(key, lru_.begin());
    if (map_.size() > Capacity) {
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return entry;
  }

 private:
  std::mutex mu_;
  std::list<std::pair<Key, std::shared_ptr<const Entry>>> lru_;
  std::unordered_map<Key, typename decltype(lru_)::iterator, BytesHash<Key>, BytesEqual<Key>> map_;
};

}  // namespace hg::cpu::onednn

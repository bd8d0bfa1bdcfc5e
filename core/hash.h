// XXH64 (xxHash, 64-bit), streaming: the integrity hash of the data that
// halfgrad's safetensors writer records and its reader verifies
// (docs/checkpoints.md, "Integrity hash"). Not cryptographic: it detects
// corruption (flipped, lost or swapped bytes), not deliberate tampering.
//
//   hg::Xxh64 h;  h.update(p, n);  h.update(q, m);  uint64_t d = h.digest();
//
// Equal to the reference implementation (seed 0) for any split of the input
// into update() calls; tests/core checks the published test vectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace hg {

class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  uint64_t v_[4];
  uint64_t total_ = 0;
  unsigned char buffer_[32];
  size_t buffered_ = 0;
  uint64_t seed_;
};

// 16 lowercase hex digits.
std::string hex64(uint64_t value);

// The hasher of a plan cache's key (std::unordered_map<Key, Plan,
// BytesHash<Key>>): FNV-1a over the key's bytes. For plain keys that are
// value-initialised (so padding bytes are 0) before their fields are set and
// compared with memcmp, like the GEMM plan keys of cuBLASLt and oneDNN.
template <typename Key>
struct BytesHash {
  static_assert(std::is_trivially_copyable_v<Key>, "BytesHash hashes a key's bytes");
  size_t operator()(const Key& key) const {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&key);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

}  // namespace hg

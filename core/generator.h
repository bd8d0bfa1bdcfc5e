// hg::Generator: the (seed, offset) source for every random fill.
//
// A Generator does not produce numbers itself. Each random fill (rand, randn,
// dropout masks, init) asks it for one offset with next_offset() and then
// computes element i as a pure function of (seed, offset, i) with the Philox
// helpers in core/philox.h (see Note [Philox element mapping]). One offset
// selects an independent stream of 2^64 Philox blocks (2^66 32-bit values), so
// a fill never needs more than one offset and two fills never overlap. The
// same (seed, offset) gives the same numbers on cpu, cuda-emu and CUDA.
//
// Checkpoints save get_state() and restore it with set_state(); after that the
// next fill sees exactly the offset it would have seen without the restart.
//
// Thread-safe: all members lock an internal mutex, so two threads drawing
// offsets concurrently each get a distinct one (in an unspecified order).
#pragma once

#include <cstdint>
#include <mutex>

namespace hg {

// Everything needed to resume a Generator bit-exactly.
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  friend bool operator==(const GeneratorState&, const GeneratorState&) = default;
};

class Generator {
 public:
  static constexpr uint64_t kDefaultSeed = 0x5EED;

  explicit Generator(uint64_t seed = kDefaultSeed);

  Generator(const Generator&) = delete;  // a copy would silently repeat streams
  Generator& operator=(const Generator&) = delete;

  // Sets the seed and restarts at offset 0 (like torch.manual_seed).
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  uint64_t offset() const;
  void set_offset(uint64_t offset);

  // Returns the current offset and advances it by one: one call per fill.
  uint64_t next_offset();

  GeneratorState get_state() const;
  void set_state(const GeneratorState& state);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;    // Philox key
  uint64_t offset_;  // next stream to hand out (high half of the Philox counter)
};

// The process-wide generator that fills use when none is passed.
Generator& default_generator();

// Seeds the default generator: hg::manual_seed(42) before a run makes it repeatable.
void manual_seed(uint64_t seed);

}  // namespace hg

#include "core/generator.h"

#include <cstdint>
#include <mutex>

namespace hg {

Generator::Generator(uint64_t seed) : seed_(seed), offset_(0) {}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset_;
}

void Generator::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  offset_ = offset;
}

uint64_t Generator::next_offset() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Wraps after 2^64 fills, which no run reaches; wrapping is well defined.
  return offset_++;
}

GeneratorState Generator::get_state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return GeneratorState{seed_, offset_};
}

void Generator::set_state(const GeneratorState& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = state.seed;
  offset_ = state.offset;
}

Generator& default_generator() {
  // Function-local static: initialised on first use, thread-safe, and never
  // destroyed before a late static destructor that still draws numbers.
  static Generator* generator = new Generator();
  return *generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace hg

// The fuzz harnesses of halfgrad's file readers (docs/testing.md, "Fuzzing").
//
// Each harness takes arbitrary bytes, hands them to one reader as a file, and
// returns normally when the reader either succeeds or throws hg::Error; any
// other outcome — a crash, a sanitizer report, another exception type, a
// failed load that changed the model — is a finding (it aborts).
//
// The same harness functions run in two drivers:
//   libFuzzer (tests/fuzz/CMakeLists.txt, clang, ./run fuzz): one binary per target;
//   fuzz_replay (tests/fuzz/tests.cmake, the normal build, a ctest test):
//     replays the committed seed corpus and every past crash input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hg::fuzz {

int fuzz_safetensors(const uint8_t* data, size_t size);
int fuzz_checkpoint(const uint8_t* data, size_t size);
int fuzz_idx(const uint8_t* data, size_t size);
int fuzz_npy(const uint8_t* data, size_t size);
// Value mutations of a valid training checkpoint (fuzz_state.cpp).
int fuzz_state(const uint8_t* data, size_t size);

// The path of an in-memory file (memfd) now holding exactly `size` bytes of
// `data`; one file per process, rewritten by every call.
std::string input_file(const void* data, size_t size);

// Aborts with a message: the harness found a bug the sanitizers cannot see.
[[noreturn]] void finding(const std::string& what);

}  // namespace hg::fuzz

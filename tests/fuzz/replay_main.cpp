// fuzz_replay <target> <file or folder>...: runs one harness on each file (a
// folder: each file in it), as the libFuzzer binary would, in the normal
// build. ctest replays the committed seed corpus and every past crash input
// this way, so they stay regression tests without clang.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz.h"

namespace {

using Harness = int (*)(const uint8_t*, size_t);

Harness find_harness(const std::string& name) {
  if (name == "safetensors") return hg::fuzz::fuzz_safetensors;
  if (name == "checkpoint") return hg::fuzz::fuzz_checkpoint;
  if (name == "idx") return hg::fuzz::fuzz_idx;
  if (name == "npy") return hg::fuzz::fuzz_npy;
  if (name == "state") return hg::fuzz::fuzz_state;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const Harness harness = argc >= 2 ? find_harness(argv[1]) : nullptr;
  if (harness == nullptr) {
    std::fprintf(stderr, "usage: fuzz_replay safetensors|checkpoint|idx|npy|state <file or folder>...\n");
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::directory_iterator(argv[i])) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::exists(argv[i])) {
      files.push_back(argv[i]);
    }
  }
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    harness(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_replay %s: %zu inputs, no findings\n", argv[1], files.size());
  return files.empty() ? 1 : 0;
}

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {

std::string input_file(const void* data, size_t size) {
  // memfd: no disk traffic, and /proc/self/fd/N opens it like any file.
  static const int fd = [] {
    const int f = ::memfd_create("hg_fuzz_input", MFD_CLOEXEC);
    if (f < 0) finding("memfd_create failed");
    return f;
  }();
  if (::ftruncate(fd, 0) != 0) finding("ftruncate of the input file failed");
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, p + done, size - done, static_cast<off_t>(done));
    if (n <= 0) finding("writing the input file failed");
    done += static_cast<size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

void finding(const std::string& what) {
  std::fprintf(stderr, "hg fuzz finding: %s\n", what.c_str());
  std::abort();
}

}  // namespace hg::fuzz

#include "core/error.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace hg {

namespace {
// The path of a source file from the repository root, so that messages read
// "core/tensor.cpp:12" and never name the build machine's folders. The library's
// own files start with HG_SOURCE_DIR (the checkout, set for this file by
// core/sources.cmake); a file compiled elsewhere (a test, an installed header
// used by a program) is cut at its first library folder instead.
const char* short_path(const char* file) {
#ifdef HG_SOURCE_DIR
  static constexpr const char kSourceDir[] = HG_SOURCE_DIR;
  if (std::strncmp(file, kSourceDir, sizeof(kSourceDir) - 1) == 0) return file + sizeof(kSourceDir) - 1;
#endif
  static constexpr const char* kRoots[] = {"/core/",  "/runtime/",  "/kernels/",   "/autograd/",    "/nn/",
                                           "/optim/", "/amp/",      "/data/",      "/distributed/", "/train/",
                                           "/tests/", "/examples/", "/benchmarks/"};
  const char* best = file;
  for (const char* root : kRoots) {
    const char* hit = std::strstr(file, root);
    if (hit != nullptr && (best == file || hit < best)) best = hit + 1;
  }
  return best;
}

std::string format_what(const std::string& message, const char* file, int line) {
  return message + " (at " + short_path(file) + ":" + std::to_string(line) + ")";
}
}  // namespace

Error::Error(std::string message, const char* file, int line)
    : std::runtime_error(format_what(message, file, line)),
      message_(std::move(message)),
      file_(short_path(file)),
      line_(line) {}

namespace detail {
void throw_error(const char* file, int line, std::string message) {
  throw Error(std::move(message), file, line);
}
}  // namespace detail

}  // namespace hg

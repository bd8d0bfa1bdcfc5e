#include "core/error.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace hg {

namespace {
// Strip the build machine's absolute prefix so messages read "core/tensor.cpp:12".
const char* short_path(const char* file) {
  static constexpr const char* kRoots[] = {"/core/",    "/kernels/", "/autograd/", "/nn/",
                                           "/optim/",   "/amp/",     "/data/",     "/tests/",
                                           "/examples/", "/benchmarks/"};
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

// hg::Error and the two check tiers (HG_CHECK always on, HG_DCHECK debug only).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace hg {

// The one exception type halfgrad throws. what() reads
//   "<message> (at core/tensor.cpp:123)"
// and the message says what was wrong and how to fix it. Library code never
// calls exit() or abort(); every user-facing failure is an hg::Error.
class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file, int line);
  const std::string& message() const { return message_; }  // without location
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string message_;
  const char* file_;
  int line_;
};

namespace detail {

// Concatenates any streamable values: HG_CHECK(ok, "got ", n, " dims").
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

[[noreturn]] void throw_error(const char* file, int line, std::string message);

}  // namespace detail
}  // namespace hg

// Always-on check: throws hg::Error with file:line when cond is false.
#define HG_CHECK(cond, ...)                                                      \
  do {                                                                           \
    if (!(cond)) [[unlikely]] {                                                  \
      ::hg::detail::throw_error(__FILE__, __LINE__,                              \
                                ::hg::detail::str_cat(__VA_ARGS__));             \
    }                                                                            \
  } while (0)

// Unconditional throw with the same formatting.
#define HG_FAIL(...) \
  ::hg::detail::throw_error(__FILE__, __LINE__, ::hg::detail::str_cat(__VA_ARGS__))

// Hot-path invariant: checked in debug builds (and sanitizer builds), compiled
// out under NDEBUG. Never use it for user input.
#if defined(NDEBUG) && !defined(HG_ENABLE_DCHECK)
#define HG_DCHECK(cond, ...) \
  do {                       \
  } while (0)
#else
#define HG_DCHECK(cond, ...) HG_CHECK(cond, "internal invariant failed: " #cond ". ", __VA_ARGS__)
#endif

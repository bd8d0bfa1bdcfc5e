// Honest skips (docs/testing.md, "Skipped, not passed"). A test case that
// cannot run on every machine is tagged [needs-<what>] and calls
//   HG_SKIP("why: " << details);
// where it cannot run. The binary's main CTest test leaves such cases out
// (its ARGS hold ~[needs-<what>]); hg_add_skippable_test(<binary> needs-<what>)
// in tests/CMakeLists.txt runs them as a CTest test of their own, which CTest
// reports as skipped when HG_SKIP ends the binary with the skip code. Run any
// other way (e.g. by hand without a filter), HG_SKIP fails the case: a skip
// never counts as a pass. scripts/check-honest-skips keeps the rule.
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace hg::test {

inline constexpr int kSkipReturnCode = 77;  // = HG_TEST_SKIP_RETURN_CODE in tests/CMakeLists.txt

// Ends the process with the skip code where CTest expects it (the
// HG_TEST_SKIP_OK environment of hg_add_skippable_test); else fails the case.
inline void skip(const std::string& why) {
  if (const char* ok = std::getenv("HG_TEST_SKIP_OK"); ok != nullptr && std::string(ok) == "1") {
    std::printf("skipped: %s\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(kSkipReturnCode);
  }
  FAIL("cannot run here (" << why
                           << "); this case is tagged [needs-...] and runs as its own CTest test "
                              "(hg_add_skippable_test), which reports it as skipped");
}

}  // namespace hg::test

#define HG_SKIP(why)                     \
  do {                                   \
    std::ostringstream hg_skip_why;      \
    hg_skip_why << why;                  \
    ::hg::test::skip(hg_skip_why.str()); \
    return;                              \
  } while (0)

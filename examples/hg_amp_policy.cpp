// hg-amp-policy: prints the autocast policy table (Note [AMP policy table] in
// kernels/amp_policy.h), as aligned text or, with --markdown, as the table
// docs/amp.md embeds (tests/amp checks that the two agree).
#include <cstdio>
#include <cstring>

#include "kernels/amp_policy.h"

int main(int argc, char** argv) {
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--markdown") == 0) {
      markdown = true;
    } else {
      std::fprintf(stderr, "usage: hg-amp-policy [--markdown]\n  prints what autocast does with each op\n");
      return std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0 ? 0 : 2;
    }
  }
  std::fputs(hg::amp::policy().to_string(markdown).c_str(), stdout);
  return 0;
}

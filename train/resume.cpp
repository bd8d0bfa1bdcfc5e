#include "train/resume.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/terminal.h"

namespace hg::train {

int64_t extra_int(const optim::TrainingProgress& p, const std::string& key, int64_t max) {
  auto it = p.extra.find(key);
  HG_CHECK(it != p.extra.end(), "--resume: the checkpoint lacks '", key, "'; it was not written by this training loop");
  const std::string& text = it->second;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  HG_CHECK(!text.empty() && errno == 0 && *end == '\0' && value >= 0 && value <= max, "--resume: the checkpoint's '",
           key, "' = '", text.substr(0, 40), "' is not an integer in [0, ", max, "]; the file is corrupt");
  return value;
}

double extra_sum(const optim::TrainingProgress& p, const std::string& key) {
  auto it = p.extra.find(key);
  HG_CHECK(it != p.extra.end(), "--resume: the checkpoint lacks '", key, "'; it was not written by this training loop");
  double v = 0.0;
  try {
    v = optim::parse_exact_double(it->second);
  } catch (const Error&) {
    HG_FAIL("--resume: the checkpoint's metadata entry 'extra.", key, "' = '", it->second.substr(0, 40),
            "' is not a number (the Trainer writes the \"%a\" form); the file is corrupt or from another program");
  }
  HG_CHECK(std::isfinite(v), "--resume: the checkpoint's metadata entry 'extra.", key, "' is ", v,
           ", not a finite loss sum; the file is corrupt or from another program");
  return v;
}

namespace {

// A stored value as the user typed it: exact floating values in decimal.
std::string shown(const std::string& value) {
  if (value.rfind("0x", 0) != 0 && value.rfind("-0x", 0) != 0) return value.substr(0, 60);
  try {
    return decimal(optim::parse_exact_double(value));
  } catch (const Error&) {
    return value.substr(0, 60);
  }
}

// "config.batch_size" -> "--batch-size"; "data.vocab_size" -> "the data's vocab size".
std::string what_of(const std::string& key) {
  const bool data = key.rfind("data.", 0) == 0;
  std::string name = key.substr(key.find('.') + 1);
  std::replace(name.begin(), name.end(), '_', data ? ' ' : '-');
  return data ? "the data's " + name : "--" + name;
}

}  // namespace

void check_config(const optim::TrainingProgress& p, const std::map<std::string, std::string>& config,
                  const std::vector<std::string>& first, const std::string& hint) {
  auto check = [&](const std::string& key, const std::string& value) {
    auto it = p.extra.find(key);
    HG_CHECK(it != p.extra.end() && it->second == value, "--resume: the checkpoint was written with ", what_of(key),
             " = ", it == p.extra.end() ? std::string("(none)") : shown(it->second), ", this run has ", shown(value),
             key == "config.precision" ? " (the precision differs)" : "", "; ", hint);
  };
  for (const std::string& key : first) {
    auto it = config.find(key);
    if (it != config.end()) check(key, it->second);
  }
  for (const auto& [key, value] : config) {
    if (std::find(first.begin(), first.end(), key) == first.end()) check(key, value);
  }
}

}  // namespace hg::train

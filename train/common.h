// What hg-train's two jobs share: the meaning of --precision, --device auto,
// and how numbers are shown.
#pragma once

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/profiler.h"
#include "optim/checkpoint.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace hg::train {

// What --precision means for the weights, the forward and the loss scaling.
struct Precision {
  DType weights = kF32;  // parameters and input data
  bool autocast = false;
  DType autocast_dtype = kF16;  // the region's dtype
  bool scaler = false;
};

inline Precision precision_of(const std::string& name) {
  if (name == "amp-fp16") return {kF32, true, kF16, true};
  if (name == "amp-bf16") return {kF32, true, kBF16, true};
  if (name == "fp16-master") return {kF16, true, kF16, true};
  if (name == "bf16-master") return {kBF16, true, kBF16, true};
  return {};  // fp32
}

// --device: auto is the first GPU when there is one, else the CPU.
inline Device pick_device(const std::string& name) {
  if (name == "auto") {
#if defined(HG_WITH_CUDA)
    if (cuda::is_available()) return Device::cuda(0);
#endif
    return Device::cpu();
  }
  return Device::parse(name);
}

// The shortest decimal that reads back as `v` (0.002, not 0x1.0624dd2f1a9fcp-9).
inline std::string decimal(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// 65536 -> "2^16"; other values as %g.
inline std::string scale_text(double s) {
  int e = 0;
  const double m = std::frexp(s, &e);
  char buf[32];
  if (m == 0.5) {
    std::snprintf(buf, sizeof buf, "2^%d", e - 1);
  } else {
    std::snprintf(buf, sizeof buf, "%g", s);
  }
  return buf;
}

// The checkpoint extra `key` as an integer in [0, max], or an hg::Error.
inline int64_t extra_int(const optim::TrainingProgress& p, const std::string& key, int64_t max) {
  auto it = p.extra.find(key);
  HG_CHECK(it != p.extra.end(), "--resume: the checkpoint lacks '", key, "'; it was not written by this hg-train job");
  const std::string& text = it->second;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  HG_CHECK(!text.empty() && errno == 0 && *end == '\0' && value >= 0 && value <= max, "--resume: the checkpoint's '",
           key, "' = '", text.substr(0, 40), "' is not an integer in [0, ", max, "]; the file is corrupt");
  return value;
}

// A finite loss sum stored in the checkpoint's extras, or an hg::Error
// naming the key (load_training_checkpoint adds the file).
inline double extra_sum(const optim::TrainingProgress& p, const std::string& key) {
  auto it = p.extra.find(key);
  HG_CHECK(it != p.extra.end(), "--resume: the checkpoint lacks '", key, "'; it was not written by this hg-train job");
  double v = 0.0;
  try {
    v = optim::parse_exact_double(it->second);
  } catch (const Error&) {
    HG_FAIL("--resume: the checkpoint's metadata entry 'extra.", key, "' = '", it->second.substr(0, 40),
            "' is not a number (hg-train writes the \"%a\" form); the file is corrupt or from another program");
  }
  HG_CHECK(std::isfinite(v), "--resume: the checkpoint's metadata entry 'extra.", key, "' is ", v,
           ", not a finite loss sum; the file is corrupt or from another program");
  return v;
}

// An error message without a leading "hg-train: " (the programs add their
// own prefix; messages of hg-train's own writers carry it already).
inline std::string without_program_prefix(const std::string& message) {
  const std::string prefix = "hg-train: ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

// hg-train --profile N: the N-th step of this process (1-based; 0: none) runs
// under hg::profiler::Profile; its tables by op and by kernel and the modelled
// time on an H200 are printed, the Chrome trace written to
// <out>/profile-step-N.json (docs/profiling.md).
class StepProfiler {
 public:
  StepProfiler(int64_t step, std::string out) : step_(step), out_(std::move(out)) {}
  // Around each step; `done` counts the steps this process has finished.
  void before(int64_t done) {
    if (step_ > 0 && done + 1 == step_) profile_.emplace();
  }
  void after() {
    if (!profile_ || !profile_->running()) return;
    profile_->stop();
    const std::string path = out_ + "/profile-step-" + std::to_string(step_) + ".json";
    profile_->write_trace(path);
    std::printf("\nhg-train: step %lld profiled (trace %s)\n%s\n%s\n", static_cast<long long>(step_), path.c_str(),
                profile_->table().c_str(), profile_->model(profiler::gpu_spec("H200")).table.c_str());
    std::fflush(stdout);
  }

 private:
  int64_t step_;
  std::string out_;
  std::optional<profiler::Profile> profile_;
};

}  // namespace hg::train

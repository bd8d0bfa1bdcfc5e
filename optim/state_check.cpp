// The training-state value rules (Note [Training-state rules] in optim/state_check.h).
#include "optim/state_check.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/counters.h"
#include "core/error.h"
#include "kernels/amp_scale/amp_scale.h"

namespace hg::optim {
namespace {

std::string shown_value(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

[[noreturn]] void refuse(const StateSource& src, const std::string& key, const std::string& what,
                         const std::string& rule) {
  HG_FAIL(src.file.empty() ? std::string("training state") : "training checkpoint '" + src.file + "'", ": '",
          src.prefix, key, "' ", what, " (rule: ", rule,
          "); this is a corrupt or foreign checkpoint, not a diverged run: restore an earlier checkpoint or "
          "start the run again");
}

// The first element of a floating tensor that is inf or NaN, found from the
// bits (no conversion, so 16-bit tensors are checked exactly and in place).
struct BadElement {
  int64_t index;
  double value;
};

template <typename Bits>
std::optional<int64_t> first_nonfinite_bits(const void* data, int64_t n, Bits exponent_mask) {
  const auto* p = static_cast<const Bits*>(data);
  for (int64_t i = 0; i < n; ++i) {
    if ((p[i] & exponent_mask) == exponent_mask) return i;
  }
  return std::nullopt;
}

// A contiguous CPU copy (a no-op for tensors read from a file).
Tensor host(const Tensor& t) { return t.cpu().contiguous(); }

std::optional<BadElement> first_nonfinite(const Tensor& t) {
  const Tensor h = host(t);
  const int64_t n = h.numel();
  std::optional<int64_t> at;
  switch (h.dtype()) {
    case kF64:
      at = first_nonfinite_bits<uint64_t>(h.data_ptr(), n, 0x7FF0000000000000ull);
      break;
    case kF32:
      at = first_nonfinite_bits<uint32_t>(h.data_ptr(), n, 0x7F800000u);
      break;
    case kF16:
      at = first_nonfinite_bits<uint16_t>(h.data_ptr(), n, uint16_t{0x7C00});
      break;
    case kBF16:
      at = first_nonfinite_bits<uint16_t>(h.data_ptr(), n, uint16_t{0x7F80});
      break;
    default:
      return std::nullopt;  // integers and bools are always finite
  }
  if (!at) return std::nullopt;
  return BadElement{*at, h.to(kF64).contiguous().data<double>()[*at]};
}

void check_finite(const StateSource& src, const std::string& key, const Tensor& t, const std::string& rule) {
  if (const auto bad = first_nonfinite(t)) {
    refuse(src, key, "holds " + shown_value(bad->value) + " at element " + std::to_string(bad->index), rule);
  }
}

// The value of a one-element step counter: i64, or an f32 counter from an
// older file, which must hold an exact integer.
int64_t step_value(const StateSource& src, const std::string& key, const Tensor& t) {
  const std::string rule = "an optimizer step counter is an integer in [0, 2^62)";
  int64_t step = 0;
  if (t.dtype() == kI64) {
    step = host(t).data<int64_t>()[0];
    if (step < 0 || step >= kCounterLimit) refuse(src, key, "holds " + std::to_string(step), rule);
  } else {
    const double v = host(t).to(kF64).data<double>()[0];
    if (!(v >= 0.0 && v < static_cast<double>(kCounterLimit)) || std::floor(v) != v) {
      refuse(src, key, "holds " + shown_value(v), rule);
    }
    step = static_cast<int64_t>(v);
  }
  return step;
}

bool all_zero(const Tensor& t) {
  const Tensor h = host(t).to(kF64).contiguous();
  const double* p = h.data<double>();
  for (int64_t i = 0; i < h.numel(); ++i) {
    if (p[i] != 0.0) return false;
  }
  return true;
}

// "state1.3.7" -> ("state1", "3"); anything else -> ("", "").
std::pair<std::string, std::string> kind_and_group(const std::string& key) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) return {"", ""};
  const size_t dot2 = key.find('.', dot + 1);
  return {key.substr(0, dot), key.substr(dot + 1, dot2 == std::string::npos ? std::string::npos : dot2 - dot - 1)};
}

}  // namespace

void check_optimizer_state_values(const NamedTensors& state, const StateSource& src) {
  std::map<std::string, int64_t> steps;  // group -> step
  for (const auto& [key, t] : state) {
    if (!t.defined()) continue;
    const auto [kind, group] = kind_and_group(key);
    if (kind == "step" && t.numel() == 1 && (t.dtype() == kI64 || t.dtype() == kF32)) {
      steps[group] = step_value(src, key, t);
    }
  }
  for (const auto& [key, t] : state) {
    if (!t.defined()) continue;
    const auto [kind, group] = kind_and_group(key);
    if (kind != "master" && kind != "state1" && kind != "state2") continue;
    check_finite(src, key, t, "optimizer masters and moments are finite");
    if (kind == "state1" || kind == "state2") {
      if (kind == "state2") {
        // f32 as optimizers keep it, scanned in place; another dtype (refused
        // later by the structure check) through an f64 copy.
        const Tensor h = t.dtype() == kF32 ? host(t) : host(t).to(kF64).contiguous();
        const float* f32 = h.dtype() == kF32 ? h.data<float>() : nullptr;
        const double* f64 = h.dtype() == kF32 ? nullptr : h.data<double>();
        for (int64_t i = 0; i < h.numel(); ++i) {
          const double v = f32 != nullptr ? static_cast<double>(f32[i]) : f64[i];
          if (v < 0.0) {
            refuse(src, key, "holds " + shown_value(v) + " at element " + std::to_string(i),
                   "a second moment (a running mean of squares) is >= 0");
          }
        }
      }
      auto it = steps.find(group);
      if (it != steps.end() && it->second == 0 && !all_zero(t)) {
        refuse(src, key, "holds non-zero moments but '" + src.prefix + "step." + group + "' is 0",
               "before the first applied step every moment is zero");
      }
    }
  }
}

void check_scaler_state_values(const NamedTensors& state, const StateSource& src) {
  std::map<std::string, Tensor> given;
  for (const auto& [key, t] : state) {
    if (t.defined()) given[key] = t;
  }
  auto find = [&](const char* key, DType dtype, int64_t numel) -> std::optional<Tensor> {
    auto it = given.find(key);
    if (it == given.end() || it->second.dtype() != dtype || it->second.numel() != numel) return std::nullopt;
    return host(it->second);
  };
  const std::optional<Tensor> options = find("options", kF64, kAmpOptionCount);
  const std::optional<Tensor> scale_t = find("scale", kF32, 1);
  const std::optional<Tensor> state_t = find("state", kI64, kAmpStateSize);
  if (!options || !scale_t || !state_t) return;  // the loader's structure check names what is missing

  // options
  const double* o = options->data<double>();
  static const char* const kOptionNames[kAmpOptionCount] = {"init_scale",      "growth_factor",  "backoff_factor",
                                                            "growth_interval", "min_scale",      "max_scale",
                                                            "hysteresis",      "collapse_steps", "check_every"};
  for (int i = 0; i < kAmpOptionCount; ++i) {
    const std::string what = "holds " + std::string(kOptionNames[i]) + " = " + shown_value(o[i]);
    const bool may_be_inf = i == kAmpOptMaxScale;
    if (std::isnan(o[i]) || (!may_be_inf && std::isinf(o[i]))) {
      refuse(src, "options", what, "GradScaler options are numbers (only max_scale may be +inf)");
    }
    const bool integer =
        i == kAmpOptGrowthInterval || i == kAmpOptHysteresis || i == kAmpOptCollapseSteps || i == kAmpOptCheckEvery;
    if (integer) {
      const double lowest = i == kAmpOptCheckEvery ? 0.0 : 1.0;
      if (std::floor(o[i]) != o[i] || o[i] < lowest || o[i] >= static_cast<double>(kCounterLimit)) {
        refuse(src, "options", what,
               std::string(kOptionNames[i]) + " is an integer in [" + (i == kAmpOptCheckEvery ? "0" : "1") + ", 2^62)");
      }
    }
  }
  if (!(o[kAmpOptGrowthFactor] > 1.0)) {
    refuse(src, "options", "holds growth_factor = " + shown_value(o[kAmpOptGrowthFactor]), "growth_factor > 1");
  }
  if (!(o[kAmpOptBackoffFactor] > 0.0 && o[kAmpOptBackoffFactor] < 1.0)) {
    refuse(src, "options", "holds backoff_factor = " + shown_value(o[kAmpOptBackoffFactor]), "0 < backoff_factor < 1");
  }
  const double min_scale = o[kAmpOptMinScale], max_scale = o[kAmpOptMaxScale];
  if (!(min_scale > 0.0 && min_scale <= max_scale)) {
    refuse(src, "options", "holds min_scale = " + shown_value(min_scale) + ", max_scale = " + shown_value(max_scale),
           "0 < min_scale <= max_scale");
  }
  const double init_scale = o[kAmpOptInitScale];
  if (!(init_scale >= min_scale && init_scale <= max_scale &&
        init_scale <= static_cast<double>(std::numeric_limits<float>::max()))) {
    refuse(src, "options",
           "holds init_scale = " + shown_value(init_scale) + " with min_scale " + shown_value(min_scale) +
               " and max_scale " + shown_value(max_scale),
           "init_scale is an f32 in [min_scale, max_scale]");
  }

  // scale, in the f32 the update kernel compares it in
  const float scale = scale_t->data<float>()[0];
  const auto lo = static_cast<float>(min_scale), hi = static_cast<float>(max_scale);
  if (!(std::isfinite(scale) && scale > 0.0f && scale >= lo && scale <= hi)) {
    refuse(src, "scale",
           "holds " + shown_value(scale) + " with min_scale " + shown_value(min_scale) + " and max_scale " +
               shown_value(max_scale),
           "the loss scale is finite, > 0 and in [min_scale, max_scale]");
  }

  // state
  const int64_t* s = state_t->data<int64_t>();
  auto slot = [&](int index, const char* name, int64_t lowest, int64_t limit, const std::string& rule) {
    if (s[index] < lowest || s[index] >= limit) {
      refuse(src, "state", "holds " + std::string(name) + " = " + std::to_string(s[index]), rule);
    }
  };
  slot(kAmpIteration, "iteration", 0, kCounterLimit, "the iteration count is in [0, 2^62)");
  const int64_t iteration = s[kAmpIteration];
  slot(kAmpApplied, "steps_applied", 0, iteration + 1, "applied steps are in [0, iteration]");
  slot(kAmpSkipped, "steps_skipped", 0, iteration + 1, "skipped steps are in [0, iteration]");
  if (s[kAmpApplied] + s[kAmpSkipped] != iteration) {
    refuse(src, "state",
           "holds steps_applied " + std::to_string(s[kAmpApplied]) + " + steps_skipped " +
               std::to_string(s[kAmpSkipped]) + " != iteration " + std::to_string(iteration),
           "every iteration is either applied or skipped");
  }
  slot(kAmpGrowthTracker, "growth_tracker", 0, static_cast<int64_t>(o[kAmpOptGrowthInterval]),
       "the growth tracker is in [0, growth_interval)");
  slot(kAmpOverflowsInRow, "overflows_in_row", 0, static_cast<int64_t>(o[kAmpOptHysteresis]),
       "overflows in a row are in [0, hysteresis)");
  slot(kAmpMinScaleOverflows, "min_scale_overflows", 0, iteration + 1, "overflows at min_scale are in [0, iteration]");
  slot(kAmpLastOverflow, "last_overflow", 0, iteration + 1, "the last overflow's stamp is in [0, iteration]");
  slot(kAmpCollapsed, "collapsed", 0, 2, "the collapsed flag is 0 or 1");
  if (s[kAmpScaleBits] != amp_float_bits(scale)) {
    refuse(src, "state",
           "holds scale bits " + std::to_string(s[kAmpScaleBits]) + " for a scale of " + shown_value(scale),
           "the stored scale bits are those of 'scale'");
  }
}

void check_finite_values(const NamedTensors& tensors, const StateSource& src) {
  for (const auto& [key, t] : tensors) {
    if (t.defined()) check_finite(src, key, t, "model weights and buffers are finite");
  }
}

}  // namespace hg::optim

#include "optim/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/serialize.h"
#include "optim/state_check.h"

namespace hg::optim {
namespace {

constexpr std::string_view kModelPrefix = "model.";
constexpr std::string_view kOptimPrefix = "optim.";
constexpr std::string_view kExtraPrefix = "extra.";
constexpr std::string_view kScalerPrefix = "scaler.";

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// A metadata entry holding an integer, with the file and key in the error.
template <typename Int>
Int parse_int(const std::string& path, const std::map<std::string, std::string>& meta, const std::string& key) {
  auto it = meta.find(key);
  HG_CHECK(it != meta.end(), "training checkpoint '", path, "': metadata entry '", key,
           "' is missing; the file is a plain safetensors file or from another program");
  const std::string& text = it->second;
  errno = 0;
  char* end = nullptr;
  Int value{};
  if constexpr (std::is_signed_v<Int>) {
    value = static_cast<Int>(std::strtoll(text.c_str(), &end, 10));
  } else {
    value = static_cast<Int>(std::strtoull(text.c_str(), &end, 10));
  }
  HG_CHECK(!text.empty() && errno == 0 && end != nullptr && *end == '\0' && (std::is_signed_v<Int> || text[0] != '-'),
           "training checkpoint '", path, "': metadata entry '", key, "' = '", text, "' is not an integer");
  if constexpr (std::is_signed_v<Int>) {
    HG_CHECK(value >= 0, "training checkpoint '", path, "': metadata entry '", key, "' is negative (", value, ")");
  }
  return value;
}

// Progress counters beyond this are corrupt, not real: adding 1 can never overflow.
constexpr uint64_t kMaxCounter = uint64_t{1} << 62;

template <typename Int>
Int parse_counter(const std::string& path, const std::map<std::string, std::string>& meta, const std::string& key) {
  const Int value = parse_int<Int>(path, meta, key);
  HG_CHECK(static_cast<uint64_t>(value) < kMaxCounter, "training checkpoint '", path, "': metadata entry '", key,
           "' = ", value, " is beyond any real run (limit 2^62); the file is corrupt");
  return value;
}

}  // namespace

std::string exact_double_string(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", value);
  return buf;
}

double parse_exact_double(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  HG_CHECK(!text.empty() && errno == 0 && end != nullptr && *end == '\0', "'", text,
           "' is not a floating-point number (expected the \"%a\" form written by exact_double_string)");
  return value;
}

void save_training_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& optimizer,
                              const TrainingProgress& progress, const NamedTensors& scaler_state) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : model.state_dict()) tensors.emplace_back(std::string(kModelPrefix) + name, t);
  for (auto& [name, t] : optimizer.state_dict()) tensors.emplace_back(std::string(kOptimPrefix) + name, t);
  for (auto& [name, t] : scaler_state) tensors.emplace_back(std::string(kScalerPrefix) + name, t);

  std::map<std::string, std::string> meta{
      {"halfgrad.checkpoint", kTrainingCheckpointFormat},
      {"progress.epoch", std::to_string(progress.epoch)},
      {"progress.batch", std::to_string(progress.batch)},
      {"progress.global_step", std::to_string(progress.global_step)},
      {"progress.scheduler_step", std::to_string(progress.scheduler_step)},
      {"generator.seed", std::to_string(progress.generator.seed)},
      {"generator.offset", std::to_string(progress.generator.offset)},
  };
  HG_CHECK(progress.batch >= 0 && progress.global_step >= 0 && progress.scheduler_step >= 0,
           "save_training_checkpoint: progress counters must be >= 0 (batch ", progress.batch, ", global_step ",
           progress.global_step, ", scheduler_step ", progress.scheduler_step, ")");
  for (const auto& [key, value] : progress.extra) {
    HG_CHECK(!key.empty(), "save_training_checkpoint: extra keys must be non-empty");
    meta.emplace(std::string(kExtraPrefix) + key, value);
  }
  nn::save_safetensors(path, tensors, meta);
}

TrainingProgress load_training_checkpoint(const std::string& path, nn::Module& model, Optimizer& optimizer,
                                          NamedTensors* scaler_state, const ProgressCheck& check_progress) {
  const nn::SafetensorsFile file = nn::load_safetensors(path);
  auto format = file.metadata.find("halfgrad.checkpoint");
  HG_CHECK(format != file.metadata.end(), "training checkpoint '", path,
           "' has no 'halfgrad.checkpoint' metadata: it is not a training checkpoint (a model-only file loads with "
           "nn::load_safetensors + Module::load_state_dict)");
  HG_CHECK(format->second == kTrainingCheckpointFormat, "training checkpoint '", path, "' has format '",
           format->second, "', this build reads '", kTrainingCheckpointFormat, "'");

  NamedTensors model_state, optim_state, scaler_entries;
  for (const auto& [name, t] : file.tensors) {
    if (starts_with(name, kModelPrefix)) {
      model_state.emplace_back(name.substr(kModelPrefix.size()), t);
    } else if (starts_with(name, kOptimPrefix)) {
      optim_state.emplace_back(name.substr(kOptimPrefix.size()), t);
    } else if (starts_with(name, kScalerPrefix)) {
      HG_CHECK(scaler_state != nullptr, "training checkpoint '", path,
               "' carries a GradScaler's state; pass a NamedTensors* to load it (then scaler.load_state_dict)");
      scaler_entries.emplace_back(name.substr(kScalerPrefix.size()), t);
    } else {
      HG_FAIL("training checkpoint '", path, "': tensor '", name, "' is none of 'model.*', 'optim.*', 'scaler.*'");
    }
  }

  TrainingProgress p;
  const auto& meta = file.metadata;
  p.epoch = parse_counter<uint64_t>(path, meta, "progress.epoch");
  p.batch = parse_counter<int64_t>(path, meta, "progress.batch");
  p.global_step = parse_counter<int64_t>(path, meta, "progress.global_step");
  p.scheduler_step = parse_counter<int64_t>(path, meta, "progress.scheduler_step");
  p.generator.seed = parse_int<uint64_t>(path, meta, "generator.seed");
  p.generator.offset = parse_int<uint64_t>(path, meta, "generator.offset");
  for (const auto& [key, value] : meta) {
    if (starts_with(key, kExtraPrefix)) p.extra.emplace(key.substr(kExtraPrefix.size()), value);
  }

  if (check_progress) {
    try {
      check_progress(p);
    } catch (const Error& e) {
      HG_FAIL("training checkpoint '", path, "': ", e.message());
    }
  }

  // The values, before anything changes (Note [Training-state rules]).
  check_finite_values(model_state, {path, std::string(kModelPrefix)});
  check_optimizer_state_values(optim_state, {path, std::string(kOptimPrefix)});
  check_scaler_state_values(scaler_entries, {path, std::string(kScalerPrefix)});

  // Everything is checked before anything changes: the optimizer's entries
  // (check_state_dict changes nothing), then the model's (load_state_dict
  // checks all names, shapes and dtypes before its first copy).
  NoGradGuard no_grad;
  try {
    if (!optim_state.empty()) {
      // State of a group the file does not have would survive the load and
      // mix two runs: the file must cover every group this optimizer has state for.
      for (const auto& entry : optimizer.state_dict()) {
        const std::string& name = entry.first;
        HG_CHECK(!starts_with(name, "step.") || std::any_of(optim_state.begin(), optim_state.end(),
                                                             [&](const auto& e) { return e.first == name; }),
                 "this optimizer has state for parameter group ", name.substr(5),
                 " but the checkpoint has none (different parameter groups)");
      }
    }
    optimizer.check_state_dict(optim_state);
    model.load_state_dict(model_state, /*strict=*/true);
    optimizer.load_state_dict(optim_state);
  } catch (const Error& e) {
    HG_FAIL("training checkpoint '", path, "' does not fit this model/optimizer: ", e.message());
  }
  if (scaler_state != nullptr) *scaler_state = std::move(scaler_entries);  // only once the load has succeeded
  return p;
}

}  // namespace hg::optim

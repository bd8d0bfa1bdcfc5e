#include "optim/checkpoint.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string_view>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/serialize.h"

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
                                          NamedTensors* scaler_state) {
  const nn::SafetensorsFile file = nn::load_safetensors(path);
  auto format = file.metadata.find("halfgrad.checkpoint");
  HG_CHECK(format != file.metadata.end(), "training checkpoint '", path,
           "' has no 'halfgrad.checkpoint' metadata: it is not a training checkpoint (a model-only file loads with "
           "nn::load_safetensors + Module::load_state_dict)");
  HG_CHECK(format->second == kTrainingCheckpointFormat, "training checkpoint '", path, "' has format '",
           format->second, "', this build reads '", kTrainingCheckpointFormat, "'");

  NamedTensors model_state, optim_state;
  for (const auto& [name, t] : file.tensors) {
    if (starts_with(name, kModelPrefix)) {
      model_state.emplace_back(name.substr(kModelPrefix.size()), t);
    } else if (starts_with(name, kOptimPrefix)) {
      optim_state.emplace_back(name.substr(kOptimPrefix.size()), t);
    } else if (starts_with(name, kScalerPrefix)) {
      HG_CHECK(scaler_state != nullptr, "training checkpoint '", path,
               "' carries a GradScaler's state; pass a NamedTensors* to load it (then scaler.load_state_dict)");
      scaler_state->emplace_back(name.substr(kScalerPrefix.size()), t);
    } else {
      HG_FAIL("training checkpoint '", path, "': tensor '", name, "' is none of 'model.*', 'optim.*', 'scaler.*'");
    }
  }

  TrainingProgress p;
  const auto& meta = file.metadata;
  p.epoch = parse_int<uint64_t>(path, meta, "progress.epoch");
  p.batch = parse_int<int64_t>(path, meta, "progress.batch");
  p.global_step = parse_int<int64_t>(path, meta, "progress.global_step");
  p.scheduler_step = parse_int<int64_t>(path, meta, "progress.scheduler_step");
  p.generator.seed = parse_int<uint64_t>(path, meta, "generator.seed");
  p.generator.offset = parse_int<uint64_t>(path, meta, "generator.offset");
  for (const auto& [key, value] : meta) {
    if (starts_with(key, kExtraPrefix)) p.extra.emplace(key.substr(kExtraPrefix.size()), value);
  }

  NoGradGuard no_grad;
  try {
    model.load_state_dict(model_state, /*strict=*/true);
    optimizer.load_state_dict(optim_state);
  } catch (const Error& e) {
    HG_FAIL("training checkpoint '", path, "' does not fit this model/optimizer: ", e.what());
  }
  // Optimizer::load_state_dict ignores entries of groups or slots it does not
  // have; a checkpoint with such entries came from a different setup.
  std::set<std::string> expected;
  for (const auto& [name, t] : optimizer.state_dict()) expected.insert(name);
  for (const auto& [name, t] : optim_state) {
    HG_CHECK(expected.count(name) != 0, "training checkpoint '", path, "': optimizer entry '", name,
             "' has no counterpart in this optimizer (different parameter groups or optimizer type)");
  }
  HG_CHECK(optim_state.empty() || expected.size() == optim_state.size(), "training checkpoint '", path, "' holds ",
           optim_state.size(), " optimizer entries, this optimizer has ", expected.size(),
           " (different parameter groups or optimizer type)");
  return p;
}

}  // namespace hg::optim

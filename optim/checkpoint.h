// Training checkpoints: everything a run needs to continue bit-exactly, in one
// safetensors file (nn/serialize.h: validated on read, written atomically).
//
//   hg::optim::TrainingProgress p{.epoch = loader.epoch(), .batch = loader.position(),
//                                 .global_step = step, .scheduler_step = sched.last_step(),
//                                 .generator = gen.get_state()};
//   hg::optim::save_training_checkpoint("run/checkpoint.safetensors", *model, opt, p);
//   ...
//   hg::optim::TrainingProgress q = hg::optim::load_training_checkpoint(path, *model, opt);
//   loader.set_epoch(q.epoch); loader.skip(q.batch); sched.set_last_step(q.scheduler_step);
//   gen.set_state(q.generator);
//
// Note [Training checkpoint layout]
// Tensors: "model.<name>" for every entry of model.state_dict() (parameters in
// their own dtype: a 16-bit model stores 16-bit weights), and "optim.<key>" for
// every entry of optimizer.state_dict() (the fp32 masters, fp32 moments and the
// per-group i64 step counters; files from before the counters were i64 hold
// f32 ones, which still load: Optimizer::load_state_dict converts them). Metadata (strings): "halfgrad.checkpoint" = format
// version, the progress counters as decimal integers, the generator's seed and
// offset, and the caller's extra strings as "extra.<key>". Nothing in the file
// depends on time or the machine, so two runs that reach the same state write
// byte-identical files — which is how hg-train's resume test checks itself.
//
// Why bit-exact resume works: the model's weights, the masters and moments and
// the device step counter are restored exactly (raw bytes); the data order of
// an epoch is a pure function of (seed, epoch) (Note [DataLoader order and
// resuming]); random fills are pure functions of (seed, offset, index)
// (core/generator.h); and every kernel is deterministic (no float atomics). So
// the steps after a resume compute the same bits as the uninterrupted run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/generator.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace hg::optim {

// The host-side counters of a run (the device-side state travels as tensors).
struct TrainingProgress {
  uint64_t epoch = 0;           // DataLoader::epoch() at the save
  int64_t batch = 0;            // DataLoader::position(): batches of `epoch` already used
  int64_t global_step = 0;      // optimizer steps attempted so far
  int64_t scheduler_step = 0;   // LRScheduler::last_step() (0 without a schedule)
  GeneratorState generator{};   // the run's Generator (dropout masks, init)
  std::map<std::string, std::string> extra = {};  // anything else the program needs back
  friend bool operator==(const TrainingProgress&, const TrainingProgress&) = default;
};

// Format version written to the "halfgrad.checkpoint" metadata entry.
inline constexpr const char* kTrainingCheckpointFormat = "training-v1";

// Writes model, optimizer and progress to `path` atomically (an earlier file at
// `path` survives a failed or killed save). Extra keys must be non-empty.
// scaler_state: a GradScaler's state_dict() (amp/grad_scaler.h), stored as
// "scaler.<key>" tensors; empty when training without a scaler.
void save_training_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& optimizer,
                              const TrainingProgress& progress, const NamedTensors& scaler_state = {});

// Restores model (strict: names, shapes and dtypes must match) and optimizer
// (every state entry must match the optimizer's groups) from `path`, and
// returns the progress counters. The caller re-positions its DataLoader,
// scheduler and generator from them. Throws hg::Error naming the file and what
// does not match; a corrupt file is reported by the safetensors reader.
//
// The load is atomic: the whole file is read and every check runs — the
// format, the counters (each < 2^62), `check_progress` (the caller's own
// checks of the counters and extras, e.g. "same options as this run"), the
// optimizer's entries and the model's — before the first byte of the model or
// the optimizer changes. A load that throws leaves both bit-identical.
// A file with "scaler.*" tensors needs scaler_state (filled, only on success,
// for the caller's GradScaler::load_state_dict); without one, resuming would
// not be exact.
using ProgressCheck = std::function<void(const TrainingProgress&)>;
TrainingProgress load_training_checkpoint(const std::string& path, nn::Module& model, Optimizer& optimizer,
                                          NamedTensors* scaler_state = nullptr,
                                          const ProgressCheck& check_progress = {});

// Doubles as exact strings ("%a" hexadecimal floating point) for `extra`, so a
// running sum survives a resume to the last bit.
std::string exact_double_string(double value);
double parse_exact_double(const std::string& text);  // throws hg::Error on malformed text

}  // namespace hg::optim

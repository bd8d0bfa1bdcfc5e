// hg::train::Trainer — the training loop any model needs, as a library
// (docs/training.md, "Your own model"). hg-train's jobs (examples/) are
// options, a model and data over it.
//
//   Trainer trainer({.out = "runs/mine", .precision = "amp-bf16", .steps = 200, .eval_every = 50});
//   auto model = std::make_shared<MyNet>(&gen);
//   trainer.place(model);                          // device, weight dtype, DDP
//   hg::optim::AdamW opt(model->parameters(), {.lr = 1e-3});
//   trainer.set_optimizer(opt);
//   trainer.fit({.loss = ..., .next_batch = ..., .evaluate = ...});
//
// What it owns:
//   * the run folder (train/run_folder.h): locked, writable, never clobbered;
//     metrics.jsonl and curves.svg (train/report.h) are written before the
//     checkpoint, so a kill between the two loses no line (a resume drops
//     lines past the checkpoint and writes them again);
//   * the precision (train/precision.h): the forward under Autocast, the loss
//     through a GradScaler, gradient accumulation over micro-batches, the
//     gradient norm clipped after unscale_, then the optimizer and the LR
//     schedule (counted in applied steps under a scaler);
//   * bit-exact resume: counters, loss sums, the generator, the scaler and the
//     schedule travel in the checkpoint; the options that change the
//     arithmetic (Job::config) must match, checked before anything loads;
//   * the progress line with the ETA (train/terminal.h), the step profiler
//     (TrainerOptions::profile), a finite-loss check that stops a diverged run
//     before it writes anything non-finite;
//   * data-parallel runs (TrainerOptions::group): DDP around the model, loss
//     sums averaged over the ranks, rank 0 alone evaluates, prints and writes.
//
// Two clocks: epochs over an hg::data::DataLoader (fit(loader, job): a line,
// an epoch record and a checkpoint after each epoch) or iterations (fit(job):
// Job::next_batch, an evaluation, a line and a checkpoint every eval_every
// steps). The loop keeps the running losses on the device and reads them only
// for the progress line, the metrics and checkpoints.
//
// Messages name hg-train's options (--resume, --max-steps, --lr): each is the
// TrainerOptions field of that name.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amp/fp8.h"
#include "amp/grad_scaler.h"
#include "core/device.h"
#include "core/tensor.h"
#include "optim/lr_scheduler.h"
#include "train/precision.h"
#include "train/report.h"
#include "train/run_folder.h"
#include "train/terminal.h"

namespace hg {
class Generator;
}
namespace hg::nn {
class Module;
}
namespace hg::optim {
class Optimizer;
struct TrainingProgress;
}  // namespace hg::optim
namespace hg::data {
class DataLoader;
}
namespace hg::distributed {
class ProcessGroup;
class DistributedDataParallel;
}  // namespace hg::distributed

namespace hg::train {

using Batch = std::pair<Tensor, Tensor>;  // (input, target)

// What an evaluation hook returns (the Trainer times it).
struct Evaluation {
  double loss = 0.0;
  double accuracy = 0.0;  // in [0, 1]
};
// Called by an evaluation hook after each of its `total` batches (the
// progress line on a terminal); may be ignored.
using EvalProgress = std::function<void(int64_t done, int64_t total)>;

struct TrainerOptions {
  std::string program = "train";   // the prefix of its messages (hg-train: "hg-train")
  std::string out = "runs/train";  // the run folder
  bool resume = false;             // continue from <out>/checkpoint.safetensors
  bool overwrite = false;          // a fresh run may replace an earlier run's files
  Device device = Device::cpu();
  std::string precision = "fp32";  // precision_names(), or "auto" (resolve_precision)
  // The run's length: `epochs` passes over fit(loader, ...)'s loader, or
  // `steps` iterations of fit(job) with an evaluation every `eval_every`
  // steps (0: at the end only).
  int64_t epochs = 1;
  int64_t steps = 0;
  int64_t eval_every = 0;
  int64_t accumulate = 1;  // micro-batches per step: each batch splits into this many along dim 0
  double clip_grad = 0.0;  // clip the global gradient norm (after unscale_) to this; 0: off
  // amp-fp8: Linear layers kept in bf16, by dotted name or a prefix of it
  // (amp::keep_layers); layers whose dims are not multiples of 16 are kept anyway.
  std::vector<std::string> fp8_keep = {};
  int64_t checkpoint_every = 0;  // also a checkpoint every N steps (0: at the epochs / evaluations only)
  int64_t max_steps = 0;         // stop (with a checkpoint) after this many steps in all; 0: no limit
  int64_t log_every = 0;         // a train-loss point every N steps (0: ~1% of an epoch, or eval_every / 25)
  int64_t profile = 0;           // profile the N-th step of this process (docs/profiling.md); 0: none
  std::shared_ptr<distributed::ProcessGroup> group = nullptr;  // data-parallel: one rank of this group
};

struct Job {
  // One (micro-)batch's loss, under autocast; call Trainer::forward for the
  // model's forward, so that a data-parallel run goes through DDP.
  std::function<Tensor(const Tensor& x, const Tensor& y)> loss = nullptr;
  // Iteration runs (fit(job)): the next training batch.
  std::function<Batch()> next_batch = nullptr;
  // Optional: the held-out loss and accuracy (run without gradients, in eval
  // mode, under the training's autocast; on rank 0 only).
  std::function<Evaluation(const EvalProgress&)> evaluate = nullptr;
  Generator* generator = nullptr;  // init, dropout, batches: saved with the checkpoint, restored on resume
  // The options a resumed run must share with the one that wrote the
  // checkpoint ("config.<option>", "data.<property>"; train/resume.h).
  std::map<std::string, std::string> config = {};
  std::string config_hint = "use the same options to continue the run";
  std::string title = "";          // curves.svg's title
  std::string header = "";         // printed once before the first step (after a resume message)
  std::string unit = "samples";    // what a target element is, for the throughput
  double items_per_epoch = 0.0;    // iteration runs: target elements in an epoch (the curves' epoch axis); 0: none
  std::string test_name = "test";  // "test loss" (epoch runs) / "val loss" (iteration runs)
};

struct FitResult {
  bool finished = false;  // false: stopped at max_steps (or nothing to do)
  double seconds = 0.0;   // since fit() began
};

class Trainer {
 public:
  // Opens the run folder (rank 0), reports the device's 16-bit capability and
  // checks the precision can run there; `terminal` (optional) is where lines go.
  explicit Trainer(TrainerOptions options, Terminal* terminal = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Moves the model to the device and the precision's weight dtype, wraps it
  // in DDP in a data-parallel run, names its parameters for the scaler.
  void place(const std::shared_ptr<nn::Module>& model);
  // The optimizer (built over the placed model) and an optional schedule
  // whose clock is schedule_clock().
  void set_optimizer(optim::Optimizer& optimizer, optim::LRScheduler* schedule = nullptr);
  optim::ScheduleClock schedule_clock() const;

  Tensor forward(const Tensor& x);  // the placed model's forward (through DDP when data-parallel)
  // Epochs over `loader` (its batch is this rank's share of the global batch).
  FitResult fit(data::DataLoader& loader, const Job& job);
  // `options.steps` iterations of job.next_batch.
  FitResult fit(const Job& job);

  const Precision& precision() const { return precision_; }
  const std::string& precision_name() const { return options_.precision; }  // resolved
  const TrainerOptions& options() const { return options_; }
  Device device() const { return options_.device; }
  bool lead() const { return rank_ == 0; }  // rank 0: prints, evaluates and writes
  int world_size() const { return world_; }
  int rank() const { return rank_; }
  Terminal& terminal() { return *term_; }
  amp::GradScaler& scaler() { return scaler_; }
  const Metrics& metrics() const { return metrics_; }
  std::string file(const std::string& name) const;  // <out>/<name>
  double lr() const;                                // the lr of the last step

 private:
  // A point of the train-loss curve, still on the device (read when flushed).
  struct PendingPoint {
    long long step;
    double epoch;
    Tensor loss_sum;  // of the interval's batch losses
    int64_t batches;
    double lr;
    Tensor scaler;  // GradScaler::snapshot() (undefined without a scaler)
  };
  Tensor step(const Batch& batch, const Job& job);
  optim::NamedTensors amp_state() const;
  std::map<std::string, std::string> run_config(const Job& job) const;
  void check_ready(const Job& job) const;
  double global_sum(const Tensor& local);
  void require_finite_loss(double v, int64_t epoch_of_step = 0) const;
  void flush_points();
  void push_point(double epoch);
  void save(const Job& job, const std::map<std::string, std::string>& counters, uint64_t epoch, int64_t batch);
  optim::TrainingProgress load(const Job& job, const std::function<void(const optim::TrainingProgress&)>& check);
  void keep_metrics_until(int64_t step, int64_t epochs);
  void progress_line(std::vector<Piece> pieces, double eta_seconds, const std::string& rate_text);
  double elapsed() const;

  TrainerOptions options_;
  std::unique_ptr<Terminal> own_term_;
  Terminal* term_ = nullptr;
  Precision precision_;
  amp::GradScaler scaler_;
  std::unique_ptr<amp::Fp8Training> fp8_;  // amp-fp8 only
  int world_ = 1, rank_ = 0;
  std::optional<RunFolder> folder_;
  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<distributed::DistributedDataParallel> ddp_;
  optim::Optimizer* opt_ = nullptr;
  optim::LRScheduler* schedule_ = nullptr;
  std::vector<Tensor> params_;
  Metrics metrics_;
  std::vector<PendingPoint> pending_;
  // The running state: loss sums on the device since the last curve point
  // (interval) and since the last epoch or evaluation (period).
  Tensor interval_sum_, period_sum_;
  int64_t interval_batches_ = 0, period_batches_ = 0, global_step_ = 0;
  bool by_epoch_ = false;  // fit(loader, job): the curve points carry the epoch
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hg::train

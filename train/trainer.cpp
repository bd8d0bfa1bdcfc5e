#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/profiler.h"
#include "data/dataloader.h"
#include "distributed/ddp.h"
#include "distributed/process_group.h"
#include "nn/module.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "train/resume.h"

namespace hg::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// TrainerOptions::profile: the N-th step of this process (1-based) runs under
// hg::profiler::Profile; its tables by op and by kernel and the modelled time
// on an H200 are printed, the Chrome trace written to <out>/profile-step-N.json.
class StepProfiler {
 public:
  StepProfiler(int64_t step, std::string path, std::string program)
      : step_(step), path_(std::move(path)), program_(std::move(program)) {}
  // Around each step; `done` counts the steps this process has finished.
  void before(int64_t done) {
    if (step_ > 0 && done + 1 == step_) profile_.emplace();
  }
  void after() {
    if (!profile_ || !profile_->running()) return;
    profile_->stop();
    profile_->write_trace(path_);
    std::printf("\n%s: step %lld profiled (trace %s)\n%s\n%s\n", program_.c_str(), static_cast<long long>(step_),
                path_.c_str(), profile_->table().c_str(), profile_->model(profiler::gpu_spec("H200")).table.c_str());
    std::fflush(stdout);
  }

 private:
  int64_t step_;
  std::string path_, program_;
  std::optional<profiler::Profile> profile_;
};

// The rate piece of a line: 41.2k samples/s ("tok/s" for tokens, to stay short).
std::string rate_piece(double rate, const std::string& unit) {
  return short_count(rate) + " " + (unit == "tokens" ? std::string("tok") : unit) + "/s";
}

// The options with "auto" precision resolved for the device.
TrainerOptions resolved(TrainerOptions options) {
  options.precision = resolve_precision(options.precision, options.device);
  return options;
}

}  // namespace

Trainer::Trainer(TrainerOptions options, Terminal* terminal)
    : options_(resolved(std::move(options))),
      precision_(precision_of(options_.precision)),
      scaler_(amp::GradScalerOptions{.enabled = precision_.scaler}) {
  if (terminal == nullptr) own_term_ = std::make_unique<Terminal>();
  term_ = terminal != nullptr ? terminal : own_term_.get();
  HG_CHECK(options_.accumulate >= 1, "accumulate must be >= 1, got ", options_.accumulate);
  if (options_.group) {
    world_ = options_.group->world_size();
    rank_ = options_.group->rank();
  }
  // The run folder first: locked, writable and not someone else's results,
  // before a second is spent on data or training. Rank 0 owns it; the
  // others only read the checkpoint on a resume, after rank 0 checked it.
  if (lead()) {
    folder_.emplace(options_.out, options_.resume      ? StartMode::kResume
                                  : options_.overwrite ? StartMode::kOverwrite
                                                       : StartMode::kFresh);
    if (folder_->stale_temp_files_removed() > 0) {
      term_->paragraph(options_.program + ": removed " + std::to_string(folder_->stale_temp_files_removed()) +
                       " temp file(s) left in " + options_.out + " by killed saves");
    }
  }
  if (options_.group) options_.group->barrier()->wait();  // rank 0 failed: its exit stops the others
  // What this hardware does with 16-bit math, in every mode (so that an fp32
  // run says what it leaves on the table, too).
  term_->paragraph(options_.program + ": " + amp::capability_report(options_.device));
  if (precision_.autocast) {
    amp::Autocast probe(precision_.autocast_dtype);  // raises for bf16 on a GPU without it, naming fp16
  }
  interval_sum_ = zeros({}, {.device = options_.device});
  period_sum_ = zeros({}, {.device = options_.device});
}

Trainer::~Trainer() = default;

void Trainer::place(const std::shared_ptr<nn::Module>& model) {
  HG_CHECK(model != nullptr, "Trainer::place: no model");
  model_ = model;
  model_->to(options_.device);
  model_->to(precision_.weights);
  // Broadcasts rank 0's parameters (identical anyway with the same seed).
  if (options_.group) ddp_ = std::make_unique<distributed::DistributedDataParallel>(model_, options_.group);
  scaler_.set_parameter_names(model_->named_parameters());  // overflow reports name the parameters
  if (precision_.fp8) {                                     // refuses a GPU without fp8 GEMMs, naming amp-bf16
    fp8_ = std::make_unique<amp::Fp8Training>(*model_, options_.device, amp::Fp8Recipe{},
                                              amp::keep_layers(options_.fp8_keep));
    term_->paragraph(options_.program + ": " + fp8_->summary());
  }
  params_ = model_->parameters();
}

void Trainer::set_optimizer(optim::Optimizer& optimizer, optim::LRScheduler* schedule) {
  opt_ = &optimizer;
  schedule_ = schedule;
}

// Under a GradScaler the schedule counts applied steps from the start (not
// ScheduleClock::kAuto, which switches only after the first scaled step:
// after a resume that first step would take the lr of the call clock, which
// differs once a step was skipped).
optim::ScheduleClock Trainer::schedule_clock() const {
  return precision_.scaler ? optim::ScheduleClock::kAppliedSteps : optim::ScheduleClock::kCalls;
}

Tensor Trainer::forward(const Tensor& x) {
  HG_CHECK(model_ != nullptr, "Trainer::forward: place() a model first");
  return ddp_ ? ddp_->forward(x) : model_->forward(x);
}

std::string Trainer::file(const std::string& name) const {
  return folder_ ? folder_->file(name) : (fs::path(options_.out) / name).string();
}

// Under a scaler the schedule runs on the device's applied-step clock and the
// optimizer's host copy of the lr is its base; last_lr() is the lr.
double Trainer::lr() const { return schedule_ ? schedule_->last_lr() : opt_->lr(); }

double Trainer::elapsed() const { return seconds_since(start_); }

void Trainer::check_ready(const Job& job) const {
  HG_CHECK(model_ != nullptr && opt_ != nullptr, "Trainer::fit: place() a model and set_optimizer() first");
  HG_CHECK(static_cast<bool>(job.loss), "Trainer::fit: the job has no loss");
}

// One optimizer step: the forward under autocast, the scaled backward (per
// micro-batch), clipping after unscale_, the step, the scaler's update, the
// schedule. Returns the batch's loss (the mean over micro-batches), detached.
Tensor Trainer::step(const Batch& batch, const Job& job) {
  opt_->zero_grad();
  const int64_t k = options_.accumulate;
  Tensor loss_value;
  if (k == 1) {
    Tensor loss;
    {
      amp::Autocast autocast(precision_.autocast_dtype, /*enabled=*/precision_.autocast);
      amp::Fp8Autocast fp8_region(fp8_ != nullptr);
      loss = job.loss(batch.first, batch.second);
    }
    scaler_.scale(loss).backward();  // without a scaler: loss itself, and step() is opt.step()
    NoGradGuard no_grad;
    loss_value = loss.detach();
  } else {
    const int64_t n = batch.first.size(0);
    HG_CHECK(n % k == 0 && batch.second.size(0) == n, "a batch of ", n, " does not split into ", k,
             " equal micro-batches; use a batch size divisible by accumulate");
    const int64_t m = n / k;
    for (int64_t i = 0; i < k; ++i) {
      // Data-parallel: the gradients are averaged over the ranks once, at the last micro-batch.
      std::optional<distributed::DistributedDataParallel::NoSyncGuard> no_sync;
      if (ddp_ && i + 1 < k) no_sync.emplace(*ddp_);
      Tensor loss;
      {
        amp::Autocast autocast(precision_.autocast_dtype, /*enabled=*/precision_.autocast);
        amp::Fp8Autocast fp8_region(fp8_ != nullptr);
        loss = job.loss(narrow(batch.first, 0, i * m, m), narrow(batch.second, 0, i * m, m));
      }
      scaler_.scale(loss / static_cast<double>(k)).backward();
      NoGradGuard no_grad;
      loss_value = loss_value.defined() ? loss_value + loss.detach() : loss.detach();
    }
    NoGradGuard no_grad;
    loss_value = loss_value / static_cast<double>(k);
  }
  if (options_.clip_grad > 0) {
    scaler_.unscale_(*opt_);
    optim::clip_grad_norm_(params_, options_.clip_grad);
  }
  scaler_.step(*opt_);
  if (fp8_) fp8_->update(scaler_);  // on the device; skipped with the step on an overflow
  scaler_.update();
  if (schedule_) schedule_->step();
  NoGradGuard no_grad;
  interval_sum_ = interval_sum_ + loss_value;
  period_sum_ = period_sum_ + loss_value;
  ++global_step_;
  ++interval_batches_;
  ++period_batches_;
  return loss_value;
}

// The mean over ranks of a per-rank sum (each rank's loss is the mean over its
// part of the global batch, so this is the global batch's loss).
double Trainer::global_sum(const Tensor& local) {
  if (!options_.group) return local.item<double>();
  Tensor t = local.detach().to(kF64).contiguous().clone();
  if (options_.group->backend() == "gloo") t = t.cpu();  // nccl reduces on the device
  options_.group->all_reduce(t, distributed::ReduceOp::kAvg)->wait();
  return t.item<double>();
}

// A diverged run stops here, before anything non-finite reaches a checkpoint
// or metrics.jsonl (the files keep the last finite state).
void Trainer::require_finite_loss(double v, int64_t epoch_of_step) const {
  if (std::isfinite(v)) return;
  if (epoch_of_step > 0) {
    HG_FAIL("the training loss became ", v, " by step ", global_step_, " (epoch ", epoch_of_step,
            "): the run diverged, so it stops here without saving; ",
            "lower --lr or use --clip-grad, then start again (or --resume from the last checkpoint)");
  }
  HG_FAIL("the training loss became ", v, " by step ", global_step_,
          ": the run diverged, so it stops here without saving; lower --lr or --clip-grad, then start again "
          "(or --resume from the last checkpoint)");
}

void Trainer::push_point(double epoch) {
  pending_.push_back({.step = global_step_,
                      .epoch = epoch,
                      .loss_sum = interval_sum_,
                      .batches = interval_batches_,
                      .lr = lr(),
                      .scaler = scaler_.snapshot()});
  interval_sum_ = zeros({}, {.device = options_.device});
  interval_batches_ = 0;
}

// Reads the pending points (one copy each; the device is in sync at the
// callers anyway) into the metrics.
void Trainer::flush_points() {
  for (const PendingPoint& q : pending_) {
    StepRecord r{.step = q.step,
                 .epoch = q.epoch,
                 .train_loss = q.loss_sum.item<double>() / static_cast<double>(q.batches),
                 .lr = q.lr};
    require_finite_loss(r.train_loss, by_epoch_ ? static_cast<int64_t>(std::ceil(q.epoch)) : 0);
    if (q.scaler.defined()) {
      const amp::GradScalerStats st = scaler_.stats_of(q.scaler);
      r.loss_scale = st.scale;
      r.steps_skipped = st.steps_skipped;
    }
    metrics_.steps.push_back(r);
  }
  pending_.clear();
}

// Metrics and curves first, then the checkpoint: a kill between the two
// leaves lines for steps the checkpoint has not reached, which a resume drops
// and writes again; the other order could lose lines for good.
// Data-parallel: every rank calls save at the same steps (global_sum is a
// collective); rank 0 alone writes. Curve points are rank 0's shard.
void Trainer::save(const Job& job, const std::map<std::string, std::string>& counters, uint64_t epoch, int64_t batch) {
  if (!lead()) return;
  write_metrics(file("metrics.jsonl"), metrics_);
  write_curves(file("curves.svg"), metrics_, job.title);
  optim::TrainingProgress p{.epoch = epoch,
                            .batch = batch,
                            .global_step = global_step_,
                            .scheduler_step = schedule_ ? schedule_->last_step() : 0,
                            .generator = job.generator != nullptr ? job.generator->get_state() : GeneratorState{},
                            .extra = run_config(job)};
  for (const auto& [key, value] : counters) p.extra[key] = value;
  p.extra["interval_loss_sum"] = optim::exact_double_string(interval_sum_.item<double>());
  p.extra["interval_batches"] = std::to_string(interval_batches_);
  optim::save_training_checkpoint(file("checkpoint.safetensors"), *model_, *opt_, p, amp_state());
}

// What a resumed run must share with the one that wrote the checkpoint: the
// job's config, and in amp-fp8 the layers kept in bf16 (config.fp8_keep).
std::map<std::string, std::string> Trainer::run_config(const Job& job) const {
  std::map<std::string, std::string> config = job.config;
  if (fp8_) {
    std::string kept;
    for (const std::string& name : options_.fp8_keep) kept += (kept.empty() ? "" : ",") + name;
    config["config.fp8_keep"] = kept;
  }
  return config;
}

// The amp state a checkpoint carries (its "scaler.*" tensors): the
// GradScaler's, and in amp-fp8 the fp8 recipe's histories, scales and
// saturation counts (named "fp8.*").
optim::NamedTensors Trainer::amp_state() const {
  if (!precision_.scaler) return {};
  optim::NamedTensors state = scaler_.state_dict();
  if (fp8_) {
    for (auto& entry : fp8_->state_dict()) state.push_back(std::move(entry));
  }
  return state;
}

// Loads the checkpoint after `check` (which runs before the model or the
// optimizer changes: an atomic load), then the scaler, the generator and the
// schedule.
optim::TrainingProgress Trainer::load(const Job& job,
                                      const std::function<void(const optim::TrainingProgress&)>& check) {
  const std::string ckpt_path = file("checkpoint.safetensors");
  HG_CHECK(fs::exists(ckpt_path), "--resume: no checkpoint at '", ckpt_path, "': no run in '", options_.out,
           "' got as far as its first checkpoint (it stopped early, or never ran); start it afresh with "
           "--overwrite (replaces ",
           options_.program, "'s files there) instead of --resume");
  optim::NamedTensors scaler_state;
  const optim::TrainingProgress p =
      optim::load_training_checkpoint(ckpt_path, *model_, *opt_, &scaler_state, [&](const optim::TrainingProgress& q) {
        check_config(q, run_config(job), {"config.model", "config.precision"}, job.config_hint);
        check(q);
      });
  if (precision_.scaler) {
    HG_CHECK(!scaler_state.empty(), "--resume: the checkpoint holds no loss-scaler state: it was written by an ",
             options_.program, " whose --precision ", options_.precision,
             " had no GradScaler yet; finish that run with the program that started it, or start afresh "
             "(--overwrite)");
    optim::NamedTensors fp8_state;
    std::erase_if(scaler_state, [&](const auto& entry) {
      const bool fp8 = entry.first.rfind("fp8.", 0) == 0;
      if (fp8) fp8_state.push_back(entry);
      return fp8;
    });
    scaler_.load_state_dict(scaler_state);
    if (fp8_) {
      HG_CHECK(!fp8_state.empty(),
               "--resume: the checkpoint holds no fp8 scaling state; it was not written by an "
               "amp-fp8 run");
      fp8_->load_state_dict(fp8_state);
    }
  }
  if (job.generator != nullptr) job.generator->set_state(p.generator);
  if (schedule_) schedule_->set_last_step(p.scheduler_step);
  global_step_ = p.global_step;
  interval_batches_ = 0;
  interval_sum_.fill_(0.0);
  if (p.extra.count("interval_batches") != 0) {  // checkpoints before sub-epoch metrics lack it
    interval_batches_ = extra_int(p, "interval_batches", p.global_step);
    interval_sum_.fill_(extra_sum(p, "interval_loss_sum"));
  }
  return p;
}

// Metrics are written before the checkpoint, so every finished epoch and
// evaluation has its line; lines past the checkpoint (killed between the two
// writes) are dropped here and written again when training gets there.
void Trainer::keep_metrics_until(int64_t step, int64_t epochs) {
  const Metrics earlier = read_metrics(file("metrics.jsonl"));
  for (const auto& r : earlier.epochs) {
    if (r.epoch >= 1 && r.epoch <= epochs) metrics_.epochs.push_back(r);
  }
  for (const auto& r : earlier.steps) {
    if (r.step <= step) metrics_.steps.push_back(r);
  }
  for (const auto& r : earlier.evals) {
    if (r.step <= step) metrics_.evals.push_back(r);
  }
}

// On a terminal the line is redrawn in place (with a bar); elsewhere it is a
// log line without the bar.
void Trainer::progress_line(std::vector<Piece> pieces, double eta_seconds, const std::string& rate_text) {
  if (precision_.scaler) {
    const amp::GradScalerStats st = scaler_.stats();
    pieces.push_back({"scale " + scale_text(st.scale), 1});
    pieces.push_back({"skip " + std::to_string(st.steps_skipped), 1});
  }
  pieces.push_back({clock_time(elapsed()) + " eta " + clock_time(eta_seconds), 2});
  pieces.push_back({rate_text, 4});
  pieces.push_back({fixed("lr %.2e", lr()), 5});
  if (term_->tty()) {
    term_->progress(fit_line(pieces, term_->columns()));
  } else {
    pieces.erase(pieces.begin() + 1);  // no bar in a log
    term_->line("  " + fit_line(pieces, term_->columns() - 2));
  }
}

// ---- epochs over a DataLoader ------------------------------------------------------

FitResult Trainer::fit(data::DataLoader& train, const Job& job) {
  check_ready(job);
  start_ = Clock::now();
  by_epoch_ = true;
  const int64_t epochs = options_.epochs;
  const int64_t num_batches = train.num_batches();
  HG_CHECK(epochs >= 1 && num_batches > 0, "Trainer::fit: ", epochs, " epochs of ", num_batches, " batches");
  const int64_t global_batch = train.batch_size() * world_;
  const int64_t log_every = options_.log_every > 0 ? options_.log_every : std::max<int64_t>(num_batches / 100, 1);
  int64_t samples = 0;  // of the epoch
  if (options_.resume) {
    // The counters must be ones this loop can have produced: every batch is
    // one step, so step = epoch x batches per epoch + batch.
    const optim::TrainingProgress p = load(job, [&](const optim::TrainingProgress& q) {
      HG_CHECK(q.epoch <= static_cast<uint64_t>(epochs) && q.batch <= num_batches,
               "--resume: the checkpoint is at epoch ", q.epoch, ", batch ", q.batch, ", outside this run's ", epochs,
               " epochs of ", num_batches, " batches; the file is corrupt");
      const int64_t expected_step = static_cast<int64_t>(q.epoch) * num_batches + q.batch;
      HG_CHECK(q.global_step == expected_step && q.scheduler_step == (schedule_ != nullptr ? expected_step : 0),
               "--resume: the checkpoint's counters disagree (epoch ", q.epoch, ", batch ", q.batch, ", step ",
               q.global_step, ", scheduler step ", q.scheduler_step, "; expected step ", expected_step,
               "); the file is corrupt");
      HG_CHECK(extra_int(q, "epoch_batches", num_batches) == q.batch &&
                   extra_int(q, "epoch_samples", num_batches * global_batch) == q.batch * global_batch,
               "--resume: the checkpoint's epoch counters disagree with its batch ", q.batch, "; the file is corrupt");
      extra_sum(q, "epoch_loss_sum");
      if (q.extra.count("interval_batches") != 0) {
        extra_int(q, "interval_batches", q.batch);
        extra_sum(q, "interval_loss_sum");
      }
    });
    train.set_epoch(p.epoch);
    train.skip(p.batch);
    period_sum_.fill_(extra_sum(p, "epoch_loss_sum"));  // checked
    period_batches_ = p.batch;  // checked: epoch_batches == batch, epoch_samples == batch x batch size
    samples = p.batch * global_batch;
    keep_metrics_until(global_step_, static_cast<int64_t>(p.epoch));
    if (lead() && metrics_.epochs.size() != p.epoch) {
      term_->paragraph(options_.program + ": warning: " + file("metrics.jsonl") + " holds " +
                       std::to_string(metrics_.epochs.size()) + " of the " + std::to_string(p.epoch) +
                       " finished epochs' lines");
    }
    term_->paragraph(options_.program + ": resuming from " + file("checkpoint.safetensors") + " at epoch " +
                     std::to_string(p.epoch + 1) + ", batch " + std::to_string(p.batch) + " (step " +
                     std::to_string(global_step_) + ")");
  }
  // The epoch of the last step taken (the loader may already be at the next).
  auto epoch_of_step = [&] { return global_step_ > 0 ? (global_step_ - 1) / num_batches + 1 : 1; };
  auto save_epoch_state = [&] {
    const double sum = global_sum(period_sum_);
    require_finite_loss(sum, epoch_of_step());
    flush_points();
    save(job,
         {{"epoch_loss_sum", optim::exact_double_string(sum)},
          {"epoch_batches", std::to_string(period_batches_)},
          {"epoch_samples", std::to_string(samples)}},
         train.epoch(), train.position());
  };

  if (!job.header.empty()) term_->paragraph(job.header);
  const int64_t total_steps =
      options_.max_steps > 0 ? std::min<int64_t>(options_.max_steps, num_batches * epochs) : num_batches * epochs;
  if (options_.max_steps > 0 && global_step_ >= options_.max_steps) {
    term_->paragraph(options_.program + ": the checkpoint is at step " + std::to_string(global_step_) +
                     ", already at --max-steps " + std::to_string(options_.max_steps) +
                     ": nothing to do (raise --max-steps, or drop it, to continue)");
    return {false, elapsed()};
  }
  const int64_t first_step = global_step_;
  StepProfiler profiler(options_.profile, file("profile-step-" + std::to_string(options_.profile) + ".json"),
                        options_.program);
  double train_seconds = 0.0;  // this process's training time, without evaluation
  double eval_seconds = -1.0;  // the last evaluation's time (< 0: none yet)
  // Seconds left: the remaining steps at this process's pace, plus the
  // evaluations still to come (at the last one's pace).
  auto eta = [&](double epoch_train_seconds, double eval_left) {
    const int64_t steps_done = global_step_ - first_step;
    if (steps_done <= 0) return -1.0;
    const double per_step = (train_seconds + epoch_train_seconds) / static_cast<double>(steps_done);
    const int64_t evals_left = epochs - static_cast<int64_t>(train.epoch()) - (eval_left > 0 ? 1 : 0);
    const double per_eval = eval_seconds >= 0 && job.evaluate ? eval_seconds : 0.0;
    return per_step * static_cast<double>(std::max<int64_t>(total_steps - global_step_, 0)) +
           per_eval * static_cast<double>(std::max<int64_t>(evals_left, 0)) + per_eval * eval_left;
  };
  bool stopped = false;
  while (!stopped && static_cast<int64_t>(train.epoch()) < epochs) {
    const int64_t epoch = static_cast<int64_t>(train.epoch()) + 1;
    const std::string epoch_text = "epoch " + std::to_string(epoch) + "/" + std::to_string(epochs);
    const auto epoch_start = Clock::now();
    const int64_t batches_before = period_batches_;  // > 0 after a mid-epoch resume
    int64_t samples_timed = 0;
    auto rate = [&] {
      const double secs = seconds_since(epoch_start);
      return secs > 0 ? static_cast<double>(samples_timed) / secs : 0.0;
    };
    // tty: the line is redrawn every 10 steps; elsewhere a line at every quarter.
    const int64_t report_every = term_->tty() ? 10 : std::max<int64_t>(num_batches / 4, 1);
    for (auto [x, y] : train) {
      profiler.before(global_step_ - first_step);
      step({x, y}, job);
      profiler.after();
      samples += y.numel() * world_;  // the global batch
      samples_timed += y.numel() * world_;
      const int64_t batches = period_batches_;
      if (batches % log_every == 0 || batches == num_batches) {
        push_point(static_cast<double>(epoch - 1) + static_cast<double>(batches) / static_cast<double>(num_batches));
      }
      if (batches % report_every == 0 && batches != num_batches) {
        const double sum = period_sum_.item<double>();
        require_finite_loss(sum, epoch_of_step());
        flush_points();
        progress_line({{epoch_text},
                       {"", 3, true, static_cast<double>(batches) / static_cast<double>(num_batches)},
                       {std::to_string(batches) + "/" + std::to_string(num_batches), 2},
                       {fixed("loss %.4f", sum / static_cast<double>(batches))}},
                      eta(seconds_since(epoch_start), 0.0), rate_piece(rate(), job.unit));
      }
      if (options_.checkpoint_every > 0 && global_step_ % options_.checkpoint_every == 0) save_epoch_state();
      if (options_.max_steps > 0 && global_step_ >= options_.max_steps) {
        stopped = true;
        break;
      }
    }
    if (stopped) {
      save_epoch_state();
      term_->line("stopped after step " + std::to_string(global_step_) +
                  " (--max-steps); continue with --resume --out " + options_.out);
      break;
    }
    // The pass ended: the loader has moved on to the next epoch.
    const double secs = seconds_since(epoch_start);
    const double epoch_rate = rate();
    train_seconds += secs;
    const double train_loss = global_sum(period_sum_) / static_cast<double>(std::max<int64_t>(period_batches_, 1));
    require_finite_loss(train_loss, epoch_of_step());
    // Rank 0 evaluates (the models are identical); the others go on.
    Evaluation eval;
    if (lead() && job.evaluate) {
      const auto eval_start = Clock::now();
      NoGradGuard no_grad;
      model_->eval();
      {
        amp::Autocast autocast(precision_.autocast_dtype, precision_.autocast);
        amp::Fp8Autocast fp8_region(fp8_ != nullptr);
        eval = job.evaluate([&](int64_t done, int64_t total) {
          if (!term_->tty()) return;
          const double left = static_cast<double>(total - done) / static_cast<double>(std::max<int64_t>(total, 1));
          term_->progress(fit_line({{epoch_text},
                                    {"evaluating"},
                                    {"", 3, true, static_cast<double>(done) / static_cast<double>(total)},
                                    {std::to_string(done) + "/" + std::to_string(total), 2},
                                    {clock_time(elapsed()) + " eta " + clock_time(eta(0.0, left)), 2}},
                                   term_->columns()));
        });
      }
      model_->train();
      eval_seconds = seconds_since(eval_start);
    }
    EpochRecord record{.epoch = static_cast<int>(epoch),
                       .step = global_step_,
                       .lr = lr(),
                       .train_loss = train_loss,
                       .test_loss = eval.loss,
                       .test_accuracy = eval.accuracy,
                       .seconds = secs,
                       .samples_per_second = epoch_rate};
    long long skipped_in_epoch = 0;
    if (precision_.scaler) {
      const amp::GradScalerStats st = scaler_.stats();  // one host read per epoch
      record.loss_scale = st.scale;
      record.steps_skipped = st.steps_skipped;
      const long long before = metrics_.epochs.empty() ? 0 : metrics_.epochs.back().steps_skipped;
      skipped_in_epoch = st.steps_skipped - before;
    }
    metrics_.epochs.push_back(record);
    // Fitted to the width like the progress line: a narrow terminal (or a
    // log, 80 columns) loses the throughput, then the time, then the scale,
    // then the test loss (metrics.jsonl keeps them all).
    std::vector<Piece> summary{{epoch_text + ": " + fixed("train loss %.4f", train_loss)}};
    if (job.evaluate) {
      summary.push_back({job.test_name + fixed(" loss %.4f", eval.loss), 3});
      summary.push_back({fixed("accuracy %.2f%%", 100.0 * eval.accuracy)});
    }
    if (precision_.scaler) {
      summary.push_back({"scale " + scale_text(record.loss_scale), 4});
      if (skipped_in_epoch > 0) summary.push_back({std::to_string(skipped_in_epoch) + " skipped", 2});
    }
    summary.push_back({fixed("%.1f s", secs), 5});
    summary.push_back(
        {short_count(epoch_rate) + " " + job.unit + "/s" + (batches_before > 0 ? " (resumed mid-epoch)" : ""), 6});
    term_->line(fit_line(summary, term_->columns()));
    period_sum_.fill_(0.0);
    period_batches_ = samples = 0;
    save_epoch_state();
  }
  return {!stopped, elapsed()};
}

// ---- iterations ------------------------------------------------------------------

FitResult Trainer::fit(const Job& job) {
  check_ready(job);
  HG_CHECK(static_cast<bool>(job.next_batch), "Trainer::fit: an iteration run needs Job::next_batch");
  const int64_t steps = options_.steps;
  HG_CHECK(steps >= 1, "Trainer::fit: steps must be >= 1, got ", steps);
  start_ = Clock::now();
  const int64_t eval_every = options_.eval_every > 0 ? options_.eval_every : steps;
  const int64_t log_every = options_.log_every > 0 ? options_.log_every : std::max<int64_t>(eval_every / 25, 1);
  if (options_.resume) {
    const optim::TrainingProgress p = load(job, [&](const optim::TrainingProgress& q) {
      HG_CHECK(q.global_step >= 0 && q.global_step <= steps && q.epoch == 0 && q.batch == 0 &&
                   q.scheduler_step == (schedule_ != nullptr ? q.global_step : 0),
               "--resume: the checkpoint's counters (step ", q.global_step, ", scheduler step ", q.scheduler_step,
               ") do not fit a run of ", steps, " iterations; the file is corrupt");
      extra_int(q, "interval_batches", q.global_step);
      extra_int(q, "eval_interval_batches", q.global_step);
      extra_sum(q, "interval_loss_sum");
      extra_sum(q, "eval_interval_loss_sum");
    });
    period_batches_ = extra_int(p, "eval_interval_batches", p.global_step);
    period_sum_.fill_(extra_sum(p, "eval_interval_loss_sum"));
    keep_metrics_until(global_step_, 0);
    term_->paragraph(options_.program + ": resuming from " + file("checkpoint.safetensors") + " at step " +
                     std::to_string(global_step_));
  }
  auto save_state = [&] {
    flush_points();
    const double sum = global_sum(period_sum_);
    require_finite_loss(sum);
    save(job,
         {{"eval_interval_loss_sum", optim::exact_double_string(sum)},
          {"eval_interval_batches", std::to_string(period_batches_)}},
         0, 0);
  };

  if (!job.header.empty()) term_->paragraph(job.header);
  if (options_.max_steps > 0 && global_step_ >= options_.max_steps) {
    term_->paragraph(options_.program + ": the checkpoint is at step " + std::to_string(global_step_) +
                     ", already at --max-steps " + std::to_string(options_.max_steps) +
                     ": nothing to do (raise --max-steps, or drop it, to continue)");
    return {false, elapsed()};
  }
  const int64_t first_step = global_step_;
  double eval_seconds_total = 0.0;
  double items_done = 0.0, items_interval = 0.0;  // target elements, for the rates
  auto interval_start = Clock::now();
  const int64_t report_every = term_->tty() ? 5 : std::max<int64_t>(eval_every / 5, 1);
  const int64_t last_step = options_.max_steps > 0 ? std::min(options_.max_steps, steps) : steps;
  StepProfiler profiler(options_.profile, file("profile-step-" + std::to_string(options_.profile) + ".json"),
                        options_.program);
  const std::string of_steps = "/" + std::to_string(steps);
  while (global_step_ < steps) {
    const Batch batch = job.next_batch();
    profiler.before(global_step_ - first_step);
    step(batch, job);
    profiler.after();
    const double items = static_cast<double>(batch.second.numel() * world_);
    items_done += items;
    items_interval += items;
    const double train_seconds = elapsed() - eval_seconds_total;
    const double rate = train_seconds > 0 ? items_done / train_seconds : 0.0;
    if (global_step_ % log_every == 0 || global_step_ == steps) {
      push_point(job.items_per_epoch > 0 ? static_cast<double>(global_step_) * items / job.items_per_epoch : 0.0);
    }
    const bool eval_now = global_step_ % eval_every == 0 || global_step_ == steps;
    if (!eval_now && global_step_ % report_every == 0) {
      const double mean = period_sum_.item<double>() / static_cast<double>(std::max<int64_t>(period_batches_, 1));
      require_finite_loss(mean);
      const double per_step = train_seconds / static_cast<double>(global_step_ - first_step);
      progress_line({{"step " + std::to_string(global_step_) + of_steps},
                     {"", 3, true, static_cast<double>(global_step_) / static_cast<double>(steps)},
                     {fixed("loss %.4f", mean)}},
                    per_step * static_cast<double>(last_step - global_step_), rate_piece(rate, job.unit));
    }
    if (eval_now) {
      const double train_loss = global_sum(period_sum_) / static_cast<double>(std::max<int64_t>(period_batches_, 1));
      require_finite_loss(train_loss);
      Evaluation ev;
      double ev_seconds = 0.0;
      if (lead() && job.evaluate) {
        if (term_->tty()) term_->progress("step " + std::to_string(global_step_) + ": evaluating");
        const auto eval_start = Clock::now();
        NoGradGuard no_grad;
        model_->eval();
        {
          amp::Autocast autocast(precision_.autocast_dtype, precision_.autocast);
          amp::Fp8Autocast fp8_region(fp8_ != nullptr);
          ev = job.evaluate([](int64_t, int64_t) {});
        }
        model_->train();
        ev_seconds = seconds_since(eval_start);
      }
      eval_seconds_total += ev_seconds;
      const double interval_seconds = seconds_since(interval_start) - ev_seconds;
      EvalRecord r{.step = global_step_,
                   .lr = lr(),
                   .train_loss = train_loss,
                   .val_loss = ev.loss,
                   .val_accuracy = ev.accuracy,
                   .seconds = interval_seconds,
                   .tokens_per_second = interval_seconds > 0 ? items_interval / interval_seconds : 0.0};
      if (precision_.scaler) {
        const amp::GradScalerStats st = scaler_.stats();
        r.loss_scale = st.scale;
        r.steps_skipped = st.steps_skipped;
      }
      metrics_.evals.push_back(r);
      std::vector<Piece> summary{
          {"step " + std::to_string(global_step_) + of_steps + ": " + fixed("train loss %.4f", train_loss)}};
      if (job.evaluate) {
        summary.push_back({job.test_name + fixed(" loss %.4f", ev.loss)});
        summary.push_back({job.test_name + fixed(" accuracy %.2f%%", 100.0 * ev.accuracy), 3});
      }
      if (precision_.scaler) summary.push_back({"scale " + scale_text(r.loss_scale), 4});
      summary.push_back({fixed("%.1f s", interval_seconds), 5});
      summary.push_back({short_count(r.tokens_per_second) + " " + job.unit + "/s", 6});
      term_->line(fit_line(summary, term_->columns()));
      period_sum_.fill_(0.0);
      period_batches_ = 0;
      items_interval = 0.0;
      interval_start = Clock::now();
      save_state();
    } else if (options_.checkpoint_every > 0 && global_step_ % options_.checkpoint_every == 0) {
      save_state();
    }
    if (options_.max_steps > 0 && global_step_ >= options_.max_steps && global_step_ < steps) {
      if (!eval_now) save_state();
      term_->line("stopped after step " + std::to_string(global_step_) +
                  " (--max-steps); continue with --resume --out " + options_.out);
      return {false, elapsed()};
    }
  }
  return {true, elapsed()};
}

}  // namespace hg::train

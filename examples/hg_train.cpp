// hg-train — the main job: trains an MLP on Fashion-MNIST and reports
// per-epoch train loss, test loss, test accuracy and throughput; writes
// metrics.jsonl, curves.svg and a training checkpoint into --out, and
// continues bit-exactly from that checkpoint with --resume.
//
//   hg-train                                   # defaults: 784-256-128-10 MLP, amp-fp16, AdamW + warmup/cosine, 8 epochs
//   hg-train --precision fp32 --device cuda --epochs 5
//   hg-train --limit 2000 --epochs 1           # a smoke run
//   hg-train --max-steps 500 && hg-train --resume   # stop early, continue later
//
// Precision modes (docs/amp.md, docs/training.md):
//   amp-fp16 (default), amp-bf16: fp32 weights, the forward under
//     hg::amp::Autocast (matmuls in 16 bits, softmax/loss in fp32) and a
//     GradScaler;
//   fp16-master, bf16-master: the model itself in 16 bits, fp32 master
//     weights in the optimizer, the forward under Autocast too (so the
//     fp32-class ops run in fp32) and a GradScaler;
//   fp32: everything f32, no autocast, no scaler.
// The checkpoint carries the scaler in every mode that has one.
//
// The loop keeps the running losses on the device (one add per step) and
// reads them only for the progress line, the metrics and checkpoints, so a
// GPU is not synchronised every step.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "core/log.h"
#include "core/version.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "data/text.h"
#include "nn/models/cnn.h"
#include "distributed/ddp.h"
#include "distributed/process_group.h"
#include "train/run_folder.h"
#include "train/terminal.h"
#include "train/common.h"
#include "examples/train_gpt.h"
#include "train/report.h"
#include "kernels/gemm.h"
#include "kernels/reduce.h"
#include "nn/layers.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/make_optimizer.h"
#include "optim/optimizer.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using hg::train::decimal;
using hg::train::extra_int;
using hg::train::extra_sum;
using hg::train::pick_device;
using hg::train::Piece;
using hg::train::Precision;
using hg::train::precision_of;
using hg::train::scale_text;

struct Options {
  std::string model = "mlp";
  std::string device = "auto";
  std::string precision = "amp-fp16";
  int epochs = 8;
  int64_t batch_size = 128;
  double lr = 2e-3;
  std::string optimizer = "adamw";
  std::string schedule = "cosine";
  int64_t warmup_steps = 200;
  double clip_grad = 0.0;
  uint64_t seed = 0;
  int64_t limit = 0;
  int64_t test_limit = 0;
  std::string data = hg::data::FashionMnist::kDefaultRoot;
  std::string out = "runs/hg-train";
  bool resume = false;
  bool overwrite = false;
  int64_t checkpoint_every = 0;
  int64_t max_steps = 0;
  int64_t profile = 0;  // --profile N: profile the N-th step of this process
  int nproc = 0;        // 0: one process, or WORLD_SIZE when launched
  int64_t log_every = 0;
};

// ---- the model: --model picks it here, and only here --------------------------

std::shared_ptr<hg::nn::Module> make_mlp(hg::Generator* gen) {
  using namespace hg::nn;
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Linear>(784, 256, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(256, 128, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(128, 10, true, gen)});
}

std::shared_ptr<hg::nn::Module> make_model(const Options& o, hg::Generator* gen) {
  if (o.model == "mlp") return make_mlp(gen);
  if (o.model == "cnn") return hg::train::make_cnn(gen);
  HG_FAIL("--model ", o.model, " is not a model hg-train knows");
}

// ---- options --------------------------------------------------------------------

// The options a resumed run must share with the run that wrote the checkpoint
// (anything that changes the arithmetic); stored as checkpoint extras.
std::map<std::string, std::string> run_config(const Options& o) {
  return {{"config.model", o.model},
          {"config.precision", o.precision},
          {"config.epochs", std::to_string(o.epochs)},
          {"config.batch_size", std::to_string(o.batch_size)},
          {"config.lr", hg::optim::exact_double_string(o.lr)},
          {"config.schedule", o.schedule},
          {"config.warmup_steps", std::to_string(o.warmup_steps)},
          {"config.clip_grad", hg::optim::exact_double_string(o.clip_grad)},
          {"config.seed", std::to_string(o.seed)},
          {"config.limit", std::to_string(o.limit)}};
}

// A checkpoint's config value as the user typed it: the exact hex form of
// floating options ("%a", so that the comparison is exact) shown in decimal.
std::string shown_config_value(const std::string& key, const std::string& value) {
  if (key != "config.lr" && key != "config.clip_grad") return value;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  return end != nullptr && *end == '\0' && !value.empty() ? decimal(v) : value;
}

// CLI11 validators with messages a person reads ("--epochs: must be >= 1,
// got 0"), not CLI11's ranges (which print the type's 300-digit maximum).
CLI::Validator at_least(double min, const std::string& what = "") {
  const std::string bound = ">= " + decimal(min);
  return CLI::Validator(
      [min, bound, what](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < min) {
          return "must be " + (what.empty() ? std::string("a number ") : what + " ") + bound + ", got '" + text + "'";
        }
        return std::string();
      },
      "");  // the range is in the option's help text
}

// --lr: the optimizer keeps it as an f32, so it must be a normal f32 > 0
// (a larger value would become inf, a denormal one 0 or imprecise).
CLI::Validator learning_rate() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || std::isnan(v)) return "must be a number, got '" + text + "'";
        if (v <= 0) return "must be > 0, got '" + text + "'";
        if (v > static_cast<double>(std::numeric_limits<float>::max())) {
          return "must be at most 3.4e38 (the largest float the optimizer holds), got '" + text + "'";
        }
        if (v < static_cast<double>(std::numeric_limits<float>::min())) {
          return "must be at least 1.2e-38 (the smallest normal float; a smaller learning rate trains nothing), "
                 "got '" +
                 text + "'";
        }
        return std::string();
      },
      "");
}

// --seed: a whole number that fits 64 bits (larger ones are refused, not
// saturated to 2^64 - 1).
CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
        uint64_t v = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (!digits || ec != std::errc() || ptr != text.data() + text.size()) {
          return "must be a whole number in [0, 18446744073709551615] (2^64 - 1), got '" + text + "'";
        }
        return std::string();
      },
      "");
}

// --nproc: each process is a full hg-train, so the count is bounded: a typo
// must not exhaust the machine's process IDs.
constexpr int kMaxProcesses = 256;
CLI::Validator process_count() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int v = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const bool whole = !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
        if (whole && v == 0) {
          return "0 processes cannot train; give the number of data-parallel processes (2 or more), or leave "
                 "--nproc out to train in one process";
        }
        if (!whole || v < 1 || v > kMaxProcesses) {
          return "must be a whole number of processes from 1 to " + std::to_string(kMaxProcesses) +
                 " (each is a full hg-train on this machine), got '" + text.substr(0, 40) + "'";
        }
        return std::string();
      },
      "");
}

CLI::Validator positive_finite() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0) {
          return "must be a finite number > 0, got '" + text + "'";
        }
        return std::string();
      },
      "");
}

// Under a GradScaler the schedule counts applied steps from the start (not
// ScheduleClock::kAuto, which switches only after the first scaled step: after
// a resume that first step would take the lr of the call clock, which differs
// once a step was skipped).
std::unique_ptr<hg::optim::LRScheduler> make_schedule(const Options& o, hg::optim::Optimizer& opt,
                                                      int64_t steps_per_epoch, bool scaler, hg::train::Terminal& term) {
  const int64_t total = steps_per_epoch * o.epochs;
  const hg::optim::ScheduleClock clock =
      scaler ? hg::optim::ScheduleClock::kAppliedSteps : hg::optim::ScheduleClock::kCalls;
  if (o.schedule == "cosine") {
    // A short run (--limit) gets at most half of its steps as warmup.
    const int64_t warmup = std::min(o.warmup_steps, total / 2);
    if (warmup < o.warmup_steps) {
      term.paragraph("hg-train: " + std::to_string(total) + " steps in all, so the warmup is " +
                     std::to_string(warmup) + " steps instead of " + std::to_string(o.warmup_steps));
    }
    return std::make_unique<hg::optim::WarmupCosineLR>(
        opt, hg::optim::WarmupCosineOptions{
                 .warmup_steps = warmup, .total_steps = total, .min_lr_ratio = 0.0, .clock = clock});
  }
  if (o.schedule == "step") {  // halve the rate after every epoch
    return std::make_unique<hg::optim::StepLR>(
        opt,
        hg::optim::StepLROptions{.step_size = std::max<int64_t>(steps_per_epoch, 1), .gamma = 0.5, .clock = clock});
  }
  return nullptr;  // constant
}

// Checks a checkpoint's counters and options against this run before
// anything is loaded (load_training_checkpoint calls it first): the same
// options, and counters that hg-train's loop can have produced — every
// batch is one step, so step = epoch x batches per epoch + batch.
void check_resume(const hg::optim::TrainingProgress& p, const Options& o, int64_t num_batches, bool scheduled) {
  const auto config = run_config(o);
  // The model and the precision first: a different one would otherwise
  // surface as a missing option or a dtype mismatch.
  for (const std::string first : {"config.model", "config.precision", ""}) {
    for (const auto& [key, value] : config) {
      if (!first.empty() ? key != first : key == "config.model" || key == "config.precision") continue;
      auto it = p.extra.find(key);
      HG_CHECK(
          it != p.extra.end() && it->second == value, "--resume: the checkpoint was written with --", key.substr(7),
          " = ", it == p.extra.end() ? std::string("(none)") : shown_config_value(key, it->second.substr(0, 60)),
          ", this run has ", shown_config_value(key, value),
          key == "config.precision" ? " (the precision differs)" : "", "; use the same options to continue the run");
    }
  }
  HG_CHECK(p.epoch <= static_cast<uint64_t>(o.epochs) && p.batch <= num_batches, "--resume: the checkpoint is at epoch ",
           p.epoch, ", batch ", p.batch, ", outside this run's ", o.epochs, " epochs of ", num_batches,
           " batches; the file is corrupt");
  const int64_t expected_step = static_cast<int64_t>(p.epoch) * num_batches + p.batch;
  HG_CHECK(p.global_step == expected_step && p.scheduler_step == (scheduled ? expected_step : 0),
           "--resume: the checkpoint's counters disagree (epoch ", p.epoch, ", batch ", p.batch, ", step ",
           p.global_step, ", scheduler step ", p.scheduler_step, "; expected step ", expected_step,
           "); the file is corrupt");
  HG_CHECK(extra_int(p, "epoch_batches", num_batches) == p.batch &&
               extra_int(p, "epoch_samples", num_batches * o.batch_size) == p.batch * o.batch_size,
           "--resume: the checkpoint's epoch counters disagree with its batch ", p.batch, "; the file is corrupt");
  extra_sum(p, "epoch_loss_sum");
  if (p.extra.count("interval_batches") != 0) {  // checkpoints before sub-epoch metrics lack it
    extra_int(p, "interval_batches", p.batch);
    extra_sum(p, "interval_loss_sum");
  }
}

struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;
  double seconds = 0.0;
};

// The test set, in the training's precision (under the same autocast);
// `progress(done, total)` after each batch.
EvalResult evaluate(hg::nn::Module& model, hg::data::DataLoader& loader, const Precision& prec,
                    const std::function<void(int64_t, int64_t)>& progress) {
  const auto start = Clock::now();
  hg::NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0.0;
  int64_t correct = 0, seen = 0, done = 0;
  for (auto [x, y] : loader) {
    hg::Tensor logits, loss;
    {
      hg::amp::Autocast autocast(prec.autocast_dtype, prec.autocast);
      logits = model.forward(x);
      loss = hg::cross_entropy(logits, y);
    }
    loss_sum += loss.item<double>() * static_cast<double>(y.numel());
    const auto predicted = hg::ops::argmax(logits, 1).to_vector<int64_t>();
    const auto labels = y.to_vector<int64_t>();
    for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
    seen += y.numel();
    progress(++done, loader.num_batches());
  }
  model.train();
  return {loss_sum / static_cast<double>(std::max<int64_t>(seen, 1)),
          static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1)),
          std::chrono::duration<double>(Clock::now() - start).count()};
}

// A point of the sub-epoch curve, still on the device (read when flushed).
struct PendingPoint {
  long long step;
  double epoch;
  hg::Tensor loss_sum;  // sum of the interval's batch losses
  int64_t batches;
  double lr;
  hg::Tensor scaler;  // GradScaler::snapshot() (undefined without a scaler)
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"hg-train: train a model on Fashion-MNIST with halfgrad (docs/training.md)"};
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", std::string("hg-train (halfgrad) ") + hg::version(),
                       "print the halfgrad version and exit");
  app.add_option("--model", o.model,
                 "model: mlp | cnn (Fashion-MNIST, docs/training.md) | gpt (a character-level GPT on text, "
                 "docs/gpt.md; its own defaults: --precision auto (amp-bf16 where bf16 matmuls are native: a GPU "
                 "with bf16, a CPU with AVX512_BF16; else fp32 on a CPU, amp-fp16 on a GPU), "
                 "--batch-size 12, --lr 1e-3, --warmup-steps 100, --clip-grad 1, --data " +
                     std::string(hg::data::CharCorpus::kFortunesRoot) + ", --out runs/hg-train-gpt)")
      ->check(CLI::IsMember({"mlp", "cnn", "gpt"}));
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N");
  app.add_option("--precision", o.precision,
                 "amp-fp16 | amp-bf16 (fp32 weights, autocast, loss scaler) | fp16-master | bf16-master "
                 "(16-bit weights with fp32 masters, autocast, loss scaler) | fp32")
      ->check(CLI::IsMember({"fp32", "fp16-master", "bf16-master", "amp-fp16", "amp-bf16", "auto"}));
  app.add_option("--epochs", o.epochs, "passes over the training set (>= 1)")->check(at_least(1, "an integer"));
  app.add_option("--batch-size", o.batch_size, "samples per step (>= 1)")->check(at_least(1, "an integer"));
  app.add_option("--lr", o.lr, "AdamW peak learning rate (a normal float > 0)")->check(learning_rate());
  app.add_option("--optimizer", o.optimizer,
                 "adamw | lion (lr / 3) | muon (hidden matrices at 20 x lr, the rest AdamW); "
                 "hg::optim::make_optimizer, docs/optim.md")
      ->check(CLI::IsMember({"adamw", "lion", "muon"}));
  app.add_option("--schedule", o.schedule, "learning-rate schedule: cosine (linear warmup, cosine decay to 0) | "
                                           "step (halve every epoch) | constant")
      ->check(CLI::IsMember({"cosine", "step", "constant"}));
  app.add_option("--warmup-steps", o.warmup_steps, "linear warmup steps of the cosine schedule (>= 0)")
      ->check(at_least(0, "an integer"));
  app.add_option("--clip-grad", o.clip_grad, "clip the global gradient norm to this value (>= 0; 0 = off)")
      ->check(at_least(0));
  // "-1" would wrap to 18446744073709551615 in the unsigned seed.
  app.add_option("--seed", o.seed, "seed for init and shuffling (>= 0)")->check(seed_value());
  app.add_option("--limit", o.limit, "use only the first N training samples (0 = all)")
      ->check(at_least(0, "an integer"));
  app.add_option("--test-limit", o.test_limit, "evaluate on only the first N test samples (0 = all)")
      ->check(at_least(0, "an integer"));
  app.add_option("--data", o.data,
                 "folder with the Fashion-MNIST .gz files (--model gpt: a text file or a folder of them)");
  app.add_option("--out", o.out, "folder for checkpoint.safetensors, metrics.jsonl and curves.svg");
  auto* resume_flag = app.add_flag("--resume", o.resume, "continue from <out>/checkpoint.safetensors (bit-exact)");
  app.add_flag("--overwrite", o.overwrite,
               "start afresh in an --out that holds an earlier run (deletes its checkpoint, metrics and curves)")
      ->excludes(resume_flag);
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "also write the checkpoint every N steps (0 = after each epoch only)")
      ->check(at_least(0, "an integer"));
  app.add_option("--profile", o.profile,
                 "profile the N-th step of this process: tables by op and kernel, and <out>/profile-step-N.json, a "
                 "Chrome trace (docs/profiling.md)")
      ->check(at_least(0, "an integer"));
  app.add_option("--max-steps", o.max_steps, "stop after this many steps in total, with a checkpoint (0 = no limit)")
      ->check(at_least(0, "an integer"));
  app.add_option("--log-every", o.log_every,
                 "a train-loss point in metrics.jsonl and curves.svg every N steps (0 = about 1% of an epoch)")
      ->check(at_least(0, "an integer"));
  app.add_option("--nproc", o.nproc,
                 "data-parallel over N local processes started through hg-run (gloo on cpu, nccl on cuda); "
                 "--batch-size is the global batch and must be divisible by N (1 to 256; leave it out for one "
                 "process)")
      ->check(process_count());
  // The GPT job's own options (--model gpt; docs/gpt.md).
  hg::train::GptJobOptions g;
  const std::vector<CLI::Option*> gpt_only{
      app.add_option("--iters", g.iters, "--model gpt: training iterations (>= 1)")->check(at_least(1, "an integer")),
      app.add_option("--eval-every", g.eval_every, "--model gpt: evaluate, log and checkpoint every N steps (>= 1)")
          ->check(at_least(1, "an integer")),
      app.add_option("--eval-batches", g.eval_batches,
                     "--model gpt: validation windows = this x --batch-size, evenly spaced over the split (>= 1)")
          ->check(at_least(1, "an integer")),
      app.add_option("--n-layer", g.n_layer, "--model gpt: transformer blocks (>= 1)")
          ->check(at_least(1, "an integer")),
      app.add_option("--n-head", g.n_head, "--model gpt: attention heads (>= 1)")->check(at_least(1, "an integer")),
      app.add_option("--n-embd", g.n_embd, "--model gpt: width, a multiple of --n-head (>= 1)")
          ->check(at_least(1, "an integer")),
      app.add_option("--block-size", g.block_size, "--model gpt: context length in characters (>= 1)")
          ->check(at_least(1, "an integer")),
      app.add_option("--dropout", g.dropout, "--model gpt: dropout probability in [0, 1)")
          ->check(CLI::Range(0.0, 0.999999)),
      app.add_option("--weight-decay", g.weight_decay, "--model gpt: AdamW weight decay of the matrices (>= 0)")
          ->check(at_least(0)),
      app.add_option("--sample-tokens", g.sample_tokens, "--model gpt: characters to generate at the end (>= 0)")
          ->check(at_least(0, "an integer")),
      app.add_option("--temperature", g.temperature, "--model gpt: sampling temperature (> 0)")
          ->check(positive_finite()),
      app.add_option("--top-k", g.top_k, "--model gpt: sample from the k most likely characters (0 = all)")
          ->check(at_least(0, "an integer"))};
  CLI11_PARSE(app, argc, argv);
  if (o.model == "gpt") {
    // Options of the epoch-based job mean nothing here: refuse them rather than ignore them.
    for (const char* name : {"--epochs", "--limit", "--test-limit"}) {
      if (app.count(name) != 0) {
        std::fprintf(stderr, "hg-train: %s is for --model mlp|cnn; --model gpt counts --iters instead\n", name);
        return 1;
      }
    }
    if (o.nproc > 1 || hg::distributed::launch_env().launched()) {
      std::fprintf(stderr, "hg-train: --model gpt trains in one process; data-parallel runs are --model mlp|cnn\n");
      return 1;
    }
    if (o.schedule == "step") {
      std::fprintf(stderr, "hg-train: --model gpt counts iterations, not epochs: use --schedule cosine or constant\n");
      return 1;
    }
    // Shared options keep the GPT's defaults unless given.
    auto given = [&](const char* name) { return app.count(name) != 0; };
    g.device = o.device;
    if (given("--precision")) g.precision = o.precision;
    if (given("--batch-size")) g.batch_size = o.batch_size;
    if (given("--lr")) g.lr = o.lr;
    g.optimizer = o.optimizer;
    g.schedule = o.schedule;
    if (given("--warmup-steps")) g.warmup_steps = o.warmup_steps;
    if (given("--clip-grad")) g.clip_grad = o.clip_grad;
    g.seed = o.seed;
    if (given("--data")) g.data = o.data;
    if (given("--out")) g.out = o.out;
    g.resume = o.resume;
    g.overwrite = o.overwrite;
    g.checkpoint_every = o.checkpoint_every;
    g.max_steps = o.max_steps;
    g.profile = o.profile;
    g.log_every = o.log_every;
    return hg::train::train_gpt(g);
  }
  for (const CLI::Option* opt : gpt_only) {
    if (opt->count() != 0) {
      std::fprintf(stderr, "hg-train: %s is an option of --model gpt\n", opt->get_name().c_str());
      return 1;
    }
  }
  if (o.precision == "auto") o.precision = "amp-fp16";  // the Fashion-MNIST job's default
  const hg::distributed::LaunchEnv launch = hg::distributed::launch_env();
  // Every check of the options runs before a worker starts: one refusal, here.
  if (o.nproc > 1 && o.batch_size % o.nproc != 0) {
    std::fprintf(stderr, "hg-train: --batch-size %lld is not divisible by the %d processes; use a multiple of %d\n",
                 static_cast<long long>(o.batch_size), o.nproc, o.nproc);
    return 1;
  }
  if (o.nproc > 1 && !launch.launched()) {
    // The device, the data set and --resume's checkpoint are checked here
    // too, so that a bad value gets one message, not one per worker.
    try {
      (void)pick_device(o.device);
    } catch (const hg::Error& e) {
      std::fprintf(stderr, "hg-train: %s\n", hg::train::without_program_prefix(e.message()).c_str());
      return 1;
    }
    // The data set too (the test split: 10K images, read in well under a
    // second): a wrong --data gets one message instead of one per worker.
    try {
      (void)hg::data::FashionMnist(o.data, false);
    } catch (const hg::Error& e) {
      std::fprintf(stderr, "hg-train: %s\n", hg::train::without_program_prefix(e.message()).c_str());
      return 1;
    }
    if (o.resume && !fs::exists(fs::path(o.out) / "checkpoint.safetensors")) {
      std::fprintf(stderr,
                   "hg-train: --resume: no checkpoint in '%s': no run there got as far as its first checkpoint (it "
                   "stopped early, or never ran); start it afresh with --overwrite instead of --resume\n",
                   o.out.c_str());
      return 1;
    }
    // Not launched yet: become hg-run, which starts N copies of this command.
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    const fs::path runner = self.parent_path() / "hg-run";
    if (ec || !fs::exists(runner)) {
      std::fprintf(stderr, "hg-train: --nproc needs hg-run next to hg-train (looked for %s); build the hg-run target\n",
                   runner.c_str());
      return 1;
    }
    std::vector<std::string> args{runner.string(), "-n", std::to_string(o.nproc), self.string()};
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    std::fflush(stdout);
    ::execv(runner.c_str(), cargs.data());
    std::fprintf(stderr, "hg-train: could not start %s: %s\n", runner.c_str(), std::strerror(errno));
    return 1;
  }
  const int world = launch.launched() ? launch.world_size : 1;
  const int rank = launch.launched() ? std::max(launch.rank, 0) : 0;
  if (o.nproc > 0 && o.nproc != world) {
    std::fprintf(stderr, "hg-train: --nproc %d but WORLD_SIZE is %d; drop --nproc when a launcher sets WORLD_SIZE\n",
                 o.nproc, world);
    return 1;
  }
  if (o.batch_size % world != 0) {
    std::fprintf(stderr, "hg-train: --batch-size %lld is not divisible by the %d processes; use a multiple of %d\n",
                 static_cast<long long>(o.batch_size), world, world);
    return 1;
  }
  const bool distributed = world > 1;
  const bool lead = rank == 0;                                               // writes the run folder, evaluates, prints
  if (!lead && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;  // rank 0 reports
  // Past the file size limit (ulimit -f) a write fails with EFBIG and a clear
  // message (core/atomic_file.h) instead of the process dying by SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);

  hg::train::Terminal term;
  try {
    hg::Device device = pick_device(o.device);
    hg::distributed::ProcessGroupPtr group;
    if (distributed) {
      // One GPU per rank: cuda:LOCAL_RANK when the device is CUDA.
      if (device.is_cuda() && launch.local_rank >= 0) device = hg::Device::cuda(launch.local_rank);
      group = hg::distributed::init_process_group({.backend = device.is_cuda() ? "nccl" : "gloo"});
    }
    // The run folder first: locked, writable and not someone else's results,
    // before a second is spent on data or training. Rank 0 owns it; the
    // others only read the checkpoint on --resume, after rank 0 checked it.
    std::optional<hg::train::RunFolder> folder;
    if (lead) {
      folder.emplace(o.out, o.resume      ? hg::train::StartMode::kResume
                            : o.overwrite ? hg::train::StartMode::kOverwrite
                                          : hg::train::StartMode::kFresh);
      if (folder->stale_temp_files_removed() > 0) {
        term.paragraph("hg-train: removed " + std::to_string(folder->stale_temp_files_removed()) +
                       " temp file(s) left in " + o.out + " by killed saves");
      }
    }
    if (group) group->barrier()->wait();  // rank 0 failed: its exit makes hg-run stop the others
    const Precision prec = precision_of(o.precision);
    hg::amp::GradScaler scaler({.enabled = prec.scaler});
    // What this hardware does with 16-bit math, in every mode (so that an
    // fp32 run says what it leaves on the table, too).
    term.paragraph("hg-train: " + hg::amp::capability_report(device));
    if (prec.autocast) {
      // Raises for bf16 on a GPU without it (compute capability < 8.0), naming fp16.
      { hg::amp::Autocast probe(prec.autocast_dtype); }
      if (device.is_cpu() && prec.autocast_dtype == hg::kBF16 &&
          std::string(hg::cpu::gemm_path(hg::kBF16)) == "onednn-bf16") {
        // Measured on a 2-core AVX512_BF16 VM (docs/benchmarks.md, "CPU backend notes").
        term.paragraph(
            "hg-train: bf16 matmuls run natively on this CPU (oneDNN, about 4x as fast as widened ones), so "
            "a bf16 step takes about 0.6-1.0x as long as in fp32 on this MLP, and less on wide layers "
            "(docs/training.md)");
      } else if (device.is_cpu()) {
        term.paragraph(std::string("hg-train: autocast on the CPU costs time: the ") +
                       (prec.autocast_dtype == hg::kF16 ? "f16" : "bf16") +
                       " matmuls widen to f32 and round back, so a step takes about 1.7-3x as long as in fp32 "
                       "(docs/training.md); --precision fp32 is the fastest on a CPU");
      }
    }
    hg::Generator gen(o.seed);
    auto model = make_model(o, &gen);
    model->to(device);
    model->to(prec.weights);
    // Broadcasts rank 0's parameters (identical anyway: same seed).
    std::optional<hg::distributed::DistributedDataParallel> ddp;
    if (group) ddp.emplace(model, group);
    auto forward = [&](const hg::Tensor& x) { return ddp ? ddp->forward(x) : model->forward(x); };
    std::unique_ptr<hg::optim::Optimizer> optimizer =
        o.optimizer == "adamw" ? std::make_unique<hg::optim::AdamW>(
                                     model->parameters(), hg::optim::AdamWOptions{.lr = o.lr, .weight_decay = 1e-4})
                               : hg::optim::make_optimizer(o.optimizer, model->named_parameters(), o.lr, 1e-4);
    hg::optim::Optimizer& opt = *optimizer;
    scaler.set_parameter_names(model->named_parameters());  // overflow reports name the parameters

    const hg::data::FashionMnist train_set(o.data, true), test_set(o.data, false);
    // Fashion-MNIST pixel statistics (mean 0.286, std 0.353).
    hg::data::DataLoader train(train_set.images(), train_set.labels(),
                               {.batch_size = o.batch_size / world,
                                .shuffle = true,
                                .seed = o.seed,
                                .drop_last = true,
                                .mean = 0.2860,
                                .std = 0.3530,
                                .limit = o.limit,
                                .device = device,
                                .dtype = prec.weights,
                                .num_replicas = world,
                                .rank = rank,
                                .pad_shards = false});
    hg::data::DataLoader test(test_set.images(), test_set.labels(),
                              {.batch_size = 1000,
                               .mean = 0.2860,
                               .std = 0.3530,
                               .limit = o.test_limit,
                               .device = device,
                               .dtype = prec.weights});
    HG_CHECK(train.num_batches() > 0, "--limit ", o.limit, " leaves no full batch of ", o.batch_size,
             "; use a larger --limit or a smaller --batch-size");
    const int64_t num_batches = train.num_batches();
    auto schedule = make_schedule(o, opt, num_batches, prec.scaler, term);
    // Under a scaler the schedule runs on the device's applied-step clock and
    // the optimizer's host copy of the lr is its base; last_lr() is the lr.
    auto current_lr = [&] { return schedule ? schedule->last_lr() : opt.lr(); };
    const int64_t log_every = o.log_every > 0 ? o.log_every : std::max<int64_t>(num_batches / 100, 1);

    auto file = [&](const char* name) { return folder ? folder->file(name) : (fs::path(o.out) / name).string(); };
    const std::string ckpt_path = file("checkpoint.safetensors");
    const std::string metrics_path = file("metrics.jsonl");
    const std::string curves_path = file("curves.svg");
    // The mean over ranks of a per-rank sum (each rank's loss is the mean
    // over its part of the global batch, so this is the global batch's loss).
    auto global_sum = [&](const hg::Tensor& local) {
      if (!group) return local.item<double>();
      hg::Tensor t = local.detach().to(hg::kF64).contiguous().clone();
      if (group->backend() == "gloo") t = t.cpu();  // nccl reduces on the device
      group->all_reduce(t, hg::distributed::ReduceOp::kAvg)->wait();
      return t.item<double>();
    };
    std::string title = "hg-train: " + o.model + ", " + o.precision + ", " + device.str() + ", " +
                        std::to_string(o.epochs) + " epoch" + (o.epochs == 1 ? "" : "s") + ", batch " +
                        std::to_string(o.batch_size) + ", lr " + decimal(o.lr) + " " + o.schedule;
    if (o.limit > 0) title += ", limit " + std::to_string(o.limit);
    if (o.clip_grad > 0) title += ", clip " + decimal(o.clip_grad);
    if (o.seed != 0) title += ", seed " + std::to_string(o.seed);

    // The running state of the current epoch: loss sums (on the device) and counts.
    hg::Tensor loss_sum = hg::zeros({}, {.device = device});
    hg::Tensor interval_sum = hg::zeros({}, {.device = device});  // since the last sub-epoch point
    int64_t batches = 0, samples = 0, global_step = 0, interval_batches = 0;
    hg::train::Metrics metrics;
    std::vector<PendingPoint> pending;

    if (o.resume) {
      HG_CHECK(fs::exists(ckpt_path), "--resume: no checkpoint at '", ckpt_path, "': no run in '", o.out,
               "' got as far as its first checkpoint (it stopped early, or never ran); start it afresh with "
               "--overwrite (replaces hg-train's files there) instead of --resume");
      hg::optim::NamedTensors scaler_state;
      // Every check runs before the model or optimizer changes (an atomic load).
      const hg::optim::TrainingProgress p = hg::optim::load_training_checkpoint(
          ckpt_path, *model, opt, &scaler_state,
          [&](const hg::optim::TrainingProgress& q) { check_resume(q, o, num_batches, schedule != nullptr); });
      if (prec.scaler) {
        HG_CHECK(!scaler_state.empty(),
                 "--resume: the checkpoint holds no loss-scaler state: it was written by an "
                 "hg-train whose --precision ",
                 o.precision,
                 " had no GradScaler yet; finish that run with the hg-train that started it, or start afresh "
                 "(--overwrite)");
        scaler.load_state_dict(scaler_state);
      }
      train.set_epoch(p.epoch);
      train.skip(p.batch);
      gen.set_state(p.generator);
      if (schedule) schedule->set_last_step(p.scheduler_step);
      global_step = p.global_step;
      loss_sum.fill_(extra_sum(p, "epoch_loss_sum"));  // checked
      batches = p.batch;  // check_resume: epoch_batches == batch, epoch_samples == batch x batch size
      samples = p.batch * o.batch_size;
      if (p.extra.count("interval_batches") != 0) {
        interval_batches = extra_int(p, "interval_batches", p.batch);
        interval_sum.fill_(extra_sum(p, "interval_loss_sum"));
      }
      // Metrics are written before the checkpoint, so every finished epoch
      // has its line; lines past the checkpoint (killed between the two
      // writes) are dropped here and written again when training gets there.
      const hg::train::Metrics earlier = hg::train::read_metrics(metrics_path);
      for (const auto& r : earlier.epochs) {
        if (r.epoch >= 1 && r.epoch <= static_cast<int>(p.epoch)) metrics.epochs.push_back(r);
      }
      for (const auto& r : earlier.steps) {
        if (r.step <= p.global_step) metrics.steps.push_back(r);
      }
      if (lead && metrics.epochs.size() != p.epoch) {
        term.paragraph("hg-train: warning: " + metrics_path + " holds " + std::to_string(metrics.epochs.size()) +
                       " of the " + std::to_string(p.epoch) + " finished epochs' lines");
      }
      term.paragraph("hg-train: resuming from " + ckpt_path + " at epoch " + std::to_string(p.epoch + 1) + ", batch " +
                     std::to_string(p.batch) + " (step " + std::to_string(global_step) + ")");
    }

    // A diverged run stops here, before anything non-finite reaches a
    // checkpoint or metrics.jsonl (the files keep the last finite state).
    auto require_finite_loss = [&](double sum) {
      // The epoch of the last step taken (the loader may already be at the next).
      const int64_t epoch_of_step = global_step > 0 ? (global_step - 1) / num_batches + 1 : 1;
      HG_CHECK(std::isfinite(sum), "the training loss became ", sum, " by step ", global_step, " (epoch ",
               epoch_of_step, "): the run diverged, so it stops here without saving; ",
               "lower --lr or use --clip-grad, then start again (or --resume from the last checkpoint)");
    };
    // Reads the pending sub-epoch points (one copy each; the device is in
    // sync at the callers anyway) into the metrics.
    auto flush_points = [&] {
      for (const PendingPoint& q : pending) {
        hg::train::StepRecord r{.step = q.step,
                                .epoch = q.epoch,
                                .train_loss = q.loss_sum.item<double>() / static_cast<double>(q.batches),
                                .lr = q.lr};
        require_finite_loss(r.train_loss);
        if (q.scaler.defined()) {
          const hg::amp::GradScalerStats st = scaler.stats_of(q.scaler);
          r.loss_scale = st.scale;
          r.steps_skipped = st.steps_skipped;
        }
        metrics.steps.push_back(r);
      }
      pending.clear();
    };
    // Metrics and curves first, then the checkpoint: a kill between the two
    // leaves lines for steps the checkpoint has not reached, which a resume
    // drops and writes again; the other order could lose lines for good.
    // Data-parallel: every rank calls save at the same steps (global_sum is a
    // collective); rank 0 alone writes. Sub-epoch points are rank 0's shard.
    auto save = [&] {
      const double global_loss_sum = global_sum(loss_sum);
      require_finite_loss(global_loss_sum);
      flush_points();
      if (!lead) return;
      hg::train::write_metrics(metrics_path, metrics);
      hg::train::write_curves(curves_path, metrics, title);
      hg::optim::TrainingProgress p{.epoch = train.epoch(),
                                    .batch = train.position(),
                                    .global_step = global_step,
                                    .scheduler_step = schedule ? schedule->last_step() : 0,
                                    .generator = gen.get_state(),
                                    .extra = run_config(o)};
      p.extra["epoch_loss_sum"] = hg::optim::exact_double_string(global_loss_sum);
      p.extra["epoch_batches"] = std::to_string(batches);
      p.extra["epoch_samples"] = std::to_string(samples);
      p.extra["interval_loss_sum"] = hg::optim::exact_double_string(interval_sum.item<double>());
      p.extra["interval_batches"] = std::to_string(interval_batches);
      hg::optim::save_training_checkpoint(ckpt_path, *model, opt, p,
                                          prec.scaler ? scaler.state_dict() : hg::optim::NamedTensors{});
    };

    term.paragraph("hg-train: " + o.model + " on " + device.str() + ", precision " + o.precision + ", " +
                   std::to_string(train.num_samples()) + " training samples, " + std::to_string(o.epochs) +
                   " epoch(s), batch " + std::to_string(o.batch_size) + ", " + o.optimizer + " lr " + decimal(o.lr) +
                   " (" + o.schedule + ")");
    const int64_t total_steps =
        o.max_steps > 0 ? std::min<int64_t>(o.max_steps, num_batches * o.epochs) : num_batches * o.epochs;
    if (o.max_steps > 0 && global_step >= o.max_steps) {
      term.paragraph("hg-train: the checkpoint is at step " + std::to_string(global_step) +
                     ", already at --max-steps " + std::to_string(o.max_steps) +
                     ": nothing to do (raise --max-steps, or drop it, to continue)");
      return 0;
    }
    const std::vector<hg::Tensor> params = model->parameters();
    const auto start = Clock::now();
    const int64_t first_step = global_step;
    hg::train::StepProfiler profiler(o.profile, o.out);
    double train_seconds = 0.0;  // this process's training time, without evaluation
    double eval_seconds = -1.0;  // the last evaluation's time (< 0: none yet)
    // Seconds left: the remaining steps at this process's pace, plus the
    // evaluations still to come (at the last one's pace).
    auto eta = [&](double epoch_train_seconds, int64_t eval_batches_left) {
      const int64_t steps_done = global_step - first_step;
      if (steps_done <= 0) return -1.0;
      const double per_step = (train_seconds + epoch_train_seconds) / static_cast<double>(steps_done);
      const int64_t evals_left =
          static_cast<int64_t>(o.epochs) - static_cast<int64_t>(train.epoch()) - (eval_batches_left > 0 ? 1 : 0);
      const double per_eval = eval_seconds >= 0 ? eval_seconds : 0.0;
      return per_step * static_cast<double>(std::max<int64_t>(total_steps - global_step, 0)) +
             per_eval * static_cast<double>(std::max<int64_t>(evals_left, 0)) +
             (eval_batches_left > 0 ? per_eval * static_cast<double>(eval_batches_left) /
                                          static_cast<double>(std::max<int64_t>(test.num_batches(), 1))
                                    : 0.0);
    };
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    bool stopped = false;
    while (!stopped && static_cast<int>(train.epoch()) < o.epochs) {
      const int epoch = static_cast<int>(train.epoch()) + 1;
      const std::string epoch_text = "epoch " + std::to_string(epoch) + "/" + std::to_string(o.epochs);
      const auto epoch_start = Clock::now();
      const int64_t batches_before = batches;  // > 0 after a mid-epoch resume
      int64_t samples_timed = 0;
      auto epoch_seconds = [&] { return std::chrono::duration<double>(Clock::now() - epoch_start).count(); };
      auto rate = [&] {
        const double secs = epoch_seconds();
        return secs > 0 ? static_cast<double>(samples_timed) / secs : 0.0;
      };
      // tty: the line is redrawn every 10 steps; elsewhere a line at every quarter.
      const int64_t report_every = term.tty() ? 10 : std::max<int64_t>(num_batches / 4, 1);
      for (auto [x, y] : train) {
        profiler.before(global_step - first_step);
        opt.zero_grad();
        hg::Tensor loss;
        {
          hg::amp::Autocast autocast(prec.autocast_dtype, /*enabled=*/prec.autocast);
          loss = hg::cross_entropy(forward(x), y);
        }
        scaler.scale(loss).backward();  // without a scaler: loss itself, step = opt.step()
        if (o.clip_grad > 0) {
          scaler.unscale_(opt);
          hg::optim::clip_grad_norm_(params, o.clip_grad);
        }
        scaler.step(opt);
        scaler.update();
        if (schedule) schedule->step();
        profiler.after();
        {
          hg::NoGradGuard no_grad;
          const hg::Tensor l = loss.detach();
          loss_sum = loss_sum + l;
          interval_sum = interval_sum + l;
        }
        ++batches;
        ++global_step;
        ++interval_batches;
        samples += y.numel() * world;  // the global batch
        samples_timed += y.numel() * world;
        if (batches % log_every == 0 || batches == num_batches) {
          pending.push_back({.step = global_step,
                             .epoch = static_cast<double>(epoch - 1) +
                                      static_cast<double>(batches) / static_cast<double>(num_batches),
                             .loss_sum = interval_sum,
                             .batches = interval_batches,
                             .lr = current_lr(),
                             .scaler = scaler.snapshot()});
          interval_sum = hg::zeros({}, {.device = device});
          interval_batches = 0;
        }
        if (batches % report_every == 0 && batches != num_batches) {
          const double sum = loss_sum.item<double>();
          require_finite_loss(sum);
          flush_points();
          const double mean = sum / static_cast<double>(batches);
          const double fraction = static_cast<double>(batches) / static_cast<double>(num_batches);
          char loss_text[32], lr_text[32];
          std::snprintf(loss_text, sizeof loss_text, "loss %.4f", mean);
          std::snprintf(lr_text, sizeof lr_text, "lr %.2e", current_lr());
          const std::string count = std::to_string(batches) + "/" + std::to_string(num_batches);
          std::vector<Piece> pieces{{epoch_text}, {"", 3, true, fraction}, {count, 2}, {loss_text}};
          if (prec.scaler) {
            const hg::amp::GradScalerStats st = scaler.stats();
            pieces.push_back({"scale " + scale_text(st.scale), 1});
            pieces.push_back({"skip " + std::to_string(st.steps_skipped), 1});
          }
          pieces.push_back(
              {hg::train::clock_time(elapsed()) + " eta " + hg::train::clock_time(eta(epoch_seconds(), 0)), 2});
          pieces.push_back({hg::train::short_count(rate()) + " samples/s", 4});
          pieces.push_back({lr_text, 5});
          if (term.tty()) {
            term.progress(hg::train::fit_line(pieces, term.columns()));
          } else {
            pieces.erase(pieces.begin() + 1);  // no bar in a log
            term.line("  " + hg::train::fit_line(pieces, term.columns() - 2));
          }
        }
        if (o.checkpoint_every > 0 && global_step % o.checkpoint_every == 0) save();
        if (o.max_steps > 0 && global_step >= o.max_steps) {
          stopped = true;
          break;
        }
      }
      if (stopped) {
        save();
        term.line("stopped after step " + std::to_string(global_step) +
                  " (--max-steps); continue with --resume --out " + o.out);
        break;
      }
      // The pass ended: the loader has moved on to the next epoch.
      const double secs = epoch_seconds();
      const double epoch_rate = rate();
      train_seconds += secs;
      const double train_loss = global_sum(loss_sum) / static_cast<double>(std::max<int64_t>(batches, 1));
      require_finite_loss(train_loss);
      // Rank 0 evaluates (the models are identical); the others go on.
      const EvalResult eval = !lead ? EvalResult{} : evaluate(*model, test, prec, [&](int64_t done, int64_t total) {
        if (!term.tty()) return;
        const std::vector<Piece> pieces{
            {epoch_text},
            {"evaluating"},
            {"", 3, true, static_cast<double>(done) / static_cast<double>(total)},
            {std::to_string(done) + "/" + std::to_string(total), 2},
            {hg::train::clock_time(elapsed()) + " eta " + hg::train::clock_time(eta(0.0, total - done)), 2}};
        term.progress(hg::train::fit_line(pieces, term.columns()));
      });
      eval_seconds = eval.seconds;
      hg::train::EpochRecord record{.epoch = epoch,
                                    .step = global_step,
                                    .lr = current_lr(),
                                    .train_loss = train_loss,
                                    .test_loss = eval.loss,
                                    .test_accuracy = eval.accuracy,
                                    .seconds = secs,
                                    .samples_per_second = epoch_rate};
      long long skipped_in_epoch = 0;
      if (prec.scaler) {
        const hg::amp::GradScalerStats st = scaler.stats();  // one host read per epoch
        record.loss_scale = st.scale;
        record.steps_skipped = st.steps_skipped;
        const long long before = metrics.epochs.empty() ? 0 : metrics.epochs.back().steps_skipped;
        skipped_in_epoch = st.steps_skipped - before;
      }
      metrics.epochs.push_back(record);
      // Fitted to the width like the progress line: a narrow terminal (or a
      // log, 80 columns) loses the throughput, then the time, then the scale,
      // then the test loss (metrics.jsonl keeps them all).
      char train_text[48], test_text[48], acc_text[48], secs_text[32], rate_text[48];
      std::snprintf(train_text, sizeof train_text, "train loss %.4f", train_loss);
      std::snprintf(test_text, sizeof test_text, "test loss %.4f", eval.loss);
      std::snprintf(acc_text, sizeof acc_text, "accuracy %.2f%%", 100.0 * eval.accuracy);
      std::snprintf(secs_text, sizeof secs_text, "%.1f s", secs);
      std::snprintf(rate_text, sizeof rate_text, "%s samples/s%s", hg::train::short_count(epoch_rate).c_str(),
                    batches_before > 0 ? " (resumed mid-epoch)" : "");
      std::vector<Piece> summary{{epoch_text + ": " + train_text}, {test_text, 3}, {acc_text}};
      if (prec.scaler) {
        summary.push_back({"scale " + scale_text(record.loss_scale), 4});
        if (skipped_in_epoch > 0) summary.push_back({std::to_string(skipped_in_epoch) + " skipped", 2});
      }
      summary.push_back({secs_text, 5});
      summary.push_back({rate_text, 6});
      term.line(hg::train::fit_line(summary, term.columns()));
      loss_sum.fill_(0.0);
      batches = samples = 0;
      save();
    }
    const double total = elapsed();
    if (!stopped) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "done in %.1f s; ", total);
      term.paragraph(buf + o.out + " holds checkpoint.safetensors, metrics.jsonl and curves.svg");
    }
  } catch (const hg::Error& e) {
    term.end_progress();
    // The message says what went wrong and what to do; the source location
    // (e.file():e.line()) is for a developer: HG_LOG_LEVEL=debug shows it.
    std::fprintf(stderr, "hg-train: %s\n", hg::train::without_program_prefix(e.message()).c_str());
    HG_LOG_DEBUG("hg-train: the error was raised at {}:{}", e.file(), e.line());
    return 1;
  } catch (const std::exception& e) {  // a bug, but reported, not an abort
    term.end_progress();
    std::fprintf(stderr, "hg-train: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}

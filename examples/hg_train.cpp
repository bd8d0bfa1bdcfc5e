// hg-train — the main job: trains an MLP on Fashion-MNIST and reports
// per-epoch train loss, test loss, test accuracy and throughput; writes
// metrics.jsonl, curves.svg and a training checkpoint into --out, and
// continues bit-exactly from that checkpoint with --resume.
//
//   hg-train                                   # defaults: 784-256-128-10 MLP, precision auto, AdamW + warmup/cosine, 8 epochs
//   hg-train --precision amp-fp16              # the seed recipe: f16 autocast + GradScaler
//   hg-train --precision fp32 --device cuda --epochs 5
//   hg-train --limit 2000 --epochs 1           # a smoke run
//   hg-train --max-steps 500 && hg-train --resume   # stop early, continue later
//
// Precision modes (docs/amp.md, docs/training.md):
//   auto (default): amp-bf16 where bf16 matmuls are native, else fp32 on a
//     CPU and amp-fp16 on a GPU (train/precision.h);
//   amp-fp16: fp32 weights, the forward under hg::amp::Autocast (matmuls in
//     f16, softmax/loss in fp32) and a GradScaler; amp-bf16: the same in bf16
//     without a scaler (PyTorch's bf16 recipe);
//   fp16-master, bf16-master: the model itself in 16 bits, fp32 master
//     weights in the optimizer, the forward under Autocast too (so the
//     fp32-class ops run in fp32) and a GradScaler;
//   fp32: everything f32, no autocast, no scaler.
// The checkpoint carries the scaler in every mode that has one.
//
// The loop, the precision modes, the run folder and resume are
// hg::train::Trainer's (train/trainer.h); here are the options, the models
// and the data.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "core/generator.h"
#include "core/log.h"
#include "core/version.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "data/text.h"
#include "distributed/process_group.h"
#include "examples/train_gpt.h"
#include "kernels/reduce/reduce.h"
#include "nn/models/cnn.h"
#include "nn/models/mlp.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/make_optimizer.h"
#include "optim/optimizer.h"
#include "train/precision.h"
#include "train/run_folder.h"
#include "train/terminal.h"
#include "train/trainer.h"

namespace {

namespace fs = std::filesystem;
using hg::train::decimal;
using hg::train::pick_device;

struct Options {
  std::string model = "mlp";
  std::string device = "auto";
  std::string precision = "auto";  // resolve_precision once the device is known
  int epochs = 8;
  int64_t batch_size = 128;
  double lr = 2e-3;
  std::string optimizer = "adamw";
  std::string schedule = "cosine";
  int64_t warmup_steps = 200;
  double clip_grad = 0.0;
  std::vector<std::string> fp8_keep = {};  // amp-fp8: Linear layers kept in bf16
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

std::shared_ptr<hg::nn::Module> make_model(const Options& o, hg::Generator* gen) {
  if (o.model == "mlp") return hg::nn::make_mlp({784, 256, 128, 10}, gen);
  if (o.model == "cnn") return hg::nn::make_cnn(gen);
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

// --schedule, on the trainer's clock (applied steps under a loss scaler).
std::unique_ptr<hg::optim::LRScheduler> make_schedule(const Options& o, hg::optim::Optimizer& opt,
                                                      int64_t steps_per_epoch, hg::train::Trainer& trainer) {
  const int64_t total = steps_per_epoch * o.epochs;
  const hg::optim::ScheduleClock clock = trainer.schedule_clock();
  hg::train::Terminal& term = trainer.terminal();
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

// The test set's mean loss and accuracy (the Trainer runs it without
// gradients, in eval mode, under the training's autocast).
hg::train::Evaluation evaluate(hg::nn::Module& model, hg::data::DataLoader& loader,
                               const hg::train::EvalProgress& progress) {
  double loss_sum = 0.0;
  int64_t correct = 0, seen = 0, done = 0;
  for (auto [x, y] : loader) {
    const hg::Tensor logits = model.forward(x);
    loss_sum += hg::cross_entropy(logits, y).item<double>() * static_cast<double>(y.numel());
    const auto predicted = hg::ops::argmax(logits, 1).to_vector<int64_t>();
    const auto labels = y.to_vector<int64_t>();
    for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
    seen += y.numel();
    progress(++done, loader.num_batches());
  }
  return {loss_sum / static_cast<double>(std::max<int64_t>(seen, 1)),
          static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1))};
}

}  // namespace

int main(int argc, char** argv) {
  hg::amp::set_cpu_f16_warning(false);  // the paragraph on CPU autocast below says it, in the terminal's width
  Options o;
  CLI::App app{"hg-train: train a model on Fashion-MNIST with halfgrad (docs/training.md)"};
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", std::string("hg-train (halfgrad) ") + hg::version(),
                       "print the halfgrad version and exit");
  app.add_option(
         "--model", o.model,
         "model: mlp | cnn (Fashion-MNIST, docs/training.md) | gpt (a character-level GPT on text, "
         "docs/gpt.md; its own defaults: --batch-size 12, --lr 1e-3, --warmup-steps 100, --clip-grad 1, --data " +
             std::string(hg::data::CharCorpus::kFortunesRoot) + ", --out runs/hg-train-gpt)")
      ->check(CLI::IsMember({"mlp", "cnn", "gpt"}));
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N");
  app.add_option("--precision", o.precision,
                 "auto (amp-bf16 where bf16 matmuls are native: a GPU with bf16, a CPU with AVX512_BF16; else "
                 "fp32 on a CPU, amp-fp16 on a GPU) | amp-fp16 (fp32 weights, f16 autocast, loss scaler: the "
                 "seed recipe) | amp-bf16 (fp32 weights, bf16 autocast, no scaler) | fp16-master | bf16-master "
                 "(16-bit weights with fp32 masters, autocast, loss scaler) | amp-fp8 (amp-bf16 with the "
                 "Linear layers whose dims are multiples of 16 in fp8 and a scaler, docs/amp.md) | fp32")
      ->check(CLI::IsMember({"fp32", "fp16-master", "bf16-master", "amp-fp16", "amp-bf16", "amp-fp8", "auto"}));
  app.add_option("--fp8-keep", o.fp8_keep,
                 "amp-fp8: Linear layers kept in bf16, comma-separated dotted names or prefixes "
                 "(e.g. 0 for the MLP's first layer, transformer.h.0 for the GPT's first block)")
      ->delimiter(',');
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
  // The default --out: a fresh run takes a folder of its own (runs/hg-train,
  // then runs/hg-train-2, ...: train/run_folder.h), --resume the last one
  // with a checkpoint; a given --out is used as it is. Workers of a
  // data-parallel run get the folder their launcher chose (--out below).
  const bool out_given = app.count("--out") != 0;
  if (!out_given) {
    const std::string base = o.model == "gpt" ? g.out : o.out;
    if (o.resume) {
      o.out = hg::train::latest_run_folder(base);
      if (o.out.empty()) {
        std::fprintf(stderr, "hg-train: --resume: no run under %s[-N] has a checkpoint; give its folder with --out\n",
                     base.c_str());
        return 1;
      }
    } else if (o.overwrite) {
      o.out = base;
    } else {
      o.out = hg::train::next_run_folder(base);
    }
    if (o.model == "gpt") g.out = o.out;
  }
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
    g.fp8_keep = o.fp8_keep;
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
      std::fprintf(stderr, "hg-train: %s\n", hg::train::without_program_prefix(e.message(), "hg-train").c_str());
      return 1;
    }
    // The data set too (the test split: 10K images, read in well under a
    // second): a wrong --data gets one message instead of one per worker.
    try {
      (void)hg::data::FashionMnist(o.data, false);
    } catch (const hg::Error& e) {
      std::fprintf(stderr, "hg-train: %s\n", hg::train::without_program_prefix(e.message(), "hg-train").c_str());
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
    if (!out_given) args.insert(args.end(), {"--out", o.out});  // one folder for every worker
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
    const bool auto_precision = o.precision == "auto";  // the default, or asked for by name
    o.precision = hg::train::resolve_precision(o.precision, device);
    if (auto_precision) {
      term.paragraph("hg-train: precision " + o.precision + " (--precision auto: " +
                     (o.precision == "amp-bf16"
                          ? std::string("bf16 matmuls are native on this ") + (device.is_cpu() ? "CPU" : "GPU")
                      : device.is_cpu() ? std::string("16-bit matmuls widen to f32 on this CPU")
                                        : "this GPU has no bf16") +
                     "); the seed recipe, f16 autocast with a loss scaler, is --precision amp-fp16");
    }
    hg::distributed::ProcessGroupPtr group;
    if (distributed) {
      // One GPU per rank: cuda:LOCAL_RANK when the device is CUDA.
      if (device.is_cuda() && launch.local_rank >= 0) device = hg::Device::cuda(launch.local_rank);
      group = hg::distributed::init_process_group({.backend = device.is_cuda() ? "nccl" : "gloo"});
    }
    hg::train::Trainer trainer({.program = "hg-train",
                                .out = o.out,
                                .resume = o.resume,
                                .overwrite = o.overwrite,
                                .device = device,
                                .precision = o.precision,
                                .epochs = o.epochs,
                                .clip_grad = o.clip_grad,
                                .fp8_keep = o.fp8_keep,
                                .checkpoint_every = o.checkpoint_every,
                                .max_steps = o.max_steps,
                                .log_every = o.log_every,
                                .profile = o.profile,
                                .group = group},
                               &term);
    const hg::train::Precision& prec = trainer.precision();
    if (prec.autocast && device.is_cpu()) {
      if (prec.autocast_dtype == hg::kBF16 && hg::train::native_bf16_matmul(device)) {
        // Measured on a 2-core AVX512_BF16 VM (docs/bench/history.md, "CPU backend notes").
        term.paragraph(
            "hg-train: bf16 matmuls run natively on this CPU (oneDNN, about 4x as fast as widened ones), so "
            "a bf16 step takes about 0.6-1.0x as long as in fp32 on this MLP, and less on wide layers "
            "(docs/training.md)");
      } else {
        term.paragraph(std::string("hg-train: autocast on the CPU costs time: the ") +
                       (prec.autocast_dtype == hg::kF16 ? "f16" : "bf16") +
                       " matmuls widen to f32 and round back, so a step takes about 1.7-3x as long as in fp32 "
                       "(docs/training.md); --precision fp32 is the fastest on a CPU");
      }
    }
    if (prec.fp8 && device.is_cpu()) {
      term.paragraph(
          "hg-train: amp-fp8 on a CPU runs its fp8 GEMMs on the exact reference (fp8 operands widened to f32): "
          "it trains with fp8's rounding and scaling, not at fp8's speed, which needs a GPU with fp8 tensor "
          "cores (sm_89+)");
    }
    hg::Generator gen(o.seed);
    auto model = make_model(o, &gen);
    trainer.place(model);
    std::unique_ptr<hg::optim::Optimizer> opt =
        o.optimizer == "adamw" ? std::make_unique<hg::optim::AdamW>(
                                     model->parameters(), hg::optim::AdamWOptions{.lr = o.lr, .weight_decay = 1e-4})
                               : hg::optim::make_optimizer(o.optimizer, model->named_parameters(), o.lr, 1e-4);

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
    auto schedule = make_schedule(o, *opt, train.num_batches(), trainer);
    trainer.set_optimizer(*opt, schedule.get());

    std::string title = "hg-train: " + o.model + ", " + o.precision + ", " + device.str() + ", " +
                        std::to_string(o.epochs) + " epoch" + (o.epochs == 1 ? "" : "s") + ", batch " +
                        std::to_string(o.batch_size) + ", lr " + decimal(o.lr) + " " + o.schedule;
    if (o.limit > 0) title += ", limit " + std::to_string(o.limit);
    if (o.clip_grad > 0) title += ", clip " + decimal(o.clip_grad);
    if (o.seed != 0) title += ", seed " + std::to_string(o.seed);
    const hg::train::FitResult result = trainer.fit(
        train,
        {.loss = [&](const hg::Tensor& x, const hg::Tensor& y) { return hg::cross_entropy(trainer.forward(x), y); },
         .evaluate = [&](const hg::train::EvalProgress& progress) { return evaluate(*model, test, progress); },
         .generator = &gen,
         .config = run_config(o),
         .title = title,
         .header = "hg-train: " + o.model + " on " + device.str() + ", precision " + o.precision + ", " +
                   std::to_string(train.num_samples()) + " training samples, " + std::to_string(o.epochs) +
                   " epoch(s), batch " + std::to_string(o.batch_size) + ", " + o.optimizer + " lr " + decimal(o.lr) +
                   " (" + o.schedule + ")"});
    if (result.finished) {
      term.paragraph(hg::train::fixed("done in %.1f s; ", result.seconds) + o.out +
                     " holds checkpoint.safetensors, metrics.jsonl and curves.svg");
    }
  } catch (const hg::Error& e) {
    term.end_progress();
    // The message says what went wrong and what to do; the source location
    // (e.file():e.line()) is for a developer: HG_LOG_LEVEL=debug shows it.
    std::fprintf(stderr, "hg-train: %s\n", hg::train::without_program_prefix(e.message(), "hg-train").c_str());
    HG_LOG_DEBUG("hg-train: the error was raised at {}:{}", e.file(), e.line());
    return 1;
  } catch (const std::exception& e) {  // a bug, but reported, not an abort
    term.end_progress();
    std::fprintf(stderr, "hg-train: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}

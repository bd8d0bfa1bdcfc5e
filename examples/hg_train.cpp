// hg-train — the main job: trains an MLP on Fashion-MNIST and reports
// per-epoch train loss, test loss, test accuracy and throughput; writes
// metrics.jsonl, curves.svg and a training checkpoint into --out, and
// continues bit-exactly from that checkpoint with --resume.
//
//   hg-train                                   # defaults: 784-256-128-10 MLP, AdamW + warmup/cosine, 8 epochs
//   hg-train --precision fp16-master --device cuda --epochs 5
//   hg-train --limit 2000 --epochs 1           # a smoke run
//   hg-train --max-steps 500 && hg-train --resume   # stop early, continue later
//   hg-train --nproc 2                         # data-parallel over 2 local processes
//
// Precision modes: fp32 (everything f32) and fp16-master / bf16-master (the
// model is converted to 16 bits, the optimizer keeps fp32 master weights and
// moments; the loss is computed from 16-bit logits with fp32 math inside
// cross_entropy). amp-fp16 / amp-bf16: fp32 weights, the forward under
// hg::amp::Autocast (matmuls in 16 bits, softmax/loss in fp32) and a
// GradScaler (docs/amp.md); the checkpoint then carries the scaler.
//
// The loop keeps the running loss on the device (one add per step) and reads
// it only for the progress line, the epoch summary and checkpoints, so a GPU
// is not synchronised every step.
//
// Data-parallel (--nproc N, or started by hg-run / torchrun-style variables
// with WORLD_SIZE > 1): hg-train re-executes itself through hg-run (next to
// this program) with N ranks; each joins a process group (gloo on the CPU,
// nccl on CUDA), wraps the model in DistributedDataParallel and reads its
// DataLoader shard (num_replicas = N, pad_shards = false) with a per-rank
// batch of --batch-size / N. Global batch k is then exactly the single-process
// batch k, so the run is the single-process run up to the order of the
// gradient sums, and a checkpoint resumes on any N that divides the batch.
// Rank 0 alone writes the run folder (checkpoint, metrics, curves) and
// evaluates; losses reported and saved are averaged over the ranks.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <csignal>
#include <memory>
#include <optional>
#include <unistd.h>

#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "distributed/ddp.h"
#include "distributed/process_group.h"
#include "examples/run_folder.h"
#include "examples/train_report.h"
#include "kernels/reduce.h"
#include "nn/layers.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

#if defined(HG_WITH_CUDA)
#include "kernels/cuda/runtime.h"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string model = "mlp";
  std::string device = "auto";
  std::string precision = "fp32";
  int epochs = 8;
  int64_t batch_size = 128;
  double lr = 2e-3;
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
  int nproc = 0;  // 0: one process, or WORLD_SIZE when launched
};

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

hg::Device pick_device(const std::string& name) {
  if (name == "auto") {
#if defined(HG_WITH_CUDA)
    if (hg::cuda::is_available()) return hg::Device::cuda(0);
#endif
    return hg::Device::cpu();
  }
  return hg::Device::parse(name);
}

std::shared_ptr<hg::nn::Sequential> make_mlp(hg::Generator* gen) {
  using namespace hg::nn;
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Linear>(784, 256, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(256, 128, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(128, 10, true, gen)});
}

std::unique_ptr<hg::optim::LRScheduler> make_schedule(const Options& o, hg::optim::Optimizer& opt,
                                                      int64_t steps_per_epoch) {
  const int64_t total = steps_per_epoch * o.epochs;
  if (o.schedule == "cosine") {
    // A short run (--limit) gets at most half of its steps as warmup.
    const int64_t warmup = std::min(o.warmup_steps, total / 2);
    if (warmup < o.warmup_steps) {
      std::printf("hg-train: %lld steps in all, so the warmup is %lld steps instead of %lld\n",
                  static_cast<long long>(total), static_cast<long long>(warmup),
                  static_cast<long long>(o.warmup_steps));
    }
    return std::make_unique<hg::optim::WarmupCosineLR>(
        opt, hg::optim::WarmupCosineOptions{.warmup_steps = warmup, .total_steps = total, .min_lr_ratio = 0.0});
  }
  if (o.schedule == "step") {  // halve the rate after every epoch
    return std::make_unique<hg::optim::StepLR>(
        opt, hg::optim::StepLROptions{.step_size = std::max<int64_t>(steps_per_epoch, 1), .gamma = 0.5});
  }
  return nullptr;  // constant
}

// The checkpoint extra `key` as an integer in [0, max], or an hg::Error.
int64_t extra_int(const hg::optim::TrainingProgress& p, const std::string& key, int64_t max) {
  auto it = p.extra.find(key);
  HG_CHECK(it != p.extra.end(), "--resume: the checkpoint lacks '", key, "'; it was not written by hg-train");
  const std::string& text = it->second;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  HG_CHECK(!text.empty() && errno == 0 && *end == '\0' && value >= 0 && value <= max, "--resume: the checkpoint's '",
           key, "' = '", text.substr(0, 40), "' is not an integer in [0, ", max, "]; the file is corrupt");
  return value;
}

// Checks a checkpoint's counters and options against this run before
// anything is loaded (load_training_checkpoint calls it first): the same
// options, and counters that hg-train's loop can have produced — every
// batch is one step, so step = epoch x batches per epoch + batch.
void check_resume(const hg::optim::TrainingProgress& p, const Options& o, int64_t num_batches, bool scheduled) {
  const auto config = run_config(o);
  // The precision first: a different one would otherwise surface as a dtype mismatch.
  for (const std::string first : {"config.precision", ""}) {
    for (const auto& [key, value] : config) {
      if (!first.empty() ? key != first : key == "config.precision") continue;
      auto it = p.extra.find(key);
      HG_CHECK(it != p.extra.end() && it->second == value, "--resume: the checkpoint was written with --",
               key.substr(7), " = ", it == p.extra.end() ? std::string("(none)") : it->second.substr(0, 60),
               ", this run has ", value, key == "config.precision" ? " (the precision differs)" : "",
               "; use the same options to continue the run");
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
  auto sum = p.extra.find("epoch_loss_sum");
  HG_CHECK(sum != p.extra.end(), "--resume: the checkpoint lacks 'epoch_loss_sum'; it was not written by hg-train");
  HG_CHECK(std::isfinite(hg::optim::parse_exact_double(sum->second)),
           "--resume: the checkpoint's epoch loss sum is not finite; the file is corrupt");
}

struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;
};

EvalResult evaluate(hg::nn::Module& model, hg::data::DataLoader& loader) {
  hg::NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0.0;
  int64_t correct = 0, seen = 0;
  for (auto [x, y] : loader) {
    const hg::Tensor logits = model.forward(x);
    loss_sum += hg::cross_entropy(logits, y).item<double>() * static_cast<double>(y.numel());
    const auto predicted = hg::ops::argmax(logits, 1).to_vector<int64_t>();
    const auto labels = y.to_vector<int64_t>();
    for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
    seen += y.numel();
  }
  model.train();
  return {loss_sum / static_cast<double>(std::max<int64_t>(seen, 1)),
          static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1))};
}

// "[#########.........]": a bar of `width` cells, `done` of `total` filled.
std::string bar(int64_t done, int64_t total, int width = 24) {
  const int filled = total > 0 ? static_cast<int>(width * done / total) : width;
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"hg-train: train an MLP on Fashion-MNIST with halfgrad"};
  app.add_option("--model", o.model, "model (mlp)")->check(CLI::IsMember({"mlp"}));
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N");
  app.add_option("--precision", o.precision, "fp32 | fp16-master | bf16-master | amp-fp16 | amp-bf16")
      ->check(CLI::IsMember({"fp32", "fp16-master", "bf16-master", "amp-fp16", "amp-bf16"}));
  app.add_option("--epochs", o.epochs, "epochs")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "AdamW peak learning rate")->check(CLI::PositiveNumber);  // "nan" and "inf" fail it too
  app.add_option("--schedule", o.schedule, "learning-rate schedule: cosine (linear warmup, cosine decay to 0) | "
                                           "step (halve every epoch) | constant")
      ->check(CLI::IsMember({"cosine", "step", "constant"}));
  app.add_option("--warmup-steps", o.warmup_steps, "linear warmup steps of the cosine schedule")
      ->check(CLI::NonNegativeNumber);
  // NonNegativeNumber lets "nan" through (nan < 0 is false), so finiteness is checked too.
  const CLI::Validator finite(
      [](std::string& text) {
        const double v = std::strtod(text.c_str(), nullptr);
        return std::isfinite(v) ? std::string() : "must be a finite number, got " + text;
      },
      "FINITE");
  app.add_option("--clip-grad", o.clip_grad, "clip the global gradient norm to this value (0 = off)")
      ->check(CLI::NonNegativeNumber)
      ->check(finite);
  // "-1" would wrap to 18446744073709551615 in the unsigned seed.
  app.add_option("--seed", o.seed, "seed for init and shuffling (>= 0)")->check(CLI::NonNegativeNumber);
  app.add_option("--limit", o.limit, "use only the first N training samples (0 = all)");
  app.add_option("--test-limit", o.test_limit, "evaluate on only the first N test samples (0 = all)");
  app.add_option("--data", o.data, "folder with the Fashion-MNIST .gz files");
  app.add_option("--out", o.out, "folder for checkpoint.safetensors, metrics.jsonl and curves.svg");
  auto* resume_flag = app.add_flag("--resume", o.resume, "continue from <out>/checkpoint.safetensors (bit-exact)");
  app.add_flag("--overwrite", o.overwrite,
               "start afresh in an --out that holds an earlier run (deletes its checkpoint, metrics and curves)")
      ->excludes(resume_flag);
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "also write the checkpoint every N steps (0 = after each epoch only)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-steps", o.max_steps, "stop after this many steps in total, with a checkpoint (0 = no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--nproc", o.nproc,
                 "data-parallel over N local processes started through hg-run (gloo on cpu, nccl on cuda); "
                 "--batch-size is the global batch and must be divisible by N")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const hg::distributed::LaunchEnv launch = hg::distributed::launch_env();
  if (o.nproc > 1 && !launch.launched()) {
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
  const bool lead = rank == 0;  // writes the run folder, evaluates, prints
  if (!lead && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;  // rank 0 reports
  // Past the file size limit (ulimit -f) a write fails with EFBIG and a clear
  // message (core/atomic_file.h) instead of the process dying by SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);

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
        std::printf("hg-train: removed %d temp file(s) left in %s by killed saves\n",
                    folder->stale_temp_files_removed(), o.out.c_str());
      }
    }
    if (group) group->barrier()->wait();  // rank 0 failed: its exit makes hg-run stop the others
    const hg::DType dtype = o.precision == "fp16-master" ? hg::kF16
                            : o.precision == "bf16-master" ? hg::kBF16
                                                           : hg::kF32;
    // AMP: fp32 weights and data, autocast to amp_dtype, a loss scaler.
    const bool amp = o.precision.rfind("amp-", 0) == 0;
    const hg::DType amp_dtype = o.precision == "amp-bf16" ? hg::kBF16 : hg::kF16;
    hg::amp::GradScaler scaler({.enabled = amp});
    if (amp) std::printf("hg-train: %s\n", hg::amp::capability_report(device).c_str());
    hg::Generator gen(o.seed);
    auto model = make_mlp(&gen);
    model->to(device);
    model->to(dtype);
    // Broadcasts rank 0's parameters (identical anyway: same seed).
    std::optional<hg::distributed::DistributedDataParallel> ddp;
    if (group) ddp.emplace(model, group);
    auto forward = [&](const hg::Tensor& x) { return ddp ? ddp->forward(x) : model->forward(x); };
    hg::optim::AdamW opt(model->parameters(), {.lr = o.lr, .weight_decay = 1e-4});

    const hg::data::FashionMnist train_set(o.data, true), test_set(o.data, false);
    // Fashion-MNIST pixel statistics (mean 0.286, std 0.353).
    hg::data::DataLoader train(train_set.images(), train_set.labels(),
                               {.batch_size = o.batch_size / world, .shuffle = true, .seed = o.seed, .drop_last = true,
                                .mean = 0.2860, .std = 0.3530, .limit = o.limit, .device = device, .dtype = dtype,
                                .num_replicas = world, .rank = rank, .pad_shards = false});
    hg::data::DataLoader test(test_set.images(), test_set.labels(),
                              {.batch_size = 1000, .mean = 0.2860, .std = 0.3530, .limit = o.test_limit,
                               .device = device, .dtype = dtype});
    HG_CHECK(train.num_batches() > 0, "--limit ", o.limit, " leaves no full batch of ", o.batch_size,
             "; use a larger --limit or a smaller --batch-size");
    auto schedule = make_schedule(o, opt, train.num_batches());

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
    const std::string title = "hg-train " + o.model + " " + o.precision + " on " + device.str();

    // The running state of the current epoch: loss sum (on the device) and counts.
    hg::Tensor loss_sum = hg::zeros({}, {.device = device});
    int64_t batches = 0, samples = 0, global_step = 0;
    std::vector<hg::train::EpochRecord> records;

    if (o.resume) {
      HG_CHECK(fs::exists(ckpt_path), "--resume: no checkpoint at '", ckpt_path,
               "'; run once without --resume (same --out) first");
      hg::optim::NamedTensors scaler_state;
      // Every check runs before the model or optimizer changes (an atomic load).
      const hg::optim::TrainingProgress p = hg::optim::load_training_checkpoint(
          ckpt_path, *model, opt, &scaler_state,
          [&](const hg::optim::TrainingProgress& q) { check_resume(q, o, train.num_batches(), schedule != nullptr); });
      if (amp) scaler.load_state_dict(scaler_state);
      train.set_epoch(p.epoch);
      train.skip(p.batch);
      gen.set_state(p.generator);
      if (schedule) schedule->set_last_step(p.scheduler_step);
      global_step = p.global_step;
      loss_sum.fill_(hg::optim::parse_exact_double(p.extra.find("epoch_loss_sum")->second));  // checked
      batches = p.batch;  // check_resume: epoch_batches == batch, epoch_samples == batch x batch size
      samples = p.batch * o.batch_size;
      // Metrics are written before the checkpoint, so every finished epoch
      // has its line; a line past the checkpoint (killed between the two
      // writes) is dropped here and written again when that epoch ends.
      for (const auto& r : hg::train::read_metrics(metrics_path)) {
        if (r.epoch >= 1 && r.epoch <= static_cast<int>(p.epoch)) records.push_back(r);
      }
      if (lead && records.size() != p.epoch) {
        std::fprintf(stderr, "hg-train: warning: %s holds %zu of the %llu finished epochs' lines\n",
                     metrics_path.c_str(), records.size(), static_cast<unsigned long long>(p.epoch));
      }
      std::printf("hg-train: resuming from %s at epoch %llu, batch %lld (step %lld)\n", ckpt_path.c_str(),
                  static_cast<unsigned long long>(p.epoch + 1), static_cast<long long>(p.batch),
                  static_cast<long long>(global_step));
    }

    // A diverged run stops here, before anything non-finite reaches a
    // checkpoint or metrics.jsonl (the files keep the last finite state).
    auto require_finite_loss = [&](double sum) {
      HG_CHECK(std::isfinite(sum), "the training loss became ", sum, " by step ", global_step, " (epoch ",
               train.epoch() + 1, "): the run diverged, so it stops here without saving; ",
               "lower --lr or use --clip-grad, then start again (or --resume from the last checkpoint)");
    };
    auto save = [&] {
      const double global_loss_sum = global_sum(loss_sum);  // a collective: every rank saves at the same steps
      require_finite_loss(global_loss_sum);
      if (!lead) return;
      hg::optim::TrainingProgress p{.epoch = train.epoch(),
                                    .batch = train.position(),
                                    .global_step = global_step,
                                    .scheduler_step = schedule ? schedule->last_step() : 0,
                                    .generator = gen.get_state(),
                                    .extra = run_config(o)};
      p.extra["epoch_loss_sum"] = hg::optim::exact_double_string(global_loss_sum);
      p.extra["epoch_batches"] = std::to_string(batches);
      p.extra["epoch_samples"] = std::to_string(samples);
      hg::optim::save_training_checkpoint(ckpt_path, *model, opt, p,
                                          amp ? scaler.state_dict() : hg::optim::NamedTensors{});
    };

    std::printf("hg-train: %s on %s, precision %s, %lld training samples, %d epoch(s), batch %lld, AdamW lr %g (%s)\n",
                o.model.c_str(), device.str().c_str(), o.precision.c_str(),
                static_cast<long long>(train.num_samples()), o.epochs, static_cast<long long>(o.batch_size), o.lr,
                o.schedule.c_str());
    if (o.max_steps > 0 && global_step >= o.max_steps) {
      std::printf("hg-train: the checkpoint is at step %lld, already at --max-steps %lld: nothing to do "
                  "(raise --max-steps, or drop it, to continue)\n",
                  static_cast<long long>(global_step), static_cast<long long>(o.max_steps));
      return 0;
    }
    const bool tty = ::isatty(STDOUT_FILENO) != 0;
    const std::vector<hg::Tensor> params = model->parameters();
    const auto start = Clock::now();
    bool stopped = false;
    while (!stopped && static_cast<int>(train.epoch()) < o.epochs) {
      const int epoch = static_cast<int>(train.epoch()) + 1;
      const auto epoch_start = Clock::now();
      const int64_t batches_before = batches;  // > 0 after a mid-epoch resume
      int64_t samples_timed = 0;
      auto rate = [&] {
        const double secs = std::chrono::duration<double>(Clock::now() - epoch_start).count();
        return secs > 0 ? static_cast<double>(samples_timed) / secs : 0.0;
      };
      const int64_t report_every = tty ? 10 : std::max<int64_t>(train.num_batches() / 4, 1);
      for (auto [x, y] : train) {
        opt.zero_grad();
        hg::Tensor loss;
        {
          hg::amp::Autocast autocast(amp_dtype, /*enabled=*/amp);
          loss = hg::cross_entropy(forward(x), y);
        }
        scaler.scale(loss).backward();  // without AMP: loss itself, step = opt.step()
        if (o.clip_grad > 0) {
          scaler.unscale_(opt);
          hg::optim::clip_grad_norm_(params, o.clip_grad);
        }
        scaler.step(opt);
        scaler.update();
        if (schedule) schedule->step();
        {
          hg::NoGradGuard no_grad;
          loss_sum = loss_sum + loss.detach();
        }
        ++batches;
        ++global_step;
        samples += y.numel() * world;  // the global batch
        samples_timed += y.numel() * world;
        if (batches % report_every == 0 || batches == train.num_batches()) {
          const double sum = loss_sum.item<double>();
          require_finite_loss(sum);
          const double mean = sum / static_cast<double>(batches);
          if (tty) {
            std::printf("\r  epoch %d/%d %s %lld/%lld  loss %.4f  lr %.2e  %.0f samples/s   ", epoch, o.epochs,
                        bar(batches, train.num_batches()).c_str(), static_cast<long long>(batches),
                        static_cast<long long>(train.num_batches()), mean, opt.lr(), rate());
            std::fflush(stdout);
          } else if (batches != train.num_batches()) {
            std::printf("  epoch %d/%d  batch %lld/%lld  loss %.4f  lr %.2e  %.0f samples/s\n", epoch, o.epochs,
                        static_cast<long long>(batches), static_cast<long long>(train.num_batches()), mean,
                        opt.lr(), rate());
            std::fflush(stdout);
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
        std::printf("%sstopped after step %lld (--max-steps); continue with --resume --out %s\n", tty ? "\n" : "",
                    static_cast<long long>(global_step), o.out.c_str());
        break;
      }
      // The pass ended: the loader has moved on to the next epoch.
      const double secs = std::chrono::duration<double>(Clock::now() - epoch_start).count();
      const double train_loss = global_sum(loss_sum) / static_cast<double>(std::max<int64_t>(batches, 1));
      // Rank 0 evaluates (the models are identical); the others go on.
      const EvalResult eval = lead ? evaluate(*model, test) : EvalResult{};
      records.push_back({.epoch = epoch,
                         .step = global_step,
                         .lr = opt.lr(),
                         .train_loss = train_loss,
                         .test_loss = eval.loss,
                         .test_accuracy = eval.accuracy,
                         .seconds = secs,
                         .samples_per_second = rate()});
      std::printf("%sepoch %d: train loss %.4f  test loss %.4f  test accuracy %.2f%%  (%.1f s, %.0f samples/s%s)\n",
                  tty ? "\r" : "", epoch, train_loss, eval.loss, 100.0 * eval.accuracy, secs, rate(),
                  batches_before > 0 ? ", resumed mid-epoch" : "");
      if (amp) {
        const hg::amp::GradScalerStats st = scaler.stats();  // one host read per epoch
        std::printf("  loss scale %g, %lld of %lld steps skipped (overflow)\n", st.scale,
                    static_cast<long long>(st.steps_skipped), static_cast<long long>(st.iterations));
      }
      std::fflush(stdout);
      // Metrics first, then the checkpoint: a crash between the two leaves a
      // line for an epoch the checkpoint has not finished, which the resume
      // drops and writes again; the other order could lose the line for good.
      require_finite_loss(train_loss);
      if (lead) {
        hg::train::write_metrics(metrics_path, records);
        hg::train::write_curves(curves_path, records, title);
      }
      loss_sum.fill_(0.0);
      batches = samples = 0;
      save();
    }
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    if (!stopped) {
      std::printf("done in %.1f s; %s holds checkpoint.safetensors, metrics.jsonl and curves.svg\n", total,
                  o.out.c_str());
    }
  } catch (const hg::Error& e) {
    std::fprintf(stderr, "hg-train: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // a bug, but reported, not an abort
    std::fprintf(stderr, "hg-train: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}

#include "examples/train_gpt.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/atomic_file.h"
#include "core/generator.h"
#include "core/log.h"
#include "data/text.h"
#include "train/run_folder.h"
#include "train/terminal.h"
#include "train/common.h"
#include "train/report.h"
#include "kernels/gemm.h"
#include "kernels/reduce.h"
#include "nn/models/gpt.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/make_optimizer.h"

namespace hg::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The options a resumed run must share with the run that wrote the
// checkpoint (everything that changes the arithmetic), and the corpus's size
// and vocabulary (other text would train another model).
std::map<std::string, std::string> run_config(const GptJobOptions& o, const data::CharCorpus& corpus) {
  return {{"config.model", "gpt"},
          {"config.precision", o.precision},
          {"config.batch_size", std::to_string(o.batch_size)},
          {"config.lr", optim::exact_double_string(o.lr)},
          {"config.schedule", o.schedule},
          {"config.warmup_steps", std::to_string(o.warmup_steps)},
          {"config.clip_grad", optim::exact_double_string(o.clip_grad)},
          {"config.seed", std::to_string(o.seed)},
          {"config.iters", std::to_string(o.iters)},
          {"config.eval_every", std::to_string(o.eval_every)},
          {"config.eval_batches", std::to_string(o.eval_batches)},
          {"config.n_layer", std::to_string(o.n_layer)},
          {"config.n_head", std::to_string(o.n_head)},
          {"config.n_embd", std::to_string(o.n_embd)},
          {"config.block_size", std::to_string(o.block_size)},
          {"config.dropout", optim::exact_double_string(o.dropout)},
          {"config.weight_decay", optim::exact_double_string(o.weight_decay)},
          {"data.bytes", std::to_string(corpus.size())},
          {"data.vocab_size", std::to_string(corpus.vocab_size())}};
}

// Before anything is loaded: the same options and data, and counters this
// loop can have produced.
void check_resume(const optim::TrainingProgress& p, const std::map<std::string, std::string>& config,
                  const GptJobOptions& o, bool scheduled) {
  HG_CHECK(p.extra.count("config.model") != 0 && p.extra.at("config.model") == "gpt",
           "--resume: the checkpoint was not written by hg-train --model gpt (its model is ",
           p.extra.count("config.model") != 0 ? p.extra.at("config.model") : std::string("(none)"),
           "); use that --model, or another --out");
  // Floating options are stored exactly ("%a"); shown as the user typed them.
  auto shown = [](const std::string& value) {
    if (value.rfind("0x", 0) != 0 && value.rfind("-0x", 0) != 0) return value.substr(0, 60);
    try {
      return decimal(optim::parse_exact_double(value));
    } catch (const Error&) {
      return value.substr(0, 60);
    }
  };
  for (const auto& [key, value] : config) {
    auto it = p.extra.find(key);
    std::string what = key.rfind("data.", 0) == 0 ? "the corpus's " + key.substr(5) : "--" + key.substr(7);
    std::replace(what.begin() + 2, what.end(), '_', what[0] == '-' ? '-' : ' ');
    HG_CHECK(it != p.extra.end() && it->second == value, "--resume: the checkpoint was written with ", what, " = ",
             it == p.extra.end() ? std::string("(none)") : shown(it->second), ", this run has ", shown(value),
             "; use the same options and --data to continue the run");
  }
  HG_CHECK(p.global_step >= 0 && p.global_step <= o.iters && p.epoch == 0 && p.batch == 0 &&
               p.scheduler_step == (scheduled ? p.global_step : 0),
           "--resume: the checkpoint's counters (step ", p.global_step, ", scheduler step ", p.scheduler_step,
           ") do not fit a run of ", o.iters, " iterations; the file is corrupt");
  extra_int(p, "interval_batches", p.global_step);
  extra_int(p, "eval_interval_batches", p.global_step);
  extra_sum(p, "interval_loss_sum");
  extra_sum(p, "eval_interval_loss_sum");
}

// The corpus: every file of a folder (CharCorpus::from_folder), or one file.
data::CharCorpus read_corpus(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return data::CharCorpus::from_folder(path);
  std::ifstream in(path, std::ios::binary);
  HG_CHECK(in.good(), "--data: cannot read '", path, "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  HG_CHECK(!text.empty(), "--data: '", path, "' is empty; give a text file or a folder of text files");
  return data::CharCorpus(std::move(text));
}

// `count` windows of `block` tokens (and their next tokens) at evenly spaced
// starts over `tokens`: the validation set, the same at every evaluation.
std::pair<Tensor, Tensor> fixed_windows(const Tensor& tokens, int64_t count, int64_t block, Device device) {
  const int64_t n = tokens.numel();
  HG_CHECK(n > block + 1, "the validation split has ", n, " tokens, too few for windows of --block-size ", block,
           "; use a smaller --block-size or more text");
  const std::vector<int64_t> t = tokens.contiguous().to_vector<int64_t>();
  const int64_t last = n - block - 1;  // the last start whose next-token window fits
  std::vector<int64_t> x(static_cast<size_t>(count * block)), y(x.size());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t start = count == 1 ? 0 : i * last / (count - 1);
    std::copy(t.begin() + start, t.begin() + start + block, x.begin() + i * block);
    std::copy(t.begin() + start + 1, t.begin() + start + block + 1, y.begin() + i * block);
  }
  return {from_vector(x, {count, block}).to(device), from_vector(y, {count, block}).to(device)};
}

struct Eval {
  double loss = 0.0, accuracy = 0.0, seconds = 0.0;
};

// Mean cross-entropy and next-token accuracy over the validation windows, in
// chunks of `batch` windows, under the training's autocast.
Eval evaluate(nn::GPT& model, const std::pair<Tensor, Tensor>& val, int64_t batch, const Precision& prec) {
  const auto start = Clock::now();
  NoGradGuard no_grad;
  model.eval();
  const int64_t n = val.first.size(0), v = model.config().vocab_size;
  double loss_sum = 0.0;
  int64_t correct = 0, tokens = 0;
  for (int64_t s = 0; s < n; s += batch) {
    const int64_t len = std::min(batch, n - s);
    const Tensor x = narrow(val.first, 0, s, len), y = reshape(narrow(val.second, 0, s, len), {-1});
    Tensor logits, loss;
    {
      amp::Autocast autocast(prec.autocast_dtype, prec.autocast);
      // The padded logits as computed (no copy); the loss and the prediction over the v real columns.
      const Tensor padded = model.forward_padded(x);
      loss = cross_entropy(reshape(padded, {-1, padded.size(2)}), y, -100, 0.0, v);
      logits = narrow(reshape(padded, {-1, padded.size(2)}), 1, 0, v);
    }
    loss_sum += loss.item<double>() * static_cast<double>(y.numel());
    const std::vector<int64_t> predicted = ops::argmax(logits, 1).to_vector<int64_t>();
    const std::vector<int64_t> target = y.to_vector<int64_t>();
    for (size_t i = 0; i < target.size(); ++i) correct += predicted[i] == target[i];
    tokens += y.numel();
  }
  model.train();
  return {loss_sum / static_cast<double>(tokens), static_cast<double>(correct) / static_cast<double>(tokens),
          std::chrono::duration<double>(Clock::now() - start).count()};
}

// A point of the train-loss curve, still on the device (read when flushed).
struct PendingPoint {
  long long step;
  Tensor loss_sum;
  int64_t batches;
  double lr;
  Tensor scaler;  // GradScaler::snapshot() (undefined without a scaler)
};

std::string fixed(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// --precision auto: amp-bf16 where bf16 matmuls are native (a GPU with bf16,
// a CPU with AVX512_BF16/AMX through oneDNN), else amp-fp16 on a GPU and fp32
// on a CPU (where 16-bit math would be widened to f32 and cost time).
std::string resolve_precision(const std::string& precision, Device device) {
  if (precision != "auto") return precision;
  if (device.is_cpu()) return std::string(cpu::gemm_path(kBF16)) == "onednn-bf16" ? "amp-bf16" : "fp32";
  return amp::supported(device, kBF16) ? "amp-bf16" : "amp-fp16";
}

int run(const GptJobOptions& options) {
  Terminal term;
  try {
    const Device device = pick_device(options.device);
    GptJobOptions o = options;
    o.precision = resolve_precision(options.precision, device);
    // The run folder first: locked, writable, not someone else's results.
    RunFolder folder(o.out, o.resume ? StartMode::kResume : o.overwrite ? StartMode::kOverwrite : StartMode::kFresh);
    if (folder.stale_temp_files_removed() > 0) {
      term.paragraph("hg-train: removed " + std::to_string(folder.stale_temp_files_removed()) +
                     " temp file(s) left in " + o.out + " by killed saves");
    }
    HG_CHECK(o.n_embd % o.n_head == 0, "--n-embd ", o.n_embd, " is not divisible by --n-head ", o.n_head,
             "; use a multiple of the head count");
    const Precision prec = precision_of(o.precision);
    amp::GradScaler scaler({.enabled = prec.scaler});
    term.paragraph("hg-train: " + amp::capability_report(device));
    if (prec.autocast) {
      amp::Autocast probe(prec.autocast_dtype);  // raises for bf16 on a GPU without it
    }

    const data::CharCorpus corpus = read_corpus(o.data);
    const auto [train_tokens, val_tokens] = corpus.split(0.9);
    HG_CHECK(train_tokens.numel() > o.block_size + 1, "--data holds ", corpus.size(),
             " bytes: its 90% training split is too short for --block-size ", o.block_size,
             "; use more text or a smaller block");
    const auto val = fixed_windows(val_tokens, o.eval_batches * o.batch_size, o.block_size, device);
    const std::map<std::string, std::string> config = run_config(o, corpus);

    Generator gen(o.seed);  // init, dropout and the batches: one stream, saved in the checkpoint
    const nn::GPTConfig model_config{.n_layer = o.n_layer,
                                     .n_head = o.n_head,
                                     .n_embd = o.n_embd,
                                     .block_size = o.block_size,
                                     .vocab_size = corpus.vocab_size(),
                                     .dropout = o.dropout,
                                     .bias = true};
    auto model = std::make_shared<nn::GPT>(model_config, &gen);
    model->to(device);
    model->to(prec.weights);
    std::unique_ptr<optim::Optimizer> opt =
        o.optimizer == "adamw"
            ? std::unique_ptr<optim::Optimizer>(model->configure_optimizers(o.weight_decay, o.lr, 0.9, 0.99))
            : optim::make_optimizer(o.optimizer, model->named_parameters(), o.lr, o.weight_decay, 0.99);
    scaler.set_parameter_names(model->named_parameters());
    // Under a scaler the schedule counts applied steps (a skipped step does
    // not advance the lr), as in the Fashion-MNIST job.
    std::unique_ptr<optim::LRScheduler> schedule;
    if (o.schedule == "cosine") {
      const int64_t warmup = std::min(o.warmup_steps, o.iters / 2);
      schedule = std::make_unique<optim::WarmupCosineLR>(
          *opt, optim::WarmupCosineOptions{}
                    .set_warmup_steps(warmup)
                    .set_total_steps(o.iters)
                    .set_min_lr_ratio(0.1)
                    .set_clock(prec.scaler ? optim::ScheduleClock::kAppliedSteps : optim::ScheduleClock::kCalls));
    }
    auto current_lr = [&] { return schedule ? schedule->last_lr() : opt->lr(); };
    const int64_t log_every = o.log_every > 0 ? o.log_every : std::max<int64_t>(o.eval_every / 25, 1);

    const std::string ckpt_path = folder.file("checkpoint.safetensors");
    const std::string metrics_path = folder.file("metrics.jsonl");
    const std::string curves_path = folder.file("curves.svg");
    const std::string sample_path = folder.file("sample.txt");
    const std::string shape = std::to_string(o.n_layer) + " layers x " + std::to_string(o.n_head) + " heads x " +
                              std::to_string(o.n_embd) + ", block " + std::to_string(o.block_size);
    const std::string title = "hg-train: gpt (" + shape + "), " + o.precision + ", " + device.str() + ", " +
                              std::to_string(o.iters) + " iters, batch " + std::to_string(o.batch_size) + ", lr " +
                              decimal(o.lr) + " " + o.schedule +
                              (o.seed != 0 ? ", seed " + std::to_string(o.seed) : "");

    // Running loss sums on the device: since the last curve point and since the last evaluation.
    Tensor interval_sum = zeros({}, {.device = device}), eval_sum = zeros({}, {.device = device});
    int64_t interval_batches = 0, eval_batches = 0, global_step = 0;
    Metrics metrics;
    std::vector<PendingPoint> pending;

    if (o.resume) {
      HG_CHECK(fs::exists(ckpt_path), "--resume: no checkpoint at '", ckpt_path,
               "'; run once without --resume (same --out) first");
      optim::NamedTensors scaler_state;
      const optim::TrainingProgress p = optim::load_training_checkpoint(
          ckpt_path, *model, *opt, &scaler_state,
          [&](const optim::TrainingProgress& q) { check_resume(q, config, o, schedule != nullptr); });
      if (prec.scaler) {
        HG_CHECK(!scaler_state.empty(), "--resume: the checkpoint holds no loss-scaler state; the file is corrupt");
        scaler.load_state_dict(scaler_state);
      }
      gen.set_state(p.generator);
      if (schedule) schedule->set_last_step(p.scheduler_step);
      global_step = p.global_step;
      interval_batches = extra_int(p, "interval_batches", p.global_step);
      eval_batches = extra_int(p, "eval_interval_batches", p.global_step);
      interval_sum.fill_(extra_sum(p, "interval_loss_sum"));
      eval_sum.fill_(extra_sum(p, "eval_interval_loss_sum"));
      // Lines past the checkpoint (killed between the metrics and the
      // checkpoint write) are dropped and written again when training gets there.
      const Metrics earlier = read_metrics(metrics_path);
      for (const auto& r : earlier.steps) {
        if (r.step <= global_step) metrics.steps.push_back(r);
      }
      for (const auto& r : earlier.evals) {
        if (r.step <= global_step) metrics.evals.push_back(r);
      }
      term.paragraph("hg-train: resuming from " + ckpt_path + " at step " + std::to_string(global_step));
    }

    auto require_finite_loss = [&](double v) {
      HG_CHECK(std::isfinite(v), "the training loss became ", v, " by step ", global_step,
               ": the run diverged, so it stops here without saving; lower --lr or --clip-grad, then start again "
               "(or --resume from the last checkpoint)");
    };
    auto flush_points = [&] {
      for (const PendingPoint& q : pending) {
        StepRecord r{.step = q.step,
                     .epoch = static_cast<double>(q.step * o.batch_size * o.block_size) /
                              static_cast<double>(train_tokens.numel()),
                     .train_loss = q.loss_sum.item<double>() / static_cast<double>(q.batches),
                     .lr = q.lr};
        require_finite_loss(r.train_loss);
        if (q.scaler.defined()) {
          const amp::GradScalerStats st = scaler.stats_of(q.scaler);
          r.loss_scale = st.scale;
          r.steps_skipped = st.steps_skipped;
        }
        metrics.steps.push_back(r);
      }
      pending.clear();
    };
    // Metrics and curves first, then the checkpoint (a kill between the two
    // leaves lines a resume drops and writes again).
    auto save = [&] {
      flush_points();
      require_finite_loss(eval_sum.item<double>());
      write_metrics(metrics_path, metrics);
      write_curves(curves_path, metrics, title);
      optim::TrainingProgress p{.global_step = global_step,
                                .scheduler_step = schedule ? schedule->last_step() : 0,
                                .generator = gen.get_state(),
                                .extra = config};
      p.extra["interval_loss_sum"] = optim::exact_double_string(interval_sum.item<double>());
      p.extra["interval_batches"] = std::to_string(interval_batches);
      p.extra["eval_interval_loss_sum"] = optim::exact_double_string(eval_sum.item<double>());
      p.extra["eval_interval_batches"] = std::to_string(eval_batches);
      optim::save_training_checkpoint(ckpt_path, *model, *opt, p,
                                      prec.scaler ? scaler.state_dict() : optim::NamedTensors{});
    };

    term.paragraph("hg-train: gpt (" + shape + ", " + std::to_string(model->num_params(false)) + " parameters) on " +
                   device.str() + ", precision " + o.precision + "; " + std::to_string(corpus.size()) +
                   " bytes of text, vocabulary " + std::to_string(corpus.vocab_size()) + ", " +
                   std::to_string(train_tokens.numel()) + " train / " + std::to_string(val_tokens.numel()) +
                   " validation tokens; " + std::to_string(o.iters) + " iterations of batch " +
                   std::to_string(o.batch_size) + ", " + o.optimizer + " lr " + decimal(o.lr) + " (" + o.schedule +
                   ")");
    if (o.max_steps > 0 && global_step >= o.max_steps) {
      term.paragraph("hg-train: the checkpoint is at step " + std::to_string(global_step) +
                     ", already at --max-steps " + std::to_string(o.max_steps) +
                     ": nothing to do (raise --max-steps, or drop it, to continue)");
      return 0;
    }
    const std::vector<Tensor> params = model->parameters();
    const int64_t tokens_per_step = o.batch_size * o.block_size;
    const auto start = Clock::now();
    const int64_t first_step = global_step;
    double eval_seconds_total = 0.0;
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    auto interval_start = Clock::now();
    const int64_t report_every = term.tty() ? 5 : std::max<int64_t>(o.eval_every / 5, 1);
    const int64_t last_step = o.max_steps > 0 ? std::min(o.max_steps, o.iters) : o.iters;
    bool stopped = false;
    StepProfiler profiler(o.profile, o.out);
    while (global_step < o.iters) {
      auto [x, y] = data::random_windows(train_tokens, o.batch_size, o.block_size, gen, device);
      profiler.before(global_step - first_step);
      opt->zero_grad();
      Tensor loss;
      {
        amp::Autocast autocast(prec.autocast_dtype, /*enabled=*/prec.autocast);
        loss = model->loss(x, y);
      }
      scaler.scale(loss).backward();
      if (o.clip_grad > 0) {
        scaler.unscale_(*opt);
        optim::clip_grad_norm_(params, o.clip_grad);
      }
      scaler.step(*opt);
      scaler.update();
      if (schedule) schedule->step();
      profiler.after();
      {
        NoGradGuard no_grad;
        const Tensor l = loss.detach();
        interval_sum = interval_sum + l;
        eval_sum = eval_sum + l;
      }
      ++global_step;
      ++interval_batches;
      ++eval_batches;
      const double train_seconds = elapsed() - eval_seconds_total;
      auto rate = [&] {
        return train_seconds > 0 ? static_cast<double>((global_step - first_step) * tokens_per_step) / train_seconds
                                 : 0.0;
      };
      if (global_step % log_every == 0 || global_step == o.iters) {
        pending.push_back({.step = global_step,
                           .loss_sum = interval_sum,
                           .batches = interval_batches,
                           .lr = current_lr(),
                           .scaler = scaler.snapshot()});
        interval_sum = zeros({}, {.device = device});
        interval_batches = 0;
      }
      const bool eval_now = global_step % o.eval_every == 0 || global_step == o.iters;
      if (!eval_now && global_step % report_every == 0) {
        const double mean = eval_sum.item<double>() / static_cast<double>(std::max<int64_t>(eval_batches, 1));
        require_finite_loss(mean);
        const double per_step = train_seconds / static_cast<double>(global_step - first_step);
        const double eta = per_step * static_cast<double>(last_step - global_step);
        std::vector<Piece> pieces{{"step " + std::to_string(global_step) + "/" + std::to_string(o.iters)},
                                  {"", 3, true, static_cast<double>(global_step) / static_cast<double>(o.iters)},
                                  {fixed("loss %.4f", mean)}};
        if (prec.scaler) {
          const amp::GradScalerStats st = scaler.stats();
          pieces.push_back({"scale " + scale_text(st.scale), 1});
          pieces.push_back({"skip " + std::to_string(st.steps_skipped), 1});
        }
        pieces.push_back({clock_time(elapsed()) + " eta " + clock_time(eta), 2});
        pieces.push_back({short_count(rate()) + " tok/s", 4});
        pieces.push_back({fixed("lr %.2e", current_lr()), 5});
        if (term.tty()) {
          term.progress(fit_line(pieces, term.columns()));
        } else {
          pieces.erase(pieces.begin() + 1);  // no bar in a log
          term.line("  " + fit_line(pieces, term.columns() - 2));
        }
      }
      if (eval_now) {
        const double train_loss = eval_sum.item<double>() / static_cast<double>(std::max<int64_t>(eval_batches, 1));
        require_finite_loss(train_loss);
        if (term.tty()) term.progress("step " + std::to_string(global_step) + ": evaluating");
        const Eval ev = evaluate(*model, val, o.batch_size, prec);
        eval_seconds_total += ev.seconds;
        const double interval_seconds =
            std::chrono::duration<double>(Clock::now() - interval_start).count() - ev.seconds;
        EvalRecord r{.step = global_step,
                     .lr = current_lr(),
                     .train_loss = train_loss,
                     .val_loss = ev.loss,
                     .val_accuracy = ev.accuracy,
                     .seconds = interval_seconds,
                     .tokens_per_second = interval_seconds > 0
                                              ? static_cast<double>(eval_batches * tokens_per_step) / interval_seconds
                                              : 0.0};
        if (prec.scaler) {
          const amp::GradScalerStats st = scaler.stats();
          r.loss_scale = st.scale;
          r.steps_skipped = st.steps_skipped;
        }
        metrics.evals.push_back(r);
        std::vector<Piece> summary{{"step " + std::to_string(global_step) + "/" + std::to_string(o.iters) + ": " +
                                    fixed("train loss %.4f", train_loss)},
                                   {fixed("val loss %.4f", ev.loss)},
                                   {fixed("val accuracy %.2f%%", 100.0 * ev.accuracy), 3}};
        if (prec.scaler) summary.push_back({"scale " + scale_text(r.loss_scale), 4});
        summary.push_back({fixed("%.1f s", interval_seconds), 5});
        summary.push_back({short_count(r.tokens_per_second) + " tokens/s", 6});
        term.line(fit_line(summary, term.columns()));
        eval_sum.fill_(0.0);
        eval_batches = 0;
        interval_start = Clock::now();
        save();
      } else if (o.checkpoint_every > 0 && global_step % o.checkpoint_every == 0) {
        save();
      }
      if (o.max_steps > 0 && global_step >= o.max_steps && global_step < o.iters) {
        if (!eval_now) save();
        term.line("stopped after step " + std::to_string(global_step) +
                  " (--max-steps); continue with --resume --out " + o.out);
        stopped = true;
        break;
      }
    }
    if (stopped) return 0;

    // The sample: its own generator, so it depends only on the trained weights.
    Generator sample_gen(o.seed + 1);
    const int64_t newline = static_cast<int64_t>(corpus.vocab().find('\n'));
    const Tensor context =
        from_vector(std::vector<int64_t>{newline == static_cast<int64_t>(std::string::npos) ? 0 : newline}, {1, 1})
            .to(device);
    Tensor sample;
    {
      amp::Autocast autocast(prec.autocast_dtype, prec.autocast);
      sample = model->generate(context, o.sample_tokens, o.temperature, o.top_k, &sample_gen);
    }
    const std::string text = corpus.decode(select(sample, 0, 0)).substr(1);
    {
      AtomicFile out(sample_path, "hg-train");
      out.write(text);
      out.commit();
    }
    const double val_loss = metrics.evals.empty() ? NAN : metrics.evals.back().val_loss;
    term.paragraph("done in " + fixed("%.1f s", elapsed()) + "; validation loss " + fixed("%.4f", val_loss) + "; " +
                   o.out + " holds checkpoint.safetensors, metrics.jsonl, curves.svg and sample.txt");
    const std::string how =
        "temperature " + decimal(o.temperature) + (o.top_k > 0 ? ", top-k " + std::to_string(o.top_k) : std::string());
    std::printf("sample (%lld tokens, %s):\n%s\n", static_cast<long long>(o.sample_tokens), how.c_str(), text.c_str());
  } catch (const Error& e) {
    term.end_progress();
    std::fprintf(stderr, "hg-train: %s\n", hg::train::without_program_prefix(e.message()).c_str());
    HG_LOG_DEBUG("hg-train: the error was raised at {}:{}", e.file(), e.line());
    return 1;
  } catch (const std::exception& e) {
    term.end_progress();
    std::fprintf(stderr, "hg-train: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int train_gpt(const GptJobOptions& options) { return run(options); }

}  // namespace hg::train

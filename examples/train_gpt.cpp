#include "examples/train_gpt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "core/atomic_file.h"
#include "core/generator.h"
#include "core/log.h"
#include "data/text.h"
#include "kernels/reduce/reduce.h"
#include "nn/models/gpt.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/make_optimizer.h"
#include "train/precision.h"
#include "train/terminal.h"
#include "train/trainer.h"

namespace hg::train {
namespace {

namespace fs = std::filesystem;

// The options a resumed run must share with the run that wrote the
// checkpoint (everything that changes the arithmetic), and the corpus's size
// and vocabulary (other text would train another model).
std::map<std::string, std::string> run_config(const GptJobOptions& o, const std::string& precision,
                                              const data::CharCorpus& corpus) {
  return {{"config.model", "gpt"},
          {"config.precision", precision},
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

// Mean cross-entropy and next-token accuracy over the validation windows, in
// chunks of `batch` windows (the Trainer runs it without gradients, in eval
// mode, under the training's autocast).
Evaluation evaluate(nn::GPT& model, const std::pair<Tensor, Tensor>& val, int64_t batch) {
  const int64_t n = val.first.size(0), v = model.config().vocab_size;
  double loss_sum = 0.0;
  int64_t correct = 0, tokens = 0;
  for (int64_t s = 0; s < n; s += batch) {
    const int64_t len = std::min(batch, n - s);
    const Tensor x = narrow(val.first, 0, s, len), y = reshape(narrow(val.second, 0, s, len), {-1});
    // The padded logits as computed (no copy); the loss and the prediction over the v real columns.
    const Tensor padded = model.forward_padded(x);
    const Tensor loss = cross_entropy(reshape(padded, {-1, padded.size(2)}), y, -100, 0.0, v);
    const Tensor logits = narrow(reshape(padded, {-1, padded.size(2)}), 1, 0, v);
    loss_sum += loss.item<double>() * static_cast<double>(y.numel());
    const std::vector<int64_t> predicted = ops::argmax(logits, 1).to_vector<int64_t>();
    const std::vector<int64_t> target = y.to_vector<int64_t>();
    for (size_t i = 0; i < target.size(); ++i) correct += predicted[i] == target[i];
    tokens += y.numel();
  }
  return {loss_sum / static_cast<double>(tokens), static_cast<double>(correct) / static_cast<double>(tokens)};
}

int run(const GptJobOptions& options) {
  Terminal term;
  try {
    const Device device = pick_device(options.device);
    const GptJobOptions& o = options;
    Trainer trainer({.program = "hg-train",
                     .out = o.out,
                     .resume = o.resume,
                     .overwrite = o.overwrite,
                     .device = device,
                     .precision = o.precision,
                     .steps = o.iters,
                     .eval_every = o.eval_every,
                     .clip_grad = o.clip_grad,
                     .fp8_keep = o.fp8_keep,
                     .checkpoint_every = o.checkpoint_every,
                     .max_steps = o.max_steps,
                     .log_every = o.log_every > 0 ? o.log_every : std::max<int64_t>(o.eval_every / 25, 1),
                     .profile = o.profile},
                    &term);
    HG_CHECK(o.n_embd % o.n_head == 0, "--n-embd ", o.n_embd, " is not divisible by --n-head ", o.n_head,
             "; use a multiple of the head count");
    const std::string& precision = trainer.precision_name();  // --precision auto, resolved

    const data::CharCorpus corpus = read_corpus(o.data);
    const auto [train_tokens, val_tokens] = corpus.split(0.9);
    HG_CHECK(train_tokens.numel() > o.block_size + 1, "--data holds ", corpus.size(),
             " bytes: its 90% training split is too short for --block-size ", o.block_size,
             "; use more text or a smaller block");
    const auto val = fixed_windows(val_tokens, o.eval_batches * o.batch_size, o.block_size, device);

    Generator gen(o.seed);  // init, dropout and the batches: one stream, saved in the checkpoint
    const nn::GPTConfig model_config{.n_layer = o.n_layer,
                                     .n_head = o.n_head,
                                     .n_embd = o.n_embd,
                                     .block_size = o.block_size,
                                     .vocab_size = corpus.vocab_size(),
                                     .dropout = o.dropout,
                                     .bias = true};
    auto model = std::make_shared<nn::GPT>(model_config, &gen);
    trainer.place(model);
    std::unique_ptr<optim::Optimizer> opt =
        o.optimizer == "adamw"
            ? std::unique_ptr<optim::Optimizer>(model->configure_optimizers(o.weight_decay, o.lr, 0.9, 0.99))
            : optim::make_optimizer(o.optimizer, model->named_parameters(), o.lr, o.weight_decay, 0.99);
    std::unique_ptr<optim::LRScheduler> schedule;
    if (o.schedule == "cosine") {
      const int64_t warmup = std::min(o.warmup_steps, o.iters / 2);
      schedule = std::make_unique<optim::WarmupCosineLR>(*opt, optim::WarmupCosineOptions{}
                                                                   .set_warmup_steps(warmup)
                                                                   .set_total_steps(o.iters)
                                                                   .set_min_lr_ratio(0.1)
                                                                   .set_clock(trainer.schedule_clock()));
    }
    trainer.set_optimizer(*opt, schedule.get());

    const std::string shape = std::to_string(o.n_layer) + " layers x " + std::to_string(o.n_head) + " heads x " +
                              std::to_string(o.n_embd) + ", block " + std::to_string(o.block_size);
    const FitResult result = trainer.fit(
        {.loss = [&](const Tensor& x, const Tensor& y) { return model->loss(x, y); },
         .next_batch = [&] { return data::random_windows(train_tokens, o.batch_size, o.block_size, gen, device); },
         .evaluate = [&](const EvalProgress&) { return evaluate(*model, val, o.batch_size); },
         .generator = &gen,
         .config = run_config(o, precision, corpus),
         .config_hint = "use the same options and --data to continue the run",
         .title = "hg-train: gpt (" + shape + "), " + precision + ", " + device.str() + ", " + std::to_string(o.iters) +
                  " iters, batch " + std::to_string(o.batch_size) + ", lr " + decimal(o.lr) + " " + o.schedule +
                  (o.seed != 0 ? ", seed " + std::to_string(o.seed) : ""),
         .header = "hg-train: gpt (" + shape + ", " + std::to_string(model->num_params(false)) + " parameters) on " +
                   device.str() + ", precision " + precision + "; " + std::to_string(corpus.size()) +
                   " bytes of text, vocabulary " + std::to_string(corpus.vocab_size()) + ", " +
                   std::to_string(train_tokens.numel()) + " train / " + std::to_string(val_tokens.numel()) +
                   " validation tokens; " + std::to_string(o.iters) + " iterations of batch " +
                   std::to_string(o.batch_size) + ", " + o.optimizer + " lr " + decimal(o.lr) + " (" + o.schedule + ")",
         .unit = "tokens",
         .items_per_epoch = static_cast<double>(train_tokens.numel()),
         .test_name = "val"});
    if (!result.finished) return 0;

    // The sample: its own generator, so it depends only on the trained weights.
    Generator sample_gen(o.seed + 1);
    const int64_t newline = static_cast<int64_t>(corpus.vocab().find('\n'));
    const Tensor context =
        from_vector(std::vector<int64_t>{newline == static_cast<int64_t>(std::string::npos) ? 0 : newline}, {1, 1})
            .to(device);
    Tensor sample;
    {
      amp::Autocast autocast(trainer.precision().autocast_dtype, trainer.precision().autocast);
      sample = model->generate(context, o.sample_tokens, o.temperature, o.top_k, &sample_gen);
    }
    const std::string text = corpus.decode(select(sample, 0, 0)).substr(1);
    {
      AtomicFile out(trainer.file("sample.txt"), "hg-train");
      out.write(text);
      out.commit();
    }
    const Metrics& metrics = trainer.metrics();
    const double val_loss = metrics.evals.empty() ? NAN : metrics.evals.back().val_loss;
    term.paragraph("done in " + fixed("%.1f s", result.seconds) + "; validation loss " + fixed("%.4f", val_loss) +
                   "; " + o.out + " holds checkpoint.safetensors, metrics.jsonl, curves.svg and sample.txt");
    const std::string how =
        "temperature " + decimal(o.temperature) + (o.top_k > 0 ? ", top-k " + std::to_string(o.top_k) : std::string());
    std::printf("sample (%lld tokens, %s):\n%s\n", static_cast<long long>(o.sample_tokens), how.c_str(), text.c_str());
  } catch (const Error& e) {
    term.end_progress();
    std::fprintf(stderr, "hg-train: %s\n", without_program_prefix(e.message(), "hg-train").c_str());
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

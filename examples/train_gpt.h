// hg-train --model gpt: a character-level GPT (nn/models/gpt.h) trained on a
// plain-text corpus (by default the fortunes Debian ships), nanoGPT's
// shakespeare_char recipe in C++ (docs/gpt.md):
//
//   * the text's bytes are the vocabulary; the first 90% trains, the rest
//     validates (data/text.h);
//   * every step is a batch of random windows drawn from the run's seeded
//     generator; the run is counted in iterations (--iters), not epochs;
//   * AdamW with two parameter groups (GPT::configure_optimizers), betas
//     (0.9, 0.99), weight decay 0.1, linear warmup and cosine decay to a tenth
//     of the peak lr, the gradient norm clipped to 1;
//   * every --eval-every steps the validation loss and next-token accuracy on
//     fixed, evenly spaced validation windows (the same windows every time,
//     so the curve has no sampling noise), a line, metrics.jsonl, curves.svg
//     and the checkpoint;
//   * at the end a text sample (sample.txt), drawn from its own seeded
//     generator, so it depends only on the weights.
// --resume continues bit-exactly (the generator state is in the checkpoint).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hg::train {

struct GptJobOptions {
  // What the two jobs share (hg-train's options, GPT defaults).
  std::string device = "auto";
  std::string precision = "auto";  // amp-bf16 where bf16 matmuls are native, else fp32 (CPU) / amp-fp16 (GPU)
  int64_t batch_size = 12;
  double lr = 1e-3;
  std::string optimizer = "adamw";  // adamw | lion | muon (optim/make_optimizer.h)
  std::string schedule = "cosine";  // cosine | constant
  int64_t warmup_steps = 100;
  double clip_grad = 1.0;
  std::vector<std::string> fp8_keep = {};  // amp-fp8: Linear layers kept in bf16 (TrainerOptions::fp8_keep)
  uint64_t seed = 0;
  std::string data = "/usr/share/games/fortunes";  // a folder of text files, or one file
  std::string out = "runs/hg-train-gpt";
  bool resume = false;
  bool overwrite = false;
  int64_t checkpoint_every = 0;
  int64_t max_steps = 0;
  int64_t log_every = 0;  // 0: every eval_every / 25 steps
  int64_t profile = 0;    // profile the N-th step of this process (0: none)
  // The model and the run.
  int64_t iters = 2000;
  int64_t eval_every = 250;
  int64_t eval_batches = 20;  // validation windows = eval_batches x batch_size
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 64;
  double dropout = 0.0;
  double weight_decay = 0.1;
  int64_t sample_tokens = 500;
  double temperature = 0.8;
  int64_t top_k = 0;
};

// Runs the job; returns the process's exit code (errors are printed).
int train_gpt(const GptJobOptions& options);

}  // namespace hg::train

// hg::train::Trainer: a user's own model trained with it (the example of
// docs/training.md, "Your own model", compiled and run here), its resume
// against an uninterrupted run, gradient accumulation against one whole
// batch, and the precision table.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "core/error.h"
#include "core/generator.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "train/precision.h"
#include "train/trainer.h"

namespace {

// ---- the example of docs/training.md, "Your own model" ----------------------
// A model of your own: two layers that learn which quadrant pairs a point
// falls in (label 1 when x and y have the same sign).
struct Quadrants : hg::nn::Module {
  explicit Quadrants(hg::Generator* gen)
      : hidden(register_module("hidden", std::make_shared<hg::nn::Linear>(2, 32, true, gen))),
        out(register_module("out", std::make_shared<hg::nn::Linear>(32, 2, true, gen))) {}
  hg::Tensor forward(const hg::Tensor& x) override { return out->forward(hg::relu(hidden->forward(x))); }
  std::shared_ptr<hg::nn::Linear> hidden, out;
};

// n random points in [-1, 1)^2 and their labels.
hg::train::Batch quadrant_batch(int64_t n, hg::Generator& gen) {
  const hg::Tensor x = hg::rand({n, 2}, {}, &gen) * 2.0 - 1.0;
  const std::vector<float> p = x.to_vector<float>();
  std::vector<int64_t> label(static_cast<size_t>(n));
  for (size_t i = 0; i < label.size(); ++i) label[i] = (p[2 * i] > 0) == (p[2 * i + 1] > 0);
  return {x, hg::from_vector(label, {n})};
}

// Trains for 300 steps (or stops at max_steps; resume continues bit-exactly).
hg::train::FitResult train_quadrants(const std::string& out, int64_t max_steps, bool resume) {
  hg::train::Trainer trainer({.out = out,
                              .resume = resume,
                              .overwrite = !resume,
                              .precision = "amp-bf16",  // fp32 weights, bf16 matmuls, no loss scaler
                              .steps = 300,
                              .eval_every = 100,
                              .clip_grad = 1.0,
                              .max_steps = max_steps});
  hg::Generator gen(0);  // init and batches; saved in the checkpoint
  auto model = std::make_shared<Quadrants>(&gen);
  trainer.place(model);
  hg::optim::AdamW opt(model->parameters(), {.lr = 1e-2});
  trainer.set_optimizer(opt);

  hg::Generator test_gen(1);
  const hg::train::Batch test = quadrant_batch(512, test_gen);
  return trainer.fit({
      .loss = [&](const hg::Tensor& x, const hg::Tensor& y) { return hg::cross_entropy(trainer.forward(x), y); },
      .next_batch = [&] { return quadrant_batch(64, gen); },
      .evaluate =
          [&](const hg::train::EvalProgress&) {
            const hg::Tensor logits = model->forward(test.first);
            const hg::Tensor hit = (logits.argmax(1) == test.second).to(hg::kF32);
            return hg::train::Evaluation{hg::cross_entropy(logits, test.second).item<double>(),
                                         hit.mean().item<double>()};
          },
      .generator = &gen,
      .config = {{"config.lr", "0.01"}},  // a resume with other values is refused
      .title = "quadrants, amp-bf16",
  });
}
// ---- end of the example -------------------------------------------------------

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::filesystem::path work_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("hg_test_trainer_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("Trainer: the docs' own model learns, writes its run folder and resumes bit-exactly", "[train]") {
  const auto full = work_dir("full"), split = work_dir("split");
  REQUIRE(train_quadrants(full.string(), 0, false).finished);
  for (const char* name : {"checkpoint.safetensors", "metrics.jsonl", "curves.svg"}) {
    CHECK(std::filesystem::exists(full / name));
  }
  // A learned rule, not chance (0.5): the last evaluation's accuracy.
  const hg::train::Metrics m = hg::train::read_metrics((full / "metrics.jsonl").string());
  REQUIRE(m.evals.size() == 3);
  CHECK(m.evals.back().val_accuracy > 0.9);
  CHECK(m.evals.back().val_loss < m.evals.front().val_loss);
  CHECK_FALSE(m.evals.back().has_scaler());  // amp-bf16: no loss scaler (PyTorch's bf16 recipe)

  // Stopped at step 130 (between evaluations), resumed: the same bytes.
  CHECK_FALSE(train_quadrants(split.string(), 130, false).finished);
  REQUIRE(train_quadrants(split.string(), 0, true).finished);
  CHECK(read_all(full / "checkpoint.safetensors") == read_all(split / "checkpoint.safetensors"));
  CHECK(read_all(full / "metrics.jsonl").size() > 0);
  std::filesystem::remove_all(full);
  std::filesystem::remove_all(split);
}

TEST_CASE("Trainer: accumulate = 4 micro-batches gives the step of the whole batch", "[train]") {
  // SGD on a linear model with a mean loss: the gradient of the whole batch is
  // the mean of the micro-batches' gradients, so the weights agree to f32
  // rounding; the reference is the same loop with accumulate = 1.
  auto run = [](int64_t accumulate) {
    const auto dir = work_dir("accumulate" + std::to_string(accumulate));
    hg::train::Trainer trainer({.out = dir.string(), .steps = 5, .accumulate = accumulate});
    hg::Generator gen(3);
    auto model = std::make_shared<hg::nn::Linear>(4, 3, true, &gen);
    trainer.place(model);
    hg::optim::SGD opt(model->parameters(), {.lr = 0.1});
    trainer.set_optimizer(opt);
    hg::Generator data(4);
    trainer.fit(
        {.loss = [&](const hg::Tensor& x, const hg::Tensor& y) { return hg::cross_entropy(trainer.forward(x), y); },
         .next_batch =
             [&] {
               return hg::train::Batch{hg::randn({16, 4}, {}, &data),
                                       hg::from_vector(std::vector<int64_t>(16, 1), {16})};
             }});
    std::filesystem::remove_all(dir);
    return model->parameters()[0].to_vector<float>();
  };
  const std::vector<float> whole = run(1), parts = run(4);
  REQUIRE(whole.size() == parts.size());
  for (size_t i = 0; i < whole.size(); ++i) CHECK(parts[i] == Approx(whole[i]).epsilon(1e-5).margin(1e-6));
  // A batch that does not split evenly is refused with the reason.
  const auto dir = work_dir("uneven");
  hg::train::Trainer trainer({.out = dir.string(), .steps = 1, .accumulate = 3});
  auto model = std::make_shared<hg::nn::Linear>(4, 3);
  trainer.place(model);
  hg::optim::SGD opt(model->parameters(), {.lr = 0.1});
  trainer.set_optimizer(opt);
  CHECK_THROWS_WITH(
      trainer.fit(
          {.loss = [&](const hg::Tensor& x, const hg::Tensor& y) { return hg::cross_entropy(model->forward(x), y); },
           .next_batch =
               [] {
                 return hg::train::Batch{hg::zeros({16, 4}), hg::from_vector(std::vector<int64_t>(16, 0), {16})};
               }}),
      Catch::Contains("does not split into 3 equal micro-batches"));
  std::filesystem::remove_all(dir);
}

namespace {
// amp-fp8: both Linear layers have dims that are multiples of 16, so both run
// in fp8 (the quadrant points padded with 14 noise features).
struct Quadrants16 : hg::nn::Module {
  explicit Quadrants16(hg::Generator* gen)
      : hidden(register_module("hidden", std::make_shared<hg::nn::Linear>(16, 32, true, gen))),
        out(register_module("out", std::make_shared<hg::nn::Linear>(32, 16, true, gen))) {}
  hg::Tensor forward(const hg::Tensor& x) override { return out->forward(hg::relu(hidden->forward(x))); }
  std::shared_ptr<hg::nn::Linear> hidden, out;
};

hg::train::Batch quadrant_batch16(int64_t n, hg::Generator& gen) {
  const hg::train::Batch b = quadrant_batch(n, gen);
  const hg::Tensor noise = hg::rand({n, 14}, {}, &gen) * 0.1;
  return {hg::cat({b.first, noise}, 1), b.second};
}

hg::train::FitResult train_fp8(const std::string& out, int64_t max_steps, bool resume,
                               std::vector<std::string> keep = {}) {
  hg::train::Trainer trainer({.out = out,
                              .resume = resume,
                              .overwrite = !resume,
                              .precision = "amp-fp8",
                              .steps = 200,
                              .eval_every = 100,
                              .clip_grad = 1.0,
                              .fp8_keep = std::move(keep),
                              .max_steps = max_steps});
  hg::Generator gen(0);
  auto model = std::make_shared<Quadrants16>(&gen);
  trainer.place(model);
  hg::optim::AdamW opt(model->parameters(), {.lr = 1e-2});
  trainer.set_optimizer(opt);
  hg::Generator test_gen(1);
  const hg::train::Batch test = quadrant_batch16(512, test_gen);
  return trainer.fit({
      .loss = [&](const hg::Tensor& x, const hg::Tensor& y) { return hg::cross_entropy(trainer.forward(x), y); },
      .next_batch = [&] { return quadrant_batch16(64, gen); },
      .evaluate =
          [&](const hg::train::EvalProgress&) {
            const hg::Tensor logits = model->forward(test.first);
            const hg::Tensor hit = (logits.argmax(1) == test.second).to(hg::kF32);
            return hg::train::Evaluation{hg::cross_entropy(logits, test.second).item<double>(),
                                         hit.mean().item<double>()};
          },
      .generator = &gen,
      .title = "quadrants16, amp-fp8",
  });
}
}  // namespace

TEST_CASE("Trainer amp-fp8: Linear layers in fp8 learn, and the fp8 state resumes bit-exactly", "[train][fp8]") {
  const auto full = work_dir("fp8_full"), split = work_dir("fp8_split"), kept = work_dir("fp8_kept");
  REQUIRE(train_fp8(full.string(), 0, false).finished);
  const hg::train::Metrics m = hg::train::read_metrics((full / "metrics.jsonl").string());
  REQUIRE(m.evals.size() == 2);
  CHECK(m.evals.back().val_accuracy > 0.85);
  // The checkpoint carries the fp8 recipe's state beside the scaler's.
  const std::string ckpt = read_all(full / "checkpoint.safetensors");
  CHECK(ckpt.find("scaler.fp8.") != std::string::npos);
  // Stopped at step 130, resumed: the same bytes (histories and scales included).
  CHECK_FALSE(train_fp8(split.string(), 130, false).finished);
  REQUIRE(train_fp8(split.string(), 0, true).finished);
  CHECK(read_all(split / "checkpoint.safetensors") == ckpt);
  // Keeping a layer changes the arithmetic: a resume with another --fp8-keep is refused.
  CHECK_FALSE(train_fp8(kept.string(), 50, false).finished);
  CHECK_THROWS_WITH(train_fp8(kept.string(), 0, true, {"out"}), Catch::Contains("--fp8-keep"));
  for (const auto& dir : {full, split, kept}) std::filesystem::remove_all(dir);
}

TEST_CASE("precision modes: one table, 'auto' resolved per device", "[train]") {
  const std::vector<std::string> names = hg::train::precision_names();
  CHECK(names == std::vector<std::string>{"fp32", "fp16-master", "bf16-master", "amp-fp16", "amp-bf16", "amp-fp8"});
  const hg::train::Precision fp32 = hg::train::precision_of("fp32");
  CHECK((fp32.weights == hg::kF32 && !fp32.autocast && !fp32.scaler));
  const hg::train::Precision master = hg::train::precision_of("bf16-master");
  CHECK((master.weights == hg::kBF16 && master.autocast && master.autocast_dtype == hg::kBF16 && master.scaler));
  const hg::train::Precision amp = hg::train::precision_of("amp-fp16");
  CHECK((amp.weights == hg::kF32 && amp.autocast && amp.autocast_dtype == hg::kF16 && amp.scaler));
  const hg::train::Precision fp8 = hg::train::precision_of("amp-fp8");
  CHECK((fp8.weights == hg::kF32 && fp8.autocast && fp8.autocast_dtype == hg::kBF16 && fp8.scaler && fp8.fp8));
  CHECK_FALSE(amp.fp8);
  CHECK_THROWS_WITH(hg::train::precision_of("fp8"), Catch::Contains("not a precision mode"));
  const std::string cpu = hg::train::resolve_precision("auto", hg::Device::cpu());
  CHECK(cpu == (hg::train::native_bf16_matmul(hg::Device::cpu()) ? "amp-bf16" : "fp32"));
  CHECK(hg::train::resolve_precision("amp-fp16", hg::Device::cpu()) == "amp-fp16");
}

// The README's "Train a model" snippet, compiled and run (keep the two in sync):
// a 16-bit MLP with fp32 masters, AdamW, warmup + cosine, gradient clipping
// and a training checkpoint, on a tenth of Fashion-MNIST.
#include <catch2/catch.hpp>

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "nn/layers.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "tests/test_files.h"

TEST_CASE("README training loop compiles, trains and checkpoints", "[optim][docs]") {
  const hg::test::TempDir temp;
  const auto& dir = temp.path;
  const auto old_cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  // ---- begin README snippet ----
  using namespace hg;
  Generator gen(0);  // weight init (and dropout) draw from here
  auto model =
      std::make_shared<nn::Sequential>(nn::Linear(784, 256, true, &gen), nn::ReLU(), nn::Linear(256, 10, true, &gen));
  const Device device = Device::cpu();  // or Device::cuda(0)
  model->to(device);
  model->to(kF16);  // 16-bit weights; the optimizer keeps fp32 master copies
  optim::AdamW opt(model->parameters(), {.lr = 2e-3});

  data::FashionMnist train_set;  // reads /usr/share/datasets/fashion-mnist
  data::DataLoader loader(train_set.images(), train_set.labels(),
                          {.batch_size = 128, .shuffle = true, .seed = 0, .drop_last = true, .mean = 0.286,
                           .std = 0.353, .limit = 6000, .device = device, .dtype = kF16});
  const int epochs = 2;
  std::vector<double> losses;
  optim::WarmupCosineLR schedule(opt, {.warmup_steps = 20, .total_steps = epochs * loader.num_batches()});

  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto [x, y] : loader) {
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(x), y);  // fp32 math inside, from f16 logits
      loss.backward();
      optim::clip_grad_norm_(model->parameters(), 1.0);  // stays on the device
      opt.step();                                         // fused: masters, moments, f16 weights
      schedule.step();
      losses.push_back(loss.item<double>());
    }
    optim::save_training_checkpoint("mlp.safetensors", *model, opt,
                                    {.epoch = loader.epoch(), .scheduler_step = schedule.last_step(),
                                     .generator = gen.get_state()});
  }
  // ---- end README snippet ----
  std::filesystem::current_path(old_cwd);
  REQUIRE(losses.size() == 2 * 46);
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += losses[i], last += losses[losses.size() - 1 - i];
  CHECK(last < 0.6 * first);  // it learns: ~2.3 at the start, ~0.6 after two passes
  CHECK(schedule.last_step() == 92);
  CHECK(opt.lr() < 1e-6);  // the cosine reached its end

  // The checkpoint restores into a fresh model and optimizer.
  hg::Generator gen2(5);
  auto model2 = std::make_shared<hg::nn::Sequential>(std::initializer_list<std::shared_ptr<hg::nn::Module>>{
      std::make_shared<hg::nn::Linear>(784, 256, true, &gen2), std::make_shared<hg::nn::ReLU>(),
      std::make_shared<hg::nn::Linear>(256, 10, true, &gen2)});
  model2->to(hg::kF16);
  hg::optim::AdamW opt2(model2->parameters(), {.lr = 2e-3});
  const auto p = hg::optim::load_training_checkpoint((dir / "mlp.safetensors").string(), *model2, opt2);
  CHECK(p.epoch == 2);
  CHECK(p.scheduler_step == 92);
  CHECK(opt2.steps_applied() == 92);
  const auto a = model->state_dict(), b = model2->state_dict();
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].second.to_vector<double>() == b[i].second.to_vector<double>());
}

// The README block is this file's snippet, de-indented by two spaces.
TEST_CASE("README training snippet matches the compiled one", "[optim][docs]") {
  auto read = [](const std::string& path) {
    REQUIRE(std::filesystem::is_regular_file(path));
    return hg::test::read_bytes(path);
  };
  const std::string self = read(std::string(HG_SOURCE_DIR) + "/tests/optim/test_readme_training.cpp");
  const std::string readme = read(std::string(HG_SOURCE_DIR) + "/README.md");
  const std::string begin = "// ---- begin README snippet ----\n", end = "  // ---- end README snippet ----";
  const size_t b = self.find(begin), e = self.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  std::istringstream lines(self.substr(b + begin.size(), e - b - begin.size()));
  std::string expected, line;
  while (std::getline(lines, line)) expected += (line.rfind("  ", 0) == 0 ? line.substr(2) : line) + "\n";
  CHECK(readme.find(expected) != std::string::npos);
}

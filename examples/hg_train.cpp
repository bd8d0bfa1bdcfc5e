// hg-train — the main job: trains an MLP on Fashion-MNIST and reports
// per-epoch train loss, test loss, test accuracy and throughput.
//
//   hg-train                                   # defaults: 784-256-128-10 MLP, AdamW, 8 epochs
//   hg-train --precision fp16-master --device cuda --epochs 5
//   hg-train --limit 2000 --epochs 1           # a smoke run
//
// Precision modes: fp32 (everything f32) and fp16-master / bf16-master (the
// model is converted to 16 bits, the optimizer keeps fp32 master weights and
// moments; the loss is computed from 16-bit logits with fp32 math inside
// cross_entropy). AMP modes arrive with the AMP issue.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"
#include "kernels/reduce.h"
#include "nn/layers.h"
#include "optim/optimizer.h"

#if defined(HG_WITH_CUDA)
#include "kernels/cuda/runtime.h"
#endif

namespace {

struct Options {
  std::string model = "mlp";
  std::string device = "auto";
  std::string precision = "fp32";
  int epochs = 8;
  int64_t batch_size = 128;
  double lr = 1e-3;
  uint64_t seed = 0;
  int64_t limit = 0;
  int64_t test_limit = 0;
  std::string data = hg::data::FashionMnist::kDefaultRoot;
};

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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"hg-train: train an MLP on Fashion-MNIST with halfgrad"};
  app.add_option("--model", o.model, "model (mlp)")->check(CLI::IsMember({"mlp"}));
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N");
  app.add_option("--precision", o.precision, "fp32 | fp16-master | bf16-master")
      ->check(CLI::IsMember({"fp32", "fp16-master", "bf16-master"}));
  app.add_option("--epochs", o.epochs, "epochs")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed for init and shuffling");
  app.add_option("--limit", o.limit, "use only the first N training samples (0 = all)");
  app.add_option("--test-limit", o.test_limit, "evaluate on only the first N test samples (0 = all)");
  app.add_option("--data", o.data, "folder with the Fashion-MNIST .gz files");
  CLI11_PARSE(app, argc, argv);

  try {
    const hg::Device device = pick_device(o.device);
    const hg::DType dtype = o.precision == "fp16-master" ? hg::kF16
                            : o.precision == "bf16-master" ? hg::kBF16
                                                           : hg::kF32;
    hg::Generator gen(o.seed);
    auto model = make_mlp(&gen);
    model->to(device);
    model->to(dtype);
    hg::optim::AdamW opt(model->parameters(), {.lr = o.lr, .weight_decay = 1e-4});

    const hg::data::FashionMnist train_set(o.data, true), test_set(o.data, false);
    // Fashion-MNIST pixel statistics (mean 0.286, std 0.353).
    hg::data::DataLoader train(train_set.images(), train_set.labels(),
                               {.batch_size = o.batch_size, .shuffle = true, .seed = o.seed, .drop_last = true,
                                .mean = 0.2860, .std = 0.3530, .limit = o.limit, .device = device, .dtype = dtype});
    hg::data::DataLoader test(test_set.images(), test_set.labels(),
                              {.batch_size = 1000, .mean = 0.2860, .std = 0.3530, .limit = o.test_limit,
                               .device = device, .dtype = dtype});
    std::printf("hg-train: %s on %s, precision %s, %lld training samples, %d epoch(s), batch %lld, AdamW lr %g\n",
                o.model.c_str(), device.str().c_str(), o.precision.c_str(),
                static_cast<long long>(train.num_samples()), o.epochs, static_cast<long long>(o.batch_size), o.lr);
    const bool tty = ::isatty(STDOUT_FILENO) != 0;
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
      const auto epoch_start = std::chrono::steady_clock::now();
      double loss_sum = 0.0;
      int64_t batches = 0, samples = 0;
      for (auto [x, y] : train) {
        opt.zero_grad();
        const hg::Tensor loss = hg::cross_entropy(model->forward(x), y);
        loss.backward();
        opt.step();
        loss_sum += loss.item<double>();
        ++batches;
        samples += y.numel();
        if (tty && batches % 20 == 0) {
          const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
          std::printf("\r  epoch %d  batch %lld/%lld  loss %.4f  %.0f samples/s   ", epoch,
                      static_cast<long long>(batches), static_cast<long long>(train.num_batches()),
                      loss_sum / static_cast<double>(batches), static_cast<double>(samples) / secs);
          std::fflush(stdout);
        }
      }
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
      const EvalResult eval = evaluate(*model, test);
      std::printf("%sepoch %d: train loss %.4f  test loss %.4f  test accuracy %.2f%%  (%.1f s, %.0f samples/s)\n",
                  tty ? "\r" : "", epoch, loss_sum / static_cast<double>(std::max<int64_t>(batches, 1)), eval.loss,
                  100.0 * eval.accuracy, secs, static_cast<double>(samples) / secs);
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("done in %.1f s\n", total);
  } catch (const hg::Error& e) {
    std::fprintf(stderr, "hg-train: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Training checkpoints: a run interrupted mid-epoch and resumed from its
// checkpoint computes the same loss bits, ends with the same weight bits and
// writes a byte-identical final checkpoint as the uninterrupted run — on the
// CPU and on cuda-emu, in f32 and with a 16-bit model + fp32 masters, with
// dropout drawing from the run's generator. Plus the error cases.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "core/generator.h"
#include "data/dataloader.h"
#include "nn/layers.h"
#include "nn/serialize.h"
#include "optim/checkpoint.h"
#include "tests/kernels/test_support.h"
#include "tests/test_files.h"

using namespace hg;

namespace {

constexpr int64_t kSamples = 40, kFeatures = 12, kClasses = 4, kBatch = 8;  // 5 batches an epoch

// A fixed synthetic dataset: u8 "pixels" from a multiplicative hash, and labels.
struct Dataset {
  Tensor images, labels;
  Dataset() {
    std::vector<uint8_t> x(kSamples * kFeatures);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
    std::vector<int64_t> y(kSamples);
    for (int64_t i = 0; i < kSamples; ++i) y[i] = (i * 7 + 3) % kClasses;
    images = from_vector(x, {kSamples, kFeatures});
    labels = from_vector(y);
  }
};

// One training run: model, optimizer, loader and generator, as hg-train has them.
struct Run {
  Generator gen;
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<data::DataLoader> loader;
  int64_t global_step = 0;

  // `seed` seeds the init and dropout generator; the shuffle seed is part of
  // the run's configuration (hg-train checks it on resume) and fixed here.
  Run(const Dataset& ds, Device device, DType dtype, uint64_t seed) : gen(seed) {
    model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(kFeatures, 16, true, &gen), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Dropout>(0.25, &gen), std::make_shared<nn::Linear>(16, kClasses, true, &gen)});
    model->to(device);
    model->to(dtype);
    opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-2});
    loader = std::make_unique<data::DataLoader>(
        ds.images, ds.labels,
        data::DataLoaderOptions{.batch_size = kBatch, .shuffle = true, .seed = 42, .mean = 0.5, .std = 0.25,
                                .device = device, .dtype = dtype});
  }

  // `steps` optimizer steps, crossing epochs; returns the loss bits of each.
  std::vector<uint32_t> train(int steps) {
    std::vector<uint32_t> losses;
    for (int s = 0; s < steps; ++s) {
      if (loader->position() == loader->num_batches()) loader->set_epoch(loader->epoch() + 1);
      const data::Batch b = loader->batch(loader->position());
      loader->skip(1);
      opt->zero_grad();
      const Tensor loss = cross_entropy(model->forward(b.x), b.y);
      loss.backward();
      opt->step();
      ++global_step;
      losses.push_back(std::bit_cast<uint32_t>(loss.item<float>()));
    }
    return losses;
  }

  optim::TrainingProgress progress() const {
    return {.epoch = loader->epoch(), .batch = loader->position(), .global_step = global_step,
            .generator = gen.get_state(), .extra = {{"note", "from the test"}}};
  }

  void resume(const optim::TrainingProgress& p) {
    loader->set_epoch(p.epoch);
    loader->skip(p.batch);
    gen.set_state(p.generator);
    global_step = p.global_step;
  }

  // Every weight as doubles (exact for f32/f16/bf16), so == compares bits.
  std::vector<std::vector<double>> weights() const {
    std::vector<std::vector<double>> out;
    for (const auto& [name, t] : model->state_dict()) out.push_back(t.to_vector<double>());
    return out;
  }
};

}  // namespace

TEST_CASE("training checkpoint: resume mid-epoch is bit-exact", "[optim][checkpoint]") {
  const Dataset ds;
  test::TempDir dir;
  for (Device device : test::test_devices()) {
    for (DType dtype : {kF32, kF16}) {
      INFO(device << " " << dtype);
      // Uninterrupted: 12 steps (2 full epochs and 2 batches of the third).
      Run full(ds, device, dtype, 42);
      const std::vector<uint32_t> expected = full.train(12);
      optim::save_training_checkpoint((dir.path / "full.safetensors").string(), *full.model, *full.opt,
                                      full.progress());

      // Interrupted after 7 steps (in the middle of epoch 1), saved ...
      std::vector<uint32_t> got;
      {
        Run first(ds, device, dtype, 42);
        got = first.train(7);
        optim::save_training_checkpoint((dir.path / "part.safetensors").string(), *first.model, *first.opt,
                                        first.progress());
      }
      // ... and resumed by a fresh process-like run whose own init differs (seed 9).
      Run second(ds, device, dtype, 9);
      const optim::TrainingProgress p =
          optim::load_training_checkpoint((dir.path / "part.safetensors").string(), *second.model, *second.opt);
      CHECK(p.epoch == 1);
      CHECK(p.batch == 2);
      CHECK(p.global_step == 7);
      CHECK(p.extra.at("note") == "from the test");
      second.resume(p);
      const std::vector<uint32_t> rest = second.train(5);
      got.insert(got.end(), rest.begin(), rest.end());

      CHECK(got == expected);
      CHECK(second.weights() == full.weights());
      optim::save_training_checkpoint((dir.path / "resumed.safetensors").string(), *second.model, *second.opt,
                                      second.progress());
      CHECK(test::read_bytes(dir.path / "resumed.safetensors") ==
            test::read_bytes(dir.path / "full.safetensors"));
    }
  }
}

TEST_CASE("training checkpoint: a resume that skips the restore diverges (the test can fail)",
          "[optim][checkpoint]") {
  const Dataset ds;
  Run full(ds, Device::cpu(), kF32, 42);
  const std::vector<uint32_t> expected = full.train(6);
  Run first(ds, Device::cpu(), kF32, 42);
  first.train(3);
  // Restore everything but the generator: dropout masks differ, so losses do.
  test::TempDir dir;
  const std::string path = (dir.path / "c.safetensors").string();
  optim::save_training_checkpoint(path, *first.model, *first.opt, first.progress());
  Run second(ds, Device::cpu(), kF32, 42);
  optim::TrainingProgress p = optim::load_training_checkpoint(path, *second.model, *second.opt);
  p.generator.offset += 1;
  second.resume(p);
  const std::vector<uint32_t> rest = second.train(3);
  CHECK(std::vector<uint32_t>(expected.begin() + 3, expected.end()) != rest);
}

TEST_CASE("training checkpoint: errors name the problem", "[optim][checkpoint]") {
  const Dataset ds;
  test::TempDir dir;
  const std::string path = (dir.path / "c.safetensors").string();
  Run run(ds, Device::cpu(), kF32, 1);
  run.train(2);
  optim::save_training_checkpoint(path, *run.model, *run.opt, run.progress());

  SECTION("a plain safetensors file is not a training checkpoint") {
    const std::string plain = (dir.path / "plain.safetensors").string();
    nn::save_safetensors(plain, run.model->state_dict());
    Run other(ds, Device::cpu(), kF32, 1);
    CHECK_THROWS_WITH(optim::load_training_checkpoint(plain, *other.model, *other.opt),
                      Catch::Contains("not a training checkpoint"));
  }
  SECTION("a different model") {
    Generator g(3);
    nn::Sequential model({std::make_shared<nn::Linear>(kFeatures, 8, true, &g)});
    optim::AdamW opt(model.parameters());
    CHECK_THROWS_WITH(optim::load_training_checkpoint(path, model, opt), Catch::Contains("does not fit"));
  }
  SECTION("a model in another dtype") {
    Run other(ds, Device::cpu(), kF16, 1);
    CHECK_THROWS_WITH(optim::load_training_checkpoint(path, *other.model, *other.opt),
                      Catch::Contains("does not fit"));
  }
  SECTION("another optimizer (SGD without momentum keeps no moments)") {
    Run other(ds, Device::cpu(), kF32, 1);
    optim::SGD sgd(other.model->parameters());
    CHECK_THROWS_WITH(optim::load_training_checkpoint(path, *other.model, sgd), Catch::Contains("optim"));
  }
  SECTION("a truncated file") {
    const std::string bytes = test::read_bytes(path);
    test::write_bytes(path, bytes.substr(0, bytes.size() / 2));
    Run other(ds, Device::cpu(), kF32, 1);
    CHECK_THROWS_AS(optim::load_training_checkpoint(path, *other.model, *other.opt), Error);
  }
  SECTION("malformed progress metadata") {
    nn::SafetensorsFile f = nn::load_safetensors(path);
    f.metadata["progress.batch"] = "-3";
    nn::save_safetensors(path, f.tensors, f.metadata);
    Run other(ds, Device::cpu(), kF32, 1);
    CHECK_THROWS_WITH(optim::load_training_checkpoint(path, *other.model, *other.opt),
                      Catch::Contains("progress.batch"));
  }
  SECTION("a missing file") {
    Run other(ds, Device::cpu(), kF32, 1);
    CHECK_THROWS_AS(optim::load_training_checkpoint((dir.path / "nope").string(), *other.model, *other.opt),
                    Error);
  }
}

TEST_CASE("exact_double_string round-trips every bit", "[optim][checkpoint]") {
  for (double v : {0.0, -0.0, 1.0 / 3.0, 1e-310, 6.02214076e23, -2.5, 123456.789}) {
    const double back = optim::parse_exact_double(optim::exact_double_string(v));
    CHECK(std::bit_cast<uint64_t>(back) == std::bit_cast<uint64_t>(v));
  }
  CHECK_THROWS_AS(optim::parse_exact_double("0x1.8p+1junk"), Error);
  CHECK_THROWS_AS(optim::parse_exact_double(""), Error);
}

namespace {

// Every byte of the model's and the optimizer's state.
std::vector<std::vector<double>> all_state(const Run& run) {
  std::vector<std::vector<double>> out = run.weights();
  for (const auto& [name, t] : run.opt->state_dict()) out.push_back(t.to_vector<double>());
  return out;
}

}  // namespace

TEST_CASE("training checkpoint: a failing load changes nothing (atomic)", "[optim][checkpoint][atomic]") {
  const Dataset ds;
  test::TempDir dir;
  const std::string path = (dir.path / "c.safetensors").string();
  Run writer(ds, Device::cpu(), kF32, 1);
  writer.train(3);
  optim::save_training_checkpoint(path, *writer.model, *writer.opt, writer.progress());
  nn::SafetensorsFile f = nn::load_safetensors(path);

  Run target(ds, Device::cpu(), kF32, 2);  // other weights and moments than the file's
  target.train(2);
  const auto before = all_state(target);
  auto expect_unchanged_after = [&](const std::string& what) {
    nn::save_safetensors(path, f.tensors, f.metadata);
    CHECK_THROWS_WITH(optim::load_training_checkpoint(path, *target.model, *target.opt), Catch::Contains(what));
    CHECK(all_state(target) == before);
  };
  SECTION("the optimizer part does not fit (the model part does): the model was already overwritten") {
    for (auto& [name, t] : f.tensors) {
      if (name == "optim.state2.0.0") t = t.reshape({t.size(1), t.size(0)});
    }
    expect_unchanged_after("optimizer expects");
  }
  SECTION("an optimizer entry in another dtype was cast silently") {
    for (auto& [name, t] : f.tensors) {
      if (name == "optim.state1.0.1") t = t.to(kF16);
    }
    expect_unchanged_after("has dtype f16 but the optimizer keeps it in f32");
  }
  SECTION("an unexpected optimizer entry") {
    f.tensors.emplace_back("optim.state2.0.99", zeros({2}));
    expect_unchanged_after("unexpected entry 'state2.0.99'");
  }
  SECTION("a counter past any real run (2^63 - 1 overflowed at the next step)") {
    f.metadata["progress.global_step"] = "9223372036854775807";
    expect_unchanged_after("beyond any real run");
  }
  SECTION("the caller's progress check runs before anything changes") {
    nn::save_safetensors(path, f.tensors, f.metadata);
    int calls = 0;
    CHECK_THROWS_WITH(optim::load_training_checkpoint(path, *target.model, *target.opt, nullptr,
                                                      [&](const optim::TrainingProgress& p) {
                                                        ++calls;
                                                        CHECK(p.global_step == 3);
                                                        HG_FAIL("not this run's");
                                                      }),
                      Catch::Contains("not this run's"));
    CHECK(calls == 1);
    CHECK(all_state(target) == before);
  }
}

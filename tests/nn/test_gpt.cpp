// The GPT against PyTorch (llm.c's test_gpt2 idea): tests/nn/fixtures/
// make_gpt_golden.py builds the same tiny GPT in PyTorch (f64), and this test
// loads its weights, runs the same batch and matches the logits, the loss, every
// parameter's gradient and the losses of 10 AdamW steps with nanoGPT's two
// parameter groups; in f64 on the CPU and f32 on every test device.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "core/generator.h"
#include "nn/models/gpt.h"
#include "nn/serialize.h"
#include "tests/kernels/test_support.h"

using namespace hg;

namespace {

const nn::GPTConfig kTiny{.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16, .vocab_size = 65};

const nn::SafetensorsFile& golden() {
  static const nn::SafetensorsFile file =
      nn::load_safetensors(std::string(HG_NN_FIXTURE_DIR) + "/gpt_golden.safetensors");
  return file;
}

std::shared_ptr<nn::GPT> golden_model(Device device, DType dtype) {
  auto model = std::make_shared<nn::GPT>(kTiny);
  model->to(device, dtype);
  nn::NamedTensors weights;
  for (const auto& [name, t] : golden().tensors) {
    if (name.rfind("weights.", 0) == 0) weights.emplace_back(name.substr(8), t.to(device, dtype));
  }
  model->load_state_dict(weights);  // strict: every parameter named as in PyTorch
  return model;
}

// A whole model: GEMMs, norms and softmax rows, so the reduction row of the table.
test::Tolerance model_tolerance(DType dtype) { return test::tolerance_for(dtype, test::OpKind::kReduction); }

void check_close(const Tensor& actual, const Tensor& expected, DType dtype, const std::string& what) {
  INFO(what << " " << actual.shape_str());
  REQUIRE(actual.sizes() == expected.sizes());
  const std::string report =
      test::compare_values(test::values_of(actual), test::values_of(expected), model_tolerance(dtype));
  CHECK(report == "");
}

}  // namespace

TEST_CASE("GPT matches PyTorch: logits, loss, gradients, 10 AdamW steps", "[gpt][golden]") {
  for (const Device device : test::test_devices()) {
    for (const DType dtype : {kF64, kF32}) {
      if (dtype == kF64 && !device.is_cpu()) continue;  // f64 is the CPU's tight check
      const std::string where = test::label(device, dtype, "gpt");
      INFO(where);
      auto model = golden_model(device, dtype);
      const Tensor idx = golden().at("idx").to(device), targets = golden().at("targets").to(device);

      const Tensor logits = model->forward(idx);
      check_close(logits, golden().at("logits"), dtype, "logits");
      Tensor loss = cross_entropy(reshape(logits, {-1, kTiny.vocab_size}), reshape(targets, {-1}));
      check_close(loss.view({1}), golden().at("loss"), dtype, "loss");
      loss.backward();
      for (const auto& [name, p] : model->named_parameters()) {
        REQUIRE(p.grad().defined());
        check_close(p.grad(), golden().at("grad." + name), dtype, "grad." + name);
      }

      // nanoGPT's configure_optimizers: two groups, decay on rank >= 2 only.
      // halfgrad's optimizers take f32/f16/bf16 parameters: the steps run in f32.
      if (dtype == kF64) continue;
      auto opt = model->configure_optimizers(0.1, 1e-3, 0.9, 0.95);
      REQUIRE(opt->param_groups().size() == 2);
      const Tensor expected_losses = golden().at("losses");
      std::vector<double> losses;
      for (int64_t step = 0; step < expected_losses.numel(); ++step) {
        opt->zero_grad();
        Tensor l = model->loss(idx, targets);
        losses.push_back(l.to(Device::cpu(), kF64).item<double>());
        l.backward();
        opt->step();
      }
      const std::string report = test::compare_values(losses, test::values_of(expected_losses), model_tolerance(kF32));
      CHECK(report == "");
    }
  }
}

TEST_CASE("GPT is causal: a position's logits depend on earlier tokens only", "[gpt]") {
  auto model = golden_model(Device::cpu(), kF64);
  const Tensor idx = golden().at("idx");
  const Tensor base = model->forward(idx);
  Tensor changed = idx.contiguous().clone();  // tokens 1..15 of every row moved by one
  int64_t* tok = changed.data<int64_t>();
  for (int64_t i = 0; i < changed.numel(); ++i) {
    if (i % 16 != 0) tok[i] = (tok[i] + 1) % 65;
  }
  const Tensor after = model->forward(changed);
  // Position 0 sees only token 0 (unchanged): identical logits.
  CHECK(test::compare_values(test::values_of(select(after, 1, 0)), test::values_of(select(base, 1, 0)),
                             model_tolerance(kF64)) == "");
  // Position 15 sees the changed tokens: different logits.
  CHECK(test::compare_values(test::values_of(select(after, 1, 15)), test::values_of(select(base, 1, 15)),
                             model_tolerance(kF64)) != "");
}

TEST_CASE("GPT: bad configurations and inputs give hg::Error", "[gpt]") {
  CHECK_THROWS_WITH(nn::GPT(nn::GPTConfig{.n_head = 5, .n_embd = 32}), Catch::Contains("multiple of n_head"));
  nn::GPT model(kTiny);
  CHECK_THROWS_WITH(model.forward(zeros({2, 17}, {.dtype = kI64})), Catch::Contains("block_size is only 16"));
  CHECK_THROWS_WITH(model.forward(zeros({2, 4})), Catch::Contains("integer tokens"));
  CHECK_THROWS_WITH(model.forward(full({1, 4}, 65.0, {.dtype = kI64})), Catch::Contains("65"));
}

TEST_CASE("GPT::generate is seeded and appends tokens in range", "[gpt]") {
  Generator init(7);
  nn::GPT model(kTiny, &init);
  const Tensor start = zeros({2, 1}, {.dtype = kI64});
  Generator g1(42), g2(42);
  const Tensor a = model.generate(start, 20, 0.8, 10, &g1);
  const Tensor b = model.generate(start, 20, 0.8, 10, &g2);
  REQUIRE(a.sizes() == Shape{2, 21});
  CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
  for (int64_t t : a.to_vector<int64_t>()) CHECK((t >= 0 && t < kTiny.vocab_size));
  // top_k = 1 is greedy: the argmax of the last logits, whatever the draw.
  Generator g3(1), g4(2);
  CHECK(model.generate(start, 5, 1.0, 1, &g3).to_vector<int64_t>() ==
        model.generate(start, 5, 1.0, 1, &g4).to_vector<int64_t>());
  // The caller's mode comes back, also when the forward throws (a token out of the vocabulary).
  CHECK(model.is_training());
  CHECK_THROWS_WITH(model.generate(full({1, 1}, 65.0, {.dtype = kI64}), 3, 1.0, 0, &g3), Catch::Contains("65"));
  CHECK(model.is_training());
  model.eval();
  model.generate(start, 2, 1.0, 0, &g3);
  CHECK_FALSE(model.is_training());
  model.train();
  // num_params: nanoGPT's count (tied head once, minus wpe when non_embedding).
  const int64_t c = 32, v = 65, bs = 16;
  const int64_t per_block = 2 * 2 * c + (3 * c * c + 3 * c) + (c * c + c) + (4 * c * c + 4 * c) + (4 * c * c + c);
  CHECK(model.num_params(false) == v * c + bs * c + 2 * per_block + 2 * c);
  CHECK(model.num_params(true) == v * c + 2 * per_block + 2 * c);
}

TEST_CASE("GPT-2 124M configuration: parameter count and one training step on the CPU", "[gpt][gpt2]") {
  // GPT-2 small: 124,439,808 parameters with the tied head counted once, as
  // nanoGPT reports (123.65M without the position embedding).
  Generator gen(3);
  nn::GPT model(nn::GPTConfig{}, &gen);
  CHECK(model.num_params(false) == 124439808);
  CHECK(model.num_params(true) == 124439808 - 1024 * 768);
  // One AdamW step at batch 1 x 32 tokens: the loss starts near ln(vocab)
  // (GPT-2's init gives near-uniform logits) and the step lowers it on the
  // same batch.
  auto opt = model.configure_optimizers(0.1, 6e-4, 0.9, 0.95);
  Generator data(11);
  const Tensor idx = (rand({1, 33}, {}, &data) * 50257.0).to(kI64);
  const Tensor x = narrow(idx, 1, 0, 32).contiguous(), y = narrow(idx, 1, 1, 32).contiguous();
  Tensor loss = model.loss(x, y);
  const double before = loss.item<double>();
  CHECK(std::abs(before - std::log(50257.0)) < 0.5);
  loss.backward();
  opt->step();
  opt->zero_grad();
  CHECK(model.loss(x, y).item<double>() < before);
}

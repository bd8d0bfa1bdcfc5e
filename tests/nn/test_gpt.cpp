// The GPT against PyTorch (llm.c's test_gpt2 idea): tests/nn/fixtures/
// make_gpt_golden.py builds the same tiny GPT in PyTorch (f64), and this test
// loads its weights, runs the same batch and matches the logits, the loss, every
// parameter's gradient and the losses of 10 AdamW steps with nanoGPT's two
// parameter groups; in f64 on the CPU and f32 on every test device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "nn/models/gpt.h"
#include "nn/serialize.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "kernels/amp_policy.h"
#include "kernels/elementwise/map_stats.h"
#endif

using namespace hg;

namespace {

// The fixture's model is unpadded (65 wte rows, as PyTorch built it); kPadded
// is the same model with nanoGPT's padding (128 rows).
const nn::GPTConfig kTiny{
    .n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16, .vocab_size = 65, .padded_vocab_size = 0};
const nn::GPTConfig kPadded{.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16, .vocab_size = 65};

const nn::SafetensorsFile& golden() {
  static const nn::SafetensorsFile file =
      nn::load_safetensors(std::string(HG_NN_FIXTURE_DIR) + "/gpt_golden.safetensors");
  return file;
}

std::shared_ptr<nn::GPT> golden_model(Device device, DType dtype, const nn::GPTConfig& config = kTiny) {
  auto model = std::make_shared<nn::GPT>(config);
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

// Padding rows that would dominate any softmax they took part in: rows
// 65, 66, ... of wte are +50 and -50 times the real rows 0, 1, ..., so every
// padding pair has a logit far above the real ones.
void poison_padding(nn::GPT& model) {
  NoGradGuard no_grad;
  const int64_t v = model.config().vocab_size, padded = model.config().padded_vocab();
  Tensor w = model.wte->weight;
  for (int64_t r = v; r < padded; ++r) {
    const int64_t k = r - v;
    w.narrow(0, r, 1).copy_(w.narrow(0, (k / 2) % v, 1) * ((k % 2 == 0) ? 50.0 : -50.0));
  }
}

TEST_CASE("GPT with a padded vocabulary matches the unpadded PyTorch model", "[gpt][golden][padded]") {
  CHECK(kPadded.padded_vocab() == 128);
  CHECK(nn::GPTConfig{}.padded_vocab() == 50304);  // nanoGPT's GPT-2 padding
  CHECK(nn::GPTConfig{.padded_vocab_size = 0}.padded_vocab() == 50257);
  CHECK(nn::GPTConfig{.padded_vocab_size = 50257}.padded_vocab() == 50257);
  CHECK_THROWS_WITH(
      nn::GPT(nn::GPTConfig{
          .n_layer = 1, .n_head = 1, .n_embd = 8, .block_size = 4, .vocab_size = 65, .padded_vocab_size = 64}),
      Catch::Contains("padded_vocab_size"));
  for (const Device device : test::test_devices()) {
    for (const DType dtype : {kF64, kF32}) {
      if (dtype == kF64 && !device.is_cpu()) continue;
      INFO(test::label(device, dtype, "gpt padded"));
      // The 65-row checkpoint loads into the 128-row model; the padding rows stay its own.
      auto model = golden_model(device, dtype, kPadded);
      REQUIRE(model->wte->weight.sizes() == Shape{128, 32});
      poison_padding(*model);
      const Tensor idx = golden().at("idx").to(device), targets = golden().at("targets").to(device);
      const Tensor logits = model->forward(idx);
      check_close(logits, golden().at("logits"), dtype, "logits");  // the 65 real columns
      CHECK(model->forward_padded(idx).sizes() == Shape{idx.size(0), idx.size(1), 128});
      Tensor loss = model->loss(idx, targets);
      check_close(loss.view({1}), golden().at("loss"), dtype, "loss");
      loss.backward();
      for (const auto& [name, p] : model->named_parameters()) {
        const Tensor expected = golden().at("grad." + name);
        if (name != "transformer.wte.weight") {
          check_close(p.grad(), expected, dtype, "grad." + name);
          continue;
        }
        // Real rows as PyTorch's; padding rows exactly 0 (outside the loss, no token embeds them).
        check_close(p.grad().narrow(0, 0, 65), expected, dtype, "grad.wte real rows");
        const std::vector<double> pad = test::values_of(p.grad().narrow(0, 65, 128 - 65));
        CHECK(std::all_of(pad.begin(), pad.end(), [](double g) { return g == 0.0; }));
      }
      // Saved padded (nanoGPT's layout), loaded back as it is.
      const nn::NamedTensors saved = model->state_dict();
      auto again = std::make_shared<nn::GPT>(kPadded);
      again->to(device, dtype);
      again->load_state_dict(saved);
      CHECK(test::values_of(again->wte->weight) == test::values_of(model->wte->weight));
    }
  }
}

TEST_CASE("GPT::generate never picks a padding token", "[gpt][padded]") {
  for (const Device device : test::test_devices()) {
    INFO(device);
    Generator init(5);
    nn::GPT model(kPadded, &init);
    model.to(device);
    poison_padding(model);
    const Tensor start = zeros({4, 1}, {.dtype = kI64, .device = device});
    Generator g(9);
    for (int64_t top_k : {int64_t{0}, int64_t{1}, int64_t{5}}) {
      const Tensor out = model.generate(start, 12, 1.0, top_k, &g);
      for (int64_t t : out.to(Device::cpu()).to_vector<int64_t>()) CHECK((t >= 0 && t < kPadded.vocab_size));
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
  nn::GPT model(nn::GPTConfig{.padded_vocab_size = 0}, &gen);
  CHECK(model.num_params(false) == 124439808);
  CHECK(model.num_params(true) == 124439808 - 1024 * 768);
  // nanoGPT's padded model (50304 rows): 47 more rows of 768.
  CHECK(nn::GPT(nn::GPTConfig{}).num_params(false) == 124439808 + 47 * 768);
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

#if defined(HG_WITH_CUDA)
// The elementwise engine's launches in one amp-bf16 training step of a small
// GPT (GPT-2's structure: 2 layers, 4 heads, width 64, 64 tokens x 4, vocab
// 250 padded to 256: a few padding columns, as GPT-2's 50257 -> 50304), per
// path (kernels/elementwise/map_stats.h). Two configurations: the padded
// vocabulary with the fused cross-entropy on the 16-bit logits (the default),
// and the unpadded one with the loss forced to fp32 (the fp32 copy of the
// logits and of their gradient, as the autocast fp32 class gives). Every
// strided launch must take a 32-bit path (no 64-bit div/mod at these sizes),
// and the default must move fewer elements. HG_MAP_STATS=1 prints the table.
TEST_CASE("GPT step: elementwise launches per path on CUDA", "[gpt][map-stats]") {
  struct Run {
    std::string name;
    nn::GPTConfig config;
    bool fp32_loss;
    cuda::MapStats stats;
  };
  const nn::GPTConfig base{.n_layer = 2, .n_head = 4, .n_embd = 64, .block_size = 64, .vocab_size = 250};
  nn::GPTConfig unpadded = base;
  unpadded.padded_vocab_size = 0;
  std::vector<Run> runs{{"padded, fused 16-bit loss", base, false, {}},
                        {"unpadded, fp32 loss copy", unpadded, true, {}}};
  for (Run& run : runs) {
    Generator gen(1);
    auto model = std::make_shared<nn::GPT>(run.config, &gen);
    model->to(Device::cuda(0));
    const Tensor idx = (rand({4, 65}, {.device = Device::cuda(0)}, &gen) * 250.0).to(kI64);
    const Tensor x = narrow(idx, 1, 0, 64).contiguous(), y = narrow(idx, 1, 1, 64).contiguous();
    std::optional<amp::PolicyOverride> fp32_loss;
    if (run.fp32_loss) fp32_loss.emplace(OpId::cross_entropy, AmpClass::fp32);
    cuda::reset_map_stats();
    Tensor loss;
    {
      amp::Autocast autocast(kBF16);
      loss = model->loss(x, y);
    }
    loss.backward();
    (void)loss.item<double>();
    run.stats = cuda::map_stats();
    CHECK(run.stats.launches[static_cast<size_t>(cuda::MapPath::kStrided64)] == 0);
  }
  auto total = [](const cuda::MapStats& s) {
    int64_t e = 0;
    for (int64_t v : s.elements) e += v;
    return e;
  };
  CHECK(total(runs[0].stats) < total(runs[1].stats));
  if (const char* env = std::getenv("HG_MAP_STATS"); env != nullptr && std::string(env) == "1") {
    for (const Run& run : runs) {
      std::printf("%s\n  %-12s %9s %12s %12s\n", run.name.c_str(), "path", "launches", "elements", "bytes");
      for (int p = 0; p < cuda::kNumMapPaths; ++p) {
        std::printf("  %-12s %9lld %12lld %12lld\n", cuda::map_path_name(static_cast<cuda::MapPath>(p)),
                    static_cast<long long>(run.stats.launches[p]), static_cast<long long>(run.stats.elements[p]),
                    static_cast<long long>(run.stats.bytes[p]));
      }
    }
  }
}
#endif

// Hugging Face GPT-2 checkpoints (nn/models/gpt_hf.cpp) against transformers:
// tests/interop/fixtures/make_hf_gpt2_fixture.py saved a tiny random
// GPT2LMHeadModel with save_pretrained and recorded its logits (run in f64)
// and 8 greedy tokens; halfgrad loads the folder and must match both. The
// export must give back the very tensors transformers wrote, name for name.
//
// HG_INTEROP_OUT=<folder> (set by tests/interop/torch_roundtrip.py) makes the
// "[torch-export]" case leave files for PyTorch to load; HG_INTEROP_IN=<folder>
// makes the "[torch-import]" case load what PyTorch wrote.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "nn/models/gpt.h"
#include "nn/serialize.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;
namespace fs = std::filesystem;

namespace {

const std::string kFixture = std::string(HG_INTEROP_FIXTURE_DIR) + "/hf_gpt2_tiny";

const nn::SafetensorsFile& reference() {
  static const nn::SafetensorsFile file =
      nn::load_safetensors(std::string(HG_INTEROP_FIXTURE_DIR) + "/hf_gpt2_tiny_reference.safetensors");
  return file;
}

// A fresh folder under the system temp dir, removed with the object.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() / ("hg_interop_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string str() const { return path.string(); }
};

// The whole model's logits against transformers' f64 ones: the reduction
// row of tests/kernels/tolerance.h, as tests/nn/test_gpt.cpp uses for the
// same shape of model against PyTorch.
void check_logits(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.sizes() == expected.sizes());
  const std::string report = test::compare_values(test::values_of(actual.cpu()), test::values_of(expected),
                                                  test::tolerance_for(kF32, test::OpKind::kReduction));
  CHECK(report == "");
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace

TEST_CASE("HF GPT-2: from_pretrained_hf matches transformers' logits and greedy tokens", "[hf]") {
  auto model = nn::GPT::from_pretrained_hf(kFixture);
  const nn::GPTConfig& c = model->config();
  CHECK(c.n_layer == 2);
  CHECK(c.n_embd == 32);
  CHECK(c.block_size == 16);
  CHECK(c.vocab_size == 100);
  CHECK(c.padded_vocab() == 128);  // padded for the GEMMs; the file's wte has 100 rows
  CHECK(c.gelu_tanh);
  model->train(false);
  const Tensor idx = reference().at("idx");
  NoGradGuard no_grad;
  check_logits(model->forward(idx), reference().at("logits"));
  const Tensor generated = model->generate(idx, 8, 1.0, /*top_k=*/1);  // top-1: greedy
  CHECK(generated.to_vector<int64_t>() == reference().at("generated").to_vector<int64_t>());
}

TEST_CASE("HF GPT-2: an unpadded model matches too", "[hf]") {
  auto model = nn::GPT::from_pretrained_hf(kFixture, {.padded_vocab_size = 0});
  CHECK(model->config().padded_vocab() == 100);
  NoGradGuard no_grad;
  check_logits(model->forward(reference().at("idx")), reference().at("logits"));
}

TEST_CASE("HF GPT-2: save_pretrained_hf writes back transformers' own tensors", "[hf]") {
  auto model = nn::GPT::from_pretrained_hf(kFixture);
  TempDir dir("hf_export");
  model->save_pretrained_hf(dir.str());
  const nn::SafetensorsFile original = nn::load_safetensors(kFixture + "/model.safetensors");
  const nn::SafetensorsFile exported = nn::load_safetensors(dir.str() + "/model.safetensors");
  CHECK(exported.metadata.at("format") == "pt");
  REQUIRE(exported.tensors.size() == original.tensors.size());
  for (const auto& [name, t] : original.tensors) {
    INFO(name);
    REQUIRE(exported.contains(name));
    CHECK(bitwise_equal(exported.at(name), t));  // Conv1D [in, out] again, wte unpadded
  }
  // The export loads back into the same logits.
  auto again = nn::GPT::from_pretrained_hf(dir.str());
  NoGradGuard no_grad;
  check_logits(again->forward(reference().at("idx")), reference().at("logits"));
}

TEST_CASE("HF GPT-2: GPT2Model's names (no prefix), mask buffers and a tied lm_head load", "[hf]") {
  // The layout of the hub's gpt2 repository: h.0.attn.c_attn.weight, the
  // causal-mask buffers h.N.attn.bias / masked_bias, and lm_head.weight equal to wte.
  const nn::SafetensorsFile original = nn::load_safetensors(kFixture + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : original.tensors) tensors.emplace_back(name.substr(12), t);  // drop "transformer."
  for (int i = 0; i < 2; ++i) {
    tensors.emplace_back("h." + std::to_string(i) + ".attn.bias", ones({1, 1, 16, 16}));
    tensors.emplace_back("h." + std::to_string(i) + ".attn.masked_bias", scalar_tensor(-1e4));
  }
  tensors.emplace_back("lm_head.weight", original.at("transformer.wte.weight"));
  TempDir dir("hf_gpt2model");
  nn::save_safetensors(dir.str() + "/model.safetensors", tensors, {{"format", "pt"}});
  write_text(dir.str() + "/config.json", read_text(kFixture + "/config.json"));
  auto model = nn::GPT::from_pretrained_hf(dir.str());
  NoGradGuard no_grad;
  check_logits(model->forward(reference().at("idx")), reference().at("logits"));
}

TEST_CASE("HF GPT-2: what halfgrad's GPT cannot represent is refused by name", "[hf]") {
  TempDir dir("hf_bad");
  const std::string config = read_text(kFixture + "/config.json");
  fs::copy_file(kFixture + "/model.safetensors", dir.path / "model.safetensors");
  CHECK_THROWS_WITH(nn::GPT::from_pretrained_hf(dir.str()), Catch::Contains("config.json"));  // missing

  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = config;
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    write_text(dir.str() + "/config.json", text.replace(at, from.size(), to));
  };
  with("\"gelu_new\"", "\"relu\"");
  CHECK_THROWS_WITH(nn::GPT::from_pretrained_hf(dir.str()), Catch::Contains("activation_function \"relu\""));
  with("\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": 1e-06");
  CHECK_THROWS_WITH(nn::GPT::from_pretrained_hf(dir.str()), Catch::Contains("layer_norm_epsilon"));
  with("\"scale_attn_by_inverse_layer_idx\": false", "\"scale_attn_by_inverse_layer_idx\": true");
  CHECK_THROWS_WITH(nn::GPT::from_pretrained_hf(dir.str()), Catch::Contains("scale_attn_by_inverse_layer_idx"));
  with("\"n_layer\": 2", "\"n_layer\": 3");  // a missing block's weights
  CHECK_THROWS_WITH(nn::GPT::from_pretrained_hf(dir.str()), Catch::Contains("transformer.h.2"));
  with("\"n_embd\": 32", "\"n_embd\": 0");
  CHECK_THROWS_WITH(nn::GPT::from_pretrained_hf(dir.str()), Catch::Contains("\"n_embd\" must be an integer >= 1"));
  write_text(dir.str() + "/config.json", "{not json");
  CHECK_THROWS_WITH(nn::GPT::from_pretrained_hf(dir.str()), Catch::Contains("not valid JSON"));

  // An untied lm_head.
  write_text(dir.str() + "/config.json", config);
  const nn::SafetensorsFile original = nn::load_safetensors(kFixture + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors = original.tensors;
  tensors.emplace_back("lm_head.weight", zeros({100, 32}));
  nn::save_safetensors(dir.str() + "/model.safetensors", tensors, {{"format", "pt"}});
  CHECK_THROWS_WITH(nn::GPT::from_pretrained_hf(dir.str()), Catch::Contains("lm_head.weight differs"));
}

#if defined(HG_WITH_CUDA)
TEST_CASE("HF GPT-2 on CUDA: the same logits and greedy tokens", "[hf][cuda]") {
  REQUIRE(cuda::is_available());  // the test_interop_cuda CTest test runs this only where one is
  auto model = nn::GPT::from_pretrained_hf(kFixture);
  model->to(Device::cuda());
  const Tensor idx = reference().at("idx").to(Device::cuda());
  NoGradGuard no_grad;
  check_logits(model->forward(idx), reference().at("logits"));
  CHECK(model->generate(idx, 8, 1.0, 1).cpu().to_vector<int64_t>() == reference().at("generated").to_vector<int64_t>());
}
#endif

// ---- with PyTorch (tests/interop/torch_roundtrip.py drives these) -------------------------

namespace {

// A small GPT of halfgrad's own (nanoGPT names), seeded: what PyTorch must load.
std::shared_ptr<nn::GPT> seeded_gpt(bool gelu_tanh) {
  Generator gen(20251204);
  nn::GPTConfig c{.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16, .vocab_size = 100};
  c.gelu_tanh = gelu_tanh;
  auto model = std::make_shared<nn::GPT>(c, &gen);
  NoGradGuard no_grad;
  for (Tensor p : model->parameters()) {  // non-zero biases and norm affines
    if (p.dim() == 1) p.copy_(add(p, mul(randn(p.sizes(), {}, &gen), scalar_tensor(0.1))));
  }
  return model;
}

}  // namespace

// Hidden ("[.]"): run only when asked for by tag, by the scripts that set the folder.
TEST_CASE("export for PyTorch: HF GPT-2 and nanoGPT state dicts with logits", "[.][torch-export]") {
  const char* out = std::getenv("HG_INTEROP_OUT");
  if (out == nullptr) FAIL("HG_INTEROP_OUT is not set (tests/interop/torch_roundtrip.py sets it)");
  NoGradGuard no_grad;
  const Tensor idx = reference().at("idx");
  // HF layout: transformers.GPT2LMHeadModel.from_pretrained(<out>/hf).
  auto hf = seeded_gpt(/*gelu_tanh=*/true);
  fs::create_directories(fs::path(out) / "hf");
  hf->save_pretrained_hf(std::string(out) + "/hf");
  // nanoGPT layout: model.load_state_dict(load_file(<out>/nanogpt.safetensors)).
  auto nano = seeded_gpt(/*gelu_tanh=*/false);
  nn::save_state_dict(std::string(out) + "/nanogpt.safetensors", *nano);
  // The fixture, loaded and written back (tests/interop/safetensors_layout.py
  // compares it with transformers' file byte for byte).
  fs::create_directories(fs::path(out) / "hf_fixture");
  nn::GPT::from_pretrained_hf(kFixture)->save_pretrained_hf(std::string(out) + "/hf_fixture");
  nn::save_safetensors(std::string(out) + "/halfgrad_logits.safetensors",
                       {{"idx", idx}, {"hf_logits", hf->forward(idx)}, {"nanogpt_logits", nano->forward(idx)}});
}

TEST_CASE("import from PyTorch: a nanoGPT state dict and its logits", "[.][torch-import]") {
  const char* in = std::getenv("HG_INTEROP_IN");
  if (in == nullptr) FAIL("HG_INTEROP_IN is not set (tests/interop/torch_roundtrip.py sets it)");
  // torch_roundtrip.py: a nanoGPT model.py GPT (2 layers, 2 heads, 32 wide,
  // block 16, vocab 100 unpadded), its state_dict saved with safetensors'
  // save_file, and its logits (f64) for idx.
  const nn::SafetensorsFile io = nn::load_safetensors(std::string(in) + "/torch_io.safetensors");
  nn::GPT model(nn::GPTConfig{.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16, .vocab_size = 100});
  // GPT::load_state_dict: strict, and takes the unpadded wte into the padded model.
  model.load_state_dict(nn::load_safetensors(std::string(in) + "/torch_nanogpt.safetensors").tensors);
  NoGradGuard no_grad;
  check_logits(model.forward(io.at("idx")), io.at("logits"));
}

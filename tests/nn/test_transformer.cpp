// nn/transformer.h against PyTorch (tests/nn/fixtures/make_transformer_twin.py):
// a transformer classifier written only with TransformerEncoder(Layer),
// MultiheadAttention with a key-padding mask, TensorDataset/DatasetLoader and
// typed parameter groups trains to its PyTorch twin's losses over 50 AdamW
// steps (f32 on every test device, against torch's f64 run); post-norm encoder and
// decoder layers with masks match torch's outputs and input gradients; the
// attention paths agree with each other; ModuleList/ModuleDict.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "data/dataset.h"
#include "nn/layers.h"
#include "nn/serialize.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using Catch::Contains;

namespace {

constexpr int64_t V = 20, T = 12, E = 32, H = 4, FF = 64, C = 3, B = 16;

const nn::SafetensorsFile& twin() {
  static const nn::SafetensorsFile file =
      nn::load_safetensors(std::string(HG_NN_FIXTURE_DIR) + "/transformer_twin.safetensors");
  return file;
}

nn::NamedTensors weights_with_prefix(const std::string& prefix, Device dev, DType dt) {
  nn::NamedTensors out;
  for (const auto& [name, t] : twin().tensors) {
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t.to(dev, dt));
  }
  return out;
}

// The twin's Classifier, module for module.
struct Classifier : nn::Module {
  std::shared_ptr<nn::Embedding> embed, pos;
  std::shared_ptr<nn::TransformerEncoder> encoder;
  Tensor query;
  std::shared_ptr<nn::MultiheadAttention> pool;
  std::shared_ptr<nn::Linear> head;

  Classifier() {
    embed = register_module("embed", std::make_shared<nn::Embedding>(V, E));
    pos = register_module("pos", std::make_shared<nn::Embedding>(T, E));
    encoder = register_module(
        "encoder", std::make_shared<nn::TransformerEncoder>(nn::TransformerLayerOptions{.d_model = E,
                                                                                        .nhead = H,
                                                                                        .dim_feedforward = FF,
                                                                                        .dropout = 0.0,
                                                                                        .activation = "gelu",
                                                                                        .norm_first = true},
                                                            2));
    query = register_parameter("query", zeros({1, 1, E}));
    pool = register_module("pool", std::make_shared<nn::MultiheadAttention>(
                                       nn::MultiheadAttentionOptions{.embed_dim = E, .num_heads = H}));
    head = register_module("head", std::make_shared<nn::Linear>(E, C));
  }

  // (logits [B, C], pooling weights [B, 1, T])
  std::tuple<Tensor, Tensor> run(const Tensor& tokens) {
    const Tensor pad = tokens == 0.0;
    const Tensor positions = arange(static_cast<double>(tokens.size(1)), {.dtype = kI64, .device = tokens.device()});
    Tensor x = embed->forward(tokens) + pos->forward(positions);
    x = encoder->forward(x, {.src_key_padding_mask = pad});
    const Tensor q = query.expand({tokens.size(0), 1, E});
    auto [o, w] = pool->forward(q, x, x, {.key_padding_mask = pad});
    return {head->forward(o.select(1, 0)), w};
  }
};

std::shared_ptr<Classifier> twin_model(Device dev, DType dt) {
  auto model = std::make_shared<Classifier>();
  model->to(dev, dt);
  model->load_state_dict(weights_with_prefix("weights.", dev, dt));  // strict: torch's names
  return model;
}

void check_close(const Tensor& actual, const Tensor& expected, test::Tolerance tol, const std::string& what) {
  INFO(what << " " << actual.shape_str());
  REQUIRE(actual.sizes() == expected.sizes());
  CHECK(test::compare_values(test::values_of(actual), test::values_of(expected), tol) == "");
}

}  // namespace

TEST_CASE("a transformer classifier trains to its PyTorch twin's losses over 50 AdamW steps",
          "[nn][transformer][torch]") {
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer build checks the memory of the same code in 8 steps (the 50
  // take ~100 s there); the cpu and emu builds check all 50 against torch.
  const Tensor expected = twin().at("losses").narrow(0, 0, 8);
#else
  const Tensor expected = twin().at("losses");
#endif
  // f32 on every test device (the optimizers keep f32, f16 or bf16 parameters)
  // against the f64 reference.
  const DType dt = kF32;
  for (Device dev : test::test_devices()) {
    INFO(dev.str());
    auto model = twin_model(dev, dt);
    model->train();
    // Pooling weights at init (need_weights, the explicit softmax path).
    {
      NoGradGuard no_grad;
      const Tensor w = std::get<1>(model->run(twin().at("tokens").narrow(0, 0, B).to(dev)));
      check_close(w, twin().at("pooled_weights"), test::tolerance_for(dt, test::OpKind::kReduction), "pooled weights");
    }
    auto [decay, no_decay] = optim::param_groups_for_weight_decay(model->parameters());
    optim::AdamW opt(decay, {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8, .weight_decay = 0.05});
    opt.add_param_group(no_decay, opt.defaults().set_weight_decay(0.0));
    data::TensorDataset ds({twin().at("tokens"), twin().at("labels")});
    data::DatasetLoader loader(ds, {.batch_size = B, .device = dev});
    std::vector<double> losses;
    while (static_cast<int64_t>(losses.size()) < expected.numel()) {
      for (const data::Example& batch : loader) {
        if (static_cast<int64_t>(losses.size()) == expected.numel()) break;
        const Tensor loss = cross_entropy(std::get<0>(model->run(batch[0])), batch[1]);
        losses.push_back(loss.to(Device::cpu(), kF64).item<double>());
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
    }
    // f32 against the f64 reference: the model tolerance row (torch's own f32
    // run is 5.4e-7 from it at most).
    const std::string report =
        test::compare_values(losses, test::values_of(expected), test::tolerance_for(dt, test::OpKind::kReduction));
    CHECK(report == "");
    if (expected.numel() == 50) CHECK(losses.back() < 0.01 * losses.front());  // it learned
  }
}

TEST_CASE(
    "TransformerEncoderLayer and TransformerDecoderLayer (post-norm, masks) match torch's, forward and "
    "input gradient",
    "[nn][transformer][torch]") {
  const test::Tolerance tol = test::tolerance_for(kF64, test::OpKind::kReduction);
  {
    nn::TransformerEncoderLayer enc({.d_model = E, .nhead = H, .dim_feedforward = FF, .dropout = 0.0});
    enc.to(kF64);
    enc.load_state_dict(weights_with_prefix("enc.", Device::cpu(), kF64));
    const Tensor src = twin().at("enc_src").clone().requires_grad_();
    const Tensor y = enc.forward(src, {.src_mask = twin().at("enc_mask")});
    check_close(y, twin().at("enc_out"), tol, "encoder output");
    (y * twin().at("enc_seed")).sum().backward();
    check_close(src.grad(), twin().at("enc_grad"), tol, "encoder d src");
  }
  {
    nn::TransformerDecoderLayer dec({.d_model = E, .nhead = H, .dim_feedforward = FF, .dropout = 0.0});
    dec.to(kF64);
    dec.load_state_dict(weights_with_prefix("dec.", Device::cpu(), kF64));
    const Tensor tgt = twin().at("dec_tgt").clone().requires_grad_();
    const Tensor y = dec.forward(tgt, twin().at("dec_memory"),
                                 {.tgt_key_padding_mask = Tensor(),
                                  .memory_key_padding_mask = twin().at("dec_memory_pad"),
                                  .tgt_is_causal = true});
    check_close(y, twin().at("dec_out"), tol, "decoder output");
    (y * twin().at("dec_seed")).sum().backward();
    check_close(tgt.grad(), twin().at("dec_grad"), tol, "decoder d tgt");
  }
}

TEST_CASE("MultiheadAttention: the fused and explicit paths, bool and float masks, both layouts agree",
          "[nn][transformer]") {
  Generator gen(5);
  nn::MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .generator = &gen});
  mha.to(kF64);
  const Tensor q = randn({2, 3, 8}, {.dtype = kF64}, &gen), kv = randn({2, 5, 8}, {.dtype = kF64}, &gen);
  const Tensor pad = tensor({{false, false, false, true, true}, {false, false, false, false, true}});
  const Tensor pad_float = where(pad, full({2, 5}, -std::numeric_limits<double>::infinity(), {.dtype = kF64}),
                                 zeros({2, 5}, {.dtype = kF64}));
  const Tensor block = tensor(
      {{false, true, false, false, false}, {false, false, false, false, false}, {true, false, false, false, false}});
  auto [fast, none] = mha.forward(q, kv, kv, {.key_padding_mask = pad, .need_weights = false, .attn_mask = block});
  CHECK_FALSE(none.defined());
  auto [slow, w] = mha.forward(q, kv, kv, {.key_padding_mask = pad_float, .attn_mask = block});
  const test::Tolerance tol = test::tolerance_for(kF64, test::OpKind::kReduction);
  check_close(fast, slow, tol, "sdpa vs explicit softmax");
  REQUIRE(w.sizes() == Shape{2, 3, 5});
  const std::vector<double> wv = test::values_of(w);
  CHECK(wv[0 * 15 + 0 * 5 + 1] == 0.0);  // blocked by attn_mask
  CHECK(wv[0 * 15 + 1 * 5 + 3] == 0.0);  // padding
  CHECK(wv[1 * 15 + 2 * 5 + 0] == 0.0);
  for (int64_t r = 0; r < 6; ++r) {
    double sum = 0;
    for (int64_t s = 0; s < 5; ++s) sum += wv[static_cast<size_t>(r * 5 + s)];
    CHECK(sum == Approx(1.0).epsilon(1e-12));
  }
  // Sequence-first layout: the same numbers, transposed.
  nn::MultiheadAttention seq({.embed_dim = 8, .num_heads = 2, .batch_first = false});
  seq.to(kF64);
  seq.load_state_dict(mha.named_parameters());
  auto [t_out, t_w] = seq.forward(q.transpose(0, 1), kv.transpose(0, 1), kv.transpose(0, 1),
                                  {.key_padding_mask = pad, .need_weights = false, .attn_mask = block});
  check_close(t_out.transpose(0, 1), fast, tol, "batch_first = false");
  // Separate projections (kdim, vdim) pass gradcheck with every input.
  nn::MultiheadAttention kv_dims({.embed_dim = 4, .num_heads = 2, .kdim = 3, .vdim = 5, .generator = &gen});
  kv_dims.to(kF64);
  CHECK(kv_dims.named_parameters().size() == 6);  // q/k/v_proj_weight, in_proj_bias, out_proj.weight/bias
  const std::vector<Tensor> in{randn({1, 2, 4}, {.dtype = kF64}, &gen).requires_grad_(),
                               randn({1, 3, 3}, {.dtype = kF64}, &gen).requires_grad_(),
                               randn({1, 3, 5}, {.dtype = kF64}, &gen).requires_grad_()};
  CHECK(gradcheck([&](const std::vector<Tensor>& x) { return std::get<0>(kv_dims.forward(x[0], x[1], x[2])); }, in) ==
        "");
  CHECK_THROWS_WITH(mha.forward(q, kv, kv, {.key_padding_mask = pad.narrow(1, 0, 4)}), Contains("[B, S] = [2, 5]"));
  CHECK_THROWS_WITH(nn::MultiheadAttention({.embed_dim = 6, .num_heads = 4}), Contains("multiple of num_heads"));
  CHECK_THROWS_WITH(nn::TransformerEncoderLayer({.d_model = 8, .nhead = 2, .activation = "tanh"}),
                    Contains("\"relu\" or \"gelu\""));
}

TEST_CASE("ModuleList and ModuleDict register, name and hand back their modules", "[nn][transformer]") {
  nn::ModuleList list;
  list.push_back(nn::Linear(2, 3));
  list.push_back(std::make_shared<nn::ReLU>());
  CHECK(list.size() == 2);
  CHECK(list.named_parameters().size() == 2);
  CHECK(list.named_parameters()[0].first == "0.weight");
  CHECK(list.at<nn::Linear>(0)->out_features() == 3);
  CHECK_THROWS_WITH(list.at<nn::Linear>(1), Contains("module 1 is a ReLU") && Contains("Linear"));
  CHECK_THROWS_WITH(list[2], Contains("out of range"));
  CHECK_THROWS_WITH(list.forward(zeros({1, 2})), Contains("no single-input forward"));
  int n = 0;
  for (const auto& m : list) n += m != nullptr;
  CHECK(n == 2);

  nn::ModuleDict dict{{"enc", std::make_shared<nn::Linear>(4, 4)}, {"act", std::make_shared<nn::GELU>()}};
  CHECK(dict.keys() == std::vector<std::string>{"enc", "act"});
  CHECK(dict.contains("enc"));
  CHECK(dict.named_parameters()[1].first == "enc.bias");
  CHECK(dict.at<nn::Linear>("enc")->in_features() == 4);
  CHECK_THROWS_WITH(dict["dec"], Contains("no module under key 'dec'"));
  CHECK_THROWS_WITH(dict.insert("enc", std::make_shared<nn::ReLU>()), Contains("already there"));

  nn::TransformerEncoder stack({.d_model = 8, .nhead = 2, .dim_feedforward = 16}, 2, true);
  const nn::NamedTensors names = stack.named_parameters();
  CHECK(names.front().first == "layers.0.self_attn.in_proj_weight");
  CHECK(names.back().first == "norm.bias");
  CHECK(stack.forward(randn({2, 3, 8})).sizes() == Shape{2, 3, 8});
}

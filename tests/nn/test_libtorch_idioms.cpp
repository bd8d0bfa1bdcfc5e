// The small libtorch idioms halfgrad answers (docs/libtorch.md's side-by-side
// table): dtype aliases, InferenceMode, max/min(dim) with indices, x[i],
// softmax(dim), soft-label cross_entropy with smoothing (against an f64 sum
// written here), the accuracy metric, num_parameters, and the one-time warning
// of Autocast(kF16) on a CPU. Its own binary, so the warning's once-per-process
// state is this file's: the warning test runs first and nothing else here
// builds an f16 autocast.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "data/dataset.h"
#include "runtime/cpu/threads.h"
#include "nn/functional.h"
#include "nn/layers.h"
#include "nn/serialize.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "tests/kernels/tolerance.h"
#include "tests/test_files.h"

using namespace hg;
using Catch::Contains;

namespace {

std::vector<double> test_values(const Tensor& t) { return t.detach().to(kF64).contiguous().to_vector<double>(); }
std::vector<double> values_of(const Tensor& t) { return t.detach().to(kF64).contiguous().to_vector<double>(); }

// Everything written to stderr (fd 2) while `body` runs.
template <class F>
std::string capture_stderr(F&& body) {
  hg::test::TempDir dir;
  const std::string path = (dir.path / "stderr.txt").string();
  std::fflush(stderr);
  const int saved = dup(2);
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  dup2(fileno(f), 2);
  body();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(f);
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// docs/libtorch.md, "A transformer block": a module whose forward takes two tensors.
struct Block : hg::nn::Module {
  std::shared_ptr<hg::nn::LayerNorm> ln1, ln2;
  std::shared_ptr<hg::nn::MultiheadAttention> attn;
  std::shared_ptr<hg::nn::Sequential> mlp;
  Block(int64_t d, int64_t heads) {
    ln1 = register_module("ln1", std::make_shared<hg::nn::LayerNorm>(hg::Shape{d}));
    attn = register_module("attn", std::make_shared<hg::nn::MultiheadAttention>(
                                       hg::nn::MultiheadAttentionOptions{.embed_dim = d, .num_heads = heads}));
    ln2 = register_module("ln2", std::make_shared<hg::nn::LayerNorm>(hg::Shape{d}));
    mlp = register_module("mlp", std::make_shared<hg::nn::Sequential>(hg::nn::Linear(d, 4 * d), hg::nn::GELU(),
                                                                      hg::nn::Linear(4 * d, d)));
  }
  // x [B, T, d]; pad bool [B, T], true at padding.
  hg::Tensor forward(const hg::Tensor& x, const hg::Tensor& pad) {
    const hg::Tensor h = ln1->forward(x);
    auto [a, weights] = attn->forward(h, h, h, {.key_padding_mask = pad, .need_weights = false});
    const hg::Tensor y = x + a;
    return y + mlp->forward(ln2->forward(y));
  }
};

// docs/libtorch.md, "A dataset of your own": sample i computed on demand.
struct Noisy : hg::data::Dataset {
  int64_t size() const override { return 256; }
  hg::data::Example get(int64_t i) const override {
    hg::Generator gen(static_cast<uint64_t>(i));  // the same sample every time
    const hg::Tensor x = hg::randn({8}, {}, &gen);
    return {x, hg::tensor(x.sum().item<double>() > 0.0 ? int64_t{1} : int64_t{0})};
  }
};

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("Autocast(kF16) on a CPU warns once that bf16 is the fast 16-bit type there", "[nn][libtorch]") {
  const Tensor a = randn({4, 4});
  const std::string first = capture_stderr([&] {
    amp::Autocast ac(kF16);
    (void)matmul(a, a);
  });
  CHECK(count_of(first, "Autocast(f16) on the CPU") == 1);
  CHECK_THAT(first, Contains("kBF16"));
  const std::string again = capture_stderr([&] {
    amp::Autocast ac(kHalf);
    (void)matmul(a, a);
    amp::Autocast ac2(kF16);
    (void)matmul(a, a);
  });
  CHECK(count_of(again, "Autocast(f16) on the CPU") == 0);
  const std::string bf16 = capture_stderr([&] {
    amp::Autocast ac(kBFloat16);
    (void)matmul(a, a);
  });
  CHECK(bf16.find("[warn") == std::string::npos);
  // A program that explains it itself turns it off (hg-train); true arms it again.
  amp::set_cpu_f16_warning(false);
  CHECK(count_of(capture_stderr([&] {
                   amp::Autocast ac(kF16);
                   (void)matmul(a, a);
                 }),
                 "Autocast(f16) on the CPU") == 0);
  amp::set_cpu_f16_warning(true);
  // Opening a region warns of nothing: only an op lowered to f16 on the CPU does.
  CHECK(count_of(capture_stderr([&] { amp::Autocast ac(kF16); }), "Autocast(f16) on the CPU") == 0);
  CHECK(count_of(capture_stderr([&] {
                   amp::Autocast ac(kF16);
                   (void)matmul(a, a);
                 }),
                 "Autocast(f16) on the CPU") == 1);
}

TEST_CASE("libtorch's dtype names are halfgrad's dtypes", "[nn][libtorch]") {
  static_assert(kHalf == kF16 && kFloat16 == kF16 && kBFloat16 == kBF16);
  static_assert(kFloat == kF32 && kFloat32 == kF32 && kDouble == kF64 && kFloat64 == kF64);
  static_assert(kLong == kI64 && kInt64 == kI64 && kInt == kI32 && kInt32 == kI32 && kByte == kU8 && kUInt8 == kU8);
  CHECK(zeros({2}, {.dtype = kHalf}).dtype() == kF16);
  CHECK(ones({2}).to(kFloat64).dtype() == kF64);
}

TEST_CASE("InferenceMode records nothing and restores grad mode", "[nn][libtorch]") {
  const Tensor w = randn({3}).requires_grad_();
  {
    InferenceMode guard;
    CHECK_FALSE(is_grad_enabled());
    CHECK_FALSE((w * 2.0).requires_grad());
  }
  CHECK(is_grad_enabled());
  CHECK((w * 2.0).requires_grad());
}

TEST_CASE("max(dim) and min(dim) return values and indices, the values carrying the gradient", "[nn][libtorch]") {
  const Tensor x = tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}}, kF64).requires_grad_();
  auto [mx, imx] = x.max(1);
  CHECK(values_of(mx) == std::vector<double>{5, 6});
  CHECK(imx.dtype() == kI64);
  CHECK(imx.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  auto [mn, imn] = x.min(0, true);
  CHECK(mn.sizes() == Shape{1, 3});
  CHECK(values_of(mn) == std::vector<double>{1, 2, 3});
  CHECK(imn.sizes() == Shape{1, 3});
  CHECK(imn.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  CHECK_FALSE(imx.requires_grad());
  (mx.sum() + 10.0 * mn.sum()).backward();
  CHECK(values_of(x.grad()) == std::vector<double>{10, 1, 10, 0, 10, 1});
  // Integers: min's indices come from the negated values, exactly.
  const Tensor i = tensor({{7, -3, 9}, {0, 8, -8}});
  CHECK(std::get<1>(i.min(1)).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(std::get<1>(i.max(-1)).to_vector<int64_t>() == std::vector<int64_t>{2, 1});
  CHECK(std::get<0>(i.min(1)).to_vector<int64_t>() == std::vector<int64_t>{-3, -8});
}

TEST_CASE("x[i] selects along dim 0 and the gradient reaches only that row", "[nn][libtorch]") {
  const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, kF64).requires_grad_();
  CHECK(values_of(x[1]) == std::vector<double>{3, 4});
  CHECK(values_of(x[-1]) == std::vector<double>{5, 6});
  CHECK(values_of(x[2][0]) == std::vector<double>{5});
  (x[1] * 3.0).sum().backward();
  CHECK(values_of(x.grad()) == std::vector<double>{0, 0, 3, 3, 0, 0});
  CHECK_THROWS_WITH(x[3], Contains("3"));
}

// torch.round / floor / trunc: ties to even, the sign kept (-0.0 stays
// negative), integers unchanged, and a zero gradient. Values written out here,
// as torch prints them.
TEST_CASE("round, floor and trunc as torch: half to even, integers unchanged, zero gradient", "[nn][libtorch]") {
  const std::vector<double> in{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -1.7, 1.7, 3.0};
  for (DType dtype : {kF32, kF16, kBF16, kF64}) {
    INFO(dtype_name(dtype));
    const Tensor x = from_vector(in, {9}, {.dtype = dtype});
    CHECK(x.round().dtype() == dtype);
    CHECK(values_of(x.round()) == std::vector<double>{-2, -2, -0.0, 0, 2, 2, -2, 2, 3});
    CHECK(values_of(x.floor()) == std::vector<double>{-3, -2, -1, 0, 1, 2, -2, 1, 3});
    CHECK(values_of(x.trunc()) == std::vector<double>{-2, -1, -0.0, 0, 1, 2, -1, 1, 3});
    CHECK(std::signbit(values_of(x.round())[2]));  // round(-0.5) is -0.0, as in torch
  }
  const Tensor i = from_vector(std::vector<double>{-3, 0, 7}, {3}, {.dtype = kI64});
  CHECK(i.floor().dtype() == kI64);
  CHECK(values_of(i.round()) == std::vector<double>{-3, 0, 7});
  const Tensor special = from_vector(std::vector<double>{INFINITY, -INFINITY, NAN}, {3}, {.dtype = kF32});
  const std::vector<double> r = values_of(special.floor());
  CHECK(r[0] == INFINITY);
  CHECK(r[1] == -INFINITY);
  CHECK(std::isnan(r[2]));

  const Tensor w = tensor({0.3, 1.6, -2.4}, kF64).requires_grad_();
  (w.round() + w.floor() * 2.0 + w.trunc() * 3.0).sum().backward();
  CHECK(values_of(w.grad()) == std::vector<double>{0, 0, 0});
  // An infinite upstream gradient still gives 0, as torch's zeros_like(grad).
  const Tensor v = tensor({0.3}, kF64).requires_grad_();
  (v.floor() * INFINITY).sum().backward();
  CHECK(values_of(v.grad()) == std::vector<double>{0});
}

TEST_CASE("softmax(dim) and log_softmax(dim) as methods", "[nn][libtorch]") {
  const Tensor x = randn({3, 4}, {.dtype = kF64});
  CHECK(values_of(x.softmax(0)) == values_of(softmax(x, 0)));
  CHECK(values_of(x.log_softmax(0)) == values_of(log_softmax(x, 0)));
  const std::vector<double> cols = values_of(x.softmax(0).sum(0));
  for (double c : cols) CHECK(c == Approx(1.0).epsilon(1e-12));
  CHECK(values_of(x.softmax(-1)) == values_of(x.softmax()));
}

TEST_CASE("cross_entropy with probability targets and label smoothing matches an f64 sum", "[nn][libtorch]") {
  Generator gen(7);
  const int64_t n = 4, c = 5;
  for (const double smoothing : {0.0, 0.1}) {
    for (const DType dt : {kF64, kF32}) {
      const Tensor logits64 = randn({n, c}, {.dtype = kF64}, &gen);
      const Tensor targets64 = softmax(randn({n, c}, {.dtype = kF64}, &gen) * 2.0, 1);
      const std::vector<double> xs = values_of(logits64), ts = values_of(targets64);
      // loss = mean_n -sum_k t'_k (x_k - logsumexp x), t' = t (1 - s) + s / C;
      // d loss / d x_k = (softmax(x)_k sum_j t'_j - t'_k) / N.
      double want = 0.0;
      std::vector<double> want_grad(static_cast<size_t>(n * c));
      for (int64_t r = 0; r < n; ++r) {
        double mx = -INFINITY, z = 0.0, tsum = 0.0;
        for (int64_t k = 0; k < c; ++k) mx = std::max(mx, xs[r * c + k]);
        for (int64_t k = 0; k < c; ++k) z += std::exp(xs[r * c + k] - mx);
        const double lse = mx + std::log(z);
        for (int64_t k = 0; k < c; ++k) {
          const double t = ts[r * c + k] * (1.0 - smoothing) + smoothing / static_cast<double>(c);
          tsum += t;
          want -= t * (xs[r * c + k] - lse) / static_cast<double>(n);
        }
        for (int64_t k = 0; k < c; ++k) {
          const double t = ts[r * c + k] * (1.0 - smoothing) + smoothing / static_cast<double>(c);
          want_grad[r * c + k] = (std::exp(xs[r * c + k] - lse) * tsum - t) / static_cast<double>(n);
        }
      }
      const Tensor logits = logits64.to(dt).requires_grad_();
      const Tensor loss = cross_entropy(logits, targets64.to(dt), -100, smoothing);
      CHECK(loss.dtype() == dt);
      const double tol = dt == kF64 ? 1e-12 : 1e-6;
      CHECK(loss.item<double>() == Approx(want).epsilon(tol));
      loss.backward();
      const std::vector<double> g = values_of(logits.grad());
      for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(want_grad[i]).margin(tol));
    }
  }
  // One-hot probabilities are the class-index loss.
  const Tensor x = randn({3, 4}, {.dtype = kF64}, &gen);
  const Tensor idx = tensor({2, 0, 3});
  const Tensor onehot = tensor({{0.0, 0.0, 1.0, 0.0}, {1.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 1.0}}, kF64);
  CHECK(cross_entropy(x, onehot, -100, 0.1).item<double>() ==
        Approx(cross_entropy(x, idx, -100, 0.1).item<double>()).epsilon(1e-12));
  CHECK_THROWS_WITH(cross_entropy(x, onehot.narrow(1, 0, 3)), Contains("probability targets") && Contains("[3, 3]"));
}

TEST_CASE("nn::functional::accuracy counts argmax hits", "[nn][libtorch]") {
  const Tensor logits = tensor({{0.1, 0.9, 0.0}, {2.0, 1.0, 0.5}, {0.0, 0.2, 0.3}, {1.0, 3.0, 2.0}});
  CHECK(nn::functional::accuracy(logits, tensor({1, 0, 0, 2})) == 0.5);
  CHECK(nn::functional::accuracy(logits, tensor({1, 0, 2, 1})) == 1.0);
  CHECK_THROWS_WITH(nn::functional::accuracy(logits, tensor({1.0, 0.0, 0.0, 2.0})), Contains("i64 [4]"));
  CHECK_THROWS_WITH(nn::functional::accuracy(logits, tensor({1, 0})), Contains("i64 [4]"));
}

TEST_CASE("Module::num_parameters counts every or only trainable parameters", "[nn][libtorch]") {
  nn::Sequential model(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2, false));
  CHECK(model.num_parameters() == 3 * 4 + 4 + 4 * 2);
  model.parameters()[1].requires_grad_(false);  // the first bias
  CHECK(model.num_parameters(true) == 3 * 4 + 4 * 2);
  CHECK(model.num_parameters() == 3 * 4 + 4 + 4 * 2);
}

// ---- docs/libtorch.md, "From PyTorch to halfgrad": each idiom runs here -------------

TEST_CASE("docs: the AMP recipe", "[nn][libtorch][docs]") {
  hg::Generator gen(1);
  const hg::Tensor x = hg::randn({64, 16}, {}, &gen);
  const hg::Tensor y = std::get<1>(x.narrow(1, 0, 4).max(1));  // the largest of the first 4 features
  double first = 0.0, last = 0.0;
  // AMP recipe
  auto model = std::make_shared<hg::nn::Sequential>(hg::nn::Linear(16, 32), hg::nn::GELU(), hg::nn::Linear(32, 4));
  hg::optim::AdamW opt(model->parameters(), {.lr = 1e-2});
  hg::amp::GradScaler scaler;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    hg::Tensor loss;
    {
      hg::amp::Autocast autocast(hg::kBF16);  // kF16 on a GPU: the CPU's fast 16-bit type is bf16
      loss = hg::cross_entropy(model->forward(x), y);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  // end AMP recipe
  CHECK(last < 0.7 * first);
}

TEST_CASE("docs: a transformer block with a padding mask", "[nn][libtorch][docs]") {
  const Tensor tokens = tensor({{5, 3, 9, 0, 0}, {2, 2, 7, 1, 4}});
  nn::Embedding embed(10, 16);
  // transformer block
  Block block(16, 4);
  const hg::Tensor pad = tokens == 0;  // [B, T], true at padding
  const hg::Tensor h = block.forward(embed.forward(tokens), pad);
  // end transformer block
  CHECK(h.sizes() == Shape{2, 5, 16});
  // The padding changes nothing at the other positions: the same sequence without its padding.
  const Tensor alone =
      block.forward(embed.forward(tokens.narrow(0, 0, 1).narrow(1, 0, 3)), zeros({1, 3}, {.dtype = kBool}));
  CHECK(test::compare_values(test_values(alone), test_values(h.narrow(0, 0, 1).narrow(1, 0, 3)),
                             test::tolerance_for(kF32, test::OpKind::kReduction)) == "");
  h.sum().backward();
  CHECK(block.attn->in_proj_weight.grad().defined());
}

TEST_CASE("docs: a dataset of your own and TensorDataset", "[nn][libtorch][docs]") {
  // custom dataset
  Noisy noisy;
  hg::data::DatasetLoader loader(noisy, {.batch_size = 32, .shuffle = true, .seed = 7});
  for (const hg::data::Example& batch : loader) {
    const hg::Tensor& x = batch[0];  // f32 [32, 8]
    const hg::Tensor& y = batch[1];  // i64 [32]
    CHECK(x.sizes() == hg::Shape{32, 8});
    CHECK(y.sizes() == hg::Shape{32});
  }
  hg::data::TensorDataset pairs({hg::randn({100, 8}), hg::zeros({100}, {.dtype = hg::kI64})});
  hg::data::DatasetLoader pair_loader(pairs, {.batch_size = 25, .drop_last = true});
  // end custom dataset
  CHECK(loader.num_batches() == 8);
  CHECK(pair_loader.num_batches() == 4);
}

TEST_CASE("docs: parameter groups, saving and loading, threads", "[nn][libtorch][docs]") {
  hg::test::TempDir dir;
  const std::string path = (dir.path / "model.safetensors").string();
  // parameter groups
  auto model = std::make_shared<hg::nn::Sequential>(hg::nn::Linear(8, 8), hg::nn::LayerNorm(hg::Shape{8}));
  auto [decay, no_decay] = hg::optim::param_groups_for_weight_decay(model->parameters());
  hg::optim::AdamW opt(decay, {.lr = 3e-4, .weight_decay = 0.1});
  opt.add_param_group(no_decay, opt.defaults().set_weight_decay(0.0));
  // end parameter groups
  CHECK(opt.param_groups().size() == 2);
  CHECK(decay.size() == 1);
  // saving and loading
  hg::nn::save_state_dict(path, *model);  // safetensors, PyTorch's state_dict names
  auto again = std::make_shared<hg::nn::Sequential>(hg::nn::Linear(8, 8), hg::nn::LayerNorm(hg::Shape{8}));
  hg::nn::load_state_dict(path, *again);
  // end saving and loading
  CHECK(test_values(again->parameters()[0]) == test_values(model->parameters()[0]));
  const int before = hg::get_num_threads();
  // threads
  hg::set_num_threads(1);  // torch.set_num_threads(1)
  const int n = hg::get_num_threads();
  // end threads
  CHECK(n == 1);
  hg::set_num_threads(before);
}

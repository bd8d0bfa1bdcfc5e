// Modules: registration and dotted names, train/eval, to(dtype)/to(device)
// keeping handles, state_dict round trips and strict-load errors, layer
// gradients by gradcheck, init statistics, dropout masks across devices.
#include <catch2/catch.hpp>

#include <cmath>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/generator.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::Dropout> drop;
  explicit Mlp(Generator* gen = nullptr) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 5, true, gen));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5, gen));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(5, 3, true, gen));
    register_buffer("steps", zeros({}, {.dtype = kI64}));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(drop->forward(hg::relu(fc1->forward(x)))); }
  std::string type_name() const override { return "Mlp"; }
};

}  // namespace

TEST_CASE("modules register parameters under dotted names", "[nn][module]") {
  Mlp m;
  std::vector<std::string> names;
  for (auto& [n, t] : m.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  CHECK(m.parameters().size() == 4);
  CHECK(m.state_dict().size() == 5);  // + the buffer
  CHECK(m.state_dict().back().first == "steps");
  for (const Tensor& p : m.parameters()) CHECK(p.requires_grad());
  CHECK_THROWS_WITH(m.register_parameter("fc1", zeros({1})), Catch::Contains("already registered"));
  CHECK_THROWS_WITH(m.register_buffer("a.b", zeros({1})), Catch::Contains("no '.'"));
  std::ostringstream os;
  os << m;
  CHECK(os.str().find("(fc1): Linear(in_features=6, out_features=5, bias=true)") != std::string::npos);
}

TEST_CASE("train/eval reaches submodules and controls dropout", "[nn][module]") {
  Mlp m;
  const Tensor x = ones({4, 6});
  m.eval();
  CHECK_FALSE(m.drop->is_training());
  const auto a = values_of(m.forward(x)), b = values_of(m.forward(x));
  CHECK(a == b);  // deterministic in eval
  m.train();
  CHECK(m.fc1->is_training());
}

TEST_CASE("to(dtype) and to(device) keep the layer's handles", "[nn][module]") {
  Mlp m;
  const Tensor w = m.fc1->weight;
  const auto before = values_of(w);
  m.to(kF16);
  CHECK(m.fc1->weight.dtype() == kF16);
  CHECK(w.dtype() == kF16);  // the handle we kept sees the change
  CHECK(m.named_buffers()[0].second.dtype() == kI64);  // integer buffers untouched
  CHECK(compare_values(values_of(w), before, tolerance_for(kF16, OpKind::kElementwise)) == "");
  for (Device dev : test_devices()) {
    m.to(dev);
    CHECK(m.fc2->bias.device() == dev);
    CHECK(m.fc2->bias.requires_grad());
  }
}

TEST_CASE("state_dict round trip and strict loading errors", "[nn][module]") {
  Generator g1(1), g2(2);
  Mlp a(&g1), b(&g2);
  CHECK(values_of(a.fc1->weight) != values_of(b.fc1->weight));
  b.load_state_dict(a.state_dict());
  CHECK(values_of(a.fc1->weight) == values_of(b.fc1->weight));
  nn::NamedTensors partial = a.state_dict();
  partial.pop_back();
  partial.emplace_back("extra.weight", zeros({1}));
  CHECK_THROWS_WITH(b.load_state_dict(partial),
                    Catch::Contains("missing keys: steps") && Catch::Contains("unexpected keys: extra.weight"));
  CHECK_NOTHROW(b.load_state_dict(partial, /*strict=*/false));
  nn::NamedTensors wrong = a.state_dict();
  wrong[0].second = zeros({2, 2});
  CHECK_THROWS_WITH(b.load_state_dict(wrong), Catch::Contains("fc1.weight (expected f32 [5, 6], got f32 [2, 2])"));
}

TEST_CASE("zero_grad sets gradients to none", "[nn][module]") {
  Mlp m;
  m.eval();
  hg::sum(m.forward(ones({2, 6}))).backward();
  CHECK(m.fc1->weight.grad().defined());
  m.zero_grad();
  CHECK_FALSE(m.fc1->weight.grad().defined());
}

TEST_CASE("layer gradients pass gradcheck", "[nn][gradcheck]") {
  Generator gen(5);
  auto lin = std::make_shared<nn::Linear>(4, 3, true, &gen);
  auto seq = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      lin, std::make_shared<nn::GELU>(), std::make_shared<nn::Flatten>(0)});
  seq->to(kF64);
  Tensor x = randn({2, 4}, {.dtype = kF64}).requires_grad_(true);
  std::vector<Tensor> inputs{x, lin->weight, lin->bias};
  CHECK(gradcheck([&](const std::vector<Tensor>&) { return seq->forward(x); }, inputs) == "");
  auto mse = [](const std::vector<Tensor>& in) { return nn::functional::mse_loss(in[0], in[1]); };
  CHECK(gradcheck(mse, {randn({3, 2}, {.dtype = kF64}).requires_grad_(true),
                        randn({3, 2}, {.dtype = kF64}).requires_grad_(true)}) == "");
}

TEST_CASE("init functions have the documented spread", "[nn][init]") {
  Generator gen(3);
  Tensor w = empty({256, 512});
  nn::init::kaiming_uniform_(w, 0.0, &gen);
  const double bound = std::sqrt(2.0) * std::sqrt(3.0 / 512);
  double sq = 0;
  for (double v : values_of(w)) {
    CHECK(std::fabs(v) <= bound);
    sq += v * v;
  }
  CHECK(std::sqrt(sq / w.numel()) == Approx(bound / std::sqrt(3.0)).epsilon(0.02));
  nn::init::xavier_normal_(w, 1.0, &gen);
  sq = 0;
  for (double v : values_of(w)) sq += v * v;
  CHECK(std::sqrt(sq / w.numel()) == Approx(std::sqrt(2.0 / (256 + 512))).epsilon(0.02));
  CHECK(nn::init::fan_in(w) == 512);
  CHECK(nn::init::fan_out(w) == 256);
}

TEST_CASE("dropout masks are the same on every device for the same seed", "[nn][dropout]") {
  std::vector<std::vector<double>> outs;
  for (Device dev : test_devices()) {
    Generator gen(77);
    const Tensor x = ones({8, 33}, {.device = dev});
    outs.push_back(values_of(nn::functional::dropout(x, 0.25, true, &gen)));
  }
  for (const auto& o : outs) CHECK(o == outs[0]);
  int zeros_seen = 0;
  for (double v : outs[0]) {
    CHECK((v == 0.0 || v == Approx(1.0 / 0.75)));
    zeros_seen += v == 0.0;
  }
  CHECK(zeros_seen > 30);
  CHECK(zeros_seen < 110);
}

// The libtorch-style API: Tensor methods and comparisons, hg::tensor, Sequential
// from module values, the module tree (printing, named_modules, apply, to) and
// the model-only safetensors export.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "kernels/reduce/reduce.h"
#include "nn/layers.h"
#include "nn/serialize.h"
#include "tests/test_files.h"

using namespace hg;

namespace {

struct Block : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::Sequential> body;
  Block() {
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 4));
    body = register_module("body", std::make_shared<nn::Sequential>(nn::ReLU(), nn::Linear(4, 2, false)));
  }
  Tensor forward(const Tensor& x) override { return body->forward(fc->forward(x)); }
};

std::vector<double> values_of(const Tensor& t) { return t.to(kF64).contiguous().to_vector<double>(); }

}  // namespace

TEST_CASE("hg::tensor builds tensors from nested braces with PyTorch's dtypes", "[nn][api]") {
  const Tensor a = tensor({{1.5, 2.0, -3.0}, {4.0, 5.0, 6.0}});
  CHECK(a.dtype() == kF32);
  CHECK(a.sizes() == Shape{2, 3});
  CHECK(a.to_vector<float>() == std::vector<float>{1.5f, 2, -3, 4, 5, 6});
  const Tensor i = tensor({{{1, 2}}, {{3, 4}}});
  CHECK(i.dtype() == kI64);
  CHECK(i.sizes() == Shape{2, 1, 2});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(tensor({true, false}).dtype() == kBool);
  CHECK(tensor({1, 2}, kF16).dtype() == kF16);
  CHECK(tensor({0.1, 0.2}, {.dtype = kF64}).to_vector<double>() == std::vector<double>{0.1, 0.2});
  const Tensor s = tensor(2.5);
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 2.5f);
  CHECK_THROWS_WITH(tensor({{1, 2}, {3}}), Catch::Contains("ragged") && Catch::Contains("level 1"));
}

TEST_CASE("Tensor methods match the free functions", "[nn][api]") {
  const Tensor x = tensor({{1.0, -2.0, 3.0}, {-4.0, 5.0, 0.5}});
  CHECK(values_of(x.sum()) == std::vector<double>{3.5});
  CHECK(values_of(x.sum(1)) == std::vector<double>{2.0, 1.5});
  CHECK(values_of(x.sum({0, 1})) == std::vector<double>{3.5});
  CHECK(x.mean(0, true).sizes() == Shape{1, 3});
  CHECK(values_of(std::get<0>(x.max(1))) == std::vector<double>{3.0, 5.0});
  CHECK(values_of(x.min()) == std::vector<double>{-4.0});
  CHECK(x.argmax(1).to_vector<int64_t>() == std::vector<int64_t>{2, 1});
  CHECK(x.argmax().item<int64_t>() == 4);
  CHECK(values_of(x.relu()) == values_of(hg::relu(x)));
  CHECK(values_of(x.abs().log().exp()) == values_of(hg::exp(hg::log(hg::abs(x)))));
  CHECK(values_of(x.matmul(x.t())) == values_of(hg::matmul(x, x.t())));
  CHECK(values_of(x.add(x)) == values_of(x * 2.0));
  const Tensor opts = zeros({2}, x.options());
  CHECK(opts.dtype() == kF32);
  CHECK(tensor({1, 2}, kF16).options().dtype == kF16);

  // Comparisons: element-wise, broadcasting, bool.
  const Tensor y = tensor({{1.0, 2.0, 3.0}});
  CHECK((x == y).dtype() == kBool);
  CHECK((x == y).to_vector<bool>() == std::vector<bool>{true, false, true, false, false, false});
  CHECK((x < 0.0).to_vector<bool>() == std::vector<bool>{false, true, false, true, false, false});
  CHECK((0.0 < x).to_vector<bool>() == std::vector<bool>{true, false, true, false, true, true});
  CHECK((x != y).sum().item<int64_t>() == 4);
  CHECK((x >= 3.0).sum().item<int64_t>() == 2);
  CHECK((x.argmax(1) == tensor({2, 0})).to_vector<bool>() == std::vector<bool>{true, false});

  // Methods are differentiable like the free functions.
  const Tensor w = tensor({{0.5, -1.0}, {2.0, 1.0}}).requires_grad_(true);
  w.matmul(w).relu().sum().backward();
  const Tensor w2 = tensor({{0.5, -1.0}, {2.0, 1.0}}).requires_grad_(true);
  hg::sum(hg::relu(hg::matmul(w2, w2))).backward();
  CHECK(values_of(w.grad()) == values_of(w2.grad()));
}

TEST_CASE("Sequential from module values reads like libtorch", "[nn][api]") {
  Generator gen(0);
  auto a = std::make_shared<nn::Sequential>(nn::Linear(4, 8, true, &gen), nn::ReLU(), nn::Linear(8, 2, true, &gen));
  gen.manual_seed(0);
  nn::Sequential b{nn::Linear(4, 8, true, &gen), nn::ReLU(), nn::Linear(8, 2, true, &gen)};
  gen.manual_seed(0);
  nn::Sequential c{std::make_shared<nn::Linear>(4, 8, true, &gen), std::make_shared<nn::ReLU>(),
                   std::make_shared<nn::Linear>(8, 2, true, &gen)};
  REQUIRE(a->size() == 3);
  std::vector<std::string> names;
  for (const auto& [n, t] : b.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  const Tensor x = randn({5, 4});
  CHECK(a->forward(x).sizes() == Shape{5, 2});
  // (Parentheses: C++ constructs the arguments in an unspecified order, GCC
  // right to left, so a's layers drew from gen in another order than b's.)
  CHECK(values_of(b.forward(x)) == values_of(c.forward(x)));
  b.push_back(nn::Tanh());
  CHECK(b.size() == 4);
  // The parameters a Sequential holds are the ones its layers use.
  auto* first = dynamic_cast<nn::Linear*>(b[0].get());
  REQUIRE(first != nullptr);
  CHECK(same(first->weight, b.parameters()[0]));
}

TEST_CASE("the module tree: names, printing, named_modules, apply, to", "[nn][api]") {
  auto block = std::make_shared<Block>();
  CHECK(block->type_name() == "Block");
  CHECK(nn::ReLU().type_name() == "ReLU");
  CHECK(nn::Module().type_name() == "Module");
  std::ostringstream os;
  os << *block;
  CHECK(os.str() ==
        "Block(\n"
        "  (fc): Linear(in_features=3, out_features=4, bias=true)\n"
        "  (body): Sequential(\n"
        "    (0): ReLU()\n"
        "    (1): Linear(in_features=4, out_features=2, bias=false)\n"
        "  )\n"
        ")");

  std::vector<std::string> names;
  for (const auto& [n, m] : block->named_modules()) names.push_back(n + ":" + m->type_name().substr(0, 6));
  CHECK(names == std::vector<std::string>{":Block", "fc:Linear", "body:Sequen", "body.0:ReLU", "body.1:Linear"});
  CHECK(block->named_modules()[0].second.get() == block.get());
  CHECK(block->modules(false).size() == 4);
  Block on_stack;  // not owned by a shared_ptr: a non-owning handle to itself
  CHECK(on_stack.named_modules("root")[0].second.get() == &on_stack);
  CHECK(on_stack.named_modules("root")[3].first == "root.body.0");

  int linears = 0;
  block->apply([&](nn::Module& m) {
    if (auto* l = dynamic_cast<nn::Linear*>(&m)) {
      NoGradGuard no_grad;  // writing a parameter in place, as torch.no_grad()
      l->weight.fill_(0.25);
      ++linears;
    }
  });
  CHECK(linears == 2);
  CHECK(values_of(block->fc->weight) == std::vector<double>(12, 0.25));
  std::vector<std::string> visited;
  block->apply([&](const std::string& name, nn::Module&) { visited.push_back(name); });
  CHECK(visited == std::vector<std::string>{"", "fc", "body", "body.0", "body.1"});

  block->to(Device::cpu(), kF16);
  for (const Tensor& p : block->parameters()) CHECK(p.dtype() == kF16);
}

TEST_CASE("save_state_dict writes PyTorch's state_dict keys and loads back", "[nn][api][serialize]") {
  Generator gen(3);
  nn::Sequential model{nn::Linear(6, 5, true, &gen), nn::ReLU(), nn::Linear(5, 3, true, &gen)};
  hg::test::TempDir dir;
  const std::string path = (dir.path / "model.safetensors").string();
  nn::save_state_dict(path, model);
  const nn::SafetensorsFile f = nn::load_safetensors(path);
  std::vector<std::string> keys;
  for (const auto& [k, t] : f.tensors) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});  // no "model." prefix
  CHECK(f.at("0.weight").sizes() == Shape{5, 6});

  gen.manual_seed(99);
  nn::Sequential other{nn::Linear(6, 5, true, &gen), nn::ReLU(), nn::Linear(5, 3, true, &gen)};
  const Tensor x = randn({4, 6});
  CHECK(values_of(other.forward(x)) != values_of(model.forward(x)));
  nn::load_state_dict(path, other);
  CHECK(values_of(other.forward(x)) == values_of(model.forward(x)));
  nn::Sequential wrong{nn::Linear(6, 5), nn::ReLU()};
  CHECK_THROWS_WITH(nn::load_state_dict(path, wrong), Catch::Contains("2.weight"));

  // HG_STATE_DICT_OUT=<folder>: leave the model and an input/output pair there
  // for tests/nn/torch_state_dict.py (PyTorch's load_state_dict on the file).
  if (const char* out = std::getenv("HG_STATE_DICT_OUT")) {
    std::filesystem::create_directories(out);
    nn::save_state_dict(std::string(out) + "/model.safetensors", model);
    nn::save_safetensors(std::string(out) + "/io.safetensors", {{"x", x}, {"y", model.forward(x)}});
  }
}

// Typed per-group options for the built-in optimizers (libtorch's
// OptimizerParamGroup): a group steps with its own optimizer's rule and
// options, equal bit for bit to a one-group run with those options; the
// kernel-level OptimizerHyper no longer compiles as a group option; the
// nanoGPT weight-decay split as a library function.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "nn/layers.h"
#include "optim/lion.h"
#include "optim/muon.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;
using Catch::Contains;

namespace {

// The silent path of issue 46: OptimizerHyper as a group option. It must not compile.
template <typename Opt, typename Options>
constexpr bool kTakes = requires(Opt& o, std::vector<Tensor> p, Options g) {
  o.add_param_group(p, g);
};
template <typename Opt>
constexpr bool kTakesHyper = kTakes<Opt, OptimizerHyper>;
static_assert(!kTakesHyper<optim::SGD> && !kTakesHyper<optim::Adam> && !kTakesHyper<optim::AdamW> &&
              !kTakesHyper<optim::Lion> && !kTakesHyper<optim::Muon> && !kTakesHyper<optim::Optimizer>);
static_assert(requires(optim::AdamW & o, std::vector<Tensor> p) { o.add_param_group(p, {.weight_decay = 0.0}); });
// Named options are for user-written optimizers: a built-in does not take them either.
static_assert(!kTakes<optim::AdamW, optim::OptimizerOptions> && !kTakes<optim::SGD, optim::OptimizerOptions>);
// Another optimizer's options are refused at compile time.
static_assert(!kTakes<optim::AdamW, optim::SGDOptions> && !kTakes<optim::Adam, optim::AdamWOptions>);
static_assert(requires(optim::SGD & o, std::vector<Tensor> p) { o.add_param_group(p, {.lr = 0.1, .momentum = 0.9}); });

Tensor param(const Shape& s, uint64_t seed) { return make_input(s, kF32, Domain::kAny, seed).requires_grad_(true); }

// Runs `steps` steps with fixed pseudo-random gradients (the same for every
// run: seeded by the parameter's size and the step; the parameters of one
// run differ in size) and returns the parameters' values.
std::vector<std::vector<float>> run(optim::Optimizer& opt, const std::vector<Tensor>& params, int steps) {
  for (int s = 0; s < steps; ++s) {
    for (Tensor p : params) {
      p.set_grad(make_input(p.sizes(), kF32, Domain::kAny, 1000 + 17 * s + 100 * p.numel()));
    }
    opt.step();
  }
  std::vector<std::vector<float>> out;
  for (const Tensor& p : params) out.push_back(p.to_vector<float>());
  return out;
}

Tensor copy_of(const Tensor& p) { return p.detach().clone().requires_grad_(true); }

}  // namespace

TEST_CASE("an AdamW group with weight_decay 0 steps as AdamW, equal to a one-group AdamW run", "[optim][groups]") {
  const Tensor w = param({4, 3}, 1), b = param({3}, 2);
  optim::AdamW opt({w}, {.lr = 0.05, .weight_decay = 0.1});
  opt.add_param_group({b}, opt.defaults().set_weight_decay(0.0));
  REQUIRE(opt.param_groups().size() == 2);
  const Tensor w_ref = copy_of(w), b_ref = copy_of(b), b_decayed = copy_of(b), b_designated = copy_of(b);
  const auto got = run(opt, {w, b}, 6);

  optim::AdamW ref_w({w_ref}, {.lr = 0.05, .weight_decay = 0.1});
  optim::AdamW ref_b({b_ref}, {.lr = 0.05, .weight_decay = 0.0});
  CHECK(got[0] == run(ref_w, {w_ref}, 6)[0]);
  CHECK(got[1] == run(ref_b, {b_ref}, 6)[0]);
  // The test can fail: with the decay the bias ends elsewhere.
  optim::AdamW decayed({b_decayed}, {.lr = 0.05, .weight_decay = 0.1});
  CHECK(got[1] != run(decayed, {b_decayed}, 6)[0]);
  // A designated-initialiser group takes AdamWOptions' defaults for the fields it leaves out (libtorch's rule).
  const Tensor b_default_lr = copy_of(b_designated);
  optim::AdamW two({copy_of(w)}, {.lr = 0.05, .weight_decay = 0.1});
  two.add_param_group({b_designated}, {.weight_decay = 0.0});
  CHECK(two.lr(1) == Approx(1e-3));
  optim::AdamW ref_default({b_default_lr}, {.weight_decay = 0.0});
  CHECK(run(two, {two.param_groups()[0].params[0], b_designated}, 3)[1] == run(ref_default, {b_default_lr}, 3)[0]);
}

TEST_CASE("a typed group of every built-in optimizer equals a one-group run with those options", "[optim][groups]") {
  struct Kind {
    std::string name;
    // Builds the optimizer over `first` and adds `second` with other options.
    std::function<std::unique_ptr<optim::Optimizer>(Tensor first, Tensor second)> two_groups;
    // The reference: `second` alone, with the options its group was given.
    std::function<std::unique_ptr<optim::Optimizer>(Tensor second)> reference;
  };
  const std::vector<Kind> kinds = {
      {"sgd",
       [](Tensor a, Tensor c) {
         auto o = std::make_unique<optim::SGD>(std::vector<Tensor>{a}, optim::SGDOptions{.lr = 0.1});
         o->add_param_group({c}, {.lr = 0.03, .momentum = 0.9, .nesterov = true});
         return o;
       },
       [](Tensor c) {
         return std::make_unique<optim::SGD>(std::vector<Tensor>{c},
                                             optim::SGDOptions{.lr = 0.03, .momentum = 0.9, .nesterov = true});
       }},
      {"adam",
       [](Tensor a, Tensor c) {
         auto o = std::make_unique<optim::Adam>(std::vector<Tensor>{a}, optim::AdamOptions{.lr = 0.01});
         o->add_param_group({c}, o->defaults().set_betas(0.8, 0.9).set_weight_decay(0.05));
         return o;
       },
       [](Tensor c) {
         return std::make_unique<optim::Adam>(
             std::vector<Tensor>{c}, optim::AdamOptions{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.9, .weight_decay = 0.05});
       }},
      {"lion",
       [](Tensor a, Tensor c) {
         auto o = std::make_unique<optim::Lion>(std::vector<Tensor>{a}, optim::LionOptions{.lr = 1e-3});
         o->add_param_group({c}, {.lr = 3e-3, .beta1 = 0.8, .weight_decay = 0.1});
         return o;
       },
       [](Tensor c) {
         return std::make_unique<optim::Lion>(std::vector<Tensor>{c},
                                              optim::LionOptions{.lr = 3e-3, .beta1 = 0.8, .weight_decay = 0.1});
       }},
      {"muon, an AdamW group",
       [](Tensor a, Tensor c) {
         auto o = std::make_unique<optim::Muon>(std::vector<Tensor>{a}, optim::MuonOptions{.lr = 0.02});
         optim::MuonOptions g = o->defaults();
         g.lr = 0.01;
         g.use_muon = false;
         g.weight_decay = 0.01;
         o->add_param_group({c}, g);
         return o;
       },
       [](Tensor c) {
         return std::make_unique<optim::Muon>(std::vector<Tensor>{c},
                                              optim::MuonOptions{.lr = 0.01, .weight_decay = 0.01, .use_muon = false});
       }},
  };
  for (const Kind& k : kinds) {
    INFO(k.name);
    const Tensor a = param({4, 3}, 3), c = param({5, 2}, 4);
    const Tensor c_ref = copy_of(c);
    auto two = k.two_groups(a, c);
    auto one = k.reference(c_ref);
    CHECK(run(*two, {a, c}, 4)[1] == run(*one, {c_ref}, 4)[0]);
  }
}

TEST_CASE("group options are checked, and named options point a built-in to its typed ones",
          "[optim][groups][errors]") {
  optim::AdamW adamw({param({2}, 5)});
  CHECK_THROWS_WITH(adamw.add_param_group({param({2}, 6)}, {.beta1 = 1.5}), Contains("betas must be in [0, 1)"));
  CHECK_THROWS_WITH(adamw.add_param_group({param({2}, 7)}, {.lr = -1.0}), Contains("learning rate must be >= 0"));
  optim::Optimizer& base = adamw;
  CHECK_THROWS_WITH(base.add_param_group({param({2}, 8)}, optim::OptimizerOptions{{"weight_decay", 0.0}}),
                    Contains("typed options") && Contains("defaults().set_weight_decay(0.0)"));
  optim::Lion lion({param({2}, 9)});
  CHECK_THROWS_WITH(lion.add_param_group({param({2}, 10)}, {.beta2 = -0.1}), Contains("Lion: betas"));
  CHECK(adamw.param_groups().size() == 1);
  CHECK(lion.param_groups().size() == 1);
}

TEST_CASE("param_groups_for_weight_decay: matrices decay, biases and norm gains do not", "[optim][groups]") {
  nn::Linear fc(3, 4);
  nn::LayerNorm norm({4});
  std::vector<Tensor> params = fc.parameters();
  for (const Tensor& p : norm.parameters()) params.push_back(p);
  {
    // docs/libtorch.md, "Parameter groups".
    auto [decay, no_decay] = hg::optim::param_groups_for_weight_decay(params);
    hg::optim::AdamW opt(decay, {.lr = 3e-4, .weight_decay = 0.1});
    opt.add_param_group(no_decay, opt.defaults().set_weight_decay(0.0));
    CHECK(optim::detail::ParamGroupAccess::hyper(opt.param_groups()[1]).weight_decay == 0.0f);
    CHECK(opt.lr(1) == Approx(3e-4));
  }
  const auto [decay, no_decay] = optim::param_groups_for_weight_decay(params);
  REQUIRE(decay.size() == 1);
  CHECK(same(decay[0], fc.weight));
  REQUIRE(no_decay.size() == 3);
  CHECK(same(no_decay[0], fc.bias));
  CHECK(same(no_decay[1], norm.weight));
  CHECK(same(no_decay[2], norm.bias));
}

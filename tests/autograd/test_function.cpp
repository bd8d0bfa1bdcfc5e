// Custom functions (autograd/function.h): the docs/autograd.md example
// against finite differences in f64 and trained under amp-fp16 autocast (its
// f32 gradient for an f16 input converted by the engine, Note [Gradient
// metadata]), and the context's rules and errors.
#include <catch2/catch.hpp>

#include <any>
#include <cmath>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "kernels/ops.h"
#include "nn/layers.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;
using Catch::Contains;

namespace {

// docs/autograd.md, "Custom functions".
// log(cosh(x)), a smooth |x| (a robust regression loss), computed in f32 or wider.
struct LogCosh : hg::autograd::Function<LogCosh> {
  static hg::Tensor forward(hg::autograd::AutogradContext* ctx, const hg::Tensor& x) {
    ctx->save_for_backward({x});
    const hg::DType wide = hg::is_16bit_float(x.dtype()) ? hg::kF32 : x.dtype();
    const hg::Tensor a = hg::abs(x.to(wide));
    return (a + hg::log(hg::exp(a * -2.0) + 1.0) - std::log(2.0)).to(x.dtype());
  }
  static std::vector<hg::Tensor> backward(hg::autograd::AutogradContext* ctx, std::vector<hg::Tensor> grads) {
    const hg::Tensor x = ctx->get_saved_variables()[0];
    const hg::DType wide = hg::is_16bit_float(x.dtype()) ? hg::kF32 : x.dtype();
    // d/dx log(cosh(x)) = tanh(x). In f32 for an f16 x: the engine converts it to x's dtype.
    return {grads[0].to(wide) * hg::tanh(x.to(wide))};
  }
};

// Two tensors and a number; backward uses needs_input_grad and saved_data.
struct ScaledMul : autograd::Function<ScaledMul> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& a, const Tensor& b, double c) {
    ctx->save_for_backward({a, b});
    ctx->saved_data["c"] = c;
    return a * b * c;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const std::vector<Tensor> s = ctx->get_saved_variables();
    const double c = std::any_cast<double>(ctx->saved_data["c"]);
    return {ctx->needs_input_grad(0) ? grads[0] * s[1] * c : Tensor(),
            ctx->needs_input_grad(1) ? grads[0] * s[0] * c : Tensor(), Tensor()};
  }
};

struct WrongCount : autograd::Function<WrongCount> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) { return {g[0], g[0]}; }
};

struct WrongShape : autograd::Function<WrongShape> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) { return {g[0].sum()}; }
};

struct ArgMaxMask : autograd::Function<ArgMaxMask> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    Tensor mask = ops::binary_scalar(OpId::gt, x, 0.0).to(x.dtype());
    ctx->mark_non_differentiable({mask});
    return mask;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor>) { return {Tensor()}; }
};

struct DoubleInPlace : autograd::Function<DoubleInPlace> {
  static Tensor forward(autograd::AutogradContext* ctx, Tensor x) {
    ops::binary_scalar_(OpId::mul, x, 2.0);
    ctx->mark_dirty({x});
    return x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) { return {g[0] * 2.0}; }
};

struct Identity : autograd::Function<Identity> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) { return {g[0]}; }
};

}  // namespace

TEST_CASE("a custom function passes gradcheck in f64", "[autograd][function][gradcheck]") {
  const Tensor x = make_input({3, 5}, kF64, Domain::kAny, 31).requires_grad_(true);
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return LogCosh::apply(in[0]); }, {x}) == "");
  const Tensor a = make_input({2, 3}, kF64, Domain::kAny, 32).requires_grad_(true);
  const Tensor b = make_input({3}, kF64, Domain::kAny, 33).requires_grad_(true);
  CHECK(gradcheck(
            [](const std::vector<Tensor>& in) {
              return ScaledMul::apply(in[0], in[1].expand({2, 3}), 1.5);
            },
            {a, b}) == "");
  // The node is named after the function.
  CHECK(autograd::grad_fn_of(LogCosh::apply(x))->name().find("LogCosh") != std::string::npos);
}

TEST_CASE("a custom function's f32 gradient reaches an f16 input as f16, and it trains under amp-fp16",
          "[autograd][function][amp]") {
  const Tensor h = make_input({8}, kF16, Domain::kAny, 34).requires_grad_(true);
  hg::sum(LogCosh::apply(h)).backward();
  REQUIRE(h.grad().defined());
  CHECK(h.grad().dtype() == kF16);
  CHECK(values_of(h.grad()) == values_of(hg::tanh(h.detach().to(kF32)).to(kF16)));

  // y = fc(x) under Autocast(f16): fc runs in f16, LogCosh gets an f16 input.
  Generator gen(5);
  nn::Linear fc(4, 3, true, &gen);
  const Tensor x = randn({16, 4}, {}, &gen);
  const Tensor target = randn({16, 3}, {}, &gen);
  optim::SGD opt(fc.parameters(), {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 1024.0});
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 30; ++step) {
    Tensor loss;
    {
      amp::Autocast autocast(kF16);
      const Tensor y = fc.forward(x);
      CHECK(y.dtype() == kF16);
      loss = hg::mean(LogCosh::apply(y - target.to(kF16)).to(kF32));
    }
    opt.zero_grad();
    scaler.scale(loss).backward();
    CHECK(fc.weight.grad().dtype() == kF32);
    scaler.step(opt);
    scaler.update();
    (step == 0 ? first : last) = loss.item<float>();
  }
  CHECK(last < 0.8 * first);
}

TEST_CASE("the context: needs_input_grad, non-differentiable outputs, dirty inputs, aliases", "[autograd][function]") {
  const Tensor a = make_input({3}, kF32, Domain::kAny, 35).requires_grad_(true);
  const Tensor b = make_input({3}, kF32, Domain::kAny, 36);  // no gradient
  hg::sum(ScaledMul::apply(a, b, 2.0)).backward();
  CHECK(values_of(a.grad()) == values_of(b * 2.0));
  CHECK_FALSE(b.grad().defined());
  // Under no_grad nothing is recorded.
  {
    NoGradGuard no_grad;
    CHECK_FALSE(ScaledMul::apply(a, b, 2.0).requires_grad());
  }
  // A mask is returned without a gradient.
  CHECK_FALSE(ArgMaxMask::apply(a).requires_grad());
  // An input changed in place and returned: it takes the function's history.
  const Tensor leaf = make_input({3}, kF32, Domain::kAny, 37).requires_grad_(true);
  Tensor y = leaf * 3.0;  // saves nothing (exp would save y, and the write would break its backward)
  const std::vector<double> before = values_of(y);
  const Tensor z = DoubleInPlace::apply(y);
  CHECK(same(z, y));
  CHECK(values_of(y)[0] == 2.0 * before[0]);
  hg::sum(z).backward();
  CHECK(values_of(leaf.grad()) == std::vector<double>(3, 6.0));
  CHECK_THROWS_WITH(DoubleInPlace::apply(leaf), Contains("leaf tensor that requires grad was changed in place"));
  // An input returned unchanged is an alias: the input keeps its own history (leaf stays a leaf).
  const Tensor alias = Identity::apply(leaf);
  CHECK(leaf.is_leaf());
  CHECK_FALSE(alias.is_leaf());
}

TEST_CASE("a custom function's mistakes are errors naming it", "[autograd][function][errors]") {
  const Tensor x = make_input({3}, kF32, Domain::kAny, 38).requires_grad_(true);
  CHECK_THROWS_WITH(hg::sum(WrongCount::apply(x)).backward(),
                    Contains("WrongCount::backward returned 2 gradients, but forward has 1 arguments"));
  CHECK_THROWS_WITH(hg::sum(WrongShape::apply(x)).backward(), Contains("backward of") && Contains("WrongShape") &&
                                                                  Contains("has shape []") &&
                                                                  Contains("input has shape [3]"));
  // A saved tensor changed in place before backward.
  Tensor y = hg::exp(x);
  const Tensor out = LogCosh::apply(y);
  {
    NoGradGuard no_grad;
    y.fill_(0.0);
  }
  CHECK_THROWS_WITH(hg::sum(out).backward(), Contains("modified by an in-place operation") && Contains("LogCosh"));
}

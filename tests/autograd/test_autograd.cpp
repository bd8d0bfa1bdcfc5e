// The autograd engine and the differentiable op API: gradcheck (f64, central
// differences) for every differentiable op, CUDA gradients against the CPU
// backend's, engine semantics, and the errors misuse must raise.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "kernels/ops.h"
#include "tests/kernels/test_support.h"

#if defined(HG_CUDA_EMU)
#include <hg_emu_launch.h>
#endif

using namespace hg;
using namespace hg::test;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradCase {
  std::string name;
  std::vector<Shape> shapes;
  Fn fn;
  Domain domain = Domain::kAny;
};

// The gradcheck registry: every differentiable op, with broadcasting and
// non-contiguous inputs where they apply.
std::vector<GradCase> grad_cases() {
  using V = const std::vector<Tensor>&;
  std::vector<GradCase> c;
  c.push_back({"neg", {{3, 4}}, [](V x) { return -x[0]; }});
  c.push_back({"exp", {{3, 4}}, [](V x) { return hg::exp(x[0]); }});
  c.push_back({"log", {{3, 4}}, [](V x) { return hg::log(x[0]); }, Domain::kPositive});
  c.push_back({"sqrt", {{3, 4}}, [](V x) { return hg::sqrt(x[0]); }, Domain::kPositive});
  c.push_back({"rsqrt", {{3, 4}}, [](V x) { return hg::rsqrt(x[0]); }, Domain::kPositive});
  c.push_back({"abs", {{3, 4}}, [](V x) { return hg::abs(x[0]); }});
  c.push_back({"tanh", {{3, 4}}, [](V x) { return hg::tanh(x[0]); }});
  c.push_back({"sigmoid", {{3, 4}}, [](V x) { return hg::sigmoid(x[0]); }});
  c.push_back({"relu", {{3, 4}}, [](V x) { return hg::relu(x[0]); }});
  c.push_back({"gelu", {{3, 4}}, [](V x) { return hg::gelu(x[0]); }});
  c.push_back({"gelu_tanh", {{3, 4}}, [](V x) { return hg::gelu(x[0], true); }});
  c.push_back({"silu", {{3, 4}}, [](V x) { return hg::silu(x[0]); }});
  c.push_back({"pow 2.5", {{3, 4}}, [](V x) { return hg::pow(x[0], 2.5); }, Domain::kPositive});
  c.push_back({"pow 3", {{3, 4}}, [](V x) { return hg::pow(x[0], 3.0); }});
  c.push_back({"add broadcast", {{3, 4}, {4}}, [](V x) { return x[0] + x[1]; }});
  c.push_back({"sub broadcast", {{3, 1}, {1, 4}}, [](V x) { return x[0] - x[1]; }});
  c.push_back({"mul broadcast", {{2, 3, 4}, {3, 1}}, [](V x) { return x[0] * x[1]; }});
  c.push_back({"div", {{3, 4}, {3, 4}}, [](V x) { return x[0] / x[1]; }, Domain::kPositive});
  c.push_back({"maximum", {{3, 4}, {4}}, [](V x) { return hg::maximum(x[0], x[1]); }});
  c.push_back({"minimum", {{3, 4}, {3, 4}}, [](V x) { return hg::minimum(x[0], x[1]); }});
  c.push_back({"scalar ops", {{3, 4}}, [](V x) { return (2.0 - x[0] * 3.0 + 1.5) / 4.0; }});
  c.push_back({"where", {{3, 4}, {3, 4}},
               [](V x) { return hg::where(ops::binary_scalar(OpId::gt, x[0], 0.0), x[0], x[1]); }});
  c.push_back({"sum all", {{3, 4}}, [](V x) { return hg::sum(x[0]); }});
  c.push_back({"sum dims keepdim", {{2, 3, 4}}, [](V x) { return hg::sum(x[0], {0, 2}, true); }});
  c.push_back({"mean dim", {{2, 3, 4}}, [](V x) { return hg::mean(x[0], {1}); }});
  c.push_back({"max dim", {{3, 5}}, [](V x) { return hg::max(x[0], {1}); }});
  c.push_back({"min all", {{3, 5}}, [](V x) { return hg::min(x[0]); }});
  c.push_back({"norm", {{3, 5}}, [](V x) { return hg::norm(x[0], {1}); }});
  c.push_back({"matmul", {{3, 5}, {5, 2}}, [](V x) { return hg::matmul(x[0], x[1]); }});
  c.push_back({"matmul transposed views", {{5, 3}, {2, 5}},
               [](V x) { return hg::matmul(hg::transpose(x[0], 0, 1), hg::transpose(x[1], 0, 1)); }});
  c.push_back({"batched matmul, shared b", {{2, 3, 5}, {5, 4}}, [](V x) { return hg::matmul(x[0], x[1]); }});
  c.push_back({"linear 3-D with bias", {{2, 3, 5}, {4, 5}, {4}}, [](V x) { return hg::linear(x[0], x[1], x[2]); }});
  c.push_back({"softmax", {{3, 7}}, [](V x) { return hg::softmax(x[0]); }});
  c.push_back({"log_softmax", {{2, 3, 7}}, [](V x) { return hg::log_softmax(x[0]); }});
  c.push_back({"cross_entropy", {{4, 6}}, [](V x) {
                 return hg::cross_entropy(x[0], from_vector(std::vector<int64_t>{0, 5, 2, 2}).to(x[0].device()));
               }});
  c.push_back({"cross_entropy ignore + smoothing", {{4, 6}}, [](V x) {
                 return hg::cross_entropy(x[0], from_vector(std::vector<int64_t>{1, -100, 3, 0}).to(x[0].device()), -100, 0.1);
               }});
  c.push_back({"view", {{3, 4}}, [](V x) { return hg::exp(hg::view(x[0], {2, 6})); }});
  c.push_back({"reshape of transpose", {{3, 4}}, [](V x) { return hg::reshape(hg::transpose(x[0], 0, 1), {12}) * 2.0; }});
  c.push_back({"permute", {{2, 3, 4}}, [](V x) { return hg::permute(x[0], {2, 0, 1}) * hg::permute(x[0], {2, 0, 1}); }});
  c.push_back({"slice step", {{5, 4}}, [](V x) { return hg::exp(hg::slice(x[0], 0, 1, 5, 2)); }});
  c.push_back({"narrow", {{5, 4}}, [](V x) { return hg::narrow(x[0], 1, 1, 2) * 3.0; }});
  c.push_back({"select", {{5, 4}}, [](V x) { return hg::tanh(hg::select(x[0], 0, -1)); }});
  c.push_back({"expand", {{3, 1}}, [](V x) { return hg::expand(x[0], {2, 3, 4}) * hg::expand(x[0], {2, 3, 4}); }});
  c.push_back({"squeeze/unsqueeze/flatten", {{3, 1, 4}}, [](V x) {
                 return hg::flatten(hg::unsqueeze(hg::squeeze(x[0], 1), 0)) * 2.0;
               }});
  // split / chunk (Note [Split backward]): every piece used, one unused, uneven
  // and empty pieces, the fused-qkv shape (pieces along the last dim).
  c.push_back({"split qkv, all pieces", {{2, 3, 12}}, [](V x) {
                 const std::vector<Tensor> p = hg::split(x[0], 4, 2);
                 return hg::matmul(p[0], hg::transpose(p[1], 1, 2)) * 0.5 + hg::sum(p[2] * p[2], {2}, true);
               }});
  c.push_back({"chunk, middle piece unused", {{3, 6}}, [](V x) {
                 const std::vector<Tensor> p = hg::chunk(x[0], 3, 1);
                 return p[0] * p[2] + hg::exp(p[2]);
               }});
  c.push_back({"split_with_sizes uneven, an empty piece", {{7, 3}}, [](V x) {
                 const std::vector<Tensor> p = hg::split_with_sizes(x[0], {2, 0, 4, 1}, 0);
                 return hg::cat({p[3] * 3.0, p[1], hg::tanh(p[0]), p[2]}, 0);
               }});
  c.push_back({"split of a transposed view", {{4, 5}}, [](V x) {
                 const std::vector<Tensor> p = hg::split(hg::transpose(x[0], 0, 1), 2, 1);
                 return p[0] * p[1];
               }});
  c.push_back({"contiguous", {{3, 4}}, [](V x) { return hg::exp(hg::contiguous(hg::transpose(x[0], 0, 1))); }});
  c.push_back({"composite", {{3, 4}, {4}}, [](V x) {
                 const Tensor h = hg::relu(hg::linear(x[0], hg::expand(hg::unsqueeze(x[1], 0), {2, 4}))) ;
                 return hg::sum(hg::log_softmax(h) * h);
               }});
  return c;
}

std::vector<Tensor> make_inputs(const GradCase& c, DType dtype, Device device, uint64_t seed) {
  std::vector<Tensor> in;
  for (const Shape& s : c.shapes) {
    Tensor t = make_input(s, dtype, c.domain, seed++).to(device);
    t.requires_grad_(true);
    in.push_back(t);
  }
  return in;
}

}  // namespace

TEST_CASE("gradcheck passes for every differentiable op (f64, cpu)", "[autograd][gradcheck]") {
  for (const GradCase& c : grad_cases()) {
    const std::vector<Tensor> inputs = make_inputs(c, kF64, Device::cpu(), 11);
    INFO(c.name);
    CHECK(gradcheck(c.fn, inputs) == "");
  }
}

TEST_CASE("CUDA gradients match the CPU backend's (f32)", "[autograd][cuda]") {
#if defined(HG_WITH_CUDA)
  for (const GradCase& c : grad_cases()) {
    std::vector<std::vector<double>> grads[2];
    int slot = 0;
    for (Device dev : {Device::cpu(), Device::cuda()}) {
      const std::vector<Tensor> inputs = make_inputs(c, kF32, dev, 11);
      Tensor y = c.fn(inputs);
      y.backward(ones(y.sizes(), {.device = dev}));
      for (const Tensor& t : inputs) grads[slot].push_back(values_of(t.grad()));
      ++slot;
    }
    INFO(c.name);
    for (size_t i = 0; i < grads[0].size(); ++i) {
      CHECK(compare_values(grads[1][i], grads[0][i], tolerance_for(kF32, OpKind::kReduction)) == "");
    }
  }
#else
  SUCCEED("cpu build");
#endif
}

TEST_CASE("the engine accumulates, retains and frees like PyTorch", "[autograd][engine]") {
  Tensor x = from_vector(std::vector<double>{1.0, 2.0, 3.0}).requires_grad_(true);
  Tensor y = hg::sum(x * x);
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  CHECK(x.is_leaf());
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(values_of(x.grad()) == std::vector<double>{2, 4, 6});
  y.backward();  // accumulates into .grad
  CHECK(values_of(x.grad()) == std::vector<double>{4, 8, 12});
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("backward through the graph a second time"));

  // A diamond: x feeds two paths that meet again.
  Tensor a = from_vector(std::vector<double>{2.0}).requires_grad_(true);
  Tensor b = hg::exp(a);
  Tensor out = b * b + b;  // d/da = 2 e^{2a} + e^{a}
  out.backward();
  CHECK(a.grad().item<double>() == Approx(2 * std::exp(4.0) + std::exp(2.0)).epsilon(1e-12));
}

// Note [Split backward]: the pieces' gradients land in one buffer; pieces
// without a gradient leave zeros; passes that reuse the graph start afresh.
TEST_CASE("split's backward assembles the input gradient in one buffer", "[autograd][engine][split]") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}).requires_grad_(true);
  std::vector<Tensor> p = hg::split(x, 1, 1);
  REQUIRE(p.size() == 3);
  // only the last piece has a gradient: the others' slices are zero
  Tensor y = hg::sum(p[2] * 2.0);
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(values_of(x.grad()) == std::vector<double>{0, 0, 2, 0, 0, 2, 0, 0, 2});
  // a second pass over the same graph accumulates (a fresh buffer, not the first)
  y.backward();
  CHECK(values_of(x.grad()) == std::vector<double>{0, 0, 4, 0, 0, 4, 0, 0, 4});
  // two pieces, then a pass where a different piece is used: no stale slices
  x.set_grad(Tensor());
  Tensor z = hg::sum(p[0] * 3.0) + hg::sum(p[1]);
  z.backward();
  CHECK(values_of(x.grad()) == std::vector<double>{3, 1, 0, 3, 1, 0, 3, 1, 0});
  // a new split of another tensor, one middle piece used
  Tensor w = hg::ones({3, 3}, {.dtype = kF64}).requires_grad_(true);
  std::vector<Tensor> q = hg::split(w, 1, 0);
  Tensor good = hg::sum(q[1] * 5.0);
  good.backward();
  CHECK(values_of(w.grad()) == std::vector<double>{0, 0, 0, 5, 5, 5, 0, 0, 0});
  // no grad mode: plain views, nothing recorded
  {
    NoGradGuard guard;
    for (const Tensor& piece : hg::split(x, 2, 0)) CHECK_FALSE(piece.requires_grad());
  }
}

#if defined(HG_CUDA_EMU)
TEST_CASE("split's backward launches one copy per piece (cuda-emu launch counter)", "[autograd][cuda][split]") {
  // [B, T, 3C] -> q, k, v along the last dim, as a fused qkv projection. The
  // seed gradient flows through cat's backward (narrow views, no kernels) to
  // the pieces; x is a leaf, whose first gradient is the assembled buffer
  // (Note [Stealing the incoming gradient]), so what launches is split's.
  Tensor x = make_input({2, 5, 12}, kF32, Domain::kAny, 3).to(Device::cuda()).requires_grad_(true);
  const Tensor seed = make_input({2, 5, 12}, kF32, Domain::kAny, 4).to(Device::cuda());
  {
    std::vector<Tensor> p = hg::split(x, 4, 2);
    Tensor y = hg::cat({p[0], p[1], p[2]}, 2);
    const uint64_t before = hg::emu::launch_count();
    y.backward(seed);
    CHECK(hg::emu::launch_count() - before == 3);  // three slice copies; no zero fill, no add
    CHECK(values_of(x.grad()) == values_of(seed));
  }
  x.set_grad(Tensor());
  {
    std::vector<Tensor> p = hg::split(x, 4, 2);
    Tensor y = hg::cat({p[0], p[2]}, 2);
    const uint64_t before = hg::emu::launch_count();
    y.backward(seed.narrow(2, 0, 8));
    CHECK(hg::emu::launch_count() - before == 3);  // two slice copies and the middle slice's zero fill
    std::vector<double> want = values_of(seed);
    const std::vector<double> s = values_of(seed);
    for (size_t i = 0; i < want.size(); ++i) {
      const size_t row = i / 12, col = i % 12;
      want[i] = col < 4 ? s[row * 12 + col] : (col < 8 ? 0.0 : s[row * 12 + col - 4]);
    }
    CHECK(values_of(x.grad()) == want);
  }
}
#endif

// Note [Stealing the incoming gradient]: a leaf's first gradient takes the
// incoming buffer only when nothing else can see it.
TEST_CASE("a leaf's gradient never aliases another tensor", "[autograd][engine]") {
  const auto distinct = [](const Tensor& a, const Tensor& b) { return !a.shares_storage_with(b); };
  // add hands one incoming gradient to both leaves, and the caller holds it.
  Tensor a = from_vector(std::vector<float>{1, 2, 3}, {3}).requires_grad_(true);
  Tensor b = from_vector(std::vector<float>{4, 5, 6}, {3}).requires_grad_(true);
  const Tensor g = from_vector(std::vector<float>{1, 1, 1}, {3});
  hg::add(a, b).backward(g);
  CHECK(distinct(a.grad(), b.grad()));
  CHECK(distinct(a.grad(), g));
  CHECK(distinct(b.grad(), g));
  a.grad().fill_(7.0);
  CHECK(values_of(b.grad()) == std::vector<double>{1, 1, 1});
  CHECK(values_of(g) == std::vector<double>{1, 1, 1});
  // A leaf used directly as the root: the seed belongs to the caller.
  Tensor c = from_vector(std::vector<float>{1, 2}, {2}).requires_grad_(true);
  const Tensor seed = from_vector(std::vector<float>{3, 4}, {2});
  c.backward(seed);
  CHECK(distinct(c.grad(), seed));
  // A matmul weight's gradient (a fresh GEMM output) is taken without a copy,
  // and is correct; a second backward accumulates into it.
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor w = from_vector(std::vector<float>{1, 0, 0, 1}, {2, 2}).requires_grad_(true);
  hg::matmul(x, w).sum().backward();
  CHECK(values_of(w.grad()) == std::vector<double>{4, 4, 6, 6});
  hg::matmul(x, w).sum().backward();
  CHECK(values_of(w.grad()) == std::vector<double>{8, 8, 12, 12});
}

TEST_CASE("no_grad, detach and requires_grad control recording", "[autograd][engine]") {
  Tensor x = ones({2}).requires_grad_(true);
  {
    NoGradGuard guard;
    CHECK_FALSE(is_grad_enabled());
    CHECK_FALSE(hg::exp(x).requires_grad());
  }
  CHECK(is_grad_enabled());
  Tensor d = hg::exp(x).detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK_FALSE((d * 2.0).requires_grad());
  CHECK_THROWS_WITH(ones({2}, {.dtype = kI64}).requires_grad_(true), Catch::Contains("floating"));
}

TEST_CASE("misuse gives clear errors", "[autograd][errors]") {
  Tensor x = ones({3}).requires_grad_(true);
  // In-place change of a saved tensor.
  Tensor y = hg::exp(x);
  Tensor z = hg::sum(y * y);  // mul saves y
  ops::binary_scalar_(OpId::add, y, 1.0);
  CHECK_THROWS_WITH(z.backward(), Catch::Contains("modified by an in-place operation") && Catch::Contains("mul"));
  // Backward on a tensor that needs no grad.
  CHECK_THROWS_WITH(ones({1}).backward(), Catch::Contains("does not require grad"));
  // Non-scalar without a grad.
  CHECK_THROWS_WITH(hg::exp(x).backward(), Catch::Contains("one-element"));
  CHECK_THROWS_WITH(hg::exp(x).backward(ones({2})), Catch::Contains("grad has shape [2]"));
}

TEST_CASE("a 10,000-op chain neither overflows the stack forward, backward nor on release", "[autograd][engine]") {
  Tensor x = from_vector(std::vector<float>{1.0f}).requires_grad_(true);
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = y * 1.0001;
  y.backward();
  CHECK(x.grad().item<float>() == Approx(std::pow(1.0001, 10000)).epsilon(1e-3));
  y = Tensor();  // drops the whole graph
  SUCCEED();
}

TEST_CASE("fp16 leaves accumulate their gradient in fp16", "[autograd][engine]") {
  for (Device dev : test_devices()) {
    Tensor w = full({4}, 1.0, {.dtype = kF16, .device = dev}).requires_grad_(true);
    for (int i = 0; i < 3; ++i) hg::sum(w * 0.5).backward();
    CHECK(w.grad().dtype() == kF16);
    CHECK(values_of(w.grad()) == std::vector<double>{1.5, 1.5, 1.5, 1.5});
  }
}

// Autocast (autograd/autocast.h): output dtypes per policy class, bitwise
// equality with casting by hand, gradients of fp32 leaves, nesting, the cast
// cache, banned ops, untouched f64/integer inputs, Module::to with a filter,
// and the hardware report. On every device.
#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/layers.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;

namespace {

std::vector<double> bits_of(const Tensor& t) { return values_of(t.detach().cpu().to(kF64)); }

Tensor input(const Shape& shape, DType dt, Device dev, uint64_t seed) {
  return make_input(shape, dt, Domain::kAny, seed).to(dev);
}

}  // namespace

TEST_CASE("autocast: output dtypes for every policy class", "[amp][autocast]") {
  for (Device dev : test_devices()) {
    for (DType half : {kF16, kBF16}) {
      INFO(label(dev, half, ""));
      const Tensor a = input({4, 5}, kF32, dev, 1), b = input({5, 3}, kF32, dev, 2);
      const Tensor h = input({4, 5}, half, dev, 3);
      amp::Autocast autocast(half);
      CHECK(matmul(a, b).dtype() == half);                              // lower
      CHECK(linear(a, b.t(), input({3}, kF32, dev, 4)).dtype() == half);  // lower, bias too
      CHECK(exp(h).dtype() == kF32);                                    // fp32
      CHECK(softmax(h).dtype() == kF32);
      CHECK(sum(h).dtype() == kF32);
      CHECK(add(h, a).dtype() == kF32);  // promote: widest
      CHECK(add(h, h).dtype() == half);
      CHECK(relu(h).dtype() == half);  // passthrough
      CHECK(relu(a).dtype() == kF32);
    }
  }
}

TEST_CASE("autocast: per-device defaults, nesting and disabled regions restore state", "[amp][autocast]") {
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
  {
    amp::Autocast defaults;
    CHECK(amp::autocast_dtype(DeviceType::CPU) == kBF16);
    CHECK(amp::autocast_dtype(DeviceType::CUDA) == kF16);
    {
      amp::Autocast inner(kF16, /*enabled=*/false);
      CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
      CHECK_FALSE(amp::autocast_active());
      const Tensor a = input({2, 2}, kF32, Device::cpu(), 5);
      CHECK(matmul(a, a).dtype() == kF32);
      {
        amp::Autocast cpu_only(DeviceType::CPU, kF16);
        CHECK(amp::is_autocast_enabled(DeviceType::CPU));
        CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CUDA));
        CHECK(matmul(a, a).dtype() == kF16);
      }
      CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
    }
    CHECK(amp::is_autocast_enabled(DeviceType::CPU));
    CHECK(amp::autocast_dtype(DeviceType::CPU) == kBF16);
  }
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CUDA));
  CHECK_THROWS_WITH(amp::Autocast(kF32), Contains("f16 or bf16"));
}

TEST_CASE("autocast: bitwise equal to casting by hand, forward and backward", "[amp][autocast]") {
  for (Device dev : test_devices()) {
    for (DType half : {kF16, kBF16}) {
      INFO(label(dev, half, ""));
      const Tensor x = input({6, 5}, kF32, dev, 6);
      const Tensor w1 = input({4, 5}, kF32, dev, 7).requires_grad_(true);
      const Tensor w2 = input({4, 5}, kF32, dev, 7).requires_grad_(true);
      const Tensor target = from_vector(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {6}).to(dev);
      Tensor auto_loss;
      {
        amp::Autocast autocast(half);
        auto_loss = cross_entropy(linear(x, w1), target);
      }
      const Tensor logits = linear(x.to(half), to(w2, half));
      const Tensor hand_loss = cross_entropy(to(logits, kF32), target);
      CHECK(auto_loss.dtype() == kF32);
      CHECK(bits_of(auto_loss) == bits_of(hand_loss));
      auto_loss.backward();
      hand_loss.backward();
      CHECK(w1.grad().dtype() == kF32);  // an fp32 leaf gets an fp32 gradient
      CHECK(bits_of(w1.grad()) == bits_of(w2.grad()));
    }
  }
}

TEST_CASE("autocast: f64 and integer inputs are untouched; banned ops raise", "[amp][autocast]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF64, ""));
    amp::Autocast autocast(kF16);
    const Tensor d = input({3, 3}, kF64, dev, 8);
    CHECK(matmul(d, d).dtype() == kF64);
    CHECK(exp(d).dtype() == kF64);
    CHECK(add(d, input({3, 3}, kF16, dev, 9)).dtype() == kF64);
    const Tensor i = zeros({3}, {.dtype = kI64, .device = dev});
    CHECK(add(i, i).dtype() == kI64);
    {
      amp::PolicyOverride ban(OpId::exp, AmpClass::banned);
      CHECK_THROWS_WITH(exp(input({3}, kF32, dev, 10)), Contains("exp is banned in autocast regions"));
      amp::Autocast off(kF16, false);
      CHECK(exp(input({3}, kF32, dev, 10)).dtype() == kF32);  // outside autocast it runs
    }
    amp::PolicyOverride relu_fp32(OpId::relu, AmpClass::fp32);  // overriding a passthrough op
    CHECK(relu(input({3}, kF16, dev, 11)).dtype() == kF32);
  }
}

TEST_CASE("autocast: the cast cache casts each weight once per region", "[amp][autocast][cache]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF16, ""));
    auto layer = std::make_shared<nn::Linear>(5, 4);
    layer->to(dev);
    const Tensor x = input({3, 5}, kF32, dev, 12);
    const amp::CastCacheStats start = amp::cast_cache_stats();
    {
      amp::Autocast autocast(kF16);
      Tensor loss = sum(layer->forward(x));
      loss = add(loss, sum(layer->forward(x)));
      amp::CastCacheStats s = amp::cast_cache_stats();
      CHECK(s.casts - start.casts == 2);  // weight and bias, once each
      CHECK(s.hits - start.hits == 2);
      CHECK(s.entries == 2);
      loss.backward();
      CHECK(layer->weight.grad().dtype() == kF32);
      {  // an in-place update (version counter) invalidates the entry
        NoGradGuard no_grad;
        Tensor w = layer->weight;
        w.fill_(0.5);
      }
      (void)layer->forward(x);
      CHECK(amp::cast_cache_stats().casts - start.casts == 3);
      {  // inner regions share the outermost region's cache
        amp::Autocast inner(kF16);
        (void)layer->forward(x);
        CHECK(amp::cast_cache_stats().casts - start.casts == 3);
      }
      CHECK(amp::cast_cache_stats().entries == 2);
    }
    CHECK(amp::cast_cache_stats().entries == 0);  // cleared on the outermost exit
  }
}

TEST_CASE("autocast: no-grad forwards neither grow the cache nor poison it (pytorch#112583)", "[amp][autocast][cache]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF16, ""));
    auto layer = std::make_shared<nn::Linear>(5, 4);
    layer->to(dev);
    const Tensor x = input({3, 5}, kF32, dev, 13);
    amp::Autocast autocast(kF16);
    for (int i = 0; i < 5; ++i) {
      NoGradGuard no_grad;
      (void)layer->forward(x);
      CHECK(amp::cast_cache_stats().entries == 0);
    }
    // A forward with grad in the same region must reach the weights.
    sum(layer->forward(x)).backward();
    REQUIRE(layer->weight.grad().defined());
    CHECK(layer->weight.grad().dtype() == kF32);
  }
}

TEST_CASE("Module::to(dtype, keep): chosen submodules stay fp32", "[amp][module]") {
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 4), std::make_shared<nn::Linear>(4, 2)});
  const auto names = model->named_children();
  REQUIRE(names.size() == 2);
  const std::string keep_name = names[1].first;
  model->to(kF16, [&](const std::string& name, const nn::Module&) { return name == keep_name; });
  for (const auto& [name, p] : model->named_parameters()) {
    INFO(name);
    CHECK(p.dtype() == (name.rfind(keep_name + ".", 0) == 0 ? kF32 : kF16));
  }
  // The optimizer keeps fp32 masters for the 16-bit parameters only.
  optim::AdamW opt(model->parameters(), {});
  size_t masters = 0;
  for (Tensor p : model->parameters()) {
    p.set_grad(zeros_like(p));
  }
  opt.step();
  for (const auto& [key, t] : opt.state_dict()) masters += key.rfind("master.", 0) == 0 ? 1 : 0;
  CHECK(masters == 2);
}

TEST_CASE("amp hardware report and support", "[amp][hardware]") {
  CHECK(amp::supported(Device::cpu(), kF16));
  CHECK(amp::supported(Device::cpu(), kBF16));
  CHECK_FALSE(amp::supported(Device::cpu(), kI64));
  CHECK_THAT(amp::capability_report(Device::cpu()), Contains("F16C") && Contains("widen"));
#if defined(HG_WITH_CUDA)
  if (cuda::is_available()) {
    CHECK_THAT(amp::capability_report(Device::cuda(0)), Contains("compute capability"));
  }
#endif
}

TEST_CASE("autocast + GradScaler: an fp32 model trains with f16 matmuls", "[amp][autocast][scaler]") {
  for (Device dev : test_devices()) {
    INFO(label(dev, kF16, ""));
    auto layer = std::make_shared<nn::Linear>(8, 3);
    layer->to(dev);
    optim::SGD opt(layer->parameters(), {.lr = 0.5});
    amp::GradScaler scaler;
    const Tensor x = input({16, 8}, kF32, dev, 14);
    const Tensor y = from_vector(std::vector<int64_t>(16, 1), {16}).to(dev);
    double first = 0.0, last = 0.0;
    for (int k = 0; k < 20; ++k) {
      opt.zero_grad();
      Tensor loss;
      {
        amp::Autocast autocast(kF16);
        loss = cross_entropy(layer->forward(x), y);
      }
      if (k == 0) first = loss.cpu().item<float>();
      last = loss.cpu().item<float>();
      scaler.scale(loss).backward();
      scaler.step(opt);
      scaler.update();
    }
    CHECK(layer->weight.dtype() == kF32);
    CHECK(last < first * 0.5);
  }
}

// Options structs: designated initialisers (declaration order) and the
// chainable set_* builders (any order) give the same options, and the builders
// reach the objects they configure.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>

#include "amp/grad_scaler.h"
#include "autograd/functions_conv.h"
#include "core/tensor.h"
#include "data/dataloader.h"
#include "distributed/ddp.h"
#include "distributed/process_group.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

using namespace hg;

namespace {

// Evaluated by the compiler: the setters are constexpr and chain by reference.
constexpr optim::AdamWOptions kBuilt = optim::AdamWOptions(3e-4).set_weight_decay(0.1).set_betas(0.9, 0.95);
static_assert(kBuilt.lr == 3e-4 && kBuilt.weight_decay == 0.1 && kBuilt.beta2 == 0.95 && kBuilt.eps == 1e-8);

}  // namespace

TEST_CASE("options builders equal designated initialisers, in any order", "[options]") {
  // AdamWOptions(lr) is C++20 parenthesised aggregate initialisation: the first field.
  const auto a = optim::AdamWOptions(1e-3).set_weight_decay(0.1).set_eps(1e-6).set_beta2(0.95);
  const auto b = optim::AdamWOptions{}.set_beta2(0.95).set_eps(1e-6).set_lr(1e-3).set_weight_decay(0.1);
  const optim::AdamWOptions d{.lr = 1e-3, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
  for (const auto* o : {&a, &b}) {
    CHECK(o->lr == d.lr);
    CHECK(o->beta1 == d.beta1);
    CHECK(o->beta2 == d.beta2);
    CHECK(o->eps == d.eps);
    CHECK(o->weight_decay == d.weight_decay);
  }

  const auto sgd = optim::SGDOptions(0.1).set_nesterov(true).set_momentum(0.9);
  CHECK(sgd.lr == 0.1);
  CHECK(sgd.momentum == 0.9);
  CHECK(sgd.nesterov);
  CHECK(sgd.dampening == 0.0);

  const auto adam = optim::AdamOptions{}.set_weight_decay(0.01).set_betas(0.8, 0.9);
  CHECK(adam.lr == 1e-3);
  CHECK(adam.beta1 == 0.8);
  CHECK(adam.beta2 == 0.9);
  CHECK(adam.weight_decay == 0.01);

  const auto conv = Conv2dOptions{}.set_groups(4).set_padding(1).set_stride({2, 1});
  CHECK(conv.stride == std::array<int64_t, 2>{2, 1});
  CHECK(conv.padding == std::array<int64_t, 2>{1, 1});
  CHECK(conv.dilation == std::array<int64_t, 2>{1, 1});
  CHECK(conv.groups == 4);

  const auto loader = data::DataLoaderOptions{}.set_seed(7).set_shuffle(true).set_batch_size(32);
  CHECK(loader.batch_size == 32);
  CHECK(loader.shuffle);
  CHECK(loader.seed == 7);

  const auto tensor = TensorOptions{}.set_requires_grad(true).set_dtype(kF16);
  CHECK(tensor.dtype == kF16);
  CHECK(tensor.requires_grad);
  CHECK(tensor.device == Device::cpu());

  const auto scaler = amp::GradScalerOptions{}.set_growth_interval(100).set_init_scale(1024.0);
  CHECK(scaler.init_scale == 1024.0);
  CHECK(scaler.growth_interval == 100);
  CHECK(scaler.backoff_factor == 0.5);

  const auto cosine = optim::WarmupCosineOptions{}.set_total_steps(100).set_warmup_steps(10);
  CHECK(cosine.warmup_steps == 10);
  CHECK(cosine.total_steps == 100);

  const auto init = distributed::InitOptions{}.set_world_size(2).set_backend("gloo").set_rank(1);
  CHECK(init.backend == "gloo");
  CHECK(init.rank == 1);
  CHECK(init.world_size == 2);
  CHECK(init.init_method == "env://");

  const auto ddp = distributed::DDPOptions{}.set_find_unused_parameters(true);
  CHECK(ddp.find_unused_parameters);
  CHECK(ddp.broadcast_buffers);
}

TEST_CASE("builder-made options reach the optimizer and the scaler", "[options]") {
  Tensor w = zeros({3}, TensorOptions{}.set_requires_grad(true));
  CHECK(w.requires_grad());
  optim::AdamW opt({w}, optim::AdamWOptions(0.02).set_weight_decay(0.25).set_betas(0.5, 0.75));
  REQUIRE(opt.param_groups().size() == 1);
  const OptimizerHyper& h = optim::detail::ParamGroupAccess::hyper(opt.param_groups()[0]);
  CHECK(opt.lr() == Approx(0.02));
  CHECK(h.weight_decay == 0.25f);
  CHECK(h.beta1 == 0.5f);
  CHECK(h.beta2 == 0.75f);

  amp::GradScaler scaler(amp::GradScalerOptions{}.set_enabled(false).set_init_scale(8.0));
  CHECK_FALSE(scaler.options().enabled);
  CHECK(scaler.options().init_scale == 8.0);
}

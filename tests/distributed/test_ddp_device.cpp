// distributed/ in one process: DistributedDataParallel and sync_grad_scaler
// over a fake in-process group of world size 2 whose "other rank" holds the
// same gradients. On CUDA the fake works like the nccl backend (Note [NCCL
// process group]): each collective runs on its own stream after an event
// recorded on the caller's stream, and wait() only makes the current stream
// wait on the collective's event. The test asserts that DDP's bucketing,
// averaging and write-back and the cross-rank GradScaler add no host sync and
// no device-to-host copy (the runtime's counters), and that the gradients are
// those of plain single-process training.
#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "distributed/ddp.h"
#include "nn/functional.h"
#include "nn/layers.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;
namespace hd = hg::distributed;

namespace {

class FakeWork final : public hd::Work {
 public:
#if defined(HG_WITH_CUDA)
  cuda::Event done{false};
  void wait() override {
    if (done.is_recorded()) cuda::current_stream(done.device()).wait(done);
  }
  bool is_completed() const override { return done.query(); }
#else
  void wait() override {}
  bool is_completed() const override { return true; }
#endif
  std::vector<Tensor> keep;
};

// World size 2, this is rank 0; rank 1 contributes exactly what rank 0 has.
class FakeGroup final : public hd::ProcessGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend() const override { return "fake"; }
  int64_t collectives = 0;

  hd::WorkPtr all_reduce(Tensor& t, hd::ReduceOp op) override {
    return run({t}, [t, op] {
      NoGradGuard no_grad;
      if (op == hd::ReduceOp::kSum) const_cast<Tensor&>(t).copy_(mul(t, 2.0));
      // avg, max, min of two equal tensors: t itself.
    });
  }
  hd::WorkPtr broadcast(Tensor& t, int) override {
    return run({t}, [] {});
  }
  hd::WorkPtr all_gather(Tensor&, const Tensor&) override { HG_FAIL("fake group: no all_gather"); }
  hd::WorkPtr reduce_scatter(Tensor&, const Tensor&, hd::ReduceOp) override {
    HG_FAIL("fake group: no reduce_scatter");
  }
  hd::WorkPtr barrier() override { return std::make_shared<FakeWork>(); }

 private:
  template <typename F>
  hd::WorkPtr run(std::vector<Tensor> keep, F body) {
    ++collectives;
    auto w = std::make_shared<FakeWork>();
    w->keep = keep;
#if defined(HG_WITH_CUDA)
    if (keep[0].is_cuda()) {
      const int dev = keep[0].device().index;
      if (!side_) side_ = cuda::Stream::create(dev);
      cuda::Event ready(false);
      ready.record(cuda::current_stream(dev));
      side_->wait(ready);
      {
        cuda::StreamGuard on_side(*side_);
        body();
      }
      w->done.record(*side_);
      return w;
    }
#endif
    body();
    return w;
  }
#if defined(HG_WITH_CUDA)
  std::optional<cuda::Stream> side_;
#endif
};

std::shared_ptr<nn::Sequential> mlp(uint64_t seed, Device dev) {
  Generator g(seed);
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16, true, &g), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 4, true, &g)});
  m->to(dev);
  return m;
}

}  // namespace

TEST_CASE("DDP and sync_grad_scaler over a stream-ordered group: plain gradients, no host sync",
          "[distributed][ddp][cuda]") {
  for (Device dev : test::test_devices()) {
    INFO(dev.str());
    auto ref = mlp(4, dev), model = mlp(4, dev);
    auto group = std::make_shared<FakeGroup>();
    // A tiny cap: one bucket per parameter, launched while backward runs.
    hd::DistributedDataParallel ddp(model, group, {.bucket_cap_mb = 1e-6});
    optim::SGD opt(model->parameters(), {.lr = 0.1}), opt_ref(ref->parameters(), {.lr = 0.1});
    amp::GradScaler scaler({.init_scale = 256.0}), scaler_ref({.init_scale = 256.0});
    hd::sync_grad_scaler(scaler, group);
    Generator g(9);
    for (int step = 0; step < 3; ++step) {
      const Tensor x = randn({6, 8}, {}, &g).to(dev);
      std::vector<int64_t> labels{0, 1, 2, 3, 1, 2};
      const Tensor y = from_vector(labels, {6}).to(dev);
      opt_ref.zero_grad();
      scaler_ref.scale(nn::functional::cross_entropy(ref->forward(x), y)).backward();
      scaler_ref.step(opt_ref);
      scaler_ref.update();
      opt.zero_grad();
#if defined(HG_WITH_CUDA)
      const auto before = cuda::host_sync_counts();
#endif
      const int64_t before_collectives = group->collectives;
      scaler.scale(nn::functional::cross_entropy(ddp.forward(x), y)).backward();
      scaler.step(opt);
      scaler.update();
      // One bucket per parameter (4), then found_inf and found_any.
      CHECK(group->collectives - before_collectives == 4 + 2);
#if defined(HG_WITH_CUDA)
      const auto after = cuda::host_sync_counts();
      if (dev.is_cuda() && step > 0) {  // step 0: the scaler uploads its initial state once
        CHECK(after.synchronizations == before.synchronizations);
        CHECK(after.device_to_host_copies == before.device_to_host_copies);
      }
#endif
      const auto rp = ref->named_parameters(), mp = model->named_parameters();
      for (size_t k = 0; k < rp.size(); ++k) {
        INFO(mp[k].first << " step " << step);
        // x2 then /2 (powers of two): the averaged gradient is bit-identical.
        CHECK(mp[k].second.grad().cpu().to_vector<float>() == rp[k].second.grad().cpu().to_vector<float>());
        CHECK(mp[k].second.detach().cpu().to_vector<float>() == rp[k].second.detach().cpu().to_vector<float>());
      }
    }
    CHECK(ddp.stats().syncs == 3);
  }
}

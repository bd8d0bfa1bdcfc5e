// An optimizer written outside halfgrad, built against the installed package
// (tests/install/check_install.cmake compiles it with pkg-config's flags).
// It trains an f16 model (fp32 masters kept by the base class) under a
// GradScaler, injects overflowing steps and checks that they change no bit,
// then saves a checkpoint, resumes into a fresh model and optimizer and checks
// that both runs continue bit for bit. Devices: cpu, and cuda:0 when the
// installed library has a CUDA backend with a device.
#include <halfgrad/halfgrad.h>
#if defined(HG_WITH_CUDA)
#include <halfgrad/runtime/cuda/runtime.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

// Adam without bias correction and with a clipped update (a made-up
// optimizer): two state tensors, one masked Foreach launch per group.
class ClippedAdam : public hg::optim::Optimizer {
 public:
  ClippedAdam(std::vector<hg::Tensor> params, double lr, double clip)
      : Optimizer(std::move(params), lr, {{"beta1", 0.9}, {"beta2", 0.99}, {"eps", 1e-6}, {"clip", clip}}) {}

 protected:
  std::vector<StateSpec> state_spec(const ParamGroup&, const hg::Tensor&) const override {
    return {{.name = "m"}, {.name = "v"}};
  }
  void update(hg::optim::OptimizerStep& step) override {
    const double b1 = step.option("beta1"), b2 = step.option("beta2"), eps = step.option("eps");
    const double clip = step.option("clip");
    hg::optim::Foreach f(4);
    const auto p = f.load(0), g = f.load(1), m0 = f.load(2), v0 = f.load(3);
    const auto m = m0 * b1 + g * (1.0 - b1), v = v0 * b2 + (g * g) * (1.0 - b2);
    const auto u = maximum(minimum(m / (sqrt(v) + eps), f.constant(clip)), f.constant(-clip));
    f.store(0, p - f.lr() * u);
    f.store(2, m);
    f.store(3, v);
    step.apply(f, {step.params(), step.grads(), step.state("m"), step.state("v")});
  }
  SkipMode skip_mode() const override { return SkipMode::kMaskedWrites; }
};

std::vector<uint16_t> bits(const hg::Tensor& t) {  // an f16 tensor's bits
  const std::vector<float> v = t.to(hg::kF32).cpu().to_vector<float>();
  std::vector<uint16_t> out;
  for (float x : v) {
    const hg::half h(x);  // exact: x came from f16
    uint16_t b;
    std::memcpy(&b, &h, 2);
    out.push_back(b);
  }
  return out;
}

std::vector<std::vector<uint16_t>> all_bits(const std::shared_ptr<hg::nn::Sequential>& model) {
  std::vector<std::vector<uint16_t>> out;
  for (const hg::Tensor& p : model->parameters()) out.push_back(bits(p));
  return out;
}

int fail(const std::string& what) {
  std::cerr << "FAILED: " << what << "\n";
  return 1;
}

int run(hg::Device device) {
  using namespace hg;
  manual_seed(0);
  auto make = [&] {
    auto m = std::make_shared<nn::Sequential>(nn::Linear(4, 16), nn::ReLU(), nn::Linear(16, 2));
    m->to(device, kF16);
    return m;
  };
  auto model = make();
  ClippedAdam opt(model->parameters(), 1e-2, 1.0);
  amp::GradScaler scaler({.init_scale = 1024.0});
  const Tensor x = randn({32, 4}).to(device, kF16);
  const Tensor y = (x.to(kF32).sum(1) > 0.0).to(kI64);
  const Tensor inf = full({1}, std::numeric_limits<double>::infinity(), {.device = device});
  auto iteration = [&](const std::shared_ptr<nn::Sequential>& m, optim::Optimizer& o, amp::GradScaler& s,
                       bool overflow) {
    o.zero_grad();
    Tensor loss = cross_entropy(hg::to(m->forward(x), kF32), y);
    const double value = overflow ? 0.0 : loss.item<double>();
    if (overflow) loss = loss * inf;
    s.scale(loss).backward();
    s.step(o);
    s.update();
    return value;
  };
  double first = 0, last = 0;
  for (int it = 0; it < 40; ++it) {
    const bool overflow = it % 7 == 3;
    const auto before = all_bits(model);
    const double loss = iteration(model, opt, scaler, overflow);
    if (overflow && all_bits(model) != before) return fail("an overflow step changed the parameters");
    if (it == 0) first = loss;
    if (!overflow) last = loss;
  }
  if (opt.steps_applied() != 40 - 6)
    return fail("expected 34 applied steps, got " + std::to_string(opt.steps_applied()));
  if (!(last < first)) return fail("the loss did not fall");
  // Save, resume into a fresh model + optimizer + scaler, continue both.
  const std::string path = "custom_optimizer_" + std::to_string(device.is_cuda()) + ".ckpt";
  optim::save_training_checkpoint(path, *model, opt, {.global_step = 40}, scaler.state_dict());
  auto model2 = make();
  ClippedAdam opt2(model2->parameters(), 1e-2, 1.0);
  amp::GradScaler scaler2({.init_scale = 1024.0});
  optim::NamedTensors scaler_state;
  optim::load_training_checkpoint(path, *model2, opt2, &scaler_state);
  scaler2.load_state_dict(scaler_state);
  std::remove(path.c_str());
  for (int it = 0; it < 6; ++it) {
    iteration(model, opt, scaler, it == 2);
    iteration(model2, opt2, scaler2, it == 2);
    if (all_bits(model) != all_bits(model2)) return fail("the resumed run differs at iteration " + std::to_string(it));
  }
  std::cout << device << ": loss " << first << " -> " << last << ", 6 overflow steps skipped bit-exactly, "
            << "resumed bit-exactly\n";
  return 0;
}

}  // namespace

int main() {
  try {
    if (int rc = run(hg::Device::cpu())) return rc;
#if defined(HG_WITH_CUDA)
    if (hg::cuda::is_available()) return run(hg::Device::cuda(0));
#endif
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

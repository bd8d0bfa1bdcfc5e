// Optimizers against an independent double-precision reference of the
// PyTorch update rules, the fused CUDA step against the CPU step, fp32 master
// weights for 16-bit parameters, and the on-device skip (found_inf).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/optimizer/optimizer_simd.h"
#include "kernels/cpu/vec_math.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

// PyTorch's update rules, written out in double for one parameter vector.
struct RefState {
  std::vector<double> p, m, v;
  int t = 0;
};

void ref_step(RefState& s, const std::vector<double>& g_in, const OptimizerHyper& h) {
  ++s.t;
  if (s.m.empty()) s.m.assign(s.p.size(), 0.0), s.v.assign(s.p.size(), 0.0);
  for (size_t i = 0; i < s.p.size(); ++i) {
    double g = g_in[i];
    double& p = s.p[i];
    if (h.kind == OptimizerKind::kSgd) {
      if (h.weight_decay != 0) g += h.weight_decay * p;
      if (h.momentum != 0) {
        s.m[i] = s.t == 1 ? g : h.momentum * s.m[i] + (1 - h.dampening) * g;
        g = h.nesterov ? g + h.momentum * s.m[i] : s.m[i];
      }
      p -= h.lr * g;
    } else {
      if (h.kind == OptimizerKind::kAdamW) {
        p *= 1 - double(h.lr) * h.weight_decay;
      } else if (h.weight_decay != 0) {
        g += h.weight_decay * p;
      }
      s.m[i] = h.beta1 * s.m[i] + (1 - h.beta1) * g;
      s.v[i] = h.beta2 * s.v[i] + (1 - h.beta2) * g * g;
      const double mhat = s.m[i] / (1 - std::pow(double(h.beta1), s.t));
      const double vhat = s.v[i] / (1 - std::pow(double(h.beta2), s.t));
      p -= h.lr * mhat / (std::sqrt(vhat) + h.eps);
    }
  }
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

struct OptCase {
  const char* name;
  MakeOpt make;
};

std::vector<OptCase> cases() {
  return {
      {"sgd", [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1}); }},
      {"sgd momentum wd", [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
       }},
      {"sgd nesterov", [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
       }},
      {"adam wd", [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
       }},
      {"adamw", [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
       }},
  };
}

}  // namespace

TEST_CASE("optimizers follow the PyTorch update rules", "[optim]") {
  for (const OptCase& c : cases()) {
    for (Device dev : test_devices()) {
      Tensor w = make_input({7, 5}, kF32, Domain::kAny, 1).to(dev).requires_grad_(true);
      auto opt = c.make({w});
      RefState ref{values_of(w), {}, {}, 0};
      for (int step = 0; step < 4; ++step) {
        const Tensor g = make_input({7, 5}, kF32, Domain::kAny, 10 + step).to(dev);
        w.set_grad(g);
        opt->step();
        ref_step(ref, values_of(g), optim::detail::ParamGroupAccess::hyper(opt->param_groups()[0]));
      }
      INFO(c.name << " on " << dev);
      CHECK(opt->steps_applied() == 4);
      // f32 arithmetic vs double over 4 steps: a few ulp of the update size.
      CHECK(compare_values(values_of(w), ref.p, {1e-5, 1e-6}) == "");
    }
  }
}

TEST_CASE("the fused CUDA step equals the CPU step", "[optim][cuda]") {
#if defined(HG_WITH_CUDA)
  for (const OptCase& c : cases()) {
    for (DType dt : {kF32, kF16, kBF16}) {
      std::vector<std::vector<double>> results;
      for (Device dev : {Device::cpu(), Device::cuda()}) {
        // Several parameters of different sizes, one larger than a chunk.
        std::vector<Tensor> params{make_input({3000}, dt, Domain::kAny, 2).to(dev).requires_grad_(true),
                                   make_input({4, 9}, dt, Domain::kAny, 3).to(dev).requires_grad_(true)};
        auto opt = c.make(params);
        for (int step = 0; step < 3; ++step) {
          for (size_t i = 0; i < params.size(); ++i) {
            params[i].set_grad(make_input(params[i].sizes(), dt, Domain::kAny, 20 + step * 2 + i).to(dev));
          }
          opt->step();
        }
        std::vector<double> all;
        for (const Tensor& p : params) {
          const auto v = values_of(p);
          all.insert(all.end(), v.begin(), v.end());
        }
        results.push_back(all);
      }
      INFO(c.name << " " << dtype_name(dt));
      CHECK(compare_values(results[1], results[0], tolerance_for(dt, OpKind::kElementwise)) == "");
    }
  }
#else
  SUCCEED("cpu build");
#endif
}

TEST_CASE("16-bit parameters keep fp32 masters", "[optim][master]") {
  for (Device dev : test_devices()) {
    Tensor w = full({4}, 1.0, {.dtype = kF16, .device = dev}).requires_grad_(true);
    optim::SGD opt({w}, {.lr = 1e-5});
    // Each update (1e-5) is below half an fp16 ulp at 1.0 (2^-11 = 4.9e-4)...
    for (int i = 0; i < 10; ++i) {
      w.set_grad(ones({4}, {.dtype = kF16, .device = dev}));
      opt.step();
    }
    CHECK(values_of(w) == std::vector<double>(4, 1.0));  // ... so the f16 copy has not moved,
    const auto state = opt.state_dict();
    const Tensor master = state[1].second;  // "master.0.0"
    CHECK(state[1].first == "master.0.0");
    CHECK(values_of(master)[0] == Approx(1.0 - 1e-4).epsilon(1e-6));  // but the master has.
    for (int i = 0; i < 100; ++i) {
      w.set_grad(ones({4}, {.dtype = kF16, .device = dev}));
      opt.step();
    }
    // The 16-bit parameter is always the master rounded once.
    CHECK(values_of(w) == values_of(master.to(kF16)));
    CHECK(values_of(w)[0] < 1.0);
  }
}

TEST_CASE("found_inf skips the step on the device; inv_scale unscales", "[optim][amp]") {
  for (Device dev : test_devices()) {
    Tensor w = full({3}, 2.0, {.device = dev}).requires_grad_(true);
    optim::SGD opt({w}, {.lr = 0.5});
    w.set_grad(full({3}, 8.0, {.device = dev}));
    const Tensor inv_scale = full({1}, 0.25, {.device = dev});
    opt.step(inv_scale, full({1}, 1.0, {.device = dev}));  // overflow seen: skip
    CHECK(values_of(w) == std::vector<double>(3, 2.0));
    CHECK(opt.steps_applied() == 0);
    opt.step(inv_scale, zeros({1}, {.device = dev}));  // clean: g = 8 * 0.25 = 2
    CHECK(values_of(w) == std::vector<double>(3, 1.0));
    CHECK(opt.steps_applied() == 1);
  }
}

TEST_CASE("optimizer state round-trips and resumes identically", "[optim]") {
  Tensor w1 = make_input({6}, kF16, Domain::kAny, 5).requires_grad_(true);
  optim::Adam a1({w1}, {.lr = 0.05});
  for (int i = 0; i < 3; ++i) {
    w1.set_grad(make_input({6}, kF16, Domain::kAny, 30 + i));
    a1.step();
  }
  // A second optimizer loaded from the first's state continues bit-identically.
  Tensor w2 = w1.detach().clone().requires_grad_(true);
  optim::Adam a2({w2}, {.lr = 0.05});
  a2.load_state_dict(a1.state_dict());
  CHECK(a2.steps_applied() == 3);
  for (int i = 3; i < 6; ++i) {
    w1.set_grad(make_input({6}, kF16, Domain::kAny, 30 + i));
    w2.set_grad(make_input({6}, kF16, Domain::kAny, 30 + i));
    a1.step();
    a2.step();
  }
  CHECK(values_of(w1) == values_of(w2));
  optim::SGD sgd({w2}, {.lr = 0.1});
  CHECK_THROWS_WITH(sgd.load_state_dict(a1.state_dict()), Catch::Contains("unexpected entry"));
}

TEST_CASE("optimizers reject bad setups", "[optim][errors]") {
  CHECK_THROWS_WITH(optim::SGD({zeros({2})}), Catch::Contains("requires_grad"));
  CHECK_THROWS_WITH(optim::SGD({zeros({2}, {.dtype = kF64}).requires_grad_(true)}), Catch::Contains("f32, f16 or bf16"));
  CHECK_THROWS_WITH(optim::SGD({zeros({2}).requires_grad_(true)}, {.nesterov = true}), Catch::Contains("nesterov"));
  CHECK_THROWS_WITH(optim::Adam({zeros({2}).requires_grad_(true)}, {.beta1 = 1.0}), Catch::Contains("betas"));
  Tensor w = zeros({2}).requires_grad_(true);
  optim::SGD opt({w});
  w.set_grad(zeros({3}));
  CHECK_THROWS_WITH(opt.step(), Catch::Contains("gradient shape [3]"));
}

TEST_CASE("the step counter is exact past 2^24 (bias correction and device schedule)", "[optim]") {
  // An f32 counter stops at 2^24: 2^24 + 1 rounds back to 2^24. The counter is
  // i64, so the steps below advance it, and both the device-side schedule and
  // Adam's bias correction see the exact count.
  constexpr int64_t kStart = int64_t{1} << 24;
  for (Device dev : test_devices()) {
    INFO("on " << dev);
    // SGD, lr 1, grad 1, with a device-side StepLR (gamma 0.5) whose first decay
    // is at k = 2^24 + 1 applied steps: step 2^24 + 1 runs at lr 1, step
    // 2^24 + 2 at lr 0.5.
    Tensor w = zeros({2}, {.device = dev}).requires_grad_(true);
    optim::SGD sgd({w}, {.lr = 1.0});
    optim::detail::ParamGroupAccess::hyper(sgd.param_groups()[0]).schedule = {
        .kind = LrScheduleKind::kStep, .step_size = kStart + 1, .gamma = 0.5};
    sgd.load_state_dict({{"step.0", full({1}, static_cast<double>(kStart), {.dtype = kI64})}});
    CHECK(sgd.steps_applied() == kStart);
    for (int i = 0; i < 2; ++i) {
      w.set_grad(full({2}, 1.0, {.device = dev}));
      sgd.step();
    }
    CHECK(sgd.steps_applied() == kStart + 2);
    CHECK(values_of(w) == std::vector<double>(2, -1.5));

    // Adam with beta2 as close to 1 as f32 allows, so 1 - beta2^t is still
    // about 1 - e^-1 at t = 2^24 and the bias correction matters: the update
    // matches the f64 reference at t = 2^24 + 6. (A t off by a few steps moves
    // it by ~1e-7 relative, inside the f32 row; the counter check catches that.)
    Tensor a = full({3}, 1.0, {.device = dev}).requires_grad_(true);
    optim::Adam adam({a}, {.lr = 0.01, .beta1 = 0.9, .beta2 = 1.0 - std::ldexp(1.0, -24)});
    adam.load_state_dict({{"step.0", full({1}, static_cast<double>(kStart + 5), {.dtype = kI64})},
                          {"state1.0.0", zeros({3})},
                          {"state2.0.0", zeros({3})}});
    const Tensor g = make_input({3}, kF32, Domain::kAny, 77).to(dev);
    a.set_grad(g);
    adam.step();
    CHECK(adam.steps_applied() == kStart + 6);
    RefState ref{std::vector<double>(3, 1.0), std::vector<double>(3, 0.0), std::vector<double>(3, 0.0),
                 static_cast<int>(kStart + 5)};
    ref_step(ref, values_of(g), optim::detail::ParamGroupAccess::hyper(adam.param_groups()[0]));
    CHECK(compare_values(values_of(a), ref.p, tolerance_for(kF32, OpKind::kElementwise)) == "");
  }
}

TEST_CASE("an optimizer state with an f32 step counter (older checkpoints) still loads", "[optim]") {
  Tensor w = zeros({2}).requires_grad_(true);
  optim::SGD opt({w}, {.lr = 0.5});
  opt.load_state_dict({{"step.0", full({1}, 12345.0)}});  // f32, as written before the counter was i64
  CHECK(opt.steps_applied() == 12345);
  w.set_grad(full({2}, 1.0));
  opt.step();
  CHECK(opt.steps_applied() == 12346);
  CHECK_THROWS_WITH(opt.load_state_dict({{"step.0", full({1}, 3.0, {.dtype = kF16})}}),
                    Catch::Contains("step counter must be i64"));
}

TEST_CASE("a parameter listed twice is refused; load_state_dict checks dtypes and is atomic", "[optim][errors]") {
  Tensor w = randn({3}).requires_grad_();
  Tensor v = randn({2}).requires_grad_();
  // Listed twice, it was stepped twice per step() without a word.
  CHECK_THROWS_WITH(optim::SGD({w, v, w}), Catch::Contains("appears twice"));
  optim::SGD sgd({w});
  CHECK_THROWS_WITH(sgd.add_param_group({v, w}), Catch::Contains("already in parameter group 0"));

  optim::Adam a({w, v});
  w.set_grad(ones({3}));
  v.set_grad(ones({2}));
  a.step();
  optim::NamedTensors state = a.state_dict();
  optim::Adam b({w.detach().clone().requires_grad_(), v.detach().clone().requires_grad_()});
  const optim::NamedTensors fresh = b.state_dict();  // no state yet: nothing to compare but emptiness
  for (auto& [name, t] : state) {
    if (name == "state2.0.1") t = t.to(kF64);  // was cast silently
  }
  CHECK_THROWS_WITH(b.load_state_dict(state), Catch::Contains("has dtype f64 but the optimizer keeps it in f32"));
  CHECK(b.state_dict().size() == fresh.size());  // the failed load created no state
}

namespace {

// The CPU Adam step's paths (kernels/optimizer/optimizer_cpu.cpp, optimizer_simd.h):
// the scalar reference (HG_CPU_MATH=scalar), the baseline loops
// (HG_CPU_ISA=generic) and the AVX2 / AVX-512 kernels where this CPU has them.
struct AdamPath {
  std::string name;  // what cpu::optimizer_isa_name() says
  cpu::CpuMath math;
  cpu::VecIsa cap;
};

// Restores the process's math path and ISA cap when a test ends.
struct IsaGuard {
  cpu::CpuMath math = cpu::cpu_math();
  cpu::VecIsa cap = cpu::cpu_isa_cap();
  IsaGuard() = default;
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;
  ~IsaGuard() {
    cpu::set_cpu_math(math);
    cpu::set_cpu_isa_cap(cap);
  }
};

// Every path this build and CPU can run, each once (a cap above the CPU's
// best gives the best, which is already listed).
std::vector<AdamPath> adam_paths() {
  const IsaGuard guard;
  std::vector<AdamPath> paths;
  cpu::set_cpu_math(cpu::CpuMath::scalar);
  paths.push_back({cpu::optimizer_isa_name(), cpu::CpuMath::scalar, cpu::VecIsa::avx512});
  cpu::set_cpu_math(cpu::CpuMath::sleef);
  for (cpu::VecIsa cap : {cpu::VecIsa::sse2, cpu::VecIsa::avx2, cpu::VecIsa::avx512}) {
    cpu::set_cpu_isa_cap(cap);
    const std::string name = cpu::optimizer_isa_name();
    if (name != paths.back().name) paths.push_back({name, cpu::CpuMath::sleef, cap});
  }
  return paths;
}

}  // namespace

TEST_CASE("the CPU Adam step's paths: scalar reference, generic, and the ISA kernels where the CPU has them",
          "[optim][simd]") {
  const std::vector<AdamPath> paths = adam_paths();
  REQUIRE(paths.size() >= 2);
  CHECK(paths[0].name == "scalar");
  CHECK(paths[1].name == "generic");
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) CHECK(paths.back().name == "avx512");
#endif
}

namespace {

// One Adam configuration of the bit-identity tests below.
struct AdamCase {
  OptimizerKind kind;
  float weight_decay;
};
const AdamCase kAdamCases[] = {
    {OptimizerKind::kAdam, 0.05f}, {OptimizerKind::kAdam, 0.0f}, {OptimizerKind::kAdamW, 0.05f}};

// Each case without a gradient scale (inv_scale 1: the vector kernels skip
// the multiply) and with one.
std::vector<std::pair<AdamCase, float>> adam_case_scales() {
  std::vector<std::pair<AdamCase, float>> out;
  for (const AdamCase& ac : kAdamCases) {
    for (float inv_scale : {1.0f, 0.25f}) out.emplace_back(ac, inv_scale);
  }
  return out;
}

// Slot sizes of one step: below a vector, a vector plus a tail, a block of
// the thread split plus a tail, and one above the OpenMP threshold, so that
// the blocks of several slots share one parallel region.
const int64_t kAdamSizes[] = {5, 37, 4099, 70001};

}  // namespace

// The f32 loops (kernels/optimizer/optimizer_cpu.cpp: the baseline loop and the vector
// kernels, one pass per element) must be bit-identical to optimizer_update,
// the per-element rule the CUDA kernel and the generic CPU loop share, on
// every path, over several slots in one step.
TEST_CASE("the vectorised f32 Adam step is bit-identical to optimizer_update", "[optim][simd]") {
  const IsaGuard guard;
  for (const AdamPath& path : adam_paths()) {
    cpu::set_cpu_math(path.math);
    cpu::set_cpu_isa_cap(path.cap);
    REQUIRE(std::string(cpu::optimizer_isa_name()) == path.name);
    for (const auto& [ac, inv_scale_value] : adam_case_scales()) {
      INFO(path.name << (ac.kind == OptimizerKind::kAdam ? " Adam" : " AdamW") << " wd " << ac.weight_decay
                     << " inv_scale " << inv_scale_value);
      OptimizerHyper h;
      h.kind = ac.kind;
      h.lr = 3e-3f;
      h.weight_decay = ac.weight_decay;
      Generator gen(11);
      std::vector<OptimizerSlot> slots;
      std::vector<std::vector<float>> p, m, v;
      for (int64_t n : kAdamSizes) {
        OptimizerSlot slot;
        slot.param = randn({n}, {}, &gen);
        slot.state1 = zeros({n});
        slot.state2 = zeros({n});
        p.push_back(slot.param.to_vector<float>());
        m.emplace_back(static_cast<size_t>(n), 0.0f);
        v.emplace_back(static_cast<size_t>(n), 0.0f);
        slots.push_back(slot);
      }
      Tensor step = zeros({1}, {.dtype = kI64});
      Tensor inv_scale = full({1}, inv_scale_value);
      for (int64_t t = 1; t <= 3; ++t) {
        const StepScalars sc = step_scalars(h, inv_scale_value, t);
        for (size_t k = 0; k < slots.size(); ++k) {
          slots[k].grad = randn(slots[k].param.sizes(), {}, &gen);
          std::vector<float> g = slots[k].grad.to_vector<float>();
          if (g.size() > 200) {
            // Values whose m or v leave the range where the AVX-512 kernel's
            // bias corrections skip the divider (Note [Adam's bias
            // corrections without the divider]): a negative zero, subnormal
            // and tiny gradients (subnormal m or v), a huge one (v overflows),
            // and the same in a whole vector of lanes; and NaNs, quiet and
            // signalling, whose payloads the unscaled kernels (no multiply by
            // inv_scale 1) must carry as the multiply does.
            const float special[] = {-0.0f,
                                     1e-41f,
                                     -3e-39f,
                                     1e-20f,
                                     -2e-23f,
                                     3e30f,
                                     -1e25f,
                                     std::numeric_limits<float>::quiet_NaN(),
                                     -std::numeric_limits<float>::signaling_NaN()};
            for (size_t i = 0; i < std::size(special); ++i) {
              g[i] = special[i];
              for (size_t lane = 0; lane < 16; ++lane) g[32 + 16 * i + lane] = special[i];
            }
            slots[k].grad = from_vector(g, slots[k].param.sizes());
          }
          for (size_t i = 0; i < p[k].size(); ++i) p[k][i] = optimizer_update(sc, p[k][i], g[i], m[k][i], v[k][i]);
        }
        ops::fused_optimizer_step(slots, h, step, inv_scale);
      }
      for (size_t k = 0; k < slots.size(); ++k) {
        const std::vector<float> got = slots[k].param.to_vector<float>(), got_m = slots[k].state1.to_vector<float>(),
                                 got_v = slots[k].state2.to_vector<float>();
        int64_t differ = 0;
        for (size_t i = 0; i < p[k].size(); ++i) {
          differ += std::memcmp(&got[i], &p[k][i], 4) != 0 || std::memcmp(&got_m[i], &m[k][i], 4) != 0 ||
                    std::memcmp(&got_v[i], &v[k][i], 4) != 0;
        }
        INFO("slot of " << p[k].size());
        CHECK(differ == 0);
      }
    }
  }
}

// The 16-bit weights with f32 masters (widen the gradient, the f32 rule on
// the masters, round once into the weight: in the registers on the vector
// paths, through the row converters on the generic one) must be bit-identical
// to optimizer_update on the master followed by one rounding, on every path.
// The masters include values that overflow the 16-bit type (f16 above 65504,
// bf16 near f32's maximum) and a NaN, so the rounding in registers meets them.
TEST_CASE("the 16-bit Adam step with f32 masters is bit-identical to optimizer_update", "[optim][simd]") {
  const IsaGuard guard;
  for (const AdamPath& path : adam_paths()) {
    cpu::set_cpu_math(path.math);
    cpu::set_cpu_isa_cap(path.cap);
    for (DType dt : {kBF16, kF16}) {
      for (const auto& [ac, inv_scale_value] : adam_case_scales()) {
        INFO(path.name << " " << dtype_name(dt) << (ac.kind == OptimizerKind::kAdam ? " Adam" : " AdamW") << " wd "
                       << ac.weight_decay << " inv_scale " << inv_scale_value);
        OptimizerHyper h;
        h.kind = ac.kind;
        h.lr = 3e-3f;
        h.weight_decay = ac.weight_decay;
        Generator gen(12);
        std::vector<OptimizerSlot> slots;
        std::vector<std::vector<float>> p, m, v;
        for (int64_t n : kAdamSizes) {
          OptimizerSlot slot;
          slot.master = randn({n}, {}, &gen);
          float* w = slot.master.data<float>();
          // Edge values for the 16-bit rounding (a few lanes of each slot).
          const float edges[] = {70000.0f, -70000.0f, 3.0e38f, -3.4e38f, std::numeric_limits<float>::quiet_NaN()};
          for (size_t e = 0; e < std::size(edges) && static_cast<int64_t>(e) < n; ++e) w[e * 3 % n] = edges[e];
          slot.param = slot.master.to(dt);
          slot.state1 = zeros({n});
          slot.state2 = zeros({n});
          p.push_back(slot.master.to_vector<float>());
          m.emplace_back(static_cast<size_t>(n), 0.0f);
          v.emplace_back(static_cast<size_t>(n), 0.0f);
          slots.push_back(slot);
        }
        Tensor step = zeros({1}, {.dtype = kI64});
        Tensor inv_scale = full({1}, inv_scale_value);
        for (int64_t t = 1; t <= 3; ++t) {
          const StepScalars sc = step_scalars(h, inv_scale_value, t);
          for (size_t k = 0; k < slots.size(); ++k) {
            slots[k].grad = randn(slots[k].param.sizes(), {}, &gen).to(dt);
            const std::vector<float> g = slots[k].grad.to_vector<float>();
            for (size_t i = 0; i < p[k].size(); ++i) p[k][i] = optimizer_update(sc, p[k][i], g[i], m[k][i], v[k][i]);
          }
          ops::fused_optimizer_step(slots, h, step, inv_scale);
        }
        for (size_t k = 0; k < slots.size(); ++k) {
          const int64_t n = static_cast<int64_t>(p[k].size());
          // The weight: the master rounded once to dt.
          const std::vector<float> want_param = from_vector(p[k], {n}).to(dt).to_vector<float>();
          const std::vector<float> got = slots[k].master.to_vector<float>(), got_m = slots[k].state1.to_vector<float>(),
                                   got_v = slots[k].state2.to_vector<float>(),
                                   got_param = slots[k].param.to_vector<float>();
          int64_t differ = 0;
          for (size_t i = 0; i < p[k].size(); ++i) {
            differ += std::memcmp(&got[i], &p[k][i], 4) != 0 || std::memcmp(&got_m[i], &m[k][i], 4) != 0 ||
                      std::memcmp(&got_v[i], &v[k][i], 4) != 0 || std::memcmp(&got_param[i], &want_param[i], 4) != 0;
          }
          INFO("slot of " << n);
          CHECK(differ == 0);
        }
      }
    }
  }
}

// The open optimizer API (Note [Writing an optimizer] in optim/optimizer.h),
// Foreach programs (kernels/foreach/foreach.h), Lion and Muon, LambdaLR. References:
// plain float loops written here (bitwise), an f64 one-sided Jacobi SVD for
// the Newton–Schulz iteration, and PyTorch trajectories
// (tests/optim/ref/lion_muon_reference.py).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "optim/foreach.h"
#include "optim/lion.h"
#include "optim/lr_scheduler.h"
#include "optim/muon.h"
#include "optim/optimizer.h"
#include "tests/kernels/test_support.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

using namespace hg;
using namespace hg::test;
using Catch::Matchers::Contains;

namespace {

std::vector<uint32_t> bits_of(const Tensor& t) {
  const std::vector<float> v = t.to(kF32).cpu().contiguous().to_vector<float>();
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

std::vector<float> floats_of(const Tensor& t) { return t.to(kF32).cpu().contiguous().to_vector<float>(); }

Tensor seeded(const Shape& shape, uint64_t seed, double scale = 1.0, DType dtype = kF32,
              Device device = Device::cpu()) {
  Generator gen(seed);
  NoGradGuard no_grad;
  return mul(randn(shape, {}, &gen), scale).to(dtype).to(device);
}

// Every tensor an optimizer keeps plus its parameters, as bits.
std::map<std::string, std::vector<uint32_t>> snapshot(optim::Optimizer& opt) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (const auto& [name, t] : opt.state_dict()) {
    if (t.dtype() == kI64) {
      for (int64_t v : t.cpu().to_vector<int64_t>()) out[name].push_back(static_cast<uint32_t>(v));
    } else {
      out[name] = bits_of(t);
    }
  }
  for (size_t g = 0; g < opt.param_groups().size(); ++g) {
    for (size_t i = 0; i < opt.param_groups()[g].params.size(); ++i)
      out["param." + std::to_string(g) + "." + std::to_string(i)] = bits_of(opt.param_groups()[g].params[i]);
  }
  return out;
}

// ---- a user-written optimizer, SkipMode::kCommit ---------------------------
// Momentum SGD written with ordinary tensor ops (not Foreach), plus an i64
// step count of its own: the base class must make a skipped step a no-op.
//   m = beta * m + g;  p = p - lr * m;  count += 1
class MomentumOps : public optim::Optimizer {
 public:
  MomentumOps(std::vector<Tensor> params, double lr, double beta)
      : Optimizer(std::move(params), lr, {{"beta", beta}}) {}

 protected:
  std::vector<StateSpec> state_spec(const ParamGroup& /*group*/, const Tensor& /*param*/) const override {
    return {{.name = "m"}, {.name = "count", .dtype = kI64, .shape = Shape{}}};
  }
  void update(optim::OptimizerStep& step) override {
    const double beta = step.option("beta"), lr = step.group().lr();
    for (size_t k = 0; k < step.size(); ++k) {
      Tensor m = step.state(k, "m"), p = step.params()[k], count = step.state(k, "count");
      m.copy_(add(mul(m, beta), step.grads()[k]));
      p.copy_(sub(p, mul(m, lr)));
      count.copy_(add(count, 1.0));
    }
  }
};

}  // namespace

TEST_CASE("foreach: one program over many tensors matches a plain float loop bit for bit", "[optim][foreach]") {
  for (Device device : test_devices()) {
    INFO(device);
    // An AdamW-like program with every opcode kind.
    optim::Foreach f(4);
    const auto p = f.load(0), g = f.load(1), m0 = f.load(2), v0 = f.load(3);
    const auto gs = g * f.inv_scale();
    const auto m = lerp(m0, gs, 0.1);
    const auto v = v0 * 0.999 + (gs * gs) * (1.0 - 0.999);
    const auto upd = (m / f.bias_correction(0.9)) / (sqrt(v / f.bias_correction(0.999)) + 1e-8);
    const auto clipped = maximum(minimum(upd, f.constant(0.5)), f.constant(-0.5));
    const auto chosen = f.select(f.found_inf(), p, p - f.lr() * (clipped + sign(g) * 1e-3) - abs(-p) * 1e-4);
    f.store(0, chosen);
    f.store(2, m);
    f.store(3, v);
    const std::vector<int64_t> sizes{5000, 7, 2048};
    std::vector<std::vector<Tensor>> lists(4);
    for (size_t s = 0; s < sizes.size(); ++s) {
      const DType pd = s == 1 ? kBF16 : (s == 2 ? kF16 : kF32);
      lists[0].push_back(seeded({sizes[s]}, 10 + s, 1.0, pd, device));
      lists[1].push_back(seeded({sizes[s]}, 20 + s, 8.0, s == 0 ? kF16 : kF32, device));
      lists[2].push_back(seeded({sizes[s]}, 30 + s, 0.1, kF32, device));
      lists[3].push_back(
          mul(seeded({sizes[s]}, 40 + s, 0.1, kF32, device), seeded({sizes[s]}, 40 + s, 0.1, kF32, device)));
    }
    std::vector<std::vector<std::vector<float>>> before(4);
    for (int t = 0; t < 4; ++t)
      for (const Tensor& x : lists[t]) before[t].push_back(floats_of(x));
    const Tensor step = from_vector(std::vector<int64_t>{3}, {1}).to(device);
    const Tensor inv_scale = from_vector(std::vector<float>{0.125f}, {1}).to(device);
    Tensor found = zeros({1}, {.device = device});
    f.apply(lists, {.lr = 0.01f, .step = step, .inv_scale = inv_scale, .found_inf = found});
    const auto bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(0.9f), 3.0));
    const auto bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(0.999f), 3.0));
    for (size_t s = 0; s < sizes.size(); ++s) {
      const std::vector<float> P = floats_of(lists[0][s]), M = floats_of(lists[2][s]), V = floats_of(lists[3][s]);
      for (size_t i = 0; i < P.size(); ++i) {
        const float pi = before[0][s][i], gi = before[1][s][i] * 0.125f;
        const float mi = before[2][s][i] + 0.1f * (gi - before[2][s][i]);
        const float vi = before[3][s][i] * 0.999f + (gi * gi) * static_cast<float>(1.0 - 0.999);
        const float u = (mi / bc1) / (std::sqrt(vi / bc2) + 1e-8f);
        const float c = std::fmax(std::fmin(u, 0.5f), -0.5f);
        const float sg = before[1][s][i] > 0 ? 1.0f : (before[1][s][i] < 0 ? -1.0f : before[1][s][i]);
        const float sg_term = sg * 1e-3f;
        const float lr_term = 0.01f * (c + sg_term);
        const float pn = (pi - lr_term) - std::fabs(-pi) * 1e-4f;
        const auto stored = static_cast<float>(round_to({static_cast<double>(pn)}, lists[0][s].dtype())[0]);
        INFO("slot " << s << " element " << i);
        REQUIRE(std::memcmp(&M[i], &mi, 4) == 0);
        REQUIRE(std::memcmp(&V[i], &vi, 4) == 0);
        REQUIRE(std::memcmp(&P[i], &stored, 4) == 0);
      }
    }
    // Masked: found_inf set writes nothing.
    std::vector<std::vector<uint32_t>> kept;
    for (int t = 0; t < 4; ++t)
      for (const Tensor& x : lists[t]) kept.push_back(bits_of(x));
    found.fill_(1.0);
    f.apply(lists, {.lr = 0.01f, .step = step, .inv_scale = inv_scale, .found_inf = found});
    size_t k = 0;
    for (int t = 0; t < 4; ++t)
      for (const Tensor& x : lists[t]) CHECK(bits_of(x) == kept[k++]);
  }
}

TEST_CASE("foreach: bad programs and lists raise hg::Error", "[optim][foreach]") {
  optim::Foreach f(2);
  f.store(1, f.load(0) * f.step());
  const std::vector<Tensor> a{zeros({4})}, b{zeros({4})}, c{zeros({5})};
  CHECK_THROWS_WITH(f.apply({a, b}), Contains("no step counter"));
  CHECK_THROWS_WITH(f.apply({a}, {.step = zeros({1}, {.dtype = kI64})}), Contains("2 tensor lists"));
  CHECK_THROWS_WITH(f.apply({a, c}, {.step = zeros({1}, {.dtype = kI64})}), Contains("elements"));
  CHECK_THROWS_WITH(f.apply({a, {zeros({4}, {.dtype = kI64})}}, {.step = zeros({1}, {.dtype = kI64})}),
                    Contains("f32, f16 or bf16"));
  CHECK_THROWS_WITH(f.load(2), Contains("no tensor list 2"));
  optim::Foreach other(1);
  CHECK_THROWS_WITH(f.store(0, other.load(0)), Contains("another Foreach"));
  ForeachProgram raw;
  raw.tensors = 1;
  raw.size = 1;
  raw.code[0] = {.op = ForeachOpcode::kStore, .a = 0, .b = 3};
  CHECK_THROWS_WITH(ops::foreach_apply(raw, {a}, {}), Contains("before it is written"));
  raw.size = 3;
  raw.code[0] = {.op = ForeachOpcode::kConst, .dst = 0, .value = 1.0f};
  raw.code[1] = {.op = ForeachOpcode::kLoad, .dst = 0, .a = 0};
  raw.code[2] = {.op = ForeachOpcode::kStore, .a = 0, .b = 0};
  CHECK_THROWS_WITH(ops::foreach_apply(raw, {a}, {}), Contains("a second time"));
  optim::Foreach big(1);
  auto x = big.load(0);
  CHECK_THROWS_WITH(
      [&] {
        for (int k = 0; k < kForeachMaxInstrs; ++k) x = x + x;
      }(),
      Contains("at most"));
}

TEST_CASE("custom optimizer: f16 parameters get fp32 masters, state, skip, checkpoint", "[optim][custom]") {
  for (Device device : test_devices()) {
    INFO(device);
    Tensor w = seeded({3, 70}, 1, 1.0, kF16, device).detach().requires_grad_(true);
    Tensor b = seeded({3}, 2, 1.0, kF32, device).detach().requires_grad_(true);
    MomentumOps opt({w, b}, 0.05, 0.9);
    // The plain float reference: master starts as the f16 value.
    std::vector<float> master = floats_of(w), mom(master.size(), 0.0f);
    Tensor found = zeros({1}, {.device = device});
    for (int it = 0; it < 4; ++it) {
      const Tensor gw = seeded({3, 70}, 100 + it, 1.0, kF16, device);
      w.set_grad(gw);
      b.set_grad(seeded({3}, 200 + it, 1.0, kF32, device));
      const bool skip = it == 2;
      found.fill_(skip ? 1.0 : 0.0);
      const auto before = snapshot(opt);
      opt.step(Tensor(), found);
      if (skip) {
        CHECK(snapshot(opt) == before);  // SkipMode::kCommit: bit-identical, the i64 state too
        continue;
      }
      const std::vector<float> g = floats_of(gw);
      for (size_t i = 0; i < master.size(); ++i) {
        mom[i] = mom[i] * 0.9f + g[i];
        master[i] = master[i] - mom[i] * 0.05f;
      }
      const optim::NamedTensors st = opt.state_dict();
      std::map<std::string, Tensor> by_name(st.begin(), st.end());
      REQUIRE(by_name.count("master.0.0"));
      CHECK(floats_of(by_name.at("master.0.0")) == master);
      CHECK(floats_of(by_name.at("m.0.0")) == mom);
      CHECK(bits_of(w) == bits_of(from_vector(master, {3, 70}).to(kF16)));  // rounded once from the master
    }
    CHECK(opt.steps_applied() == 3);
    {
      const optim::NamedTensors st = opt.state_dict();
      std::map<std::string, Tensor> by_name(st.begin(), st.end());
      CHECK(by_name.at("count.0.1").cpu().item<int64_t>() == 3);
      CHECK_FALSE(by_name.count("master.0.1"));  // f32 parameter: no master
    }
    // Save, resume into a fresh optimizer over copies: the next steps agree bit for bit.
    const optim::NamedTensors saved = opt.state_dict();
    std::vector<std::pair<std::string, Tensor>> copies;
    for (const auto& [n, t] : saved) copies.emplace_back(n, t.clone());
    Tensor w2 = w.detach().clone().requires_grad_(true), b2 = b.detach().clone().requires_grad_(true);
    MomentumOps resumed({w2, b2}, 0.05, 0.9);
    // Atomic: a wrong entry changes nothing.
    std::vector<std::pair<std::string, Tensor>> bad = copies;
    bad.emplace_back("m.0.7", zeros({1}));
    CHECK_THROWS_WITH(resumed.load_state_dict(bad), Contains("unexpected entry"));
    bad = copies;
    for (auto& [n, t] : bad)
      if (n == "m.0.0") t = zeros({3, 71});
    CHECK_THROWS_WITH(resumed.load_state_dict(bad), Contains("shape"));
    CHECK(resumed.state_dict().empty());
    resumed.load_state_dict(copies);
    for (int it = 0; it < 2; ++it) {
      for (auto [p, q] : {std::pair{w, w2}, std::pair{b, b2}}) {
        const Tensor g = seeded(p.sizes(), 300 + it, 1.0, p.dtype(), device);
        p.set_grad(g);
        q.set_grad(g.clone());
      }
      opt.step();
      resumed.step();
    }
    CHECK(snapshot(opt) == snapshot(resumed));
  }
}

TEST_CASE("custom optimizer: options, groups and bad state specs", "[optim][custom]") {
  Tensor a = zeros({2}).requires_grad_(true), c = zeros({2}).requires_grad_(true);
  MomentumOps opt({a}, 0.1, 0.5);
  opt.add_param_group({c}, optim::OptimizerOptions{{"lr", 0.2}, {"beta", 0.25}});
  CHECK(opt.lr(1) == Approx(0.2));
  CHECK(opt.param_groups()[1].option("beta") == 0.25);
  CHECK(opt.param_groups()[0].option("beta") == 0.5);
  CHECK_THROWS_WITH(opt.param_groups()[0].option("gamma"), Contains("no option 'gamma'"));
  Tensor d = zeros({2}).requires_grad_(true);
  CHECK_THROWS_WITH(opt.add_param_group({d}, optim::OptimizerOptions{{"gamma", 1.0}}), Contains("unknown option"));
  optim::SGD sgd({d});
  // SGD hides the named overload (a compile error); through the base class it refuses.
  optim::Optimizer& base = sgd;
  CHECK_THROWS_WITH(base.add_param_group({zeros({1}).requires_grad_(true)}, optim::OptimizerOptions{{"lr", 1.0}}),
                    Contains("user-written"));
  struct BadName : optim::Optimizer {
    explicit BadName(std::vector<Tensor> p) : Optimizer(std::move(p), 0.1, {}) {}
    std::vector<StateSpec> state_spec(const ParamGroup&, const Tensor&) const override { return {{.name = "master"}}; }
    void update(optim::OptimizerStep&) override {}
  };
  Tensor e = zeros({2}).requires_grad_(true);
  e.set_grad(zeros({2}));
  BadName bad({e});
  CHECK_THROWS_WITH(bad.step(), Contains("C identifier"));
}

// ---- the docs/optim.md worked example ----------------------------------------

class MyLion : public hg::optim::Optimizer {
 public:
  MyLion(std::vector<hg::Tensor> params, double lr, double beta1 = 0.9, double beta2 = 0.99, double weight_decay = 0.0)
      : Optimizer(std::move(params), lr, {{"beta1", beta1}, {"beta2", beta2}, {"weight_decay", weight_decay}}) {}

 protected:
  // One f32 state tensor per parameter, its shape, zeros.
  std::vector<StateSpec> state_spec(const ParamGroup&, const hg::Tensor&) const override {
    return {{.name = "exp_avg"}};
  }
  // The parameters of one group that have a gradient, as parallel lists.
  void update(hg::optim::OptimizerStep& step) override {
    const double beta1 = step.option("beta1"), beta2 = step.option("beta2"), wd = step.option("weight_decay");
    hg::optim::Foreach f(3);  // tensor lists: parameter (f32), gradient (f32), exp_avg
    const auto p = f.load(0), g = f.load(1), m = f.load(2), lr = f.lr();
    const auto c = m * beta1 + g * (1.0 - beta1);
    f.store(0, p * (1.0 - lr * wd) - lr * sign(c));
    f.store(2, m * beta2 + g * (1.0 - beta2));
    step.apply(f, {step.params(), step.grads(), step.state("exp_avg")});  // one launch, all parameters
  }
  // Every write above goes through a masked step.apply: a skipped step writes nothing.
  SkipMode skip_mode() const override { return SkipMode::kMaskedWrites; }
};

TEST_CASE("the docs/optim.md Lion matches the library's Lion bit for bit under a GradScaler", "[optim][lion]") {
  for (Device device : test_devices()) {
    INFO(device);
    auto params = [&] {
      return std::vector<Tensor>{seeded({40, 30}, 1, 0.4, kF16, device).requires_grad_(true),
                                 seeded({30}, 2, 0.1, kF16, device).requires_grad_(true)};
    };
    std::vector<Tensor> pa = params(), pb = params();
    MyLion mine(pa, 1e-3, 0.9, 0.99, 0.1);
    optim::Lion lib(pb, {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1});
    amp::GradScaler sa({.init_scale = 64.0}), sb({.init_scale = 64.0});
    const Tensor x = seeded({30, 4}, 3, 1.0, kF16, device);
    for (int it = 0; it < 4; ++it) {
      for (auto [opt, s, p] :
           {std::tuple<optim::Optimizer*, amp::GradScaler*, std::vector<Tensor>*>{&mine, &sa, &pa}, {&lib, &sb, &pb}}) {
        opt->zero_grad();
        Tensor loss = hg::to(add(sum(relu(matmul((*p)[0], x))), sum(mul((*p)[1], (*p)[1]))), kF32);
        if (it == 2) loss = mul(loss, std::numeric_limits<double>::infinity());
        s->scale(loss).backward();
        s->step(*opt);
        s->update();
      }
      CHECK(snapshot(mine) == snapshot(lib));
    }
    CHECK(mine.steps_applied() == 3);  // iteration 2 overflowed
    CHECK(lib.steps_applied() == 3);
  }
}

// ---- Lion and Muon against PyTorch ------------------------------------------

namespace {
std::map<std::string, std::vector<float>> read_trajectory() {
  std::ifstream in(std::string(HG_SOURCE_DIR) + "/tests/optim/ref/lion_muon_trajectory.txt");
  std::map<std::string, std::vector<float>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string name;
    size_t n = 0;
    ss >> name >> n;
    std::vector<float> v(n);
    for (float& x : v) ss >> x;
    out[name] = v;
  }
  return out;
}

// The reference script's model and loss.
Tensor mlp_loss(const std::vector<Tensor>& p, const Tensor& x, const Tensor& y) {
  const Tensor h = relu(add(matmul(x, p[0].t()), p[1]));
  const Tensor d = sub(add(matmul(h, p[2].t()), p[3]), y);
  return mean(mul(d, d));
}
}  // namespace

TEST_CASE("Lion and Muon follow their PyTorch reference trajectories", "[optim][lion][muon]") {
  const auto ref = read_trajectory();
  REQUIRE(ref.count("x"));
  const std::vector<std::pair<std::string, Shape>> names{{"W1", {6, 5}}, {"b1", {6}}, {"W2", {3, 6}}, {"b2", {3}}};
  for (Device device : test_devices()) {
    for (const std::string kind : {"lion", "muon"}) {
      INFO(device << " " << kind);
      const Tensor x = from_vector(ref.at("x"), {8, 5}).to(device), y = from_vector(ref.at("y"), {8, 3}).to(device);
      std::vector<Tensor> p;
      for (const auto& [n, shape] : names) p.push_back(from_vector(ref.at(n), shape).to(device).requires_grad_(true));
      std::unique_ptr<optim::Optimizer> opt;
      if (kind == "lion") {
        opt = std::make_unique<optim::Lion>(
            p, optim::LionOptions{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1});
      } else {
        opt = std::make_unique<optim::Muon>(p, optim::MuonOptions{.lr = 0.02, .weight_decay = 0.01});
      }
      for (int step = 1; step <= 8; ++step) {
        opt->zero_grad();
        mlp_loss(p, x, y).backward();
        opt->step();
        for (size_t k = 0; k < names.size(); ++k) {
          const std::vector<float>& want = ref.at(kind + "." + std::to_string(step) + "." + names[k].first);
          std::vector<double> expected(want.begin(), want.end());
          INFO("step " << step << " " << names[k].first);
          // The f32 table row, a few roundings apart per step: PyTorch's
          // GEMMs, sums and lerp order their f32 operations differently.
          // Lion moves each weight by exactly +-lr per step, so a flipped
          // sign would show as a 2e-3 error; Muon's Newton–Schulz
          // amplifies rounding by up to ~|a| = 3.4 per iteration.
          const Tolerance tol = kind == "lion" ? Tolerance{1e-5, 1e-6} : Tolerance{1e-4, 1e-5};
          const std::string report = compare_values(values_of(p[k].cpu()), expected, tol);
          CHECK(report.empty());
          if (!report.empty()) FAIL_CHECK(report);
        }
      }
    }
  }
}

// ---- Newton–Schulz against an f64 SVD ----------------------------------------

namespace {
// One-sided Jacobi on the columns of A (m x n, row-major): A V = W with
// orthogonal columns; singular values are W's column norms.
void jacobi_svd(std::vector<double> a, int64_t m, int64_t n, std::vector<double>& w, std::vector<double>& v) {
  v.assign(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i * n + i)] = 1.0;
  auto at = [&](std::vector<double>& x, int64_t cols, int64_t r, int64_t c) -> double& {
    return x[static_cast<size_t>(r * cols + c)];
  };
  for (int sweep = 0; sweep < 60; ++sweep) {
    double off = 0;
    for (int64_t p = 0; p < n; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        double alpha = 0, beta = 0, gamma = 0;
        for (int64_t i = 0; i < m; ++i) {
          alpha += at(a, n, i, p) * at(a, n, i, p);
          beta += at(a, n, i, q) * at(a, n, i, q);
          gamma += at(a, n, i, p) * at(a, n, i, q);
        }
        if (std::fabs(gamma) < 1e-300) continue;
        off = std::max(off, std::fabs(gamma) / std::sqrt(alpha * beta + 1e-300));
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (int64_t i = 0; i < m; ++i) {
          const double ap = at(a, n, i, p), aq = at(a, n, i, q);
          at(a, n, i, p) = c * ap - s * aq;
          at(a, n, i, q) = s * ap + c * aq;
        }
        for (int64_t i = 0; i < n; ++i) {
          const double vp = at(v, n, i, p), vq = at(v, n, i, q);
          at(v, n, i, p) = c * vp - s * vq;
          at(v, n, i, q) = s * vp + c * vq;
        }
      }
    }
    if (off < 1e-15) break;
  }
  w = a;
}

// sum_j f(s_j) / s_j * W[:, j] V[:, j]^T = U diag(f(s)) V^T over s_j > 0.
template <typename F>
std::vector<double> spectral_map(const std::vector<double>& a, int64_t m, int64_t n, F f) {
  std::vector<double> w, v;
  jacobi_svd(a, m, n, w, v);
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  double smax = 0;
  std::vector<double> s(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    double ss = 0;
    for (int64_t i = 0; i < m; ++i) ss += w[static_cast<size_t>(i * n + j)] * w[static_cast<size_t>(i * n + j)];
    s[static_cast<size_t>(j)] = std::sqrt(ss);
    smax = std::max(smax, s[static_cast<size_t>(j)]);
  }
  for (int64_t j = 0; j < n; ++j) {
    const double sj = s[static_cast<size_t>(j)];
    if (sj <= 1e-12 * smax) continue;
    const double k = f(sj) / sj;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c)
        out[static_cast<size_t>(r * n + c)] +=
            k * w[static_cast<size_t>(r * n + j)] * v[static_cast<size_t>(c * n + j)];
  }
  return out;
}
}  // namespace

TEST_CASE("Newton-Schulz: the polynomial of U S V^T, close to U V^T (f64 Jacobi SVD)", "[optim][muon]") {
  for (Device device : test_devices()) {
    for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{6, 4}, {4, 9}, {8, 8}, {16, 12}}) {
      INFO(device << " " << m << "x" << n);
      const Tensor g = seeded({m, n}, static_cast<uint64_t>(m * 100 + n));
      const std::vector<double> a = values_of(g);
      double fro = 0;
      for (double x : a) fro += x * x;
      fro = std::sqrt(fro);
      // Each iteration maps every singular value s to a s + b s^3 + c s^5
      // (X X^T X = U S^3 V^T), starting from s / (||G||_F + 1e-7).
      auto phi = [&](double s) {
        double x = s / (fro + 1e-7);
        for (int k = 0; k < 5; ++k) x = 3.4445 * x - 4.7750 * x * x * x + 2.0315 * x * x * x * x * x;
        return x;
      };
      const std::vector<double> exact = spectral_map(a, m, n, phi);
      const std::vector<double> uvt = spectral_map(a, m, n, [](double) { return 1.0; });
      const Tensor o = optim::newton_schulz5(g.to(device), 5, false);
      // Five GEMM rounds in f32: the reduction row of the table.
      CHECK(compare_values(values_of(o.cpu()), exact, tolerance_for(kF32, OpKind::kReduction)).empty());
      const Tensor o16 = optim::newton_schulz5(g.to(device), 5, true);
      // bf16 iterations: a few bf16 roundings of O(1) values per step.
      CHECK(compare_values(values_of(o16.cpu()), exact, {0.0, 0.1}).empty());
      // The quintic trades exactness for speed: its singular values land in
      // roughly [0.68, 1.13] after 5 steps (modded-nanogpt), so O is U V^T
      // up to that band, never further.
      double worst = 0;
      const std::vector<double> ov = values_of(o.cpu());
      for (size_t i = 0; i < ov.size(); ++i) worst = std::max(worst, std::fabs(ov[i] - uvt[i]));
      CHECK(worst < 0.45);
    }
  }
}

// ---- under a GradScaler: skipped steps, no host syncs -------------------------

TEST_CASE("Lion and Muon under a GradScaler: injected overflows leave everything bit-identical", "[optim][amp]") {
  for (Device device : test_devices()) {
    for (const std::string kind : {"lion", "muon", "ops"}) {
      for (const DType dtype : {kF32, kF16}) {
        INFO(device << " " << kind << " " << dtype);
        auto make = [&](std::vector<Tensor> p) -> std::unique_ptr<optim::Optimizer> {
          if (kind == "lion")
            return std::make_unique<optim::Lion>(p, optim::LionOptions{.lr = 1e-3, .weight_decay = 0.1});
          if (kind == "muon") return std::make_unique<optim::Muon>(p, optim::MuonOptions{.lr = 0.02, .ns_bf16 = true});
          return std::make_unique<MomentumOps>(p, 0.01, 0.9);
        };
        const Tensor x = seeded({8, 5}, 7, 1.0, dtype, device), y = seeded({8, 3}, 8, 1.0, dtype, device);
        auto params = [&] {
          return std::vector<Tensor>{seeded({6, 5}, 1, 0.4, dtype, device).requires_grad_(true),
                                     seeded({6}, 2, 0.1, dtype, device).requires_grad_(true),
                                     seeded({3, 6}, 3, 0.4, dtype, device).requires_grad_(true),
                                     seeded({3}, 4, 0.1, dtype, device).requires_grad_(true)};
        };
        // Run A: overflows injected at iterations 1, 4, 5; run B: clean, the
        // same number of applied steps. A power-of-two scale unscales exactly,
        // so both runs apply identical updates.
        std::vector<Tensor> pa = params(), pb = params();
        auto oa = make(pa), ob = make(pb);
        amp::GradScaler sa({.init_scale = 1024.0, .growth_interval = 1000}),
            sb({.init_scale = 1024.0, .growth_interval = 1000});
        optim::LambdaLR la(*oa, {.fn = [](int64_t k) { return 1.0 / static_cast<double>(k + 1); }, .total_steps = 16});
        optim::LambdaLR lb(*ob, {.fn = [](int64_t k) { return 1.0 / static_cast<double>(k + 1); }, .total_steps = 16});
        const Tensor inf_factor = full({1}, std::numeric_limits<double>::infinity(), {.device = device});
        int applied = 0;
        for (int it = 0; it < 8; ++it) {
          const bool overflow = it == 1 || it == 4 || it == 5;
          const auto before = it >= 2 && overflow ? snapshot(*oa) : std::map<std::string, std::vector<uint32_t>>{};
#if defined(HG_WITH_CUDA)
          const auto syncs = cuda::host_sync_counts();
#endif
          oa->zero_grad();
          Tensor loss = hg::to(mlp_loss(pa, x, y), kF32);
          if (overflow) loss = mul(loss, inf_factor);
          sa.scale(loss).backward();
          sa.step(*oa);
          sa.update();
          la.step();
#if defined(HG_WITH_CUDA)
          if (device.is_cuda() && it >= 2) {
            const auto after = cuda::host_sync_counts();
            CHECK(after.device_to_host_copies == syncs.device_to_host_copies);
            CHECK(after.synchronizations == syncs.synchronizations);
          }
#endif
          if (it >= 2 && overflow) CHECK(snapshot(*oa) == before);
          if (overflow) continue;
          ++applied;
          ob->zero_grad();
          sb.scale(hg::to(mlp_loss(pb, x, y), kF32)).backward();
          sb.step(*ob);
          sb.update();
          lb.step();
        }
        CHECK(applied == 5);
        CHECK(oa->steps_applied() == 5);
        CHECK(sa.stats().steps_skipped == 3);
        // The applied-step clock: run A's schedule skipped the overflow steps too.
        for (size_t k = 0; k < pa.size(); ++k) CHECK(bits_of(pa[k]) == bits_of(pb[k]));
        const auto sna = snapshot(*oa), snb = snapshot(*ob);
        CHECK(sna == snb);
      }
    }
  }
}

TEST_CASE("LambdaLR: a user-defined schedule gives the built-in schedule's bits on both clocks", "[optim][lr]") {
  for (Device device : test_devices()) {
    for (const optim::ScheduleClock clock : {optim::ScheduleClock::kCalls, optim::ScheduleClock::kAppliedSteps}) {
      INFO(device << " clock " << static_cast<int>(clock));
      Tensor a = full({4}, 1.0, {.device = device}).requires_grad_(true);
      Tensor b = full({4}, 1.0, {.device = device}).requires_grad_(true);
      optim::SGD sa({a}, {.lr = 0.1}), sb({b}, {.lr = 0.1});
      optim::StepLR builtin(sa, {.step_size = 2, .gamma = 0.5, .clock = clock});
      optim::LambdaLR custom(sb, {.fn = [](int64_t k) { return std::pow(0.5, static_cast<double>(k / 2)); },
                                  .total_steps = 4,  // later steps hold the last factor
                                  .clock = clock});
      for (int it = 0; it < 4; ++it) {
        a.set_grad(full({4}, 1.0, {.device = device}));
        b.set_grad(full({4}, 1.0, {.device = device}));
        sa.step();
        sb.step();
        builtin.step();
        custom.step();
        CHECK(bits_of(a) == bits_of(b));
        CHECK(custom.last_lr() == builtin.last_lr());
      }
    }
  }
  Tensor c = zeros({1}).requires_grad_(true);
  optim::SGD s({c});
  CHECK_THROWS_WITH(optim::LambdaLR(s, {.fn = [](int64_t) { return 1.0; }, .total_steps = 0}), Contains("total_steps"));
  CHECK_THROWS_WITH(optim::LambdaLR(s, {.fn = [](int64_t) { return -1.0; }, .total_steps = 3}), Contains("finite"));
}

// ---- cost of the skip mechanisms (./test_optim "[.bench]") ---------------------

namespace {
// AdamW as a user would write it with Foreach: one masked launch.
class ForeachAdamW : public optim::Optimizer {
 public:
  ForeachAdamW(std::vector<Tensor> p, bool commit) : Optimizer(std::move(p), 1e-3, {}), commit_(commit) {}

 protected:
  std::vector<StateSpec> state_spec(const ParamGroup&, const Tensor&) const override {
    return {{.name = "m"}, {.name = "v"}};
  }
  void update(optim::OptimizerStep& step) override {
    optim::Foreach f(4);
    const auto p = f.load(0), g = f.load(1), m0 = f.load(2), v0 = f.load(3), lr = f.lr();
    const auto m = m0 * 0.9 + g * 0.1, v = v0 * 0.999 + (g * g) * 0.001;
    f.store(0, p * (1.0 - lr * 0.01) - lr * (m / f.bias_correction(0.9)) / (sqrt(v / f.bias_correction(0.999)) + 1e-8));
    f.store(2, m);
    f.store(3, v);
    step.apply(f, {step.params(), step.grads(), step.state("m"), step.state("v")});
  }
  SkipMode skip_mode() const override { return commit_ ? SkipMode::kCommit : SkipMode::kMaskedWrites; }

 private:
  bool commit_;
};
}  // namespace

TEST_CASE("bench: built-in fused AdamW vs a Foreach AdamW (masked writes, commit)", "[.bench]") {
  for (Device device : test_devices()) {
    for (const DType dtype : {kF32, kBF16}) {
      std::vector<Tensor> params;
      for (int k = 0; k < 8; ++k)
        params.push_back(seeded({256, 1024}, static_cast<uint64_t>(k), 0.1, dtype, device).requires_grad_(true));
      const Tensor found = zeros({1}, {.device = device});
      const Tensor inv = full({1}, 1.0 / 1024, {.device = device});
      for (int variant = 0; variant < 3; ++variant) {
        std::unique_ptr<optim::Optimizer> opt;
        if (variant == 0) opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-3});
        if (variant == 1) opt = std::make_unique<ForeachAdamW>(params, false);
        if (variant == 2) opt = std::make_unique<ForeachAdamW>(params, true);
        for (Tensor p : params) p.set_grad(seeded(p.sizes(), 9, 1.0, dtype, device));
        opt->step(inv, found);
        const int reps = 5;
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) opt->step(inv, found);
        (void)floats_of(params[0]);  // waits for the device
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
        const char* names[] = {"built-in AdamW (fused)", "Foreach AdamW, kMaskedWrites", "Foreach AdamW, kCommit"};
        WARN(device << " " << dtype << " 2.1M params: " << names[variant] << " " << ms << " ms/step");
      }
    }
  }
}
